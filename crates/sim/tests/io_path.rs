//! The simulator's I/O path behaves like a real stack: NCQ reordering, block-layer merging,
//! and block boundaries that follow the data's alignment.

#![expect(clippy::unwrap_used, reason = "a failing setup should stop the test loudly")]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tierwise_core::Nanos;
use tierwise_sim::alignment::resolve_anchor;
use tierwise_sim::device::Scheduler;
use tierwise_sim::objects::ObjectMode;
use tierwise_sim::sim::NoProgress;
use tierwise_sim::trace::memory::memory_trace;
use tierwise_sim::trace::{IoOp, OpenOptions, TraceRecord, open_trace};
use tierwise_sim::{SimConfig, Timing, simulate};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn random_reads(n: u64) -> Arc<Vec<TraceRecord>> {
    let mut s = 7u64;
    let blocks = 480_000_000_000u64 / 4096;
    Arc::new(
        (0..n)
            .map(|i| {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                TraceRecord {
                    time_ns: i,
                    op: IoOp::Read,
                    volume: 0,
                    offset: ((s >> 11) % blocks) * 4096,
                    len: 4096,
                    key: i,
                }
            })
            .collect(),
    )
}

/// `n` 4 KiB requests, 13 in 16 on the first `hot` blocks and the rest over 1 GiB; with
/// `writes`, a third of them are writes.
fn hot_and_cold(seed: u64, n: u64, hot: u64, writes: bool) -> Arc<Vec<TraceRecord>> {
    let mut s = seed;
    Arc::new(
        (0..n)
            .map(|i| {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let span = if (s >> 60) < 13 { hot } else { 262_144 };
                let op = if writes && (s >> 33).is_multiple_of(3) { IoOp::Write } else { IoOp::Read };
                TraceRecord { time_ns: i, op, volume: 0, offset: ((s >> 11) % span) * 4096, len: 4096, key: i }
            })
            .collect(),
    )
}

fn hdd_only(recs: &Arc<Vec<TraceRecord>>, timing: Timing, scheduler: Scheduler) -> tierwise_sim::metrics::SimReport {
    let mut cfg = SimConfig::new("hdd-only", 4096);
    cfg.timing = timing;
    cfg.hdd_queue.scheduler = scheduler;
    simulate(&mut memory_trace(recs.clone(), "mem", true), &cfg, &mut NoProgress).unwrap()
}

/// Random 4 KiB reads over the whole disk: QD1 gives the preset's 112 IOPS; QD32 gains what
/// NCQ gains on a 7200 rpm SATA disk (about 2-2.5x); the old FIFO model gains nothing.
#[test]
fn queue_depth_pays_off_as_on_a_drive() {
    let recs = random_reads(4000);
    let qd1 = hdd_only(&recs, Timing::Closed { depth: 1 }, Scheduler::MqDeadline).iops;
    let qd32 = hdd_only(&recs, Timing::Closed { depth: 32 }, Scheduler::MqDeadline).iops;
    let fifo = hdd_only(&recs, Timing::Closed { depth: 32 }, Scheduler::Fifo).iops;
    assert!((qd1 / 112.0 - 1.0).abs() < 0.08, "QD1 {qd1:.0} IOPS");
    assert!((1.8..3.2).contains(&(qd32 / qd1)), "QD32 {qd32:.0} vs QD1 {qd1:.0}");
    assert!((fifo / qd1 - 1.0).abs() < 0.08, "fifo {fifo:.0} vs {qd1:.0}");
}

/// Two contiguous 4 KiB writes arriving together reach the disk as one 8 KiB write.
#[test]
fn contiguous_writes_merge() {
    let w = |offset| TraceRecord { time_ns: 1000, op: IoOp::Write, volume: 0, offset, len: 4096, key: 0 };
    let recs = Arc::new(vec![w(1 << 30), w((1 << 30) + 4096)]);
    let r = hdd_only(&recs, Timing::Open { speedup: 1.0 }, Scheduler::MqDeadline);
    assert_eq!((r.hdd.writes, r.hdd.merged, r.hdd.write_bytes), (1, 1, 8192));
    let r = hdd_only(&recs, Timing::Open { speedup: 1.0 }, Scheduler::Fifo);
    assert_eq!((r.hdd.writes, r.hdd.merged), (2, 0));
}

