//! The engine: the one object every front end talks to.
//!
//! A front end tells it each access ([`Engine::access`]) and gets back how to serve it; any
//! background work the architecture decided on is queued and taken with [`Engine::drain_work`]
//! (in order — an invalidate must be applied before later work runs). The front end MUST
//! finish serving the access before it starts the work that access triggered: a promotion
//! issued by a write reads the source after that write. The front end executes the
//! work and reports [`Engine::complete`]; a failed or cancelled move rolls back inside the
//! architecture. Timers run from [`Engine::tick`]; [`Engine::next_deadline`] says when.
//!
//! The engine owns the work table (ids are generation-tagged, so a stale or duplicate
//! completion is an error, not a corruption), the access sequence used to break ties by
//! recency, and the counters every front end reports.

use serde::{Deserialize, Serialize};

use crate::arch::{AnyArch, Architecture, Placement, Usage};
use crate::{Clock, Level, ManualClock, Nanos, ObjectId, Op, Outcome, Request, Served, Work, WorkId, WorkKind};

/// Completion problems. The engine's state is unchanged when one is returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CompleteError {
    /// The id was never issued, was already completed, or does not need completion.
    #[error("unknown or already completed work id {0:?}")]
    UnknownWork(WorkId),
}

/// Counters kept by the engine for every architecture.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngineStats {
    /// Accesses per op kind: reads, writes, other (metadata).
    pub reads: u64,
    /// Writes seen.
    pub writes: u64,
    /// Metadata operations seen.
    pub metadata_ops: u64,
    /// Reads served per level (ram, ssd, hdd).
    pub reads_by_level: [u64; 3],
    /// Writes acknowledged per level (the slowest level written).
    pub writes_by_level: [u64; 3],
    /// Read bytes per level.
    pub read_bytes_by_level: [u64; 3],
    /// Write bytes per level written (a write-through write counts on both).
    pub write_bytes_by_level: [u64; 3],
    /// Work issued, by kind: promote, demote, copy, writeback, invalidate.
    pub issued: [u64; 5],
    /// Work completed successfully, by kind.
    pub done: [u64; 5],
    /// Work that failed, by kind.
    pub failed: [u64; 5],
    /// Work cancelled, by kind.
    pub cancelled: [u64; 5],
    /// Bytes moved by successful work, by kind.
    pub bytes_moved: [u64; 5],
}

impl EngineStats {
    /// Index of a kind in the per-kind arrays.
    pub const fn kind_index(k: WorkKind) -> usize {
        match k {
            WorkKind::Promote => 0,
            WorkKind::Demote => 1,
            WorkKind::Copy => 2,
            WorkKind::Writeback => 3,
            WorkKind::Invalidate => 4,
        }
    }
    /// Issued count for a kind.
    pub fn issued(&self, k: WorkKind) -> u64 {
        self.issued[Self::kind_index(k)]
    }
    /// Successful count for a kind.
    pub fn done(&self, k: WorkKind) -> u64 {
        self.done[Self::kind_index(k)]
    }
    /// Bytes moved by a kind.
    pub fn moved(&self, k: WorkKind) -> u64 {
        self.bytes_moved[Self::kind_index(k)]
    }
    /// Total bytes moved between tiers by background work.
    pub fn total_bytes_moved(&self) -> u64 {
        self.bytes_moved[..4].iter().sum()
    }
}

/// In-flight work, slab-allocated: no allocation per work item once grown.
#[derive(Clone, Debug, Default)]
pub struct WorkTable {
    slots: Vec<(u32, Option<Work>)>,
    free: Vec<u32>,
    live: usize,
}

impl WorkTable {
    fn insert(&mut self, mut w: Work) -> WorkId {
        let idx = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push((0, None));
                (self.slots.len() - 1) as u32
            }
        };
        let gen_ = self.slots[idx as usize].0.wrapping_add(1);
        let id = WorkId((u64::from(gen_) << 32) | u64::from(idx));
        w.id = id;
        self.slots[idx as usize] = (gen_, Some(w));
        self.live += 1;
        id
    }

    fn take(&mut self, id: WorkId) -> Option<Work> {
        let idx = (id.0 & 0xffff_ffff) as usize;
        let gen_ = (id.0 >> 32) as u32;
        let slot = self.slots.get_mut(idx)?;
        if slot.0 != gen_ {
            return None;
        }
        let w = slot.1.take()?;
        self.free.push(idx as u32);
        self.live -= 1;
        Some(w)
    }

    /// Number of works in flight.
    pub fn len(&self) -> usize {
        self.live
    }

    /// True when nothing is in flight.
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// Iterates in-flight work.
    pub fn iter(&self) -> impl Iterator<Item = &Work> {
        self.slots.iter().filter_map(|(_, w)| w.as_ref())
    }
}

