//! What the main job concludes: the trace's busiest stretch (to pick an open-loop replay speed
//! at which HDD-only is not saturated), and a one-line verdict per SSD size.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};
use tierwise_core::arch::CostClass;

use crate::compare::Comparison;
use crate::objects::{Mapper, ObjectMode};
use crate::sim::FoldHash;
use crate::trace::{Trace, TraceError};

/// Window for the peak request rate.
pub const RATE_WINDOW_NS: u64 = 10_000_000_000;
/// Window for the burst footprint.
pub const BURST_WINDOW_NS: u64 = 60_000_000_000;
/// Share of HDD-only's closed-loop throughput the open-loop replay may offer at its peak.
pub const TARGET_LOAD: f64 = 0.7;

/// The busiest stretches of a trace.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Burst {
    /// Highest request rate over any 10-second window, requests per second.
    pub peak_iops: f64,
    /// Most distinct bytes touched within one minute.
    pub minute_bytes: u64,
    /// Whether the trace has timestamps.
    pub timed: bool,
}

/// One pass over `trace`: its peak 10-second request rate and the distinct bytes of its
/// busiest minute (windows start at each minute boundary of the trace's own clock).
pub fn busiest(trace: &mut Trace, mode: ObjectMode) -> Result<Burst, TraceError> {
    let mapper = Mapper::new(mode, trace.info().object_trace);
    let fixed = mapper.mode().object_size();
    let mut b = Burst { timed: trace.info().has_time, ..Burst::default() };
    let mut recent: VecDeque<u64> = VecDeque::new();
    let mut minute: Option<u64> = None;
    let mut seen: hashbrown::HashMap<u64, u64, FoldHash> = hashbrown::HashMap::with_hasher(FoldHash);
    let (mut first, mut last, mut peak_count) = (None::<u64>, 0u64, 0usize);
    trace.for_each(u64::MAX, |rec| -> Result<(), TraceError> {
        let t = rec.time_ns;
        first.get_or_insert(t);
        last = last.max(t);
        recent.push_back(t);
        while recent.front().is_some_and(|&f| f + RATE_WINDOW_NS <= t) {
            recent.pop_front();
        }
        peak_count = peak_count.max(recent.len());
        let m = t / BURST_WINDOW_NS;
        if minute != Some(m) {
            b.minute_bytes = b.minute_bytes.max(seen.values().sum());
            seen.clear();
            minute = Some(m);
        }
        mapper.split(rec, |p| {
            seen.entry(p.req.obj.0).or_insert(if fixed != 0 { fixed } else { p.req.len });
        });
        Ok(())
    })?;
    b.minute_bytes = b.minute_bytes.max(seen.values().sum());
    // A trace shorter than the window offers its requests in its own span, not in 10 s (a 1 s
    // trace was taken for a tenth of its rate).
    let span_ns = last.saturating_sub(first.unwrap_or(0)).clamp(1_000_000, RATE_WINDOW_NS);
    b.peak_iops = peak_count as f64 / (span_ns as f64 / 1e9);
    Ok(b)
}

/// The open-loop speed-up at which the busiest 10 seconds offer at most [`TARGET_LOAD`] of
/// what HDD-only sustains closed-loop (1 if the trace is already that light).
pub fn unsaturated_speedup(burst: &Burst, hdd_only_iops: f64) -> f64 {
    if burst.peak_iops <= 0.0 || hdd_only_iops <= 0.0 {
        return 1.0;
    }
    two_digits((TARGET_LOAD * hdd_only_iops / burst.peak_iops).min(1.0))
}

/// Two significant digits, rounded down: a speed a person can type back.
pub fn two_digits(s: f64) -> f64 {
    let digits = 10f64.powi(1 - s.log10().floor() as i32);
    ((s * digits).floor() / digits).max(1e-6)
}

