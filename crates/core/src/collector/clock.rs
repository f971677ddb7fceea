//! CLOCK (second chance). The fast tier is a ring swept by a hand: an object with its reference
//! bit set gets a second chance (bit cleared, hand moves on); the first one without is the
//! victim. CLOCK has no order on the slow tier, so there the most recently accessed object ranks
//! hottest.

use super::{Collector, CollectorBuild, CollectorContext, Removal, Touch, ensure_slot};
use crate::list::{Link, Linked, List, NIL};
use crate::params::{ConfigError, ParamSpec, Params};
use crate::{Nanos, ObjectId, Slot, Tier};

const REFERENCED: u8 = 1;
const SLOW: u8 = 2;

/// Per-object state.
#[derive(Clone, Copy, Debug, Default)]
pub struct ClockState {
    link: Link,
    stamp: u32,
    flags: u8,
}

impl Linked for ClockState {
    fn link(&self) -> &Link {
        &self.link
    }
    fn link_mut(&mut self) -> &mut Link {
        &mut self.link
    }
}

impl ClockState {
    fn tier(&self) -> Tier {
        if self.flags & SLOW != 0 { Tier::Slow } else { Tier::Fast }
    }
}

/// A ring with a hand on the fast tier and a recency list on the slow tier. Shared by
/// [`super::wsclock::WsClock`].
#[derive(Clone, Debug)]
pub struct Clock {
    pub(crate) nodes: Vec<ClockState>,
    pub(crate) ring: List,
    pub(crate) slow: List,
    pub(crate) hand: u32,
    /// Low bits of the highest access sequence seen; an object changing tier is stamped with it.
    latest: u32,
}

impl Default for Clock {
    fn default() -> Self {
        Clock { nodes: Vec::new(), ring: List::default(), slow: List::default(), hand: NIL, latest: 0 }
    }
}

impl CollectorBuild for Clock {
    const NAME: &'static str = "clock";
    const LIBCACHESIM: Option<&'static str> = Some("Clock");
    const VERSION: u32 = 1;
    const HELP: &'static str = "CLOCK / second chance (reference bit, sweeping hand)";
    const PARAMS: &'static [ParamSpec] = &[];
    fn build(_: &mut Params, _: &CollectorContext) -> Result<Self, ConfigError> {
        Ok(Clock::default())
    }
}

impl Clock {
    /// Whether the slot's reference bit is set.
    pub fn referenced(&self, slot: Slot) -> bool {
        self.nodes[slot.idx()].flags & REFERENCED != 0
    }

    pub(crate) fn clear_ref(&mut self, s: u32) {
        self.nodes[s as usize].flags &= !REFERENCED;
    }

    pub(crate) fn advance_hand(&mut self) {
        if self.hand != NIL {
            self.hand = self.ring.next_wrapping(&self.nodes, self.hand);
        }
    }

    /// Ring members in hand order, starting at the hand (tests).
    pub fn ring_from_hand(&self) -> Vec<Slot> {
        let mut out = Vec::with_capacity(self.ring.len());
        let mut cur = self.hand;
        for _ in 0..self.ring.len() {
            out.push(Slot(cur));
            cur = self.ring.next_wrapping(&self.nodes, cur);
        }
        out
    }

    fn ring_insert(&mut self, s: u32) {
        // Behind the hand: examined last.
        if self.hand == NIL {
            self.ring.push_back(&mut self.nodes, s);
            self.hand = s;
        } else {
            self.ring.insert_before(&mut self.nodes, self.hand, s);
        }
    }

    fn ring_remove(&mut self, s: u32) {
        if self.hand == s {
            self.hand = if self.ring.len() == 1 { NIL } else { self.ring.next_wrapping(&self.nodes, s) };
        }
        self.ring.unlink(&mut self.nodes, s);
    }
}

impl Collector for Clock {
    fn insert(&mut self, slot: Slot, _id: ObjectId, tier: Tier, _size: u64, t: &Touch) {
        ensure_slot(&mut self.nodes, slot, ClockState::default());
        self.latest = t.seq as u32;
        let n = &mut self.nodes[slot.idx()];
        n.stamp = t.seq as u32;
        match tier {
            Tier::Fast => {
                n.flags = 0;
                self.ring_insert(slot.0);
            }
            Tier::Slow => {
                n.flags = SLOW;
                self.slow.push_front(&mut self.nodes, slot.0);
            }
        }
    }

    fn touch(&mut self, slot: Slot, t: &Touch) {
        self.latest = t.seq as u32;
        let n = &mut self.nodes[slot.idx()];
        n.stamp = t.seq as u32;
        if n.tier() == Tier::Fast {
            n.flags |= REFERENCED;
        } else {
            self.slow.move_to_front(&mut self.nodes, slot.0);
        }
    }

    fn set_tier(&mut self, slot: Slot, tier: Tier) {
        let cur = self.nodes[slot.idx()].tier();
        if cur == tier {
            return;
        }
        self.nodes[slot.idx()].stamp = self.latest;
        match tier {
            Tier::Fast => {
                self.slow.unlink(&mut self.nodes, slot.0);
                self.nodes[slot.idx()].flags = 0;
                self.ring_insert(slot.0);
            }
            Tier::Slow => {
                self.ring_remove(slot.0);
                self.nodes[slot.idx()].flags = SLOW;
                self.slow.push_front(&mut self.nodes, slot.0);
            }
        }
    }

    fn remove(&mut self, slot: Slot, _why: Removal) {
        match self.nodes[slot.idx()].tier() {
            Tier::Fast => self.ring_remove(slot.0),
            Tier::Slow => self.slow.unlink(&mut self.nodes, slot.0),
        }
    }

    fn coldest_fast(&mut self, _now: Nanos) -> Option<Slot> {
        if self.hand == NIL {
            return None;
        }
        // Terminates within one lap: every bit passed is cleared.
        loop {
            let h = self.hand;
            if self.nodes[h as usize].flags & REFERENCED != 0 {
                self.clear_ref(h);
                self.advance_hand();
            } else {
                return Some(Slot(h));
            }
        }
    }

    fn hottest_slow(&self) -> Option<Slot> {
        self.slow.front().map(Slot)
    }

    fn hotter(&self, a: Slot, b: Slot) -> bool {
        let (sa, sb) = (self.nodes[a.idx()].stamp, self.nodes[b.idx()].stamp);
        (sa.wrapping_sub(sb) as i32) > 0
    }

    fn len(&self, tier: Tier) -> usize {
        match tier {
            Tier::Fast => self.ring.len(),
            Tier::Slow => self.slow.len(),
        }
    }

    fn memory_bytes(&self) -> usize {
        self.nodes.capacity() * std::mem::size_of::<ClockState>()
    }
}