/// What an architecture sees while handling one call: the time, and a way to issue work.
pub struct Ctx<'a> {
    /// Current time.
    pub now: Nanos,
    /// Sequence number of the current access (strictly increasing across accesses).
    pub seq: u64,
    works: &'a mut WorkTable,
    out: &'a mut Vec<Work>,
    stats: &'a mut EngineStats,
    /// Instant mode: work completes successfully as soon as the current call returns.
    deferred: Option<&'a mut Vec<Work>>,
    /// Whether invalidations are queued for the front end (a simulator without a physical SSD
    /// layout has nothing to do with them).
    report_invalidations: bool,
    /// The access is one told before and asked again after a wait ([`Engine::access_again`]):
    /// the architecture MUST NOT count it again towards its ranking.
    pub repeat: bool,
    /// The client request (bio) this access is a piece of, numbered by
    /// [`Engine::begin_request`]; 0 when the front end does not say.
    pub request: u64,
}

impl Ctx<'_> {
    /// Issues work. `work.id` is ignored and assigned here. Invalidations take effect now and
    /// get no id in the table.
    pub fn issue(&mut self, mut work: Work) -> WorkId {
        let k = EngineStats::kind_index(work.kind);
        self.stats.issued[k] += 1;
        if let Some(deferred) = self.deferred.as_deref_mut() {
            self.stats.done[k] += 1;
            if work.kind.needs_completion() {
                self.stats.bytes_moved[k] += work.bytes;
                work.id = WorkId(u64::MAX);
                deferred.push(work);
            }
            return WorkId(u64::MAX);
        }
        if work.kind.needs_completion() {
            work.id = self.works.insert(work);
        } else {
            work.id = WorkId(u64::MAX);
            self.stats.done[EngineStats::kind_index(work.kind)] += 1;
            if !self.report_invalidations {
                return work.id;
            }
        }
        self.out.push(work);
        work.id
    }

    /// Number of works in flight (issued and not completed).
    pub fn in_flight(&self) -> usize {
        self.works.len()
    }
}

/// The policy engine. See the module docs.
pub struct Engine<C: Clock = ManualClock> {
    arch: AnyArch,
    clock: C,
    works: WorkTable,
    out: Vec<Work>,
    stats: EngineStats,
    seq: u64,
    /// The current client request's number ([`Engine::begin_request`]).
    request: u64,
    instant: bool,
    deferred: Vec<Work>,
    report_invalidations: bool,
    /// Accesses told, when recording (front-end differential tests).
    calls: Option<Vec<Call>>,
    /// Check the architecture's invariants after every call ([`Engine::check_every_call`]).
    checking: bool,
}

/// One access as the engine was told it (see [`Engine::record_calls`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Call {
    /// The operation.
    pub op: Op,
    /// The object.
    pub obj: ObjectId,
    /// Its byte range.
    pub offset: u64,
    /// Its length.
    pub len: u64,
}

impl<C: Clock> Engine<C> {
    /// An engine running `arch`, reading time from `clock`.
    pub fn new(arch: AnyArch, clock: C) -> Engine<C> {
        Engine {
            arch,
            clock,
            works: WorkTable::default(),
            out: Vec::with_capacity(64),
            stats: EngineStats::default(),
            seq: 0,
            request: 0,
            instant: false,
            deferred: Vec::with_capacity(64),
            report_invalidations: true,
            calls: None,
            checking: false,
        }
    }

    /// Records every access from now on (or stops): two front ends fed the same operations
    /// must tell the engine the same things, and tests compare the records.
    pub fn record_calls(&mut self, on: bool) {
        self.calls = if on { Some(self.calls.take().unwrap_or_default()) } else { None };
    }

    /// Checks the architecture's invariants after every access, completion and tick from now
    /// on (or stops), and panics naming the call that broke one. For tests of front ends,
    /// whose real operations reach states a model harness may not; it costs a pass over every
    /// object per call.
    pub fn check_every_call(&mut self, on: bool) {
        self.checking = on;
    }

    /// Panics if checking is on and an invariant is broken after the call `what` describes.
    fn checked(&self, what: impl FnOnce() -> String) {
        if self.checking
            && let Err(e) = self.arch.check_invariants()
        {
            panic!("engine invariant broken after {}: {e}", what());
        }
    }

    /// The accesses recorded since [`Engine::record_calls`].
    pub fn calls(&self) -> &[Call] {
        self.calls.as_deref().unwrap_or_default()
    }

