//! S3-FIFO (Yang et al., "FIFO queues are all you need for cache eviction", SOSP'23), in bytes,
//! as libCacheSim's `S3FIFO.c` runs it (a differential test checks us miss for miss).
//!
//! Three FIFO queues: a small one (10 % of the fast tier) that every new object enters, a main
//! one (the rest) and a ghost queue (ids of objects evicted from the small queue, 90 % of the
//! capacity in bytes). A hit only bumps a 2-bit frequency; nothing moves on a hit. To evict:
//! when the main queue is over its share (or the small one is empty), its oldest object with a
//! non-zero frequency is re-queued with the frequency decremented (CLOCK) and the first one
//! without is the victim; otherwise the small queue's oldest object moves to the main queue if it
//! was hit at least `move-to-main-threshold` times, else it is the victim and its id enters the
//! ghost queue. A miss whose id is in the ghost queue enters the main queue directly.
//!
//! libCacheSim's rules kept on purpose (they decide miss counts): until the first eviction, a
//! new object enters the main queue once the small queue is full; an object larger than the
//! small queue is never admitted, nor one of its size unless its id is a ghost (so a cache of fewer than 20
//! unit objects, whose small queue holds at most one, admits nothing). One rule is not copied:
//! libCacheSim evicts to make room for an object exactly the small queue's size that is not a
//! ghost, then does not insert it; here nothing is evicted for it. The slow tier has no
//! S3-FIFO order; its most recently accessed object ranks hottest.

use super::ghost::Ghosts;
use super::{Collector, CollectorBuild, CollectorContext, Removal, Touch, ensure_slot};
use crate::list::{Link, Linked, List, NIL};
use crate::params::{ConfigError, ParamSpec, Params};
use crate::{Nanos, ObjectId, Slot, Tier};

const SMALL: u8 = 0;
const MAIN: u8 = 1;
const SLOW: u8 = 2;
/// The ghost queue (the only list of [`Ghosts`]).
const GHOST: u8 = 0;
/// Frequencies saturate here when re-queued in the main queue (a 2-bit counter).
const MAX_FREQ: u8 = 3;

/// Per-object state.
#[derive(Clone, Copy, Debug)]
pub struct S3FifoState {
    link: Link,
    id: ObjectId,
    size: u64,
    stamp: u32,
    freq: u8,
    queue: u8,
}

impl Default for S3FifoState {
    fn default() -> Self {
        S3FifoState { link: Link::default(), id: ObjectId(0), size: 0, stamp: 0, freq: 0, queue: SLOW }
    }
}

impl Linked for S3FifoState {
    fn link(&self) -> &Link {
        &self.link
    }
    fn link_mut(&mut self) -> &mut Link {
        &mut self.link
    }
}

/// The S3-FIFO collector.
#[derive(Clone, Debug)]
pub struct S3Fifo {
    nodes: Vec<S3FifoState>,
    /// Small, main and the slow-tier recency list.
    queues: [List; 3],
    bytes: [u64; 2],
    ghosts: Ghosts<1>,
    small_capacity: u64,
    main_capacity: u64,
    ghost_capacity: u64,
    move_to_main: u8,
    /// Whether anything was evicted yet (libCacheSim's `has_evicted`).
    has_evicted: bool,
    /// The id [`Collector::on_miss`] classified, and whether it was a ghost.
    pending: Option<(ObjectId, bool)>,
}

impl CollectorBuild for S3Fifo {
    const NAME: &'static str = "s3-fifo";
    const ALIASES: &'static [&'static str] = &["s3fifo"];
    const LIBCACHESIM: Option<&'static str> = Some("S3FIFO");
    const VERSION: u32 = 1;
    const HELP: &'static str = "S3-FIFO: small FIFO, main FIFO with 2-bit CLOCK, ghost FIFO (SOSP'23, as libCacheSim)";
    const PARAMS: &'static [ParamSpec] = &[
        ParamSpec {
            name: "small-size-ratio",
            default: "0.1",
            help: "share of the fast tier for the small queue (0.01..=0.99)",
        },
        ParamSpec {
            name: "ghost-size-ratio",
            default: "0.9",
            help: "ghost queue size as a share of the fast tier, in bytes of the objects it names (0..=10)",
        },
        ParamSpec {
            name: "move-to-main-threshold",
            default: "2",
            help: "hits in the small queue that move an object to the main queue (1..=3)",
        },
    ];
    /// With the default 10 % small queue, truncated: from 20 unit objects it holds two.
    const MIN_OBJECTS: u64 = 20;
    fn build(params: &mut Params, cx: &CollectorContext) -> Result<Self, ConfigError> {
        let small = params.f64("small-size-ratio", 0.01, 0.99)?;
        let ghost = params.f64("ghost-size-ratio", 0.0, 10.0)?;
        let threshold = params.u64("move-to-main-threshold", 1, u64::from(MAX_FREQ))?;
        Ok(S3Fifo::new(cx.fast_capacity, small, ghost, threshold as u8))
    }
}

