//! A hard disk: seek time by distance, rotational position, media transfer, a read-ahead
//! buffer, one request at a time (queueing and NCQ reordering live in `queue.rs`).
//!
//! Geometry: a track holds what passes under the head in one rotation at the zone's sustained
//! read rate (`track_bytes = read_mb_s * 60 / rpm`: 1.05 MB for the WD5000AAKS's outer zone at
//! 126 MB/s and 7200 rpm; zones toward the hub hold less and transfer slower, down to
//! `inner_rate_ratio` of the preset's rates, `hdd_zones.rs`); the platter angle of byte `x` is
//! `((x − zone start) mod track_bytes) / track_bytes` and the platter turns with simulated
//! time. So a request that starts where the previous one ended pays nothing, a short forward
//! skip pays the time for the gap to pass under the head, and a request that arrives late waits
//! for its sector to come round again — as on a real drive.
//!
//! Seek: none within about one track (`|d| <= track_bytes`, a head or track switch that the
//! rotational wait covers); otherwise `t2t + k * sqrt(d / capacity)`, the usual square-root
//! law, followed by the rotational wait for the target sector. `k` is derived from the preset's
//! random 4 KiB IOPS at queue depth 1: for uniformly random requests over the whole disk the
//! mean of `sqrt(d / capacity)` is 8/15 and the mean rotational wait is half a rotation, so the
//! mean seek equals `1/iops - half a rotation - transfer`. Reads and writes have their own
//! mean (writes settle longer).
//!
//! Read-ahead: after a read the drive keeps reading the following sectors into its buffer
//! while idle (up to `readahead_kb`); a read that the buffer holds costs the command overhead
//! and the interface transfer only. When the head moves elsewhere, what was read ahead stays
//! as one of `read_segments` segments (oldest dropped first); a write to the platters drops
//! the segments it overlaps.
//!
//! Write cache (`write_cache`, on by default as SATA drives ship and Linux leaves them; `false`
//! gives media timings for every write, as `hdparm -W0` or a flush after each write): a write
//! the cache has room for completes once its data crossed the interface (command overhead +
//! transfer, as a read from the buffer). The drive writes cached data to the platters once its
//! media has had no command for as long as the mean gap between the host's commands (so a
//! command that is likely soon is not made to wait; the destage delay of US patent 7,721,051;
//! commands served from memory, as cached writes, run beside write-backs), and when the cache
//! is full. Each write-back takes, of
//! the next 16 cached runs ascending from the head (wrapping), the one it reaches soonest,
//! touching writes merged, at most 512 KiB per transfer (`hdd_write_cache.rs`); a command that
//! arrives while one is under way waits for it to end. A write that finds the cache full
//! waits for write-backs to make room; a write larger than the cache goes to the platters. A
//! FLUSH CACHE writes everything back and completes after ([`Model::flush`]). Reads of cached
//! data come from the cache. Drives do not publish how their buffer is split: the default gives
//! half of a 16 MB buffer to writes (`write_cache_kb`) and half to 16 read segments of 512 KiB
//! (`read_segments`: the read-ahead of the last 16 places read stays, until a write covers it).

use serde::{Deserialize, Serialize};
use tierwise_core::Nanos;
use tierwise_core::params::parse_size;

use super::{DevOp, Model, Power, Service};
use crate::hdd_write_cache::WriteCache;
use crate::hdd_zones::Zones;

