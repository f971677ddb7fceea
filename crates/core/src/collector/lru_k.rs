//! LRU-K (O'Neil, O'Neil and Weikum, SIGMOD'93) as libCacheSim's `LRU_K.cpp` runs it (a
//! differential test checks us miss for miss): evict the object whose K-th most recent access
//! is oldest.
//!
//! An object seen fewer than K times since it entered has an infinite backward K-distance: such
//! objects wait in a FIFO and go first, oldest first. At its K-th access an object moves to a
//! ranking by its K-th most recent access. The history is the object's own while it is on the
//! fast tier (libCacheSim keeps none for evicted objects). The slow tier has no LRU-K order;
//! its most recently accessed object ranks hottest.

use std::collections::BTreeSet;

use super::{Collector, CollectorBuild, CollectorContext, Removal, Touch, ensure_slot};
use crate::list::{Link, Linked, List};
use crate::params::{ConfigError, ParamSpec, Params};
use crate::{Nanos, ObjectId, Slot, Tier};

/// The largest K offered (each object keeps K access times).
const MAX_K: usize = 8;

/// Where an object is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Place {
    /// Fewer than K accesses: the FIFO.
    #[default]
    Young,
    /// Ranked by its K-th most recent access.
    Ranked,
    Slow,
}

/// Per-object state.
#[derive(Clone, Copy, Debug, Default)]
pub struct LruKState {
    /// The FIFO or the slow tier's recency list.
    link: Link,
    id: ObjectId,
    /// Accesses recorded in the history while on the fast tier (at most K).
    seen: u8,
    place: Place,
    stamp: u32,
}

impl Linked for LruKState {
    fn link(&self) -> &Link {
        &self.link
    }
    fn link_mut(&mut self) -> &mut Link {
        &mut self.link
    }
}

/// The LRU-K collector.
#[derive(Clone, Debug)]
pub struct LruK {
    nodes: Vec<LruKState>,
    /// K access sequences per slot, oldest first: `history[slot * K ..][.. seen]`.
    history: Vec<u64>,
    k: u8,
    young: List,
    ranked: BTreeSet<(u64, ObjectId, u32)>,
    slow: List,
    latest: u64,
}

impl CollectorBuild for LruK {
    const NAME: &'static str = "lru-k";
    const VERSION: u32 = 1;
    const HELP: &'static str =
        "LRU-K: evict the oldest K-th most recent access; fewer than K accesses go first (SIGMOD'93)";
    const PARAMS: &'static [ParamSpec] =
        &[ParamSpec { name: "k", default: "2", help: "accesses that rank an object (1..=8)" }];
    const ALIASES: &'static [&'static str] = &["lruk"];
    const LIBCACHESIM: Option<&'static str> = Some("LRUK");
    fn build(params: &mut Params, _: &CollectorContext) -> Result<Self, ConfigError> {
        let k = params.u64("k", 1, MAX_K as u64)?;
        Ok(LruK::new(k as u8))
    }
}

impl LruK {
    /// LRU-K for `k` in 1..=8.
    pub fn new(k: u8) -> LruK {
        LruK {
            nodes: Vec::new(),
            history: Vec::new(),
            k: k.clamp(1, MAX_K as u8),
            young: List::default(),
            ranked: BTreeSet::new(),
            slow: List::default(),
            latest: 0,
        }
    }

    /// The oldest of the object's last K accesses (its only one while it has fewer).
    fn kth(&self, slot: Slot) -> u64 {
        self.history[slot.idx() * usize::from(self.k)]
    }

    fn key(&self, slot: Slot) -> (u64, ObjectId, u32) {
        (self.kth(slot), self.nodes[slot.idx()].id, slot.0)
    }

    /// Enters the fast tier with one access at `seq`.
    fn enter_fast(&mut self, slot: Slot, seq: u64) {
        let k = usize::from(self.k);
        let end = (slot.idx() + 1) * k;
        if self.history.len() < end {
            // 25 % geometric growth, as the per-slot vectors grow (memory per object matters).
            let len = end.max(self.history.len() + self.history.len() / 4);
            self.history.reserve_exact(len - self.history.len());
            self.history.resize(len, 0);
        }
        self.history[slot.idx() * k] = seq;
        let n = &mut self.nodes[slot.idx()];
        n.seen = 1;
        if self.k == 1 {
            n.place = Place::Ranked;
            let key = self.key(slot);
            self.ranked.insert(key);
        } else {
            n.place = Place::Young;
            self.young.push_front(&mut self.nodes, slot.0);
        }
    }

