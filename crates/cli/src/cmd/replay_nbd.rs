//! `tierwise replay --nbd URI TRACE`: a block trace replayed against a served device with N
//! requests outstanding (one NBD connection each), measured, and beside it the simulator's
//! prediction for the same requests, architecture and (emulated) devices: the same policy code
//! predicting and running.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use serde::Serialize;
use tierwise_core::Nanos;
use tierwise_nbd_client::NbdClient;
use tierwise_sim::device::{QueueConfig, Scheduler};
use tierwise_sim::objects::ObjectMode;
use tierwise_sim::trace::{IoOp, OpenOptions, TraceRecord, open_bytes, open_trace};
use tierwise_sim::{SimConfig, Timing};

use crate::progress::Bars;

/// What `replay --nbd` needs.
pub(crate) struct NbdReplay<'a> {
    pub(crate) uri: &'a str,
    pub(crate) trace: &'a Path,
    pub(crate) workers: usize,
    pub(crate) max_ops: Option<usize>,
    pub(crate) control: Option<PathBuf>,
    pub(crate) no_sim: bool,
    pub(crate) json: Option<&'a Path>,
    /// `--nbd-request-cost`.
    pub(crate) request_cost: &'a str,
    /// `--nbd-cores`.
    pub(crate) cores: &'a str,
    /// `--hdd`, `--ssd-model`: the prediction's presets instead of the emulated devices'.
    pub(crate) hdd: Option<&'a str>,
    pub(crate) ssd_model: Option<&'a str>,
    /// `--devices`: presets merged over the built-in ones.
    pub(crate) devices: Option<&'a Path>,
    /// `--hdd-queue`: the prediction's HDD queue instead of the emulated HDD's.
    pub(crate) hdd_queue: Option<&'a str>,
}

/// An NBD request's cost outside the devices as the prediction adds it, calibrated on this
/// machine: `linear` on a 256 MiB device held by an emulated vertex3 SSD (every request on the
/// SSD), 20,000 Zipf requests, one and two outstanding, measured a p50 of 127 µs against
/// 97.3 µs predicted with no front end, the emulation's waits within 2 µs of the model's. At
/// four outstanding the host's two cores are busy with client and server threads and requests
/// take longer still (docs/PERFORMANCE.md, stop 29).
const CALIBRATED_NBD_REQUEST: Nanos = Nanos(30_000);

/// The front end the prediction models (`--nbd-request-cost`).
fn front_end_cost(arg: &str) -> Result<Nanos> {
    match arg {
        "auto" => Ok(CALIBRATED_NBD_REQUEST),
        v => tierwise_core::params::parse_duration(v)
            .map_err(|e| anyhow::anyhow!("--nbd-request-cost {v}: {e} (a duration such as 40us, `auto` or 0)")),
    }
}

/// The cores doing the front end's work (`--nbd-cores`): `auto` is this host's.
fn front_end_cores(arg: &str) -> Result<u32> {
    match arg {
        "auto" => Ok(std::thread::available_parallelism().map_or(1, |n| n.get() as u32)),
        v => v
            .parse()
            .map_err(|_| anyhow::anyhow!("--nbd-cores {v}: expected `auto` or a number of cores (0: no limit)")),
    }
}

/// One replayed request.
#[derive(Clone, Copy, Debug)]
struct Req {
    write: bool,
    offset: u64,
    len: u64,
}

/// Measured throughput and latency.
#[derive(Serialize, Debug, Default)]
struct Measured {
    requests: u64,
    seconds: f64,
    iops: f64,
    mb_s: f64,
    p50_us: f64,
    p95_us: f64,
    p99_us: f64,
    /// Reads the device served from the SSD, as a share of all its reads (from its counters).
    ssd_read_share: Option<f64>,
    errors: u64,
}

#[derive(Serialize)]
struct Report {
    uri: String,
    trace: String,
    workers: usize,
    /// Requests moved to fit the device (offsets beyond it wrap around).
    wrapped: u64,
    policy: Option<String>,
    emulation: Vec<String>,
    /// The prediction's time per request outside the devices (`--nbd-request-cost`).
    front_end_us: f64,
    /// The cores doing that work (`--nbd-cores`; 0: no limit).
    front_end_cores: u32,
    /// The HDD queue of the prediction: the emulated HDD's (`fifo` when none is emulated).
    hdd_queue: String,
    measured: Measured,
    predicted: Option<tierwise_sim::metrics::SimReport>,
}

