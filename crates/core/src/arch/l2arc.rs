//! A ZFS-L2ARC-like baseline (HCA's comparison point), re-implemented from the ZFS
//! documentation and the HCA paper's description: a RAM ARC (L1) and an SSD L2ARC that is
//! *inclusive* (an L2 copy stays while the page is also in the ARC) and is fed asynchronously.
//!
//! There is no eviction line between ARC and L2ARC: a feeder walks the tails of the ARC's lists
//! (MFU, then MRU), up to `headroom` × the write budget each, and copies pages that have no L2
//! copy to the SSD, at most `write-max` bytes per feed (plus `write-boost` until the L2 has
//! filled once: ZFS's warm-up boost). Pages that leave the ARC before the feeder reaches them
//! never get to the SSD. The feeder runs every `feed` (1 s, ZFS's `l2arc_feed_secs`), or every
//! `feed-min` (200 ms, `l2arc_feed_min_ms`) after a feed that wrote more than half of its
//! budget while `feed-again` is on (`l2arc_feed_again`: busy ARC lists are fed faster, stale
//! ones idle back; `l2arc_write_interval` in ZFS's arc.c). The L2 is a circular log
//! ([`super::ssd_log`]): the hand evicts the oldest copies ahead of each write.
//!
//! Lookup: ARC (RAM hit) → L2ARC (read from the SSD; the page re-enters the ARC, its L2 copy
//! stays) → disk (the page enters the ARC). Writes go through to the disk and invalidate the L2
//! copy (ZFS writes blocks elsewhere: the old copy is orphaned); a whole-page write, or one to a
//! page already in RAM, enters the ARC.
//!
//! Not modelled: ZFS's compression, record sizes other than the page size, metadata buffers,
//! prefetch exclusion, and L2 persistence across reboots.

use super::ssd_log::{Landed, NO_PAGE, SsdLog};
use super::{ArchBuild, Architecture, Placement, Setup, Usage};
use crate::collector::{AnyCollector, Collector, CollectorContext, Removal, Touch, build_collector, pages_of};
use crate::engine::Ctx;
use crate::object_table::ObjectTable;
use crate::params::{ConfigError, ParamSpec, Params};
use crate::{Level, Levels, Nanos, ObjectId, Op, Outcome, Request, Served, Slot, Tier, Work, WorkKind};

const IN_ARC: u8 = 1;
/// The front end holds the page's bytes (in the ARC, or kept until its L2 write lands).
const RAM_HELD: u8 = 2;

/// One page (8 bytes).
#[derive(Clone, Copy, Debug)]
pub struct L2Meta {
    flags: u8,
    /// The L2 log slot holding or receiving a copy, or [`NO_PAGE`].
    l2: u32,
}

impl Default for L2Meta {
    fn default() -> Self {
        L2Meta { flags: 0, l2: NO_PAGE }
    }
}

/// The ZFS-L2ARC-like architecture.
#[derive(Debug)]
pub struct L2Arc {
    page: u64,
    arc_pages: u32,
    table: ObjectTable<L2Meta>,
    arc: AnyCollector,
    arc_len: u32,
    log: SsdLog,
    feed_interval: Nanos,
    /// The interval after a feed that wrote more than half its budget (`None`: feed-again off).
    busy_feed_interval: Option<Nanos>,
    next_feed: Nanos,
    write_max: u64,
    write_boost: u64,
    /// The L2 is fed (false: the ARC-only baseline).
    l2: bool,
    headroom: u64,
    feeds: u64,
    busy_feeds: u64,
    pages_fed: u64,
    l2_hits: u64,
    l2_invalidations: u64,
    l2_evictions: u64,
}

