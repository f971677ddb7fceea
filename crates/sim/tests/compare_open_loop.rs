//! `compare`'s latency table replays the trace open loop at a speed HDD-only carries: measured,
//! not only estimated. The bundled TPC-C trace lasts 0.136 s; it was rated as if its requests
//! came over 10 s and replayed 7x overloaded (HDD-only mean 135 s under "not saturated").

use std::path::Path;

use tierwise_sim::compare::ProgressFactory;
use tierwise_sim::jobs::{CompareJob, ModelOptions, TraceOptions, run_compare};
use tierwise_sim::sim::{NoProgress, Progress};

struct Quiet;
impl ProgressFactory for Quiet {
    fn make(&self, _: &str) -> Box<dyn Progress + Send> {
        Box::new(NoProgress)
    }
}

#[test]
fn the_open_loop_speed_leaves_hdd_only_unsaturated() {
    let trace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/traces/tpcc_unverified.mqsim_ascii.trace");
    let job = CompareJob {
        trace,
        archs: vec!["cache:mode=write-back".into()],
        ssd: vec!["25%".into()],
        trace_options: TraceOptions::default(),
        model: ModelOptions::default(),
        threads: 2,
        allow_oversize: false,
    };
    let out = run_compare(&job, &Quiet).unwrap();
    let note = out.latency_note.unwrap();
    let latency = out.latency.unwrap();
    let hdd = latency.rows.iter().find(|r| r.report.arch == "hdd-only").unwrap();
    // Unsaturated: a mean response of a few service times, not seconds.
    assert!(hdd.report.latency.mean_us < 100_000.0, "HDD-only mean {} µs; {note}", hdd.report.latency.mean_us);
    assert!(note.contains("busy") && !note.contains("still queued"), "{note}");
    // Cost per IOPS only where IOPS is what the configuration serves: closed loop. Open loop
    // serves the offered load, so every architecture would look alike but for its capex.
    for r in &latency.rows {
        assert_eq!(r.report.cost.usd_per_iops, 0.0, "{} open loop", r.report.arch);
        assert!(r.report.cost.capex_usd > 0.0);
    }
    for r in &out.throughput.rows {
        assert!(r.report.cost.usd_per_iops > 0.0, "{} closed loop", r.report.arch);
    }
}
