//! GreedyDual-Size-Frequency (Cherkasova, 1998) as libCacheSim's `GDSF.cpp` runs it (a
//! differential test checks us miss for miss).
//!
//! Each fast-tier object has the priority L + hits × 10⁶ / size, where L is the priority of the
//! last victim (0 before the first) and hits counts its accesses since it entered. The victim
//! is the lowest priority, the least recently prioritised first among equals. Small, often hit
//! objects stay; large ones must earn their place. The slow tier has no GDSF order; its most
//! recently accessed object ranks hottest.

use std::collections::BTreeSet;

use super::{Collector, CollectorBuild, CollectorContext, Removal, Touch, ensure_slot};
use crate::list::{Link, Linked, List};
use crate::params::{ConfigError, ParamSpec, Params};
use crate::{Nanos, ObjectId, Slot, Tier};

/// Per-object state.
#[derive(Clone, Copy, Debug, Default)]
pub struct GdsfState {
    /// The slow tier's recency list.
    link: Link,
    /// The priority's bits (priorities are positive, so their bits sort as they do).
    priority: u64,
    /// The access sequence that set the priority (the tie-break).
    set_at: u64,
    size: u64,
    /// Hits since it entered the fast tier; 0 on the slow tier.
    hits: u32,
    stamp: u32,
}

impl GdsfState {
    fn fast(&self) -> bool {
        self.hits != 0
    }
}

impl Linked for GdsfState {
    fn link(&self) -> &Link {
        &self.link
    }
    fn link_mut(&mut self) -> &mut Link {
        &mut self.link
    }
}

/// The GDSF collector.
#[derive(Clone, Debug, Default)]
pub struct Gdsf {
    nodes: Vec<GdsfState>,
    /// Fast-tier objects by (priority, sequence).
    ranked: BTreeSet<(u64, u64, u32)>,
    slow: List,
    /// L: the last victim's priority.
    inflation: f64,
    /// The slot [`Collector::coldest_fast`] named last: leaving the fast tier, it sets L.
    victim: Option<Slot>,
    /// The missed object [`Collector::on_miss`] was told of, with the priority it enters with:
    /// libCacheSim inserts before it evicts, so the newcomer competes with the objects it
    /// would displace, at the L of before those evictions.
    pending: Option<(ObjectId, u64)>,
    /// The highest access sequence seen; an object changing tier is ranked and stamped with it.
    latest: u64,
}

impl CollectorBuild for Gdsf {
    const NAME: &'static str = "gdsf";
    const VERSION: u32 = 1;
    const HELP: &'static str = "GreedyDual-Size-Frequency: priority = L + hits / size, L = the last victim's";
    const PARAMS: &'static [ParamSpec] = &[];
    const LIBCACHESIM: Option<&'static str> = Some("GDSF");
    fn build(_: &mut Params, _: &CollectorContext) -> Result<Self, ConfigError> {
        Ok(Gdsf::default())
    }
}

impl Gdsf {
    /// L, the last victim's priority (tests, diagnostics).
    pub fn inflation(&self) -> f64 {
        self.inflation
    }

    /// libCacheSim's expression, operation for operation, so priorities tie where its do.
    fn priority(&self, hits: u32, size: u64) -> u64 {
        (self.inflation + f64::from(hits) * 1.0e6 / size.max(1) as f64).to_bits()
    }

    fn rank(&mut self, slot: Slot, seq: u64) {
        let (hits, size) = (self.nodes[slot.idx()].hits, self.nodes[slot.idx()].size);
        let priority = self.priority(hits, size);
        self.rank_at(slot, priority, seq);
    }

    fn rank_at(&mut self, slot: Slot, priority: u64, seq: u64) {
        let n = &mut self.nodes[slot.idx()];
        n.priority = priority;
        n.set_at = seq;
        self.ranked.insert((n.priority, seq, slot.0));
    }

    fn unrank(&mut self, slot: Slot) {
        let n = &self.nodes[slot.idx()];
        self.ranked.remove(&(n.priority, n.set_at, slot.0));
    }

    fn leave_fast(&mut self, slot: Slot) {
        if self.victim.take() == Some(slot) {
            self.inflation = f64::from_bits(self.nodes[slot.idx()].priority);
        }
        self.unrank(slot);
        self.nodes[slot.idx()].hits = 0;
    }

