//! Least recently used. The fast tier's coldest object is its least recently accessed one; the
//! slow tier's hottest is its most recently accessed one.

use super::{Collector, CollectorBuild, CollectorContext, Removal, Touch, ensure_slot};
use crate::list::{Link, Linked, List};
use crate::params::{ConfigError, ParamSpec, Params};
use crate::{Nanos, ObjectId, Slot, Tier};

const SLOW_BIT: u32 = 1 << 31;
const STAMP_MASK: u32 = SLOW_BIT - 1;

/// Per-object state (12 bytes): list links, and the low 31 bits of the last access sequence
/// with the tier in the top bit. Stamps compare with wrapping arithmetic, exact while the two
/// accesses are within 2^30 of each other (list order, which the ranking queries use, is exact
/// regardless).
#[derive(Clone, Copy, Debug, Default)]
pub struct LruState {
    link: Link,
    stamp_and_tier: u32,
}

impl LruState {
    #[inline]
    fn tier(&self) -> Tier {
        if self.stamp_and_tier & SLOW_BIT != 0 { Tier::Slow } else { Tier::Fast }
    }
    #[inline]
    fn stamp(&self) -> u32 {
        self.stamp_and_tier & STAMP_MASK
    }
    #[inline]
    fn set(&mut self, tier: Tier, stamp: u64) {
        self.stamp_and_tier = (stamp as u32 & STAMP_MASK) | if tier == Tier::Slow { SLOW_BIT } else { 0 };
    }
}

/// Whether 31-bit stamp `a` is more recent than `b`.
#[inline]
fn newer(a: u32, b: u32) -> bool {
    let d = a.wrapping_sub(b) & STAMP_MASK;
    d != 0 && d < 1 << 30
}

impl Linked for LruState {
    #[inline]
    fn link(&self) -> &Link {
        &self.link
    }
    #[inline]
    fn link_mut(&mut self) -> &mut Link {
        &mut self.link
    }
}

/// Recency lists, one per tier. Also the building block of [`super::fifo::Fifo`].
#[derive(Clone, Debug, Default)]
pub struct Lru {
    nodes: Vec<LruState>,
    lists: [List; 2],
    /// When false, fast-tier hits do not reorder (FIFO behaviour).
    reorder_fast_on_touch: bool,
    /// Highest access sequence seen; an object entering a tier is stamped with it, so list order
    /// and stamps agree (it becomes the most recent object of its new tier).
    latest: u64,
}

impl Lru {
    /// An empty LRU.
    pub fn new() -> Lru {
        Lru { nodes: Vec::new(), lists: [List::default(); 2], reorder_fast_on_touch: true, latest: 0 }
    }

    pub(crate) fn fifo() -> Lru {
        Lru { reorder_fast_on_touch: false, ..Lru::new() }
    }

    /// Slots on `tier` from hottest to coldest (tests, diagnostics).
    pub fn order(&self, tier: Tier) -> Vec<Slot> {
        self.lists[tier.index()].iter(&self.nodes).map(Slot).collect()
    }
}

impl CollectorBuild for Lru {
    const NAME: &'static str = "lru";
    const LIBCACHESIM: Option<&'static str> = Some("LRU");
    const VERSION: u32 = 1;
    const HELP: &'static str = "least recently used";
    const PARAMS: &'static [ParamSpec] = &[];
    fn build(_: &mut Params, _: &CollectorContext) -> Result<Self, ConfigError> {
        Ok(Lru::new())
    }
}

impl Collector for Lru {
    #[inline]
    fn insert(&mut self, slot: Slot, _id: ObjectId, tier: Tier, _size: u64, t: &Touch) {
        ensure_slot(&mut self.nodes, slot, LruState::default());
        self.latest = self.latest.max(t.seq);
        self.nodes[slot.idx()].set(tier, t.seq);
        self.lists[tier.index()].push_front(&mut self.nodes, slot.0);
    }

    #[inline]
    fn touch(&mut self, slot: Slot, t: &Touch) {
        self.latest = self.latest.max(t.seq);
        let n = &mut self.nodes[slot.idx()];
        let tier = n.tier();
        n.set(tier, t.seq);
        if tier == Tier::Slow || self.reorder_fast_on_touch {
            self.lists[tier.index()].move_to_front(&mut self.nodes, slot.0);
        }
    }

    fn set_tier(&mut self, slot: Slot, tier: Tier) {
        let old = self.nodes[slot.idx()].tier();
        if old == tier {
            return;
        }
        self.lists[old.index()].unlink(&mut self.nodes, slot.0);
        self.nodes[slot.idx()].set(tier, self.latest);
        self.lists[tier.index()].push_front(&mut self.nodes, slot.0);
    }

    #[inline]
    fn remove(&mut self, slot: Slot, _why: Removal) {
        let tier = self.nodes[slot.idx()].tier();
        self.lists[tier.index()].unlink(&mut self.nodes, slot.0);
    }

    #[inline]
    fn coldest_fast(&mut self, _now: Nanos) -> Option<Slot> {
        self.lists[Tier::Fast.index()].back().map(Slot)
    }

    fn hottest_slow(&self) -> Option<Slot> {
        self.lists[Tier::Slow.index()].front().map(Slot)
    }

    fn hotter(&self, a: Slot, b: Slot) -> bool {
        newer(self.nodes[a.idx()].stamp(), self.nodes[b.idx()].stamp())
    }

    fn len(&self, tier: Tier) -> usize {
        self.lists[tier.index()].len()
    }

    fn memory_bytes(&self) -> usize {
        self.nodes.capacity() * std::mem::size_of::<LruState>()
    }

    #[inline]
    fn prefetch(&self, slot: Slot) {
        crate::object_table::prefetch(self.nodes.as_ptr().wrapping_add(slot.idx()));
    }

    fn cold_lists(&self) -> usize {
        1
    }

    fn walk_cold(&self, _list: usize, after: Option<Slot>) -> Option<Slot> {
        match after {
            None => self.lists[Tier::Fast.index()].back().map(Slot),
            Some(s) => Some(self.nodes[s.idx()].link.prev).filter(|&p| p != crate::list::NIL).map(Slot),
        }
    }
}
