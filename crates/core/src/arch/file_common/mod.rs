//! The machinery every file-level architecture shares: Loris's seven caching/DST systems, the
//! file caches Loris could not build (read-only, write-through-all, write-back) and HyCache.
//!
//! Objects are whole files (and directories, [`ObjectKind::Meta`]) whose sizes change under
//! writes and truncates. What differs between the architectures is a [`FilePolicy`] value: where
//! new files are created, what triggers a promotion (a read served by the HDD, an open, a
//! timer), whether a promotion moves (DST) or copies (caching), what a write to a copy does and
//! how space is freed. The type-aware architecture runs one policy per volume over one shared
//! SSD and collector.
//!
//! Shared rules (SPEC §1):
//! - **Sieving**: a file larger than `sieve` bytes is never placed on the SSD; an SSD-resident
//!   file that grows past it is demoted (DST) or its copy invalidated (caching).
//! - **Foreground cleaner**: when a write to an SSD file cannot complete for lack of space, the
//!   coldest files are evicted until it fits — caching drops clean copies at once, DST demotes
//!   and the write waits for the demotions ([`Served::blocked`]). When nothing colder can go,
//!   the written file itself leaves the SSD.
//! - **Background cleaner** (Dynamic Cold-DST + cleaner): after the first blocking write, a
//!   timer frees ahead of demand as much space as foreground cleaning has had to free so far,
//!   capped at `cleaner-cap` of the SSD.
//!
//! # Space accounting
//! `fast_used` is the committed footprint: a settled SSD file counts its size; a file with a
//! promotion or copy in flight counts the bytes reserved for it; a file leaving the SSD counts
//! the bytes being moved out until the move completes. `leaving` is the part of `fast_used`
//! that is on its way out. A write that had to wait for cleaning is counted when issued, so
//! `fast_used` may exceed the capacity by at most `leaving`: the front end runs the write after
//! the demotions, so the device never holds more than its capacity.
//!
//! # Moves and concurrent access
//! At most one piece of work is in flight per file. A write to a file whose promotion or copy is
//! in flight is served by the source and marks the move stale: its result is dropped on
//! completion. A write to a file leaving the SSD waits for the move and lands on the HDD.
//! A write to a dirty file being written back re-dirties it (and cancels its eviction).

use std::collections::{HashMap, VecDeque};

use super::{Placement, Setup, Usage};
use crate::collector::{AnyCollector, Collector, CollectorContext, Removal, Touch, build_collector, pages_of};
use crate::engine::Ctx;
use crate::object_table::ObjectTable;
use crate::params::{ConfigError, ParamSpec, Params};
use crate::{Level, Levels, Nanos, ObjectId, ObjectKind, Op, Outcome, Request, Served, Slot, Tier, Work, WorkKind};

mod arch;
mod complete;
mod entry;
mod mode;
mod report;
mod requests;

pub use arch::{FileArch, FileArchKind};
pub(crate) use arch::{file_policy_arch, merge_sort};
use mode::*;
pub use mode::{
    CLEANER_CAP, CLEANER_PERIOD, DIRTY_HIGH, DIRTY_LOW, FILE_PARAMS, FileMeta, FilePolicy, INTERVAL, MAX_FILE_SIZE,
    MAX_VOLUMES, MAX_WRITEBACKS, Promote, SIEVE, Space, THRESHOLD, WRITEBACK_IDLE, Writes,
};

/// How many promotions wait for space at most; older requests are dropped (they are hints).
const MAX_PENDING: usize = 4096;

