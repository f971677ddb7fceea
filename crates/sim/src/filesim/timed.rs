//! Timed runs of the file simulator: an event loop over the devices, like the block
//! simulator's (`crate::timed`). The HDD sits behind the same [`QueuedDisk`] (merging,
//! mq-deadline, NCQ); the SSD and RAM serve in arrival order. An operation completes when the
//! last device I/O of its accesses does; in closed-loop timing the next operation is issued
//! then. Background work (moves, evictions, write-backs) goes to a mover that runs it in issue
//! order — the source reads, then the destination writes, at the work's I/O priority — with
//! every item at once by default, or at most `movers` at a time (the mount's mover thread runs
//! one; see [`super::FileSimConfig::movers`] for why that is not the default yet). An access the
//! engine marks [`Served::blocked`] issues its I/O only when that work and any work queued or
//! in flight on the same file are done.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use hashbrown::HashMap;
use tierwise_core::driver::revalidate;
use tierwise_core::{Clock, Level, Nanos, Op, Outcome, Request, Served, Work, WorkKind};

use super::FileSim;
use super::front_end::PiecesLeft;
use super::page_cache::PAGE;
use crate::device::{Class, DevOp, DeviceSet, DiskEvent, QueueConfig, Submitted, TierDevices};
use crate::filetrace::FileOp;
use crate::metrics::Histogram;
use crate::sim::{FoldHash, SimError};
use crate::slab::Slab;
use crate::timed::class_of;

