//! A Flashcache-like baseline (Facebook's device-mapper write-back cache), re-implemented from
//! its documentation: the SSD is divided into sets of `assoc` blocks (default 512) of 4 KiB;
//! disk block `b` maps to set `(b / assoc) % sets`, so a run of `assoc` consecutive blocks
//! shares a set. Within a set, replacement is LRU (Flashcache's `reclaim_policy=1`), preferring
//! clean blocks. Writes are cached (write-back). When a set's dirty blocks exceed
//! `dirty-thresh`% of it, the set is cleaned: its least recently used dirty blocks are written
//! back, at most `max-clean-set` per set and `max-clean` in total at once. A miss that does not
//! cover a whole block, or finds no clean block to replace, goes to the disk (uncached); partial
//! I/O to a cached block is served from the SSD.
//!
//! Not modelled: Flashcache's idle "fallow" cleaning and its on-SSD metadata updates.

use super::{ArchBuild, Architecture, Placement, Setup, Usage};
use crate::engine::Ctx;
use crate::object_table::ObjectTable;
use crate::params::{ConfigError, ParamSpec, Params};
use crate::{Level, ObjectId, Op, Outcome, Request, Served, Work, WorkKind};

const VALID: u8 = 1;
const FILLING: u8 = 2;
const DIRTY: u8 = 4;
const WRITING_BACK: u8 = 8;
const REDIRTIED: u8 = 16;
/// A write arrived while the block was being filled: the fill is dropped when it lands.
const STALE: u8 = 32;

const NIL: u16 = u16::MAX;

/// One cache block (16 bytes).
#[derive(Clone, Copy, Debug)]
struct Block {
    id: u64,
    prev: u16,
    next: u16,
    state: u8,
}

impl Default for Block {
    fn default() -> Self {
        Block { id: 0, prev: NIL, next: NIL, state: 0 }
    }
}

#[derive(Clone, Copy, Debug, Default)]
struct Set {
    head: u16,
    tail: u16,
    /// Blocks in the LRU list.
    used: u16,
    /// Blocks `fresh..assoc` have never been used.
    fresh: u16,
    /// Head of the freed blocks, linked through `next`.
    free: u16,
    dirty: u16,
    cleaning: u16,
}

/// The Flashcache-like architecture.
#[derive(Debug)]
pub struct Flashcache {
    block: u64,
    assoc: u32,
    sets: Vec<Set>,
    blocks: Vec<Block>,
    index: ObjectTable<u32>,
    dirty_thresh: u16,
    max_clean_set: u16,
    max_clean: u32,
    cleaning: u32,
    dirty_total: u64,
    uncached: u64,
    cleanings: u64,
}

const PARAMS: &[ParamSpec] = &[
    ParamSpec { name: "assoc", default: "512", help: "blocks per set (1..=32768)" },
    ParamSpec { name: "dirty-thresh", default: "20", help: "clean a set above this % dirty (1..=100)" },
    ParamSpec { name: "max-clean-set", default: "2", help: "write-backs in flight per set (1..=1024)" },
    ParamSpec { name: "max-clean", default: "4", help: "write-backs in flight in total (1..=65536)" },
];

impl ArchBuild for Flashcache {
    const NAME: &'static str = "flashcache-like";
    const CAPS: crate::arch::Capabilities =
        crate::arch::Capabilities::BLOCK_CACHING.with_objects(crate::arch::ObjectSizes::Fixed);
    const VERSION: u32 = 1;
    const HELP: &'static str =
        "Flashcache-like: set-associative write-back SSD cache, LRU per set, per-set dirty threshold";
    const PARAMS: &'static [ParamSpec] = PARAMS;
    const USES_COLLECTOR: bool = false;

