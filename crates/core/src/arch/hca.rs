//! HCA, the SSD-aware hybrid cache architecture (the HCA paper, §IV): a RAM L1 cache ranked by
//! LFU, a DRAM *transient buffer* (TB) that absorbs L1 evictions and writes them to the SSD in
//! batches grouped by locality, an SSD L2 cache *exclusive* with L1 (a page is in L1, the TB or
//! L2, never in two), and the disk.
//!
//! Lookup: L1 (RAM hit) → L2 (the page moves up to L1 and leaves the SSD) → TB (a RAM hit, as
//! the paper counts it; the page goes back to L1) → disk (the page enters L1). A full L1 evicts
//! its LFU page to the TB; a full TB is flushed: its pages sorted by address, so neighbours on
//! disk become neighbours on the SSD, and written at the hand of the SSD log
//! ([`super::ssd_log`]) as one sequential batch. A page reaches the SSD only through the TB:
//! misses never write the SSD, and neither do writes.
//!
//! Writes: the paper's L2 is a read cache; we write through to the disk. A whole-page write
//! enters (or updates) L1, a partial write updates a page already in RAM; a write to a page on
//! the SSD invalidates that copy. Hits in the TB and in L2 move the page to L1, so L1's LFU
//! counts start over.
//!
//! Not specified by the paper, chosen here: L2 replacement is the log's FIFO (for an exclusive
//! L2 from which hits leave, FIFO by write time is LRU by eviction time); `tb=0` writes each L1
//! eviction to the SSD at once.

use super::ssd_log::{Landed, SsdLog};
use super::{ArchBuild, Architecture, Placement, Setup, Usage};
use crate::collector::{AnyCollector, Collector, CollectorContext, Removal, Touch, build_collector, pages_of};
use crate::engine::Ctx;
use crate::object_table::ObjectTable;
use crate::params::{ConfigError, ParamSpec, Params};
use crate::{Level, Levels, ObjectId, Op, Outcome, Request, Served, Slot, Tier, Work, WorkKind};

const L1: u8 = 0;
const TB: u8 = 1;
/// Written from the TB to the SSD: still in RAM until the write lands.
const FLUSHING: u8 = 2;
const L2: u8 = 3;

/// Where a page is (8 bytes).
#[derive(Clone, Copy, Debug, Default)]
pub struct PageMeta {
    at: u8,
    /// TB: index in the buffer; FLUSHING and L2: the SSD log slot.
    pos: u32,
}

/// The HCA architecture.
#[derive(Debug)]
pub struct Hca {
    page: u64,
    l1_pages: u32,
    tb_pages: u32,
    /// L1 evictions go to the TB and the SSD (false: they are dropped; the RAM-only baseline).
    l2: bool,
    table: ObjectTable<PageMeta>,
    l1: AnyCollector,
    l1_len: u32,
    tb: Vec<Slot>,
    log: SsdLog,
    scratch: Vec<(ObjectId, Slot)>,
    l1_evictions: u64,
    tb_hits: u64,
    l2_move_ups: u64,
    flushes: u64,
    pages_flushed: u64,
    l2_evictions: u64,
    dropped: u64,
}

const PARAMS: &[ParamSpec] = &[
    ParamSpec { name: "l1", default: "64MiB", help: "RAM L1 cache size (at least one page)" },
    ParamSpec {
        name: "l2",
        default: "true",
        help: "false: L1 evictions are dropped, the SSD stays unused (the paper's baseline)",
    },
    ParamSpec { name: "tb", default: "64KiB", help: "transient buffer size (0 = write each L1 eviction at once)" },
    ParamSpec { name: "collector", default: "lfu", help: "L1 ranking (the paper: LFU)" },
];

impl ArchBuild for Hca {
    const NAME: &'static str = "hca";
    const CAPS: crate::arch::Capabilities = crate::arch::Capabilities::BLOCK_CACHING
        .with_ram_level(crate::arch::RamLevel::Cache)
        .with_objects(crate::arch::ObjectSizes::Fixed);
    const VERSION: u32 = 1;
    const HELP: &'static str = "HCA: RAM L1 (LFU) + transient buffer + exclusive SSD L2 fed in locality-sorted batches";
    const PARAMS: &'static [ParamSpec] = PARAMS;
    const USES_COLLECTOR: bool = true;

