//! The timed simulation: an event loop over the devices.
//!
//! A request's pieces become device I/Os (the pieces one request puts on one device are merged,
//! as one bio would be, up to the queue's largest request). SSD and RAM serve in arrival order
//! at submission; the HDD goes through a [`DiskQueue`] — merging, mq-deadline, NCQ — and its
//! service time is decided when the drive starts a command. A request completes when its last
//! I/O does; in closed-loop timing the next request is issued then.
//!
//! The work the engine issues runs in the background: works issued together form batches (one
//! per direction and priority), executed like dm-kcopyd or a write-back thread would — the
//! source reads, then the destination writes, each in the devices' queues at the work's I/O
//! priority — so moves compete with foreground I/O as they would for real. A move's completion
//! is reported to the engine when its write finishes. Large or paced moves go chunk by chunk.

mod commits;
mod quarantine;

pub use commits::MetadataCommits;

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use tierwise_core::{
    Clock, Engine, LOGICAL_ADDR, Level, Levels, ManualClock, Nanos, Outcome, Priority, Served, Work, WorkKind,
};

use crate::device::{Class, DevOp, DeviceStats, DiskEvent, Submitted, TierDevices};
use crate::metrics::{Histogram, SimReport};
use crate::objects::{Mapper, Piece};
use crate::sim::{Progress, SimConfig, SimError, Tally, Timing, cost, endurance, fill_counts, hca};
use crate::slab::Slab;
use crate::trace::{IoOp, Trace, TraceRecord};

/// Bytes per chunk of a large or paced move.
const CHUNK_BYTES: u64 = 1 << 20;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum EventKind {
    /// An SSD or RAM I/O of waiter `id` finished.
    IoDone,
    /// The HDD finished the command it was executing.
    HddDone,
    /// The HDD may start a command (the submissions of one instant are queued, or an idle gap
    /// has passed).
    HddWake,
    /// Chunked move `id` may start its next chunk (pacing).
    ChunkStart,
    /// A commit period ended (`SimConfig::metadata_commits`).
    Commit,
    /// A commit's syncs are done: its checkpoint is written.
    CommitWrite,
    /// A commit forced by slot pressure synced (id 1: the HDD too): its checkpoint is written.
    SlotCommitWrite,
    /// A commit is durable: the slots it recorded free are.
    CommitDone,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Event {
    time: Nanos,
    seq: u64,
    kind: EventKind,
    id: u32,
}

/// What a group of I/Os is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Purpose {
    /// A foreground request that arrived then.
    /// Arrival, and whether it is measured (after the warm-up).
    Request(Nanos, bool),
    /// A foreground request that arrived then, done on the devices and crossing the front end
    /// back to its client (`SimConfig::front_end`).
    Replying(Nanos, bool),
    /// Batch `slot` is reading its sources.
    BatchRead(u32),
    /// Batch `slot` is writing its destinations.
    BatchWrite(u32),
    /// Chunked move `slot` is reading a chunk.
    ChunkRead(u32),
    /// Chunked move `slot` is writing a chunk.
    ChunkWrite(u32),
    /// A metadata commit is writing its checkpoint.
    Commit,
    /// A commit forced by slot pressure is writing its checkpoint (to the HDD too).
    ForcedCommit(bool),
}

/// I/Os in flight for one purpose.
#[derive(Clone, Copy, Debug)]
struct Waiter {
    outstanding: u32,
    purpose: Purpose,
}

/// A move executed chunk by chunk (large, or paced by the architecture), so that it shares
/// the devices with foreground I/O instead of holding them for seconds.
#[derive(Clone, Copy, Debug)]
struct Chunked {
    work: Work,
    started: Nanos,
    chunks: u64,
    next: u64,
}