    fn build(p: &mut Params, setup: &Setup) -> Result<Self, ConfigError> {
        if setup.object_size == 0 {
            return Err(p.inconsistent("needs fixed-size blocks: run with --objects blocks:4KiB"));
        }
        let block = setup.object_size;
        let n = setup.fast_capacity / block;
        if n == 0 {
            return Err(p.inconsistent(format!(
                "the SSD ({} bytes) is smaller than one block ({block} bytes)",
                setup.fast_capacity
            )));
        }
        let assoc = (p.u64("assoc", 1, 32_768)?).min(n) as u32;
        let thresh = p.u64("dirty-thresh", 1, 100)?;
        let max_clean_set = p.u64("max-clean-set", 1, 1024)? as u16;
        let max_clean = p.u64("max-clean", 1, 65_536)? as u32;
        let nsets = (n / u64::from(assoc)).max(1);
        if nsets * u64::from(assoc) > u64::from(u32::MAX) {
            return Err(p.inconsistent("more than 2^32 cache blocks: use larger blocks"));
        }
        let dirty_thresh = ((u64::from(assoc) * thresh).div_ceil(100)).max(1) as u16;
        Ok(Flashcache {
            block,
            assoc,
            sets: vec![Set { head: NIL, tail: NIL, free: NIL, ..Set::default() }; nsets as usize],
            blocks: vec![Block::default(); (nsets * u64::from(assoc)) as usize],
            index: ObjectTable::new(),
            dirty_thresh,
            max_clean_set,
            max_clean,
            cleaning: 0,
            dirty_total: 0,
            uncached: 0,
            cleanings: 0,
        })
    }
}

impl Flashcache {
    fn set_of(&self, id: u64) -> usize {
        ((id / u64::from(self.assoc)) % self.sets.len() as u64) as usize
    }

    fn base(&self, set: usize) -> usize {
        set * self.assoc as usize
    }

    fn unlink(&mut self, set: usize, i: u16) {
        let base = self.base(set);
        let Block { prev, next, .. } = self.blocks[base + i as usize];
        if prev != NIL {
            self.blocks[base + prev as usize].next = next;
        } else {
            self.sets[set].head = next;
        }
        if next != NIL {
            self.blocks[base + next as usize].prev = prev;
        } else {
            self.sets[set].tail = prev;
        }
    }

    fn push_front(&mut self, set: usize, i: u16) {
        let base = self.base(set);
        let head = self.sets[set].head;
        self.blocks[base + i as usize].prev = NIL;
        self.blocks[base + i as usize].next = head;
        if head != NIL {
            self.blocks[base + head as usize].prev = i;
        } else {
            self.sets[set].tail = i;
        }
        self.sets[set].head = i;
    }

    fn touch(&mut self, set: usize, i: u16) {
        if self.sets[set].head != i {
            self.unlink(set, i);
            self.push_front(set, i);
        }
    }

    /// A block for a new entry: a never-used one, else the least recently used clean idle one.
    fn victim(&mut self, cx: &mut Ctx<'_>, set: usize) -> Option<u16> {
        let s = self.sets[set];
        let base = self.base(set);
        if s.free != NIL {
            self.sets[set].free = self.blocks[base + s.free as usize].next;
            self.sets[set].used += 1;
            return Some(s.free);
        }
        if u32::from(s.fresh) < self.assoc {
            self.sets[set].fresh += 1;
            self.sets[set].used += 1;
            return Some(s.fresh);
        }
        let mut cur = s.tail;
        while cur != NIL {
            let b = self.blocks[base + cur as usize];
            if b.state == VALID {
                // Drop the clean copy it holds.
                if let Some(slot) = self.index.get(ObjectId(b.id)) {
                    self.index.remove(slot);
                }
                cx.issue(
                    Work::new(WorkKind::Invalidate, ObjectId(b.id), Level::Fast, Level::Fast, self.block)
                        .with_tag(u64::MAX),
                );
                self.unlink(set, cur);
                self.blocks[base + cur as usize].state = 0;
                return Some(cur);
            }
            cur = b.prev;
        }
        None
    }

    fn fast_addr(&self, set: usize, i: u16) -> u64 {
        (self.base(set) as u64 + u64::from(i)) * self.block
    }

    fn clean_set(&mut self, cx: &mut Ctx<'_>, set: usize) {
        let base = self.base(set);
        let mut cur = self.sets[set].tail;
        while cur != NIL
            && self.sets[set].dirty.saturating_sub(self.sets[set].cleaning) > self.dirty_thresh
            && self.sets[set].cleaning < self.max_clean_set
            && self.cleaning < self.max_clean
        {
            let b = self.blocks[base + cur as usize];
            if b.state & DIRTY != 0 && b.state & WRITING_BACK == 0 {
                self.write_back(cx, set, cur);
            }
            cur = b.prev;
        }
    }

