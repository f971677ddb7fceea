//! Least frequently used, ties broken by recency (HyCache). Constant-time LFU after Shah, Mitra
//! and Matani: per tier, an ordered list of frequency buckets, each holding its objects in recency
//! order. Coldest on the fast tier = least recent object of the lowest bucket; hottest on the
//! slow tier = most recent object of the highest bucket. A touch moves an object one bucket up in
//! O(1). A tier move keeps the object's frequency; finding its bucket on the other tier walks the
//! bucket list from the nearer end (tier moves are rare next to touches).

use super::{Collector, CollectorBuild, CollectorContext, Removal, Touch, ensure_slot};
use crate::list::{Link, Linked, List, NIL};
use crate::params::{ConfigError, ParamSpec, Params};
use crate::{Nanos, ObjectId, Slot, Tier};

/// Per-object state.
#[derive(Clone, Copy, Debug)]
pub struct LfuState {
    link: Link,
    bucket: u32,
    /// Low 32 bits of the last access sequence; compared with wrapping arithmetic, so recency
    /// tie-breaks between tiers are exact while the two accesses are within 2^31 of each other.
    stamp: u32,
}

impl Default for LfuState {
    fn default() -> Self {
        LfuState { link: Link::default(), bucket: NIL, stamp: 0 }
    }
}

impl Linked for LfuState {
    fn link(&self) -> &Link {
        &self.link
    }
    fn link_mut(&mut self) -> &mut Link {
        &mut self.link
    }
}

#[derive(Clone, Copy, Debug)]
struct Bucket {
    freq: u64,
    tier: Tier,
    members: List,
    /// Neighbouring buckets of the same tier, `lower` has a smaller frequency.
    lower: u32,
    higher: u32,
}

/// The LFU collector.
#[derive(Clone, Debug, Default)]
pub struct Lfu {
    nodes: Vec<LfuState>,
    buckets: Vec<Bucket>,
    free_buckets: Vec<u32>,
    /// Per tier: lowest and highest bucket.
    lowest: [u32; 2],
    highest: [u32; 2],
    counts: [usize; 2],
    /// Low bits of the highest access sequence seen; an object changing tier is stamped with it.
    latest: u32,
}

impl CollectorBuild for Lfu {
    const NAME: &'static str = "lfu";
    const LIBCACHESIM: Option<&'static str> = Some("LFU");
    const VERSION: u32 = 1;
    const HELP: &'static str = "least frequently used, ties broken by least recently used";
    const PARAMS: &'static [ParamSpec] = &[];
    fn build(_: &mut Params, _: &CollectorContext) -> Result<Self, ConfigError> {
        Ok(Lfu::new())
    }
}

impl Lfu {
    /// An empty LFU.
    pub fn new() -> Lfu {
        Lfu { lowest: [NIL; 2], highest: [NIL; 2], ..Default::default() }
    }

    /// The access count of a tracked slot.
    pub fn frequency(&self, slot: Slot) -> u64 {
        self.buckets[self.nodes[slot.idx()].bucket as usize].freq
    }

    fn new_bucket(&mut self, freq: u64, tier: Tier) -> u32 {
        let b = Bucket { freq, tier, members: List::default(), lower: NIL, higher: NIL };
        match self.free_buckets.pop() {
            Some(i) => {
                self.buckets[i as usize] = b;
                i
            }
            None => {
                self.buckets.push(b);
                (self.buckets.len() - 1) as u32
            }
        }
    }

    /// Links bucket `b` of `tier` right above `below` (NIL = at the bottom).
    fn link_bucket_above(&mut self, tier: Tier, b: u32, below: u32) {
        let t = tier.index();
        let above = if below == NIL { self.lowest[t] } else { self.buckets[below as usize].higher };
        self.buckets[b as usize].lower = below;
        self.buckets[b as usize].higher = above;
        if below == NIL {
            self.lowest[t] = b;
        } else {
            self.buckets[below as usize].higher = b;
        }
        if above == NIL {
            self.highest[t] = b;
        } else {
            self.buckets[above as usize].lower = b;
        }
    }

    fn unlink_bucket_if_empty(&mut self, b: u32) {
        let bucket = self.buckets[b as usize];
        if !bucket.members.is_empty() {
            return;
        }
        let t = bucket.tier.index();
        if bucket.lower == NIL {
            self.lowest[t] = bucket.higher;
        } else {
            self.buckets[bucket.lower as usize].higher = bucket.higher;
        }
        if bucket.higher == NIL {
            self.highest[t] = bucket.lower;
        } else {
            self.buckets[bucket.higher as usize].lower = bucket.lower;
        }
        self.free_buckets.push(b);
    }