/// Wrapping keeps offsets' alignment to this many bytes (a power of two).
const WRAP_UNIT: u64 = 1 << 20;

fn load(trace: &Path, size: u64, max: Option<usize>) -> Result<(Vec<Req>, u64)> {
    let mut t = open_trace(trace, &OpenOptions::default())?;
    let mut rec = TraceRecord::default();
    let mut recs = Vec::new();
    while t.next(&mut rec)? {
        if rec.len == 0 {
            continue;
        }
        recs.push(rec);
        if max.is_some_and(|m| recs.len() >= m) {
            break;
        }
    }
    // Volumes one after another, as the simulator lays them out.
    let layout = tierwise_sim::layout::VolumeLayout::from_extents(
        recs.iter().map(|r| (u64::from(r.volume), r.offset.saturating_add(r.len))),
    );
    let mut wrapped = 0;
    let out = recs
        .iter()
        .map(|r| {
            let len = r.len.min(size).min(32 << 20);
            let logical = tierwise_core::ObjectId::block_of(u64::from(r.volume), 0).0
                | (r.offset & tierwise_core::ObjectId::BLOCK_MASK);
            let at = layout.physical(logical) / 512 * 512;
            let offset = wrap(at, len, size);
            if offset != at {
                wrapped += 1;
            }
            Req { write: r.op == IoOp::Write, offset, len }
        })
        .collect();
    Ok((out, wrapped))
}

/// `at` moved into a device of `size` bytes by whole [`WRAP_UNIT`]s, so that a request keeps
/// its alignment (a modulus that depended on the request's length once left 9,972 of 10,000
/// requests of a cloud trace misaligned); one that still overhangs the end moves down by whole
/// units, or to 0 when the device is smaller than a unit.
fn wrap(at: u64, len: u64, size: u64) -> u64 {
    let span = size / WRAP_UNIT * WRAP_UNIT;
    if at + len <= size {
        return at;
    }
    if span == 0 {
        return (size - len) / 512 * 512;
    }
    let mut off = at % span;
    if off + len > size {
        off = off.saturating_sub((off + len - size).div_ceil(WRAP_UNIT) * WRAP_UNIT);
    }
    off
}

/// The same requests as an MSR trace, for the simulator (one volume, the device's addresses).
fn as_msr(reqs: &[Req]) -> Vec<u8> {
    let mut s = String::with_capacity(reqs.len() * 48);
    for (i, r) in reqs.iter().enumerate() {
        let kind = if r.write { "Write" } else { "Read" };
        s.push_str(&format!("{},replay,0,{kind},{},{},0\n", 128_166_372_000_000_000u64 + i as u64, r.offset, r.len));
    }
    s.into_bytes()
}

fn ask_stats(control: &Path) -> Option<serde_json::Value> {
    use std::io::{BufRead, BufReader, Write};
    let mut s = std::os::unix::net::UnixStream::connect(control).ok()?;
    writeln!(s, "stats").ok()?;
    let mut line = String::new();
    BufReader::new(&s).read_line(&mut line).ok()?;
    serde_json::from_str(&line).ok()
}

fn percentile(sorted: &[u32], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    f64::from(sorted[i.min(sorted.len() - 1)])
}

/// The emulated preset named in a label such as `hdd wd5000aaks (emulated: ...)`.
fn preset_of(emulation: &[String], kind: &str) -> Option<String> {
    emulation.iter().find_map(|l| l.strip_prefix(&format!("{kind} "))?.split_whitespace().next().map(str::to_string))
}

/// The emulated HDD's request queue, from its label ("hdd PRESET (emulated: …; mq-deadline
/// queue)"); a label without one serves in arrival order (fifo), as before queues were emulated.
pub(crate) fn hdd_queue_of(emulation: &[String]) -> QueueConfig {
    emulation
        .iter()
        .filter(|l| l.starts_with("hdd "))
        .find_map(|l| l.strip_suffix(" queue)")?.rsplit("; ").next().and_then(|q| QueueConfig::parse(q).ok()))
        .unwrap_or(QueueConfig { scheduler: Scheduler::Fifo, ..QueueConfig::default() })
}

