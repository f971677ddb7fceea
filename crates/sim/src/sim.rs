//! The simulator: replays a trace through the engine and, in timed modes, through the device
//! models.
//!
//! - `Timing::None` counts hits only; background work completes at once (libCacheSim's model).
//! - `Timing::Open` replays at the trace's timestamps (divided by a speed-up factor).
//! - `Timing::Closed` keeps a fixed number of requests outstanding, as fast as the devices allow.
//!
//! In timed modes the simulator is event-driven. A request's pieces go to the devices first
//! (adjacent pieces on the same device merge into one device request); the work the engine
//! issued then runs in the background: the source device reads, then the destination writes,
//! each in the devices' FIFO queues, so moves delay foreground I/O as they would for real. A
//! move's completion is reported to the engine when its write finishes.

use std::sync::Arc;
use std::time::Instant;

use tierwise_core::arch::CostClass;
use tierwise_core::collector::belady;
use tierwise_core::{
    Clock, ConfigError, Engine, Level, ManualClock, Nanos, Outcome, Setup, Work, build_arch, extent_size_of,
};

use crate::device::{DeviceSet, QueueConfig};
use crate::layout::VolumeLayout;
use crate::metrics::{Cost, Endurance, HcaMetrics, HitRatios, SimReport};
use crate::objects::{Mapper, ObjectMode};
use crate::trace::{IoOp, Trace, TraceError, TraceRecord};

/// How simulated time advances.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Timing {
    /// Hit counting only.
    None,
    /// Trace timestamps divided by `speedup`.
    Open {
        /// Replay speed-up factor (> 0).
        speedup: f64,
    },
    /// `depth` requests outstanding.
    Closed {
        /// Outstanding requests (>= 1).
        depth: u32,
    },
}

impl Timing {
    /// Short label.
    pub fn label(&self) -> String {
        match self {
            Timing::None => "none".into(),
            Timing::Open { speedup } => format!("open(x{speedup})"),
            Timing::Closed { depth } => format!("closed({depth})"),
        }
    }

    /// Parses `none`, `open`, `open:SPEEDUP`, `closed` or `closed:DEPTH`.
    pub fn parse(s: &str) -> Result<Timing, String> {
        let (name, arg) = s.split_once(':').unwrap_or((s, ""));
        match name {
            "none" | "hits" if arg.is_empty() => Ok(Timing::None),
            "open" => {
                let speedup = if arg.is_empty() {
                    1.0
                } else {
                    arg.parse().map_err(|_| format!("open:{arg}: expected a speed-up factor"))?
                };
                if !(speedup > 0.0 && f64::is_finite(speedup)) {
                    return Err("open: the speed-up factor must be positive".into());
                }
                Ok(Timing::Open { speedup })
            }
            "closed" => {
                let depth = if arg.is_empty() {
                    32
                } else {
                    arg.parse().map_err(|_| format!("closed:{arg}: expected a queue depth"))?
                };
                if depth == 0 {
                    return Err("closed: the queue depth must be at least 1".into());
                }
                Ok(Timing::Closed { depth })
            }
            _ => Err(format!("unknown timing `{s}`: expected none, open[:SPEEDUP] or closed[:DEPTH]")),
        }
    }
}