    fn build(p: &mut Params, setup: &Setup) -> Result<Self, ConfigError> {
        if setup.object_size == 0 {
            return Err(p.inconsistent("needs fixed-size pages: run with --objects blocks:4KiB (or 8KiB)"));
        }
        let page = setup.object_size;
        let l1 = p.size("l1", page, 1 << 44)?;
        let tb = p.size("tb", 0, 1 << 40)?;
        let l2 = p.bool("l2")?;
        let slots = setup.fast_capacity / page;
        if slots == 0 {
            return Err(p.inconsistent(format!(
                "the SSD ({} bytes) is smaller than one page ({page} bytes)",
                setup.fast_capacity
            )));
        }
        let (l1_pages, tb_pages) = (l1 / page, tb / page);
        if l1_pages > u64::from(u32::MAX / 2) || slots > u64::from(u32::MAX / 2) || tb_pages > 1 << 24 {
            return Err(p.inconsistent("too many pages: use larger pages"));
        }
        let name = p.string("collector")?;
        let l1 = build_collector(&name, p, &CollectorContext { fast_capacity: l1_pages * page })?;
        Ok(Hca {
            page,
            l1_pages: l1_pages as u32,
            tb_pages: tb_pages as u32,
            l2,
            table: ObjectTable::new(),
            l1,
            l1_len: 0,
            tb: Vec::with_capacity(tb_pages as usize),
            log: SsdLog::new(slots as u32),
            scratch: Vec::with_capacity(tb_pages as usize),
            l1_evictions: 0,
            tb_hits: 0,
            l2_move_ups: 0,
            flushes: 0,
            pages_flushed: 0,
            l2_evictions: 0,
            dropped: 0,
        })
    }
}

impl Hca {
    fn fast_addr(&self, pos: u32) -> u64 {
        u64::from(pos) * self.page
    }

    fn touch_of(cx: &Ctx<'_>, req: &Request) -> Touch {
        Touch { now: cx.now, seq: cx.seq, pages: pages_of(req.offset, req.len), write: req.op == Op::Write }
    }

    fn drop_ram(&self, cx: &mut Ctx<'_>, s: Slot) {
        cx.issue(
            Work::new(WorkKind::Invalidate, self.table.id(s), Level::Ram, Level::Ram, self.page).with_tag(u64::MAX),
        );
    }

    fn drop_fast(&self, cx: &mut Ctx<'_>, s: Slot, pos: u32) {
        let w = Work::new(WorkKind::Invalidate, self.table.id(s), Level::Fast, Level::Fast, self.page)
            .at(crate::LOGICAL_ADDR, self.fast_addr(pos))
            .with_tag(u64::MAX);
        cx.issue(w);
    }

    /// Takes `s` out of the TB vector (keeping the others' indices right).
    fn tb_remove(&mut self, s: Slot) {
        let i = self.table.meta(s).pos as usize;
        self.tb.swap_remove(i);
        if let Some(&moved) = self.tb.get(i) {
            self.table.meta_mut(moved).pos = i as u32;
        }
    }

    /// Puts page `s` (already in the table, in no level) into L1, evicting L1's LFU page to the
    /// TB first if L1 is full.
    fn enter_l1(&mut self, cx: &mut Ctx<'_>, s: Slot, t: &Touch) {
        if self.l1_len >= self.l1_pages {
            self.l1.on_miss(self.table.id(s), self.page);
            if let Some(v) = self.l1.coldest_fast(cx.now) {
                self.l1.remove(v, Removal::Evicted);
                self.l1_len -= 1;
                self.l1_evictions += 1;
                self.evict_to_buffer(cx, v);
            }
        }
        *self.table.meta_mut(s) = PageMeta { at: L1, pos: 0 };
        self.l1.insert(s, self.table.id(s), Tier::Fast, self.page, t);
        self.l1_len += 1;
    }

    fn evict_to_buffer(&mut self, cx: &mut Ctx<'_>, v: Slot) {
        if !self.l2 {
            self.drop_ram(cx, v);
            self.table.remove(v);
            return;
        }
        *self.table.meta_mut(v) = PageMeta { at: TB, pos: self.tb.len() as u32 };
        self.tb.push(v);
        if self.tb.len() as u32 >= self.tb_pages.max(1) {
            self.flush_tb(cx);
        }
    }