/// The shared file-level engine; see the module docs.
#[derive(Debug)]
pub struct FileCore {
    /// Policy per volume; volumes past the end use entry 0.
    modes: Vec<&'static FilePolicy>,
    sieve: u64,
    capacity: u64,
    /// HyCache's usage threshold in bytes (the capacity for other modes).
    threshold: u64,
    interval: Nanos,
    next_interval: Nanos,
    cleaner_period: Nanos,
    cleaner_cap: u64,
    next_clean: Nanos,
    cleaner_active: bool,
    dirty_high: u64,
    dirty_low: u64,
    /// Dirty bytes passed `dirty_high` and have not yet fallen to `dirty_low`: write-backs go
    /// on (from completions too) until they do.
    draining: bool,
    /// After this long without an access, write back down to `dirty_low` (0: never).
    writeback_idle: Nanos,
    /// When the last access was.
    last_access: Nanos,
    max_writebacks: usize,
    table: ObjectTable<FileMeta>,
    collector: AnyCollector,
    tracks_slow: bool,
    fast_used: u64,
    leaving: u64,
    dirty_bytes: u64,
    writebacks: usize,
    /// Bytes held by in-flight promotions/copies (reserved) and demotions/evictions (leaving).
    held: HashMap<u32, u64>,
    pending: VecDeque<ObjectId>,
    dirty_queue: VecDeque<ObjectId>,
    /// Bytes admitted over capacity in the one case nothing can make room (see `write_cached`).
    overcommit: u64,
    /// Deleted files whose work is still in flight are kept under ids counted down from the top.
    ghosts: u64,
    /// Files renamed into a volume of another policy, waiting for their work in flight (or the
    /// write-back that makes them convertible) before they switch.
    pending_volume: HashMap<u32, u16>,
    counters: FileCounters,
}

#[derive(Clone, Copy, Debug, Default)]
struct FileCounters {
    blocked_writes: u64,
    foreground_evictions: u64,
    foreground_evicted_bytes: u64,
    background_evictions: u64,
    sieved_out: u64,
    stale_moves: u64,
    threshold_evictions: u64,
    interval_runs: u64,
    overcommitted_writes: u64,
}

impl FileCore {
    /// Builds the core for `modes` (index = volume) from the shared knobs.
    pub fn build(p: &mut Params, setup: &Setup, modes: Vec<&'static FilePolicy>) -> Result<FileCore, ConfigError> {
        if setup.object_size != 0 {
            return Err(p.inconsistent(
                "file-level architectures place whole files of changing sizes; they cannot run on \
                 fixed-size blocks (use a file trace: `tierwise sim-files`)",
            ));
        }
        if setup.fast_capacity == 0 {
            return Err(p.inconsistent("the SSD capacity must be above zero"));
        }
        let Some(&first) = modes.first() else {
            return Err(p.inconsistent("a file-level architecture needs at least one policy"));
        };
        let threshold_mode = modes.iter().any(|m| m.space == Space::Threshold);
        // Each knob's default is the one its policy declares (type-aware: the first volume's
        // policy that takes it; they share the same specs).
        for m in &modes {
            p.declare(m.params);
        }
        let default_of = |spec: &ParamSpec| modes.iter().find_map(|m| m.default_of(spec.name)).unwrap_or(spec.default);
        // A knob no policy of this architecture takes is not read, so giving it is an error
        // that lists the ones it takes (its value then does not matter).
        let uses = |spec: &ParamSpec| modes.iter().any(|m| m.default_of(spec.name).is_some());
        let dur = |spec: &ParamSpec| crate::params::parse_duration(default_of(spec)).unwrap_or(Nanos::from_secs(1));
        let pct = |spec: &ParamSpec| default_of(spec).trim_end_matches('%').parse::<f64>().unwrap_or(0.0) / 100.0;
        let sieve = p.size(SIEVE.name, 0, u64::MAX)?;
        let (min_t, max_t) = (Nanos::from_millis(1), Nanos::from_secs(86_400));
        let interval = if uses(&INTERVAL) { p.duration(INTERVAL.name, min_t, max_t)? } else { dur(&INTERVAL) };
        let cleaner_period =
            if uses(&CLEANER_PERIOD) { p.duration(CLEANER_PERIOD.name, min_t, max_t)? } else { dur(&CLEANER_PERIOD) };
        let cleaner_cap = if uses(&CLEANER_CAP) { p.percent(CLEANER_CAP.name, 0.0, 100.0)? } else { pct(&CLEANER_CAP) };
        let threshold = if uses(&THRESHOLD) { p.percent(THRESHOLD.name, 1.0, 100.0)? } else { pct(&THRESHOLD) };
        let (high, low) = if uses(&DIRTY_HIGH) {
            p.watermarks(DIRTY_HIGH.name, DIRTY_LOW.name)?
        } else {
            (pct(&DIRTY_HIGH), pct(&DIRTY_LOW))
        };
        let writeback_idle = if uses(&WRITEBACK_IDLE) {
            p.duration(WRITEBACK_IDLE.name, Nanos(0), max_t)?
        } else {
            crate::params::parse_duration(default_of(&WRITEBACK_IDLE)).unwrap_or(Nanos(0))
        };
        let max_writebacks = if uses(&MAX_WRITEBACKS) {
            p.u64(MAX_WRITEBACKS.name, 1, 65_536)?
        } else {
            default_of(&MAX_WRITEBACKS).parse::<u64>().unwrap_or(16)
        } as usize;
        // A threshold policy's collector (HyCache's LRU) wins: its eviction is what ranks.
        let default_collector = modes.iter().find(|m| m.space == Space::Threshold).unwrap_or(&first).default_collector;
        let collector_name = p.string_or("collector", default_collector);
        let collector = build_collector(&collector_name, p, &CollectorContext { fast_capacity: setup.fast_capacity })?;
        let tracks_slow = collector.tracks_slow_objects();
        if !tracks_slow && modes.iter().any(|m| m.promote == Promote::OnInterval) {
            return Err(p.inconsistent(format!(
                "interval migration needs a collector that ranks files on the HDD; `{collector_name}` \
                 ranks only SSD files (use inverse-bitmap)"
            )));
        }
        let cap = setup.fast_capacity;
        Ok(FileCore {
            modes,
            sieve,
            capacity: cap,
            threshold: if threshold_mode { ((cap as f64 * threshold) as u64).max(1) } else { cap },
            interval,
            next_interval: interval,
            cleaner_period,
            cleaner_cap: (cap as f64 * cleaner_cap) as u64,
            next_clean: Nanos::MAX,
            cleaner_active: false,
            dirty_high: (cap as f64 * high) as u64,
            dirty_low: (cap as f64 * low) as u64,
            draining: false,
            writeback_idle,
            last_access: Nanos(0),
            max_writebacks,
            table: ObjectTable::new(),
            collector,
            tracks_slow,
            fast_used: 0,
            leaving: 0,
            dirty_bytes: 0,
            writebacks: 0,
            held: HashMap::new(),
            pending: VecDeque::new(),
            dirty_queue: VecDeque::new(),
            ghosts: 0,
            pending_volume: HashMap::new(),
            overcommit: 0,
            counters: FileCounters::default(),
        })
    }

