//! The inverse-bitmap collector (Loris, after Hystor). On each access of N 4-KiB pages, the
//! object's saturating 32-bit counter grows by `b = 2^(6 - floor(log2 N))` with N clamped to
//! 1..=64, so small accesses weigh more (b = 64 for one page, 1 for 64 or more).
//!
//! Ranking: hottest on the slow tier = highest counter, ties broken by most recent access;
//! coldest on the fast tier = lowest counter, ties broken by least recent access. Each tier has
//! an indexed binary heap (a max-heap for the slow tier, a min-heap for the fast tier), so a touch
//! is O(log n) and both queries O(1). The paper's in-memory array needed a scan.
//!
//! Admission: an object qualifies for the fast tier only if its counter is higher than that of
//! the last object evicted from it.

use super::{Collector, CollectorBuild, CollectorContext, Removal, Touch, ensure_slot};
use crate::list::NIL;
use crate::params::{ConfigError, ParamSpec, Params};
use crate::{Nanos, ObjectId, Slot, Tier};

/// Per-object state.
#[derive(Clone, Copy, Debug)]
pub struct InverseBitmapState {
    counter: u32,
    /// Position in its tier's heap (low 31 bits) and the tier (top bit set: fast), packed so the
    /// state is 16 bytes.
    pos_tier: u32,
    seq: u64,
}

const FAST_BIT: u32 = 1 << 31;

impl InverseBitmapState {
    fn new(counter: u32, seq: u64, tier: Tier) -> Self {
        let mut n = InverseBitmapState { counter, pos_tier: 0, seq };
        n.set_pos(NIL);
        n.set_tier(tier);
        n
    }
    #[inline]
    fn pos(&self) -> u32 {
        self.pos_tier & !FAST_BIT
    }
    #[inline]
    fn set_pos(&mut self, pos: u32) {
        self.pos_tier = (self.pos_tier & FAST_BIT) | (pos & !FAST_BIT);
    }
    #[inline]
    fn tier(&self) -> Tier {
        if self.pos_tier & FAST_BIT != 0 { Tier::Fast } else { Tier::Slow }
    }
    #[inline]
    fn set_tier(&mut self, tier: Tier) {
        self.pos_tier = if tier == Tier::Fast { self.pos_tier | FAST_BIT } else { self.pos_tier & !FAST_BIT };
    }
}

const _: () = assert!(std::mem::size_of::<InverseBitmapState>() == 16);

impl Default for InverseBitmapState {
    fn default() -> Self {
        InverseBitmapState::new(0, 0, Tier::Slow)
    }
}

/// The increment for an access of `pages` 4-KiB pages.
#[inline]
pub fn increment(pages: u32) -> u32 {
    let n = pages.clamp(1, 64);
    64 >> n.ilog2()
}

/// The collector.
#[derive(Clone, Debug, Default)]
pub struct InverseBitmap {
    nodes: Vec<InverseBitmapState>,
    /// heaps[Fast] is a min-heap, heaps[Slow] a max-heap, both on (counter, seq).
    heaps: [Vec<u32>; 2],
    last_evicted_counter: u32,
}

impl CollectorBuild for InverseBitmap {
    const NAME: &'static str = "inverse-bitmap";
    const VERSION: u32 = 1;
    const HELP: &'static str =
        "Loris/Hystor inverse bitmap: counter += 64 >> floor(log2(pages)); admission above the last evicted counter";
    const PARAMS: &'static [ParamSpec] = &[];
    fn build(_: &mut Params, _: &CollectorContext) -> Result<Self, ConfigError> {
        Ok(InverseBitmap::default())
    }
}

impl InverseBitmap {
    /// The counter of a tracked slot.
    pub fn counter(&self, slot: Slot) -> u32 {
        self.nodes[slot.idx()].counter
    }

    /// The counter of the last object evicted from the fast tier.
    pub fn last_evicted_counter(&self) -> u32 {
        self.last_evicted_counter
    }

