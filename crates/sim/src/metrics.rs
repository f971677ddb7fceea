//! Run metrics: a log-linear latency histogram and the report of one simulation, with the
//! derived figures of the seed papers (GreenDM's endurance in eu, HCA's XCRTA/HCRTA/XCIOPS/
//! BDRTA/HCDRTA, cost per I/O).

use serde::{Deserialize, Serialize};
use tierwise_core::EngineStats;

use crate::device::DeviceStats;

const SUB_BITS: u32 = 5;
const SUB: usize = 1 << SUB_BITS;

/// Latency histogram: 32 linear sub-buckets per power of two (at most about 3 % error), exact
/// count, mean and maximum. Fixed size, no allocation when recording.
#[derive(Clone, Debug)]
pub struct Histogram {
    counts: Vec<u64>,
    n: u64,
    sum: u128,
    max: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram { counts: vec![0; 60 * SUB], n: 0, sum: 0, max: 0 }
    }
}

#[inline]
fn bucket(v: u64) -> usize {
    if v < SUB as u64 {
        return v as usize;
    }
    let msb = 63 - v.leading_zeros();
    let shift = msb - SUB_BITS;
    let sub = ((v >> shift) as usize) & (SUB - 1);
    ((shift + 1) as usize) * SUB + sub
}

fn bucket_value(b: usize) -> u64 {
    if b < SUB {
        return b as u64;
    }
    let shift = (b / SUB - 1) as u32;
    let sub = (b % SUB) as u64;
    // Midpoint of the bucket.
    ((SUB as u64 + sub) << shift) + ((1u64 << shift) >> 1)
}

impl Histogram {
    /// Records one value (nanoseconds).
    #[inline]
    pub fn record(&mut self, v: u64) {
        self.counts[bucket(v)] += 1;
        self.n += 1;
        self.sum += u128::from(v);
        self.max = self.max.max(v);
    }

    /// Number of values.
    pub fn count(&self) -> u64 {
        self.n
    }

    /// Mean (exact).
    pub fn mean(&self) -> f64 {
        if self.n == 0 { 0.0 } else { self.sum as f64 / self.n as f64 }
    }

    /// Maximum (exact).
    pub fn max(&self) -> u64 {
        self.max
    }

    /// The value below which a fraction `q` of values fall (bucket midpoint, capped at max).
    pub fn quantile(&self, q: f64) -> u64 {
        if self.n == 0 {
            return 0;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.n as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (b, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return bucket_value(b).min(self.max);
            }
        }
        self.max
    }

    /// Adds another histogram.
    pub fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        self.n += other.n;
        self.sum += other.sum;
        self.max = self.max.max(other.max);
    }

    /// Summary in microseconds.
    pub fn summary(&self) -> Latency {
        let us = |ns: f64| ns / 1e3;
        Latency {
            count: self.n,
            mean_us: us(self.mean()),
            p50_us: us(self.quantile(0.50) as f64),
            p95_us: us(self.quantile(0.95) as f64),
            p99_us: us(self.quantile(0.99) as f64),
            max_us: us(self.max as f64),
        }
    }
}

/// Response-time summary.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    /// Requests measured.
    pub count: u64,
    /// Mean, µs.
    pub mean_us: f64,
    /// Median, µs.
    pub p50_us: f64,
    /// 95th percentile, µs.
    pub p95_us: f64,
    /// 99th percentile, µs.
    pub p99_us: f64,
    /// Maximum, µs.
    pub max_us: f64,
}

/// Per-level shares of accesses (RAM, SSD, HDD): HCA's RHR, SHR, DHR.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HitRatios {
    /// Served from RAM.
    pub ram: f64,
    /// Served from the SSD.
    pub ssd: f64,
    /// Served from the HDD.
    pub hdd: f64,
}

impl HitRatios {
    /// Shares of `counts` (ram, ssd, hdd).
    pub fn of(counts: [u64; 3]) -> HitRatios {
        let n: u64 = counts.iter().sum();
        if n == 0 {
            return HitRatios::default();
        }
        let f = |c: u64| c as f64 / n as f64;
        HitRatios { ram: f(counts[0]), ssd: f(counts[1]), hdd: f(counts[2]) }
    }
}

/// GreenDM's endurance model: reductions over the run in eu (1,000,000 = a new device).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Endurance {
    /// SSD: (bytes written + bytes read × read weight) / limit × 10^6.
    pub ssd_eu: f64,
    /// HDD: start/stop cycles / limit × 10^6.
    pub hdd_eu: f64,
    /// The read weight used (GreenDM: 1/10 or 1/100).
    pub read_weight: f64,
    /// SSD write limit in bytes (GreenDM: 36,500 GB).
    pub ssd_limit_bytes: f64,
    /// HDD start/stop limit (GreenDM: 300,000).
    pub hdd_start_stop_limit: f64,
    /// SSD flash wear: bytes programmed to flash (garbage collection's copies included) /
    /// (P/E cycles × raw flash) × 10^6, in eu.
    #[serde(default)]
    pub ssd_flash_eu: f64,
    /// SSD write amplification over the run: flash bytes programmed per byte written (0: no
    /// writes).
    #[serde(default)]
    pub ssd_write_amplification: f64,
}

/// Cost of the configuration.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Cost {
    /// Purchase cost of the SSD share and of HDD space for the data, USD.
    pub capex_usd: f64,
    /// Cost per I/O per second (capex / IOPS), USD — HCA's cost per I/O.
    pub usd_per_iops: f64,
}