/// The CloudPhysics sample and the same trace shifted by 512 bytes give the same cache
/// behaviour: the automatic anchor follows the data.
#[test]
fn a_shifted_trace_gives_the_same_results() {
    let path = root().join("data/traces/cloudphysics_libcachesim.sample.vscsi.gz");
    let mut t = open_trace(&path, &OpenOptions::default()).unwrap();
    let mut recs = Vec::new();
    t.for_each(30_000, |r| -> Result<(), tierwise_sim::trace::TraceError> {
        recs.push(*r);
        Ok(())
    })
    .unwrap();
    let shifted: Vec<TraceRecord> = recs.iter().map(|r| TraceRecord { offset: r.offset + 512, ..*r }).collect();
    let run = |recs: Vec<TraceRecord>, arch: &str, timing: Timing| {
        let recs = Arc::new(recs);
        let (objects, _) =
            resolve_anchor(&mut memory_trace(recs.clone(), "mem", true), ObjectMode::blocks(4096)).unwrap();
        let mut cfg = SimConfig::new(arch, 64 << 20);
        cfg.objects = objects;
        cfg.timing = timing;
        simulate(&mut memory_trace(recs, "mem", true), &cfg, &mut NoProgress).unwrap()
    };
    for arch in ["cache:mode=write-back", "bcache-like:cache-mode=writeback", "dm-cache-smq-like"] {
        // Hit counting: exactly the same decisions.
        let (a, b) = (run(recs.clone(), arch, Timing::None), run(shifted.clone(), arch, Timing::None));
        assert_eq!((a.read_hit, a.access_hit), (b.read_hit, b.access_hit), "{arch}");
        assert_eq!(a.engine.done, b.engine.done, "{arch}");
        // Device timing: the addresses differ by 512 B, so the platter angles differ and a policy
        // that depends on timing (dm-cache cleans when idle) decides a few things differently.
        let closed = Timing::Closed { depth: 32 };
        let (a, b) = (run(recs.clone(), arch, closed), run(shifted.clone(), arch, closed));
        assert!((a.read_hit.ssd - b.read_hit.ssd).abs() < 0.01, "{arch}: {:?} vs {:?}", a.read_hit, b.read_hit);
        assert!((a.hdd.write_bytes as f64 / b.hdd.write_bytes as f64 - 1.0).abs() < 0.02, "{arch}");
        assert!((a.iops / b.iops - 1.0).abs() < 0.05, "{arch}: {} vs {} IOPS", a.iops, b.iops);
    }
}

/// A served device runs its moves on a few mover threads (`tierwise serve --movers`); the
/// simulator predicting it runs at most as many at once. Every move still completes, and on a
/// workload that issues many at once, fewer movers spread them out: the run takes longer and
/// the HDD is not swamped by concurrent moves (lower tail latency for the clients).
#[test]
fn a_mover_limit_runs_every_move_but_fewer_at_once() {
    // 80 % of requests on a hot 4 MiB, the rest over 1 GiB.
    let recs = hot_and_cold(11, 6000, 1024, false);
    let run = |movers: u32| {
        let mut cfg = SimConfig::new("greendm-tiering:es=64KiB", 16 << 20);
        cfg.objects = ObjectMode::parse("blocks:64KiB@0").unwrap();
        cfg.timing = Timing::Closed { depth: 4 };
        cfg.hdd_queue.scheduler = Scheduler::Fifo;
        cfg.movers = movers;
        cfg.flush_at_end = true;
        simulate(&mut memory_trace(recs.clone(), "mem", true), &cfg, &mut NoProgress).unwrap()
    };
    let (all, two) = (run(0), run(2));
    use tierwise_core::WorkKind;
    for r in [&all, &two] {
        assert_eq!(r.requests, 6000);
        assert!(r.engine.done(WorkKind::Promote) > 50, "{:?}", r.engine);
        assert_eq!(r.engine.done(WorkKind::Promote), r.engine.issued(WorkKind::Promote), "a move never ran");
    }
    assert!(
        two.latency.p99_us < all.latency.p99_us,
        "two movers: p99 {} us, unlimited: {} us",
        two.latency.p99_us,
        all.latency.p99_us
    );
}