/// The timed simulation state.
pub(crate) struct Timed {
    clock: ManualClock,
    mapper: Mapper,
    timing: Timing,
    dev: TierDevices,
    max_request: u64,
    events: BinaryHeap<Reverse<Event>>,
    seq: u64,
    waiters: Slab<Waiter>,
    /// Batches of background work in flight; emptied vectors are kept for reuse.
    batches: Vec<Vec<Work>>,
    free_slots: Vec<u32>,
    chunked: Slab<Option<Chunked>>,
    runs: Vec<(u64, u64)>,
    tokens: Vec<u64>,
    /// This request's pieces, how each was served, and whether a fill of its object was issued
    /// (then the HDD read covers the whole object and feeds the fill from memory).
    pieces: Vec<(Piece, Served, bool)>,
    work_buf: Vec<Work>,
    hist: Histogram,
    last_completion: Nanos,
    in_flight: u32,
    /// Work executing at most at once (`SimConfig::movers`; u32::MAX: no limit), work
    /// executing now, and work waiting for a mover, in issue order.
    movers: u32,
    moving: u32,
    deferred: std::collections::VecDeque<Work>,
    /// `SimConfig::front_end`.
    front_end: Nanos,
    /// When each of `SimConfig::front_end_cores` is next free (empty: no limit).
    front_end_cores: Vec<Nanos>,
    volumes: crate::layout::VolumeLayout,
    /// While the cache warms up (`SimConfig::measure_from`): the request index measuring starts
    /// at. Then `None`, and `measured` holds where it started.
    warm_up: Option<u64>,
    measured: Baseline,
    /// A served device's metadata commits (`SimConfig::metadata_commits`).
    commits: Option<commits::Commits>,
    /// Every request has arrived: periodic work stops rescheduling itself.
    arrivals_done: bool,
}

/// A device's counters over the measured window of `window_ns` ending at the run's end.
fn window_since(now: &DeviceStats, base: &DeviceStats, window_ns: u64) -> DeviceStats {
    DeviceStats {
        spin_downs: now.spin_downs.saturating_sub(base.spin_downs),
        spin_ups: now.spin_ups.saturating_sub(base.spin_ups),
        standby_ns: now.standby_ns.saturating_sub(base.standby_ns),
        spin_up_ns: now.spin_up_ns.saturating_sub(base.spin_up_ns),
        merged: now.merged.saturating_sub(base.merged),
        elapsed_ns: now.elapsed_ns.min(window_ns),
        ..crate::filesim::report::device_since(now, base)
    }
}

/// What the measurement window subtracts: the state when the warm-up ended.
#[derive(Clone, Debug, Default)]
struct Baseline {
    start: Nanos,
    engine: tierwise_core::EngineStats,
    hdd: DeviceStats,
    ssd: DeviceStats,
}

pub(crate) fn class_of(p: Priority) -> Class {
    match p {
        Priority::Normal => Class::Normal,
        Priority::Idle(after) => Class::Idle { after },
    }
}

impl Timed {
    pub(crate) fn new(
        cfg: &SimConfig,
        mapper: &Mapper,
        clock: &ManualClock,
        timing: Timing,
    ) -> Result<Timed, SimError> {
        let dev = TierDevices::new(&cfg.devices, cfg.spin_down, cfg.hdd_queue).map_err(SimError::Device)?;
        Ok(Timed {
            clock: clock.clone(),
            mapper: *mapper,
            timing,
            dev,
            max_request: cfg.hdd_queue.max_request_bytes.max(4096),
            events: BinaryHeap::new(),
            seq: 0,
            waiters: Slab::default(),
            batches: Vec::new(),
            free_slots: Vec::new(),
            chunked: Slab::default(),
            runs: Vec::new(),
            tokens: Vec::new(),
            pieces: Vec::with_capacity(64),
            work_buf: Vec::with_capacity(64),
            hist: Histogram::default(),
            last_completion: Nanos::ZERO,
            in_flight: 0,
            movers: if cfg.movers == 0 { u32::MAX } else { cfg.movers },
            moving: 0,
            deferred: std::collections::VecDeque::new(),
            front_end: cfg.front_end,
            front_end_cores: vec![Nanos::ZERO; cfg.front_end_cores as usize],
            volumes: cfg.volumes.clone(),
            warm_up: (cfg.measure_from > 0).then_some(cfg.measure_from),
            measured: Baseline::default(),
            commits: cfg.metadata_commits.map(commits::Commits::new),
            arrivals_done: false,
        })
    }

