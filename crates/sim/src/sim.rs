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

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Instant;

use tierwise_core::{
    Clock, ConfigError, Engine, LOGICAL_ADDR, Level, Levels, ManualClock, Nanos, Outcome, Served, Setup, Work,
    WorkKind, build_arch, extent_size_of,
};

use crate::device::{DevOp, Device, DeviceSet, Hdd, Ram, Ssd};
use crate::metrics::{Cost, Endurance, HcaMetrics, Histogram, HitRatios, SimReport};
use crate::objects::{Mapper, ObjectMode, Piece};
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
    /// Stop after this many requests.
    pub max_requests: Option<u64>,
    /// Timed runs: admit no request that would arrive after this much simulated time.
    pub max_time: Option<Nanos>,
    /// Check the engine's invariants every this many requests (0: never).
    pub check_every: u64,
    /// Unique bytes of the trace, when known (for cost and the report).
    pub footprint_bytes: Option<u64>,
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
            max_requests: None,
            max_time: None,
            check_every: 0,
            footprint_bytes: None,
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

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum EventKind {
    /// The source read of a move finished; its write starts.
    MoveRead,
    /// A move's write finished; report completion.
    MoveDone,
    /// A paced move's next chunk starts.
    ChunkStart,
    /// A paced move's chunk was read; its write starts.
    ChunkRead,
    /// A paced move's chunk was written.
    ChunkDone,
}

/// Bytes per chunk of a large or paced move.
const CHUNK_BYTES: u64 = 1 << 20;