    /// A new fast-tier object at `seq`: the priority it was given on its miss, if that is
    /// the miss it comes from.
    fn enter_fast(&mut self, slot: Slot, id: Option<ObjectId>, seq: u64) {
        self.nodes[slot.idx()].hits = 1;
        match self.pending.take() {
            Some((p, priority)) if Some(p) == id => self.rank_at(slot, priority, seq),
            _ => self.rank(slot, seq),
        }
    }
}

impl Collector for Gdsf {
    fn insert(&mut self, slot: Slot, id: ObjectId, tier: Tier, size: u64, t: &Touch) {
        ensure_slot(&mut self.nodes, slot, GdsfState::default());
        self.latest = t.seq;
        self.nodes[slot.idx()] = GdsfState { size, stamp: t.seq as u32, ..GdsfState::default() };
        match tier {
            Tier::Fast => self.enter_fast(slot, Some(id), t.seq),
            Tier::Slow => self.slow.push_front(&mut self.nodes, slot.0),
        }
    }

    fn touch(&mut self, slot: Slot, t: &Touch) {
        self.latest = t.seq;
        let n = &mut self.nodes[slot.idx()];
        n.stamp = t.seq as u32;
        if !n.fast() {
            self.slow.move_to_front(&mut self.nodes, slot.0);
            return;
        }
        n.hits = n.hits.saturating_add(1);
        self.unrank(slot);
        self.rank(slot, t.seq);
    }

    fn set_tier(&mut self, slot: Slot, tier: Tier) {
        match (self.nodes[slot.idx()].fast(), tier) {
            (false, Tier::Fast) => {
                self.slow.unlink(&mut self.nodes, slot.0);
                self.enter_fast(slot, None, self.latest);
            }
            (true, Tier::Slow) => {
                self.leave_fast(slot);
                self.nodes[slot.idx()].stamp = self.latest as u32;
                self.slow.push_front(&mut self.nodes, slot.0);
            }
            _ => {}
        }
    }

    fn remove(&mut self, slot: Slot, _why: Removal) {
        if self.nodes[slot.idx()].fast() {
            self.leave_fast(slot);
        } else {
            self.slow.unlink(&mut self.nodes, slot.0);
        }
    }

    fn resize(&mut self, slot: Slot, size: u64) {
        self.nodes[slot.idx()].size = size;
    }

    fn on_miss(&mut self, id: ObjectId, size: u64) {
        self.pending = Some((id, self.priority(1, size)));
    }

    /// The lowest priority, or `None` when that is the newcomer's own (it entered last, so
    /// among equals it is not the first): it is then evicted as soon as inserted, which for
    /// us is not admitted, and its priority becomes L.
    fn coldest_fast(&mut self, _now: Nanos) -> Option<Slot> {
        let lowest = self.ranked.first().copied();
        if let Some((_, incoming)) = self.pending
            && lowest.is_none_or(|(p, _, _)| incoming < p)
        {
            self.inflation = f64::from_bits(incoming);
            self.pending = None;
            return None;
        }
        let v = lowest.map(|(_, _, s)| Slot(s));
        self.victim = v;
        v
    }

    fn hottest_slow(&self) -> Option<Slot> {
        self.slow.front().map(Slot)
    }

    fn hotter(&self, a: Slot, b: Slot) -> bool {
        let (na, nb) = (&self.nodes[a.idx()], &self.nodes[b.idx()]);
        if na.fast() != nb.fast() {
            return na.fast();
        }
        if na.fast() && na.priority != nb.priority {
            return na.priority > nb.priority;
        }
        (na.stamp.wrapping_sub(nb.stamp) as i32) > 0
    }

    fn len(&self, tier: Tier) -> usize {
        match tier {
            Tier::Fast => self.ranked.len(),
            Tier::Slow => self.slow.len(),
        }
    }

    fn memory_bytes(&self) -> usize {
        // A B-tree entry is 20 bytes of key plus about a third of a node's slack.
        self.nodes.capacity() * std::mem::size_of::<GdsfState>() + self.ranked.len() * 28
    }

    fn heat(&self, slot: Slot) -> u64 {
        u64::from(self.nodes[slot.idx()].hits)
    }
}