/// What to simulate.
#[derive(Clone, Debug)]
pub struct SimConfig {
    /// Architecture spec.
    pub arch: String,
    /// SSD bytes for the architecture.
    pub ssd_bytes: u64,
    /// Object mapping.
    pub objects: ObjectMode,
    /// Timing.
    pub timing: Timing,
    /// Devices.
    pub devices: DeviceSet,
    /// HDD spin-down after this idle time (None: never).
    pub spin_down: Option<Nanos>,
    /// Endurance read weight (GreenDM r: 1/10 or 1/100).
    pub read_weight: f64,
    /// Write back all dirty data at the end (its cost is not in the response times).
    pub flush_at_end: bool,
    /// Timed runs: the devices' counters stop when the last request completes, and background
    /// work still queued then is left undone, as a served device's counters read right after a
    /// replay are (`replay --nbd`). Otherwise (the default) work in flight finishes first.
    pub stop_at_last_request: bool,
    /// Stop after this many requests.
    pub max_requests: Option<u64>,
    /// Requests before this index warm the cache up and are not measured: counts, hit ratios,
    /// latencies, device I/O and the run's duration start at it (0: everything measured).
    /// Energy, power and endurance stay whole-run, as in the file simulator.
    pub measure_from: u64,
    /// Timed runs: admit no request that would arrive after this much simulated time.
    pub max_time: Option<Nanos>,
    /// Check the engine's invariants every this many requests (0: never).
    pub check_every: u64,
    /// Unique bytes of the trace, when known (for cost and the report).
    pub footprint_bytes: Option<u64>,
    /// The HDD's request queue (scheduler, merging, NCQ).
    pub hdd_queue: QueueConfig,
    /// Background work executing at once, at most (a served device's `--movers`); 0: all the
    /// work issued runs at once, as the papers' simulations assume.
    pub movers: u32,
    /// Time a request spends outside the devices, added after its device I/O: the protocol
    /// round trip and the client's wake-up of a served device (`replay --nbd`). Zero: none, as
    /// the papers' simulations assume.
    pub front_end: Nanos,
    /// Cores that do the `front_end` work (0: no limit). A served device's client and server
    /// share the host's cores: with N of them, at most N requests cross the front end at once,
    /// so a deep queue of fast requests waits for CPU rather than for the devices.
    pub front_end_cores: u32,
    /// Timed runs: a served device's metadata commits, charged to the devices (`replay --nbd`
    /// predicts with them); `None`: none, as the papers' simulations assume.
    pub metadata_commits: Option<crate::MetadataCommits>,
    /// Where the trace's volumes sit on the HDD ([`footprint_and_layout`] finds it; empty:
    /// volume 0 at 0, others 1 TiB apart).
    pub volumes: VolumeLayout,
}

impl SimConfig {
    /// A configuration with the paper presets, hit counting, 4 KiB blocks.
    pub fn new(arch: &str, ssd_bytes: u64) -> SimConfig {
        SimConfig {
            arch: arch.to_string(),
            ssd_bytes,
            objects: ObjectMode::blocks(4096),
            timing: Timing::None,
            devices: DeviceSet::default(),
            spin_down: None,
            read_weight: 0.1,
            flush_at_end: false,
            stop_at_last_request: false,
            max_requests: None,
            measure_from: 0,
            max_time: None,
            check_every: 0,
            hdd_queue: QueueConfig::default(),
            footprint_bytes: None,
            movers: 0,
            front_end: Nanos::ZERO,
            front_end_cores: 0,
            metadata_commits: None,
            volumes: VolumeLayout::default(),
        }
    }
}

impl SimConfig {
    /// This configuration with requests split at the extent size the architecture's `es` or
    /// `sub-lun` knob names (when it differs from the block size given), and a note saying so.
    pub fn split_at_arch_extents(&self) -> (SimConfig, Option<String>) {
        match (self.objects, extent_size_of(&self.arch)) {
            (ObjectMode::Blocks { size, .. }, Some(es))
                if es != size && ObjectMode::parse(&format!("blocks:{es}")).is_ok() =>
            {
                let note = format!(
                    "requests split into {} extents, as the architecture's extent size asks (not {})",
                    tierwise_core::Bytes(es),
                    tierwise_core::Bytes(size)
                );
                (SimConfig { objects: self.objects.with_block_size(es), ..self.clone() }, Some(note))
            }
            _ => (self.clone(), None),
        }
    }
}