impl S3Fifo {
    /// S3-FIFO for a fast tier of `capacity` bytes. Queue sizes are truncated to whole bytes,
    /// as libCacheSim does.
    pub fn new(capacity: u64, small_ratio: f64, ghost_ratio: f64, move_to_main: u8) -> S3Fifo {
        let small_capacity = (capacity as f64 * small_ratio) as u64;
        S3Fifo {
            nodes: Vec::new(),
            queues: [List::default(); 3],
            bytes: [0; 2],
            ghosts: Ghosts::default(),
            small_capacity,
            main_capacity: capacity - small_capacity.min(capacity),
            ghost_capacity: (capacity as f64 * ghost_ratio) as u64,
            move_to_main,
            has_evicted: false,
            pending: None,
        }
    }

    /// Bytes in the small queue, the main queue and the ghost queue.
    pub fn sizes(&self) -> [u64; 3] {
        [self.bytes[SMALL as usize], self.bytes[MAIN as usize], self.ghosts.bytes(GHOST)]
    }

    fn enter_fast(&mut self, slot: Slot, id: ObjectId) {
        let was_ghost = match self.pending.take() {
            Some((p, ghost)) if p == id => ghost,
            _ => self.ghosts.take(id),
        };
        let small_full = self.bytes[SMALL as usize] >= self.small_capacity;
        let queue = if was_ghost || (!self.has_evicted && small_full) { MAIN } else { SMALL };
        let n = &mut self.nodes[slot.idx()];
        n.queue = queue;
        n.freq = 0;
        n.id = id;
        self.bytes[queue as usize] += n.size;
        self.queues[queue as usize].push_front(&mut self.nodes, slot.0);
    }

    /// Takes `slot` off its queue; returns the queue.
    fn leave(&mut self, slot: Slot) -> u8 {
        let n = self.nodes[slot.idx()];
        self.queues[n.queue as usize].unlink(&mut self.nodes, slot.0);
        if n.queue != SLOW {
            self.bytes[n.queue as usize] -= n.size;
        }
        self.nodes[slot.idx()].queue = SLOW;
        n.queue
    }

    /// An object leaving the small queue as a victim is remembered (if the ghost queue can
    /// hold it at all), oldest ghosts making room.
    fn remember(&mut self, id: ObjectId, size: u64) {
        if size > self.ghost_capacity {
            return;
        }
        while self.ghosts.bytes(GHOST) + size > self.ghost_capacity && self.ghosts.drop_oldest(GHOST) {}
        self.ghosts.push(id, size, GHOST);
    }

    /// The main queue's victim: CLOCK over its FIFO order with the 2-bit counter.
    fn main_victim(&mut self) -> Option<Slot> {
        loop {
            let s = self.queues[MAIN as usize].back()?;
            let freq = self.nodes[s as usize].freq;
            if freq == 0 {
                return Some(Slot(s));
            }
            self.nodes[s as usize].freq = freq.min(MAX_FREQ) - 1;
            self.queues[MAIN as usize].move_to_front(&mut self.nodes, s);
        }
    }

    /// The small queue's victim, moving the objects hit often enough to the main queue; `None`
    /// when that empties the small queue.
    fn small_victim(&mut self) -> Option<Slot> {
        loop {
            let s = self.queues[SMALL as usize].back()?;
            if self.nodes[s as usize].freq < self.move_to_main {
                return Some(Slot(s));
            }
            let size = self.nodes[s as usize].size;
            self.queues[SMALL as usize].unlink(&mut self.nodes, s);
            self.bytes[SMALL as usize] -= size;
            let n = &mut self.nodes[s as usize];
            n.queue = MAIN;
            n.freq = 0;
            self.bytes[MAIN as usize] += size;
            self.queues[MAIN as usize].push_front(&mut self.nodes, s);
        }
    }
}

