//! Tests of the file-level simulator: the namespace against a model, the buffer cache's effects
//! (hits, buffered writes, deletes that never reach the tiers, append-reads), blocking, and every
//! file architecture over every workload with the engine's invariants checked after each
//! operation.

use super::*;
use crate::device::Scheduler;
use crate::filetrace::generate::{FILE_WORKLOADS, FileWorkload};
use crate::sim::NoProgress;
use tierwise_core::WorkKind;

fn op(kind: FileOpKind, path: &str, offset: u64, length: u64) -> FileOp {
    FileOp::new(0, kind, path).range(offset, length)
}

fn run(cfg: &FileSimConfig, ops: &[FileOp]) -> SimReport {
    simulate_file_ops(ops, "test", cfg, &mut NoProgress).expect("the simulation runs")
}

fn untimed(arch: &str, ssd: u64, ram: u64) -> FileSimConfig {
    FileSimConfig { timing: Timing::None, ram_bytes: ram, check_every: 1, ..FileSimConfig::new(arch, ssd) }
}

#[test]
fn sizes_follow_writes_appends_truncates_and_renames() {
    let ops = vec![
        op(FileOpKind::Mkdir, "/d", 0, 0),
        op(FileOpKind::Create, "/d/a", 0, 0),
        op(FileOpKind::Write, "/d/a", 0, 10_000),
        op(FileOpKind::Append, "/d/a", 0, 5_000),
        op(FileOpKind::Truncate, "/d/a", 0, 12_000),
        FileOp { path2: "/d/b".into(), ..op(FileOpKind::Rename, "/d/a", 0, 0) },
        op(FileOpKind::Write, "/d/b", 20_000, 100),
    ];
    for ram in [0, 1 << 20] {
        let cfg = untimed("dynamic-hot-dst", 1 << 20, ram);
        let mut sim = FileSim::new(&cfg, "t").unwrap();
        let mut id = None;
        for o in &ops {
            sim.op(o).unwrap();
            if o.kind == FileOpKind::Create {
                id = sim.id_of("/d/a");
            }
        }
        assert_eq!(sim.size_of("/d/a"), None, "renamed away");
        assert_eq!(sim.size_of("/d/b"), Some(20_100));
        assert_eq!(sim.id_of("/d/b"), id, "a rename keeps the object");
        assert!(sim.engine().placement(id.unwrap()).tracked);
    }
}

#[test]
fn buffer_cache_hits_never_reach_the_tiers_and_deleted_writes_never_land() {
    let ops = vec![
        op(FileOpKind::Create, "/f", 0, 0),
        op(FileOpKind::Write, "/f", 0, 64 * 1024),
        op(FileOpKind::Read, "/f", 0, 64 * 1024),
        op(FileOpKind::Read, "/f", 4096, 8192),
        op(FileOpKind::Delete, "/f", 0, 0),
    ];
    let mut cfg = untimed("plain-cold-dst", 1 << 20, 1 << 20);
    cfg.dirs = false;
    cfg.flush_at_end = true;
    let r = run(&cfg, &ops);
    assert_eq!(r.engine.reads, 0, "both reads hit the buffer cache");
    assert_eq!(r.engine.writes, 0, "the file was deleted before its pages were written back");
    assert_eq!(r.read_hit.ram, 1.0);
    // Without the buffer cache every data operation reaches the engine.
    cfg.ram_bytes = 0;
    let r = run(&cfg, &ops);
    assert_eq!((r.engine.reads, r.engine.writes), (2, 1));
}

#[test]
fn evicted_dirty_pages_are_written_back_and_a_sync_writes_the_rest() {
    let mut cfg = untimed("hdd-only", 1 << 20, 4 * PAGE);
    cfg.dirs = false;
    cfg.flush_at_end = true;
    let ops = vec![op(FileOpKind::Create, "/f", 0, 0), op(FileOpKind::Write, "/f", 0, 10 * PAGE + 100)];
    let r = run(&cfg, &ops);
    assert_eq!(r.engine.write_bytes_by_level[Level::Slow.index()], 10 * PAGE + 100, "every byte lands, once");
}