/// Simulation failures.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SimError {
    /// The trace could not be read.
    #[error(transparent)]
    Trace(#[from] TraceError),
    /// The architecture spec is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A device preset is invalid.
    #[error("device model: {0}")]
    Device(String),
    /// The engine broke an invariant (a bug; reported with the request number).
    #[error("engine invariant broken after request {request}: {message}")]
    Invariant {
        /// The request after which the check failed.
        request: u64,
        /// What is wrong.
        message: String,
    },
    /// The engine refused a completion (a bug).
    #[error("engine refused a completion: {0}")]
    Complete(String),
    /// The run cannot be done as asked (a block-level architecture on a file trace, say).
    #[error("{0}")]
    Unsupported(String),
    /// Internal: the replay reached `max_time` (never returned by [`simulate`]).
    #[doc(hidden)]
    #[error("simulated time limit reached")]
    TimeLimitReached,
}

/// Receives progress reports (every 64 Ki requests).
pub trait Progress {
    /// `records` requests done so far.
    fn update(&mut self, records: u64);
}

/// No progress reporting.
pub struct NoProgress;

impl Progress for NoProgress {
    fn update(&mut self, _records: u64) {}
}

/// Counters shared by the timed and untimed loops.
#[derive(Default)]
pub(crate) struct Tally {
    pub(crate) requests: u64,
    pub(crate) reads: u64,
    pub(crate) writes: u64,
    pub(crate) read_bytes: u64,
    pub(crate) write_bytes: u64,
    pub(crate) dropped: u64,
    pub(crate) accesses: u64,
    pub(crate) request_hits: u64,
    pub(crate) request_misses: u64,
}

impl Tally {
    #[inline]
    pub(crate) fn record(&mut self, rec: &TraceRecord) {
        self.requests += 1;
        match rec.op {
            IoOp::Read => {
                self.reads += 1;
                self.read_bytes += rec.len;
            }
            IoOp::Write => {
                self.writes += 1;
                self.write_bytes += rec.len;
            }
        }
    }
}

pub(crate) fn build_engine(
    cfg: &SimConfig,
    mapper: &Mapper,
    clock: &ManualClock,
) -> Result<Engine<ManualClock>, SimError> {
    let setup = Setup { fast_capacity: cfg.ssd_bytes, slow_capacity: 0, object_size: mapper.mode().object_size() };
    Ok(Engine::new(build_arch(&cfg.arch, &setup)?, clock.clone()))
}

/// Reads `trace` (up to `limit` requests) into memory and computes every access's future as
/// the simulation will number them (one engine access per piece the mapper splits out).
fn read_future(
    trace: &mut Trace,
    mapper: &Mapper,
    limit: Option<u64>,
) -> Result<(Arc<Vec<TraceRecord>>, Arc<belady::Future>), SimError> {
    let mut records = Vec::new();
    let mut objects = Vec::new();
    trace.for_each(limit.unwrap_or(u64::MAX), |rec| -> Result<(), TraceError> {
        records.push(*rec);
        mapper.split(rec, |p| objects.push(p.req.obj));
        Ok(())
    })?;
    Ok((Arc::new(records), Arc::new(belady::Future::new(&objects))))
}

/// What an offline optimum is for this architecture: a bound only for a cache that caches
/// every missed read.
fn offline_note(spec: &str) -> String {
    let plain_cache = spec.split(':').next() == Some("cache") && spec.contains("mode=read-only");
    if plain_cache {
        "collector=belady is offline (it knows the trace's future): for objects of one size in this read-only \
         cache it is the fewest misses any policy can have; with variable sizes it is a reference, not a bound"
            .into()
    } else {
        "collector=belady is offline (it knows the trace's future) and ranks by next access only: with writes, \
         write-back, admission or tiering it is a reference, not a bound"
            .into()
    }
}