    /// Whether invalidations are queued for [`Engine::drain_work`] (default: yes). A front end
    /// that keeps no copies itself — the simulator — turns this off.
    pub fn set_report_invalidations(&mut self, on: bool) {
        self.report_invalidations = on;
    }

    /// Instant mode, for hit-ratio simulation (libCacheSim's model): every piece of work
    /// succeeds the moment it is issued, inside the call that issued it. Nothing is queued for
    /// [`Engine::drain_work`] and no completion is expected; the counters still count the work.
    /// Switch it on before the first access.
    pub fn set_instant(&mut self, on: bool) {
        self.instant = on;
    }

    fn ctx(&mut self) -> (Ctx<'_>, &mut AnyArch) {
        let now = self.clock.now();
        let deferred = if self.instant { Some(&mut self.deferred) } else { None };
        let report_invalidations = self.report_invalidations;
        let cx = Ctx {
            now,
            seq: self.seq,
            works: &mut self.works,
            out: &mut self.out,
            stats: &mut self.stats,
            deferred,
            report_invalidations,
            repeat: false,
            request: self.request,
        };
        (cx, &mut self.arch)
    }

    /// Instant mode: completes the work issued by the call that just returned (and any work
    /// those completions issue).
    #[inline]
    fn run_deferred(cx: &mut Ctx<'_>, arch: &mut AnyArch) {
        let mut i = 0;
        while let Some(w) = cx.deferred.as_deref().and_then(|d| d.get(i)).copied() {
            i += 1;
            arch.complete(cx, &w, Outcome::Done);
        }
        if let Some(d) = cx.deferred.as_deref_mut() {
            d.clear();
        }
    }

    /// Starts a client request (a bio): the accesses told until the next call are its pieces
    /// (`Ctx::request`), so an architecture can count a request once where the real stack
    /// does (dm-cache's hot-spot hits). Front ends that split requests into objects call it
    /// before each request's pieces.
    pub fn begin_request(&mut self) {
        self.request += 1;
    }

    /// Tells the engine about one access and returns how to serve it. Background work decided
    /// on is queued for [`Engine::drain_work`].
    #[inline]
    pub fn access(&mut self, req: &Request) -> Served {
        self.seq += 1;
        if let Some(calls) = self.calls.as_mut() {
            calls.push(Call { op: req.op, obj: req.obj, offset: req.offset, len: req.len });
        }
        let (mut cx, arch) = self.ctx();
        let served = arch.access(&mut cx, req);
        if cx.deferred.as_ref().is_some_and(|d| !d.is_empty()) {
            Self::run_deferred(&mut cx, arch);
        }
        let st = &mut self.stats;
        match req.op {
            Op::Read => {
                st.reads += 1;
                st.reads_by_level[served.level.index()] += 1;
                st.read_bytes_by_level[served.level.index()] += req.len;
            }
            Op::Write => {
                st.writes += 1;
                st.writes_by_level[served.level.index()] += 1;
                for l in served.touches.iter() {
                    st.write_bytes_by_level[l.index()] += req.len;
                }
            }
            _ => st.metadata_ops += 1,
        }
        self.checked(|| format!("{req:?}"));
        served
    }

    /// Asks again about an access told before with [`Engine::access`], which had to wait
    /// (it was `blocked`) and whose first answer other work has since made unsafe to act on
    /// (see [`crate::driver::still_valid`]). The architecture decides afresh and may issue
    /// work, but the access is not counted again: not in the statistics, not in the call
    /// record, not in the ranking (a front end that asks twice must rank as one that asks once).
    pub fn access_again(&mut self, req: &Request) -> Served {
        self.seq += 1;
        let (mut cx, arch) = self.ctx();
        cx.repeat = true;
        let served = arch.access(&mut cx, req);
        if cx.deferred.as_ref().is_some_and(|d| !d.is_empty()) {
            Self::run_deferred(&mut cx, arch);
        }
        self.checked(|| format!("{req:?} (asked again)"));
        served
    }

    /// A hint that `obj` will be accessed soon; lets the architecture prefetch its metadata.
    /// The simulator calls it twice per access: `deep == false` about eight accesses ahead,
    /// `deep == true` about four ahead.
    #[inline]
    pub fn prefetch(&self, obj: ObjectId, deep: bool) {
        self.arch.prefetch(obj, deep);
    }

