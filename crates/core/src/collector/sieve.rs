//! SIEVE (Zhang et al., "SIEVE is simpler than LRU", NSDI'24), as libCacheSim's `Sieve.c` runs
//! it (a differential test checks us miss for miss).
//!
//! One FIFO queue and a hand. New objects enter at the head with their visited bit clear; a hit
//! sets the bit and moves nothing. To evict, the hand walks from where it stopped (the tail at
//! first) towards the head, clearing set bits, and the first object without one is the
//! victim; the hand stays at the victim's newer neighbour, and wraps to the tail past the head.
//! Unlike CLOCK, survivors keep their place, so new objects are examined first. The slow tier
//! has no SIEVE order; its most recently accessed object ranks hottest.

use super::segments::{SLOW, Segments};
use super::{Collector, CollectorBuild, CollectorContext, Removal, Touch};
use crate::params::{ConfigError, ParamSpec, Params};
use crate::{Nanos, ObjectId, Slot, Tier};

const QUEUE: u8 = 0;
const VISITED: u8 = 1;

/// The SIEVE collector.
#[derive(Clone, Debug, Default)]
pub struct Sieve {
    q: Segments<1>,
    /// Where the next sweep starts; `None` starts at the tail.
    hand: Option<Slot>,
}

impl CollectorBuild for Sieve {
    const NAME: &'static str = "sieve";
    const VERSION: u32 = 1;
    const HELP: &'static str = "SIEVE: FIFO queue, visited bit, a hand that leaves survivors in place (NSDI'24)";
    const PARAMS: &'static [ParamSpec] = &[];
    const LIBCACHESIM: Option<&'static str> = Some("Sieve");
    fn build(_: &mut Params, _: &CollectorContext) -> Result<Self, ConfigError> {
        Ok(Sieve::default())
    }
}

impl Sieve {
    fn leave_fast(&mut self, slot: Slot) {
        if self.hand == Some(slot) {
            self.hand = self.q.newer(slot);
        }
        self.q.leave(slot);
    }
}

impl Collector for Sieve {
    fn insert(&mut self, slot: Slot, id: ObjectId, tier: Tier, size: u64, t: &Touch) {
        self.q.track(slot, id, tier, size, t);
        if tier == Tier::Fast {
            self.q.push_front(slot, QUEUE);
        }
    }

    #[inline]
    fn touch(&mut self, slot: Slot, t: &Touch) {
        if self.q.stamp(slot, t) != SLOW {
            self.q.node_mut(slot).bits = VISITED;
        }
    }

    fn set_tier(&mut self, slot: Slot, tier: Tier) {
        let on_fast = self.q.node(slot).list != SLOW;
        match (on_fast, tier) {
            (false, Tier::Fast) => {
                self.q.leave(slot);
                self.q.node_mut(slot).bits = 0;
                self.q.push_front(slot, QUEUE);
            }
            (true, Tier::Slow) => {
                self.leave_fast(slot);
                self.q.push_slow(slot);
            }
            _ => {}
        }
    }

    fn remove(&mut self, slot: Slot, _why: Removal) {
        if self.q.node(slot).list != SLOW {
            self.leave_fast(slot);
        } else {
            self.q.leave(slot);
        }
    }

    fn resize(&mut self, slot: Slot, size: u64) {
        self.q.resize(slot, size);
    }

    fn coldest_fast(&mut self, _now: Nanos) -> Option<Slot> {
        let tail = self.q.back(QUEUE)?;
        let mut s = self.hand.unwrap_or(tail);
        // Terminates within one lap and a step: every bit passed is cleared.
        while self.q.node(s).bits & VISITED != 0 {
            self.q.node_mut(s).bits &= !VISITED;
            s = self.q.newer(s).unwrap_or(tail);
        }
        self.hand = Some(s);
        Some(s)
    }

    fn hottest_slow(&self) -> Option<Slot> {
        self.q.hottest_slow()
    }

    fn hotter(&self, a: Slot, b: Slot) -> bool {
        let visited = |s: Slot| self.q.node(s).list != SLOW && self.q.node(s).bits & VISITED != 0;
        if visited(a) != visited(b) {
            return visited(a);
        }
        self.q.more_recent(a, b)
    }

    fn len(&self, tier: Tier) -> usize {
        self.q.len(tier)
    }

    fn memory_bytes(&self) -> usize {
        self.q.memory_bytes()
    }

    fn cold_lists(&self) -> usize {
        1
    }

    fn walk_cold(&self, _list: usize, after: Option<Slot>) -> Option<Slot> {
        match after {
            None => self.q.back(QUEUE),
            Some(s) => self.q.newer(s),
        }
    }
}
