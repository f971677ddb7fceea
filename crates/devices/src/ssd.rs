//! A flash SSD: no positioning cost; a request occupies the device for the larger of its
//! transfer time and one IOPS slot (so small requests hit the IOPS ceiling and large ones the
//! bandwidth ceiling), and completes after the larger of that and an access latency plus its
//! transfer. How requests in flight overlap is the preset's `queue_curve`: freely up to the
//! ceiling (`knee`, parallel flash), or sharing the device so that each one in flight adds its
//! slot to the others' latency (`saturating`, as virtual and throttled disks measure).
//!
//! Garbage collection (`ssd_gc.rs`): a drive in steady state (`gc = "steady"`, the default; a
//! drive in service, not fresh out of the box) writes every host byte `A` times to flash,
//! where `A` is the write amplification of uniform random writes for the drive's spare flash;
//! a write takes `A` times its device time and counts `A` times against the flash's endurance.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use serde::{Deserialize, Serialize};
use tierwise_core::Nanos;
use tierwise_core::params::parse_size;

use super::{DevOp, Model, Power, Service};
use crate::ssd_gc::Collector;

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
    /// How random IOPS grow with the requests in flight (default `knee`).
    #[serde(default, skip_serializing_if = "QueueCurve::is_knee")]
    pub queue_curve: QueueCurve,
    /// Raw flash behind `capacity`, e.g. "256GiB" (default: `capacity` in GiB instead of GB,
    /// the ~7 % spare of a consumer drive). The spare beyond the data sets the write
    /// amplification of garbage collection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nand_capacity: Option<String>,
    /// Garbage collection's cost on top of the rates above (default `steady`).
    #[serde(default, skip_serializing_if = "GcMode::is_steady")]
    pub gc: GcMode,
    /// Program/erase cycles each flash block is rated for (3,000: the MLC of its generation);
    /// the flash's life is `pe_cycles × nand_capacity` of flash writes.
    #[serde(default = "default_pe_cycles")]
    pub pe_cycles: f64,
}

/// When the drive's garbage collection amplifies writes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GcMode {
    /// From the first write: the flash was written over before (a drive in service; SNIA's
    /// performance tests precondition drives to this state). The rates are fresh-out-of-box
    /// ones, as datasheets give.
    #[default]
    Steady,
    /// Once the host has written as much as the drive's erased flash (fresh out of the box).
    Fresh,
    /// Never on top of the rates: they were measured on the drive as it is (`tierwise
    /// calibrate`'s presets), collection included.
    Measured,
}

impl GcMode {
    fn is_steady(&self) -> bool {
        *self == GcMode::Steady
    }
}

fn default_pe_cycles() -> f64 {
    3_000.0
}

/// How a drive's random IOPS grow with its queue depth `q`, given its QD1 latency `L` and
/// its IOPS ceiling `P`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum QueueCurve {
    /// `min(q / L, P)`: requests overlap freely until the ceiling (a flash drive's dies and
    /// channels work in parallel; datasheets quote QD1 latency and QD32 IOPS).
    #[default]
    Knee,
    /// `P · q / (q + P·L − 1)`: each request in flight adds its IOPS slot to the latency of
    /// the others, so IOPS approach the ceiling only slowly (what `tierwise calibrate`
    /// measures on virtual disks, whose host shares one queue; fitted at QD1 and QD32).
    Saturating,
}

impl QueueCurve {
    fn is_knee(&self) -> bool {
        *self == QueueCurve::Knee
    }
}

/// GreenDM's SSD write limit: 20 GB a day for five years.
pub const GREENDM_ENDURANCE_GB: f64 = 36_500.0;

fn greendm_endurance_gb() -> f64 {
    GREENDM_ENDURANCE_GB
}

impl SsdSpec {
    /// The raw flash in bytes.
    pub fn nand_bytes(&self) -> Result<u64, String> {
        let cap = parse_size(&self.capacity).map_err(|e| format!("capacity: {e}"))?;
        let nand = match &self.nand_capacity {
            Some(n) => parse_size(n).map_err(|e| format!("nand_capacity: {e}"))?,
            None => (cap as f64 * f64::from(1u32 << 30) / 1e9) as u64,
        };
        if nand <= cap {
            return Err(format!(
                "nand_capacity: more than the capacity ({}), the spare flash garbage collection needs",
                self.capacity
            ));
        }
        Ok(nand)
    }

