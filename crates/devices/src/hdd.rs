//! A hard disk: seek time by distance, rotational position, media transfer, a read-ahead
//! buffer, one request at a time (queueing and NCQ reordering live in `queue.rs`).
//!
//! Geometry: a track holds what passes under the head in one rotation at the sustained read
//! rate (`track_bytes = read_mb_s * 60 / rpm`: 1.05 MB for the WD5000AAKS at 126 MB/s and
//! 7200 rpm); the platter angle of byte `x` is `(x mod track_bytes) / track_bytes` and the
//! platter turns with simulated time. So a request that starts where the previous one ended
//! pays nothing, a short forward skip pays the time for the gap to pass under the head, and a
//! request that arrives late waits for its sector to come round again — as on a real drive.
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
//! and the interface transfer only. A write invalidates the buffer. The drive's own volatile
//! write cache is not modelled (write timings are media timings, as with write cache off or a
//! flush after every write).

use serde::{Deserialize, Serialize};
use tierwise_core::Nanos;
use tierwise_core::params::parse_size;

use super::{DevOp, Model, Power, Service};

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

fn default_ncq_depth() -> u32 {
    32
}

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
    track_bytes: u64,
    ns_per_byte_read: f64,
    ns_per_byte_write: f64,
    /// Where the last media transfer ended, and when.
    head: u64,
    head_free: Nanos,
    /// Platter phase, in rotations, that puts byte `head` under the head at `head_free`.
    phase: f64,
    /// Reciprocals, so that positioning (run for every queued command at every dispatch)
    /// needs no division.
    per_rotation_ns: f64,
    per_track_byte: f64,
    per_capacity_byte: f64,
    /// The read-ahead buffer: `[buffer_start, head + readahead)` once the drive has had time
    /// to read it; `None` after a write.
    buffer_start: Option<u64>,
    readahead: u64,
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
        Ok(Hdd {
            capacity,
            t2t_ns: t2t * 1e9,
            k_read: slope(spec.random_read_iops, spec.read_mb_s),
            k_write: slope(spec.random_write_iops, spec.write_mb_s),
            rotation_ns: rotation * 1e9,
            track_bytes: ((spec.read_mb_s * 1e6 * rotation) as u64).max(512),
            ns_per_byte_read: 1e3 / spec.read_mb_s,
            ns_per_byte_write: 1e3 / spec.write_mb_s,
            head: 0,
            head_free: Nanos::ZERO,
            phase: 0.0,
            per_rotation_ns: 1.0 / (rotation * 1e9),
            per_capacity_byte: 1.0 / capacity as f64,
            per_track_byte: 1.0 / ((spec.read_mb_s * 1e6 * rotation) as u64).max(512) as f64,
            buffer_start: None,
            readahead: (spec.readahead_kb * 1024.0) as u64,
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

    /// Bytes per track (what passes under the head in one rotation).
    pub fn track_bytes(&self) -> u64 {
        self.track_bytes
    }

    /// Whether a read of `[addr, addr + len)` starting at `now` is in the read-ahead buffer.
    fn buffered(&self, now: Nanos, addr: u64, len: u64) -> bool {
        let Some(start) = self.buffer_start else { return false };
        let read_since = (now.0.saturating_sub(self.head_free.0) as f64 / self.ns_per_byte_read) as u64;
        let end = self.head + read_since.min(self.readahead);
        addr >= start && addr + len <= end
    }

    /// Where byte `addr` sits on its track, as a fraction of a rotation.
    #[inline]
    fn angle(&self, addr: u64) -> f64 {
        fraction(addr as i64 as f64 * self.per_track_byte)
    }

    /// The seek to `addr`, in ns.
    #[inline]
    fn seek(&self, op: DevOp, addr: u64) -> f64 {
        let dist = addr.abs_diff(self.head);
        if dist <= self.track_bytes {
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

impl Model for Hdd {
    #[inline]
    fn service(&mut self, start: Nanos, op: DevOp, addr: u64, len: u64) -> Service {
        let addr = addr % self.capacity;
        if op == DevOp::Read && self.buffered(start, addr, len) {
            let t = Nanos((BUFFER_HIT_NS + len as f64 / INTERFACE_BYTES_PER_NS) as u64);
            return Service { occupancy: t, latency: t };
        }
        let per_byte = if op == DevOp::Read { self.ns_per_byte_read } else { self.ns_per_byte_write };
        let t = Nanos((self.media_positioning(start, op, addr) + len as f64 * per_byte) as u64);
        self.head = (addr + len) % self.capacity;
        self.head_free = start.saturating_add(t);
        // The phase that puts `head` under the head when this transfer ends.
        self.phase = fraction(self.angle(self.head) - fraction(self.head_free.0 as f64 * self.per_rotation_ns) + 1.0);
        self.buffer_start = (op == DevOp::Read).then_some(addr);
        Service { occupancy: t, latency: t }
    }
    fn positioning(&self, start: Nanos, op: DevOp, addr: u64, len: u64) -> Nanos {
        let addr = if addr < self.capacity { addr } else { addr % self.capacity };
        if op == DevOp::Read && self.buffered(start, addr, len) {
            return Nanos(BUFFER_HIT_NS as u64);
        }
        Nanos(self.media_positioning(start, op, addr) as u64)
    }
    fn queue_depth(&self) -> u32 {
        self.ncq_depth
    }
    fn shortest_positioning(&self, start: Nanos, queued: &[(DevOp, u64, u64)]) -> usize {
        let mut best = (f64::INFINITY, 0);
        for (i, &(op, addr, len)) in queued.iter().enumerate() {
            let addr = if addr < self.capacity { addr } else { addr % self.capacity };
            let t = if op == DevOp::Read && self.buffered(start, addr, len) {
                BUFFER_HIT_NS
            } else {
                let seek = self.seek(op, addr);
                // The rotational wait only adds: a seek already too long cannot win.
                if seek >= best.0 {
                    continue;
                }
                self.rotate(start, seek, addr)
            };
            if t < best.0 {
                best = (t, i);
            }
        }
        best.1
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
