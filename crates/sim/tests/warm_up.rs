//! `--measure-from` on block traces: the requests before it warm the cache up and are not
//! measured. Untimed, the measured window is exactly the whole run minus a run of the warm-up
//! alone (the simulator is deterministic); timed, counts, latencies, device I/O and duration
//! all start at the window.

#![expect(clippy::unwrap_used, reason = "a failing setup should stop the test loudly")]

use std::path::Path;

use tierwise_sim::metrics::SimReport;
use tierwise_sim::objects::ObjectMode;
use tierwise_sim::sim::{NoProgress, Timing};
use tierwise_sim::trace::{OpenOptions, open_trace};
use tierwise_sim::{SimConfig, simulate};

const TRACE: &str = "msr_hm_0.excerpt1000.csv";

fn run(timing: Timing, measure_from: u64, max_requests: Option<u64>) -> SimReport {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/traces").join(TRACE);
    let mut t = open_trace(&path, &OpenOptions::default()).unwrap();
    let mut cfg = SimConfig::new("cache:mode=write-back", 2 << 20);
    cfg.objects = ObjectMode::parse("blocks:4KiB@0").unwrap();
    cfg.timing = timing;
    cfg.measure_from = measure_from;
    cfg.max_requests = max_requests;
    simulate(&mut t, &cfg, &mut NoProgress).unwrap()
}

#[test]
fn the_untimed_window_is_the_run_minus_its_warm_up() {
    let whole = run(Timing::None, 0, None);
    let warm = run(Timing::None, 0, Some(400));
    let measured = run(Timing::None, 400, None);
    assert_eq!(measured.requests, whole.requests - 400);
    assert_eq!(measured.request_hits, whole.request_hits - warm.request_hits);
    assert_eq!(measured.accesses, whole.accesses - warm.accesses);
    for level in 0..3 {
        assert_eq!(
            measured.engine.reads_by_level[level],
            whole.engine.reads_by_level[level] - warm.engine.reads_by_level[level],
            "level {level}"
        );
    }
    assert!(measured.notes.iter().any(|n| n.contains("first 400 requests warmed the cache up")));
    // Cold misses are the warm-up's: the measured share of reads from the SSD is higher.
    assert!(measured.read_hit.ssd > whole.read_hit.ssd, "{} vs {}", measured.read_hit.ssd, whole.read_hit.ssd);
}

#[test]
fn a_timed_window_counts_from_its_start() {
    let timing = Timing::Closed { depth: 4 };
    let whole = run(timing, 0, None);
    let measured = run(timing, 400, None);
    assert_eq!(measured.requests, 600);
    assert_eq!(measured.latency.count, 600, "latencies of the measured requests only");
    assert!(measured.duration_s < whole.duration_s, "{} vs {}", measured.duration_s, whole.duration_s);
    assert!(measured.hdd.reads + measured.hdd.writes < whole.hdd.reads + whole.hdd.writes);
    assert!(measured.hdd.elapsed_ns < whole.hdd.elapsed_ns && measured.energy_j < whole.energy_j);
    assert!(measured.hdd.utilisation() <= 1.0 && measured.hdd.utilisation() > 0.0);
    // IOPS over the window: requests over its duration.
    assert!((measured.iops - 600.0 / measured.duration_s).abs() < 1e-6);
}

#[test]
fn a_warm_up_as_long_as_the_trace_is_an_error() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/traces").join(TRACE);
    for timing in [Timing::None, Timing::Closed { depth: 1 }] {
        let mut t = open_trace(&path, &OpenOptions::default()).unwrap();
        let mut cfg = SimConfig::new("cache", 2 << 20);
        cfg.timing = timing;
        cfg.measure_from = 1000;
        let e = simulate(&mut t, &cfg, &mut NoProgress).unwrap_err().to_string();
        assert!(e.contains("--measure-from 1000") && e.contains("1000 requests"), "{e}");
    }
}