    fn leave_fast(&mut self, slot: Slot) {
        match self.nodes[slot.idx()].place {
            Place::Young => self.young.unlink(&mut self.nodes, slot.0),
            Place::Ranked => {
                let key = self.key(slot);
                self.ranked.remove(&key);
            }
            Place::Slow => {}
        }
        self.nodes[slot.idx()].place = Place::Slow;
    }

    /// Records an access at `seq` in a fast-tier object's last K.
    fn record(&mut self, slot: Slot, seq: u64) {
        let k = usize::from(self.k);
        let h = &mut self.history[slot.idx() * k..(slot.idx() + 1) * k];
        let n = &mut self.nodes[slot.idx()];
        let seen = usize::from(n.seen);
        if seen < k {
            h[seen] = seq;
            n.seen += 1;
        } else {
            h.copy_within(1.., 0);
            h[k - 1] = seq;
        }
    }
}

impl Collector for LruK {
    fn insert(&mut self, slot: Slot, id: ObjectId, tier: Tier, _size: u64, t: &Touch) {
        ensure_slot(&mut self.nodes, slot, LruKState::default());
        self.latest = t.seq;
        self.nodes[slot.idx()] = LruKState { id, stamp: t.seq as u32, ..LruKState::default() };
        match tier {
            Tier::Fast => self.enter_fast(slot, t.seq),
            Tier::Slow => {
                self.nodes[slot.idx()].place = Place::Slow;
                self.slow.push_front(&mut self.nodes, slot.0);
            }
        }
    }

    fn touch(&mut self, slot: Slot, t: &Touch) {
        self.latest = t.seq;
        self.nodes[slot.idx()].stamp = t.seq as u32;
        match self.nodes[slot.idx()].place {
            Place::Slow => self.slow.move_to_front(&mut self.nodes, slot.0),
            Place::Young => {
                self.record(slot, t.seq);
                if self.nodes[slot.idx()].seen >= self.k {
                    self.young.unlink(&mut self.nodes, slot.0);
                    self.nodes[slot.idx()].place = Place::Ranked;
                    let key = self.key(slot);
                    self.ranked.insert(key);
                }
            }
            Place::Ranked => {
                let old = self.key(slot);
                self.ranked.remove(&old);
                self.record(slot, t.seq);
                let key = self.key(slot);
                self.ranked.insert(key);
            }
        }
    }

    fn set_tier(&mut self, slot: Slot, tier: Tier) {
        let on_fast = self.nodes[slot.idx()].place != Place::Slow;
        match (on_fast, tier) {
            (false, Tier::Fast) => {
                self.slow.unlink(&mut self.nodes, slot.0);
                self.enter_fast(slot, self.latest);
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
        if self.nodes[slot.idx()].place == Place::Slow {
            self.slow.unlink(&mut self.nodes, slot.0);
        } else {
            self.leave_fast(slot);
        }
    }

    fn coldest_fast(&mut self, _now: Nanos) -> Option<Slot> {
        self.young.back().map(Slot).or_else(|| self.ranked.first().map(|&(_, _, s)| Slot(s)))
    }

    fn hottest_slow(&self) -> Option<Slot> {
        self.slow.front().map(Slot)
    }

    fn hotter(&self, a: Slot, b: Slot) -> bool {
        let (na, nb) = (&self.nodes[a.idx()], &self.nodes[b.idx()]);
        let rank = |n: &LruKState| match n.place {
            Place::Ranked => 2,
            Place::Young => 1,
            Place::Slow => 0,
        };
        if rank(na) != rank(nb) {
            return rank(na) > rank(nb);
        }
        if na.place == Place::Ranked && self.kth(a) != self.kth(b) {
            return self.kth(a) > self.kth(b);
        }
        (na.stamp.wrapping_sub(nb.stamp) as i32) > 0
    }

    fn len(&self, tier: Tier) -> usize {
        match tier {
            Tier::Fast => self.young.len() + self.ranked.len(),
            Tier::Slow => self.slow.len(),
        }
    }

    fn memory_bytes(&self) -> usize {
        // A B-tree entry is 24 bytes of key plus about a third of a node's slack.
        self.nodes.capacity() * std::mem::size_of::<LruKState>() + self.history.capacity() * 8 + self.ranked.len() * 36
    }
}