/// A served device's requests also cross its front end (protocol and client wake-up), which
/// `SimConfig::front_end` adds after the device I/O: at depth 1 every request takes that much
/// longer and the rate falls accordingly; at a depth that keeps the HDD busy, the front end
/// overlaps other requests' I/O and costs nearly nothing.
#[test]
fn a_front_end_cost_lengthens_each_request_and_overlaps_in_a_queue() {
    let recs = random_reads(8000);
    let run = |depth: u32, front_end: Nanos| {
        let mut cfg = SimConfig::new("hdd-only", 4096);
        cfg.timing = Timing::Closed { depth };
        cfg.hdd_queue.scheduler = Scheduler::Fifo;
        cfg.front_end = front_end;
        simulate(&mut memory_trace(recs.clone(), "mem", true), &cfg, &mut NoProgress).unwrap()
    };
    let fe = Nanos(2_000_000);
    let (plain, slowed) = (run(1, Nanos::ZERO), run(1, fe));
    let per_request = |r: &tierwise_sim::metrics::SimReport| r.duration_s / r.requests as f64;
    // Arriving later, each read finds the platter at another angle: the two runs' mean
    // rotational waits differ by chance, 8.3 ms × sqrt(1/6) × sqrt(2 / 8000) = 0.05 ms (σ).
    let added = per_request(&slowed) - per_request(&plain);
    assert!((added - 0.002).abs() < 1.5e-4, "depth 1: {added} s added per request, not 2 ms");
    let added_us = slowed.latency.mean_us - plain.latency.mean_us;
    assert!((added_us - 2000.0).abs() < 150.0, "{:?} against {:?}", slowed.latency, plain.latency);
    // Depth 8 on a FIFO disk of ~9 ms per random read: 2 ms outside it overlaps the queue.
    let (plain8, slowed8) = (run(8, Nanos::ZERO), run(8, fe));
    assert!(slowed8.iops > plain8.iops * 0.98, "{} against {}", slowed8.iops, plain8.iops);
    assert_eq!(slowed8.requests, plain8.requests);
}

/// The front end's work runs on the host's cores (`SimConfig::front_end_cores`): with two,
/// at most two requests cross it at once, so SSD hits at depth 16 are bounded by
/// 2 / front end rather than by the SSD.
#[test]
fn front_end_cores_bound_a_deep_queue_of_fast_requests() {
    let recs = random_reads(20_000);
    let run = |cores: u32| {
        let mut cfg = SimConfig::new("ssd-only", 4096);
        cfg.timing = Timing::Closed { depth: 16 };
        cfg.front_end = Nanos(100_000);
        cfg.front_end_cores = cores;
        simulate(&mut memory_trace(recs.clone(), "mem", true), &cfg, &mut NoProgress).unwrap()
    };
    let (free, two) = (run(0), run(2));
    // Unlimited: 16 requests of ~100 µs front end plus the SSD's ~100 µs: about 16 / 200 µs,
    // capped by vertex3's 35,000 read IOPS.
    assert!(free.iops > 30_000.0, "{}", free.iops);
    // Two cores: 2 / 100 µs = 20,000.
    assert!((two.iops / 20_000.0 - 1.0).abs() < 0.03, "{}", two.iops);
    // One core at depth 1 changes nothing: the front end is never shared.
    let one = |cores: u32| {
        let mut cfg = SimConfig::new("ssd-only", 4096);
        cfg.timing = Timing::Closed { depth: 1 };
        cfg.front_end = Nanos(100_000);
        cfg.front_end_cores = cores;
        simulate(&mut memory_trace(recs.clone(), "mem", true), &cfg, &mut NoProgress).unwrap().iops
    };
    assert!((one(1) / one(0) - 1.0).abs() < 1e-9);
}