/// HDD parameters (a preset's fields).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HddSpec {
    /// What the preset models.
    #[serde(default)]
    pub description: String,
    /// Capacity, e.g. "500GB".
    pub capacity: String,
    /// Spindle speed.
    pub rpm: f64,
    /// Sustained read transfer rate, MB/s (10^6 bytes).
    pub read_mb_s: f64,
    /// Sustained write transfer rate, MB/s.
    pub write_mb_s: f64,
    /// The innermost zone's transfer rate as a fraction of the outer zone's (the rates
    /// above): 1 is a flat disk, about 0.5 a 3.5" drive (`hdd_zones.rs`).
    #[serde(default = "default_inner_rate_ratio")]
    pub inner_rate_ratio: f64,
    /// Random 4 KiB read IOPS over the whole disk (calibrates the read seek).
    pub random_read_iops: f64,
    /// Random 4 KiB write IOPS (calibrates the write seek).
    pub random_write_iops: f64,
    /// Track-to-track (minimum) seek, ms.
    pub track_to_track_ms: f64,
    /// Read-ahead (look-ahead) buffer, KiB: what the drive reads past a read while idle.
    #[serde(default = "default_readahead_kb")]
    pub readahead_kb: f64,
    /// Commands the drive queues and reorders (NCQ); 1 disables reordering.
    #[serde(default = "default_ncq_depth")]
    pub ncq_depth: u32,
    /// Read segments of the drive's buffer (the read-ahead of this many different places is
    /// kept; 1: only the last read's).
    #[serde(default = "default_read_segments")]
    pub read_segments: u32,
    /// Whether the drive's volatile write cache is on (`hdparm -W1`, the default).
    #[serde(default = "default_write_cache")]
    pub write_cache: bool,
    /// Write cache size, KiB (the datasheet's buffer).
    #[serde(default = "default_write_cache_kb")]
    pub write_cache_kb: f64,
    /// Watts servicing requests.
    pub active_w: f64,
    /// Watts idle, spinning.
    pub idle_w: f64,
    /// Watts in standby.
    pub standby_w: f64,
    /// Seconds to spin up.
    pub spin_up_s: f64,
    /// Average watts while spinning up.
    pub spin_up_w: f64,
    /// Default idle timeout before spinning down when spin-down is enabled, seconds.
    pub spin_down_after_s: f64,
    /// Price per GB.
    pub usd_per_gb: f64,
}

fn default_readahead_kb() -> f64 {
    512.0
}

fn default_inner_rate_ratio() -> f64 {
    1.0
}

fn default_ncq_depth() -> u32 {
    32
}

fn default_read_segments() -> u32 {
    16
}

fn default_write_cache() -> bool {
    true
}

fn default_write_cache_kb() -> f64 {
    8_192.0
}

/// The most the drive writes back in one media transfer: a command that arrives meanwhile
/// waits for at most this much (4 ms at 126 MB/s).
const WRITE_BACK_MAX: u64 = 512 << 10;

/// The cached runs, next in the sweep, among which a write-back takes the nearest.
const WRITE_BACK_CANDIDATES: usize = 16;

/// Command overhead of a read served from the drive's buffer.
const BUFFER_HIT_NS: f64 = 100_000.0;
/// Interface rate of a read served from the drive's buffer (SATA 3 Gb/s), bytes per ns.
const INTERFACE_BYTES_PER_NS: f64 = 0.3;

impl HddSpec {
    /// Checks the numbers; returns the capacity in bytes.
    pub fn validate(&self) -> Result<u64, String> {
        let cap = parse_size(&self.capacity).map_err(|e| format!("capacity: {e}"))?;
        if cap < 1 << 20 {
            return Err("capacity: at least 1 MiB".into());
        }
        for (name, v) in [
            ("rpm", self.rpm),
            ("read_mb_s", self.read_mb_s),
            ("write_mb_s", self.write_mb_s),
            ("random_read_iops", self.random_read_iops),
            ("random_write_iops", self.random_write_iops),
        ] {
            if !(v.is_finite() && v > 0.0) {
                return Err(format!("{name}: must be a positive number"));
            }
        }
        for (name, v) in [
            ("track_to_track_ms", self.track_to_track_ms),
            ("readahead_kb", self.readahead_kb),
            ("write_cache_kb", self.write_cache_kb),
            ("active_w", self.active_w),
            ("idle_w", self.idle_w),
            ("standby_w", self.standby_w),
            ("spin_up_s", self.spin_up_s),
            ("spin_up_w", self.spin_up_w),
            ("spin_down_after_s", self.spin_down_after_s),
            ("usd_per_gb", self.usd_per_gb),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(format!("{name}: must be a non-negative number"));
            }
        }
        if !(self.inner_rate_ratio > 0.0 && self.inner_rate_ratio <= 1.0) {
            return Err("inner_rate_ratio: the inner zone's rate over the outer's, above 0 and at most 1".into());
        }
        if self.ncq_depth == 0 {
            return Err("ncq_depth: at least 1".into());
        }
        let half_rot = 30.0 / self.rpm;
        for (name, iops, rate) in [
            ("random_read_iops", self.random_read_iops, self.read_mb_s),
            ("random_write_iops", self.random_write_iops, self.write_mb_s),
        ] {
            let seek = 1.0 / iops - half_rot - 4096.0 / (rate * 1e6);
            if seek * 1e3 < self.track_to_track_ms {
                return Err(format!(
                    "{name}: {iops} random 4 KiB IOPS leave no time to seek at {} rpm (at most {:.0})",
                    self.rpm,
                    1.0 / (half_rot + 4096.0 / (rate * 1e6) + self.track_to_track_ms / 1e3)
                ));
            }
        }
        Ok(cap)
    }
}