    /// Checks the numbers.
    pub fn validate(&self) -> Result<u64, String> {
        let cap = parse_size(&self.capacity).map_err(|e| format!("capacity: {e}"))?;
        self.nand_bytes()?;
        for (name, v) in [
            ("read_mb_s", self.read_mb_s),
            ("write_mb_s", self.write_mb_s),
            ("read_iops", self.read_iops),
            ("write_iops", self.write_iops),
            ("endurance_gb", self.endurance_gb),
            ("pe_cycles", self.pe_cycles),
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

/// Requests that share a `saturating` drive at once, at most: a SATA drive's NCQ depth (and
/// the QD32 that calibrate fits the curve at).
const SHARED_DEPTH: u64 = 31;

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
    curve: QueueCurve,
    /// Under `saturating`: completion times and slots of the requests in flight.
    in_flight: BinaryHeap<Reverse<(u64, u64)>>,
    /// The sum of the slots in `in_flight`.
    in_flight_slots: u64,
    /// Garbage collection: the flash each write costs.
    gc: Collector,
}

impl Ssd {
    /// Builds the model.
    pub fn new(spec: &SsdSpec) -> Result<Ssd, String> {
        let capacity = spec.validate()?;
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
            curve: spec.queue_curve,
            in_flight: BinaryHeap::new(),
            in_flight_slots: 0,
            gc: Collector::new(spec, capacity)?,
        })
    }

    /// Under `saturating`: what the requests still in flight at `start` add to a new one's
    /// latency (their slots, as many as a drive's queue holds), and the new one joins them.
    fn shared_wait(&mut self, start: u64, occupancy: u64, own: u64) -> u64 {
        while let Some(&Reverse((done, slot))) = self.in_flight.peek() {
            if done > start {
                break;
            }
            self.in_flight.pop();
            self.in_flight_slots -= slot;
        }
        // Beyond the queue's depth, requests wait their turn instead of sharing: so a device
        // offered more than its ceiling still completes them at the ceiling, in bounded time.
        let shared = self.in_flight_slots.min(SHARED_DEPTH * occupancy);
        let latency = own + shared;
        self.in_flight.push(Reverse((start + latency, occupancy)));
        self.in_flight_slots += occupancy;
        latency
    }
}