    #[inline]
    fn key(&self, s: u32) -> (u32, u64) {
        let n = &self.nodes[s as usize];
        (n.counter, n.seq)
    }

    /// Whether `a` must sit above `b` in the heap of `tier`.
    #[inline]
    fn above(&self, tier: Tier, a: u32, b: u32) -> bool {
        match tier {
            Tier::Fast => self.key(a) < self.key(b),
            Tier::Slow => self.key(a) > self.key(b),
        }
    }

    /// Moves a tracked slot to `tier`'s heap.
    fn move_to(&mut self, slot: Slot, tier: Tier) {
        if self.nodes[slot.idx()].tier() == tier {
            return;
        }
        self.heap_remove(slot.0);
        self.heap_push(tier, slot.0);
    }

    fn sift_up(&mut self, tier: Tier, mut i: usize) {
        let t = tier.index();
        let s = self.heaps[t][i];
        while i > 0 {
            let parent = (i - 1) / 2;
            let p = self.heaps[t][parent];
            if !self.above(tier, s, p) {
                break;
            }
            self.heaps[t][i] = p;
            self.nodes[p as usize].set_pos(i as u32);
            i = parent;
        }
        self.heaps[t][i] = s;
        self.nodes[s as usize].set_pos(i as u32);
    }

    fn sift_down(&mut self, tier: Tier, mut i: usize) {
        let t = tier.index();
        let len = self.heaps[t].len();
        let s = self.heaps[t][i];
        loop {
            let l = 2 * i + 1;
            if l >= len {
                break;
            }
            let r = l + 1;
            let mut c = l;
            if r < len && self.above(tier, self.heaps[t][r], self.heaps[t][l]) {
                c = r;
            }
            let cs = self.heaps[t][c];
            if !self.above(tier, cs, s) {
                break;
            }
            self.heaps[t][i] = cs;
            self.nodes[cs as usize].set_pos(i as u32);
            i = c;
        }
        self.heaps[t][i] = s;
        self.nodes[s as usize].set_pos(i as u32);
    }

    fn heap_push(&mut self, tier: Tier, s: u32) {
        let t = tier.index();
        self.nodes[s as usize].set_tier(tier);
        self.heaps[t].push(s);
        let i = self.heaps[t].len() - 1;
        self.nodes[s as usize].set_pos(i as u32);
        self.sift_up(tier, i);
    }

    fn heap_remove(&mut self, s: u32) {
        let tier = self.nodes[s as usize].tier();
        let t = tier.index();
        let i = self.nodes[s as usize].pos() as usize;
        let last = self.heaps[t].len() - 1;
        self.heaps[t].swap(i, last);
        self.heaps[t].pop();
        self.nodes[s as usize].set_pos(NIL);
        if i < last {
            let moved = self.heaps[t][i];
            self.nodes[moved as usize].set_pos(i as u32);
            self.sift_up(tier, i);
            let i2 = self.nodes[moved as usize].pos() as usize;
            self.sift_down(tier, i2);
        }
    }
}

impl Collector for InverseBitmap {
    fn insert(&mut self, slot: Slot, _id: ObjectId, tier: Tier, _size: u64, t: &Touch) {
        ensure_slot(&mut self.nodes, slot, InverseBitmapState::default());
        self.nodes[slot.idx()] = InverseBitmapState::new(increment(t.pages), t.seq, tier);
        self.heap_push(tier, slot.0);
    }

    fn touch(&mut self, slot: Slot, t: &Touch) {
        let n = &mut self.nodes[slot.idx()];
        n.counter = n.counter.saturating_add(increment(t.pages));
        n.seq = t.seq;
        let (tier, pos) = (n.tier(), n.pos() as usize);
        // The key only grows: it rises in the slow max-heap and sinks in the fast min-heap.
        match tier {
            Tier::Slow => self.sift_up(tier, pos),
            Tier::Fast => self.sift_down(tier, pos),
        }
    }