    /// Finds or creates the bucket of `freq` on `tier`, walking from the nearer end.
    fn bucket_for(&mut self, tier: Tier, freq: u64) -> u32 {
        let t = tier.index();
        let (lo, hi) = (self.lowest[t], self.highest[t]);
        if lo == NIL {
            let b = self.new_bucket(freq, tier);
            self.link_bucket_above(tier, b, NIL);
            return b;
        }
        let mid = self.buckets[lo as usize].freq / 2 + self.buckets[hi as usize].freq / 2;
        // `below` = the highest bucket with a frequency < freq.
        let below = if freq <= mid {
            let mut cur = lo;
            let mut below = NIL;
            while cur != NIL && self.buckets[cur as usize].freq < freq {
                below = cur;
                cur = self.buckets[cur as usize].higher;
            }
            if cur != NIL && self.buckets[cur as usize].freq == freq {
                return cur;
            }
            below
        } else {
            let mut cur = hi;
            while cur != NIL && self.buckets[cur as usize].freq > freq {
                cur = self.buckets[cur as usize].lower;
            }
            if cur != NIL && self.buckets[cur as usize].freq == freq {
                return cur;
            }
            cur
        };
        let b = self.new_bucket(freq, tier);
        self.link_bucket_above(tier, b, below);
        b
    }

    fn join(&mut self, slot: Slot, b: u32) {
        self.nodes[slot.idx()].bucket = b;
        let mut members = self.buckets[b as usize].members;
        members.push_front(&mut self.nodes, slot.0);
        self.buckets[b as usize].members = members;
    }

    fn leave(&mut self, slot: Slot) -> u32 {
        let b = self.nodes[slot.idx()].bucket;
        let mut members = self.buckets[b as usize].members;
        members.unlink(&mut self.nodes, slot.0);
        self.buckets[b as usize].members = members;
        b
    }
}

impl Collector for Lfu {
    fn insert(&mut self, slot: Slot, _id: ObjectId, tier: Tier, _size: u64, t: &Touch) {
        ensure_slot(&mut self.nodes, slot, LfuState::default());
        self.latest = t.seq as u32;
        self.nodes[slot.idx()].stamp = t.seq as u32;
        let lo = self.lowest[tier.index()];
        let b = if lo != NIL && self.buckets[lo as usize].freq == 1 {
            lo
        } else {
            let b = self.new_bucket(1, tier);
            self.link_bucket_above(tier, b, NIL);
            b
        };
        self.join(slot, b);
        self.counts[tier.index()] += 1;
    }

    fn touch(&mut self, slot: Slot, t: &Touch) {
        self.latest = t.seq as u32;
        self.nodes[slot.idx()].stamp = t.seq as u32;
        let old = self.leave(slot);
        let Bucket { freq, tier, higher, .. } = self.buckets[old as usize];
        let freq = freq.saturating_add(1);
        let target = if higher != NIL && self.buckets[higher as usize].freq == freq {
            higher
        } else {
            let b = self.new_bucket(freq, tier);
            self.link_bucket_above(tier, b, old);
            b
        };
        self.join(slot, target);
        self.unlink_bucket_if_empty(old);
    }

    fn set_tier(&mut self, slot: Slot, tier: Tier) {
        let old = self.nodes[slot.idx()].bucket;
        let Bucket { freq, tier: old_tier, .. } = self.buckets[old as usize];
        if old_tier == tier {
            return;
        }
        self.leave(slot);
        self.unlink_bucket_if_empty(old);
        let b = self.bucket_for(tier, freq);
        self.join(slot, b);
        self.nodes[slot.idx()].stamp = self.latest;
        self.counts[old_tier.index()] -= 1;
        self.counts[tier.index()] += 1;
    }

    fn heat(&self, slot: Slot) -> u64 {
        self.frequency(slot)
    }

    fn restore_heat(&mut self, slot: Slot, heat: u64, t: &Touch) {
        self.latest = t.seq as u32;
        self.nodes[slot.idx()].stamp = t.seq as u32;
        let old = self.leave(slot);
        let tier = self.buckets[old as usize].tier;
        self.unlink_bucket_if_empty(old);
        let b = self.bucket_for(tier, heat.max(1));
        self.join(slot, b);
    }

    fn remove(&mut self, slot: Slot, _why: Removal) {
        let b = self.leave(slot);
        let tier = self.buckets[b as usize].tier;
        self.unlink_bucket_if_empty(b);
        self.nodes[slot.idx()].bucket = NIL;
        self.counts[tier.index()] -= 1;
    }

    fn coldest_fast(&mut self, _now: Nanos) -> Option<Slot> {
        let lo = self.lowest[Tier::Fast.index()];
        if lo == NIL { None } else { self.buckets[lo as usize].members.back().map(Slot) }
    }

    fn hottest_slow(&self) -> Option<Slot> {
        let hi = self.highest[Tier::Slow.index()];
        if hi == NIL { None } else { self.buckets[hi as usize].members.front().map(Slot) }
    }

    fn hotter(&self, a: Slot, b: Slot) -> bool {
        let (fa, fb) = (self.frequency(a), self.frequency(b));
        if fa != fb {
            return fa > fb;
        }
        let (sa, sb) = (self.nodes[a.idx()].stamp, self.nodes[b.idx()].stamp);
        (sa.wrapping_sub(sb) as i32) > 0
    }

    fn len(&self, tier: Tier) -> usize {
        self.counts[tier.index()]
    }

    fn memory_bytes(&self) -> usize {
        self.nodes.capacity() * std::mem::size_of::<LfuState>()
            + self.buckets.capacity() * std::mem::size_of::<Bucket>()
            + self.free_buckets.capacity() * 4
    }
}