/// The HDD model.
#[derive(Clone, Debug)]
pub struct Hdd {
    capacity: u64,
    t2t_ns: f64,
    /// Seek slope (ns per unit of sqrt(d / capacity)), reads and writes.
    k_read: f64,
    k_write: f64,
    rotation_ns: f64,
    /// Track size and transfer rate by address.
    zones: Zones,
    /// The track size where the head is (no seek within it), and its read transfer time per
    /// byte (the read-ahead's pace).
    head_track_bytes: u64,
    head_read_ns_per_byte: f64,
    /// Where the last media transfer ended, and when.
    head: u64,
    head_free: Nanos,
    /// Platter phase, in rotations, that puts byte `head` under the head at `head_free`.
    phase: f64,
    /// Reciprocals, so that positioning (run for every queued command at every dispatch)
    /// needs no division.
    per_rotation_ns: f64,
    per_capacity_byte: f64,
    /// The read-ahead buffer: `[buffer_start, head + readahead)` once the drive has had time
    /// to read it; `None` after a write.
    buffer_start: Option<u64>,
    /// Segments read ahead into earlier, kept while the drive reads or writes elsewhere (a
    /// drive's segmented buffer), oldest first; at most `max_segments`.
    segments: Vec<(u64, u64)>,
    max_segments: usize,
    readahead: u64,
    /// Writes not yet on the platters (`None`: write cache off).
    write_cache: Option<WriteCache>,
    /// When the drive finished the host's last command that needed the media: it writes its
    /// cache back once the media has had no demand for `mean_gap_ns` since, or when it must.
    idle_from: Nanos,
    /// The mean gap between the starts of the host's commands, ns: the drive waits this long
    /// idle before it writes back (another command is likely sooner).
    mean_gap_ns: f64,
    last_start: Option<Nanos>,
    /// The run written back last (under way, or done and still in the buffer): reads of it
    /// come from memory too.
    written_back: (u64, u64),
    /// Media time spent writing the cache back while the host saw the drive idle, not yet
    /// reported ([`Model::take_background_ns`]).
    background_ns: u64,
    ncq_depth: u32,
    power: Power,
    usd_per_gb: f64,
}