    fn mode_of(&self, volume: u16) -> &'static FilePolicy {
        self.modes.get(usize::from(volume)).copied().unwrap_or(self.modes[0])
    }

    fn mode(&self, s: Slot) -> &'static FilePolicy {
        self.mode_of(self.table.meta(s).volume())
    }

    fn sieved(&self, size: u64) -> bool {
        self.sieve != 0 && size > self.sieve
    }

    /// The touch recorded for work the architecture starts itself (timers, completions).
    fn background_touch(cx: &Ctx<'_>) -> Touch {
        Touch { now: cx.now, seq: cx.seq, pages: 1, write: false }
    }

    fn touch_of(cx: &Ctx<'_>, req: &Request) -> Touch {
        Touch { now: cx.now, seq: cx.seq, pages: pages_of(req.offset, req.len), write: req.op == Op::Write }
    }

    /// Makes the collector's view of `s` match its state: tracked when not sieved or deleted
    /// (and, for SSD-only collectors, when it has or is getting an SSD copy), on the fast list
    /// when it has or is getting an SSD copy and is not leaving.
    fn coll_wanted(&self, m: &FileMeta) -> (bool, bool) {
        let fast = (m.has(ON_FAST) || m.has(MOVING)) && !m.has(LEAVING);
        if fast && self.keeps_namespace(m) {
            // HyCache kept the whole namespace on the SSD: its directories are never ranked,
            // so never evicted.
            return (false, true);
        }
        (!m.has(DELETED) && !self.sieved(m.size()) && (self.tracks_slow || fast), fast)
    }

    /// Whether `m` is a directory HyCache keeps on the SSD for good.
    fn keeps_namespace(&self, m: &FileMeta) -> bool {
        m.has(META) && self.mode_of(m.volume()).keeps_namespace
    }

    /// [`Self::sync_coll_as`] for any change but an eviction.
    fn sync_coll(&mut self, s: Slot, t: &Touch) {
        self.sync_coll_as(s, t, false);
    }

    /// Makes the collector's view of `s` match its state; `evicted`: `s` left the SSD as the
    /// coldest file (an eviction, which the inverse bitmap's admission learns from), not for a
    /// write, a failed move or a volume change.
    fn sync_coll_as(&mut self, s: Slot, t: &Touch, evicted: bool) {
        let m = *self.table.meta(s);
        let (want, fast) = self.coll_wanted(&m);
        let tier = if fast { Tier::Fast } else { Tier::Slow };
        let mut flags = m.flags();
        if want && !m.has(IN_COLL) {
            self.collector.insert(s, self.table.id(s), tier, m.size(), t);
            flags |= IN_COLL;
        } else if !want && m.has(IN_COLL) {
            let why = if m.has(DELETED) { Removal::Deleted } else { Removal::Evicted };
            self.collector.remove(s, why);
            flags &= !IN_COLL;
        } else if want && m.has(COLL_FAST) && !fast && !evicted {
            self.collector.dropped_from_fast(s);
        } else if want && m.has(COLL_FAST) != fast {
            self.collector.set_tier(s, tier);
        }
        flags = if fast { flags | COLL_FAST } else { flags & !COLL_FAST };
        self.table.meta_mut(s).set_flags(flags);
    }

    fn set_flags(&mut self, s: Slot, set: u16, clear: u16) {
        let m = self.table.meta_mut(s);
        let f = m.flags();
        m.set_flags((f | set) & !clear);
    }

    /// Sets the size of `s`, keeping the dirty byte count in step.
    fn resize(&mut self, s: Slot, size: u64) {
        let m = self.table.meta_mut(s);
        let old = m.size();
        m.set_size(size);
        if m.has(DIRTY) {
            self.dirty_bytes = self.dirty_bytes - old + m.size();
        }
    }

    /// File `s` became dirty with `delta` bytes: counted, and queued for write-back even when
    /// empty (a created file grows by writes, which only count: queued at creation or never).
    fn add_dirty(&mut self, s: Slot, delta: i64) {
        self.dirty_bytes = self.dirty_bytes.saturating_add_signed(delta);
        if delta >= 0 && !self.table.meta(s).has(MOVING) {
            self.dirty_queue.push_back(self.table.id(s));
        }
    }

    /// Looks `obj` up, adopting an unknown one as an existing HDD file of `size` bytes (a trace
    /// that starts with files already present).
    fn lookup_or_adopt(&mut self, cx: &Ctx<'_>, req: &Request, size: u64) -> Slot {
        if let Some(s) = self.table.get(req.obj) {
            return s;
        }
        let mut flags = ON_SLOW;
        if req.class.kind == ObjectKind::Meta {
            flags |= META;
            if self.mode_of(req.class.volume).keeps_namespace && self.fast_used + size <= self.capacity {
                // A directory that existed before joins HyCache's SSD namespace (its entries
                // are small).
                flags = META | ON_FAST;
                self.fast_used += size;
            }
        }
        let s = self.table.insert(req.obj, FileMeta::new(size, flags, req.class.volume));
        self.sync_coll(s, &Self::touch_of(cx, req));
        s
    }

    fn issue(
        &mut self,
        cx: &mut Ctx<'_>,
        s: Slot,
        kind: WorkKind,
        (from, to): (Level, Level),
        bytes: u64,
        holds: bool,
    ) {
        if holds {
            self.held.insert(s.0, bytes);
        }
        self.set_flags(s, MOVING, STALE | REDIRTY);
        // The slot in the tag finds the file on completion even if its id was deleted and
        // created again meanwhile.
        cx.issue(Work::new(kind, self.table.id(s), from, to, bytes).with_tag(u64::from(s.0)));
    }

    /// Evicts `v` from the SSD: DST demotes, caching drops a clean copy at once and writes a
    /// dirty one back first. Returns the bytes that will be free once done.
    fn evict(&mut self, cx: &mut Ctx<'_>, v: Slot, t: &Touch) -> u64 {
        self.send_off_fast(cx, v, t, true)
    }

    /// Sends `v` off the SSD: drops a clean copy, writes back a dirty one, demotes the only
    /// one. `evicted`: chosen as the coldest (not sent off by a write).
    pub(super) fn send_off_fast(&mut self, cx: &mut Ctx<'_>, v: Slot, t: &Touch, evicted: bool) -> u64 {
        let m = *self.table.meta(v);
        let mode = self.mode_of(m.volume());
        if mode.copies() && m.has(ON_SLOW) && !m.has(DIRTY) {
            self.fast_used -= m.size();
            self.set_flags(v, 0, ON_FAST);
            cx.issue(Work::new(WorkKind::Invalidate, self.table.id(v), Level::Fast, Level::Fast, m.size()));
        } else {
            let kind = if mode.copies() { WorkKind::Writeback } else { WorkKind::Demote };
            self.leaving += m.size();
            self.set_flags(v, LEAVING, 0);
            if kind == WorkKind::Writeback {
                self.writebacks += 1;
            }
            self.issue(cx, v, kind, (Level::Fast, Level::Slow), m.size(), true);
        }
        self.sync_coll_as(v, t, evicted);
        m.size()
    }

    /// The coldest SSD file that can be evicted now, other than `except`.
    fn victim(&mut self, now: Nanos, except: Option<Slot>) -> Option<Slot> {
        let v = self.collector.coldest_fast(now)?;
        let m = self.table.meta(v);
        if Some(v) == except || m.has(MOVING) || !m.has(ON_FAST) {
            return None;
        }
        Some(v)
    }

    /// Evicts coldest files until `need` more bytes fit under `limit` counting what is leaving;
    /// returns whether it did, and whether it had to evict anything.
    fn clean(&mut self, cx: &mut Ctx<'_>, need: u64, limit: u64, except: Option<Slot>, t: &Touch) -> (bool, bool) {
        let mut evicted = false;
        while self.fast_used + need > limit + self.leaving {
            let Some(v) = self.victim(cx.now, except) else { return (false, evicted) };
            let freed = self.evict(cx, v, t);
            evicted = true;
            self.counters.foreground_evictions += 1;
            self.counters.foreground_evicted_bytes += freed;
        }
        (true, evicted)
    }

    /// Room for `delta` more bytes of the settled SSD file `s`. `Some(blocked)` when it fits
    /// (after cleaning, which the write must wait for when it demoted anything).
    fn grow_on_fast(&mut self, cx: &mut Ctx<'_>, s: Slot, delta: u64, t: &Touch) -> Option<bool> {
        if self.fast_used + delta <= self.capacity {
            self.fast_used += delta;
            return Some(false);
        }
        let leaving_before = self.leaving;
        let (ok, _) = self.clean(cx, delta, self.capacity, Some(s), t);
        if !ok {
            return None;
        }
        self.fast_used += delta;
        let blocked = self.leaving > leaving_before;
        if blocked {
            self.counters.blocked_writes += 1;
            if self.mode(s).space == Space::BackgroundCleaner && !self.cleaner_active {
                self.cleaner_active = true;
                self.next_clean = cx.now.saturating_add(self.cleaner_period);
            }
        }
        Some(blocked)
    }

    /// Sends the settled SSD file `s` (pre-write size `size`) off the SSD; the write that
    /// caused it lands on the HDD after the move (or at once for a clean copy).
    fn leave_fast(&mut self, cx: &mut Ctx<'_>, s: Slot, t: &Touch) -> Served {
        let m = *self.table.meta(s);
        self.send_off_fast(cx, s, t, false);
        if self.mode_of(m.volume()).copies() && !m.has(DIRTY) {
            Served::by(Level::Slow)
        } else {
            Served::by(Level::Slow).after_work()
        }
    }

    /// Promotes or copies the HDD file `s` when it may go to the SSD; with `force` (HyCache's
    /// open) without asking the collector's admission rule.
    fn promote(&mut self, cx: &mut Ctx<'_>, s: Slot, force: bool, t: &Touch) {
        let m = *self.table.meta(s);
        if m.has(MOVING) || m.has(ON_FAST) || m.has(DELETED) || self.sieved(m.size()) {
            return;
        }
        let limit = self.threshold;
        if m.size() > limit {
            return;
        }
        // Admission is the collector's rule for files it ranks on the HDD; a collector that
        // ranks only SSD files (LRU, CLOCK, ...) has no say, so every HDD read promotes, as in a
        // classic cache.
        let admitted = if self.tracks_slow { m.has(IN_COLL) && self.collector.admits(s) } else { true };
        if !(force || admitted) {
            return;
        }
        if self.fast_used + m.size() > limit {
            // Make room with colder files only, then wait for the space.
            while self.fast_used + m.size() > limit + self.leaving {
                let Some(v) = self.victim(cx.now, Some(s)) else { break };
                if !force && m.has(IN_COLL) && !self.collector.hotter(s, v) {
                    break;
                }
                self.evict(cx, v, t);
                self.counters.background_evictions += 1;
            }
            if self.fast_used + m.size() > limit {
                if self.fast_used + m.size() <= limit + self.leaving && !m.has(PENDING) {
                    if self.pending.len() >= MAX_PENDING
                        && let Some(old) = self.pending.pop_front()
                        && let Some(o) = self.table.get(old)
                    {
                        self.set_flags(o, 0, PENDING);
                    }
                    self.pending.push_back(self.table.id(s));
                    self.set_flags(s, PENDING, 0);
                }
                return;
            }
        }
        self.fast_used += m.size();
        let kind = if self.mode_of(m.volume()).copies() { WorkKind::Copy } else { WorkKind::Promote };
        self.issue(cx, s, kind, (Level::Slow, Level::Fast), m.size(), true);
        self.sync_coll(s, t);
    }

    /// Issues `w` (a move off the SSD that must happen) again: the file keeps its `held` bytes
    /// counted as leaving; the new work copies `copy` bytes.
    fn reissue_leaving(&mut self, cx: &mut Ctx<'_>, s: Slot, w: &Work, held: u64, copy: u64) {
        self.held.insert(s.0, held);
        if w.kind == WorkKind::Writeback {
            self.writebacks += 1;
        }
        self.set_flags(s, 0, REDIRTY);
        cx.issue(Work::new(w.kind, w.obj, Level::Fast, Level::Slow, copy).with_tag(w.tag));
    }

    /// Issues promotions that were waiting for space, in order, while they fit.
    fn run_pending(&mut self, cx: &mut Ctx<'_>, t: &Touch) {
        while let Some(&obj) = self.pending.front() {
            let Some(s) = self.table.get(obj) else {
                self.pending.pop_front();
                continue;
            };
            let size = self.table.meta(s).size();
            if self.fast_used + size > self.threshold && self.leaving > 0 {
                return;
            }
            self.pending.pop_front();
            self.set_flags(s, 0, PENDING);
            self.promote(cx, s, true, t);
        }
    }

    /// Work every access may trigger afterwards: HyCache's threshold, write-back watermarks,
    /// promotions waiting for space.
    fn after_access(&mut self, cx: &mut Ctx<'_>, t: &Touch, accessed: Option<ObjectId>) {
        // The file just accessed stays: its access may be waiting to land on the SSD.
        let except = accessed.and_then(|o| self.table.get(o));
        if self.fast_used <= self.capacity + self.leaving {
            self.overcommit = 0;
        }
        while self.fast_used > self.threshold + self.leaving {
            let Some(v) = self.victim(cx.now, except) else { break };
            self.evict(cx, v, t);
            self.counters.threshold_evictions += 1;
        }
        // Above the high watermark, write-backs start and go on down to the low one (a
        // watermark pair, as bcache's and dm-writecache's): before, they stopped as soon as dirty
        // bytes were under the high one again, and 19 MiB stayed dirty between the two.
        if self.dirty_bytes > self.dirty_high {
            self.draining = true;
        } else if self.dirty_bytes <= self.dirty_low {
            self.draining = false;
        }
        if self.draining {
            self.write_back_some(cx, self.dirty_low, except);
        }
        if !self.pending.is_empty() {
            self.run_pending(cx, t);
        }
    }

    /// Writes dirty files back, oldest dirtied first, until dirty bytes fall to `target`.
    fn write_back_some(&mut self, cx: &mut Ctx<'_>, target: u64, except: Option<Slot>) {
        let mut in_progress = 0u64;
        let mut skipped = None;
        while self.dirty_bytes > target + in_progress && self.writebacks < self.max_writebacks {
            let Some(obj) = self.dirty_queue.pop_front() else { break };
            let Some(s) = self.table.get(obj) else { continue };
            if Some(s) == except {
                // Its access may still be waiting to land: write it back later.
                skipped = Some(obj);
                continue;
            }
            let m = *self.table.meta(s);
            if !m.has(DIRTY) || m.has(MOVING) {
                continue;
            }
            in_progress += m.size();
            self.writebacks += 1;
            self.issue(cx, s, WorkKind::Writeback, (Level::Fast, Level::Slow), m.size(), false);
        }
        if let Some(obj) = skipped {
            self.dirty_queue.push_back(obj);
        }
    }
}