    /// Work queued since the last drain, in the order it must be applied.
    #[inline]
    pub fn drain_work(&mut self) -> std::vec::Drain<'_, Work> {
        self.out.drain(..)
    }

    /// Work queued since the last drain, without taking it.
    pub fn pending_work(&self) -> &[Work] {
        &self.out
    }

    /// Reports the outcome of a piece of work. May queue new work.
    pub fn complete(&mut self, id: WorkId, outcome: Outcome) -> Result<(), CompleteError> {
        let work = self.works.take(id).ok_or(CompleteError::UnknownWork(id))?;
        let k = EngineStats::kind_index(work.kind);
        match outcome {
            Outcome::Done => {
                self.stats.done[k] += 1;
                self.stats.bytes_moved[k] += work.bytes;
            }
            Outcome::Failed => self.stats.failed[k] += 1,
            Outcome::Cancelled => self.stats.cancelled[k] += 1,
        }
        let (mut cx, arch) = self.ctx();
        arch.complete(&mut cx, &work, outcome);
        Self::run_deferred(&mut cx, arch);
        self.checked(|| format!("the {outcome:?} {work:?}"));
        Ok(())
    }

    /// Runs timers that are due. May queue work.
    pub fn tick(&mut self) {
        let (mut cx, arch) = self.ctx();
        arch.tick(&mut cx);
        Self::run_deferred(&mut cx, arch);
        self.checked(|| "a tick".to_string());
    }

    /// When [`Engine::tick`] next has something to do.
    pub fn next_deadline(&self) -> Option<Nanos> {
        self.arch.next_tick()
    }

    /// Asks for every dirty object to be written back (queues the work).
    pub fn flush(&mut self) {
        let (mut cx, arch) = self.ctx();
        arch.flush(&mut cx);
        Self::run_deferred(&mut cx, arch);
    }

    /// Tells the engine about an object that already exists on `level` (a front end adopting
    /// existing data, or restoring state after a restart).
    pub fn adopt(&mut self, obj: ObjectId, level: Level, size: u64, dirty: bool) {
        self.seq += 1;
        let (mut cx, arch) = self.ctx();
        arch.adopt(&mut cx, obj, level, size, dirty);
        Self::run_deferred(&mut cx, arch);
    }

    /// Access statistics to keep across a restart: the tracked objects among `objs`, coldest
    /// first by the collector's ranking, each with its count (inverse-bitmap counter, LFU
    /// frequency; 0 for recency-only collectors). After adopting the objects (in any order),
    /// calling [`Engine::restore_heat`] on them coldest first gives the collector the same
    /// ranking again. Sorting is O(n log n) comparisons under the caller's lock: call it rarely
    /// (at unmount, every few minutes).
    pub fn heat_ranking(&self, objs: &[ObjectId]) -> Vec<(ObjectId, u64)> {
        self.arch.heat_ranking(objs)
    }

    /// Re-ranks an adopted object as just accessed, with the count [`Engine::heat_ranking`]
    /// reported for it before a restart.
    pub fn restore_heat(&mut self, obj: ObjectId, heat: u64) {
        self.seq += 1;
        let (mut cx, arch) = self.ctx();
        arch.restore_heat(&mut cx, obj, heat);
        Self::run_deferred(&mut cx, arch);
    }

    /// Where an object is now.
    pub fn placement(&self, obj: ObjectId) -> Placement {
        self.arch.placement(obj)
    }

    /// Space and object counts.
    pub fn usage(&self) -> Usage {
        let mut u = self.arch.usage();
        u.in_flight = self.works.len();
        u
    }

    /// Engine counters.
    pub fn stats(&self) -> &EngineStats {
        &self.stats
    }

    /// Work in flight.
    pub fn in_flight(&self) -> impl Iterator<Item = &Work> {
        self.works.iter()
    }

    /// The clock.
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// The architecture (for inspection).
    pub fn arch(&self) -> &AnyArch {
        &self.arch
    }

    /// Counters particular to the architecture.
    pub fn arch_counters(&self) -> Vec<(&'static str, u64)> {
        self.arch.counters()
    }

    /// Checks the architecture's invariants (tests, `--paranoid` runs).
    pub fn check_invariants(&self) -> Result<(), String> {
        self.arch.check_invariants()
    }

    /// Heap bytes held by the engine and its architecture.
    pub fn memory_bytes(&self) -> usize {
        self.arch.memory_bytes()
            + self.works.slots.capacity() * std::mem::size_of::<(u32, Option<Work>)>()
            + self.out.capacity() * std::mem::size_of::<Work>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_ids_are_generation_tagged() {
        let mut t = WorkTable::default();
        let w = Work::new(WorkKind::Copy, ObjectId(1), Level::Slow, Level::Fast, 1);
        let a = t.insert(w);
        assert!(t.take(a).is_some());
        assert!(t.take(a).is_none(), "double completion is refused");
        let b = t.insert(w);
        assert_ne!(a, b, "a reused slot gets a new generation");
        assert!(t.take(a).is_none(), "a stale id does not complete the new work");
        assert!(t.take(b).is_some());
        assert!(t.take(WorkId(12345)).is_none());
    }
}
