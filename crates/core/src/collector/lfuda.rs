//! LFU with dynamic aging (Arlitt et al., 2000) as libCacheSim's `LFUDA.c` runs it (a
//! differential test checks us miss for miss).
//!
//! Each object has a priority; objects of equal priority are kept in arrival order and the
//! oldest of the lowest priority is the victim. The age L is the victim's priority at the last
//! eviction (0 before the first). A new object gets L + 1; a hit adds L (so before the first
//! eviction a hit only refreshes the object's place among its equals). When the lowest
//! priority's objects are all gone, L moves up to the next priority in use. The slow tier has no
//! LFUDA order; its most recently accessed object ranks hottest.

use std::collections::BTreeMap;

use super::{Collector, CollectorBuild, CollectorContext, Removal, Touch, ensure_slot};
use crate::list::{Link, Linked, List};
use crate::params::{ConfigError, ParamSpec, Params};
use crate::{Nanos, ObjectId, Slot, Tier};

/// The priority of slow-tier objects' list (never a fast-tier priority: those start at 1).
const SLOW: u64 = 0;

/// Per-object state (24 bytes).
#[derive(Clone, Copy, Debug, Default)]
pub struct LfudaState {
    link: Link,
    priority: u64,
    stamp: u32,
}

impl Linked for LfudaState {
    fn link(&self) -> &Link {
        &self.link
    }
    fn link_mut(&mut self) -> &mut Link {
        &mut self.link
    }
}

/// The LFUDA collector.
#[derive(Clone, Debug, Default)]
pub struct Lfuda {
    nodes: Vec<LfudaState>,
    /// Fast-tier objects by priority, each list newest first.
    buckets: BTreeMap<u64, List>,
    slow: List,
    /// The age L.
    age: u64,
    /// The highest priority given so far (libCacheSim looks for the next age no higher).
    max_priority: u64,
    /// The slot [`Collector::coldest_fast`] named last: leaving the fast tier, it sets the age.
    victim: Option<Slot>,
    fast_len: usize,
    latest: u32,
}

impl CollectorBuild for Lfuda {
    const NAME: &'static str = "lfuda";
    const VERSION: u32 = 1;
    const HELP: &'static str = "LFU with dynamic aging: priority = hits aged by the last victim's priority";
    const PARAMS: &'static [ParamSpec] = &[];
    const LIBCACHESIM: Option<&'static str> = Some("LFUDA");
    fn build(_: &mut Params, _: &CollectorContext) -> Result<Self, ConfigError> {
        Ok(Lfuda::default())
    }
}

impl Lfuda {
    /// The current age L (tests, diagnostics).
    pub fn age(&self) -> u64 {
        self.age
    }

    fn enter_bucket(&mut self, slot: Slot, priority: u64) {
        self.max_priority = self.max_priority.max(priority);
        self.nodes[slot.idx()].priority = priority;
        let list = self.buckets.entry(priority).or_default();
        list.push_front(&mut self.nodes, slot.0);
    }

    /// Takes a fast-tier slot out of its bucket; returns whether that emptied the bucket.
    fn leave_bucket(&mut self, slot: Slot) -> bool {
        let p = self.nodes[slot.idx()].priority;
        let Some(list) = self.buckets.get_mut(&p) else { return false };
        list.unlink(&mut self.nodes, slot.0);
        let emptied = list.is_empty();
        if emptied {
            self.buckets.remove(&p);
        }
        emptied
    }

    /// The lowest priority in use above the age and no higher than any given: the next age.
    fn next_age(&mut self) {
        if self.age >= self.max_priority {
            return;
        }
        if let Some((&p, _)) = self.buckets.range(self.age + 1..=self.max_priority).next() {
            self.age = p;
        }
    }

    fn leave_fast(&mut self, slot: Slot) {
        let p = self.nodes[slot.idx()].priority;
        let evicted = self.victim.take() == Some(slot);
        if evicted {
            self.age = p;
        }
        let emptied = self.leave_bucket(slot);
        if emptied && (evicted || p == self.age) {
            self.next_age();
        }
        self.fast_len -= 1;
    }
}

impl Collector for Lfuda {
    fn insert(&mut self, slot: Slot, _id: ObjectId, tier: Tier, _size: u64, t: &Touch) {
        ensure_slot(&mut self.nodes, slot, LfudaState::default());
        self.latest = t.seq as u32;
        self.nodes[slot.idx()] = LfudaState { stamp: t.seq as u32, ..LfudaState::default() };
        match tier {
            Tier::Fast => {
                self.fast_len += 1;
                self.enter_bucket(slot, self.age + 1);
            }
            Tier::Slow => self.slow.push_front(&mut self.nodes, slot.0),
        }
    }

    fn touch(&mut self, slot: Slot, t: &Touch) {
        self.latest = t.seq as u32;
        let n = &mut self.nodes[slot.idx()];
        n.stamp = t.seq as u32;
        let p = n.priority;
        if p == SLOW {
            self.slow.move_to_front(&mut self.nodes, slot.0);
            return;
        }
        // The new priority adds the age before the age moves on.
        let raised = p + self.age;
        let emptied = self.leave_bucket(slot);
        if emptied && p == self.age {
            self.next_age();
        }
        self.enter_bucket(slot, raised);
    }

    fn set_tier(&mut self, slot: Slot, tier: Tier) {
        let on_fast = self.nodes[slot.idx()].priority != SLOW;
        match (on_fast, tier) {
            (false, Tier::Fast) => {
                self.slow.unlink(&mut self.nodes, slot.0);
                self.fast_len += 1;
                self.enter_bucket(slot, self.age + 1);
            }
            (true, Tier::Slow) => {
                self.leave_fast(slot);
                let n = &mut self.nodes[slot.idx()];
                n.priority = SLOW;
                n.stamp = self.latest;
                self.slow.push_front(&mut self.nodes, slot.0);
            }
            _ => {}
        }
    }

    fn remove(&mut self, slot: Slot, _why: Removal) {
        if self.nodes[slot.idx()].priority == SLOW {
            self.slow.unlink(&mut self.nodes, slot.0);
        } else {
            self.leave_fast(slot);
        }
    }

    fn coldest_fast(&mut self, _now: Nanos) -> Option<Slot> {
        let v = self.buckets.first_key_value().and_then(|(_, l)| l.back()).map(Slot);
        self.victim = v;
        v
    }

    fn hottest_slow(&self) -> Option<Slot> {
        self.slow.front().map(Slot)
    }

    fn hotter(&self, a: Slot, b: Slot) -> bool {
        let (na, nb) = (&self.nodes[a.idx()], &self.nodes[b.idx()]);
        if na.priority != nb.priority {
            return na.priority > nb.priority;
        }
        (na.stamp.wrapping_sub(nb.stamp) as i32) > 0
    }

    fn len(&self, tier: Tier) -> usize {
        match tier {
            Tier::Fast => self.fast_len,
            Tier::Slow => self.slow.len(),
        }
    }

    fn memory_bytes(&self) -> usize {
        // A B-tree entry per priority in use: key, list and about a third of a node's slack.
        self.nodes.capacity() * std::mem::size_of::<LfudaState>() + self.buckets.len() * 48
    }

    fn heat(&self, slot: Slot) -> u64 {
        self.nodes[slot.idx()].priority
    }
}
