//! A hard disk: seek time by distance, rotational latency, media transfer, one request at a
//! time.
//!
//! Seek: zero when a request starts where the previous one ended (a sequential stream also pays
//! no rotational delay); otherwise `t2t + k * sqrt(d / capacity)`, the usual square-root law.
//! `k` is derived from the preset's random 4 KiB IOPS: for uniformly random requests over the
//! whole disk the mean of `sqrt(d / capacity)` is 8/15, so the mean seek equals
//! `1/iops - half a rotation - transfer`. Reads and writes have their own mean (writes settle
//! longer). Rotational latency is the mean, half a rotation, for deterministic replays.

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
    half_rotation: Nanos,
    ns_per_byte_read: f64,
    ns_per_byte_write: f64,
    head: u64,
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
        Ok(Hdd {
            capacity,
            t2t_ns: t2t * 1e9,
            k_read: slope(spec.random_read_iops, spec.read_mb_s),
            k_write: slope(spec.random_write_iops, spec.write_mb_s),
            half_rotation: Nanos::from_secs_f64(half_rot),
            ns_per_byte_read: 1e3 / spec.read_mb_s,
            ns_per_byte_write: 1e3 / spec.write_mb_s,
            head: 0,
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
}

impl Model for Hdd {
    #[inline]
    fn service(&mut self, op: DevOp, addr: u64, len: u64) -> Service {
        let addr = addr % self.capacity;
        let dist = addr.abs_diff(self.head);
        let positioning = if dist == 0 {
            0.0
        } else {
            let k = if op == DevOp::Read { self.k_read } else { self.k_write };
            self.t2t_ns + k * (dist as f64 / self.capacity as f64).sqrt() + self.half_rotation.0 as f64
        };
        let per_byte = if op == DevOp::Read { self.ns_per_byte_read } else { self.ns_per_byte_write };
        let t = Nanos((positioning + len as f64 * per_byte) as u64);
        self.head = (addr + len) % self.capacity;
        Service { occupancy: t, latency: t }
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
