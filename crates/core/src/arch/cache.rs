//! Caching: the SSD holds *copies* of HDD objects; the HDD copy is authoritative unless the SSD
//! copy is dirty (write-back). Any collector picks victims.
//!
//! Modes:
//! - `read-only`: reads fill the cache; writes go to the HDD and drop a cached copy (write-around).
//! - `write-through`: writes go to both devices; a cached object stays cached and consistent.
//!   With `write-allocate=true` (default; "write-through-all") a full-object write to an uncached
//!   object also places it on the SSD, otherwise writes never allocate ("write-through-update").
//! - `write-back`: writes go to the SSD only and the object becomes dirty; dirty objects are
//!   written back in the background once dirty bytes exceed `dirty-high`% of the cache, down to
//!   `dirty-low`%, at most `max-writebacks` at a time, in LBA order from where the last pass
//!   stopped (`writeback-order=lba`, as bcache's writeback thread walks its keys and flashcache
//!   sorts dirty blocks) or oldest-dirtied first (`age`). The cleaner's I/O has the idle
//!   priority class (it yields to foreground I/O); a dirty victim's write-back, which the cache
//!   waits on for space, has normal priority. A dirty victim is written back before it is
//!   dropped. Nothing dirty is ever dropped unless its object is deleted.
//!
//! A miss fills the cache with a `Copy` (its space reserved at once); the object becomes a hit
//! when the copy completes. A partial write to an uncached object goes around the cache in
//! read-only and write-through modes, and in write-back with `partial-writes=around` (as
//! dm-cache does: its blocks are 32 KiB or more). With `partial-writes=absorb` (the default) a
//! write-back cache keeps it as a *partial* dirty block, as bcache (whose keys are sector
//! extents) and Open CAS (per-sector valid bits) do: a later read of the block takes the cached
//! sectors from the SSD and the rest from the HDD, and fills the rest of the block from the HDD
//! (as a miss on the missing sectors would: bcache inserts what it read from the backing device,
//! Open CAS fills a line's invalid sectors), so the block is whole once that completes; a
//! whole-block write makes it whole at once. Objects larger than the cache or refused by the
//! collector's admission rule are never cached.

mod check;
mod partial;
mod room;
mod writeback;

use super::{ArchBuild, Architecture, Placement, Setup, Usage};
use crate::collector::{
    AnyCollector, Collector, CollectorContext, Removal, Touch, build_collector, ensure_slot, pages_of,
};
use crate::engine::Ctx;
use crate::list::{Link, Linked, List};
use crate::object_table::ObjectTable;
use crate::params::{ConfigError, ParamSpec, Params};
use crate::{Level, Levels, Nanos, ObjectId, Op, Outcome, Priority, Request, Served, Slot, Tier, Work, WorkKind};

/// Write policy of the cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Reads only; writes invalidate.
    ReadOnly,
    /// Writes to both devices.
    WriteThrough,
    /// Writes to the SSD; background write-back.
    WriteBack,
}

const MODES: [&str; 3] = ["read-only", "write-through", "write-back"];

// Object states.
const NOT_CACHED: u8 = 0;
const FILLING: u8 = 1;
const CLEAN: u8 = 2;
const DIRTY: u8 = 3;

// Flags.
const WRITING_BACK: u8 = 1;
const EVICTING: u8 = 2;
const REDIRTIED: u8 = 4;
const STALE: u8 = 8;
const DELETED: u8 = 16;
const IN_COLLECTOR: u8 = 32;
const COLL_FAST: u8 = 64;
/// Only some of the block's bytes are on the SSD (a partial write absorbed).
const PARTIAL: u8 = 128;

/// Per-object metadata (8 bytes).
#[derive(Clone, Copy, Debug, Default)]
pub struct CacheMeta {
    size: u32,
    state: u8,
    flags: u8,
    /// A cached partial block's missing sectors are being filled from the HDD.
    completing: bool,
}

impl CacheMeta {
    fn new(size: u32, state: u8, flags: u8) -> CacheMeta {
        CacheMeta { size, state, flags, completing: false }
    }

    fn cached(&self) -> bool {
        self.state == CLEAN || self.state == DIRTY
    }
}