impl Collector for S3Fifo {
    fn insert(&mut self, slot: Slot, id: ObjectId, tier: Tier, size: u64, t: &Touch) {
        ensure_slot(&mut self.nodes, slot, S3FifoState::default());
        self.nodes[slot.idx()] = S3FifoState { id, size, stamp: t.seq as u32, ..S3FifoState::default() };
        match tier {
            Tier::Fast => self.enter_fast(slot, id),
            Tier::Slow => self.queues[SLOW as usize].push_front(&mut self.nodes, slot.0),
        }
    }

    fn touch(&mut self, slot: Slot, t: &Touch) {
        let n = &mut self.nodes[slot.idx()];
        n.stamp = t.seq as u32;
        if n.queue != SLOW {
            n.freq = n.freq.saturating_add(1);
        } else {
            self.queues[SLOW as usize].move_to_front(&mut self.nodes, slot.0);
        }
    }

    fn set_tier(&mut self, slot: Slot, tier: Tier) {
        let n = self.nodes[slot.idx()];
        match (n.queue == SLOW, tier) {
            (true, Tier::Fast) => {
                self.leave(slot);
                self.enter_fast(slot, n.id);
            }
            (false, Tier::Slow) => {
                if self.leave(slot) == SMALL {
                    self.remember(n.id, n.size);
                }
                self.queues[SLOW as usize].push_front(&mut self.nodes, slot.0);
            }
            _ => {}
        }
    }

    fn remove(&mut self, slot: Slot, why: Removal) {
        let n = self.nodes[slot.idx()];
        if self.leave(slot) == SMALL && why == Removal::Evicted {
            self.remember(n.id, n.size);
        }
    }

    fn resize(&mut self, slot: Slot, size: u64) {
        let n = &mut self.nodes[slot.idx()];
        if n.queue != SLOW {
            self.bytes[n.queue as usize] = self.bytes[n.queue as usize] - n.size + size;
        }
        n.size = size;
    }

    fn on_miss(&mut self, id: ObjectId, _size: u64) {
        let ghost = self.ghosts.take(id);
        self.pending = Some((id, ghost));
    }

    /// libCacheSim's two checks: nothing larger than the small queue is ever inserted (its
    /// ghost entry is spent all the same); one exactly its size only from the ghost queue.
    fn admits_new(&self, id: ObjectId, size: u64) -> bool {
        let ghost = match self.pending {
            Some((p, ghost)) if p == id => ghost,
            _ => self.ghosts.find(id).is_some(),
        };
        size < self.small_capacity || (size == self.small_capacity && ghost)
    }

    fn coldest_fast(&mut self, _now: Nanos) -> Option<Slot> {
        self.has_evicted = true;
        let main_over = self.bytes[MAIN as usize] > self.main_capacity;
        if !main_over
            && !self.queues[SMALL as usize].is_empty()
            && let Some(v) = self.small_victim()
        {
            return Some(v);
        }
        self.main_victim()
    }

    /// Two queues, walked like ZFS's L2ARC feed: 0 = main (frequent), 1 = small (recent).
    fn cold_lists(&self) -> usize {
        2
    }

    fn walk_cold(&self, list: usize, after: Option<Slot>) -> Option<Slot> {
        let q = if list == 0 { MAIN } else { SMALL };
        match after {
            None => self.queues[q as usize].back().map(Slot),
            Some(s) => Some(self.nodes[s.idx()].link.prev).filter(|&p| p != NIL).map(Slot),
        }
    }

    fn hottest_slow(&self) -> Option<Slot> {
        self.queues[SLOW as usize].front().map(Slot)
    }

    fn hotter(&self, a: Slot, b: Slot) -> bool {
        let (na, nb) = (&self.nodes[a.idx()], &self.nodes[b.idx()]);
        // Main (proven reused) above small above the slow tier; then frequency, then recency.
        let rank = |n: &S3FifoState| match n.queue {
            MAIN => 2,
            SMALL => 1,
            _ => 0,
        };
        if (rank(na), na.freq) != (rank(nb), nb.freq) {
            return (rank(na), na.freq) > (rank(nb), nb.freq);
        }
        (na.stamp.wrapping_sub(nb.stamp) as i32) > 0
    }

    fn len(&self, tier: Tier) -> usize {
        match tier {
            Tier::Fast => self.queues[SMALL as usize].len() + self.queues[MAIN as usize].len(),
            Tier::Slow => self.queues[SLOW as usize].len(),
        }
    }

    fn memory_bytes(&self) -> usize {
        self.nodes.capacity() * std::mem::size_of::<S3FifoState>() + self.ghosts.memory_bytes()
    }
}