    fn write_back(&mut self, cx: &mut Ctx<'_>, set: usize, i: u16) {
        let g = self.base(set) + i as usize;
        self.blocks[g].state |= WRITING_BACK;
        self.sets[set].cleaning += 1;
        self.cleaning += 1;
        self.cleanings += 1;
        let id = self.blocks[g].id;
        let w = Work::new(WorkKind::Writeback, ObjectId(id), Level::Fast, Level::Slow, self.block)
            .at(crate::LOGICAL_ADDR, self.fast_addr(set, i))
            .with_tag(g as u64);
        cx.issue(w);
    }

    fn mark_dirty(&mut self, set: usize, i: u16) {
        let g = self.base(set) + i as usize;
        let st = self.blocks[g].state;
        if st & DIRTY == 0 {
            self.blocks[g].state |= DIRTY;
            self.sets[set].dirty += 1;
            self.dirty_total += 1;
        } else if st & WRITING_BACK != 0 {
            self.blocks[g].state |= REDIRTIED;
        }
    }

    /// Takes a block for `id` in `set`: FILLING (read) or VALID|DIRTY (write).
    fn place(&mut self, cx: &mut Ctx<'_>, set: usize, id: u64, state: u8) -> Option<u16> {
        let i = self.victim(cx, set)?;
        let g = self.base(set) + i as usize;
        self.blocks[g] = Block { id, prev: NIL, next: NIL, state };
        self.push_front(set, i);
        self.index.insert(ObjectId(id), g as u32);
        Some(i)
    }

    /// A block that left the LRU list goes on the set's free list.
    fn recycle(&mut self, set: usize, i: u16) {
        let g = self.base(set) + i as usize;
        self.blocks[g] = Block { id: 0, prev: NIL, next: self.sets[set].free, state: 0 };
        self.sets[set].free = i;
        self.sets[set].used -= 1;
    }
}

impl Architecture for Flashcache {
    fn access(&mut self, cx: &mut Ctx<'_>, req: &Request) -> Served {
        if !req.op.is_data() {
            return Served::metadata();
        }
        let id = req.obj.0;
        let set = self.set_of(id);
        let whole = req.offset == 0 && req.len >= self.block;
        if let Some(slot) = self.index.get(req.obj) {
            let g = *self.index.meta(slot) as usize;
            let i = (g % self.assoc as usize) as u16;
            let st = self.blocks[g].state;
            if st & FILLING != 0 {
                if req.op == Op::Write {
                    self.blocks[g].state |= STALE;
                }
                return Served::by(Level::Slow);
            }
            self.touch(set, i);
            if req.op == Op::Write {
                self.mark_dirty(set, i);
                self.clean_set(cx, set);
            }
            return Served::by(Level::Fast).at_fast(self.fast_addr(set, i));
        }
        if !whole {
            self.uncached += 1;
            return Served::by(Level::Slow);
        }
        if req.op == Op::Write {
            match self.place(cx, set, id, VALID) {
                Some(i) => {
                    self.mark_dirty(set, i);
                    self.clean_set(cx, set);
                    Served::by(Level::Fast).at_fast(self.fast_addr(set, i))
                }
                None => {
                    self.uncached += 1;
                    self.clean_set(cx, set);
                    Served::by(Level::Slow)
                }
            }
        } else {
            if let Some(i) = self.place(cx, set, id, FILLING) {
                let g = self.base(set) + i as usize;
                let mut w = Work::new(WorkKind::Copy, req.obj, Level::Slow, Level::Fast, self.block)
                    .at(crate::LOGICAL_ADDR, self.fast_addr(set, i))
                    .with_tag(g as u64);
                w.source_in_ram = true;
                cx.issue(w);
            } else {
                self.uncached += 1;
                self.clean_set(cx, set);
            }
            Served::by(Level::Slow)
        }
    }