/// Runs the simulation of `trace` under `cfg`.
pub fn simulate(trace: &mut Trace, cfg: &SimConfig, progress: &mut dyn Progress) -> Result<SimReport, SimError> {
    let wall = Instant::now();
    let name = cfg.arch.split(':').next().unwrap_or("");
    if tierwise_core::arch_info(name).is_ok_and(|a| !a.caps.runs_on_blocks()) {
        return Err(SimError::Unsupported(format!(
            "`{name}` is a file-level architecture: it places whole files whose sizes change, and a block \
             trace has none; run it on a file trace (`tierwise trace gen-files`, docs/FILE_TRACES.md)"
        )));
    }
    let mut notes = Vec::new();
    let (adjusted, note) = cfg.split_at_arch_extents();
    notes.extend(note);
    let cfg = &adjusted;
    let mapper = Mapper::new(cfg.objects, trace.info().object_trace);
    let clock = ManualClock::new();
    let mut in_memory;
    let (trace, mut engine) = if belady::spec_is_offline(&cfg.arch) {
        // An offline collector: read the trace once for every access's future, then replay it
        // from memory.
        let (records, future) = read_future(trace, &mapper, cfg.max_requests)?;
        in_memory = crate::trace::memory::memory_trace_like(records, trace);
        notes.push(offline_note(&cfg.arch));
        let engine = belady::provide_future(future, || build_engine(cfg, &mapper, &clock))?;
        (&mut in_memory, engine)
    } else {
        (trace, build_engine(cfg, &mapper, &clock)?)
    };
    // The simulator models no SSD layout: dropping a copy costs no device time. A served
    // device's slot quarantine counts the slots they unmap (`MetadataCommits::slots`).
    engine.set_report_invalidations(cfg.metadata_commits.is_some_and(|c| c.slots > 0));
    if mapper.mode() != cfg.objects {
        notes.push(format!("object trace: {} mode used instead of {}", mapper.mode().label(), cfg.objects.label()));
    }
    let mut timing = cfg.timing;
    if matches!(timing, Timing::Open { .. }) && !trace.info().has_time {
        timing = Timing::Closed { depth: 1 };
        notes.push("the trace has no timestamps: replayed closed-loop with 1 outstanding request".into());
    }
    if timing != Timing::None && cfg.volumes.volumes() > 1 {
        let hdd = cfg.devices.hdd.validate().unwrap_or(u64::MAX);
        let mut note = format!(
            "{} volumes laid out one after another on the HDD ({})",
            cfg.volumes.volumes(),
            tierwise_core::Bytes(cfg.volumes.bytes())
        );
        if cfg.volumes.bytes() > hdd {
            note += &format!(
                ", more than the HDD model's {}: addresses past it wrap around (a larger `--devices` HDD avoids it)",
                tierwise_core::Bytes(hdd)
            );
        }
        notes.push(note);
    }
    let mut report = match timing {
        Timing::None => {
            engine.set_instant(true);
            if engine.next_deadline().is_some() && !trace.info().has_time {
                notes.push(format!(
                    "the trace has no timestamps: the architecture's timers run at {} µs per request",
                    UNTIMED_STEP.0 / 1000
                ));
            }
            run_untimed(trace, cfg, &mapper, &mut engine, &clock, progress)?
        }
        _ => crate::timed::Timed::new(cfg, &mapper, &clock, timing)?.run(trace, cfg, &mut engine, progress)?,
    };
    report.notes.extend(notes);
    report.build = crate::stamp::build();
    report.arch = cfg.arch.clone();
    report.trace = trace.path().to_string();
    report.format = trace.info().name.to_string();
    report.objects = mapper.mode().label();
    report.timing = timing.label();
    report.devices = cfg.devices.label();
    report.ssd_bytes = cfg.ssd_bytes;
    report.footprint_bytes = cfg.footprint_bytes;
    report.skipped_lines = trace.skipped().0;
    report.arch_counters = engine.arch_counters().into_iter().map(|(k, v)| (k.to_string(), v)).collect();
    let usage = engine.usage();
    report.objects_tracked = usage.objects as u64;
    report.engine_memory_bytes = engine.memory_bytes() as u64;
    report.wall_s = wall.elapsed().as_secs_f64();
    Ok(report)
}