    fn set_tier(&mut self, slot: Slot, tier: Tier) {
        let old = self.nodes[slot.idx()].tier();
        if old == Tier::Fast && tier == Tier::Slow {
            self.last_evicted_counter = self.nodes[slot.idx()].counter;
        }
        self.move_to(slot, tier);
    }

    fn dropped_from_fast(&mut self, slot: Slot) {
        self.move_to(slot, Tier::Slow);
    }

    fn remove(&mut self, slot: Slot, why: Removal) {
        if why == Removal::Evicted && self.nodes[slot.idx()].tier() == Tier::Fast {
            self.last_evicted_counter = self.nodes[slot.idx()].counter;
        }
        self.heap_remove(slot.0);
    }

    fn coldest_fast(&mut self, _now: Nanos) -> Option<Slot> {
        self.heaps[Tier::Fast.index()].first().map(|&s| Slot(s))
    }

    fn hottest_slow(&self) -> Option<Slot> {
        self.heaps[Tier::Slow.index()].first().map(|&s| Slot(s))
    }

    fn hotter(&self, a: Slot, b: Slot) -> bool {
        self.key(a.0) > self.key(b.0)
    }

    fn heat(&self, slot: Slot) -> u64 {
        u64::from(self.nodes[slot.idx()].counter)
    }

    fn restore_heat(&mut self, slot: Slot, heat: u64, t: &Touch) {
        self.heap_remove(slot.0);
        let n = &mut self.nodes[slot.idx()];
        n.counter = u32::try_from(heat).unwrap_or(u32::MAX);
        n.seq = t.seq;
        let tier = n.tier();
        self.heap_push(tier, slot.0);
    }

    fn admits(&self, slot: Slot) -> bool {
        self.nodes[slot.idx()].counter > self.last_evicted_counter
    }

    fn tracks_slow_objects(&self) -> bool {
        true
    }

    fn len(&self, tier: Tier) -> usize {
        self.heaps[tier.index()].len()
    }

    fn memory_bytes(&self) -> usize {
        self.nodes.capacity() * std::mem::size_of::<InverseBitmapState>()
            + (self.heaps[0].capacity() + self.heaps[1].capacity()) * 4
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn increments_follow_the_paper() {
        assert_eq!(increment(0), 64);
        assert_eq!(increment(1), 64);
        assert_eq!(increment(2), 32);
        assert_eq!(increment(3), 32);
        assert_eq!(increment(4), 16);
        assert_eq!(increment(63), 2);
        assert_eq!(increment(64), 1);
        assert_eq!(increment(1000), 1);
    }

    #[test]
    fn counter_saturates() {
        let mut c = InverseBitmap::default();
        c.insert(Slot(0), ObjectId(0), Tier::Slow, 1, &Touch::at(0));
        c.nodes[0].counter = u32::MAX - 10;
        c.touch(Slot(0), &Touch::at(1));
        assert_eq!(c.counter(Slot(0)), u32::MAX);
    }

    #[test]
    fn admission_uses_last_evicted_counter() {
        let mut c = InverseBitmap::default();
        let t = |seq, pages| Touch { pages, ..Touch::at(seq) };
        c.insert(Slot(0), ObjectId(0), Tier::Fast, 1, &t(0, 1)); // 64
        c.touch(Slot(0), &t(1, 1)); // 128
        c.insert(Slot(1), ObjectId(1), Tier::Slow, 1, &t(2, 64)); // 1
        assert!(c.admits(Slot(1)), "nothing evicted yet");
        c.set_tier(Slot(0), Tier::Slow);
        assert_eq!(c.last_evicted_counter(), 128);
        assert!(!c.admits(Slot(1)));
        assert_eq!(c.hottest_slow(), Some(Slot(0)));
    }
}