#[test]
fn an_unaligned_append_reads_the_last_page_first_and_dynamic_hot_dst_promotes_on_it() {
    // Loris's Postmark "append-read": the append is buffered, but the read of the file's last
    // page reaches the HDD, and Dynamic Hot-DST migrates the file on that read.
    let mut cfg = untimed("dynamic-hot-dst", 1 << 20, 1 << 20);
    cfg.dirs = false;
    let mut sim = FileSim::new(&cfg, "t").unwrap();
    sim.op(&op(FileOpKind::Read, "/old", 0, 6000)).unwrap(); // a file that existed before
    let id = sim.id_of("/old").unwrap();
    let promotions = sim.engine().stats().done(WorkKind::Promote);
    assert_eq!(promotions, 1, "the first read promotes it");
    // Another file, appended to without being read first.
    sim.op(&op(FileOpKind::Truncate, "/other", 0, 6000)).unwrap();
    let before = sim.engine().stats().reads;
    sim.op(&op(FileOpKind::Append, "/other", 0, 100)).unwrap();
    assert_eq!(sim.engine().stats().reads, before + 1, "the partial last page is read first");
    assert!(sim.engine().placement(sim.id_of("/other").unwrap()).on_fast, "and the append-read promoted it");
    assert!(sim.engine().placement(id).on_fast);
}

#[test]
fn renames_across_volumes_change_the_policy_domain() {
    let spec = "type-aware:volumes=/web=on-demand-caching;/files=dynamic-hot-dst";
    let mut cfg = untimed(spec, 1 << 20, 0);
    cfg.dirs = false;
    let mut sim = FileSim::new(&cfg, "t").unwrap();
    for o in [
        op(FileOpKind::Mkdir, "/web", 0, 0),
        op(FileOpKind::Mkdir, "/files", 0, 0),
        op(FileOpKind::Create, "/files/x", 0, 0),
        op(FileOpKind::Write, "/files/x", 0, 8192),
        FileOp { path2: "/web/x".into(), ..op(FileOpKind::Rename, "/files/x", 0, 0) },
        op(FileOpKind::Read, "/web/x", 0, 8192),
    ] {
        sim.op(&o).unwrap();
    }
    let p = sim.engine().placement(sim.id_of("/web/x").unwrap());
    assert!(p.on_fast && p.on_slow, "cached as a copy under /web's on-demand caching: {p:?}");
}

#[test]
fn block_architectures_are_refused_by_name() {
    let e = FileSim::new(&FileSimConfig::new("greendm-tiering", 1 << 30), "t").err().unwrap().to_string();
    assert!(e.contains("greendm-tiering") && e.contains("dynamic-hot-dst") && e.contains("hdd-only"), "{e}");
    let e = FileSim::new(&FileSimConfig::new("nope", 1 << 30), "t").err().unwrap().to_string();
    assert!(e.contains("unknown architecture"), "{e}");
}

/// Every file-level architecture and baseline.
fn every_arch() -> Vec<String> {
    let mut v: Vec<String> = tierwise_core::ARCHITECTURES
        .iter()
        .filter(|a| a.caps.granularity == tierwise_core::arch::Granularity::File && a.name != "type-aware")
        .map(|a| a.name.to_string())
        .collect();
    v.push("type-aware:volumes=/web=on-demand-caching;/files=dynamic-hot-dst;/fileserver=dynamic-cold-dst".into());
    v.push("interval-hot-dst:interval=50ms".into());
    v.push("hycache:collector=lfu".into());
    v.push("ssd-only".into());
    v.push("hdd-only".into());
    v
}

