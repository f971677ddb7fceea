//! First in, first out: the fast tier's coldest object is the one that entered it first; hits
//! do not reorder. On the slow tier, where FIFO has no notion of heat, the most recently accessed
//! object ranks hottest.

use super::lru::Lru;
use super::{Collector, CollectorBuild, CollectorContext, Removal, Touch};
use crate::params::{ConfigError, ParamSpec, Params};
use crate::{Nanos, ObjectId, Slot, Tier};

/// FIFO over the fast tier (a [`Lru`] that does not reorder on fast-tier hits).
#[derive(Clone, Debug)]
pub struct Fifo(Lru);

impl CollectorBuild for Fifo {
    const NAME: &'static str = "fifo";
    const LIBCACHESIM: Option<&'static str> = Some("FIFO");
    const VERSION: u32 = 1;
    const HELP: &'static str = "first in, first out (hits do not reorder)";
    const PARAMS: &'static [ParamSpec] = &[];
    fn build(_: &mut Params, _: &CollectorContext) -> Result<Self, ConfigError> {
        Ok(Fifo(Lru::fifo()))
    }
}

impl Fifo {
    /// Slots on `tier` from newest to oldest.
    pub fn order(&self, tier: Tier) -> Vec<Slot> {
        self.0.order(tier)
    }
}

impl Collector for Fifo {
    #[inline]
    fn insert(&mut self, slot: Slot, id: ObjectId, tier: Tier, size: u64, t: &Touch) {
        self.0.insert(slot, id, tier, size, t)
    }
    #[inline]
    fn touch(&mut self, slot: Slot, t: &Touch) {
        self.0.touch(slot, t)
    }
    fn set_tier(&mut self, slot: Slot, tier: Tier) {
        self.0.set_tier(slot, tier)
    }
    #[inline]
    fn remove(&mut self, slot: Slot, why: Removal) {
        self.0.remove(slot, why)
    }
    #[inline]
    fn coldest_fast(&mut self, now: Nanos) -> Option<Slot> {
        self.0.coldest_fast(now)
    }
    fn hottest_slow(&self) -> Option<Slot> {
        self.0.hottest_slow()
    }
    fn hotter(&self, a: Slot, b: Slot) -> bool {
        self.0.hotter(a, b)
    }
    fn len(&self, tier: Tier) -> usize {
        self.0.len(tier)
    }
    fn memory_bytes(&self) -> usize {
        self.0.memory_bytes()
    }
    fn prefetch(&self, slot: Slot) {
        self.0.prefetch(slot)
    }
    fn cold_lists(&self) -> usize {
        self.0.cold_lists()
    }
    fn walk_cold(&self, list: usize, after: Option<Slot>) -> Option<Slot> {
        self.0.walk_cold(list, after)
    }
}
