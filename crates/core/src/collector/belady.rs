//! Belady's MIN (1966) as a collector: the offline optimum, for a simulator that knows the
//! future. The victim is the cached object whose next access lies furthest ahead (never again
//! first, the highest id first among those, as `tierwise mrc --belady` and libCacheSim's
//! `Belady`); the promotion candidate is the slow-tier object accessed soonest.
//!
//! It needs [`Future`]: every object's accesses in engine sequence numbers (the first access
//! of a run is 1). The simulator reads the trace once to compute it and provides it with
//! [`provide_future`] while it builds its engine; anything else (a mount, a served device)
//! gets a clear error, since it cannot know the future.
//!
//! For objects of one size in a cache that caches on every miss this is the fewest misses
//! possible; with variable sizes, with admission (S3-FIFO, 2Q refuse objects), write-back or
//! tiering it is a reference, not a bound: the report says so.

use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use super::{Collector, CollectorBuild, CollectorContext, Removal, Touch, ensure_slot};
use crate::params::{ConfigError, ParamSpec, Params};
use crate::{Nanos, ObjectId, Slot, Tier};

/// No further access.
pub const NEVER: u64 = u64::MAX;

/// Every object's accesses, in the engine's access sequence numbers.
#[derive(Debug, Default)]
pub struct Future {
    /// Per object: where its accesses start in `seqs`, and how many.
    index: HashMap<ObjectId, (u32, u32)>,
    seqs: Vec<u64>,
}

impl Future {
    /// The future of a run whose accesses name `objects` in order (access `i` has sequence
    /// number `i + 1`).
    pub fn new(objects: &[ObjectId]) -> Future {
        let mut counts: HashMap<ObjectId, (u32, u32)> = HashMap::new();
        for &o in objects {
            counts.entry(o).or_default().1 += 1;
        }
        let mut start = 0u32;
        for e in counts.values_mut() {
            e.0 = start;
            start += e.1;
            e.1 = 0;
        }
        let mut seqs = vec![0u64; objects.len()];
        for (i, &o) in objects.iter().enumerate() {
            if let Some(e) = counts.get_mut(&o) {
                seqs[(e.0 + e.1) as usize] = i as u64 + 1;
                e.1 += 1;
            }
        }
        Future { index: counts, seqs }
    }

    /// The first access of `id` after sequence number `seq`, or [`NEVER`].
    pub fn next_after(&self, id: ObjectId, seq: u64) -> u64 {
        let Some(&(start, len)) = self.index.get(&id) else { return NEVER };
        let mine = &self.seqs[start as usize..(start + len) as usize];
        let i = mine.partition_point(|&s| s <= seq);
        mine.get(i).copied().unwrap_or(NEVER)
    }

    /// Accesses known.
    pub fn len(&self) -> usize {
        self.seqs.len()
    }

    /// Whether no access is known.
    pub fn is_empty(&self) -> bool {
        self.seqs.is_empty()
    }

    /// Heap bytes held.
    pub fn memory_bytes(&self) -> usize {
        self.seqs.capacity() * 8 + self.index.capacity() * 24
    }
}

thread_local! {
    static PROVIDED: RefCell<Option<Arc<Future>>> = const { RefCell::new(None) };
}

/// Runs `build` with `future` available to the offline collectors built on this thread
/// meanwhile (the simulator builds its engine inside).
pub fn provide_future<T>(future: Arc<Future>, build: impl FnOnce() -> T) -> T {
    let old = PROVIDED.with(|p| p.borrow_mut().replace(future));
    let out = build();
    PROVIDED.with(|p| *p.borrow_mut() = old);
    out
}

/// Runs `check` (building an architecture from `spec` to validate it before a run) with an
/// empty future provided when the spec names an offline collector: the run itself provides
/// the real one.
pub fn validating<T>(spec: &str, check: impl FnOnce() -> T) -> T {
    if spec_is_offline(spec) { provide_future(Arc::new(Future::default()), check) } else { check() }
}

/// Whether `collector` (a registry name or alias) needs the future.
pub fn is_offline(collector: &str) -> bool {
    super::collector_info(collector).is_ok_and(|c| c.name == Belady::NAME)
}

/// Whether the architecture spec `spec` names an offline collector (`collector=belady`).
pub fn spec_is_offline(spec: &str) -> bool {
    crate::params::Params::parse(spec).is_ok_and(|(_, p)| p.peek("collector").is_some_and(is_offline))
}

/// Per-object state.
#[derive(Clone, Copy, Debug, Default)]
pub struct BeladyState {
    id: ObjectId,
    next: u64,
    fast: bool,
}