/// A dirty object's place in the write-back order, and when it became dirty (age-based
/// cleaners such as Open-CAS's ALRU).
#[derive(Clone, Copy, Debug, Default)]
struct DirtyLink {
    link: Link,
    since: Nanos,
}

impl Linked for DirtyLink {
    fn link(&self) -> &Link {
        &self.link
    }
    fn link_mut(&mut self) -> &mut Link {
        &mut self.link
    }
}

/// The cache architecture.
#[derive(Debug)]
pub struct Cache {
    mode: Mode,
    write_allocate: bool,
    absorb_partial: bool,
    /// Dirty objects not being written back, by id (LBA order), when the cleaner walks them so.
    dirty_by_lba: Option<std::collections::BTreeSet<u64>>,
    /// Where the LBA-order cleaner resumes.
    lba_cursor: u64,
    capacity: u64,
    object_size: u64,
    dirty_high: u64,
    dirty_low: u64,
    max_writebacks: usize,
    table: ObjectTable<CacheMeta>,
    collector: AnyCollector,
    tracks_slow: bool,
    /// Committed bytes (filling + cached).
    used: u64,
    dirty_bytes: u64,
    /// Bytes of dirty victims waiting for their write-back before being dropped.
    evicting_bytes: u64,
    writing_back_bytes: u64,
    writebacks_in_flight: usize,
    dirty_order: List,
    dirty_links: Vec<DirtyLink>,
}

const PARAMS: &[ParamSpec] = &[
    ParamSpec { name: "mode", default: "write-through", help: "read-only, write-through or write-back" },
    ParamSpec {
        name: "write-allocate",
        default: "true",
        help: "write-through: full-object writes to uncached objects are cached too",
    },
    ParamSpec {
        name: "dirty-high",
        default: "20%",
        help: "write-back: start writing back above this share dirty (1..=100)",
    },
    ParamSpec {
        name: "dirty-low",
        default: "10%",
        help: "write-back: stop writing back below this share dirty (0..dirty-high)",
    },
    ParamSpec { name: "max-writebacks", default: "64", help: "write-back: write-backs in flight at most (1..=65536)" },
    ParamSpec {
        name: "writeback-order",
        default: "lba",
        help: "write-back: the cleaner walks dirty blocks in LBA order (lba) or oldest-dirtied first (age)",
    },
    ParamSpec {
        name: "partial-writes",
        default: "absorb",
        help: "write-back: a partial write to an uncached block is kept as a partial dirty block (absorb) or sent to the HDD (around)",
    },
];

impl ArchBuild for Cache {
    const NAME: &'static str = "cache";
    const CAPS: crate::arch::Capabilities = crate::arch::Capabilities::BLOCK_CACHING;
    const VERSION: u32 = 2;
    const HELP: &'static str = "SSD caching of HDD objects: read-only, write-through or write-back, any collector";
    const PARAMS: &'static [ParamSpec] = PARAMS;
    const USES_COLLECTOR: bool = true;

    fn build(p: &mut Params, setup: &Setup) -> Result<Self, ConfigError> {
        let mode = match p.choice("mode", &MODES)? {
            0 => Mode::ReadOnly,
            1 => Mode::WriteThrough,
            _ => Mode::WriteBack,
        };
        let write_allocate = p.bool("write-allocate")?;
        let (high, low) = p.watermarks("dirty-high", "dirty-low")?;
        let max_writebacks = p.u64("max-writebacks", 1, 65_536)? as usize;
        let absorb_partial = p.choice("partial-writes", &["absorb", "around"])? == 0;
        let lba_order = p.choice("writeback-order", &["lba", "age"])? == 0;
        if setup.fast_capacity == 0 {
            return Err(p.inconsistent("the SSD capacity must be above zero"));
        }
        if setup.object_size > setup.fast_capacity {
            return Err(p.inconsistent(format!(
                "the SSD ({} bytes) is smaller than one object ({} bytes)",
                setup.fast_capacity, setup.object_size
            )));
        }
        let collector_name = p.string_or("collector", <Cache as ArchBuild>::DEFAULT_COLLECTOR);
        let collector = build_collector(&collector_name, p, &CollectorContext { fast_capacity: setup.fast_capacity })?;
        let capacity = setup.fast_capacity;
        Ok(Cache {
            mode,
            write_allocate,
            absorb_partial,
            dirty_by_lba: (lba_order && setup.object_size != 0).then(std::collections::BTreeSet::new),
            lba_cursor: 0,
            capacity,
            object_size: setup.object_size,
            dirty_high: (capacity as f64 * high) as u64,
            dirty_low: (capacity as f64 * low) as u64,
            max_writebacks,
            // Block numbers are bounded by the HDD's size: looked up directly when that is cheap.
            table: ObjectTable::for_ids_below(
                setup.slow_capacity.checked_div(setup.object_size).unwrap_or(0),
                setup.fast_capacity.checked_div(setup.object_size).unwrap_or(0),
            ),
            tracks_slow: collector.tracks_slow_objects(),
            collector,
            used: 0,
            dirty_bytes: 0,
            evicting_bytes: 0,
            writing_back_bytes: 0,
            writebacks_in_flight: 0,
            dirty_order: List::default(),
            dirty_links: Vec::new(),
        })
    }
}