    fn push_event(&mut self, time: Nanos, kind: EventKind, id: u32) {
        self.seq += 1;
        self.events.push(Reverse(Event { time, seq: self.seq, kind, id }));
    }

    fn new_waiter(&mut self, purpose: Purpose) -> u32 {
        self.waiters.insert(Waiter { outstanding: 0, purpose })
    }

    /// Starts one device I/O for `waiter`.
    fn io(&mut self, now: Nanos, level: Level, (op, addr, len): (DevOp, u64, u64), class: Class, waiter: u32) {
        self.waiters[waiter].outstanding += 1;
        // Logical HDD addresses carry the volume; the layout places volumes on the disk.
        let addr = if level == Level::Slow { self.volumes.physical(addr) } else { addr };
        match self.dev.submit(now, level, (op, addr, len), class, u64::from(waiter)) {
            Submitted::At(done) => self.push_event(done, EventKind::IoDone, waiter),
            Submitted::Disk(e) => self.disk_event(e),
        }
    }

    /// Submits byte ranges (sorted) to `level`, merging contiguous ones up to the largest
    /// request, as one bio or a plug would.
    fn submit_runs(&mut self, now: Nanos, level: Level, op: DevOp, class: Class, waiter: u32) {
        let runs = std::mem::take(&mut self.runs);
        let mut cur: Option<(u64, u64)> = None;
        for &(a, l) in &runs {
            cur = match cur {
                Some((ca, cl)) if ca + cl == a && cl + l <= self.max_request => Some((ca, cl + l)),
                Some((ca, cl)) => {
                    self.io(now, level, (op, ca, cl), class, waiter);
                    Some((a, l))
                }
                None => Some((a, l)),
            };
        }
        if let Some((ca, cl)) = cur {
            self.io(now, level, (op, ca, cl), class, waiter);
        }
        self.runs = runs;
    }

    fn disk_event(&mut self, e: Option<DiskEvent>) {
        match e {
            Some(DiskEvent::Done(t)) => self.push_event(t, EventKind::HddDone, 0),
            Some(DiskEvent::Wake(t)) => self.push_event(t, EventKind::HddWake, 0),
            None => {}
        }
    }

    fn work_addr(&self, w: &Work, level: Level) -> u64 {
        let a = if level == Level::Slow { w.slow_addr } else { w.fast_addr };
        if a == LOGICAL_ADDR { self.mapper.object_addr(w.obj) } else { a }
    }

    /// Issues the I/O of batch `slot` on `level` for `waiter`.
    fn batch_io(&mut self, now: Nanos, slot: u32, level: Level, op: DevOp, waiter: u32) {
        let mut runs = std::mem::take(&mut self.runs);
        runs.clear();
        let mut class = Class::Normal;
        for w in &self.batches[slot as usize] {
            runs.push((self.work_addr(w, level), w.bytes));
            class = class_of(w.priority);
        }
        runs.sort_unstable();
        self.runs = runs;
        self.submit_runs(now, level, op, class, waiter);
    }