    fn complete(&mut self, cx: &mut Ctx<'_>, work: &Work, outcome: Outcome) {
        if !matches!(work.kind, WorkKind::Copy | WorkKind::Writeback) {
            return;
        }
        let g = work.tag as usize;
        let set = g / self.assoc as usize;
        let i = (g % self.assoc as usize) as u16;
        let st = self.blocks[g].state;
        let done = outcome == Outcome::Done;
        match work.kind {
            WorkKind::Copy => {
                self.blocks[g].state &= !FILLING;
                if !done || st & STALE != 0 {
                    if done {
                        cx.issue(
                            Work::new(WorkKind::Invalidate, work.obj, Level::Fast, Level::Fast, self.block)
                                .with_tag(u64::MAX),
                        );
                    }
                    if let Some(slot) = self.index.get(work.obj) {
                        self.index.remove(slot);
                    }
                    self.unlink(set, i);
                    self.blocks[g].state = 0;
                    self.recycle(set, i);
                } else {
                    self.blocks[g].state |= VALID;
                }
            }
            WorkKind::Writeback => {
                self.blocks[g].state &= !WRITING_BACK;
                self.sets[set].cleaning -= 1;
                self.cleaning -= 1;
                if done && st & REDIRTIED == 0 {
                    self.blocks[g].state &= !DIRTY;
                    self.sets[set].dirty -= 1;
                    self.dirty_total -= 1;
                }
                self.blocks[g].state &= !REDIRTIED;
                self.clean_set(cx, set);
            }
            _ => {}
        }
    }

    /// Writes back everything dirty at once (the per-set limits apply to threshold cleaning only).
    fn flush(&mut self, cx: &mut Ctx<'_>) {
        for set in 0..self.sets.len() {
            let base = self.base(set);
            let mut cur = self.sets[set].head;
            while cur != NIL {
                let b = self.blocks[base + cur as usize];
                if b.state & DIRTY != 0 && b.state & WRITING_BACK == 0 {
                    self.write_back(cx, set, cur);
                }
                cur = b.next;
            }
        }
    }

    fn placement(&self, obj: ObjectId) -> Placement {
        match self.index.get(obj) {
            Some(slot) => {
                let st = self.blocks[*self.index.meta(slot) as usize].state;
                Placement {
                    tracked: true,
                    on_fast: st & VALID != 0 && st & STALE == 0,
                    on_slow: true,
                    dirty: st & DIRTY != 0,
                    moving: st & (FILLING | WRITING_BACK) != 0,
                    in_ram: false,
                }
            }
            None => Placement { on_slow: true, ..Placement::default() },
        }
    }