impl Model for Ssd {
    #[inline]
    fn service(&mut self, start: Nanos, op: DevOp, addr: u64, len: u64) -> Service {
        let i = usize::from(op != DevOp::Read);
        let xfer = ((u128::from(len) * u128::from(self.ns_per_byte[i])) >> FP) as u64;
        let mut occupancy = xfer.max(self.slot_ns[i]);
        if op == DevOp::Write {
            // Collection copies live pages before it can program: the write's flash work
            // grows with the amplification.
            let amplification = self.gc.write(addr, len);
            if amplification > 1.0 {
                occupancy = (occupancy as f64 * amplification) as u64;
            }
        }
        let mut latency = occupancy.max(self.latency_ns[i] + xfer);
        if self.curve == QueueCurve::Saturating {
            latency = self.shared_wait(start.0, occupancy, latency);
        }
        Service { occupancy: Nanos(occupancy), latency: Nanos(latency) }
    }
    fn power(&self) -> Power {
        self.power
    }
    fn usd_per_gb(&self) -> f64 {
        self.usd_per_gb
    }
    fn take_flash_write_bytes(&mut self) -> Option<u64> {
        Some(self.gc.take_flash_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Device;

    fn drive(curve: QueueCurve) -> SsdSpec {
        SsdSpec {
            description: String::new(),
            capacity: "10GB".into(),
            read_mb_s: 4096.0,
            write_mb_s: 4096.0,
            read_iops: 40_000.0,
            write_iops: 40_000.0,
            read_latency_us: 199.0,
            write_latency_us: 199.0,
            active_w: 1.0,
            idle_w: 0.5,
            usd_per_gb: 1.0,
            endurance_gb: GREENDM_ENDURANCE_GB,
            queue_curve: curve,
            nand_capacity: None,
            gc: GcMode::Steady,
            pe_cycles: 3_000.0,
        }
    }

    /// Random 4 KiB reads from `depth` clients that each send the next on completion.
    fn closed_loop_iops(spec: &SsdSpec, depth: usize) -> f64 {
        let mut dev = Device::new(Box::new(Ssd::new(spec).unwrap()), None);
        let mut pending: BinaryHeap<Reverse<Nanos>> = (0..depth).map(|_| Reverse(Nanos::ZERO)).collect();
        let n = 20_000;
        let mut last = Nanos::ZERO;
        for i in 0..n {
            let Reverse(now) = pending.pop().unwrap();
            last = now;
            pending.push(Reverse(dev.submit(now, DevOp::Read, i * 4096, 4096)));
        }
        n as f64 / (last.0 as f64 / 1e9)
    }

    #[test]
    fn the_queue_curves_follow_their_formulas() {
        // QD1 latency L = 199 µs + 1 µs of transfer = 200 µs; ceiling P = 40,000.
        let (l, p) = (200e-6, 40_000.0);
        for q in [1usize, 4, 32] {
            let qf = q as f64;
            let knee = closed_loop_iops(&drive(QueueCurve::Knee), q);
            let want = (qf / l).min(p);
            assert!((knee / want - 1.0).abs() < 0.02, "knee at QD{q}: {knee:.0} for {want:.0}");
            let sat = closed_loop_iops(&drive(QueueCurve::Saturating), q);
            let want = p * qf / (qf + p * l - 1.0);
            assert!((sat / want - 1.0).abs() < 0.02, "saturating at QD{q}: {sat:.0} for {want:.0}");
        }
    }

    #[test]
    fn writes_to_a_full_drive_in_steady_state_pay_garbage_collection() {
        // Random 4 KiB writes, one after another's slot, over `span` of the 10 GB drive.
        let write_iops = |span: u64, steady: bool| {
            let gc = if steady { GcMode::Steady } else { GcMode::Fresh };
            let mut dev = Device::new(Box::new(Ssd::new(&SsdSpec { gc, ..drive(QueueCurve::Knee) }).unwrap()), None);
            let mut s = 7u64;
            let n = 10_000u64;
            let mut last = Nanos::ZERO;
            // The highest address first: the live data is the span from the start.
            dev.submit(Nanos::ZERO, DevOp::Write, span - 4096, 4096);
            for _ in 0..n {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                last = dev.submit(Nanos::ZERO, DevOp::Write, (s >> 11) % (span / 4096) * 4096, 4096);
            }
            let st = dev.finish(last);
            (n as f64 / last.as_secs_f64(), st.flash_write_bytes as f64 / st.write_bytes as f64)
        };
        let (full, wa_full) = write_iops(10_000_000_000, true);
        let (quarter, wa_quarter) = write_iops(2_500_000_000, true);
        let (fresh, wa_fresh) = write_iops(10_000_000_000, false);
        // 10 GB of data on 10 GiB of flash: the ~7 % spare's amplification of 7.5.
        assert!((wa_full - 7.46).abs() < 0.05, "{wa_full}");
        assert!((full * wa_full / 40_000.0 - 1.0).abs() < 0.02, "{full} IOPS at {wa_full}");
        assert!(wa_quarter < 1.02 && (quarter / 40_000.0 - 1.0).abs() < 0.02, "{quarter} at {wa_quarter}");
        assert!(wa_fresh == 1.0 && (fresh / 40_000.0 - 1.0).abs() < 0.02, "{fresh} at {wa_fresh}");
        // Reads pay nothing.
        assert!((closed_loop_iops(&drive(QueueCurve::Knee), 32) / 40_000.0 - 1.0).abs() < 0.02);
    }

    #[test]
    fn a_saturating_drive_offered_more_than_its_ceiling_serves_at_it() {
        let spec = drive(QueueCurve::Saturating);
        let mut ssd = Ssd::new(&spec).unwrap();
        let mut dev = Device::new(Box::new(ssd.clone()), None);
        // 100,000 requests at once: the slots space them 25 µs apart, and each waits for at
        // most 31 others' slots on top of its own 200 µs.
        let n = 100_000u64;
        let mut last = Nanos::ZERO;
        for i in 0..n {
            last = last.max(dev.submit(Nanos::ZERO, DevOp::Read, i * 4096, 4096));
        }
        let bound = n * 25_000 + 200_000 + 31 * 25_000;
        assert!(last.0 <= bound + 1_000, "{} ns for {n} requests (bound {bound})", last.0);
        // The in-flight set stays as small as the latency allows.
        for i in 0..n {
            ssd.service(Nanos(i * 25_000), DevOp::Read, 0, 4096);
        }
        assert!(ssd.in_flight.len() < 64, "{} in flight", ssd.in_flight.len());
    }

    #[test]
    fn a_preset_names_its_curve_and_knee_is_the_default() {
        let text = "capacity = \"1GB\"\nread_mb_s = 1.0\nwrite_mb_s = 1.0\nread_iops = 1.0\nwrite_iops = 1.0\n\
                    read_latency_us = 1.0\nwrite_latency_us = 1.0\nactive_w = 1.0\nidle_w = 1.0\nusd_per_gb = 1.0\n";
        let spec: SsdSpec = toml::from_str(text).unwrap();
        assert_eq!(spec.queue_curve, QueueCurve::Knee);
        let spec: SsdSpec = toml::from_str(&format!("{text}queue_curve = \"saturating\"\n")).unwrap();
        assert_eq!(spec.queue_curve, QueueCurve::Saturating);
        let err = toml::from_str::<SsdSpec>(&format!("{text}queue_curve = \"linear\"\n")).unwrap_err();
        assert!(err.to_string().contains("knee"), "{err}");
    }
}