/// HCA's derived metrics (its equations 1–5), response times in µs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HcaMetrics {
    /// Extended-cache RTA = SSD RTA × SHR.
    pub xcrta_us: f64,
    /// Hybrid-cache RTA = RHR × DRAM latency + SHR × XCRTA (as printed in the paper).
    pub hcrta_us: f64,
    /// Extended-cache IOPS = SSD IOPS × SHR.
    pub xciops: f64,
    /// Baseline disk RTA = baseline DHR (1, no cache) × disk RTA.
    pub bdrta_us: f64,
    /// Hybrid-cache disk RTA = hybrid DHR × disk RTA.
    pub hcdrta_us: f64,
}

/// Everything one simulation measured.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct SimReport {
    /// The build that computed it (see [`crate::stamp`]); empty in files written before builds
    /// were recorded.
    #[serde(default)]
    pub build: String,
    /// Architecture spec.
    pub arch: String,
    /// Trace file.
    pub trace: String,
    /// Trace format.
    pub format: String,
    /// Object mode label.
    pub objects: String,
    /// Timing label (`none`, `open(x1)`, `closed(32)`).
    pub timing: String,
    /// The device presets (`hdd NAME, ssd NAME, ram NAME`).
    #[serde(default)]
    pub devices: String,
    /// SSD bytes given to the architecture.
    pub ssd_bytes: u64,
    /// Unique bytes the trace touches (in objects of the chosen mode), when computed.
    pub footprint_bytes: Option<u64>,
    /// Trace requests replayed.
    pub requests: u64,
    /// Of which reads.
    pub reads: u64,
    /// Of which writes.
    pub writes: u64,
    /// Bytes read.
    pub read_bytes: u64,
    /// Bytes written.
    pub write_bytes: u64,
    /// Requests dropped (size 0).
    pub dropped: u64,
    /// Malformed lines skipped.
    pub skipped_lines: u64,
    /// Engine accesses (blocks or objects).
    pub accesses: u64,
    /// Requests whose every piece was served without the HDD.
    pub request_hits: u64,
    /// Requests with at least one piece served by the HDD (libCacheSim's misses in lcs mode).
    pub request_misses: u64,
    /// Shares of reads per level.
    pub read_hit: HitRatios,
    /// Shares of all data accesses per level (RHR, SHR, DHR).
    pub access_hit: HitRatios,
    /// Response times (timed runs).
    pub latency: Latency,
    /// Simulated seconds from the first arrival to the last completion.
    pub duration_s: f64,
    /// Requests per simulated second.
    pub iops: f64,
    /// MB (10^6) per simulated second.
    pub mb_s: f64,
    /// Engine counters (promotions, demotions, copies, write-backs, invalidations, bytes moved).
    pub engine: EngineStats,
    /// Counters particular to the architecture (cancelled promotions, buffered writes, ...).
    pub arch_counters: std::collections::BTreeMap<String, u64>,
    /// HDD statistics.
    pub hdd: DeviceStats,
    /// SSD statistics.
    pub ssd: DeviceStats,
    /// Total energy, J.
    pub energy_j: f64,
    /// Mean power, W.
    pub mean_power_w: f64,
    /// Endurance reductions.
    pub endurance: Endurance,
    /// Cost.
    pub cost: Cost,
    /// HCA metrics.
    pub hca: HcaMetrics,
    /// Objects tracked by the engine at the end.
    pub objects_tracked: u64,
    /// Engine heap bytes at the end.
    pub engine_memory_bytes: u64,
    /// Wall-clock seconds the simulation took.
    pub wall_s: f64,
    /// Notes (timing changes, approximations).
    pub notes: Vec<String>,
}

impl SimReport {
    /// libCacheSim-style miss ratio over requests.
    pub fn miss_ratio(&self) -> f64 {
        let n = self.request_hits + self.request_misses;
        if n == 0 { 0.0 } else { self.request_misses as f64 / n as f64 }
    }

    /// Promotions + copies (data moved up).
    pub fn moves_up(&self) -> u64 {
        use tierwise_core::WorkKind::*;
        self.engine.done(Promote) + self.engine.done(Copy)
    }

    /// Demotions + write-backs (data moved down).
    pub fn moves_down(&self) -> u64 {
        use tierwise_core::WorkKind::*;
        self.engine.done(Demote) + self.engine.done(Writeback)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_quantiles_within_bucket_error() {
        let mut h = Histogram::default();
        for v in 1..=100_000u64 {
            h.record(v * 10);
        }
        assert_eq!(h.count(), 100_000);
        assert!((h.mean() - 500_005.0).abs() < 1e-6);
        for (q, want) in [(0.5, 500_000.0), (0.95, 950_000.0), (0.99, 990_000.0)] {
            let got = h.quantile(q) as f64;
            assert!((got / want - 1.0).abs() < 0.035, "q{q}: {got} vs {want}");
        }
        assert_eq!(h.max(), 1_000_000);
        assert_eq!(h.quantile(1.0), 1_000_000);
        let mut small = Histogram::default();
        small.record(3);
        assert_eq!(small.quantile(0.5), 3);
        assert_eq!(Histogram::default().quantile(0.5), 0);
    }

    #[test]
    fn bucket_values_are_monotonic() {
        let mut last = 0;
        for b in 0..60 * SUB {
            let v = bucket_value(b);
            assert!(v >= last, "bucket {b}");
            last = v;
        }
        for v in [0u64, 1, 31, 32, 33, 1000, 1 << 40, u64::MAX / 2] {
            let b = bucket(v);
            let mid = bucket_value(b) as f64;
            assert!(v < 64 || (mid / v as f64 - 1.0).abs() < 0.04, "{v} -> {mid}");
        }
    }
}