    /// Starts the work the engine queued, at `now`, in batches (one per direction and
    /// priority): the source reads in address order, then the destination writes.
    fn start_work(&mut self, engine: &mut Engine<ManualClock>, now: Nanos) {
        if engine.pending_work().is_empty() && self.deferred.is_empty() {
            return;
        }
        self.work_buf.extend(engine.drain_work());
        for i in 0..self.work_buf.len() {
            let w = &mut self.work_buf[i];
            if matches!(w.kind, WorkKind::Copy | WorkKind::Promote)
                && w.from == Level::Slow
                && self.pieces.iter().any(|(p, s, fill)| *fill && p.req.obj == w.obj && s.level == Level::Slow)
            {
                // The miss that caused this fill or promotion read the whole object already.
                w.source_in_ram = true;
            }
        }
        for i in 0..self.work_buf.len() {
            let w = self.work_buf[i];
            if w.kind == WorkKind::Invalidate {
                self.slots_after_invalidation(&w);
            }
        }
        self.work_buf.retain(|w| w.kind != WorkKind::Invalidate);
        if self.movers != u32::MAX {
            // A limited number of movers: the rest waits, in issue order.
            self.deferred.extend(self.work_buf.drain(..));
            while self.moving < self.movers {
                let Some(w) = self.deferred.pop_front() else { break };
                self.work_buf.push(w);
                self.moving += 1;
            }
        }
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
        let key = |w: &Work| (w.from, w.to, w.source_in_ram || w.from == Level::Ram, w.priority);
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
            let mut batch = std::mem::take(&mut self.batches[slot as usize]);
            batch.extend_from_slice(&self.work_buf[start..end]);
            self.batches[slot as usize] = batch;
            let (from, _, in_ram, _) = k;
            if in_ram {
                self.write_batch(now, slot);
            } else {
                let w = self.new_waiter(Purpose::BatchRead(slot));
                self.batch_io(now, slot, from, DevOp::Read, w);
            }
            start = end;
        }
        self.work_buf.clear();
    }

    fn start_chunked(&mut self, work: Work, now: Nanos) {
        let c = Chunked { work, started: now, chunks: work.bytes.div_ceil(CHUNK_BYTES).max(1), next: 0 };
        let slot = self.chunked.insert(Some(c));
        self.push_event(now, EventKind::ChunkStart, slot);
    }

    /// Issues the read (or, with the source in memory, the write) of a chunked move's next
    /// chunk.
    fn chunk_io(&mut self, now: Nanos, slot: u32, write: bool) {
        let Some(c) = self.chunked[slot] else { return };
        let w = c.work;
        let level = if write { w.to } else { w.from };
        let off = c.next * CHUNK_BYTES;
        let (addr, len) = (self.work_addr(&w, level) + off, (w.bytes - off).min(CHUNK_BYTES));
        let (purpose, op) =
            if write { (Purpose::ChunkWrite(slot), DevOp::Write) } else { (Purpose::ChunkRead(slot), DevOp::Read) };
        let waiter = self.new_waiter(purpose);
        self.io(now, level, (op, addr, len), class_of(w.priority), waiter);
    }

    /// One I/O of `waiter` finished at `time`.
    fn io_done(&mut self, engine: &mut Engine<ManualClock>, waiter: u32, time: Nanos) -> Result<(), SimError> {
        let w = &mut self.waiters[waiter];
        w.outstanding -= 1;
        if w.outstanding > 0 {
            return Ok(());
        }
        let purpose = w.purpose;
        self.waiters.free(waiter);
        match purpose {
            Purpose::Request(arrival, measured) if self.front_end > Nanos::ZERO => {
                // The client sees the answer once it has crossed the front end; until then the
                // request holds its place in a closed loop.
                let w = self.new_waiter(Purpose::Replying(arrival, measured));
                self.waiters[w].outstanding = 1;
                // On the core free first, in the order the devices answer.
                let start = match self.front_end_cores.iter_mut().min() {
                    Some(core) => {
                        let start = time.max(*core);
                        *core = start.saturating_add(self.front_end);
                        start
                    }
                    None => time,
                };
                self.push_event(start.saturating_add(self.front_end), EventKind::IoDone, w);
            }
            Purpose::Request(arrival, measured) | Purpose::Replying(arrival, measured) => {
                if measured {
                    self.hist.record(time.0.saturating_sub(arrival.0));
                }
                self.last_completion = self.last_completion.max(time);
                self.in_flight -= 1;
            }
            Purpose::BatchRead(slot) => self.write_batch(time, slot),
            Purpose::BatchWrite(slot) => {
                let mut batch = std::mem::take(&mut self.batches[slot as usize]);
                if self.movers != u32::MAX {
                    self.moving -= batch.len() as u32;
                }
                for w in batch.drain(..) {
                    engine.complete(w.id, Outcome::Done).map_err(|e| SimError::Complete(e.to_string()))?;
                    self.slots_after_move(engine, &w);
                }
                self.batches[slot as usize] = batch;
                self.free_slots.push(slot);
                self.start_work(engine, time);
            }
            Purpose::ChunkRead(slot) => self.write_chunk(time, slot),
            Purpose::Commit => self.checkpoint_written(time),
            Purpose::ForcedCommit(with_hdd) => self.forced_checkpoint_written(time, with_hdd),
            Purpose::ChunkWrite(slot) => {
                let Some(mut c) = self.chunked[slot] else { return Ok(()) };
                c.next += 1;
                if c.next < c.chunks {
                    // Pacing: chunk i may not start before started + i * (min_duration / chunks).
                    let due = c.started.saturating_add(Nanos(c.work.min_duration.0 / c.chunks * c.next));
                    self.chunked[slot] = Some(c);
                    self.push_event(due.max(time), EventKind::ChunkStart, slot);
                } else {
                    self.chunked[slot] = None;
                    self.chunked.free(slot);
                    if self.movers != u32::MAX {
                        self.moving -= 1;
                    }
                    engine.complete(c.work.id, Outcome::Done).map_err(|e| SimError::Complete(e.to_string()))?;
                    self.slots_after_move(engine, &c.work);
                    self.start_work(engine, time);
                }
            }
        }
        Ok(())
    }

    fn handle(&mut self, engine: &mut Engine<ManualClock>, ev: Event) -> Result<(), SimError> {
        self.clock.set(ev.time);
        match ev.kind {
            EventKind::IoDone => self.io_done(engine, ev.id, ev.time)?,
            EventKind::HddDone => {
                let mut tokens = std::mem::take(&mut self.tokens);
                tokens.clear();
                tokens.extend_from_slice(self.dev.hdd.complete());
                let delay = self.dev.hdd.completion_delay();
                for &t in &tokens {
                    if delay == Nanos::ZERO {
                        self.io_done(engine, t as u32, ev.time)?;
                    } else {
                        self.push_event(ev.time.saturating_add(delay), EventKind::IoDone, t as u32);
                    }
                }
                self.tokens = tokens;
                let e = self.dev.hdd.dispatch(ev.time);
                self.disk_event(e);
            }
            EventKind::HddWake => {
                let e = self.dev.hdd.woke(ev.time);
                self.disk_event(e);
            }
            EventKind::ChunkStart => {
                let Some(c) = self.chunked[ev.id] else { return Ok(()) };
                if c.work.source_in_ram || c.work.from == Level::Ram {
                    self.write_chunk(ev.time, ev.id);
                } else {
                    self.chunk_io(ev.time, ev.id, false);
                }
            }
            EventKind::Commit => self.commit_due(engine, ev.time),
            EventKind::CommitWrite => self.write_checkpoint(ev.time),
            EventKind::SlotCommitWrite => self.write_forced_checkpoint(engine, ev.time, ev.id == 1),
            EventKind::CommitDone => self.commit_released(ev.time),
        }
        Ok(())
    }

    /// Processes background events before `t` and engine timers due up to `t`. Events at `t`
    /// itself wait, so that requests arriving together are queued together (a plug) before
    /// the disk picks one.
    fn advance_to(&mut self, engine: &mut Engine<ManualClock>, t: Nanos) -> Result<(), SimError> {
        loop {
            let next_ev = self.events.peek().map(|Reverse(e)| e.time).filter(|&et| et < t);
            let next_tick = engine.next_deadline().filter(|&d| d <= t);
            match (next_ev, next_tick) {
                (Some(e), Some(d)) if d < e => self.tick(engine, d)?,
                (Some(_), _) => {
                    if let Some(Reverse(ev)) = self.events.pop() {
                        self.handle(engine, ev)?;
                    }
                }
                (None, Some(d)) => self.tick(engine, d)?,
                (None, None) => break,
            }
        }
        self.clock.set(t.max(self.clock.now()));
        Ok(())
    }

    /// Processes events (and timers due before them) until fewer than `depth` requests are in
    /// flight.
    fn wait_for_slot(&mut self, engine: &mut Engine<ManualClock>, depth: u32) -> Result<(), SimError> {
        while self.in_flight >= depth {
            let Some(&Reverse(ev)) = self.events.peek() else {
                return Err(SimError::Complete("the timed loop stalled with requests in flight".into()));
            };
            if let Some(d) = engine.next_deadline().filter(|&d| d < ev.time) {
                self.tick(engine, d)?;
                continue;
            }
            self.events.pop();
            self.handle(engine, ev)?;
        }
        Ok(())
    }

    fn tick(&mut self, engine: &mut Engine<ManualClock>, at: Nanos) -> Result<(), SimError> {
        self.clock.set(at);
        engine.tick();
        self.start_work(engine, at);
        match engine.next_deadline() {
            // A timer that does not move forward would spin the loop forever (it did in
            // release builds, where this was a debug assertion); the architecture contract
            // forbids it, so a broken architecture ends the run with an error.
            Some(d) if d <= at => Err(SimError::Complete(format!(
                "the architecture's timer did not advance past {:.6} s: the simulation would never end",
                at.0 as f64 / 1e9
            ))),
            _ => Ok(()),
        }
    }

    /// Starts one request arriving at `now`.
    fn request(&mut self, engine: &mut Engine<ManualClock>, rec: &TraceRecord, now: Nanos, tally: &mut Tally) {
        engine.begin_request();
        self.pieces.clear();
        let pieces = &mut self.pieces;
        let n = self.mapper.split(rec, |p| {
            let served = engine.access(&p.req);
            // A RAM-cache fill reads the whole object, like an SSD fill does.
            pieces.push((p, served, served.keep_in_ram));
        });
        if n == 0 {
            tally.dropped += 1;
            return;
        }
        tally.accesses += u64::from(n);
        let op = if rec.op == IoOp::Write { DevOp::Write } else { DevOp::Read };
        let object_size = self.mapper.mode().object_size();
        if op == DevOp::Read && !engine.pending_work().is_empty() {
            for w in engine.pending_work() {
                if matches!(w.kind, WorkKind::Copy | WorkKind::Promote) && w.from == Level::Slow {
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
        if let Some(c) = self.commits.as_mut().filter(|_| op == DevOp::Write && touched.contains(Level::Fast)) {
            // A write to the SSD may map a slot or make sectors valid: the table changes.
            c.ssd_writes += 1;
        }
        if op == DevOp::Write && self.commits.is_some() {
            for i in 0..self.pieces.len() {
                let (p, s, _) = self.pieces[i];
                self.slots_for_write(
                    now,
                    p.req.obj.0,
                    s.touches.contains(Level::Fast),
                    s.touches.contains(Level::Slow),
                );
            }
        }
        if touched.contains(Level::Slow) {
            tally.request_misses += 1;
        } else {
            tally.request_hits += 1;
        }
        let waiter = self.new_waiter(Purpose::Request(now, self.warm_up.is_none()));
        self.in_flight += 1;
        for level in touched.iter() {
            let mut runs = std::mem::take(&mut self.runs);
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
            self.runs = runs;
            self.submit_runs(now, level, op, Class::Normal, waiter);
        }
        if self.waiters[waiter].outstanding == 0 {
            // Served without device I/O.
            self.waiters[waiter].outstanding = 1;
            self.push_event(now, EventKind::IoDone, waiter);
        }
        self.start_work(engine, now);
        self.pieces.clear();
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

    fn drain(&mut self, engine: &mut Engine<ManualClock>) -> Result<(), SimError> {
        self.drain_while(engine, |_| true)
    }

    /// Handles events while `go_on` holds (checked before each).
    fn drain_while(
        &mut self,
        engine: &mut Engine<ManualClock>,
        go_on: impl Fn(&Timed) -> bool,
    ) -> Result<(), SimError> {
        while go_on(self) {
            let Some(Reverse(ev)) = self.events.pop() else { break };
            self.handle(engine, ev)?;
        }
        Ok(())
    }

    pub(crate) fn run(
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
        let time_limit = cfg.max_time.unwrap_or(Nanos(u64::MAX));
        let mapper = self.mapper;
        let mut seen = 0u64;
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
                Timing::Closed { depth } => {
                    self.wait_for_slot(engine, depth)?;
                    self.clock.now().max(last_arrival)
                }
                Timing::None => last_arrival,
            };
            if arrival > time_limit {
                return Err(SimError::TimeLimitReached);
            }
            last_arrival = arrival;
            self.advance_to(engine, arrival)?;
            if self.warm_up == Some(seen) {
                // The warm-up ends: requests still in flight finish unmeasured, the devices keep
                // their queues (no drain: a steady state has none), and everything counts from
                // this arrival.
                self.warm_up = None;
                tally = Tally::default();
                self.measured = Baseline {
                    start: arrival,
                    engine: engine.stats().clone(),
                    hdd: DeviceStats { merged: self.dev.hdd.merged(), ..*self.dev.hdd.stats() },
                    ssd: *self.dev.ssd.stats(),
                };
            }
            seen += 1;
            tally.record(rec);
            self.start_commits(arrival);
            self.request(engine, rec, arrival, &mut tally);
            if cfg.check_every > 0 && seen.is_multiple_of(cfg.check_every) {
                engine.check_invariants().map_err(|message| SimError::Invariant { request: seen, message })?;
            }
            if seen & 0xffff == 0 {
                progress.update(seen);
            }
            Ok(())
        });
        match replayed {
            Ok(_) | Err(SimError::TimeLimitReached) => {}
            Err(e) => return Err(e),
        }
        progress.update(seen);
        self.arrivals_done = true;
        // Let requests and background work in flight finish (timers are not run past the last
        // request), or only the requests.
        if cfg.stop_at_last_request && !cfg.flush_at_end {
            self.drain_while(engine, |t| t.in_flight > 0)?;
        } else {
            self.drain(engine)?;
        }
        if cfg.flush_at_end {
            let t = self.clock.now();
            engine.flush();
            self.start_work(engine, t);
            self.drain(engine)?;
        }
        let end = self.clock.now().max(self.last_completion);
        let mut hdd = self.dev.hdd.finish(end);
        let mut ssd = self.dev.ssd.finish(end);
        if cfg.measure_from > 0 {
            // Everything over the measured window: counters since its start, and the energy of
            // the window's busy, standby and idle time.
            let window = end.saturating_sub(self.measured.start).0;
            hdd = window_since(&hdd, &self.measured.hdd, window);
            hdd.energy_j = self.dev.hdd.device.energy_j(&hdd);
            ssd = window_since(&ssd, &self.measured.ssd, window);
            ssd.energy_j = self.dev.ssd.energy_j(&ssd);
        }
        let mut report = SimReport::default();
        crate::sim::warm_up_note(&mut report, cfg, seen)?;
        fill_counts(&mut report, &tally, &crate::filesim::report::stats_since(engine.stats(), &self.measured.engine));
        report.latency = self.hist.summary();
        report.duration_s = self.last_completion.saturating_sub(self.measured.start).as_secs_f64();
        if report.duration_s > 0.0 {
            report.iops = tally.requests as f64 / report.duration_s;
            report.mb_s = (tally.read_bytes + tally.write_bytes) as f64 / 1e6 / report.duration_s;
        }
        report.energy_j = hdd.energy_j + ssd.energy_j;
        let elapsed = hdd.elapsed_ns.max(ssd.elapsed_ns) as f64 / 1e9;
        report.mean_power_w = if elapsed > 0.0 { report.energy_j / elapsed } else { 0.0 };
        report.endurance = endurance(cfg.read_weight, &cfg.devices, &hdd, &ssd);
        // Open loop: IOPS is the offered load (or below it when the system falls behind), not
        // what the configuration can serve, so no cost per IOPS (closed-loop runs give it).
        let served_iops = if matches!(self.timing, Timing::Open { .. }) { 0.0 } else { report.iops };
        report.cost = cost(
            &cfg.arch,
            cfg.ssd_bytes,
            cfg.footprint_bytes,
            served_iops,
            self.dev.ssd.usd_per_gb(),
            self.dev.hdd.device.usd_per_gb(),
        );
        report.hca = hca(&report, &hdd, &ssd, cfg);
        if let Some(note) = self.commits.as_ref().map(commits::Commits::note) {
            report.notes.push(note);
        }
        report.hdd = hdd;
        report.ssd = ssd;
        Ok(report)
    }
}