#[test]
fn every_architecture_runs_every_workload_with_its_invariants_kept() {
    for name in FILE_WORKLOADS {
        let ops = FileWorkload::by_name(name, 0.002).unwrap().collect(5);
        let ws = WorkingSet::of(&ops).peak_bytes;
        for arch in every_arch() {
            for (timing, ram) in [(Timing::None, 0), (Timing::Closed { depth: 4 }, ws / 8)] {
                let cfg = FileSimConfig {
                    timing,
                    ram_bytes: ram,
                    check_every: 1,
                    flush_at_end: true,
                    ..FileSimConfig::new(&arch, (ws / 4).max(64 * 1024))
                };
                let r = simulate_file_ops(&ops, name, &cfg, &mut NoProgress)
                    .unwrap_or_else(|e| panic!("{name} / {arch} / {timing:?}: {e}"));
                assert_eq!(r.requests, ops.len() as u64);
                if timing != Timing::None {
                    assert!(r.iops > 0.0, "{name} / {arch}");
                }
            }
        }
    }
}

#[test]
fn ssd_only_beats_hdd_only_and_a_hybrid_sits_between_on_a_zipf_web_server() {
    let ops = FileWorkload::by_name("webserver-zipf", 0.01).unwrap().collect(3);
    let ws = WorkingSet::of(&ops).peak_bytes;
    let iops = |arch: &str| {
        let cfg = FileSimConfig { ram_bytes: ws / 32, ..FileSimConfig::new(arch, ws / 2) };
        run(&cfg, &ops).iops
    };
    let (ssd, hdd, hybrid) = (iops("ssd-only"), iops("hdd-only"), iops("on-demand-caching"));
    assert!(ssd > hybrid && hybrid > hdd, "ssd {ssd:.0}, hybrid {hybrid:.0}, hdd {hdd:.0}");
}

#[test]
fn a_cold_dst_write_that_needs_cleaning_waits_for_the_demotion() {
    let mut cfg = FileSimConfig::new("plain-cold-dst", 64 * 1024);
    cfg.ram_bytes = 0;
    cfg.dirs = false;
    cfg.check_every = 1;
    // Media timings: the drive's write cache would take the demotion's 16 KiB in 0.2 ms.
    cfg.devices.hdd.write_cache = false;
    let mut ops = Vec::new();
    for i in 0..8 {
        ops.push(op(FileOpKind::Create, &format!("/f{i}"), 0, 0));
        ops.push(op(FileOpKind::Write, &format!("/f{i}"), 0, 16 * 1024));
    }
    let r = run(&cfg, &ops);
    assert!(r.arch_counters["blocked writes"] > 0);
    assert!(r.engine.done(WorkKind::Demote) > 0);
    // A blocked write includes the demotion's HDD write: the slowest op is far slower than an
    // SSD write.
    assert!(r.latency.max_us > 1000.0, "{:?}", r.latency);
}

#[test]
fn the_measured_window_excludes_setup() {
    let ops = FileWorkload::by_name("postmark", 0.005).unwrap().collect(1);
    let setup = ops.iter().position(|o| o.kind == FileOpKind::Read || o.kind == FileOpKind::Append).unwrap();
    let mut cfg = FileSimConfig::new("hdd-only", 1 << 20);
    cfg.measure_from = setup as u64;
    let r = run(&cfg, &ops);
    assert_eq!(r.requests, (ops.len() - setup) as u64);
    let all = run(&FileSimConfig { measure_from: 0, ..cfg }, &ops);
    assert!(all.duration_s > r.duration_s);
}

#[test]
fn the_working_set_is_the_peak_of_live_bytes() {
    let ops = vec![
        op(FileOpKind::Create, "/a", 0, 0),
        op(FileOpKind::Write, "/a", 0, 1000),
        op(FileOpKind::Create, "/b", 0, 0),
        op(FileOpKind::Append, "/b", 0, 500),
        op(FileOpKind::Delete, "/a", 0, 0),
        op(FileOpKind::Create, "/c", 0, 0),
        op(FileOpKind::Write, "/c", 0, 100),
    ];
    let ws = WorkingSet::of(&ops);
    assert_eq!(ws.peak_bytes, 1500 + 2 * DIR_ENTRY);
    assert_eq!(ws.created, 3);
}