/// The waiter of I/O nobody waits for (background write-back of the buffer cache).
pub(super) const NOBODY: u32 = u32::MAX;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum EventKind {
    /// An SSD or RAM I/O of waiter `id` finished.
    IoDone,
    /// The HDD finished the command it was executing.
    HddDone,
    /// The HDD may start a command.
    HddWake,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Event {
    time: Nanos,
    seq: u64,
    kind: EventKind,
    id: u32,
}

/// What a group of I/Os is for.
#[derive(Clone, Copy, Debug)]
enum Purpose {
    /// A file operation that arrived then; `measured`: inside the measurement window; `front_end`:
    /// the front end's own time for it, added once its I/O is done.
    Op { arrival: Nanos, measured: bool, front_end: Nanos },
    /// Running work `slot` is reading its source.
    WorkRead(u32),
    /// Running work `slot` is writing its destination.
    WorkWrite(u32),
}

#[derive(Clone, Copy, Debug)]
struct Waiter {
    outstanding: u32,
    purpose: Purpose,
}

/// Work in flight, and the deferred accesses waiting for it.
#[derive(Clone, Debug)]
struct Running {
    work: Work,
    addr: u64,
    /// The source's pages were all in the buffer cache when the work was issued.
    from_ram: bool,
    gates: Vec<u32>,
}

/// A blocked access's device I/O, held until the work it waits for is done; with the access
/// and the engine's first answer, which may need asking again then (as the mount does).
#[derive(Clone, Debug)]
struct Deferred {
    deps: u32,
    waiter: u32,
    ios: Vec<(Level, DevOp, u64, u64)>,
    req: Request,
    served: Served,
}

/// Devices, events and work in flight of a timed run.
pub(super) struct Timed {
    pub(super) dev: TierDevices,
    events: BinaryHeap<Reverse<Event>>,
    seq: u64,
    waiters: Slab<Waiter>,
    running: Slab<Running>,
    /// Work waiting for the mover, in issue order.
    queued: VecDeque<u32>,
    /// Work the mover is executing, and how many it may.
    active: u32,
    movers: u32,
    /// Work queued or running, per file.
    on_file: HashMap<u64, Vec<u32>, FoldHash>,
    deferred: Slab<Deferred>,
    /// Work queued by the last [`FileSim::start_works`].
    just_started: Vec<u32>,
    tokens: Vec<u64>,
    /// Operations in flight.
    pub(super) in_flight: u32,
    /// In closed-loop timing, the operations in flight (by waiter): the next one waits until
    /// none of them conflicts with it, as `tierwise replay`'s workers do.
    ops_running: Vec<(u32, FileOp)>,
    /// Data of operations in flight still to reach the engine, by waiter.
    pub(super) pieces_left: HashMap<u32, PiecesLeft, FoldHash>,
    pub(super) hist: Histogram,
}

impl Timed {
    pub(super) fn new(
        d: &DeviceSet,
        spin_down: Option<Nanos>,
        queue: QueueConfig,
        movers: u32,
    ) -> Result<Timed, SimError> {
        Ok(Timed {
            dev: TierDevices::new(d, spin_down, queue).map_err(SimError::Device)?,
            events: BinaryHeap::new(),
            seq: 0,
            waiters: Slab::default(),
            running: Slab::default(),
            queued: VecDeque::new(),
            active: 0,
            movers: if movers == 0 { u32::MAX } else { movers },
            on_file: HashMap::with_hasher(FoldHash),
            deferred: Slab::default(),
            just_started: Vec::new(),
            tokens: Vec::new(),
            in_flight: 0,
            ops_running: Vec::new(),
            pieces_left: HashMap::with_hasher(FoldHash),
            hist: Histogram::default(),
        })
    }

    fn push_event(&mut self, time: Nanos, kind: EventKind, id: u32) {
        self.seq += 1;
        self.events.push(Reverse(Event { time, seq: self.seq, kind, id }));
    }

    fn disk_event(&mut self, e: Option<DiskEvent>) {
        match e {
            Some(DiskEvent::Done(t)) => self.push_event(t, EventKind::HddDone, 0),
            Some(DiskEvent::Wake(t)) => self.push_event(t, EventKind::HddWake, 0),
            None => {}
        }
    }

    fn new_waiter(&mut self, purpose: Purpose) -> u32 {
        self.waiters.insert(Waiter { outstanding: 0, purpose })
    }

    /// A waiter for a file operation arriving at `arrival`.
    pub(super) fn op_waiter(&mut self, arrival: Nanos, measured: bool, front_end: Nanos) -> u32 {
        self.in_flight += 1;
        self.new_waiter(Purpose::Op { arrival, measured, front_end })
    }

    /// Remembers that operation `waiter` is `op` until it completes (closed-loop timing).
    pub(super) fn op_running(&mut self, waiter: u32, op: &FileOp) {
        self.ops_running.push((waiter, op.clone()));
    }

    /// Whether an operation in flight conflicts with `op`.
    fn conflicts(&self, op: &FileOp) -> bool {
        self.ops_running.iter().any(|(_, r)| r.conflicts_with(op))
    }

    /// Operation `waiter`, if it has no I/O outstanding, goes on at `now` (its next piece, its
    /// front end's time, or its completion): at the end of its dispatch, one that issued no I/O
    /// completes then.
    pub(super) fn resume_if_idle(&mut self, waiter: u32, now: Nanos) {
        if self.waiters[waiter].outstanding == 0 {
            self.waiters[waiter].outstanding = 1;
            self.push_event(now, EventKind::IoDone, waiter);
        }
    }

    /// Starts one device I/O at `now` for `waiter`.
    fn io(&mut self, now: Nanos, (level, op, addr, len): (Level, DevOp, u64, u64), class: Class, waiter: u32) {
        if waiter != NOBODY {
            self.waiters[waiter].outstanding += 1;
        }
        if len == 0 {
            self.push_event(now, EventKind::IoDone, waiter);
            return;
        }
        match self.dev.submit(now, level, (op, addr, len), class, u64::from(waiter)) {
            Submitted::At(done) => self.push_event(done, EventKind::IoDone, waiter),
            Submitted::Disk(e) => self.disk_event(e),
        }
    }

    /// Charges a RAM transfer of `bytes` at `now` to `waiter`.
    pub(super) fn ram(&mut self, now: Nanos, bytes: u64, waiter: u32) {
        self.io(now, (Level::Ram, DevOp::Read, 0, bytes), Class::Normal, waiter);
    }

    /// Starts queued work while the mover has room.
    fn run_mover(&mut self, now: Nanos) {
        while self.active < self.movers {
            let Some(slot) = self.queued.pop_front() else { return };
            self.active += 1;
            let r = &self.running[slot];
            let (w, from_ram, addr) = (r.work, r.from_ram, r.addr);
            let class = class_of(w.priority);
            if w.from == Level::Ram || from_ram {
                let waiter = self.new_waiter(Purpose::WorkWrite(slot));
                self.io(now, (w.to, DevOp::Write, addr, w.bytes), class, waiter);
            } else {
                let waiter = self.new_waiter(Purpose::WorkRead(slot));
                self.io(now, (w.from, DevOp::Read, addr, w.bytes), class, waiter);
            }
        }
    }

    fn next_event_time(&self) -> Option<Nanos> {
        self.events.peek().map(|Reverse(e)| e.time)
    }
}

impl FileSim {
    /// One engine access: in timed runs its device I/O (charged to the current operation when
    /// `charged`, else nobody waits for it), and the work it issued started.
    pub(super) fn access(&mut self, req: Request, charged: bool) -> Served {
        let served = self.engine.access(&req);
        self.tally.accesses += 1;
        if charged && req.op.is_data() {
            self.op_level = Some(self.op_level.map_or(served.level, |l| l.max(served.level)));
        }
        if self.timed.is_none() {
            return served;
        }
        self.work_buf.extend(self.engine.drain_work());
        let waiter = if charged { self.cur_op } else { NOBODY };
        let mut ios = std::mem::take(&mut self.ios);
        ios.clear();
        if req.op.is_data() {
            let addr = self.addr(req.obj.0, req.offset.saturating_add(req.len)) + req.offset;
            let op = if req.op == Op::Read { DevOp::Read } else { DevOp::Write };
            ios.extend(served.touches.iter().map(|level| (level, op, addr, req.len)));
        }
        self.start_works(self.now);
        let now = self.now;
        let Some(t) = self.timed.as_mut() else { return served };
        if served.blocked {
            let mut deps = std::mem::take(&mut t.just_started);
            if let Some(running) = t.on_file.get(&req.obj.0) {
                deps.extend_from_slice(running);
            }
            deps.sort_unstable();
            deps.dedup();
            if !deps.is_empty() {
                let d = Deferred { deps: deps.len() as u32, waiter, ios: ios.clone(), req, served };
                let id = t.deferred.insert(d);
                for &slot in &deps {
                    t.running[slot].gates.push(id);
                }
                if waiter != NOBODY {
                    t.waiters[waiter].outstanding += 1;
                }
                ios.clear();
            }
            deps.clear();
            t.just_started = deps;
        }
        for &io in &ios {
            t.io(now, io, Class::Normal, waiter);
        }
        self.ios = ios;
        served
    }

    /// Hands the work the engine issued to the mover at `now`.
    pub(super) fn start_works(&mut self, now: Nanos) {
        if let Some(t) = self.timed.as_mut() {
            t.just_started.clear();
        }
        let mut buf = std::mem::take(&mut self.work_buf);
        for w in buf.drain(..) {
            if w.kind == WorkKind::Invalidate {
                continue;
            }
            let addr = self.addr(w.obj.0, w.bytes);
            // A move whose every page is in the buffer cache (the read that triggered it just
            // brought them in) copies from RAM: only the destination write costs device time.
            let cached = w.from != Level::Ram
                && self.cache.enabled()
                && w.bytes <= (1 << 24)
                && (0..w.bytes.div_ceil(PAGE)).all(|p| self.cache.contains(w.obj.0, p));
            let Some(t) = self.timed.as_mut() else { continue };
            let r = Running { work: w, addr, from_ram: cached, gates: Vec::new() };
            let slot = t.running.insert(r);
            t.on_file.entry(w.obj.0).or_default().push(slot);
            t.just_started.push(slot);
            t.queued.push_back(slot);
        }
        self.work_buf = buf;
        if let Some(t) = self.timed.as_mut() {
            t.run_mover(now);
        }
    }

    /// One I/O of `waiter` finished at `time`.
    fn io_done(&mut self, waiter: u32, time: Nanos) -> Result<(), SimError> {
        let Some(t) = self.timed.as_mut() else { return Ok(()) };
        if waiter == NOBODY {
            return Ok(());
        }
        let w = &mut t.waiters[waiter];
        w.outstanding -= 1;
        if w.outstanding > 0 {
            return Ok(());
        }
        if let Some(left) = t.pieces_left.remove(&waiter) {
            self.next_piece(waiter, left, time);
            return Ok(());
        }
        let w = &mut t.waiters[waiter];
        if let Purpose::Op { front_end, .. } = &mut w.purpose
            && *front_end > Nanos::ZERO
        {
            // The front end's time (FUSE round trips) comes on top of the device time: the
            // operation is done that much later, its I/O unchanged.
            let done = time.saturating_add(*front_end);
            *front_end = Nanos::ZERO;
            w.outstanding = 1;
            t.push_event(done, EventKind::IoDone, waiter);
            return Ok(());
        }
        let purpose = w.purpose;
        t.waiters.free(waiter);
        match purpose {
            Purpose::Op { arrival, measured, .. } => {
                if let Some(i) = t.ops_running.iter().position(|&(w, _)| w == waiter) {
                    t.ops_running.swap_remove(i);
                }
                if measured {
                    t.hist.record(time.0.saturating_sub(arrival.0));
                }
                t.in_flight -= 1;
                self.last_completion = self.last_completion.max(time);
            }
            Purpose::WorkRead(slot) => {
                let r = &t.running[slot];
                let (w, addr) = (r.work, r.addr);
                let waiter = t.new_waiter(Purpose::WorkWrite(slot));
                t.io(time, (w.to, DevOp::Write, addr, w.bytes), class_of(w.priority), waiter);
            }
            Purpose::WorkWrite(slot) => self.work_done(slot, time)?,
        }
        Ok(())
    }

    /// Running work `slot` finished at `time`: the engine hears it, the accesses waiting for
    /// it go, and the work it issues starts.
    fn work_done(&mut self, slot: u32, time: Nanos) -> Result<(), SimError> {
        let Some(t) = self.timed.as_mut() else { return Ok(()) };
        let gates = std::mem::take(&mut t.running[slot].gates);
        let work = t.running[slot].work;
        t.running.free(slot);
        t.active -= 1;
        if let Some(list) = t.on_file.get_mut(&work.obj.0) {
            list.retain(|&s| s != slot);
            if list.is_empty() {
                t.on_file.remove(&work.obj.0);
            }
        }
        // The gates whose last dependency this was (kept in the gate list itself: no allocation).
        let mut released = gates;
        released.retain(|&id| {
            let d = &mut t.deferred[id];
            d.deps -= 1;
            d.deps == 0
        });
        for id in released {
            let Some(t) = self.timed.as_mut() else { return Ok(()) };
            let mut d = t.deferred[id].clone();
            t.deferred.free(id);
            // Work that ran meanwhile may have made the first answer unsafe (a write would
            // leave a copy stale): then it is asked again, as the mount does, uncounted.
            let (again, asked_again) = revalidate(&mut self.engine, &d.req, d.served);
            if asked_again {
                let (op, addr, len) = d.ios.first().map_or((DevOp::Write, 0, d.req.len), |&(_, o, a, l)| (o, a, l));
                d.ios.clear();
                d.ios.extend(again.touches.iter().map(|level| (level, op, addr, len)));
                self.work_buf.extend(self.engine.drain_work());
            }
            let Some(t) = self.timed.as_mut() else { return Ok(()) };
            for &io in &d.ios {
                t.io(time, io, Class::Normal, d.waiter);
            }
            // The hold on the operation ends.
            self.io_done(d.waiter, time)?;
        }
        self.clock.set(time.max(self.clock.now()));
        self.engine.complete(work.id, Outcome::Done).map_err(|e| SimError::Complete(e.to_string()))?;
        self.work_buf.extend(self.engine.drain_work());
        self.start_works(time);
        if let Some(t) = self.timed.as_mut() {
            t.run_mover(time);
        }
        Ok(())
    }

    fn handle(&mut self, ev: Event) -> Result<(), SimError> {
        self.clock.set(ev.time.max(self.clock.now()));
        match ev.kind {
            EventKind::IoDone => self.io_done(ev.id, ev.time)?,
            EventKind::HddDone => {
                let Some(t) = self.timed.as_mut() else { return Ok(()) };
                let mut tokens = std::mem::take(&mut t.tokens);
                tokens.clear();
                tokens.extend_from_slice(t.dev.hdd.complete());
                let delay = t.dev.hdd.completion_delay();
                for &tok in &tokens {
                    if delay == Nanos::ZERO {
                        self.io_done(tok as u32, ev.time)?;
                    } else if let Some(t) = self.timed.as_mut() {
                        t.push_event(ev.time.saturating_add(delay), EventKind::IoDone, tok as u32);
                    }
                }
                let Some(t) = self.timed.as_mut() else { return Ok(()) };
                t.tokens = tokens;
                let e = t.dev.hdd.dispatch(ev.time);
                t.disk_event(e);
            }
            EventKind::HddWake => {
                let Some(t) = self.timed.as_mut() else { return Ok(()) };
                let e = t.dev.hdd.woke(ev.time);
                t.disk_event(e);
            }
        }
        Ok(())
    }

    fn pop_event(&mut self) -> Option<Event> {
        self.timed.as_mut().and_then(|t| t.events.pop()).map(|Reverse(e)| e)
    }

    fn tick(&mut self, at: Nanos) {
        self.clock.set(at.max(self.clock.now()));
        self.engine.tick();
        self.work_buf.extend(self.engine.drain_work());
        self.start_works(at);
    }

    /// Processes events before `t` and engine timers due up to `t`. Events at `t` itself wait,
    /// so that operations arriving together are queued together before the disk picks one.
    pub(super) fn advance_to(&mut self, t: Nanos) -> Result<(), SimError> {
        loop {
            let next_ev = self.timed.as_ref().and_then(Timed::next_event_time).filter(|&e| e < t);
            let next_tick = self.engine.next_deadline().filter(|&d| d <= t);
            match (next_ev, next_tick) {
                (Some(e), Some(d)) if d < e => self.tick(d),
                (Some(_), _) => {
                    if let Some(ev) = self.pop_event() {
                        self.handle(ev)?;
                    }
                }
                (None, Some(d)) => {
                    self.tick(d);
                    if self.engine.next_deadline().is_some_and(|n| n <= d) {
                        break; // a timer that does not move forward (contract violation): stop
                    }
                }
                (None, None) => break,
            }
        }
        self.clock.set(t.max(self.clock.now()));
        Ok(())
    }

    /// Processes events (and timers due before them) until fewer than `depth` operations are
    /// in flight.
    pub(super) fn wait_for_slot(&mut self, depth: u32, op: &FileOp) -> Result<(), SimError> {
        while self.timed.as_ref().is_some_and(|t| t.in_flight >= depth || t.conflicts(op)) {
            let Some(e) = self.timed.as_ref().and_then(Timed::next_event_time) else {
                return Err(SimError::Complete("the file simulation stalled with operations in flight".into()));
            };
            if let Some(d) = self.engine.next_deadline().filter(|&d| d < e) {
                self.tick(d);
                continue;
            }
            if let Some(ev) = self.pop_event() {
                self.handle(ev)?;
            }
        }
        Ok(())
    }

    /// Processes every event left (timers are not run past the last operation).
    pub(super) fn drain(&mut self) -> Result<(), SimError> {
        while let Some(ev) = self.pop_event() {
            self.handle(ev)?;
        }
        Ok(())
    }
}