/// Implements the [`Architecture`] methods that a wrapper around a [`Cache`] (held in field
/// `$field`) passes through unchanged: everything but `access`, `complete`, `tick`,
/// `next_tick`, `counters` and `memory_bytes`.
macro_rules! delegate_to_cache {
    ($field:ident) => {
        fn flush(&mut self, cx: &mut Ctx<'_>) {
            self.$field.flush(cx)
        }
        fn adopt(&mut self, cx: &mut Ctx<'_>, obj: ObjectId, level: Level, size: u64, dirty: bool) {
            self.$field.adopt(cx, obj, level, size, dirty)
        }
        fn placement(&self, obj: ObjectId) -> Placement {
            self.$field.placement(obj)
        }
        fn usage(&self) -> Usage {
            self.$field.usage()
        }
        fn check_invariants(&self) -> Result<(), String> {
            self.$field.check_invariants()
        }
        fn prefetch(&self, obj: ObjectId, deep: bool) {
            self.$field.prefetch(obj, deep)
        }
    };
}
pub(super) use delegate_to_cache;

impl Cache {
    /// Builds a cache from knobs set by a wrapping architecture (bcache-like, ...), which
    /// validated its own knobs already.
    pub(super) fn from_knobs(owner: &str, knobs: &[(&str, String)], setup: &Setup) -> Result<Cache, ConfigError> {
        let mut p = Params::new(owner);
        p.declare(PARAMS);
        for (k, v) in knobs {
            p.insert(k, v);
        }
        let cache = Cache::build(&mut p, setup)?;
        p.finish(&[PARAMS])?;
        Ok(cache)
    }

    /// The write policy.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The collector.
    pub fn collector(&self) -> &AnyCollector {
        &self.collector
    }

    /// Serves an access like [`Architecture::access`]; with `admit == false` nothing new enters
    /// the cache (a bypass, e.g. a sequential stream past its cutoff): misses go to the HDD, a
    /// write drops a clean cached copy, and cached copies still serve reads and dirty ones still
    /// absorb writes.
    pub fn access_admitting(&mut self, cx: &mut Ctx<'_>, req: &Request, admit: bool) -> Served {
        match req.op {
            Op::Read => self.read(cx, req, admit),
            Op::Write => self.write(cx, req, admit, self.mode),
            _ => self.access(cx, req),
        }
    }

    /// A write written through to both devices even in write-back mode (bcache above its
    /// write-back cutoff): a clean cached block is updated on both, a whole-block miss is cached
    /// clean (as `write-through`); a dirty block, or one being written back, takes it as a
    /// dirty write.
    pub fn write_through(&mut self, cx: &mut Ctx<'_>, req: &Request, admit: bool) -> Served {
        let mode = if self.mode == Mode::WriteBack { Mode::WriteThrough } else { self.mode };
        self.write(cx, req, admit, mode)
    }

    /// Whether `obj` has a copy on the SSD (cached or being filled).
    pub fn holds(&self, obj: ObjectId) -> bool {
        self.table.get(obj).is_some_and(|s| self.table.meta(s).state != NOT_CACHED)
    }

    /// Committed share of the SSD, 0..=1.
    pub fn occupancy(&self) -> f64 {
        self.used as f64 / self.capacity as f64
    }