    /// Writes the whole TB to the SSD log, sorted by page address so that neighbours on disk
    /// land next to each other (one sequential write).
    fn flush_tb(&mut self, cx: &mut Ctx<'_>) {
        self.flushes += 1;
        let mut batch = std::mem::take(&mut self.scratch);
        batch.clear();
        batch.extend(self.tb.drain(..).map(|s| (self.table.id(s), s)));
        batch.sort_unstable_by_key(|&(id, _)| id.0);
        for &(id, s) in &batch {
            match self.log.take(s.0) {
                Some((pos, evicted)) => {
                    if let Some(e) = evicted {
                        self.l2_evictions += 1;
                        let e = Slot(e);
                        self.drop_fast(cx, e, pos);
                        self.table.remove(e);
                    }
                    *self.table.meta_mut(s) = PageMeta { at: FLUSHING, pos };
                    self.pages_flushed += 1;
                    let w = Work::new(WorkKind::Copy, id, Level::Ram, Level::Fast, self.page)
                        .at(crate::LOGICAL_ADDR, self.fast_addr(pos))
                        .with_tag(u64::from(pos));
                    cx.issue(w);
                }
                None => {
                    // The log is still writing where the hand stands: the page leaves the cache.
                    self.dropped += 1;
                    self.drop_ram(cx, s);
                    self.table.remove(s);
                }
            }
        }
        self.scratch = batch;
    }

    /// A hit outside L1 (TB, flushing, L2) or a write that brings a page back: into L1.
    fn move_up(&mut self, cx: &mut Ctx<'_>, s: Slot, t: &Touch) {
        let m = *self.table.meta(s);
        match m.at {
            TB => self.tb_remove(s),
            FLUSHING => {
                self.log.invalidate(m.pos);
            }
            L2 => {
                self.log.invalidate(m.pos);
                self.drop_fast(cx, s, m.pos);
            }
            _ => {}
        }
        self.enter_l1(cx, s, t);
    }

    /// Forgets a page wherever it is (a delete, or a partial write to a page on the SSD).
    fn forget(&mut self, cx: &mut Ctx<'_>, s: Slot) {
        let m = *self.table.meta(s);
        match m.at {
            L1 => {
                self.l1.remove(s, Removal::Deleted);
                self.l1_len -= 1;
                self.drop_ram(cx, s);
            }
            TB => {
                self.tb_remove(s);
                self.drop_ram(cx, s);
            }
            FLUSHING => {
                // Its RAM copy feeds the write in flight: keep the page (in L1) until then.
                let t = Touch { now: cx.now, seq: cx.seq, pages: 1, write: true };
                self.move_up(cx, s, &t);
                return;
            }
            _ => {
                self.log.invalidate(m.pos);
                self.drop_fast(cx, s, m.pos);
            }
        }
        self.table.remove(s);
    }

    fn read(&mut self, cx: &mut Ctx<'_>, req: &Request) -> Served {
        let t = Self::touch_of(cx, req);
        match self.table.get(req.obj) {
            Some(s) => {
                let m = *self.table.meta(s);
                match m.at {
                    L1 => {
                        self.l1.touch(s, &t);
                        Served::by(Level::Ram)
                    }
                    TB | FLUSHING => {
                        self.tb_hits += 1;
                        self.move_up(cx, s, &t);
                        Served::by(Level::Ram)
                    }
                    _ => {
                        self.l2_move_ups += 1;
                        let addr = self.fast_addr(m.pos);
                        self.move_up(cx, s, &t);
                        Served::by(Level::Fast).at_fast(addr).keeping_in_ram()
                    }
                }
            }
            None => {
                let s = self.table.insert(req.obj, PageMeta::default());
                self.enter_l1(cx, s, &t);
                Served::by(Level::Slow).keeping_in_ram()
            }
        }
    }

    fn write(&mut self, cx: &mut Ctx<'_>, req: &Request) -> Served {
        let t = Self::touch_of(cx, req);
        let whole = req.offset == 0 && req.len >= self.page;
        let through = Served::written_to(Levels::one(Level::Ram).union(Levels::one(Level::Slow)));
        match self.table.get(req.obj) {
            Some(s) => {
                let m = *self.table.meta(s);
                match m.at {
                    L1 => {
                        self.l1.touch(s, &t);
                        through
                    }
                    TB | FLUSHING => {
                        self.move_up(cx, s, &t);
                        through
                    }
                    _ if whole => {
                        self.move_up(cx, s, &t);
                        through
                    }
                    _ => {
                        // Not in RAM and not whole: RAM would hold a torn page.
                        self.forget(cx, s);
                        Served::by(Level::Slow)
                    }
                }
            }
            None if whole => {
                let s = self.table.insert(req.obj, PageMeta::default());
                self.enter_l1(cx, s, &t);
                through
            }
            None => Served::by(Level::Slow),
        }
    }
}