/// One line per SSD size of a closed-loop comparison: the best architecture and its gain over
/// HDD-only, or why no hybrid gains.
pub fn verdicts(c: &Comparison, burst: &Burst) -> Vec<String> {
    let mut sizes: Vec<&str> = Vec::new();
    for r in &c.rows {
        if !sizes.contains(&r.size_label.as_str()) {
            sizes.push(&r.size_label);
        }
    }
    let cost = |arch: &str| {
        tierwise_core::arch_info(arch.split(':').next().unwrap_or("")).map_or(CostClass::Hybrid, |i| i.caps.cost)
    };
    sizes
        .into_iter()
        .map(|size| {
            let rows: Vec<_> = c.rows.iter().filter(|r| r.size_label == size).collect();
            let hdd = rows.iter().find(|r| cost(&r.report.arch) == CostClass::HddOnly).map(|r| r.report.iops);
            let best = rows
                .iter()
                .filter(|r| cost(&r.report.arch) == CostClass::Hybrid)
                .max_by(|a, b| a.report.iops.total_cmp(&b.report.iops));
            let ssd_bytes = rows.first().map_or(0, |r| r.report.ssd_bytes);
            match (best, hdd) {
                (Some(b), Some(h)) if h > 0.0 && b.report.iops > h => format!(
                    "SSD {size}: best {} at {:.0} IOPS, {:.2}x HDD-only ({:.0} IOPS)",
                    b.report.arch,
                    b.report.iops,
                    b.report.iops / h,
                    h
                ),
                (Some(b), Some(h)) if h > 0.0 => {
                    let why = if ssd_bytes < burst.minute_bytes {
                        format!(
                            "the busiest minute touches {}, more than the SSD holds ({})",
                            tierwise_core::Bytes(burst.minute_bytes),
                            tierwise_core::Bytes(ssd_bytes)
                        )
                    } else {
                        "the moves into the SSD cost the HDD more than the hits save".to_string()
                    };
                    format!(
                        "SSD {size}: no hybrid beats HDD-only ({:.0} IOPS); the best, {}, reaches {:.2}x: {why}",
                        h,
                        b.report.arch,
                        b.report.iops / h
                    )
                }
                _ => format!("SSD {size}: no HDD-only row to compare with"),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::CompareRow;
    use crate::metrics::SimReport;

    fn row(size: &str, arch: &str, iops: f64) -> CompareRow {
        let report = SimReport { arch: arch.into(), iops, ssd_bytes: 64 << 20, ..SimReport::default() };
        CompareRow { size_label: size.into(), size_fraction: 0.1, report }
    }

    #[test]
    fn a_verdict_names_the_best_hybrid_or_says_why_none_gains() {
        let c = Comparison {
            build: String::new(),
            trace: "t".into(),
            objects: 1,
            footprint_bytes: 1,
            rows: vec![
                row("10%", "hdd-only", 100.0),
                row("10%", "cache:mode=write-back", 250.0),
                row("10%", "ssd-only", 9000.0),
                row("50%", "hdd-only", 100.0),
                row("50%", "cache:mode=read-only", 90.0),
            ],
            notes: Vec::new(),
        };
        let burst = Burst { peak_iops: 900.0, minute_bytes: 1 << 30, timed: true };
        let v = verdicts(&c, &burst);
        assert_eq!(v[0], "SSD 10%: best cache:mode=write-back at 250 IOPS, 2.50x HDD-only (100 IOPS)");
        assert!(v[1].contains("no hybrid beats HDD-only") && v[1].contains("busiest minute touches 1GiB"), "{}", v[1]);
        let calm = Burst { minute_bytes: 1, ..burst };
        assert!(verdicts(&c, &calm)[1].contains("moves into the SSD cost"));
    }

    #[test]
    fn the_replay_speed_keeps_hdd_only_at_seventy_percent() {
        let b = Burst { peak_iops: 888.0, minute_bytes: 0, timed: true };
        assert_eq!(unsaturated_speedup(&b, 867.0), 0.68);
        assert_eq!(unsaturated_speedup(&Burst { peak_iops: 10.0, ..b }, 867.0), 1.0);
    }

    /// A trace shorter than the 10 s window offers its requests within its own span: 1,000
    /// requests over 1 s are 1,000 requests/s, not 100.
    #[test]
    fn a_short_trace_is_rated_over_its_own_span() {
        use std::sync::Arc;
        let recs: Vec<crate::trace::TraceRecord> = (0..1000u64)
            .map(|i| crate::trace::TraceRecord {
                time_ns: i * 1_000_000,
                op: crate::trace::IoOp::Read,
                volume: 0,
                offset: i * 4096,
                len: 4096,
                key: i,
            })
            .collect();
        let mut t = crate::trace::memory::memory_trace(Arc::new(recs), "short", true);
        let b = busiest(&mut t, ObjectMode::blocks(4096)).expect("read");
        assert!((b.peak_iops - 1000.0 / 0.999).abs() < 1.0, "{}", b.peak_iops);
    }
}