    fn size_for(&self, req: &Request) -> Option<u32> {
        let size = if self.object_size != 0 { self.object_size } else { req.offset.saturating_add(req.len) };
        if size == 0 || size > self.capacity {
            return None;
        }
        u32::try_from(size).ok()
    }

    fn issue(cx: &mut Ctx<'_>, kind: WorkKind, obj: ObjectId, s: Slot, bytes: u64, source_in_ram: bool) {
        let (from, to) = match kind {
            WorkKind::Copy | WorkKind::Promote => (Level::Slow, Level::Fast),
            WorkKind::Writeback | WorkKind::Demote => (Level::Fast, Level::Slow),
            WorkKind::Invalidate => (Level::Fast, Level::Fast),
        };
        let mut w = Work::new(kind, obj, from, to, bytes).with_tag(u64::from(s.0));
        w.source_in_ram = source_in_ram;
        cx.issue(w);
    }

    #[inline]
    fn touch_of(cx: &Ctx<'_>, req: &Request) -> Touch {
        Touch { now: cx.now, seq: cx.seq, pages: pages_of(req.offset, req.len), write: req.op == Op::Write }
    }

    // --- collector bookkeeping -------------------------------------------------------------

    fn coll_enter_fast(&mut self, s: Slot, t: &Touch) {
        let m = *self.table.meta(s);
        if m.flags & IN_COLLECTOR != 0 {
            self.collector.set_tier(s, Tier::Fast);
        } else {
            let id = self.table.id(s);
            self.collector.insert(s, id, Tier::Fast, u64::from(m.size), t);
        }
        self.table.meta_mut(s).flags |= IN_COLLECTOR | COLL_FAST;
    }

    /// `s` leaves the fast tier; `evicted`: as the coldest (not dropped by a write, which the
    /// inverse bitmap's admission must not learn from).
    fn coll_leave_fast(&mut self, s: Slot, evicted: bool) {
        let m = self.table.meta_mut(s);
        if m.flags & IN_COLLECTOR == 0 {
            return;
        }
        if self.tracks_slow {
            m.flags &= !COLL_FAST;
            if evicted {
                self.collector.set_tier(s, Tier::Slow);
            } else {
                self.collector.dropped_from_fast(s);
            }
        } else {
            m.flags &= !(IN_COLLECTOR | COLL_FAST);
            self.collector.remove(s, Removal::Evicted);
        }
    }

    fn coll_forget(&mut self, s: Slot) {
        let m = self.table.meta_mut(s);
        if m.flags & IN_COLLECTOR != 0 {
            m.flags &= !(IN_COLLECTOR | COLL_FAST);
            self.collector.remove(s, Removal::Deleted);
        }
    }

    /// After an object's fast copy is gone: keep it as a slow-tier object when the collector
    /// tracks those, otherwise forget it.
    fn drop_to_slow_or_forget(&mut self, s: Slot) {
        if self.tracks_slow {
            let m = self.table.meta_mut(s);
            m.state = NOT_CACHED;
            m.flags &= IN_COLLECTOR;
        } else {
            self.coll_forget(s);
            self.table.remove(s);
        }
    }

    // --- dirty list ------------------------------------------------------------------------

    // --- the data path ---------------------------------------------------------------------

    fn read(&mut self, cx: &mut Ctx<'_>, req: &Request, admit: bool) -> Served {
        self.evict_overflow(cx);
        let t = Self::touch_of(cx, req);
        let slot = self.table.get(req.obj);
        if let Some(s) = slot {
            if self.table.meta(s).flags & DELETED != 0 {
                self.revive(s, &t);
            }
            let m = *self.table.meta(s);
            if m.flags & IN_COLLECTOR != 0 {
                self.collector.touch(s, &t);
            }
            if m.cached() {
                if m.flags & PARTIAL != 0 {
                    // The cached sectors from the SSD, the rest from the HDD.
                    if admit {
                        self.complete_partial(cx, s);
                    }
                    return Served::assembled(Levels::one(Level::Fast).with(Level::Slow));
                }
                return Served::by(Level::Fast);
            }
            if m.state == FILLING {
                return Served::by(Level::Slow);
            }
        }
        if let Some(size) = self.size_for(req)
            && admit
        {
            let whole = req.offset == 0 && req.len >= u64::from(size);
            let slot = match slot {
                None if self.tracks_slow => Some(self.track_slow(req.obj, size, &t)),
                other => other,
            };
            self.fill(cx, slot, req.obj, size, whole);
        }
        Served::by(Level::Slow)
    }