impl Hdd {
    /// Builds the model; the spec MUST have been validated.
    pub fn new(spec: &HddSpec) -> Result<Hdd, String> {
        let capacity = spec.validate()?;
        let half_rot = 30.0 / spec.rpm;
        let t2t = spec.track_to_track_ms / 1e3;
        let slope = |iops: f64, rate: f64| {
            let mean_seek = 1.0 / iops - half_rot - 4096.0 / (rate * 1e6);
            (mean_seek - t2t) * 15.0 / 8.0 * 1e9
        };
        let rotation = 60.0 / spec.rpm;
        let zones = Zones::new(capacity, rotation, spec.read_mb_s, spec.write_mb_s, spec.inner_rate_ratio);
        let outer = *zones.outer();
        Ok(Hdd {
            capacity,
            t2t_ns: t2t * 1e9,
            k_read: slope(spec.random_read_iops, spec.read_mb_s),
            k_write: slope(spec.random_write_iops, spec.write_mb_s),
            rotation_ns: rotation * 1e9,
            zones,
            head_track_bytes: outer.track_bytes,
            head_read_ns_per_byte: outer.ns_per_byte[0],
            head: 0,
            head_free: Nanos::ZERO,
            phase: 0.0,
            per_rotation_ns: 1.0 / (rotation * 1e9),
            per_capacity_byte: 1.0 / capacity as f64,
            buffer_start: None,
            segments: Vec::new(),
            max_segments: spec.read_segments.saturating_sub(1) as usize,
            readahead: (spec.readahead_kb * 1024.0) as u64,
            write_cache: (spec.write_cache && spec.write_cache_kb >= 4.0)
                .then(|| WriteCache::new((spec.write_cache_kb * 1024.0) as u64)),
            background_ns: 0,
            written_back: (0, 0),
            idle_from: Nanos::ZERO,
            mean_gap_ns: f64::INFINITY,
            last_start: None,
            ncq_depth: spec.ncq_depth,
            power: Power {
                active_w: spec.active_w,
                idle_w: spec.idle_w,
                standby_w: spec.standby_w,
                spin_up: Nanos::from_secs_f64(spec.spin_up_s),
                spin_up_w: spec.spin_up_w,
            },
            usd_per_gb: spec.usd_per_gb,
        })
    }

    /// Capacity in bytes.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Bytes per track of the outer zone (what passes under the head in one rotation).
    pub fn track_bytes(&self) -> u64 {
        self.zones.outer().track_bytes
    }

    /// Whether a read of `[addr, addr + len)` starting at `now` is in the read-ahead buffer.
    fn buffered(&self, now: Nanos, addr: u64, len: u64) -> bool {
        let end = addr.saturating_add(len);
        self.live_segment(now).is_some_and(|(s, e)| addr >= s && end <= e)
            || self.segments.iter().any(|&(s, e)| addr >= s && end <= e)
    }

    /// The segment being read ahead into at `now`: from the last read's start to as far as the
    /// drive has read past it since.
    fn live_segment(&self, now: Nanos) -> Option<(u64, u64)> {
        let start = self.buffer_start?;
        let read_since = (now.0.saturating_sub(self.head_free.0) as f64 / self.head_read_ns_per_byte) as u64;
        Some((start, self.head + read_since.min(self.readahead)))
    }

    /// Where byte `addr` sits on its track, as a fraction of a rotation.
    #[inline]
    fn angle(&self, addr: u64) -> f64 {
        fraction(self.zones.track_position(addr))
    }

    /// The seek to `addr`, in ns.
    #[inline]
    fn seek(&self, op: DevOp, addr: u64) -> f64 {
        let dist = addr.abs_diff(self.head);
        if dist <= self.head_track_bytes {
            0.0
        } else {
            let k = if op == DevOp::Read { self.k_read } else { self.k_write };
            self.t2t_ns + k * (dist as i64 as f64 * self.per_capacity_byte).sqrt()
        }
    }

    /// Seek plus rotational wait for a media access at `addr` starting at `now`, in ns.
    fn media_positioning(&self, now: Nanos, op: DevOp, addr: u64) -> f64 {
        let seek = self.seek(op, addr);
        self.rotate(now, seek, addr)
    }

    /// `seek` plus the rotational wait after it for `addr`, in ns.
    #[inline]
    fn rotate(&self, now: Nanos, seek: f64, addr: u64) -> f64 {
        // The platter turns continuously; byte x passes under the head at angle x / track.
        let angle_now = fraction((now.0 as i64 as f64 + seek) * self.per_rotation_ns);
        // Each term is in [0, 1): adding 2 keeps the difference positive for `fraction`.
        let wait = fraction(self.angle(addr) - angle_now - self.phase + 2.0);
        seek + wait * self.rotation_ns
    }
}