/// `SimConfig::stop_at_last_request` (what `replay --nbd` predicts with): the devices'
/// counters end with the last request, as a served device's read right after a replay do,
/// instead of after the write-backs still queued for the movers. The requests' figures do not
/// change; the HDD's work does, and a one-at-a-time HDD is then never busier than the run is long.
#[test]
fn counters_can_stop_with_the_last_request() {
    let writes: Arc<Vec<TraceRecord>> =
        Arc::new(random_reads(6000).iter().map(|r| TraceRecord { op: IoOp::Write, ..*r }).collect());
    let run = |stop: bool| {
        let mut cfg = SimConfig::new("cache:mode=write-back", 2 << 20);
        cfg.timing = Timing::Closed { depth: 4 };
        cfg.hdd_queue.scheduler = Scheduler::Fifo;
        cfg.movers = 2;
        cfg.stop_at_last_request = stop;
        simulate(&mut memory_trace(writes.clone(), "mem", true), &cfg, &mut NoProgress).unwrap()
    };
    let (all, stopped) = (run(false), run(true));
    assert_eq!(all.requests, stopped.requests);
    assert!((all.iops / stopped.iops - 1.0).abs() < 1e-9, "{} vs {}", all.iops, stopped.iops);
    assert_eq!(all.latency.p99_us, stopped.latency.p99_us);
    // The SSD of 512 blocks ends mostly dirty: the write-backs queued then are hundreds.
    assert!(stopped.hdd.writes + 100 < all.hdd.writes, "{} vs {}", stopped.hdd.writes, all.hdd.writes);
    let run_ns = stopped.duration_s * 1e9;
    assert!(stopped.hdd.busy_ns as f64 <= run_ns * 1.01, "busy {} ns in a {run_ns} ns run", stopped.hdd.busy_ns);
    assert!(
        all.hdd.busy_ns as f64 > run_ns,
        "the queued write-backs run after the last request: busy {} ns, run {run_ns} ns, {} writes after it",
        all.hdd.busy_ns,
        all.hdd.writes - stopped.hdd.writes
    );
}

/// `SimConfig::metadata_commits` (what `replay --nbd` predicts with): while the table changes,
/// once a period both devices are flushed, a checkpoint written to each, and both flushed
/// again, as `tierwise serve` commits; a run whose table does not change commits nothing.
#[test]
fn a_served_devices_commits_flush_the_disk_twice_a_period_while_the_table_changes() {
    let writes: Arc<Vec<TraceRecord>> =
        Arc::new(random_reads(3000).iter().map(|r| TraceRecord { op: IoOp::Write, ..*r }).collect());
    let run = |recs: &Arc<Vec<TraceRecord>>, commits: bool| {
        let mut cfg = SimConfig::new("cache:mode=write-back", 64 << 20);
        cfg.timing = Timing::Closed { depth: 4 };
        cfg.movers = 2;
        cfg.stop_at_last_request = true;
        cfg.metadata_commits = commits.then_some(tierwise_sim::MetadataCommits {
            interval: Nanos::from_millis(100),
            hdd_addr: 490_000_000_000,
            ssd_addr: 4096,
            slots: 0,
        });
        simulate(&mut memory_trace(recs.clone(), "mem", true), &cfg, &mut NoProgress).unwrap()
    };
    let (plain, committed) = (run(&writes, false), run(&writes, true));
    assert_eq!(plain.hdd.flushes, 0);
    let periods = committed.duration_s / 0.1;
    let commits = committed.hdd.flushes as f64 / 2.0;
    assert!(commits >= periods - 2.0 && commits <= periods + 1.0, "{commits} commits in {periods:.1} periods");
    assert_eq!(committed.ssd.flushes, committed.hdd.flushes);
    // One checkpoint replica per commit on the HDD, of 16 bytes per cached block and more.
    let extra = committed.hdd.writes as i64 - plain.hdd.writes as i64;
    assert!(extra >= commits as i64 - 1, "{extra} more HDD writes for {commits} commits");
    // The flushes make the drive write its cache back at once: the run is no faster.
    assert!(committed.iops <= plain.iops * 1.02, "{} vs {}", committed.iops, plain.iops);
    // hdd-only moves nothing and writes no SSD: the table never changes, nothing commits.
    let mut cfg = SimConfig::new("hdd-only", 0);
    cfg.timing = Timing::Closed { depth: 4 };
    cfg.metadata_commits =
        Some(tierwise_sim::MetadataCommits { interval: Nanos::from_millis(100), hdd_addr: 0, ssd_addr: 0, slots: 0 });
    let r = simulate(&mut memory_trace(random_reads(500), "mem", true), &cfg, &mut NoProgress).unwrap();
    assert!(r.duration_s > 1.0 && r.hdd.flushes == 0, "{} s, {} flushes", r.duration_s, r.hdd.flushes);
}