    /// A write, handled as `mode` says (the cache's own, or write-through where its owner
    /// asks: bcache above its write-back cutoff).
    fn write(&mut self, cx: &mut Ctx<'_>, req: &Request, admit: bool, mode: Mode) -> Served {
        self.evict_overflow(cx);
        let t = Self::touch_of(cx, req);
        let slot = self.table.get(req.obj);
        if let Some(s) = slot {
            if self.table.meta(s).flags & DELETED != 0 {
                self.revive(s, &t);
            }
            let m = *self.table.meta(s);
            if m.flags & IN_COLLECTOR != 0 {
                self.collector.touch(s, &t);
            }
            if m.cached() {
                if !admit && m.state == CLEAN && m.flags & (WRITING_BACK | EVICTING) == 0 && !m.completing {
                    // A bypassed write drops a clean copy rather than update it (bcache).
                    return self.write_around(cx, s, m);
                }
                let whole = req.offset == 0 && req.len >= u64::from(m.size);
                // A dirty block, or one being written back, takes the write as dirty data: a
                // write-through write could be overwritten (or torn) on the HDD by the write-back.
                let mode = if m.state == DIRTY || m.flags & WRITING_BACK != 0 { self.mode } else { mode };
                return self.write_hit(cx, s, m, &t, whole, mode);
            }
            if m.state == FILLING {
                // The copy in flight was read before this write: it is stale.
                self.table.meta_mut(s).flags |= STALE;
                return Served::by(Level::Slow);
            }
        }
        let allocate = match mode {
            Mode::ReadOnly => false,
            Mode::WriteThrough => self.write_allocate,
            Mode::WriteBack => true,
        };
        let Some(size) = self.size_for(req) else {
            return Served::by(Level::Slow);
        };
        let slot = match slot {
            None if self.tracks_slow => Some(self.track_slow(req.obj, size, &t)),
            other => other,
        };
        let whole = req.offset == 0 && req.len >= u64::from(size);
        let absorb = whole || (mode == Mode::WriteBack && self.absorb_partial);
        if !allocate || !absorb || !admit {
            return Served::by(Level::Slow);
        }
        if !self.admitted(slot, req.obj, size) || !self.make_room(cx, req.obj, u64::from(size)) {
            return Served::by(Level::Slow);
        }
        let s = match slot {
            Some(s) => s,
            None => self.table.insert(req.obj, CacheMeta::new(size, NOT_CACHED, 0)),
        };
        self.table.meta_mut(s).state = CLEAN;
        self.table.meta_mut(s).size = size;
        self.used += u64::from(size);
        self.coll_enter_fast(s, &t);
        if mode == Mode::WriteBack {
            if !whole {
                self.table.meta_mut(s).flags |= PARTIAL;
            }
            self.mark_dirty(s, cx.now);
            self.maybe_writeback(cx);
            Served::by(Level::Fast)
        } else {
            Served::written_to(Levels::one(Level::Fast).with(Level::Slow))
        }
    }

    /// Write-around: the cached copy would be stale, so it goes.
    fn write_around(&mut self, cx: &mut Ctx<'_>, s: Slot, m: CacheMeta) -> Served {
        self.coll_leave_fast(s, false);
        self.used -= u64::from(m.size);
        let id = self.table.id(s);
        Self::issue(cx, WorkKind::Invalidate, id, s, u64::from(m.size), false);
        self.drop_to_slow_or_forget(s);
        Served::by(Level::Slow)
    }

