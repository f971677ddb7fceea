//! A flash SSD: no positioning cost; a request occupies the device for the larger of its
//! transfer time and one IOPS slot (so small requests hit the IOPS ceiling and large ones the
//! bandwidth ceiling), and completes after the larger of that and an access latency plus its
//! transfer (requests overlap inside the drive, as with a deep queue).

use serde::{Deserialize, Serialize};
use tierwise_core::Nanos;
use tierwise_core::params::parse_size;

use super::{DevOp, Model, Power, Service};

/// SSD parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SsdSpec {
    /// What the preset models.
    #[serde(default)]
    pub description: String,
    /// Capacity, e.g. "240GB" (a hybrid uses only the share configured with `--ssd`).
    pub capacity: String,
    /// Read bandwidth, MB/s.
    pub read_mb_s: f64,
    /// Write bandwidth, MB/s.
    pub write_mb_s: f64,
    /// Random 4 KiB read IOPS.
    pub read_iops: f64,
    /// Random 4 KiB write IOPS.
    pub write_iops: f64,
    /// Read access latency, microseconds.
    pub read_latency_us: f64,
    /// Write access latency, microseconds.
    pub write_latency_us: f64,
    /// Watts while busy.
    pub active_w: f64,
    /// Watts idle.
    pub idle_w: f64,
    /// Price per GB.
    pub usd_per_gb: f64,
    /// Host writes the drive is rated for, GB (a datasheet's TBW × 1000); the endurance
    /// figures count wear against it. Default: GreenDM's 36,500 GB (20 GB a day for 5 years).
    #[serde(default = "greendm_endurance_gb")]
    pub endurance_gb: f64,
}

/// GreenDM's SSD write limit: 20 GB a day for five years.
pub const GREENDM_ENDURANCE_GB: f64 = 36_500.0;

fn greendm_endurance_gb() -> f64 {
    GREENDM_ENDURANCE_GB
}

impl SsdSpec {
    /// Checks the numbers.
    pub fn validate(&self) -> Result<u64, String> {
        let cap = parse_size(&self.capacity).map_err(|e| format!("capacity: {e}"))?;
        for (name, v) in [
            ("read_mb_s", self.read_mb_s),
            ("write_mb_s", self.write_mb_s),
            ("read_iops", self.read_iops),
            ("write_iops", self.write_iops),
            ("endurance_gb", self.endurance_gb),
        ] {
            if !(v.is_finite() && v > 0.0) {
                return Err(format!("{name}: must be a positive number"));
            }
        }
        for (name, v) in [
            ("read_latency_us", self.read_latency_us),
            ("write_latency_us", self.write_latency_us),
            ("active_w", self.active_w),
            ("idle_w", self.idle_w),
            ("usd_per_gb", self.usd_per_gb),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(format!("{name}: must be a non-negative number"));
            }
        }
        Ok(cap)
    }
}

/// Fixed-point scale of the per-byte transfer cost (integer arithmetic on the hot path).
const FP: u32 = 24;

/// The SSD model.
#[derive(Clone, Debug)]
pub struct Ssd {
    /// Nanoseconds per byte, scaled by 2^FP.
    ns_per_byte: [u64; 2],
    slot_ns: [u64; 2],
    latency_ns: [u64; 2],
    power: Power,
    usd_per_gb: f64,
}

impl Ssd {
    /// Builds the model.
    pub fn new(spec: &SsdSpec) -> Result<Ssd, String> {
        spec.validate()?;
        Ok(Ssd {
            ns_per_byte: [
                (1e3 / spec.read_mb_s * f64::from(1u32 << FP)).round() as u64,
                (1e3 / spec.write_mb_s * f64::from(1u32 << FP)).round() as u64,
            ],
            slot_ns: [(1e9 / spec.read_iops).round() as u64, (1e9 / spec.write_iops).round() as u64],
            latency_ns: [(spec.read_latency_us * 1e3).round() as u64, (spec.write_latency_us * 1e3).round() as u64],
            power: Power {
                active_w: spec.active_w,
                idle_w: spec.idle_w,
                standby_w: spec.idle_w,
                spin_up: Nanos::ZERO,
                spin_up_w: 0.0,
            },
            usd_per_gb: spec.usd_per_gb,
        })
    }
}

impl Model for Ssd {
    #[inline]
    fn service(&mut self, _start: Nanos, op: DevOp, _addr: u64, len: u64) -> Service {
        let i = usize::from(op != DevOp::Read);
        let xfer = ((u128::from(len) * u128::from(self.ns_per_byte[i])) >> FP) as u64;
        let occupancy = xfer.max(self.slot_ns[i]);
        let latency = occupancy.max(self.latency_ns[i] + xfer);
        Service { occupancy: Nanos(occupancy), latency: Nanos(latency) }
    }
    fn power(&self) -> Power {
        self.power
    }
    fn usd_per_gb(&self) -> f64 {
        self.usd_per_gb
    }
}