/// The Belady collector.
#[derive(Clone, Debug)]
pub struct Belady {
    future: Arc<Future>,
    nodes: Vec<BeladyState>,
    /// Fast-tier objects by (next access, id): the last is the victim.
    fast: BTreeSet<(u64, ObjectId, u32)>,
    /// Slow-tier objects by (next access, id): the first is the promotion candidate.
    slow: BTreeSet<(u64, ObjectId, u32)>,
    latest: u64,
}

impl CollectorBuild for Belady {
    const NAME: &'static str = "belady";
    const VERSION: u32 = 1;
    const HELP: &'static str =
        "Belady's MIN, offline: evict the object next accessed furthest ahead (simulator only; the optimum line)";
    const PARAMS: &'static [ParamSpec] = &[];
    const ALIASES: &'static [&'static str] = &["min", "opt"];
    const LIBCACHESIM: Option<&'static str> = Some("Belady");
    fn build(_: &mut Params, _: &CollectorContext) -> Result<Self, ConfigError> {
        let future = PROVIDED.with(|p| p.borrow().clone()).ok_or_else(|| ConfigError::Inconsistent {
            owner: Self::NAME.into(),
            message: "belady is offline: it needs every access's next access, which only the simulator \
                     (sim, compare, sweeps, mrc) reading a whole trace knows; a mount or a served device cannot"
                .into(),
        })?;
        Ok(Belady { future, nodes: Vec::new(), fast: BTreeSet::new(), slow: BTreeSet::new(), latest: 0 })
    }
}

impl Belady {
    fn set(&self, fast: bool) -> &BTreeSet<(u64, ObjectId, u32)> {
        if fast { &self.fast } else { &self.slow }
    }

    fn key(&self, slot: Slot) -> (u64, ObjectId, u32) {
        let n = &self.nodes[slot.idx()];
        (n.next, n.id, slot.0)
    }

    fn unrank(&mut self, slot: Slot) {
        let key = self.key(slot);
        if self.nodes[slot.idx()].fast {
            self.fast.remove(&key);
        } else {
            self.slow.remove(&key);
        }
    }

    fn rank(&mut self, slot: Slot, fast: bool, seq: u64) {
        let id = self.nodes[slot.idx()].id;
        let next = self.future.next_after(id, seq);
        let n = &mut self.nodes[slot.idx()];
        n.next = next;
        n.fast = fast;
        let key = self.key(slot);
        if fast {
            self.fast.insert(key);
        } else {
            self.slow.insert(key);
        }
    }
}

impl Collector for Belady {
    fn insert(&mut self, slot: Slot, id: ObjectId, tier: Tier, _size: u64, t: &Touch) {
        ensure_slot(&mut self.nodes, slot, BeladyState::default());
        self.latest = self.latest.max(t.seq);
        self.nodes[slot.idx()] = BeladyState { id, next: NEVER, fast: false };
        self.rank(slot, tier == Tier::Fast, t.seq);
    }

    fn touch(&mut self, slot: Slot, t: &Touch) {
        self.latest = self.latest.max(t.seq);
        let fast = self.nodes[slot.idx()].fast;
        self.unrank(slot);
        self.rank(slot, fast, t.seq);
    }

    fn set_tier(&mut self, slot: Slot, tier: Tier) {
        if self.nodes[slot.idx()].fast != (tier == Tier::Fast) {
            self.unrank(slot);
            self.rank(slot, tier == Tier::Fast, self.latest);
        }
    }

    fn remove(&mut self, slot: Slot, _why: Removal) {
        self.unrank(slot);
    }

    fn coldest_fast(&mut self, _now: Nanos) -> Option<Slot> {
        self.fast.last().map(|&(_, _, s)| Slot(s))
    }

    fn hottest_slow(&self) -> Option<Slot> {
        self.slow.first().map(|&(_, _, s)| Slot(s))
    }

    /// Accessed sooner ranks hotter.
    fn hotter(&self, a: Slot, b: Slot) -> bool {
        self.nodes[a.idx()].next < self.nodes[b.idx()].next
    }

    fn len(&self, tier: Tier) -> usize {
        self.set(tier == Tier::Fast).len()
    }

    fn memory_bytes(&self) -> usize {
        // A B-tree entry is 24 bytes of key plus about a third of a node's slack.
        self.nodes.capacity() * std::mem::size_of::<BeladyState>()
            + (self.fast.len() + self.slow.len()) * 36
            + self.future.memory_bytes()
    }
}