/// The fractional part of a non-negative number (a truncating cast: no libm call).
#[inline]
fn fraction(x: f64) -> f64 {
    // Signed conversions are single instructions on x86-64; unsigned ones are sequences.
    x - (x as i64) as f64
}

impl Hdd {
    /// Whether a read of `[addr, addr + len)` at `now` is served from the drive's memory: the
    /// write cache or the read-ahead buffer.
    fn in_memory(&self, now: Nanos, addr: u64, len: u64) -> bool {
        let (wb, wb_len) = self.written_back;
        self.write_cache.as_ref().is_some_and(|c| c.covers(addr, len))
            || (addr >= wb && addr.saturating_add(len) <= wb + wb_len)
            || self.buffered(now, addr, len)
    }

    /// Whether the write cache takes this write without writing anything back first.
    fn cache_takes(&self, addr: u64, len: u64) -> bool {
        self.cacheable(len) && self.write_cache.as_ref().is_some_and(|c| c.fits(addr, len))
    }

    /// A media transfer starting at `from` (the media is free then); returns when it ends.
    fn transfer(&mut self, from: Nanos, op: DevOp, addr: u64, len: u64) -> Nanos {
        // The segment read ahead into stops growing and stays, the oldest making room.
        if let Some(seg) = self.live_segment(from).filter(|_| self.max_segments > 0) {
            if self.segments.len() >= self.max_segments {
                self.segments.remove(0);
            }
            self.segments.push(seg);
        }
        if op == DevOp::Write {
            let end = addr.saturating_add(len);
            self.segments.retain(|&(s, e)| e <= addr || s >= end);
        }
        let transfer = self.zones.transfer_ns(usize::from(op != DevOp::Read), addr, len);
        let t = Nanos((self.media_positioning(from, op, addr) + transfer) as u64);
        self.head = (addr + len) % self.capacity;
        let zone = self.zones.at(self.head);
        (self.head_track_bytes, self.head_read_ns_per_byte) = (zone.track_bytes, zone.ns_per_byte[0]);
        self.head_free = from.saturating_add(t);
        // The phase that puts `head` under the head when this transfer ends.
        self.phase = fraction(self.angle(self.head) - fraction(self.head_free.0 as f64 * self.per_rotation_ns) + 1.0);
        self.buffer_start = (op == DevOp::Read).then_some(addr);
        self.head_free
    }

    /// The cached run a write-back starting at `from` takes, and its positioning in ns: of the
    /// next runs in the sweep, the one the head reaches soonest (a drive orders its write-backs
    /// by positioning time, as its queued commands).
    fn nearest_write_back(&self, from: Nanos) -> Option<(f64, u64)> {
        let from = from.max(self.head_free);
        let cache = self.write_cache.as_ref()?;
        cache
            .next_runs(self.head, WRITE_BACK_CANDIDATES)
            .map(|s| (self.media_positioning(from, DevOp::Write, s), s))
            .fold(None, |best: Option<(f64, u64)>, c| if best.is_some_and(|b| b.0 <= c.0) { best } else { Some(c) })
    }

    /// Whether a write of `len` bytes goes through the write cache (it is on and large enough).
    fn cacheable(&self, len: u64) -> bool {
        self.write_cache.as_ref().is_some_and(|c| len <= c.capacity())
    }

    /// The time before a command started at `start` transfers, in ns; at least `bound` when
    /// that is cheaper to tell (a seek alone that long).
    fn command_positioning(&self, start: Nanos, op: DevOp, addr: u64, len: u64, bound: f64) -> f64 {
        let addr = if addr < self.capacity { addr } else { addr % self.capacity };
        match op {
            DevOp::Read if self.in_memory(start, addr, len) => return BUFFER_HIT_NS,
            DevOp::Write if self.cache_takes(addr, len) => return BUFFER_HIT_NS,
            _ => {}
        }
        // A write-back under way delays every media access alike.
        let from = start.max(self.head_free);
        let wait = (from.0 - start.0) as f64;
        if op == DevOp::Write && self.cacheable(len) {
            // A full cache: the write waits for a write-back to make room.
            return wait + self.nearest_write_back(from).map_or(0.0, |b| b.0) + BUFFER_HIT_NS;
        }
        let seek = self.seek(op, addr);
        // The rotational wait only adds: a seek already too long cannot win.
        if wait + seek >= bound {
            return wait + seek;
        }
        wait + self.rotate(from, seek, addr)
    }