/// A move executed chunk by chunk (large, or paced by the architecture), so that it shares
/// the devices with foreground I/O instead of holding them for seconds.
#[derive(Clone, Copy, Debug)]
struct Chunked {
    work: Work,
    started: Nanos,
    chunks: u64,
    next: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Event {
    time: Nanos,
    seq: u64,
    kind: EventKind,
    slot: u32,
}

/// Counters shared by the timed and untimed loops.
#[derive(Default)]
struct Tally {
    requests: u64,
    reads: u64,
    writes: u64,
    read_bytes: u64,
    write_bytes: u64,
    dropped: u64,
    accesses: u64,
    request_hits: u64,
    request_misses: u64,
}

impl Tally {
    #[inline]
    fn record(&mut self, rec: &TraceRecord) {
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

fn build_engine(cfg: &SimConfig, mapper: &Mapper, clock: &ManualClock) -> Result<Engine<ManualClock>, SimError> {
    let setup = Setup { fast_capacity: cfg.ssd_bytes, slow_capacity: 0, object_size: mapper.mode().object_size() };
    Ok(Engine::new(build_arch(&cfg.arch, &setup)?, clock.clone()))
}

/// Runs the simulation of `trace` under `cfg`.
pub fn simulate(trace: &mut Trace, cfg: &SimConfig, progress: &mut dyn Progress) -> Result<SimReport, SimError> {
    let wall = Instant::now();
    let name = cfg.arch.split(':').next().unwrap_or("");
    if tierwise_core::arch_info(name).is_ok_and(|a| a.file_level) {
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
    let mut engine = build_engine(cfg, &mapper, &clock)?;
    // The simulator models no SSD layout: dropping a copy costs no device time.
    engine.set_report_invalidations(false);
    if mapper.mode() != cfg.objects {
        notes.push(format!("object trace: {} mode used instead of {}", mapper.mode().label(), cfg.objects.label()));
    }
    let mut timing = cfg.timing;
    if matches!(timing, Timing::Open { .. }) && !trace.info().has_time {
        timing = Timing::Closed { depth: 1 };
        notes.push("the trace has no timestamps: replayed closed-loop with 1 outstanding request".into());
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
        _ => Timed::new(cfg, &mapper, &clock, timing)?.run(trace, cfg, &mut engine, progress)?,
    };
    report.notes.extend(notes);
    report.arch = cfg.arch.clone();
    report.trace = trace.path().to_string();
    report.format = trace.info().name.to_string();
    report.objects = mapper.mode().label();
    report.timing = timing.label();
    report.ssd_bytes = cfg.ssd_bytes;
    report.footprint_bytes = cfg.footprint_bytes;
    report.skipped_lines = trace.skipped().0;
    report.engine = engine.stats().clone();
    report.arch_counters = engine.arch_counters().into_iter().map(|(k, v)| (k.to_string(), v)).collect();
    let usage = engine.usage();
    report.objects_tracked = usage.objects as u64;
    report.engine_memory_bytes = engine.memory_bytes() as u64;
    report.wall_s = wall.elapsed().as_secs_f64();
    Ok(report)
}

fn fill_counts(report: &mut SimReport, t: &Tally, engine: &Engine<ManualClock>) {
    let st = engine.stats();
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
    trace.for_each_ahead(limit, (8, 24), |rec, near, far| -> Result<(), SimError> {
        if timers {
            let now = if has_time {
                let t0 = *first_time.get_or_insert(rec.time_ns);
                Nanos(rec.time_ns.saturating_sub(t0)).max(clock.now())
            } else {
                Nanos(UNTIMED_STEP.0.saturating_mul(tally.requests))
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
        if let Some(a) = far {
            engine.prefetch(mapper.first_object(a), false);
        }
        if let Some(a) = near {
            engine.prefetch(mapper.first_object(a), true);
        }
        tally.record(rec);
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
        if cfg.check_every > 0 && tally.requests % cfg.check_every == 0 {
            engine.check_invariants().map_err(|message| SimError::Invariant { request: tally.requests, message })?;
        }
        if tally.requests & 0xffff == 0 {
            progress.update(tally.requests);
        }
        Ok(())
    })?;
    if cfg.flush_at_end {
        engine.flush();
        settle_instantly(engine, &mut buf)?;
    }
    progress.update(tally.requests);
    let mut report = SimReport::default();
    fill_counts(&mut report, &tally, engine);
    Ok(report)
}

/// The timed simulation state.
struct Timed {
    clock: ManualClock,
    mapper: Mapper,
    timing: Timing,
    hdd: Device,
    ssd: Device,
    ram: Ram,
    events: BinaryHeap<Reverse<Event>>,
    /// Batches of background work in flight, indexed by event slot; emptied vectors are kept
    /// for reuse.
    batches: Vec<Vec<Work>>,
    free_slots: Vec<u32>,
    chunked: Vec<Option<Chunked>>,
    free_chunked: Vec<u32>,
    runs: Vec<(u64, u64)>,
    seq: u64,
    /// This request's pieces, how each was served, and whether a fill of its object was issued
    /// (then the HDD read covers the whole object and feeds the fill from memory).
    pieces: Vec<(Piece, Served, bool)>,
    work_buf: Vec<Work>,
    hist: Histogram,
    last_completion: Nanos,
}

impl Timed {
    fn new(cfg: &SimConfig, mapper: &Mapper, clock: &ManualClock, timing: Timing) -> Result<Timed, SimError> {
        let hdd =
            Hdd::new(&cfg.devices.hdd).map_err(|e| SimError::Device(format!("hdd {}: {e}", cfg.devices.hdd_name)))?;
        let ssd =
            Ssd::new(&cfg.devices.ssd).map_err(|e| SimError::Device(format!("ssd {}: {e}", cfg.devices.ssd_name)))?;
        let ram =
            Ram::new(&cfg.devices.ram).map_err(|e| SimError::Device(format!("ram {}: {e}", cfg.devices.ram_name)))?;
        Ok(Timed {
            clock: clock.clone(),
            mapper: *mapper,
            timing,
            hdd: Device::new(Box::new(hdd), cfg.spin_down),
            ssd: Device::new(Box::new(ssd), None),
            ram,
            events: BinaryHeap::new(),
            batches: Vec::new(),
            free_slots: Vec::new(),
            chunked: Vec::new(),
            free_chunked: Vec::new(),
            runs: Vec::new(),
            seq: 0,
            pieces: Vec::with_capacity(64),
            work_buf: Vec::with_capacity(64),
            hist: Histogram::default(),
            last_completion: Nanos::ZERO,
        })
    }

    fn device(&mut self, level: Level) -> Option<&mut Device> {
        match level {
            Level::Fast => Some(&mut self.ssd),
            Level::Slow => Some(&mut self.hdd),
            Level::Ram => None,
        }
    }

    fn io(&mut self, now: Nanos, level: Level, op: DevOp, addr: u64, len: u64) -> Nanos {
        match self.device(level) {
            Some(d) => d.submit(now, op, addr, len),
            None => now.saturating_add(self.ram.latency(len)),
        }
    }

    fn push_event(&mut self, time: Nanos, kind: EventKind, slot: u32) {
        self.seq += 1;
        self.events.push(Reverse(Event { time, seq: self.seq, kind, slot }));
    }

    fn work_addr(&self, w: &Work, level: Level) -> u64 {
        let a = if level == Level::Slow { w.slow_addr } else { w.fast_addr };
        if a == LOGICAL_ADDR { self.mapper.object_addr(w.obj) } else { a }
    }

    /// Submits the works of batch `slot` that share one device as merged, address-ordered
    /// device requests on `level`; returns when the last one completes.
    fn batch_io(&mut self, now: Nanos, slot: u32, level: Level, op: DevOp) -> Nanos {
        let mut runs = std::mem::take(&mut self.runs);
        runs.clear();
        for w in &self.batches[slot as usize] {
            runs.push((self.work_addr(w, level), w.bytes));
        }
        runs.sort_unstable();
        let done = self.submit_merged(now, level, op, &runs);
        self.runs = runs;
        done
    }

    /// Submits byte ranges to `level`, merging each range with the previous one when they are
    /// contiguous; returns when the last one completes.
    fn submit_merged(&mut self, now: Nanos, level: Level, op: DevOp, ranges: &[(u64, u64)]) -> Nanos {
        let mut done = now;
        let mut cur: Option<(u64, u64)> = None;
        for &(a, l) in ranges {
            cur = match cur {
                Some((ca, cl)) if ca + cl == a => Some((ca, cl + l)),
                Some((ca, cl)) => {
                    done = done.max(self.io(now, level, op, ca, cl));
                    Some((a, l))
                }
                None => Some((a, l)),
            };
        }
        if let Some((ca, cl)) = cur {
            done = done.max(self.io(now, level, op, ca, cl));
        }
        done
    }

    /// Starts the work the engine queued, at `now`. Works issued together form batches (one
    /// per direction), executed like dm-kcopyd or a write-back thread would: the source reads
    /// merged in address order, then the destination writes, merged likewise.
    fn start_work(&mut self, engine: &mut Engine<ManualClock>, now: Nanos) {
        if engine.pending_work().is_empty() {
            return;
        }
        self.work_buf.extend(engine.drain_work());
        if self.work_buf.is_empty() {
            return;
        }
        for i in 0..self.work_buf.len() {
            let w = &mut self.work_buf[i];
            if w.kind == WorkKind::Copy
                && w.from == Level::Slow
                && self.pieces.iter().any(|(p, s, fill)| *fill && p.req.obj == w.obj && s.level == Level::Slow)
            {
                // The miss that caused this fill read the whole object already.
                w.source_in_ram = true;
            }
        }
        self.work_buf.retain(|w| w.kind != WorkKind::Invalidate);
        // Large and paced moves go chunk by chunk.
        let mut i = 0;
        while i < self.work_buf.len() {
            let w = self.work_buf[i];
            if w.bytes > CHUNK_BYTES || w.min_duration > Nanos::ZERO {
                self.work_buf.swap_remove(i);
                self.start_chunked(w, now);
            } else {
                i += 1;
            }
        }
        let key = |w: &Work| (w.from, w.to, w.source_in_ram || w.from == Level::Ram);
        self.work_buf.sort_by_key(key);
        let mut start = 0;
        while start < self.work_buf.len() {
            let k = key(&self.work_buf[start]);
            let mut end = start + 1;
            while end < self.work_buf.len() && key(&self.work_buf[end]) == k {
                end += 1;
            }
            let slot = match self.free_slots.pop() {
                Some(s) => s,
                None => {
                    self.batches.push(Vec::new());
                    (self.batches.len() - 1) as u32
                }
            };
            self.batches[slot as usize].extend_from_slice(&self.work_buf[start..end]);
            let (from, to, in_ram) = k;
            if in_ram {
                let done = self.batch_io(now, slot, to, DevOp::Write);
                self.push_event(done, EventKind::MoveDone, slot);
            } else {
                let done = self.batch_io(now, slot, from, DevOp::Read);
                self.push_event(done, EventKind::MoveRead, slot);
            }
            start = end;
        }
        self.work_buf.clear();
    }

    fn start_chunked(&mut self, work: Work, now: Nanos) {
        let c = Chunked { work, started: now, chunks: work.bytes.div_ceil(CHUNK_BYTES).max(1), next: 0 };
        let slot = match self.free_chunked.pop() {
            Some(s) => {
                self.chunked[s as usize] = Some(c);
                s
            }
            None => {
                self.chunked.push(Some(c));
                (self.chunked.len() - 1) as u32
            }
        };
        self.push_event(now, EventKind::ChunkStart, slot);
    }

    /// The address and length of chunk `i` of a chunked move on `level`.
    fn chunk(&self, c: &Chunked, level: Level, i: u64) -> (u64, u64) {
        let base = self.work_addr(&c.work, level);
        let off = i * CHUNK_BYTES;
        (base + off, (c.work.bytes - off).min(CHUNK_BYTES))
    }

    fn handle_chunked(&mut self, engine: &mut Engine<ManualClock>, ev: Event) -> Result<(), SimError> {
        let Some(mut c) = self.chunked[ev.slot as usize] else { return Ok(()) };
        let w = c.work;
        match ev.kind {
            EventKind::ChunkStart => {
                if w.source_in_ram || w.from == Level::Ram {
                    let (a, l) = self.chunk(&c, w.to, c.next);
                    let done = self.io(ev.time, w.to, DevOp::Write, a, l);
                    self.push_event(done, EventKind::ChunkDone, ev.slot);
                } else {
                    let (a, l) = self.chunk(&c, w.from, c.next);
                    let done = self.io(ev.time, w.from, DevOp::Read, a, l);
                    self.push_event(done, EventKind::ChunkRead, ev.slot);
                }
            }
            EventKind::ChunkRead => {
                let (a, l) = self.chunk(&c, w.to, c.next);
                let done = self.io(ev.time, w.to, DevOp::Write, a, l);
                self.push_event(done, EventKind::ChunkDone, ev.slot);
            }
            _ => {
                c.next += 1;
                if c.next < c.chunks {
                    // Pacing: chunk i may not start before started + i * (min_duration / chunks).
                    let due = c.started.saturating_add(Nanos(w.min_duration.0 / c.chunks * c.next));
                    self.chunked[ev.slot as usize] = Some(c);
                    self.push_event(due.max(ev.time), EventKind::ChunkStart, ev.slot);
                } else {
                    self.chunked[ev.slot as usize] = None;
                    self.free_chunked.push(ev.slot);
                    engine.complete(w.id, Outcome::Done).map_err(|e| SimError::Complete(e.to_string()))?;
                    self.start_work(engine, ev.time);
                }
            }
        }
        Ok(())
    }

    fn handle(&mut self, engine: &mut Engine<ManualClock>, ev: Event) -> Result<(), SimError> {
        self.clock.set(ev.time);
        if matches!(ev.kind, EventKind::ChunkStart | EventKind::ChunkRead | EventKind::ChunkDone) {
            return self.handle_chunked(engine, ev);
        }
        let Some(first) = self.batches[ev.slot as usize].first().copied() else {
            return Ok(());
        };
        match ev.kind {
            EventKind::MoveRead => {
                let done = self.batch_io(ev.time, ev.slot, first.to, DevOp::Write);
                self.push_event(done, EventKind::MoveDone, ev.slot);
            }
            _ => {
                let mut batch = std::mem::take(&mut self.batches[ev.slot as usize]);
                for w in batch.drain(..) {
                    engine.complete(w.id, Outcome::Done).map_err(|e| SimError::Complete(e.to_string()))?;
                }
                self.batches[ev.slot as usize] = batch;
                self.free_slots.push(ev.slot);
                self.start_work(engine, ev.time);
            }
        }
        Ok(())
    }

    /// Processes background events and engine timers due up to `t`.
    fn advance_to(&mut self, engine: &mut Engine<ManualClock>, t: Nanos) -> Result<(), SimError> {
        loop {
            let next_ev = self.events.peek().map(|Reverse(e)| e.time).filter(|&et| et <= t);
            let next_tick = engine.next_deadline().filter(|&d| d <= t);
            match (next_ev, next_tick) {
                (Some(e), Some(d)) if d < e => self.tick(engine, d),
                (Some(_), _) => {
                    if let Some(Reverse(ev)) = self.events.pop() {
                        self.handle(engine, ev)?;
                    }
                }
                (None, Some(d)) => self.tick(engine, d),
                (None, None) => break,
            }
        }
        self.clock.set(t);
        Ok(())
    }

    fn tick(&mut self, engine: &mut Engine<ManualClock>, at: Nanos) {
        self.clock.set(at);
        engine.tick();
        self.start_work(engine, at);
        if engine.next_deadline().is_some_and(|d| d <= at) {
            // A timer that does not move forward would stall the simulation; the architecture
            // contract forbids it, so stop ticking rather than loop.
            debug_assert!(false, "engine deadline did not advance");
        }
    }

    /// Serves one request arriving at `now`; returns its completion time.
    fn request(&mut self, engine: &mut Engine<ManualClock>, rec: &TraceRecord, now: Nanos, tally: &mut Tally) -> Nanos {
        self.pieces.clear();
        let pieces = &mut self.pieces;
        let n = self.mapper.split(rec, |p| {
            let served = engine.access(&p.req);
            // A RAM-cache fill reads the whole object, like an SSD fill does.
            pieces.push((p, served, served.keep_in_ram));
        });
        if n == 0 {
            tally.dropped += 1;
            return now;
        }
        tally.accesses += u64::from(n);
        let op = if rec.op == IoOp::Write { DevOp::Write } else { DevOp::Read };
        let object_size = self.mapper.mode().object_size();
        if op == DevOp::Read && !engine.pending_work().is_empty() {
            for w in engine.pending_work() {
                if w.kind == WorkKind::Copy && w.from == Level::Slow {
                    for piece in self.pieces.iter_mut().filter(|(p, s, _)| p.req.obj == w.obj && s.level == Level::Slow)
                    {
                        piece.2 = true;
                    }
                }
            }
        }
        let mut touched = Levels::NONE;
        for (_, s, _) in &self.pieces {
            touched = touched.union(s.touches);
        }
        let all_fast = !touched.contains(Level::Slow);
        let mut done = now;
        if self.pieces.len() == 1 {
            // One piece (most requests in object modes): no merging to do.
            let (p, s, fill) = self.pieces[0];
            for level in touched.iter() {
                let (mut addr, mut len) = (Self::piece_addr(&p, &s, level), p.req.len);
                if fill && object_size != 0 {
                    addr -= p.req.offset;
                    len = object_size;
                }
                done = done.max(self.io(now, level, op, addr, len));
            }
            self.finish_request(tally, all_fast);
            self.start_work(engine, now);
            self.pieces.clear();
            return done;
        }
        let mut runs = std::mem::take(&mut self.runs);
        for level in touched.iter() {
            // Adjacent pieces on one device become one device request.
            runs.clear();
            for &(p, s, fill) in &self.pieces {
                if !s.touches.contains(level) {
                    continue;
                }
                let (mut addr, mut len) = (Self::piece_addr(&p, &s, level), p.req.len);
                if fill && object_size != 0 {
                    // Read the whole block so the fill needs no second HDD read.
                    addr -= p.req.offset;
                    len = object_size;
                }
                runs.push((addr, len));
            }
            done = done.max(self.submit_merged(now, level, op, &runs));
        }
        self.runs = runs;
        self.finish_request(tally, all_fast);
        self.start_work(engine, now);
        self.pieces.clear();
        done
    }

    /// The device address of a piece on `level`.
    #[inline]
    fn piece_addr(p: &Piece, s: &Served, level: Level) -> u64 {
        match level {
            Level::Slow if s.slow_addr != LOGICAL_ADDR => s.slow_addr + p.req.offset,
            Level::Fast if s.fast_addr != LOGICAL_ADDR => s.fast_addr + p.req.offset,
            _ => p.addr,
        }
    }

    #[inline]
    fn finish_request(&self, tally: &mut Tally, all_fast: bool) {
        if all_fast {
            tally.request_hits += 1;
        } else {
            tally.request_misses += 1;
        }
    }

    fn run(
        mut self,
        trace: &mut Trace,
        cfg: &SimConfig,
        engine: &mut Engine<ManualClock>,
        progress: &mut dyn Progress,
    ) -> Result<SimReport, SimError> {
        let mut tally = Tally::default();
        let limit = cfg.max_requests.unwrap_or(u64::MAX);
        let mut first_time: Option<u64> = None;
        let mut last_arrival = Nanos::ZERO;
        let mut slots: BinaryHeap<Reverse<Nanos>> = BinaryHeap::new();
        if let Timing::Closed { depth } = self.timing {
            for _ in 0..depth {
                slots.push(Reverse(Nanos::ZERO));
            }
        }
        let time_limit = cfg.max_time.unwrap_or(Nanos(u64::MAX));
        let mapper = self.mapper;
        let replayed = trace.for_each_ahead(limit, (8, 24), |rec, near, far| -> Result<(), SimError> {
            if let Some(a) = far {
                engine.prefetch(mapper.first_object(a), false);
            }
            if let Some(a) = near {
                engine.prefetch(mapper.first_object(a), true);
            }
            let arrival = match self.timing {
                Timing::Open { speedup } => {
                    let t0 = *first_time.get_or_insert(rec.time_ns);
                    // Rows out of time order (SYSTOR'17) arrive "now": the clock never goes back.
                    Nanos((rec.time_ns.saturating_sub(t0) as f64 / speedup) as u64).max(last_arrival)
                }
                _ => slots.pop().map_or(Nanos::ZERO, |Reverse(t)| t),
            };
            if arrival > time_limit {
                return Err(SimError::TimeLimitReached);
            }
            last_arrival = arrival;
            self.advance_to(engine, arrival)?;
            tally.record(rec);
            let done = self.request(engine, rec, arrival, &mut tally);
            self.hist.record(done.0 - arrival.0);
            self.last_completion = self.last_completion.max(done);
            if matches!(self.timing, Timing::Closed { .. }) {
                slots.push(Reverse(done));
            }
            if cfg.check_every > 0 && tally.requests % cfg.check_every == 0 {
                engine
                    .check_invariants()
                    .map_err(|message| SimError::Invariant { request: tally.requests, message })?;
            }
            if tally.requests & 0xffff == 0 {
                progress.update(tally.requests);
            }
            Ok(())
        });
        match replayed {
            Ok(_) | Err(SimError::TimeLimitReached) => {}
            Err(e) => return Err(e),
        }
        progress.update(tally.requests);
        // Let background work in flight finish (timers are not run past the last request).
        while let Some(Reverse(ev)) = self.events.pop() {
            self.handle(engine, ev)?;
        }
        if cfg.flush_at_end {
            let t = self.clock.now();
            engine.flush();
            self.start_work(engine, t);
            while let Some(Reverse(ev)) = self.events.pop() {
                self.handle(engine, ev)?;
            }
        }
        let end = self.clock.now().max(self.last_completion);
        let hdd = self.hdd.finish(end);
        let ssd = self.ssd.finish(end);
        let mut report = SimReport::default();
        fill_counts(&mut report, &tally, engine);
        report.latency = self.hist.summary();
        report.duration_s = self.last_completion.as_secs_f64();
        if report.duration_s > 0.0 {
            report.iops = tally.requests as f64 / report.duration_s;
            report.mb_s = (tally.read_bytes + tally.write_bytes) as f64 / 1e6 / report.duration_s;
        }
        report.energy_j = hdd.energy_j + ssd.energy_j;
        let elapsed = hdd.elapsed_ns.max(ssd.elapsed_ns) as f64 / 1e9;
        report.mean_power_w = if elapsed > 0.0 { report.energy_j / elapsed } else { 0.0 };
        report.endurance = endurance(cfg.read_weight, &hdd, &ssd);
        report.cost = cost(
            &cfg.arch,
            cfg.ssd_bytes,
            cfg.footprint_bytes,
            report.iops,
            self.ssd.usd_per_gb(),
            self.hdd.usd_per_gb(),
        );
        report.hca = hca(&report, &hdd, &ssd, cfg);
        report.hdd = hdd;
        report.ssd = ssd;
        Ok(report)
    }
}

/// GreenDM's limits.
pub const SSD_WRITE_LIMIT_BYTES: f64 = 36_500e9;
/// GreenDM's HDD start/stop limit.
pub const HDD_START_STOP_LIMIT: f64 = 300_000.0;

/// GreenDM's endurance reductions for one run's device counters.
pub(crate) fn endurance(
    read_weight: f64,
    hdd: &crate::device::DeviceStats,
    ssd: &crate::device::DeviceStats,
) -> Endurance {
    let wear = ssd.write_bytes as f64 + ssd.read_bytes as f64 * read_weight;
    Endurance {
        ssd_eu: wear / SSD_WRITE_LIMIT_BYTES * 1e6,
        hdd_eu: hdd.spin_downs as f64 / HDD_START_STOP_LIMIT * 1e6,
        read_weight,
        ssd_limit_bytes: SSD_WRITE_LIMIT_BYTES,
        hdd_start_stop_limit: HDD_START_STOP_LIMIT,
    }
}

/// Capital cost of the devices a configuration needs, and per IOPS.
pub(crate) fn cost(arch: &str, ssd_bytes: u64, footprint: Option<u64>, iops: f64, ssd_usd: f64, hdd_usd: f64) -> Cost {
    let data = footprint.unwrap_or(0) as f64 / 1e9;
    let name = arch.split(':').next().unwrap_or("");
    let (ssd_gb, hdd_gb) = match name {
        "ssd-only" => (data, 0.0),
        "hdd-only" => (0.0, data),
        _ => (ssd_bytes as f64 / 1e9, data),
    };
    let capex = ssd_gb * ssd_usd + hdd_gb * hdd_usd;
    Cost { capex_usd: capex, usd_per_iops: if iops > 0.0 { capex / iops } else { 0.0 } }
}

fn hca(
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
    let mapper = Mapper::new(mode, trace.info().object_trace);
    let mut seen: hashbrown::HashMap<u64, u64, FoldHash> = hashbrown::HashMap::with_hasher(FoldHash);
    let fixed = mapper.mode().object_size();
    trace.for_each(u64::MAX, |rec| -> Result<(), TraceError> {
        mapper.split(rec, |p| {
            seen.entry(p.req.obj.0).or_insert(if fixed != 0 { fixed } else { p.req.len });
        });
        Ok(())
    })?;
    Ok((seen.len() as u64, seen.values().sum()))
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
