//! 2Q (Johnson and Shasha, VLDB'94), the full version, as libCacheSim's `TwoQ.c` runs it (a
//! differential test checks us miss for miss).
//!
//! A new object enters A1in, a FIFO of `ain-size-ratio` (25 %) of the fast tier, where hits do
//! not move it. When the fast tier needs room and A1in is over its share, A1in's oldest object is
//! the victim and its id enters A1out, a ghost FIFO of `aout-size-ratio` (50 %) of the capacity
//! in bytes; otherwise the victim is the least recent object of Am, an LRU of the rest. A miss
//! whose id is in A1out enters Am, which evicts its own least recent objects while the newcomer
//! does not fit in its share ([`Collector::overflow_victim`]). Nothing larger than A1in is
//! admitted. The slow tier has no 2Q order; its most recently accessed object ranks hottest.

use super::ghost::Ghosts;
use super::segments::{SLOW, Segments};
use super::{Collector, CollectorBuild, CollectorContext, Removal, Touch};
use crate::params::{ConfigError, ParamSpec, Params};
use crate::{Nanos, ObjectId, Slot, Tier};

const AIN: u8 = 0;
const AM: u8 = 1;
/// A1out, the only list of [`Ghosts`].
const AOUT: u8 = 0;

/// The 2Q collector.
#[derive(Clone, Debug)]
pub struct TwoQ {
    q: Segments<2>,
    ghosts: Ghosts<1>,
    ain_capacity: u64,
    aout_capacity: u64,
    am_capacity: u64,
    /// The id [`Collector::on_miss`] looked up, and whether A1out held it.
    pending: Option<(ObjectId, bool)>,
}

impl CollectorBuild for TwoQ {
    const NAME: &'static str = "2q";
    const VERSION: u32 = 1;
    const HELP: &'static str = "2Q: FIFO A1in, ghost FIFO A1out, LRU Am for objects seen again (VLDB'94)";
    const PARAMS: &'static [ParamSpec] = &[
        ParamSpec { name: "ain-size-ratio", default: "0.25", help: "share of the fast tier for A1in (0.01..=0.99)" },
        ParamSpec {
            name: "aout-size-ratio",
            default: "0.5",
            help: "A1out's size as a share of the fast tier, in bytes of the objects it names (0..=10)",
        },
    ];
    const ALIASES: &'static [&'static str] = &["twoq"];
    const LIBCACHESIM: Option<&'static str> = Some("TwoQ");
    fn build(params: &mut Params, cx: &CollectorContext) -> Result<Self, ConfigError> {
        let ain = params.f64("ain-size-ratio", 0.01, 0.99)?;
        let aout = params.f64("aout-size-ratio", 0.0, 10.0)?;
        Ok(TwoQ::new(cx.fast_capacity, ain, aout))
    }
}

impl TwoQ {
    /// 2Q over a fast tier of `capacity` bytes; shares truncated to whole bytes as libCacheSim
    /// does.
    pub fn new(capacity: u64, ain_ratio: f64, aout_ratio: f64) -> TwoQ {
        let ain_capacity = (capacity as f64 * ain_ratio) as u64;
        TwoQ {
            q: Segments::default(),
            ghosts: Ghosts::default(),
            ain_capacity,
            aout_capacity: (capacity as f64 * aout_ratio) as u64,
            am_capacity: capacity - ain_capacity.min(capacity),
            pending: None,
        }
    }

    fn was_ghost(&self, id: ObjectId) -> bool {
        match self.pending {
            Some((p, ghost)) if p == id => ghost,
            _ => false,
        }
    }

    fn enter_fast(&mut self, slot: Slot) {
        let id = self.q.node(slot).id;
        let list = if self.was_ghost(id) { AM } else { AIN };
        self.pending = None;
        self.q.push_front(slot, list);
    }

    /// An A1in victim's id enters A1out (if it can hold it at all), oldest ghosts making room.
    fn remember(&mut self, id: ObjectId, size: u64) {
        if size > self.aout_capacity {
            return;
        }
        while self.ghosts.bytes(AOUT) + size > self.aout_capacity && self.ghosts.drop_oldest(AOUT) {}
        self.ghosts.push(id, size, AOUT);
    }

    fn leave_fast(&mut self, slot: Slot, evicted: bool) {
        let n = *self.q.node(slot);
        if self.q.leave(slot) == AIN && evicted {
            self.remember(n.id, n.size);
        }
    }
}

impl Collector for TwoQ {
    fn insert(&mut self, slot: Slot, id: ObjectId, tier: Tier, size: u64, t: &Touch) {
        self.q.track(slot, id, tier, size, t);
        if tier == Tier::Fast {
            self.enter_fast(slot);
        }
    }

    #[inline]
    fn touch(&mut self, slot: Slot, t: &Touch) {
        if self.q.stamp(slot, t) == AM {
            self.q.move_front(slot, AM);
        }
    }

    fn set_tier(&mut self, slot: Slot, tier: Tier) {
        let on_fast = self.q.node(slot).list != SLOW;
        match (on_fast, tier) {
            (false, Tier::Fast) => {
                self.q.leave(slot);
                self.enter_fast(slot);
            }
            (true, Tier::Slow) => {
                self.leave_fast(slot, true);
                self.q.push_slow(slot);
            }
            _ => {}
        }
    }

    fn remove(&mut self, slot: Slot, why: Removal) {
        if self.q.node(slot).list != SLOW {
            self.leave_fast(slot, why == Removal::Evicted);
        } else {
            self.q.leave(slot);
        }
    }

    fn resize(&mut self, slot: Slot, size: u64) {
        self.q.resize(slot, size);
    }

    fn on_miss(&mut self, id: ObjectId, _size: u64) {
        let ghost = self.ghosts.take(id);
        self.pending = Some((id, ghost));
    }

    fn admits_new(&self, _id: ObjectId, size: u64) -> bool {
        size <= self.ain_capacity
    }

    /// Am evicts its own least recent objects for a newcomer from A1out.
    fn overflow_victim(&mut self, incoming: Option<(ObjectId, u64)>) -> Option<Slot> {
        let (id, size) = incoming?;
        if self.was_ghost(id) && self.q.bytes(AM) + size > self.am_capacity { self.q.back(AM) } else { None }
    }

    fn coldest_fast(&mut self, _now: Nanos) -> Option<Slot> {
        if self.q.bytes(AIN) > self.ain_capacity {
            return self.q.back(AIN);
        }
        self.q.back(AM).or_else(|| self.q.back(AIN))
    }

    fn hottest_slow(&self) -> Option<Slot> {
        self.q.hottest_slow()
    }

    fn hotter(&self, a: Slot, b: Slot) -> bool {
        // Am (seen twice) above A1in above the slow tier, then recency.
        let rank = |s: Slot| match self.q.node(s).list {
            AM => 2,
            AIN => 1,
            _ => 0,
        };
        if rank(a) != rank(b) {
            return rank(a) > rank(b);
        }
        self.q.more_recent(a, b)
    }

    fn len(&self, tier: Tier) -> usize {
        self.q.len(tier)
    }

    fn memory_bytes(&self) -> usize {
        self.q.memory_bytes() + self.ghosts.memory_bytes()
    }

    /// Two lists, walked like ZFS's L2ARC feed: 0 = Am (frequent), 1 = A1in (recent).
    fn cold_lists(&self) -> usize {
        2
    }

    fn walk_cold(&self, list: usize, after: Option<Slot>) -> Option<Slot> {
        match after {
            None => self.q.back(if list == 0 { AM } else { AIN }),
            Some(s) => self.q.newer(s),
        }
    }
}