/// The prediction's HDD queue: `--hdd-queue` when given, else the emulated HDD's.
pub(crate) fn prediction_queue(given: Option<&str>, emulation: &[String]) -> Result<QueueConfig> {
    match given {
        Some(q) => QueueConfig::parse(q).map_err(|e| anyhow::anyhow!("--hdd-queue {q}: {e}")),
        None => Ok(hdd_queue_of(emulation)),
    }
}

/// `tierwise replay --nbd`.
pub(crate) fn cmd_replay_nbd(a: NbdReplay<'_>, bars: &Bars) -> Result<()> {
    if a.workers == 0 {
        bail!("--workers 0: expected at least 1");
    }
    let front_end = front_end_cost(a.request_cost)?;
    let cores = front_end_cores(a.cores)?;
    let probe = NbdClient::connect(a.uri).with_context(|| format!("connecting to {}", a.uri))?;
    let size = probe.size();
    probe.disconnect()?;
    let control = a.control.clone().or_else(|| {
        let socket = a.uri.split_once("socket=")?.1;
        Some(PathBuf::from(format!("{socket}.control")))
    });
    let before = control.as_deref().and_then(ask_stats);
    let policy = before.as_ref().and_then(|v| v["spec"].as_str().map(str::to_string));
    let emulation: Vec<String> = before
        .as_ref()
        .and_then(|v| v["emulation"].as_array().cloned())
        .unwrap_or_default()
        .iter()
        .filter_map(|l| l.as_str().map(str::to_string))
        .collect();
    let block = before.as_ref().and_then(|v| v["block_size"].as_u64()).unwrap_or(4096);
    let (reqs, wrapped) = load(a.trace, size, a.max_ops)?;
    if reqs.is_empty() {
        bail!("{}: no requests", a.trace.display());
    }
    // The prediction first: quick, and a problem with it shows before the run.
    let predicted = match (&policy, a.no_sim) {
        (Some(spec), false) => {
            let served = Served { block, front_end, cores, size };
            Some(predict(spec, &reqs, &emulation, before.as_ref(), &served, &a)?)
        }
        _ => None,
    };
    let bar = bars.counter("replay");
    let next = AtomicUsize::new(0);
    let latencies = Mutex::new(Vec::with_capacity(reqs.len()));
    let errors = AtomicUsize::new(0);
    let first_error = Mutex::new(None::<String>);
    let max_len = reqs.iter().map(|r| r.len).max().unwrap_or(0) as usize;
    let start = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..a.workers {
            s.spawn(|| {
                let mut c = match NbdClient::connect(a.uri) {
                    Ok(c) => c,
                    Err(e) => {
                        errors.fetch_add(1, Ordering::Relaxed);
                        *first_error.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(e.to_string());
                        return;
                    }
                };
                let mut buf = vec![0x5au8; max_len];
                let mut mine = Vec::new();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(r) = reqs.get(i) else { break };
                    let t = Instant::now();
                    let b = &mut buf[..r.len as usize];
                    let res = if r.write { c.write(b, r.offset, false) } else { c.read(b, r.offset) };
                    mine.push(t.elapsed().as_micros().min(u128::from(u32::MAX)) as u32);
                    if let Err(e) = res {
                        errors.fetch_add(1, Ordering::Relaxed);
                        first_error
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner)
                            .get_or_insert(e.to_string());
                    }
                    if i.is_multiple_of(1024) {
                        bar.step("requests", i, reqs.len());
                    }
                }
                latencies.lock().unwrap_or_else(std::sync::PoisonError::into_inner).extend(mine);
                let _ = c.disconnect();
            });
        }
    });
    let seconds = start.elapsed().as_secs_f64();
    bar.done();
    if let Some(e) = first_error.into_inner().unwrap_or(None) {
        eprintln!("warning: {} requests failed; the first: {e}", errors.load(Ordering::Relaxed));
    }
    let mut lat = latencies.into_inner().unwrap_or_default();
    lat.sort_unstable();
    let bytes: u64 = reqs.iter().map(|r| r.len).sum();
    let after = control.as_deref().and_then(ask_stats);
    let ssd_read_share = match (&before, &after) {
        (Some(b), Some(a)) => {
            let d = |i: usize| {
                a["device"]["reads_by_level"][i].as_u64().unwrap_or(0)
                    - b["device"]["reads_by_level"][i].as_u64().unwrap_or(0)
            };
            // As the simulator counts it: a share of all reads, RAM hits included.
            let (ram, ssd, hdd) = (d(0), d(1), d(2));
            (ram + ssd + hdd > 0).then(|| ssd as f64 / (ram + ssd + hdd) as f64)
        }
        _ => None,
    };
    let measured = Measured {
        requests: reqs.len() as u64,
        seconds,
        iops: reqs.len() as f64 / seconds,
        mb_s: bytes as f64 / 1e6 / seconds,
        p50_us: percentile(&lat, 0.5),
        p95_us: percentile(&lat, 0.95),
        p99_us: percentile(&lat, 0.99),
        ssd_read_share,
        errors: errors.load(Ordering::Relaxed) as u64,
    };
    let hdd_queue = prediction_queue(a.hdd_queue, &emulation)?.label();
    let report = Report {
        uri: a.uri.to_string(),
        trace: a.trace.display().to_string(),
        workers: a.workers,
        wrapped,
        policy,
        emulation,
        front_end_us: front_end.0 as f64 / 1e3,
        front_end_cores: cores,
        hdd_queue,
        measured,
        predicted,
    };
    print_report(&report);
    if let Some(path) = a.json {
        crate::write_file(path, serde_json::to_string_pretty(&report)?.as_bytes())?;
    }
    Ok(())
}