/// Counts of the measured requests; `st`: the engine's counters over the same window.
pub(crate) fn fill_counts(report: &mut SimReport, t: &Tally, st: &tierwise_core::EngineStats) {
    report.engine = st.clone();
    report.requests = t.requests;
    report.reads = t.reads;
    report.writes = t.writes;
    report.read_bytes = t.read_bytes;
    report.write_bytes = t.write_bytes;
    report.dropped = t.dropped;
    report.accesses = t.accesses;
    report.request_hits = t.request_hits;
    report.request_misses = t.request_misses;
    report.read_hit = HitRatios::of(st.reads_by_level);
    let mut all = st.reads_by_level;
    for (a, w) in all.iter_mut().zip(st.writes_by_level) {
        *a += w;
    }
    report.access_hit = HitRatios::of(all);
}

/// Completes every queued work item at once, repeatedly (hit-counting mode).
#[inline]
fn settle_instantly(engine: &mut Engine<ManualClock>, buf: &mut Vec<Work>) -> Result<(), SimError> {
    loop {
        buf.extend(engine.drain_work());
        if buf.is_empty() {
            return Ok(());
        }
        for w in buf.drain(..) {
            if w.kind.needs_completion() {
                engine.complete(w.id, Outcome::Done).map_err(|e| SimError::Complete(e.to_string()))?;
            }
        }
    }
}

/// Time per request for an untimed replay of a trace without timestamps, so that an
/// architecture's timers (feeds, intervals) still run.
const UNTIMED_STEP: Nanos = Nanos::from_millis(1);

/// Hit counting without device timing. The clock still follows the trace's timestamps (or
/// [`UNTIMED_STEP`] per request without them) and the architecture's timers fire on time.
fn run_untimed(
    trace: &mut Trace,
    cfg: &SimConfig,
    mapper: &Mapper,
    engine: &mut Engine<ManualClock>,
    clock: &ManualClock,
    progress: &mut dyn Progress,
) -> Result<SimReport, SimError> {
    let mut tally = Tally::default();
    let mut buf: Vec<Work> = Vec::with_capacity(64);
    let limit = cfg.max_requests.unwrap_or(u64::MAX);
    let has_time = trace.info().has_time;
    let timers = engine.next_deadline().is_some();
    let mut first_time: Option<u64> = None;
    let (mut seen, mut base) = (0u64, tierwise_core::EngineStats::default());
    trace.for_each_ahead(limit, (8, 24), |rec, near, far| -> Result<(), SimError> {
        if timers {
            let now = if has_time {
                let t0 = *first_time.get_or_insert(rec.time_ns);
                Nanos(rec.time_ns.saturating_sub(t0)).max(clock.now())
            } else {
                Nanos(UNTIMED_STEP.0.saturating_mul(seen))
            };
            while let Some(d) = engine.next_deadline().filter(|&d| d <= now) {
                clock.set(d.max(clock.now()));
                engine.tick();
                settle_instantly(engine, &mut buf)?;
                if engine.next_deadline().is_some_and(|n| n <= d) {
                    break; // a timer that does not move forward (contract violation): stop
                }
            }
            clock.set(now);
        }
        if seen == cfg.measure_from && seen > 0 {
            // The warm-up ends (with the timers due before this request): measure from here.
            tally = Tally::default();
            base = engine.stats().clone();
        }
        seen += 1;
        if let Some(a) = far {
            engine.prefetch(mapper.first_object(a), false);
        }
        if let Some(a) = near {
            engine.prefetch(mapper.first_object(a), true);
        }
        tally.record(rec);
        engine.begin_request();
        let mut all_fast = true;
        let n = mapper.split(rec, |p| {
            let served = engine.access(&p.req);
            all_fast &= served.level != Level::Slow;
        });
        if n == 0 {
            tally.dropped += 1;
        } else {
            tally.accesses += u64::from(n);
            if all_fast {
                tally.request_hits += 1;
            } else {
                tally.request_misses += 1;
            }
        }
        if !engine.pending_work().is_empty() {
            settle_instantly(engine, &mut buf)?;
        }
        if cfg.check_every > 0 && seen.is_multiple_of(cfg.check_every) {
            engine.check_invariants().map_err(|message| SimError::Invariant { request: seen, message })?;
        }
        if seen & 0xffff == 0 {
            progress.update(seen);
        }
        Ok(())
    })?;
    if cfg.flush_at_end {
        engine.flush();
        settle_instantly(engine, &mut buf)?;
    }
    progress.update(seen);
    let mut report = SimReport::default();
    fill_counts(&mut report, &tally, &crate::filesim::report::stats_since(engine.stats(), &base));
    warm_up_note(&mut report, cfg, seen)?;
    Ok(report)
}