    /// Writes the nearest cached piece ([`Hdd::nearest_write_back`]) to the platters from `from`
    /// or once the media is free; false if nothing is cached.
    fn write_back_one(&mut self, from: Nanos) -> bool {
        let from = from.max(self.head_free);
        let nearest = self.nearest_write_back(from);
        let Some((addr, len)) = nearest.and_then(|(_, s)| self.write_cache.as_mut()?.take(s, WRITE_BACK_MAX)) else {
            return false;
        };
        self.transfer(from, DevOp::Write, addr, len);
        self.written_back = (addr, len);
        true
    }

    /// The write-backs the drive started while idle before `start`.
    fn write_back_until(&mut self, start: Nanos) {
        loop {
            let from = self.head_free.max(self.idle_from.saturating_add(Nanos(self.mean_gap_ns as u64)));
            if from >= start || !self.write_back_one(from) {
                return;
            }
            // What ran past `start` delays the next command and counts as its service.
            self.background_ns += self.head_free.min(start).0 - from.0;
        }
    }

    /// Command overhead and interface transfer: a request served from the drive's memory.
    fn interface_only(len: u64) -> Nanos {
        Nanos((BUFFER_HIT_NS + len as f64 / INTERFACE_BYTES_PER_NS) as u64)
    }
}