impl Architecture for Hca {
    fn access(&mut self, cx: &mut Ctx<'_>, req: &Request) -> Served {
        match req.op {
            Op::Read => self.read(cx, req),
            Op::Write => self.write(cx, req),
            Op::Delete | Op::Truncate => {
                if let Some(s) = self.table.get(req.obj) {
                    self.forget(cx, s);
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
        match self.log.landed(pos, outcome == Outcome::Done) {
            Landed::Valid(page) => {
                let s = Slot(page);
                self.table.meta_mut(s).at = L2;
                // The SSD holds it now: exclusive, so RAM lets it go.
                self.drop_ram(cx, s);
            }
            // It moved back to L1 meanwhile (or was dropped), or the write failed: whatever
            // the slot holds is garbage.
            landed => {
                let w = Work::new(WorkKind::Invalidate, work.obj, Level::Fast, Level::Fast, self.page)
                    .at(crate::LOGICAL_ADDR, work.fast_addr)
                    .with_tag(u64::MAX);
                cx.issue(w);
                if let Landed::Failed(page) = landed {
                    let s = Slot(page);
                    if self.table.meta(s).at == FLUSHING && self.table.meta(s).pos == pos {
                        self.dropped += 1;
                        self.drop_ram(cx, s);
                        self.table.remove(s);
                    }
                }
            }
        }
    }

    fn placement(&self, obj: ObjectId) -> Placement {
        match self.table.get(obj) {
            Some(s) => {
                let m = self.table.meta(s);
                Placement {
                    tracked: true,
                    on_fast: m.at == L2,
                    on_slow: true,
                    dirty: false,
                    moving: m.at == FLUSHING,
                    in_ram: m.at != L2,
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
            ("L1 evictions to the transient buffer", self.l1_evictions),
            ("transient-buffer hits", self.tb_hits),
            ("L2 hits moved up to L1", self.l2_move_ups),
            ("transient-buffer flushes", self.flushes),
            ("pages written to the SSD", self.pages_flushed),
            ("L2 evictions", self.l2_evictions),
            ("pages dropped (SSD log busy or write failed)", self.dropped),
        ]
    }

    fn check_invariants(&self) -> Result<(), String> {
        self.log.check()?;
        let (mut l1, mut tb, mut l2, mut flushing) = (0u32, 0usize, 0usize, 0usize);
        for s in self.table.slots() {
            let m = self.table.meta(s);
            match m.at {
                L1 => l1 += 1,
                TB => {
                    tb += 1;
                    if self.tb.get(m.pos as usize) != Some(&s) {
                        return Err(format!("{:?} says TB index {} but is not there", self.table.id(s), m.pos));
                    }
                }
                FLUSHING => {
                    flushing += 1;
                    if !self.log.writing_page(m.pos, s.0) {
                        return Err(format!(
                            "{:?} flushing to slot {} which is not writing it",
                            self.table.id(s),
                            m.pos
                        ));
                    }
                }
                _ => {
                    l2 += 1;
                    if !self.log.holds(m.pos, s.0) {
                        return Err(format!("{:?} in L2 slot {} which does not hold it", self.table.id(s), m.pos));
                    }
                }
            }
        }
        // Exclusivity: every valid SSD slot belongs to a page whose only home is that slot.
        if self.log.valid().count() != l2 {
            return Err(format!("{} valid SSD slots, {l2} pages in L2", self.log.valid().count()));
        }
        if l1 != self.l1_len || l1 as usize != self.l1.len(Tier::Fast) || l1 > self.l1_pages {
            return Err(format!(
                "L1: {l1} pages, {} counted, {} ranked, {} allowed",
                self.l1_len,
                self.l1.len(Tier::Fast),
                self.l1_pages
            ));
        }
        if tb != self.tb.len() || tb > self.tb_pages as usize {
            return Err(format!("TB: {tb} pages, {} listed, {} allowed", self.tb.len(), self.tb_pages));
        }
        let live_writes = self.log.in_flight().filter(|&(_, _, stale)| !stale).count();
        if live_writes != flushing {
            return Err(format!("{live_writes} live SSD writes, {flushing} pages flushing"));
        }
        Ok(())
    }

    fn memory_bytes(&self) -> usize {
        self.table.memory_bytes()
            + self.l1.memory_bytes()
            + self.log.memory_bytes()
            + (self.tb.capacity() + self.scratch.capacity() * 2) * 8
    }

    fn prefetch(&self, obj: ObjectId, deep: bool) {
        if !deep {
            self.table.prefetch(obj);
        } else if let Some(s) = self.table.prefetch_entry(obj) {
            self.l1.prefetch(s);
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::super::tests::{Harness, OBJ, Step, run_work, steps};
    use crate::{Level, ObjectId, Request, WorkKind};

    fn read(h: &mut Harness, o: u64) -> crate::Served {
        let served = h.engine.access(&Request::read(ObjectId(o), 0, OBJ));
        h.drain();
        served
    }

    /// L1 evictions collect in the transient buffer; a full buffer goes to the SSD sorted by
    /// address into consecutive slots; an SSD hit moves the page up and off the SSD.
    #[test]
    fn the_transient_buffer_batches_sorted_writes_and_l2_hits_move_up() {
        let mut h = Harness::new("hca:l1=8KiB,tb=16KiB,collector=lru", 8, false);
        for o in [5, 9, 3, 4, 7] {
            h.step(&Step::Read(o, true)).unwrap();
        }
        assert!(h.queued.is_empty(), "5, 9 and 3 wait in the buffer");
        assert!(h.engine.placement(ObjectId(9)).in_ram);
        h.step(&Step::Read(8, true)).unwrap(); // evicts 4: the buffer (5, 9, 3, 4) is full
        let writes: Vec<_> = h.queued.iter().map(|w| (w.kind, w.from, w.obj.0, w.fast_addr)).collect();
        let want: Vec<_> =
            [3u64, 4, 5, 9].iter().enumerate().map(|(i, &o)| (WorkKind::Copy, Level::Ram, o, i as u64 * OBJ)).collect();
        assert_eq!(writes, want, "sorted by address, consecutive SSD slots");
        run_work(&mut h);
        let p = h.engine.placement(ObjectId(5));
        assert!(p.on_fast && !p.in_ram && !h.ram_holds(5), "on the SSD only once written");
        // A TB-less lookup of 5: served from the SSD, kept in RAM, gone from the SSD.
        let served = read(&mut h, 5);
        assert_eq!(served.level, Level::Fast);
        assert!(served.keep_in_ram);
        let p = h.engine.placement(ObjectId(5));
        assert!(p.in_ram && !p.on_fast);
        let c: std::collections::BTreeMap<_, _> = h.engine.arch_counters().into_iter().collect();
        assert_eq!(c["L2 hits moved up to L1"], 1);
        assert_eq!(c["transient-buffer flushes"], 1);
        h.settle().unwrap();
    }

    /// A hit in the transient buffer is a RAM hit and brings the page back to L1.
    #[test]
    fn transient_buffer_hits_are_ram_hits() {
        let mut h = Harness::new("hca:l1=4KiB,tb=8KiB", 4, false);
        read(&mut h, 1);
        read(&mut h, 2); // 1 goes to the buffer
        assert_eq!(read(&mut h, 1).level, Level::Ram);
        let c: std::collections::BTreeMap<_, _> = h.engine.arch_counters().into_iter().collect();
        assert_eq!(c["transient-buffer hits"], 1);
        h.settle().unwrap();
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Exclusivity: no page is ever valid on the SSD while its bytes are held in RAM (L1 or
        /// the buffer), whatever the interleaving of accesses, completions and failures.
        #[test]
        fn a_page_is_never_in_ram_and_on_the_ssd(ops in steps(), l1 in 1u64..4, tb in 0u64..3) {
            let mut h = Harness::new(&format!("hca:l1={}KiB,tb={}KiB", l1 * 4, tb * 4), 3, false);
            for s in &ops {
                h.step(s)?;
                for o in 0..12 {
                    let p = h.engine.placement(ObjectId(o));
                    prop_assert!(!(p.on_fast && (p.in_ram || h.ram_holds(o))), "page {} in RAM and on the SSD", o);
                }
            }
            h.settle()?;
        }
    }
}
