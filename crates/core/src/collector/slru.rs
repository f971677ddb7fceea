//! Segmented LRU (Karedla et al., 1994) as libCacheSim's `SLRU.c` runs it (a differential test
//! checks us miss for miss): `n-seg` LRU segments of equal byte shares, segment 0 the lowest.
//!
//! A new object enters the lowest segment with room for it (so a cold cache fills the upper
//! segments too), or segment 0 when none has. A hit in the top segment moves the object to its
//! head; a hit lower down promotes it to the head of the next segment up, and a segment that is
//! then over its share cools its least recent objects into the head of the segment below, down
//! to segment 0, whose overflow is evicted ([`Collector::overflow_victim`]). The victim is the
//! least recent object of the lowest non-empty segment. Nothing larger than one segment is
//! admitted. The slow tier has no SLRU order; its most recently accessed object ranks hottest.

use super::segments::{SLOW, Segments};
use super::{Collector, CollectorBuild, CollectorContext, Removal, Touch};
use crate::params::{ConfigError, ParamSpec, Params};
use crate::{Nanos, ObjectId, Slot, Tier};

/// The most segments (libCacheSim's limit).
const MAX_SEGMENTS: usize = 16;

/// The SLRU collector.
#[derive(Clone, Debug)]
pub struct Slru {
    segs: Segments<MAX_SEGMENTS>,
    n: u8,
    /// Each segment's share in bytes (the fast tier's capacity / n, truncated).
    share: u64,
    /// Segment 0 was cooled into while over its share: its overflow is evicted. (New objects
    /// may fill it past its share when the others are full; that alone evicts nothing.)
    trim_lowest: bool,
}

impl CollectorBuild for Slru {
    const NAME: &'static str = "slru";
    const VERSION: u32 = 1;
    const HELP: &'static str = "segmented LRU: hits promote one segment up, overflow cools down (libCacheSim's rules)";
    const PARAMS: &'static [ParamSpec] =
        &[ParamSpec { name: "segments", default: "4", help: "LRU segments of equal share (1..=16)" }];
    const LIBCACHESIM: Option<&'static str> = Some("SLRU");
    fn build(params: &mut Params, cx: &CollectorContext) -> Result<Self, ConfigError> {
        let n = params.u64("segments", 1, MAX_SEGMENTS as u64)?;
        Ok(Slru::new(cx.fast_capacity, n as u8))
    }
}

impl Slru {
    /// SLRU with `n` segments over a fast tier of `capacity` bytes.
    pub fn new(capacity: u64, n: u8) -> Slru {
        Slru { segs: Segments::default(), n, share: capacity / u64::from(n), trim_lowest: false }
    }

    /// Bytes in each segment, lowest first (tests, diagnostics).
    pub fn segment_bytes(&self) -> Vec<u64> {
        (0..self.n).map(|i| self.segs.bytes(i)).collect()
    }

    fn enter_fast(&mut self, slot: Slot) {
        let size = self.segs.node(slot).size;
        let seg = (0..self.n).find(|&i| self.segs.bytes(i) + size <= self.share).unwrap_or(0);
        self.segs.push_front(slot, seg);
    }

    /// Moves segment `seg`'s least recent object (`seg` ≥ 1) to the head of the segment
    /// below, then cools that one while it is over its share (libCacheSim's recursion).
    /// Segment 0's overflow is left for [`Collector::overflow_victim`].
    fn cool(&mut self, seg: u8) {
        let Some(v) = self.segs.back(seg) else { return };
        self.segs.move_front(v, seg - 1);
        if seg == 1 && self.segs.bytes(0) > self.share {
            self.trim_lowest = true;
        }
        if seg > 1 {
            while self.segs.bytes(seg - 1) > self.share {
                self.cool(seg - 1);
            }
        }
    }
}

impl Collector for Slru {
    fn insert(&mut self, slot: Slot, id: ObjectId, tier: Tier, size: u64, t: &Touch) {
        self.segs.track(slot, id, tier, size, t);
        if tier == Tier::Fast {
            self.enter_fast(slot);
        }
    }

    fn touch(&mut self, slot: Slot, t: &Touch) {
        let seg = self.segs.stamp(slot, t);
        if seg == SLOW {
            return;
        }
        if seg + 1 >= self.n {
            self.segs.move_front(slot, seg);
        } else {
            self.segs.move_front(slot, seg + 1);
            while self.segs.bytes(seg + 1) > self.share {
                self.cool(seg + 1);
            }
        }
    }

    fn set_tier(&mut self, slot: Slot, tier: Tier) {
        let on_fast = self.segs.node(slot).list != SLOW;
        match (on_fast, tier) {
            (false, Tier::Fast) => {
                self.segs.leave(slot);
                self.enter_fast(slot);
            }
            (true, Tier::Slow) => {
                self.segs.leave(slot);
                self.segs.push_slow(slot);
            }
            _ => {}
        }
    }

    fn remove(&mut self, slot: Slot, _why: Removal) {
        self.segs.leave(slot);
    }

    fn resize(&mut self, slot: Slot, size: u64) {
        self.segs.resize(slot, size);
    }

    fn admits_new(&self, _id: ObjectId, size: u64) -> bool {
        size <= self.share
    }

    fn overflow_victim(&mut self, incoming: Option<(ObjectId, u64)>) -> Option<Slot> {
        if incoming.is_some() || !self.trim_lowest {
            return None;
        }
        if self.segs.bytes(0) > self.share {
            return self.segs.back(0);
        }
        self.trim_lowest = false;
        None
    }

    fn coldest_fast(&mut self, _now: Nanos) -> Option<Slot> {
        (0..self.n).find(|&i| self.segs.bytes(i) > 0 || self.segs.count(i) > 0).and_then(|i| self.segs.back(i))
    }

    fn hottest_slow(&self) -> Option<Slot> {
        self.segs.hottest_slow()
    }

    fn hotter(&self, a: Slot, b: Slot) -> bool {
        let rank = |s: Slot| {
            let l = self.segs.node(s).list;
            if l == SLOW { 0 } else { u16::from(l) + 1 }
        };
        if rank(a) != rank(b) {
            return rank(a) > rank(b);
        }
        self.segs.more_recent(a, b)
    }

    fn len(&self, tier: Tier) -> usize {
        self.segs.len(tier)
    }

    fn memory_bytes(&self) -> usize {
        self.segs.memory_bytes()
    }

    fn cold_lists(&self) -> usize {
        usize::from(self.n)
    }

    /// Segment `list` from its least recent object; list 0 is the top segment (evicted last).
    fn walk_cold(&self, list: usize, after: Option<Slot>) -> Option<Slot> {
        let seg = self.n.checked_sub(1 + u8::try_from(list).ok()?)?;
        match after {
            None => self.segs.back(seg),
            Some(s) => self.segs.newer(s),
        }
    }
}
