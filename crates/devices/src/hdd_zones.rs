//! Zoned recording: a disk keeps its linear bit density from the rim to the hub, so a track
//! near the hub holds fewer bytes than one at the rim and the transfer rate falls with the
//! radius. Drives number their sectors from the outer edge, so the rate falls as the address
//! grows: a datasheet's sustained rate is the outer zone's, and HD Tune-style curves of 3.5"
//! drives end at about half of it (`inner_rate_ratio` = 0.5; the platter's recording band
//! runs from about half its radius to its rim).
//!
//! With equal areal density the address fraction `f` consumed from the rim to radius `r` is
//! `(R² − r²) / (R² − r_in²)`, so `r(f) / R = sqrt(1 − (1 − ρ²) f)` with `ρ = r_in / R`, and the
//! rate is proportional to `r`. The drive is cut into [`ZONES`] zones of equal size with
//! the rate at each zone's outer edge, the first at the preset's rate and the last at
//! `ρ` times it (real drives have 16 to 30 zones, each of constant track size).

/// Zones of constant track size.
pub(crate) const ZONES: usize = 16;

/// One zone: where it starts, its track size and per-byte transfer times.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Zone {
    /// First byte of the zone.
    pub(crate) start: u64,
    /// Bytes per track: what passes under the head in one rotation.
    pub(crate) track_bytes: u64,
    /// `1 / track_bytes`, so that positioning needs no division.
    pub(crate) per_track_byte: f64,
    /// Media transfer, ns per byte, for reads and writes.
    pub(crate) ns_per_byte: [f64; 2],
}

/// A disk's zones.
#[derive(Clone, Debug)]
pub(crate) struct Zones {
    zones: Vec<Zone>,
    /// `ZONES / capacity`: a byte's zone by one multiplication.
    per_zone_byte: f64,
}

impl Zones {
    /// The zones of a disk of `capacity` bytes turning once per `rotation_s`, whose outer
    /// zone transfers at `read_mb_s` / `write_mb_s` and inner zone at `inner_ratio` of that.
    pub(crate) fn new(capacity: u64, rotation_s: f64, read_mb_s: f64, write_mb_s: f64, inner_ratio: f64) -> Zones {
        let size = capacity / ZONES as u64;
        let zones = (0..ZONES)
            .map(|z| {
                let f = z as f64 / (ZONES - 1) as f64;
                let scale = (1.0 - (1.0 - inner_ratio * inner_ratio) * f).sqrt();
                let track_bytes = ((read_mb_s * scale * 1e6 * rotation_s) as u64).max(512);
                Zone {
                    start: z as u64 * size,
                    track_bytes,
                    per_track_byte: 1.0 / track_bytes as f64,
                    ns_per_byte: [1e3 / (read_mb_s * scale), 1e3 / (write_mb_s * scale)],
                }
            })
            .collect();
        Zones { zones, per_zone_byte: ZONES as f64 / capacity as f64 }
    }

    /// The index of the zone holding byte `addr`.
    #[inline]
    fn index(&self, addr: u64) -> usize {
        let z = ((addr as i64 as f64 * self.per_zone_byte) as usize).min(ZONES - 1);
        // The float's rounding may put a zone's first bytes in the one before or after.
        if addr < self.zones[z].start {
            z - 1
        } else if z + 1 < ZONES && addr >= self.zones[z + 1].start {
            z + 1
        } else {
            z
        }
    }

    /// The zone holding byte `addr`.
    #[inline]
    pub(crate) fn at(&self, addr: u64) -> &Zone {
        &self.zones[self.index(addr)]
    }

    /// Where byte `addr` sits on its track, in rotations from the zone's first byte (may be a
    /// hair below 0 or past 1 at a zone's edge, which the rotational wait's fraction absorbs):
    /// run for every queued command at every dispatch, so one multiplication finds the zone.
    #[inline]
    pub(crate) fn track_position(&self, addr: u64) -> f64 {
        let zone = &self.zones[((addr as i64 as f64 * self.per_zone_byte) as usize).min(ZONES - 1)];
        addr.wrapping_sub(zone.start) as i64 as f64 * zone.per_track_byte
    }

    /// The outer zone (the preset's rates).
    pub(crate) fn outer(&self) -> &Zone {
        &self.zones[0]
    }

    /// The time to transfer `[addr, addr + len)`, ns: each zone it crosses at its own rate.
    pub(crate) fn transfer_ns(&self, op: usize, addr: u64, len: u64) -> f64 {
        let i = self.index(addr);
        let zone = &self.zones[i];
        let end = addr.saturating_add(len);
        let next = self.zones.get(i + 1).map_or(u64::MAX, |z| z.start);
        if end <= next {
            return len as f64 * zone.ns_per_byte[op];
        }
        (next - addr) as f64 * zone.ns_per_byte[op] + self.transfer_ns(op, next, end - next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rate_falls_from_the_preset_at_the_rim_to_the_ratio_at_the_hub() {
        let cap = 500_000_000_000u64;
        let z = Zones::new(cap, 60.0 / 7200.0, 126.0, 120.0, 0.5);
        let mb_s = |addr: u64| 1e3 / z.at(addr).ns_per_byte[0];
        assert!((mb_s(0) - 126.0).abs() < 1e-9);
        assert!((mb_s(cap - 1) - 63.0).abs() < 1e-9);
        assert!((1e3 / z.at(cap - 1).ns_per_byte[1] - 60.0).abs() < 1e-9);
        // Falling all the way; the middle of the disk is nearer the rim's rate than the hub's.
        let rates: Vec<f64> = (0..ZONES as u64).map(|i| mb_s(i * (cap / ZONES as u64))).collect();
        assert!(rates.windows(2).all(|w| w[1] < w[0]), "{rates:?}");
        assert!(mb_s(cap / 2) > 94.5, "{}", mb_s(cap / 2));
        // A zone's first byte is in it.
        for i in 1..ZONES as u64 {
            let start = i * (cap / ZONES as u64);
            assert_eq!(z.at(start).start, start);
            assert_eq!(z.at(start - 1).start, start - cap / ZONES as u64);
        }
        // A transfer across a boundary pays each side's rate.
        let b = cap / ZONES as u64;
        let across = z.transfer_ns(0, b - 4096, 8192);
        assert!((across - 4096.0 * (z.at(b - 1).ns_per_byte[0] + z.at(b).ns_per_byte[0])).abs() < 1e-6);
    }

    #[test]
    fn a_ratio_of_one_is_a_flat_disk() {
        let z = Zones::new(1 << 30, 60.0 / 7200.0, 100.0, 100.0, 1.0);
        assert_eq!(z.at(0).track_bytes, z.at((1 << 30) - 1).track_bytes);
    }
}