const PARAMS: &[ParamSpec] = &[
    ParamSpec { name: "l1", default: "64MiB", help: "RAM ARC size (at least one page)" },
    ParamSpec {
        name: "l2",
        default: "true",
        help: "false: no L2 feed, the SSD stays unused (the paper's ARC-only baseline)",
    },
    ParamSpec {
        name: "feed",
        default: "1s",
        help: "L2ARC feed interval (ZFS l2arc_feed_secs); after a feed that wrote over half its budget: feed-min",
    },
    ParamSpec {
        name: "feed-min",
        default: "200ms",
        help: "feed interval while the ARC lists are busy (l2arc_feed_min_ms; at most `feed`)",
    },
    ParamSpec { name: "feed-again", default: "true", help: "false: always `feed` (l2arc_feed_again=0)" },
    ParamSpec { name: "write-max", default: "8MiB", help: "bytes written to the L2 per feed (l2arc_write_max)" },
    ParamSpec { name: "write-boost", default: "8MiB", help: "extra bytes per feed until the L2 has filled once" },
    ParamSpec {
        name: "headroom",
        default: "2",
        help: "scan depth per ARC list, in multiples of the feed's bytes (1..=64)",
    },
    ParamSpec {
        name: "collector",
        default: "arc",
        help: "L1 ranking: arc, lru or fifo (must be walkable from its tail)",
    },
];

impl ArchBuild for L2Arc {
    const NAME: &'static str = "zfs-l2arc-like";
    const CAPS: crate::arch::Capabilities = crate::arch::Capabilities::BLOCK_CACHING
        .with_ram_level(crate::arch::RamLevel::Cache)
        .with_objects(crate::arch::ObjectSizes::Fixed);
    const VERSION: u32 = 2;
    const HELP: &'static str =
        "ZFS-L2ARC-like: RAM ARC + inclusive SSD L2 fed from the ARC tails every 200 ms, throttled";
    const PARAMS: &'static [ParamSpec] = PARAMS;
    const USES_COLLECTOR: bool = true;

    fn build(p: &mut Params, setup: &Setup) -> Result<Self, ConfigError> {
        if setup.object_size == 0 {
            return Err(p.inconsistent("needs fixed-size pages: run with --objects blocks:4KiB (or 8KiB)"));
        }
        let page = setup.object_size;
        let l1 = p.size("l1", page, 1 << 44)?;
        let feed_interval = p.duration("feed", Nanos::from_millis(1), Nanos::from_secs(3600))?;
        let feed_min = p.duration("feed-min", Nanos::from_millis(1), Nanos::from_secs(3600))?;
        let busy_feed_interval = p.bool("feed-again")?.then_some(feed_min.min(feed_interval));
        let write_max = p.size("write-max", page, 1 << 40)?;
        let write_boost = p.size("write-boost", 0, 1 << 40)?;
        let headroom = p.u64("headroom", 1, 64)?;
        let l2 = p.bool("l2")?;
        let slots = setup.fast_capacity / page;
        if slots == 0 {
            return Err(p.inconsistent(format!(
                "the SSD ({} bytes) is smaller than one page ({page} bytes)",
                setup.fast_capacity
            )));
        }
        let arc_pages = l1 / page;
        if arc_pages > u64::from(u32::MAX / 2) || slots > u64::from(u32::MAX / 2) {
            return Err(p.inconsistent("too many pages: use larger pages"));
        }
        let name = p.string("collector")?;
        let arc = build_collector(&name, p, &CollectorContext { fast_capacity: arc_pages * page })?;
        if arc.cold_lists() == 0 {
            return Err(p.inconsistent(format!(
                "collector={name} cannot be walked from its cold end, which the L2 feed needs: use arc, lru or fifo"
            )));
        }
        Ok(L2Arc {
            page,
            arc_pages: arc_pages as u32,
            table: ObjectTable::new(),
            arc,
            arc_len: 0,
            log: SsdLog::new(slots as u32),
            feed_interval,
            busy_feed_interval,
            next_feed: feed_interval,
            write_max,
            write_boost,
            headroom,
            l2,
            feeds: 0,
            busy_feeds: 0,
            pages_fed: 0,
            l2_hits: 0,
            l2_invalidations: 0,
            l2_evictions: 0,
        })
    }
}

impl L2Arc {
    fn fast_addr(&self, pos: u32) -> u64 {
        u64::from(pos) * self.page
    }

    fn drop_ram(&self, cx: &mut Ctx<'_>, s: Slot) {
        cx.issue(
            Work::new(WorkKind::Invalidate, self.table.id(s), Level::Ram, Level::Ram, self.page).with_tag(u64::MAX),
        );
    }

    fn drop_fast(&self, cx: &mut Ctx<'_>, obj: ObjectId, pos: u32) {
        let w = Work::new(WorkKind::Invalidate, obj, Level::Fast, Level::Fast, self.page)
            .at(crate::LOGICAL_ADDR, self.fast_addr(pos))
            .with_tag(u64::MAX);
        cx.issue(w);
    }