/// What the prediction models of the served device besides its policy.
#[derive(Clone, Copy)]
struct Served {
    /// Its block size.
    block: u64,
    /// Time per request outside the devices, and the cores that do it.
    front_end: Nanos,
    cores: u32,
    /// The exported size: the HDD image's data, after which its checkpoint replica sits.
    size: u64,
}

fn predict(
    spec: &str,
    reqs: &[Req],
    emulation: &[String],
    stats: Option<&serde_json::Value>,
    served: &Served,
    a: &NbdReplay<'_>,
) -> Result<tierwise_sim::metrics::SimReport> {
    let Served { block, front_end, cores, size } = *served;
    let (workers, trace) = (a.workers, a.trace);
    let ssd_bytes = stats.and_then(|v| v["device"]["ssd_capacity"].as_u64()).unwrap_or(0);
    let presets = tierwise_sim::jobs::load_presets(a.devices)?;
    let hdd = a.hdd.map(str::to_string).or_else(|| preset_of(emulation, "hdd")).unwrap_or_else(|| "wd5000aaks".into());
    let ssd =
        a.ssd_model.map(str::to_string).or_else(|| preset_of(emulation, "ssd")).unwrap_or_else(|| "vertex3".into());
    let mut cfg = SimConfig::new(spec, ssd_bytes);
    cfg.devices = presets.set(&hdd, &ssd, "ddr3")?;
    // Under `serve --direct` the images see aligned commands and read-modify-writes.
    if stats.and_then(|v| v["direct_io"].as_bool()).unwrap_or(false) {
        cfg.devices.io_align = tierwise_block::direct::ALIGN;
    }
    cfg.objects = ObjectMode::parse(&format!("blocks:{block}@0")).map_err(anyhow::Error::msg)?;
    cfg.timing = Timing::Closed { depth: workers as u32 };
    // The daemon's emulated HDD sits behind the queue its label names, as the simulator's does.
    cfg.hdd_queue = prediction_queue(a.hdd_queue, emulation)?;
    cfg.spin_down = None::<Nanos>;
    // As many moves at once as the device's movers run.
    cfg.movers = stats.and_then(|v| v["movers"].as_u64()).unwrap_or(0) as u32;
    cfg.front_end = front_end;
    cfg.front_end_cores = cores;
    // The served device's counters are read as the replay ends, its movers still busy.
    cfg.stop_at_last_request = true;
    // It commits its slot table once a second while the table changes: two syncs of each
    // image around a checkpoint written to both; and at once when a copy finds every free slot
    // waiting for a commit (its slots: the capacity and a spare).
    cfg.metadata_commits = Some(tierwise_sim::MetadataCommits {
        interval: Nanos::from_secs(1),
        hdd_addr: size,
        ssd_addr: tierwise_block::format::SUPER_LEN,
        slots: stats.and_then(|v| v["device"]["slots"].as_u64()).unwrap_or(0),
    });
    let mut t =
        open_bytes("replay.msr.csv", as_msr(reqs), &OpenOptions { format: Some("msr".into()), skip_bad_lines: false })?;
    let mut report = tierwise_sim::simulate(&mut t, &cfg, &mut tierwise_sim::sim::NoProgress)?;
    report.trace = trace.display().to_string();
    Ok(report)
}