    fn usage(&self) -> Usage {
        Usage {
            fast_capacity: self.blocks.len() as u64 * self.block,
            fast_used: self.index.len() as u64 * self.block,
            dirty_bytes: self.dirty_total * self.block,
            objects: self.index.len(),
            fast_objects: self.index.len(),
            in_flight: 0,
        }
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("uncached I/Os (partial, or no clean block)", self.uncached),
            ("set-cleaning write-backs", self.cleanings),
        ]
    }

    fn check_invariants(&self) -> Result<(), String> {
        let mut dirty_total = 0;
        for (set, s) in self.sets.iter().enumerate() {
            let base = self.base(set);
            let (mut n, mut dirty, mut cleaning) = (0u16, 0u16, 0u16);
            let mut cur = s.head;
            while cur != NIL {
                let b = self.blocks[base + cur as usize];
                n += 1;
                if b.state & DIRTY != 0 {
                    dirty += 1;
                }
                if b.state & WRITING_BACK != 0 {
                    cleaning += 1;
                }
                match self.index.get(ObjectId(b.id)) {
                    Some(slot) if *self.index.meta(slot) as usize == base + cur as usize => {}
                    _ => {
                        return Err(format!(
                            "set {set} block {cur} holds {:#x}, which the index does not point at",
                            b.id
                        ));
                    }
                }
                if n > s.used {
                    return Err(format!("set {set}: list longer than its {} used blocks", s.used));
                }
                cur = b.next;
            }
            if n != s.used || dirty != s.dirty || cleaning != s.cleaning {
                return Err(format!(
                    "set {set}: {n} listed of {} used, dirty {dirty}/{}, cleaning {cleaning}/{}",
                    s.used, s.dirty, s.cleaning
                ));
            }
            dirty_total += u64::from(dirty);
        }
        if dirty_total != self.dirty_total {
            return Err(format!("{} dirty counted, {dirty_total} found", self.dirty_total));
        }
        Ok(())
    }

    fn memory_bytes(&self) -> usize {
        self.blocks.capacity() * std::mem::size_of::<Block>() + self.sets.capacity() * 16 + self.index.memory_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{Harness, OBJ, Step, run_work};
    use crate::{Level, ObjectId, Request, WorkKind};

    /// Consecutive runs of `assoc` blocks share a set; a set replaces its own LRU clean block.
    #[test]
    fn blocks_map_to_sets_and_replace_within_their_set() {
        let mut h = Harness::new("flashcache-like:assoc=2", 4, false);
        for o in [0, 1, 2, 3] {
            h.step(&Step::Read(o, true)).unwrap();
        }
        run_work(&mut h);
        for o in 0..4 {
            assert!(h.engine.placement(ObjectId(o)).on_fast, "{o}");
        }
        h.step(&Step::Read(1, true)).unwrap(); // set 0 order: 1, 0
        h.step(&Step::Read(4, true)).unwrap(); // set 0 again ((4 / 2) % 2): replaces 0
        run_work(&mut h);
        assert!(!h.engine.placement(ObjectId(0)).on_fast);
        assert!(h.engine.placement(ObjectId(1)).on_fast && h.engine.placement(ObjectId(4)).on_fast);
        assert!(h.engine.placement(ObjectId(2)).on_fast && h.engine.placement(ObjectId(3)).on_fast, "set 1 untouched");
        h.settle().unwrap();
    }

    /// A set above its dirty threshold writes back its LRU dirty blocks, no more than
    /// `max-clean-set` at once.
    #[test]
    fn a_set_above_its_dirty_threshold_is_cleaned_within_limits() {
        let mut h = Harness::new("flashcache-like:assoc=4,dirty-thresh=50,max-clean-set=1", 4, false);
        h.step(&Step::Write(0, true)).unwrap();
        h.step(&Step::Write(1, true)).unwrap();
        assert!(h.queued.is_empty(), "2 of 4 dirty is not above 50%");
        h.step(&Step::Write(2, true)).unwrap();
        h.step(&Step::Write(3, true)).unwrap();
        let wb: Vec<_> = h.queued.iter().filter(|w| w.kind == WorkKind::Writeback).map(|w| w.obj).collect();
        assert_eq!(wb, vec![ObjectId(0)], "the LRU dirty block, one at a time");
        run_work(&mut h);
        assert_eq!(h.engine.usage().dirty_bytes, 2 * OBJ, "cleaned down to the threshold");
        assert!(!h.engine.placement(ObjectId(0)).dirty && !h.engine.placement(ObjectId(1)).dirty);
        h.settle().unwrap();
    }

    /// Partial misses go to the disk uncached; partial I/O to a cached block is served from it;
    /// a miss with only dirty blocks in its set goes to the disk.
    #[test]
    fn partial_misses_and_full_dirty_sets_go_uncached() {
        let mut h = Harness::new("flashcache-like:assoc=2,dirty-thresh=100", 2, false);
        assert_eq!(h.engine.access(&Request::write(ObjectId(0), 512, 512)).level, Level::Slow);
        h.step(&Step::Write(0, true)).unwrap();
        assert_eq!(h.engine.access(&Request::read(ObjectId(0), 512, 512)).level, Level::Fast);
        h.step(&Step::Write(1, true)).unwrap();
        assert_eq!(h.engine.access(&Request::read(ObjectId(2), 0, OBJ)).level, Level::Slow);
        h.drain();
        assert!(h.queued.is_empty(), "no clean block to fill");
        let c: std::collections::BTreeMap<_, _> = h.engine.arch_counters().into_iter().collect();
        assert_eq!(c["uncached I/Os (partial, or no clean block)"], 2);
        h.settle().unwrap();
    }
}