    /// Forgets a page that is neither in RAM nor on the SSD.
    fn forget_if_empty(&mut self, s: Slot) {
        let m = *self.table.meta(s);
        if m.flags & RAM_HELD == 0 && m.l2 == NO_PAGE {
            self.table.remove(s);
        }
    }

    /// Evicts the ARC's victim: its RAM copy goes unless its L2 write is still in flight.
    fn evict_one(&mut self, cx: &mut Ctx<'_>) {
        let Some(v) = self.arc.coldest_fast(cx.now) else { return };
        self.arc.remove(v, Removal::Evicted);
        self.arc_len -= 1;
        let m = self.table.meta_mut(v);
        m.flags &= !IN_ARC;
        if m.l2 != NO_PAGE && self.log.writing_page(m.l2, v.0) {
            return;
        }
        m.flags &= !RAM_HELD;
        self.drop_ram(cx, v);
        self.forget_if_empty(v);
    }

    /// Puts `s` into the ARC (its bytes are, or are about to be, in RAM).
    fn enter_arc(&mut self, cx: &mut Ctx<'_>, s: Slot, t: &Touch) {
        if self.arc_len >= self.arc_pages {
            self.arc.on_miss(self.table.id(s), self.page);
            self.evict_one(cx);
        }
        self.table.meta_mut(s).flags |= IN_ARC | RAM_HELD;
        self.arc.insert(s, self.table.id(s), Tier::Fast, self.page, t);
        self.arc_len += 1;
    }

    /// A write makes the L2 copy stale: a valid one goes now, one in flight when it lands.
    fn invalidate_l2(&mut self, cx: &mut Ctx<'_>, s: Slot) {
        let pos = self.table.meta(s).l2;
        if pos == NO_PAGE {
            return;
        }
        self.l2_invalidations += 1;
        if self.log.invalidate(pos) {
            self.table.meta_mut(s).l2 = NO_PAGE;
            self.drop_fast(cx, self.table.id(s), pos);
        }
    }

    /// One feed: copy pages near the ARC tails that have no L2 copy to the SSD log. Returns
    /// whether it wrote more than half of its budget.
    fn feed(&mut self, cx: &mut Ctx<'_>) -> bool {
        self.feeds += 1;
        let wanted = self.write_max + if self.log.warm() { 0 } else { self.write_boost };
        let mut budget = wanted;
        let scan_pages = (budget * self.headroom / self.page).max(1);
        'lists: for list in 0..self.arc.cold_lists() {
            let mut cur = self.arc.walk_cold(list, None);
            let mut scanned = 0;
            while let Some(s) = cur {
                if scanned >= scan_pages || budget < self.page {
                    break;
                }
                scanned += 1;
                cur = self.arc.walk_cold(list, Some(s));
                if self.table.meta(s).l2 != NO_PAGE {
                    continue;
                }
                let Some((pos, evicted)) = self.log.take(s.0) else { break 'lists };
                if let Some(e) = evicted {
                    let e = Slot(e);
                    self.l2_evictions += 1;
                    self.table.meta_mut(e).l2 = NO_PAGE;
                    self.drop_fast(cx, self.table.id(e), pos);
                    self.forget_if_empty(e);
                }
                self.table.meta_mut(s).l2 = pos;
                self.pages_fed += 1;
                budget -= self.page;
                let w = Work::new(WorkKind::Copy, self.table.id(s), Level::Ram, Level::Fast, self.page)
                    .at(crate::LOGICAL_ADDR, self.fast_addr(pos))
                    .with_tag(u64::from(pos));
                cx.issue(w);
            }
        }
        (wanted - budget) * 2 > wanted
    }