#[test]
fn hycache_keeps_directories_on_the_ssd() {
    // HyCache kept the whole namespace on the SSD (a swapped file leaves a symlink there): its
    // directories are never evicted, however cold, while files come and go. Files far larger
    // than the SSD cycle through it here; every directory, created or adopted, stays.
    let mut ops = vec![op(FileOpKind::Mkdir, "/a", 0, 0), op(FileOpKind::Mkdir, "/b", 0, 0)];
    for i in 0..200 {
        let dir = if i % 2 == 0 { "/a" } else { "/b" };
        let path = format!("{dir}/f{i}");
        ops.push(op(FileOpKind::Create, &path, 0, 0));
        ops.push(op(FileOpKind::Write, &path, 0, 64 * 1024));
    }
    // A directory that existed before the trace (adopted on first use) joins the namespace.
    ops.push(op(FileOpKind::Read, "/old/x", 0, 4096));
    for i in 0..200 {
        let dir = if i % 2 == 0 { "/a" } else { "/b" };
        ops.push(op(FileOpKind::Read, &format!("{dir}/f{i}"), 0, 64 * 1024));
    }
    let cfg = untimed("hycache", 1 << 20, 0);
    let mut sim = FileSim::new(&cfg, "t").unwrap();
    for o in &ops {
        sim.op(o).unwrap();
    }
    for dir in ["/", "/a", "/b", "/old"] {
        let id = sim.id_of(dir).unwrap_or_else(|| panic!("{dir} exists"));
        assert!(sim.engine().placement(id).on_fast, "{dir} is on the SSD");
    }
    let stats = sim.engine().stats();
    assert!(stats.done(WorkKind::Demote) > 100, "files were evicted: {}", stats.done(WorkKind::Demote));
    // The same run with the other file-level tiering keeps nothing special: its directories
    // are ranked like files.
    let r = run(&untimed("dynamic-cold-dst", 1 << 20, 0), &ops);
    assert!(r.engine.done(WorkKind::Demote) > 0);
}

#[test]
fn reads_meet_a_write_back_backlog_as_mq_deadline_batches_it() {
    // 32 MiB written through a 1 MiB buffer cache queue ~0.3 s of write-backs on the HDD, and
    // 20 synchronous reads follow. mq-deadline dispatches in batches: a write batch goes on
    // for up to `fifo_batch` (16) requests even when a read arrives, and writes get a batch
    // after `writes_starved` (2) read batches. So each read may wait one write batch, and the
    // backlog drains during the first reads, as on Linux without write-back throttling: no
    // faster than first-come-first-served here. With batches of one request, each read goes
    // before the waiting writes (the queue's choice is made per request).
    let mut ops = vec![op(FileOpKind::Create, "/big", 0, 0)];
    for i in 0..32u64 {
        ops.push(op(FileOpKind::Write, "/big", i << 20, 1 << 20));
    }
    for i in 0..20u64 {
        ops.push(op(FileOpKind::Read, "/old", i * (1 << 20), 4096));
    }
    let duration = |scheduler, fifo_batch| {
        let mut cfg = FileSimConfig::new("hdd-only", 1 << 20);
        cfg.ram_bytes = 1 << 20;
        cfg.dirs = false;
        cfg.hdd_queue.scheduler = scheduler;
        cfg.hdd_queue.fifo_batch = fifo_batch;
        // Media timings: the queue's batches are what is tested, not the drive's cache.
        cfg.devices.hdd.write_cache = false;
        let r = run(&cfg, &ops);
        assert!(r.engine.write_bytes_by_level[Level::Slow.index()] >= 31 << 20, "the write-backs ran");
        r.duration_s
    };
    let (mq, fifo) = (duration(Scheduler::MqDeadline, 16), duration(Scheduler::Fifo, 16));
    let per_request = duration(Scheduler::MqDeadline, 1);
    assert!(mq <= fifo * 1.1, "mq-deadline {mq:.3} s, fifo {fifo:.3} s");
    assert!(per_request * 2.0 < fifo, "batches of one: {per_request:.3} s, fifo {fifo:.3} s");
}

