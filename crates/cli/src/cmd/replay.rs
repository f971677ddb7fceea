//! `tierwise replay --fs DIR TRACE`: a file trace replayed against a real directory, and the
//! same trace through the file-level simulator, side by side.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::Args;
use serde::Serialize;
use tierwise_bench::replay::{ReplayReport, replay_dir};
use tierwise_core::Bytes;
use tierwise_fs::{Counters, Snapshot};
use tierwise_sim::Timing;
use tierwise_sim::filesim::{FileSim, FileSimConfig, FrontEndCost, file_arch_allowed};
use tierwise_sim::filetrace::{FileOp, FileTraceReader};
use tierwise_sim::jobs::load_presets;
use tierwise_sim::metrics::SimReport;

use crate::progress::Bars;

#[derive(Args)]
pub struct ReplayArgs {
    /// The directory to replay a file trace against: a tierwise mount (or a directory in one),
    /// or any other.
    #[arg(long = "fs", required_unless_present = "nbd", conflicts_with = "nbd")]
    dir: Option<PathBuf>,
    /// The NBD device to replay a block trace against (`nbd+unix:///?socket=PATH` or
    /// `nbd://HOST:PORT`, as `tierwise serve` prints), one connection per worker.
    #[arg(long)]
    nbd: Option<String>,
    /// With --nbd: the served device's control socket, for its policy, devices and counters
    /// [default: the NBD socket's path + ".control"].
    #[arg(long)]
    control: Option<PathBuf>,
    /// A file trace (`tierwise trace gen-files` writes them), or with --nbd a block trace in
    /// any format the simulator reads.
    trace: PathBuf,
    /// Operations in flight (worker threads; the simulator runs a closed loop of as many).
    #[arg(long, default_value_t = 4)]
    workers: usize,
    /// Replay only the first N operations.
    #[arg(long)]
    max_ops: Option<usize>,
    /// Where measuring starts: `auto` (after the setup phase — the leading mkdir, create and
    /// write operations that preallocate a benchmark's files, as Filebench and Postmark report),
    /// or an operation index (0: measure everything). Earlier operations are replayed first,
    /// unmeasured, and the simulator is given the same window.
    #[arg(long, default_value = "auto")]
    measure_from: String,
    /// Simulate this architecture beside the measurement [default: the mount's own policy].
    #[arg(long)]
    sim: Option<String>,
    /// SSD bytes for the simulation [default: what the mount's policy may use].
    #[arg(long)]
    ssd: Option<String>,
    /// HDD preset for the simulation [default: the mount's or served device's emulated HDD,
    /// else wd5000aaks].
    #[arg(long)]
    hdd: Option<String>,
    /// SSD preset for the simulation [default: the mount's or served device's emulated SSD,
    /// else vertex3].
    #[arg(long)]
    ssd_model: Option<String>,
    /// TOML file merged over the device presets for the simulation (a `tierwise calibrate`
    /// preset of the disks under the images or directories).
    #[arg(long)]
    devices: Option<PathBuf>,
    /// The simulated HDD's queue, as `sim --hdd-queue` [default: the emulated HDD's; without
    /// one, fifo]. For real disks, the scheduler in /sys/block/DEV/queue/scheduler.
    #[arg(long)]
    hdd_queue: Option<String>,
    /// The simulated FUSE front end's time per request (open, each 128 KiB of data on regular
    /// I/O, flush, release): `auto` is the time calibrated on this machine (docs/PERFORMANCE.md)
    /// when replaying on a tierwise mount and none elsewhere; `0` models none.
    #[arg(long, default_value = "auto")]
    fuse_request_cost: String,
    /// With --nbd: the simulated NBD front end's time per request (the protocol round trip and
    /// the waking of server and client threads, added after each request's device I/O):
    /// `auto` is the time calibrated on this machine (docs/PERFORMANCE.md); `0` models none.
    #[arg(long, default_value = "auto")]
    nbd_request_cost: String,
    /// With --nbd: the cores that do that work, shared by client and server (at most this
    /// many requests cross the front end at once): `auto` is this host's, `0` no limit.
    #[arg(long, default_value = "auto")]
    nbd_cores: String,
    /// Measure only.
    #[arg(long)]
    no_sim: bool,
    /// Write both results as JSON.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// Both sides of a replay.
#[derive(Serialize)]
struct SideBySide {
    measured: ReplayReport,
    /// What the mount counted during the replay (when the directory is a tierwise mount).
    mount: Option<MountDelta>,
    simulated: Option<SimReport>,
}

#[derive(Serialize)]
struct MountDelta {
    policy: String,
    emulation: Vec<String>,
    counters: Counters,
}

/// The tierwise mount `dir` is in, with its statistics (found by walking up to its root).
fn mount_of(dir: &Path) -> Option<(PathBuf, Snapshot)> {
    let mut p = std::fs::canonicalize(dir).ok()?;
    loop {
        if let Ok(Some(raw)) = xattr::get(&p, tierwise_fs::control::XATTR_STATS)
            && let Ok(s) = serde_json::from_slice::<Snapshot>(&raw)
        {
            return Some((p, s));
        }
        if !p.pop() {
            return None;
        }
    }
}

pub fn cmd_replay(a: ReplayArgs, bars: &Bars) -> Result<()> {
    if let Some(uri) = &a.nbd {
        return crate::cmd::replay_nbd::cmd_replay_nbd(
            crate::cmd::replay_nbd::NbdReplay {
                uri,
                trace: &a.trace,
                workers: a.workers,
                max_ops: a.max_ops,
                control: a.control.clone(),
                no_sim: a.no_sim,
                json: a.json.as_deref(),
                request_cost: &a.nbd_request_cost,
                cores: &a.nbd_cores,
                hdd: a.hdd.as_deref(),
                ssd_model: a.ssd_model.as_deref(),
                devices: a.devices.as_deref(),
                hdd_queue: a.hdd_queue.as_deref(),
            },
            bars,
        );
    }
    let dir = a.dir.clone().unwrap_or_default();
    if !dir.is_dir() {
        bail!("--fs {}: not a directory", dir.display());
    }
    if a.workers == 0 {
        bail!("--workers 0: expected at least 1");
    }
    let mut ops: Vec<FileOp> = Vec::new();
    for op in FileTraceReader::open(&a.trace)? {
        ops.push(op?);
        if a.max_ops.is_some_and(|m| ops.len() >= m) {
            break;
        }
    }
    if ops.is_empty() {
        bail!("{}: no operations", a.trace.display());
    }
    let setup = match a.measure_from.as_str() {
        "auto" => tierwise_sim::filetrace::setup_len(&ops),
        n => n
            .parse::<usize>()
            .ok()
            .filter(|&n| n < ops.len())
            .with_context(|| format!("--measure-from {n}: `auto` or an operation index below {}", ops.len()))?,
    };
    let mount = mount_of(&dir);
    // The simulation, first: it is quick, and a bad --sim spec should fail before the replay.
    let sim_arch = a.sim.clone().or_else(|| mount.as_ref().map(|(_, s)| s.policy.clone()));
    let simulated = match (&sim_arch, a.no_sim) {
        (Some(arch), false) => Some(simulate(&a, arch, mount.as_ref().map(|(_, s)| s), &ops, setup, bars)?),
        _ => None,
    };
    if setup > 0 {
        let bar = bars.counter("setup (not measured)");
        let report = replay_dir(&dir, &ops[..setup], a.workers, &|done| bar.step("operations", done as usize, setup));
        bar.done();
        if report.all.errors > 0 {
            bail!(
                "the setup phase failed ({} errors; the first: {})",
                report.all.errors,
                report.first_errors.join("; ")
            );
        }
    }
    let before = mount.as_ref().map(|(root, _)| root).and_then(|r| mount_of(r)).map(|(_, s)| s.session);
    let bar = bars.counter("replay");
    let run = &ops[setup..];
    let total = run.len();
    let measured = replay_dir(&dir, run, a.workers, &|done| bar.step("operations", done as usize, total));
    bar.done();
    if setup > 0 {
        println!("setup: the first {setup} operations were replayed first and are not measured (--measure-from)");
    }
    let mount_delta = match (&mount, before) {
        (Some((root, _)), Some(before)) => mount_of(root).map(|(_, after)| MountDelta {
            policy: after.policy.clone(),
            emulation: after.emulation.clone(),
            counters: after.session.since(&before),
        }),
        _ => None,
    };
    print_side_by_side(&measured, mount_delta.as_ref(), simulated.as_ref());
    if let Some(p) = &a.json {
        let out = SideBySide { measured, mount: mount_delta, simulated };
        std::fs::write(p, serde_json::to_string_pretty(&out)?).with_context(|| format!("writing {}", p.display()))?;
    }
    Ok(())
}

fn simulate(
    a: &ReplayArgs,
    arch: &str,
    snap: Option<&Snapshot>,
    ops: &[FileOp],
    setup: usize,
    bars: &Bars,
) -> Result<SimReport> {
    file_arch_allowed(arch)?;
    let ssd_bytes = match (&a.ssd, snap) {
        (Some(s), _) => tierwise_core::params::parse_size(s).map_err(|e| anyhow::anyhow!("--ssd {s}: {e}"))?,
        (None, Some(s)) => s.ssd_quota.saturating_sub(s.pin_reserve),
        (None, None) => {
            bail!("--ssd SIZE: the SSD size to simulate (not a tierwise mount, so it cannot be read from one)")
        }
    };
    let hdd = a.hdd.clone().or_else(|| snap.and_then(|s| s.emulate_hdd.clone())).unwrap_or_else(|| "wd5000aaks".into());
    let ssd =
        a.ssd_model.clone().or_else(|| snap.and_then(|s| s.emulate_ssd.clone())).unwrap_or_else(|| "vertex3".into());
    let mut cfg = FileSimConfig::new(arch, ssd_bytes);
    cfg.devices = load_presets(a.devices.as_deref())?.set(&hdd, &ssd, "ddr3")?;
    // The mount has no buffer cache of its own and places files, not directories.
    cfg.ram_bytes = 0;
    cfg.dirs = false;
    cfg.timing = Timing::Closed { depth: a.workers as u32 };
    cfg.measure_from = setup as u64;
    // The mount's mover runs one move at a time; accesses meanwhile find files where they were.
    cfg.movers = 1;
    cfg.front_end = front_end_cost(&a.fuse_request_cost, snap)?;
    let emulated = snap.filter(|s| s.emulate_hdd.is_some());
    if let Some(s) = emulated {
        // Predict the device the mount has: its emulated HDD sits behind the queue its label
        // names, and each file has a 64 MiB region.
        cfg.hdd_queue = crate::cmd::replay_nbd::prediction_queue(a.hdd_queue.as_deref(), &s.emulation)?;
        cfg.region_bytes = 64 << 20;
    }
    let spinner = crate::progress::Spinner::new(bars, &format!("simulating {arch}"));
    let mut sim = FileSim::new(&cfg, &a.trace.display().to_string())?;
    for op in ops {
        sim.op(op)?;
    }
    let mut r = sim.finish()?;
    spinner.done();
    r.notes.push(format!(
        "devices: hdd {hdd}, ssd {ssd}; closed loop of {}; one move at a time, as the mount's mover",
        a.workers
    ));
    if let Some(f) = cfg.front_end {
        r.notes.push(format!(
            "front end: {} µs per FUSE request ({}), added to each operation",
            f.per_request.0 / 1000,
            if f.data_requests {
                "regular I/O: opens, data, flushes, releases"
            } else {
                "passthrough: opens, flushes, releases"
            }
        ));
    }
    if emulated.is_some() {
        r.notes.push(format!(
            "the mount emulates its HDD behind a {} queue with 64 MiB per file: simulated the same (--hdd-queue {0})",
            cfg.hdd_queue.scheduler.label()
        ));
    }
    Ok(r)
}

/// A FUSE request's cost as the model adds it, calibrated on this machine: the SSD-only Zipf
/// web server (`bench-webserver.sh on-demand-caching 0.02 400`, regular I/O, 4.12 requests per
/// operation) measured 7,364 ops/s against 10,371 predicted with no front end; 60 µs per
/// request brings the prediction to 7,514 against 7,543 measured. It is more than the ~38 µs a
/// request adds to one operation alone, because the time is added after the operation's I/O,
/// where queueing on the SSD absorbs part of it (docs/PERFORMANCE.md, issue 16). Rechecked
/// after the pieces of a read were told in turn: 7,269 predicted against 7,338-7,579 measured.
const CALIBRATED_FUSE_REQUEST: tierwise_core::Nanos = tierwise_core::Nanos(60_000);

/// The front end the prediction models: `auto` is the calibrated cost on a tierwise mount
/// (its data path decides whether data requests reach the daemon), nothing elsewhere.
fn front_end_cost(arg: &str, snap: Option<&Snapshot>) -> Result<Option<FrontEndCost>> {
    let per_request = match arg {
        "auto" if snap.is_some() => CALIBRATED_FUSE_REQUEST,
        "auto" => return Ok(None),
        v => tierwise_core::params::parse_duration(v)
            .map_err(|e| anyhow::anyhow!("--fuse-request-cost {v}: {e} (a duration such as 38us, `auto` or 0)"))?,
    };
    if per_request == tierwise_core::Nanos::ZERO {
        return Ok(None);
    }
    let data_requests = snap.is_none_or(|s| !s.data_path.starts_with("passthrough"));
    Ok(Some(FrontEndCost { per_request, data_requests, max_request: 128 << 10 }))
}

/// The share of the engine's read accesses served by the SSD (or a RAM level above it), the
/// mount's `hit_ratio` definition.
fn engine_read_share(s: &SimReport) -> f64 {
    let r = s.engine.reads_by_level;
    let all = r.iter().sum::<u64>();
    if all == 0 { 0.0 } else { (r[0] + r[1]) as f64 / all as f64 }
}

fn print_side_by_side(m: &ReplayReport, mount: Option<&MountDelta>, sim: Option<&SimReport>) {
    let dash = || "-".to_string();
    let mut rows: Vec<(&str, String, String)> = vec![
        ("operations", m.ops.to_string(), sim.map_or_else(dash, |s| s.requests.to_string())),
        ("ops/s", format!("{:.0}", m.ops_per_s), sim.map_or_else(dash, |s| format!("{:.0}", s.iops))),
        (
            "mean latency",
            format!("{:.0} µs", m.all.mean_us),
            sim.map_or_else(dash, |s| format!("{:.0} µs", s.latency.mean_us)),
        ),
        (
            "p50 / p95 / p99",
            format!("{:.0} / {:.0} / {:.0} µs", m.all.p50_us, m.all.p95_us, m.all.p99_us),
            sim.map_or_else(dash, |s| {
                format!("{:.0} / {:.0} / {:.0} µs", s.latency.p50_us, s.latency.p95_us, s.latency.p99_us)
            }),
        ),
    ];
    let c = mount.map(|d| &d.counters);
    let kind = |s: &SimReport, k: tierwise_core::WorkKind| s.engine.done(k).to_string();
    use tierwise_core::WorkKind as K;
    rows.extend([
        (
            "reads served by the SSD",
            c.map_or_else(dash, |c| format!("{:.1}%", 100.0 * c.hit_ratio())),
            // Counted as the mount counts it: the engine's read accesses (one per FUSE data
            // request on regular I/O), not operations.
            sim.map_or_else(dash, |s| format!("{:.1}%", 100.0 * engine_read_share(s))),
        ),
        (
            "promotions",
            c.map_or_else(dash, |c| c.promotions.to_string()),
            sim.map_or_else(dash, |s| kind(s, K::Promote)),
        ),
        ("demotions", c.map_or_else(dash, |c| c.demotions.to_string()), sim.map_or_else(dash, |s| kind(s, K::Demote))),
        ("copies into SSD", c.map_or_else(dash, |c| c.copies.to_string()), sim.map_or_else(dash, |s| kind(s, K::Copy))),
        (
            "write-backs",
            c.map_or_else(dash, |c| c.writebacks.to_string()),
            sim.map_or_else(dash, |s| kind(s, K::Writeback)),
        ),
        (
            "bytes moved",
            c.map_or_else(dash, |c| Bytes(c.bytes_moved).to_string()),
            sim.map_or_else(dash, |s| Bytes(s.engine.total_bytes_moved()).to_string()),
        ),
    ]);
    let measured_label = match mount {
        Some(d) if d.emulation.is_empty() => format!("measured ({})", d.policy),
        Some(d) => format!("measured ({}, emulated)", d.policy),
        None => "measured".to_string(),
    };
    let sim_label = sim.map_or("simulated".to_string(), |s| format!("simulated ({})", s.arch));
    println!("{:<26} {:>30} {:>30}", "", measured_label, sim_label);
    for (name, a, b) in rows {
        println!("{name:<26} {a:>30} {b:>30}");
    }
    if let Some(d) = mount {
        for e in &d.emulation {
            println!("EMULATION: {e}");
        }
    }
    if let Some(s) = sim {
        for n in &s.notes {
            println!("sim note: {n}");
        }
        if s.iops > 0.0 {
            println!("measured / simulated ops/s: {:.2}", m.ops_per_s / s.iops);
        }
    }
    if m.all.errors > 0 {
        println!("{} operations failed; the first: {}", m.all.errors, m.first_errors.join("; "));
    }
}