    fn read(&mut self, cx: &mut Ctx<'_>, req: &Request, t: &Touch) -> Served {
        let s = match self.table.get(req.obj) {
            Some(s) => s,
            None => {
                let s = self.table.insert(req.obj, L2Meta::default());
                self.enter_arc(cx, s, t);
                return Served::by(Level::Slow).keeping_in_ram();
            }
        };
        let m = *self.table.meta(s);
        if m.flags & IN_ARC != 0 {
            self.arc.touch(s, t);
            return Served::by(Level::Ram);
        }
        if m.flags & RAM_HELD != 0 {
            // Left the ARC while its L2 write is in flight; the bytes are still here.
            self.enter_arc(cx, s, t);
            return Served::by(Level::Ram);
        }
        self.enter_arc(cx, s, t);
        if m.l2 != NO_PAGE && self.log.holds(m.l2, s.0) {
            self.l2_hits += 1;
            return Served::by(Level::Fast).at_fast(self.fast_addr(m.l2)).keeping_in_ram();
        }
        Served::by(Level::Slow).keeping_in_ram()
    }

    fn write(&mut self, cx: &mut Ctx<'_>, req: &Request, t: &Touch) -> Served {
        let whole = req.offset == 0 && req.len >= self.page;
        let through = Served::written_to(Levels::one(Level::Ram).union(Levels::one(Level::Slow)));
        let Some(s) = self.table.get(req.obj) else {
            if !whole {
                return Served::by(Level::Slow);
            }
            let s = self.table.insert(req.obj, L2Meta::default());
            self.enter_arc(cx, s, t);
            return through;
        };
        self.invalidate_l2(cx, s);
        let m = *self.table.meta(s);
        if m.flags & IN_ARC != 0 {
            self.arc.touch(s, t);
            through
        } else if m.flags & RAM_HELD != 0 || whole {
            self.enter_arc(cx, s, t);
            through
        } else {
            // Not in RAM and not whole: RAM would hold a torn page.
            self.forget_if_empty(s);
            Served::by(Level::Slow)
        }
    }
}

impl Architecture for L2Arc {
    fn access(&mut self, cx: &mut Ctx<'_>, req: &Request) -> Served {
        let t = Touch { now: cx.now, seq: cx.seq, pages: pages_of(req.offset, req.len), write: req.op == Op::Write };
        match req.op {
            Op::Read => self.read(cx, req, &t),
            Op::Write => self.write(cx, req, &t),
            Op::Delete | Op::Truncate => {
                if let Some(s) = self.table.get(req.obj) {
                    self.invalidate_l2(cx, s);
                    let m = *self.table.meta(s);
                    if m.flags & IN_ARC != 0 {
                        self.arc.remove(s, Removal::Deleted);
                        self.arc_len -= 1;
                        self.table.meta_mut(s).flags &= !IN_ARC;
                    }
                    // A page whose L2 write is in flight keeps its bytes until it lands.
                    if m.l2 == NO_PAGE || !self.log.writing_page(m.l2, s.0) {
                        self.table.meta_mut(s).flags &= !RAM_HELD;
                        if m.flags & RAM_HELD != 0 {
                            self.drop_ram(cx, s);
                        }
                    }
                    self.forget_if_empty(s);
                }
                Served::metadata()
            }
            _ => Served::metadata(),
        }
    }

    fn complete(&mut self, cx: &mut Ctx<'_>, work: &Work, outcome: Outcome) {
        if work.kind != WorkKind::Copy {
            return;
        }
        let pos = work.tag as u32;
        let landed = self.log.landed(pos, outcome == Outcome::Done);
        let s = match landed {
            Landed::Valid(p) => Slot(p),
            Landed::Stale(p) | Landed::Failed(p) => {
                self.drop_fast(cx, work.obj, pos);
                self.table.meta_mut(Slot(p)).l2 = NO_PAGE;
                Slot(p)
            }
        };
        // Pages that left the ARC during the write let their RAM copy go now.
        let m = *self.table.meta(s);
        if m.flags & IN_ARC == 0 && m.flags & RAM_HELD != 0 {
            self.table.meta_mut(s).flags &= !RAM_HELD;
            self.drop_ram(cx, s);
        }
        self.forget_if_empty(s);
    }

    fn tick(&mut self, cx: &mut Ctx<'_>) {
        if self.l2 && cx.now >= self.next_feed {
            let busy = self.feed(cx);
            self.busy_feeds += u64::from(busy);
            let interval = match self.busy_feed_interval {
                Some(fast) if busy => fast,
                _ => self.feed_interval,
            };
            // The feed itself takes no time here: the next starts `interval` after this one.
            self.next_feed = cx.now.saturating_add(interval);
        }
    }