/// Says what the warm-up left out; an error when the trace was not longer than it.
pub(crate) fn warm_up_note(report: &mut SimReport, cfg: &SimConfig, seen: u64) -> Result<(), SimError> {
    if cfg.measure_from == 0 {
        return Ok(());
    }
    if seen <= cfg.measure_from {
        return Err(SimError::Unsupported(format!(
            "--measure-from {}: the trace has {seen} requests{}, so all of them would be warm-up and nothing measured",
            cfg.measure_from,
            if cfg.max_requests.is_some() { " (--max-requests)" } else { "" }
        )));
    }
    report.notes.push(format!(
        "the first {} requests warmed the cache up and are not measured (--measure-from)",
        cfg.measure_from
    ));
    Ok(())
}

/// GreenDM's SSD write limit (the default of a preset's `endurance_gb`).
pub const SSD_WRITE_LIMIT_BYTES: f64 = tierwise_devices::ssd::GREENDM_ENDURANCE_GB * 1e9;
/// GreenDM's HDD start/stop limit.
pub const HDD_START_STOP_LIMIT: f64 = 300_000.0;

/// GreenDM's endurance reductions for one run's device counters; the SSD's wear counts
/// against its preset's rated writes (`endurance_gb`).
pub(crate) fn endurance(
    read_weight: f64,
    devices: &DeviceSet,
    hdd: &crate::device::DeviceStats,
    ssd: &crate::device::DeviceStats,
) -> Endurance {
    let wear = ssd.write_bytes as f64 + ssd.read_bytes as f64 * read_weight;
    let limit = devices.ssd.endurance_gb * 1e9;
    // Validated with the preset; a zero falls back to the capacity-less limit of no wear.
    let flash_life = devices.ssd.nand_bytes().unwrap_or(0) as f64 * devices.ssd.pe_cycles;
    let flash = ssd.flash_write_bytes as f64;
    Endurance {
        ssd_flash_eu: if flash_life > 0.0 { flash / flash_life * 1e6 } else { 0.0 },
        ssd_write_amplification: if ssd.write_bytes > 0 { flash / ssd.write_bytes as f64 } else { 0.0 },
        ssd_eu: wear / limit * 1e6,
        hdd_eu: hdd.spin_downs as f64 / HDD_START_STOP_LIMIT * 1e6,
        read_weight,
        ssd_limit_bytes: limit,
        hdd_start_stop_limit: HDD_START_STOP_LIMIT,
    }
}