/// A FUSE front end's requests: open, one per 128 KiB of data on regular I/O (none with
/// passthrough), flush and release; at depth 1 an operation takes exactly their cost longer.
#[test]
fn the_front_end_cost_is_its_requests_and_lengthens_each_operation_by_it() {
    let regular = FrontEndCost { per_request: Nanos::from_micros(60), data_requests: true, max_request: 128 << 10 };
    let passthrough = FrontEndCost { data_requests: false, ..regular };
    let read = op(FileOpKind::Read, "/f", 0, 300 << 10);
    assert_eq!(regular.requests(&read), 3 + 3);
    assert_eq!(passthrough.requests(&read), 3);
    assert_eq!(regular.requests(&op(FileOpKind::Stat, "/f", 0, 0)), 1);
    assert_eq!(regular.cost(&read), Nanos::from_micros(360));
    let ops = vec![op(FileOpKind::Create, "/f", 0, 0), op(FileOpKind::Write, "/f", 0, 64 << 10), read.clone()];
    let timed = |front_end| FileSimConfig {
        timing: Timing::Closed { depth: 1 },
        ram_bytes: 0,
        front_end,
        ..FileSimConfig::new("ssd-only", 1 << 30)
    };
    // The same requests at no cost: the same pieces, so the same device time.
    let free = FrontEndCost { per_request: Nanos::ZERO, ..regular };
    let (plain, fuse) = (run(&timed(Some(free)), &ops), run(&timed(Some(regular)), &ops));
    let total = |r: &SimReport| r.latency.mean_us * r.requests as f64;
    let added: u64 = ops.iter().map(|o| regular.cost(o).0).sum();
    assert!(
        (total(&fuse) - total(&plain) - added as f64 / 1e3).abs() < 1.0,
        "{} µs more in all, {} µs of requests",
        total(&fuse) - total(&plain),
        added / 1000
    );
}

/// With a FUSE front end on regular I/O the engine hears one read or write per data request,
/// split at multiples of 128 KiB as the kernel splits them: a mount told 11 reads for reading a
/// 1 MiB and a 300,000-byte file (measured with `tierwise stats`), and so is the simulator.
#[test]
fn a_modelled_front_end_tells_the_engine_one_access_per_fuse_request() {
    let ops = vec![
        op(FileOpKind::Create, "/f", 0, 0),
        op(FileOpKind::Write, "/f", 0, 1 << 20),
        op(FileOpKind::Create, "/g", 0, 0),
        op(FileOpKind::Write, "/g", 0, 300_000),
        op(FileOpKind::Read, "/f", 0, 1 << 20),
        op(FileOpKind::Read, "/g", 0, 300_000),
        op(FileOpKind::Read, "/g", 100_000, 100_000),
    ];
    let reads = |front_end| {
        // Directories are not objects here (as on the mount), so only file reads count.
        let cfg = FileSimConfig { front_end, ram_bytes: 0, dirs: false, ..untimed("hdd-only", 1 << 20, 0) };
        run(&cfg, &ops).engine.reads
    };
    let fuse = FrontEndCost { per_request: Nanos::ZERO, data_requests: true, max_request: 128 << 10 };
    assert_eq!(reads(None), 3);
    // 8 + 3, then 100,000..200,000 crosses 131,072: 2.
    assert_eq!(reads(Some(fuse)), 13);
    assert_eq!(reads(Some(FrontEndCost { data_requests: false, ..fuse })), 3, "passthrough: whole ranges");
}