    fn next_tick(&self) -> Option<Nanos> {
        self.l2.then_some(self.next_feed)
    }

    fn placement(&self, obj: ObjectId) -> Placement {
        match self.table.get(obj) {
            Some(s) => {
                let m = self.table.meta(s);
                let valid = m.l2 != NO_PAGE && self.log.holds(m.l2, s.0);
                Placement {
                    tracked: true,
                    on_fast: valid,
                    on_slow: true,
                    dirty: false,
                    moving: m.l2 != NO_PAGE && !valid,
                    in_ram: m.flags & RAM_HELD != 0,
                }
            }
            None => Placement { on_slow: true, ..Placement::default() },
        }
    }

    fn usage(&self) -> Usage {
        self.log.usage(self.page, self.table.len())
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("L2 feeds", self.feeds),
            ("L2 feeds that wrote over half their budget", self.busy_feeds),
            ("pages fed to the L2", self.pages_fed),
            ("L2 hits", self.l2_hits),
            ("L2 copies invalidated by writes", self.l2_invalidations),
            ("L2 evictions at the log hand", self.l2_evictions),
        ]
    }

    fn check_invariants(&self) -> Result<(), String> {
        self.log.check()?;
        let (mut in_arc, mut valid) = (0u32, 0usize);
        for s in self.table.slots() {
            let m = *self.table.meta(s);
            let id = self.table.id(s);
            if m.flags & IN_ARC != 0 {
                in_arc += 1;
                if m.flags & RAM_HELD == 0 {
                    return Err(format!("{id:?} in the ARC without its bytes"));
                }
            }
            if m.l2 != NO_PAGE {
                if self.log.holds(m.l2, s.0) {
                    valid += 1;
                } else if !self.log.writing_page(m.l2, s.0) {
                    return Err(format!("{id:?} points at L2 slot {} which is not its", m.l2));
                }
            }
            let writing = m.l2 != NO_PAGE && self.log.writing_page(m.l2, s.0);
            if m.flags == RAM_HELD && !writing {
                return Err(format!("{id:?} holds RAM outside the ARC with no L2 write in flight"));
            }
            if m.flags & RAM_HELD == 0 && m.l2 == NO_PAGE {
                return Err(format!("{id:?} is tracked but nowhere"));
            }
        }
        if valid != self.log.valid().count() {
            return Err(format!("{} valid L2 slots, {valid} pages point at one", self.log.valid().count()));
        }
        if in_arc != self.arc_len || in_arc as usize != self.arc.len(Tier::Fast) || in_arc > self.arc_pages {
            return Err(format!(
                "ARC: {in_arc} pages, {} counted, {} ranked, {} allowed",
                self.arc_len,
                self.arc.len(Tier::Fast),
                self.arc_pages
            ));
        }
        Ok(())
    }

    fn memory_bytes(&self) -> usize {
        self.table.memory_bytes() + self.arc.memory_bytes() + self.log.memory_bytes()
    }

    fn prefetch(&self, obj: ObjectId, deep: bool) {
        if !deep {
            self.table.prefetch(obj);
        } else if let Some(s) = self.table.prefetch_entry(obj) {
            self.arc.prefetch(s);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{Harness, OBJ, Step, run_work};
    use crate::{Level, Nanos, ObjectId, Request, Setup, build_arch};

    fn counters(h: &Harness) -> std::collections::BTreeMap<&'static str, u64> {
        h.engine.arch_counters().into_iter().collect()
    }

    /// ZFS's `l2arc_write_interval`: after a feed that wrote more than half its budget the
    /// next comes `feed-min` later (200 ms), after any other `feed` later (1 s); with
    /// `feed-again=false` always `feed`.
    #[test]
    fn a_feed_that_wrote_much_is_followed_sooner() {
        let base = "zfs-l2arc-like:l1=64KiB,collector=lru,write-max=8KiB,write-boost=0,headroom=1";
        for (spec, after_busy) in [(base.to_string(), 200), (format!("{base},feed-again=false"), 1000)] {
            let mut h = Harness::new(&spec, 32, false);
            assert_eq!(h.engine.next_deadline(), Some(Nanos::from_secs(1)), "{spec}");
            for o in 0..8 {
                h.step(&Step::Read(o, true)).unwrap();
            }
            h.step(&Step::Tick).unwrap();
            assert_eq!(h.queued.len(), 2, "the budget, 8 KiB, written");
            let gap = |h: &Harness| h.engine.next_deadline().map(|t| (t.0 - h.now().0) / 1_000_000);
            assert_eq!(gap(&h), Some(after_busy), "{spec}");
            run_work(&mut h);
            h.step(&Step::Tick).unwrap();
            assert!(h.queued.is_empty(), "the tail's pages have L2 copies: nothing written");
            assert_eq!(gap(&h), Some(1000), "{spec}");
            let c = counters(&h);
            assert_eq!((c["L2 feeds"], c["L2 feeds that wrote over half their budget"]), (2, 1), "{spec}");
        }
    }

    /// The feeder copies the ARC's coldest pages, at most `write-max` per feed; the L2 copy
    /// stays while the page is in the ARC (inclusive) and serves it after it leaves.
    #[test]
    fn the_feed_copies_the_arc_tail_and_l2_serves_after_eviction() {
        let mut h =
            Harness::new("zfs-l2arc-like:l1=16KiB,collector=lru,write-max=8KiB,write-boost=0,headroom=1", 8, false);
        for o in 0..4 {
            h.step(&Step::Read(o, true)).unwrap();
        }
        assert!(h.queued.is_empty(), "nothing is written before the feed");
        h.step(&Step::Tick).unwrap();
        let fed: Vec<_> = h.queued.iter().map(|w| (w.obj.0, w.from)).collect();
        assert_eq!(fed, vec![(0, Level::Ram), (1, Level::Ram)], "the two coldest, 8 KiB");
        run_work(&mut h);
        let p = h.engine.placement(ObjectId(0));
        assert!(p.on_fast && p.in_ram, "inclusive: in the ARC and on the SSD");
        for o in [4, 5] {
            h.step(&Step::Read(o, true)).unwrap(); // evicts 0 and 1 from the ARC
        }
        assert!(!h.ram_holds(0));
        let served = h.engine.access(&Request::read(ObjectId(0), 0, OBJ));
        assert_eq!(served.level, Level::Fast);
        assert!(served.keep_in_ram);
        h.drain();
        assert!(h.engine.placement(ObjectId(0)).on_fast, "the L2 copy stays after a hit");
        // A write orphans the L2 copy.
        h.step(&Step::Write(0, true)).unwrap();
        assert!(!h.engine.placement(ObjectId(0)).on_fast);
        let c = counters(&h);
        assert_eq!((c["L2 hits"], c["pages fed to the L2"], c["L2 copies invalidated by writes"]), (1, 2, 1));
        h.settle().unwrap();
    }

    /// Pages that pass through the ARC between two feeds never reach the SSD.
    #[test]
    fn pages_gone_before_the_feed_are_never_cached() {
        let mut h = Harness::new("zfs-l2arc-like:l1=4KiB,collector=lru", 8, false);
        for o in 0..3 {
            h.step(&Step::Read(o, true)).unwrap();
        }
        h.step(&Step::Tick).unwrap();
        let fed: Vec<_> = h.queued.iter().map(|w| w.obj.0).collect();
        assert_eq!(fed, vec![2]);
        h.settle().unwrap();
    }

    #[test]
    fn knobs_are_validated() {
        let setup = Setup { fast_capacity: 64 * OBJ, slow_capacity: 0, object_size: OBJ };
        let err = |spec: &str| build_arch(spec, &setup).unwrap_err().to_string();
        assert!(err("zfs-l2arc-like:collector=lfu").contains("use arc, lru or fifo"));
        assert!(err("zfs-l2arc-like:headroom=0").contains("headroom"));
        assert!(err("zfs-l2arc-like:l1=1KiB").contains("l1"));
        let tiny = Setup { fast_capacity: 100, ..setup };
        assert!(build_arch("zfs-l2arc-like", &tiny).unwrap_err().to_string().contains("smaller than one page"));
        assert!(build_arch("hca", &tiny).unwrap_err().to_string().contains("smaller than one page"));
        let variable = Setup { object_size: 0, ..setup };
        assert!(build_arch("hca", &variable).unwrap_err().to_string().contains("--objects blocks"));
    }
}