    fn write_hit(&mut self, cx: &mut Ctx<'_>, s: Slot, m: CacheMeta, t: &Touch, whole: bool, mode: Mode) -> Served {
        match mode {
            Mode::ReadOnly => self.write_around(cx, s, m),
            Mode::WriteThrough => Served::written_to(Levels::one(Level::Fast).with(Level::Slow)),
            Mode::WriteBack => {
                if m.flags & EVICTING != 0 {
                    // A write to a victim waiting for its write-back: keep it after all.
                    self.table.meta_mut(s).flags &= !EVICTING;
                    self.evicting_bytes -= u64::from(m.size);
                    self.coll_enter_fast(s, t);
                }
                if whole {
                    self.table.meta_mut(s).flags &= !PARTIAL;
                }
                self.mark_dirty(s, cx.now);
                self.maybe_writeback(cx);
                Served::by(Level::Fast)
            }
        }
    }

    /// A deleted object whose work is still in flight is accessed again. Its content is
    /// undefined after the delete, so the old copies may serve as the new object's: a fill in
    /// flight is marked stale (dropped on completion), a cached copy being written back is ranked
    /// again.
    fn revive(&mut self, s: Slot, t: &Touch) {
        let m = self.table.meta_mut(s);
        m.flags &= !DELETED;
        if m.state == FILLING {
            m.flags |= STALE;
        } else if m.cached() {
            self.coll_enter_fast(s, t);
        }
    }

    fn delete(&mut self, cx: &mut Ctx<'_>, obj: ObjectId) -> Served {
        let Some(s) = self.table.get(obj) else {
            return Served::metadata();
        };
        let m = *self.table.meta(s);
        if m.flags & DELETED != 0 {
            return Served::metadata();
        }
        let size = u64::from(m.size);
        if m.state == DIRTY {
            // The data is gone with its object: nothing left to write back.
            self.dirty_bytes -= size;
            if m.flags & WRITING_BACK == 0 {
                self.dirty_unlink(s);
            }
            self.table.meta_mut(s).state = CLEAN;
        }
        if m.flags & EVICTING != 0 {
            self.evicting_bytes -= size;
        }
        self.table.meta_mut(s).flags &= !(EVICTING | REDIRTIED);
        self.coll_forget(s);
        if m.flags & WRITING_BACK != 0 || m.state == FILLING || m.completing {
            // Cleaned up when the work in flight completes. Until then the slot stays indexed:
            // a new access to the id revives it (see `revive`), so two incarnations of one id
            // never have work in flight at once.
            self.table.meta_mut(s).flags |= DELETED;
            return Served::metadata();
        }
        if m.cached() {
            Self::issue(cx, WorkKind::Invalidate, obj, s, size, false);
            self.used -= size;
        }
        self.table.remove(s);
        Served::metadata()
    }
}

impl Architecture for Cache {
    #[inline]
    fn access(&mut self, cx: &mut Ctx<'_>, req: &Request) -> Served {
        match req.op {
            Op::Read => self.read(cx, req, true),
            Op::Write => self.write(cx, req, true, self.mode),
            Op::Delete => self.delete(cx, req.obj),
            _ => Served::metadata(),
        }
    }