/// The commits a served device makes, from the prediction's note: (periodic, forced, forced
/// on the SSD only).
fn commits_of(r: &tierwise_sim::metrics::SimReport) -> (u64, u64, u64) {
    let note = r.notes.iter().find(|n| n.starts_with("served device's metadata commits")).unwrap();
    let n = |after: &str| -> u64 {
        let at = note.find(after).unwrap();
        note[..at].rsplit(|c: char| !c.is_ascii_digit()).find(|w| !w.is_empty()).unwrap().parse().unwrap()
    };
    (n(" periodic"), n(" forced by slot pressure"), n(" of them SSD-only"))
}

/// The served device keeps a few slots over the engine's capacity, and a slot unmapped since
/// the last commit waits for one; a copy that finds none free forces a commit, which touches
/// the HDD only when a block it drops was written there since the HDD's last sync
/// (`crates/block/src/mover.rs`). A tiering architecture on a small SSD (every promotion
/// follows a demotion that wrote the HDD) pays HDD flushes for them; a read cache (evictions
/// that wrote nothing) pays SSD flushes only. Every flush is accounted for by a commit.
#[test]
fn slot_pressure_forces_commits_as_on_the_served_device() {
    // A hot 8 MiB (four times the SSD) and a cold 1 GiB; a third of them writes.
    let mixed = hot_and_cold(5, 4000, 2048, true);
    let reads: Arc<Vec<TraceRecord>> = Arc::new(mixed.iter().map(|r| TraceRecord { op: IoOp::Read, ..*r }).collect());
    let run = |spec: &str, recs: &Arc<Vec<TraceRecord>>, slots: u64| {
        let mut cfg = SimConfig::new(spec, 2 << 20);
        cfg.objects = ObjectMode::parse("blocks:64KiB@0").unwrap();
        cfg.timing = Timing::Closed { depth: 4 };
        cfg.movers = 2;
        cfg.stop_at_last_request = true;
        cfg.metadata_commits = Some(tierwise_sim::MetadataCommits {
            interval: Nanos::from_secs(1),
            hdd_addr: 490_000_000_000,
            ssd_addr: 4096,
            slots,
        });
        simulate(&mut memory_trace(recs.clone(), "mem", true), &cfg, &mut NoProgress).unwrap()
    };
    // 32 slots of 64 KiB hold the engine's 2 MiB; one more is the device's spare.
    let tiering = "greendm-tiering:es=64KiB";
    let (unmodelled, modelled) = (run(tiering, &mixed, 0), run(tiering, &mixed, 33));
    assert!(unmodelled.notes.iter().any(|n| n.contains("slot quarantine not modelled")), "{:?}", unmodelled.notes);
    let (periodic, forced, ssd_only) = commits_of(&modelled);
    assert!(
        forced > 20,
        "{forced} forced commits for {} promotions",
        modelled.engine.done(tierwise_core::WorkKind::Promote)
    );
    assert!(ssd_only < forced, "every demotion writes the HDD: {ssd_only} of {forced} forced commits on the SSD only");
    assert_eq!(modelled.ssd.flushes, 2 * (periodic + forced));
    assert_eq!(modelled.hdd.flushes, 2 * (periodic + forced - ssd_only));
    assert!(modelled.hdd.flushes > unmodelled.hdd.flushes + 20);
    assert!(modelled.iops < unmodelled.iops, "{} IOPS with the commits, {} without", modelled.iops, unmodelled.iops);
    // A read cache drops blocks it never wrote to the HDD: its forced commits skip the HDD.
    let cache = run("cache:mode=write-through", &reads, 33);
    let (periodic, forced, ssd_only) = commits_of(&cache);
    assert!(forced > 20 && ssd_only == forced, "{forced} forced, {ssd_only} on the SSD only");
    assert_eq!(cache.ssd.flushes, 2 * (periodic + forced));
    assert_eq!(cache.hdd.flushes, 2 * periodic);
}