impl Model for Hdd {
    #[inline]
    fn service(&mut self, start: Nanos, op: DevOp, addr: u64, len: u64) -> Service {
        let addr = addr % self.capacity;
        if self.write_cache.is_some() {
            self.write_back_until(start);
            // The gap between the host's commands, averaged (1/8 weight, as TCP's RTT).
            if let Some(last) = self.last_start {
                let gap = start.0.saturating_sub(last.0) as f64;
                // The first gap seen is the first mean; until then the drive writes back only
                // when it must.
                self.mean_gap_ns =
                    if self.mean_gap_ns.is_finite() { self.mean_gap_ns + (gap - self.mean_gap_ns) / 8.0 } else { gap };
            }
            self.last_start = Some(start);
        }
        // Only commands that need the media keep it from write-backs: a cached write's or a
        // buffer hit's transfer runs beside them (interface and media work independently).
        let end = match op {
            DevOp::Read if self.in_memory(start, addr, len) => start.saturating_add(Self::interface_only(len)),
            DevOp::Write if self.cacheable(len) => {
                // A full cache takes the write once write-backs made room.
                let mut waited = false;
                while !self.cache_takes(addr, len) && self.write_back_one(start) {
                    waited = true;
                }
                let ready = if waited { self.head_free.max(start) } else { start };
                if let Some(c) = self.write_cache.as_mut() {
                    c.insert(addr, len);
                }
                ready.saturating_add(Self::interface_only(len))
            }
            _ => {
                if let Some(c) = self.write_cache.as_mut() {
                    c.remove(addr, len);
                    self.written_back = (0, 0);
                }
                // A write-back under way ends first.
                let end = self.transfer(start.max(self.head_free), op, addr, len);
                self.idle_from = end;
                end
            }
        };
        let t = end.saturating_sub(start);
        Service { occupancy: t, latency: t }
    }
    fn positioning(&self, start: Nanos, op: DevOp, addr: u64, len: u64) -> Nanos {
        Nanos(self.command_positioning(start, op, addr, len, f64::INFINITY) as u64)
    }
    fn queue_depth(&self) -> u32 {
        self.ncq_depth
    }
    fn shortest_positioning(&self, start: Nanos, queued: &[(DevOp, u64, u64)]) -> usize {
        let mut best = (f64::INFINITY, 0);
        for (i, &(op, addr, len)) in queued.iter().enumerate() {
            let t = self.command_positioning(start, op, addr, len, best.0);
            if t < best.0 {
                best = (t, i);
            }
        }
        best.1
    }
    fn flush(&mut self, start: Nanos) -> Service {
        self.write_back_until(start);
        while self.write_back_one(start) {}
        let t = self.head_free.max(start).saturating_sub(start).saturating_add(Nanos(BUFFER_HIT_NS as u64));
        self.idle_from = start.saturating_add(t);
        Service { occupancy: t, latency: t }
    }
    fn take_background_ns(&mut self) -> u64 {
        std::mem::take(&mut self.background_ns)
    }
    fn power(&self) -> Power {
        self.power
    }
    fn usd_per_gb(&self) -> f64 {
        self.usd_per_gb
    }
    fn can_spin_down(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Presets;

    fn disk(knobs: &str) -> Hdd {
        Hdd::new(&Presets::builtin().hdd(&format!("wd5000aaks{knobs}")).unwrap()).unwrap()
    }

    /// Random 4 KiB addresses over the whole disk.
    fn random_addrs(n: usize, cap: u64) -> Vec<u64> {
        let mut s = 99u64;
        (0..n)
            .map(|_| {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                ((s >> 11) % (cap / 4096)) * 4096
            })
            .collect()
    }

    #[test]
    fn cached_writes_end_at_interface_speed_and_reach_the_platters_while_the_drive_is_idle() {
        let mut hdd = disk("");
        let mut t = Nanos::ZERO;
        for &a in &random_addrs(100, hdd.capacity()) {
            let s = hdd.service(t, DevOp::Write, a, 4096);
            assert!(s.latency < Nanos::from_micros(200), "cached write: {}", s.latency);
            t = t.saturating_add(s.occupancy);
        }
        // Written data reads from the drive's memory, whether written back yet or not.
        for &a in &random_addrs(100, hdd.capacity())[90..] {
            let s = hdd.service(t, DevOp::Read, a, 4096);
            assert!(s.latency < Nanos::from_micros(200), "{}", s.latency);
            t = t.saturating_add(s.occupancy);
        }
        // Ten seconds later everything is on the platters: a read pays its own access only, and
        // the write-backs took media time in one sweep, less than random writes would.
        let read = hdd.service(Nanos::from_secs(10), DevOp::Read, 7 << 30, 4096).latency;
        assert!(read < Nanos::from_millis(30), "{read}");
        assert!(hdd.write_cache.as_ref().unwrap().is_empty());
        let written_back = hdd.take_background_ns() as f64 / 1e9;
        assert!(written_back > 0.1 && written_back < 100.0 / 91.0, "write-backs took {written_back} s");
    }

    #[test]
    fn sustained_random_writes_wait_for_room_and_run_at_the_sweeps_rate() {
        let iops = |knobs: &str| {
            let mut hdd = disk(knobs);
            let addrs = random_addrs(20_000, hdd.capacity());
            let mut t = Nanos::ZERO;
            for &a in &addrs {
                t = t.saturating_add(hdd.service(t, DevOp::Write, a, 4096).occupancy);
            }
            addrs.len() as f64 / t.as_secs_f64()
        };
        let (on, off) = (iops(""), iops(":write_cache=off"));
        assert!((off / 91.0 - 1.0).abs() < 0.03, "media timings: {off}");
        // A 16 MiB cache of 4 KiB writes sorted by address: shorter seeks, far from free.
        assert!(on > 1.5 * off && on < 1000.0, "write cache on: {on} IOPS, off: {off}");
    }

    #[test]
    fn a_flush_ends_once_the_cache_is_written_back() {
        let mut hdd = disk("");
        let mut t = Nanos::ZERO;
        for &a in &random_addrs(50, hdd.capacity()) {
            t = t.saturating_add(hdd.service(t, DevOp::Write, a, 4096).occupancy);
        }
        let flush = hdd.flush(t).latency;
        assert!(flush > Nanos::from_millis(50 * 2), "{flush}");
        assert!(hdd.flush(t.saturating_add(flush)).latency <= Nanos::from_micros(100));
        // Write cache off: every write already is on the platters.
        let mut off = disk(":write_cache=off");
        let w = off.service(Nanos::ZERO, DevOp::Write, 1 << 30, 4096).latency;
        assert!(w > Nanos::from_millis(1));
        assert!(off.flush(w).latency <= Nanos::from_micros(100));
    }

    #[test]
    fn the_drive_waits_the_mean_gap_between_commands_before_it_writes_back() {
        let mut hdd = disk("");
        let addrs = random_addrs(50, hdd.capacity());
        let mut t = Nanos::ZERO;
        let mut send = |hdd: &mut Hdd, op: DevOp, a: u64| {
            let s = hdd.service(t, op, a, 4096);
            t = t.saturating_add(s.occupancy);
        };
        // Forty cached writes back to back: the media has nothing else to do, so the drive
        // starts writing back once it has been idle the mean gap (~0.1 ms).
        for &a in &addrs[..40] {
            send(&mut hdd, DevOp::Write, a);
        }
        let after_writes = hdd.write_cache.as_ref().unwrap().bytes();
        assert!(after_writes < 40 * 4096, "the drive wrote back during the burst: {after_writes} bytes left");
        // Random reads back to back (each sent as the last ends): the media never idles, so
        // reads go first and nothing more is written back.
        send(&mut hdd, DevOp::Read, addrs[40]);
        let before_reads = hdd.write_cache.as_ref().unwrap().bytes();
        for &a in &addrs[41..] {
            send(&mut hdd, DevOp::Read, a);
        }
        assert_eq!(hdd.write_cache.as_ref().unwrap().bytes(), before_reads);
        assert!(before_reads > 0);
        // A pause: it writes the rest back meanwhile.
        hdd.service(t.saturating_add(Nanos::from_secs(1)), DevOp::Read, 0, 4096);
        assert_eq!(hdd.write_cache.as_ref().unwrap().bytes(), 0);
    }

    #[test]
    fn the_read_ahead_of_several_places_stays_in_the_buffer() {
        let read = |hdd: &mut Hdd, t: &mut Nanos, addr: u64| {
            let s = hdd.service(*t, DevOp::Read, addr, 4096);
            *t = t.saturating_add(s.occupancy).saturating_add(Nanos::from_millis(5));
            s.latency
        };
        for (segments, hit) in [(16, true), (1, false)] {
            let mut hdd = disk(&format!(":read_segments={segments}"));
            let mut t = Nanos::ZERO;
            read(&mut hdd, &mut t, 1 << 30);
            read(&mut hdd, &mut t, 100 << 30);
            let again = read(&mut hdd, &mut t, (1 << 30) + 65_536);
            assert_eq!(again < Nanos::from_micros(200), hit, "{segments} segments: {again}");
            // A write over the segment drops it.
            let mut off = disk(&format!(":read_segments={segments},write_cache=off"));
            let mut t = Nanos::ZERO;
            read(&mut off, &mut t, 1 << 30);
            off.service(t, DevOp::Write, (1 << 30) + 65_536, 4096);
            t = t.saturating_add(Nanos::from_millis(30));
            assert!(read(&mut off, &mut t, (1 << 30) + 65_536) > Nanos::from_micros(200));
        }
    }

    #[test]
    fn knobs_after_the_preset_name_change_its_fields_and_bad_ones_are_named() {
        let p = Presets::builtin();
        let s = p.hdd("wd5000aaks:write_cache=off,rpm=5400,write_cache_kb=8192").unwrap();
        assert!(!s.write_cache && s.rpm == 5400.0 && s.write_cache_kb == 8192.0);
        assert!(p.hdd("wd5000aaks").unwrap().write_cache);
        for (bad, says) in [
            ("wd5000aaks:write_cache", "FIELD=VALUE"),
            ("wd5000aaks:rmp=5400", "rmp"),
            ("wd5000aaks:write_cache_kb=-1", "write_cache_kb"),
            ("nosuch:rpm=1", "nosuch"),
        ] {
            let e = p.hdd(bad).unwrap_err().to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