    fn complete(&mut self, cx: &mut Ctx<'_>, work: &Work, outcome: Outcome) {
        let s = Slot(work.tag as u32);
        let m = *self.table.meta(s);
        let size = u64::from(m.size);
        let t = Touch { now: cx.now, seq: cx.seq, pages: 1, write: false };
        if m.flags & DELETED != 0 {
            // The object was deleted while the work ran: drop whatever reached the SSD, once
            // the last work in flight on it is done.
            if work.kind == WorkKind::Writeback {
                self.writing_back_bytes -= size;
                self.writebacks_in_flight -= 1;
                self.table.meta_mut(s).flags &= !WRITING_BACK;
            }
            let was_cached = m.state != FILLING;
            if was_cached && self.completion_left(s, work) {
                return;
            }
            if was_cached || outcome == Outcome::Done {
                Self::issue(cx, WorkKind::Invalidate, work.obj, s, size, false);
            }
            self.used -= size;
            self.table.remove(s);
            self.maybe_writeback(cx);
            return;
        }
        debug_assert_eq!(self.table.id(s), work.obj);
        match work.kind {
            WorkKind::Copy if m.completing => self.partial_completed(cx, s, outcome),
            WorkKind::Copy => {
                if outcome == Outcome::Done && m.flags & STALE == 0 {
                    self.table.meta_mut(s).state = CLEAN;
                    self.table.meta_mut(s).flags &= !PARTIAL;
                    self.coll_enter_fast(s, &t);
                } else {
                    if outcome == Outcome::Done {
                        Self::issue(cx, WorkKind::Invalidate, work.obj, s, size, false);
                    }
                    self.used -= size;
                    self.drop_to_slow_or_forget(s);
                }
            }
            WorkKind::Writeback => {
                self.table.meta_mut(s).flags &= !WRITING_BACK;
                self.writing_back_bytes -= size;
                self.writebacks_in_flight -= 1;
                if outcome == Outcome::Done && m.flags & REDIRTIED == 0 {
                    if m.state == DIRTY {
                        self.table.meta_mut(s).state = CLEAN;
                        self.dirty_bytes -= size;
                    }
                    if m.flags & EVICTING != 0 && !m.completing {
                        self.table.meta_mut(s).flags &= !EVICTING;
                        self.evicting_bytes -= size;
                        Self::issue(cx, WorkKind::Invalidate, work.obj, s, size, false);
                        self.used -= size;
                        self.drop_to_slow_or_forget(s);
                    }
                } else {
                    // Written again meanwhile, or the write-back failed: still dirty (unless
                    // the object was deleted and revived without a write since).
                    self.table.meta_mut(s).flags &= !REDIRTIED;
                    if m.state == DIRTY {
                        self.dirty_push(s, self.dirty_links[s.idx()].since);
                    }
                    if m.flags & EVICTING != 0 {
                        self.table.meta_mut(s).flags &= !EVICTING;
                        self.evicting_bytes -= size;
                        self.coll_enter_fast(s, &t);
                    }
                }
            }
            _ => debug_assert!(false, "cache issued no {:?}", work.kind),
        }
        self.maybe_writeback(cx);
    }

    fn flush(&mut self, cx: &mut Ctx<'_>) {
        while let Some(s) = self.dirty_order.front() {
            self.issue_writeback(cx, Slot(s), Priority::Normal);
        }
    }

    fn adopt(&mut self, cx: &mut Ctx<'_>, obj: ObjectId, level: Level, size: u64, dirty: bool) {
        if self.table.get(obj).is_some() {
            return;
        }
        let Ok(size32) = u32::try_from(size) else {
            return;
        };
        let t = Touch { now: cx.now, seq: cx.seq, pages: 1, write: false };
        if level == Level::Fast && size > 0 && self.used + size <= self.capacity {
            let s = self.table.insert(obj, CacheMeta::new(size32, CLEAN, 0));
            self.used += size;
            self.coll_enter_fast(s, &t);
            if dirty && self.mode == Mode::WriteBack {
                self.mark_dirty(s, cx.now);
            }
        } else if self.tracks_slow {
            self.track_slow(obj, size32, &t);
        }
    }

    fn placement(&self, obj: ObjectId) -> Placement {
        let Some(s) = self.table.get(obj) else {
            return Placement { on_slow: true, ..Placement::default() };
        };
        let m = self.table.meta(s);
        Placement {
            tracked: true,
            on_fast: m.cached(),
            on_slow: true,
            dirty: m.state == DIRTY,
            moving: m.state == FILLING || m.flags & WRITING_BACK != 0,
            in_ram: false,
        }
    }

    fn usage(&self) -> Usage {
        Usage {
            fast_capacity: self.capacity,
            fast_used: self.used,
            dirty_bytes: self.dirty_bytes,
            objects: self.table.len(),
            fast_objects: self.collector.len(Tier::Fast),
            in_flight: 0,
        }
    }

    fn check_invariants(&self) -> Result<(), String> {
        self.check_bookkeeping()
    }

    #[inline]
    fn prefetch(&self, obj: ObjectId, deep: bool) {
        if !self.table.worth_prefetching() {
            return;
        }
        if !deep {
            self.table.prefetch(obj);
        } else if let Some(s) = self.table.prefetch_entry(obj) {
            self.collector.prefetch(s);
        }
    }

    fn memory_bytes(&self) -> usize {
        self.table.memory_bytes()
            + self.collector.memory_bytes()
            + self.dirty_links.capacity() * std::mem::size_of::<DirtyLink>()
            // A B-tree set of u64 costs about 16 bytes per key with its node overhead.
            + self.dirty_by_lba.as_ref().map_or(0, |set| set.len() * 16)
    }
}