/// Capital cost of the devices a configuration needs, and per IOPS (0 when `iops` is 0: an
/// open-loop run, whose IOPS is the offered load, gives none).
pub(crate) fn cost(arch: &str, ssd_bytes: u64, footprint: Option<u64>, iops: f64, ssd_usd: f64, hdd_usd: f64) -> Cost {
    let data = footprint.unwrap_or(0) as f64 / 1e9;
    let name = arch.split(':').next().unwrap_or("");
    let class = tierwise_core::arch_info(name).map_or(CostClass::Hybrid, |i| i.caps.cost);
    let (ssd_gb, hdd_gb) = match class {
        CostClass::SsdOnly => (data, 0.0),
        CostClass::HddOnly => (0.0, data),
        CostClass::Hybrid => (ssd_bytes as f64 / 1e9, data),
    };
    let capex = ssd_gb * ssd_usd + hdd_gb * hdd_usd;
    Cost { capex_usd: capex, usd_per_iops: if iops > 0.0 { capex / iops } else { 0.0 } }
}

pub(crate) fn hca(
    r: &SimReport,
    hdd: &crate::device::DeviceStats,
    ssd: &crate::device::DeviceStats,
    cfg: &SimConfig,
) -> HcaMetrics {
    let (rhr, shr, dhr) = (r.access_hit.ram, r.access_hit.ssd, r.access_hit.hdd);
    let ssd_rta = ssd.mean_response_ns() / 1e3;
    let disk_rta = hdd.mean_response_ns() / 1e3;
    let dram_us = cfg.devices.ram.latency_ns / 1e3;
    let xcrta = ssd_rta * shr;
    let ssd_iops = if r.duration_s > 0.0 { (ssd.reads + ssd.writes) as f64 / r.duration_s } else { 0.0 };
    HcaMetrics {
        xcrta_us: xcrta,
        hcrta_us: rhr * dram_us + shr * xcrta,
        xciops: ssd_iops * shr,
        bdrta_us: disk_rta,
        hcdrta_us: dhr * disk_rta,
    }
}

/// Reads a trace once and counts its distinct objects and their bytes under `mode` (the
/// working set a "fraction of the footprint" SSD size refers to).
pub fn footprint(trace: &mut Trace, mode: ObjectMode) -> Result<(u64, u64), TraceError> {
    footprint_and_layout(trace, mode).map(|(objects, bytes, _)| (objects, bytes))
}

/// [`footprint`], and where the trace's volumes sit on the HDD (block mode; empty otherwise).
pub fn footprint_and_layout(trace: &mut Trace, mode: ObjectMode) -> Result<(u64, u64, VolumeLayout), TraceError> {
    let mapper = Mapper::new(mode, trace.info().object_trace);
    let mut seen: hashbrown::HashMap<u64, u64, FoldHash> = hashbrown::HashMap::with_hasher(FoldHash);
    let fixed = mapper.mode().object_size();
    let mut high: hashbrown::HashMap<u64, u64, FoldHash> = hashbrown::HashMap::with_hasher(FoldHash);
    trace.for_each(u64::MAX, |rec| -> Result<(), TraceError> {
        let n = mapper.split(rec, |p| {
            seen.entry(p.req.obj.0).or_insert(if fixed != 0 { fixed } else { p.req.len });
        });
        if fixed != 0 && n > 0 {
            let end = high.entry(u64::from(rec.volume)).or_insert(0);
            *end = (*end).max(rec.offset.saturating_add(rec.len));
        }
        Ok(())
    })?;
    let layout = VolumeLayout::from_extents(high);
    Ok((seen.len() as u64, seen.values().sum(), layout))
}

/// A cheap hasher for ids (they are mixed by `hash_id`).
#[derive(Clone, Copy, Default)]
pub struct FoldHash;

impl std::hash::BuildHasher for FoldHash {
    type Hasher = FoldHasher;
    fn build_hasher(&self) -> FoldHasher {
        FoldHasher(0)
    }
}

/// See [`FoldHash`].
#[derive(Clone, Copy, Default)]
pub struct FoldHasher(u64);

impl std::hash::Hasher for FoldHasher {
    fn finish(&self) -> u64 {
        tierwise_core::object_table::hash_id(tierwise_core::ObjectId(self.0))
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 ^= v;
    }
}