/// The closed loop runs operations in trace order as `tierwise replay`'s workers do: one waits
/// while an operation on the same path (or a directory around it) runs, so two reads of one file
/// never overlap where reads of two files do.
#[test]
fn the_closed_loop_never_overlaps_operations_on_one_path() {
    // Three 1 ms requests per read, nothing else worth counting: the time is the front end's.
    let fuse = FrontEndCost { per_request: Nanos::from_millis(1), data_requests: false, max_request: 128 << 10 };
    let setup = [
        op(FileOpKind::Create, "/d/f", 0, 0),
        op(FileOpKind::Write, "/d/f", 0, 4096),
        op(FileOpKind::Create, "/d/g", 0, 0),
        op(FileOpKind::Write, "/d/g", 0, 4096),
    ];
    let duration = |reads: &[FileOp]| {
        let ops: Vec<FileOp> = setup.iter().chain(reads).cloned().collect();
        let cfg = FileSimConfig {
            timing: Timing::Closed { depth: 2 },
            ram_bytes: 0,
            front_end: Some(fuse),
            measure_from: setup.len() as u64,
            ..FileSimConfig::new("ssd-only", 1 << 30)
        };
        run(&cfg, &ops).duration_s
    };
    let read = |p: &str| op(FileOpKind::Read, p, 0, 4096);
    let one_file = duration(&[read("/d/f"), read("/d/f")]);
    let two_files = duration(&[read("/d/f"), read("/d/g")]);
    let rmdir_after = duration(&[read("/d/f"), op(FileOpKind::Rmdir, "/d", 0, 0)]);
    assert!((0.0059..0.0065).contains(&one_file), "one file: {one_file} s, two 3 ms reads in turn");
    assert!((0.0029..0.0035).contains(&two_files), "two files: {two_files} s, side by side");
    assert!(rmdir_after > 0.0039, "an rmdir of the directory waits for the read inside it: {rmdir_after} s");
}

/// On a modelled front end the pieces of one read reach the engine one after another, each when
/// the one before is done (FUSE sends a reader's requests in turn; on the mount the pieces of a
/// read of the emulated HDD arrive tens of milliseconds apart). Reading a 1 MiB file off the HDD
/// under on-demand caching, the copy its first piece issued lands while the read goes on, and
/// its last pieces come from the SSD, as on the mount (told all at once, every piece would be
/// the HDD's).
#[test]
fn the_pieces_of_a_read_reach_the_engine_one_after_another() {
    let ops = [
        op(FileOpKind::Create, "/f", 0, 0),
        op(FileOpKind::Write, "/f", 0, 1 << 20),
        op(FileOpKind::Read, "/f", 0, 1 << 20),
    ];
    let levels = |timing| {
        let fuse = FrontEndCost { per_request: Nanos::ZERO, data_requests: true, max_request: 128 << 10 };
        let mut cfg = FileSimConfig {
            timing,
            ram_bytes: 0,
            dirs: false,
            front_end: Some(fuse),
            measure_from: 2,
            ..FileSimConfig::new("on-demand-caching", 16 << 20)
        };
        // Media timings: with the drive's write cache on, the 1 MiB just written is read back
        // from the drive's memory before the promotion completes.
        cfg.devices.hdd.write_cache = false;
        let r = run(&cfg, &ops);
        (r.engine.reads_by_level[Level::Fast.index()], r.engine.reads_by_level[Level::Slow.index()])
    };
    let (fast, slow) = levels(Timing::Closed { depth: 1 });
    assert!(fast > 0 && slow > 1 && fast + slow == 8, "{fast} pieces from the SSD, {slow} from the HDD");
    // Untimed, work is done the moment it is issued: every piece after the first is the SSD's.
    assert_eq!(levels(Timing::None), (7, 1));
}