fn print_report(r: &Report) {
    let m = &r.measured;
    println!("replay of {} against {} ({} requests, {} outstanding)", r.trace, r.uri, m.requests, r.workers);
    if let Some(p) = &r.policy {
        println!("policy    {p}");
    }
    if r.emulation.is_empty() {
        println!("devices   the images' real storage (not emulated); the prediction assumes the preset devices");
    }
    for e in &r.emulation {
        println!("EMULATED  {e}");
    }
    if let Some(p) = &r.predicted {
        println!(
            "predicted on {} with {:.0} µs per request outside the devices (--nbd-request-cost) on {} (--nbd-cores), the HDD behind a {} queue",
            p.devices,
            r.front_end_us,
            match r.front_end_cores {
                0 => "any number of cores".to_string(),
                1 => "1 core".to_string(),
                n => format!("{n} cores"),
            },
            r.hdd_queue
        );
    }
    if r.wrapped > 0 {
        println!("note      {} requests beyond the device wrapped around into it", r.wrapped);
    }
    println!("{:<22} {:>14} {:>14} {:>8}", "", "measured", "predicted", "ratio");
    let row = |name: &str, got: f64, want: Option<f64>| match want {
        Some(w) if w > 0.0 => println!("{name:<22} {got:>14.1} {w:>14.1} {:>8.2}", got / w),
        _ => println!("{name:<22} {got:>14.1} {:>14} {:>8}", "-", "-"),
    };
    let p = r.predicted.as_ref();
    row("IOPS", m.iops, p.map(|p| p.iops));
    row("MB/s", m.mb_s, p.map(|p| p.mb_s));
    row("p50 latency (us)", m.p50_us, p.map(|p| p.latency.p50_us));
    row("p95 latency (us)", m.p95_us, p.map(|p| p.latency.p95_us));
    row("p99 latency (us)", m.p99_us, p.map(|p| p.latency.p99_us));
    if let Some(share) = m.ssd_read_share {
        row("SSD share of reads %", share * 100.0, p.map(|p| p.read_hit.ssd * 100.0));
    }
    if m.errors > 0 {
        println!("errors    {}", m.errors);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prediction_takes_the_emulated_hdds_queue_from_its_label() {
        let label = |q: &str| {
            vec!["ssd vertex3 (emulated: x)".to_string(), format!("hdd wd5000aaks (emulated: WD; {q} queue)")]
        };
        assert_eq!(hdd_queue_of(&label("mq-deadline")), QueueConfig::default());
        assert_eq!(hdd_queue_of(&label("none")).scheduler, Scheduler::None);
        assert_eq!(hdd_queue_of(&["hdd wd5000aaks (emulated: WD Caviar Blue)".to_string()]).scheduler, Scheduler::Fifo);
        assert_eq!(hdd_queue_of(&[]).scheduler, Scheduler::Fifo);
        // The knobs come back too.
        let q = hdd_queue_of(&label("mq-deadline:fifo_batch=1"));
        assert_eq!((q.scheduler, q.fifo_batch, q.writes_starved), (Scheduler::MqDeadline, 1, 2));
    }

    /// Offsets past the device wrap by whole MiB: 4 KiB-aligned requests stay aligned, and
    /// every request fits.
    #[test]
    fn wrapping_keeps_alignment_and_fits() {
        let size = 100 << 20;
        assert_eq!(wrap(8192, 4096, size), 8192, "inside: unchanged");
        for (at, len) in
            [(3 << 30, 4096), ((5 << 30) + 12_288, 65_536), ((1 << 40) + 4096 * 7, 16_384), (size - 4096, 8192)]
        {
            let off = wrap(at, len, size);
            assert!(off + len <= size, "{at}+{len} -> {off}");
            assert_eq!(off % 4096, at % 4096, "{at}: alignment kept");
        }
        assert_eq!(wrap(10 << 20, 4096, 512 << 10), (512 << 10) - 4096, "a device smaller than a unit");
    }
}
