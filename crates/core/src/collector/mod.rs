//! Data collectors: per-object hotness tracking and the two ranking queries every architecture
//! needs — the coldest object on the fast tier (victim) and the hottest object on the slow tier
//! (promotion candidate).
//!
//! # Contract
//! - The caller (an architecture) owns slot allocation and tells the collector everything:
//!   [`Collector::insert`] when an object becomes tracked, [`Collector::touch`] on each access,
//!   [`Collector::set_tier`] when it moves, [`Collector::remove`] when it is forgotten.
//!   Caller guarantees a slot is inserted once before it is touched, moved or removed.
//! - Ranking queries MUST be O(1) amortised or O(log n). They do not remove anything;
//!   `coldest_fast` may advance internal state (a clock hand) and therefore takes `&mut self`.
//! - Implementations MUST NOT allocate per access once their per-slot vectors have grown to the
//!   highest slot in use.
//! - Per-object state is the collector's own (`State` next to the policy), in vectors indexed by
//!   [`Slot`].
//!
//! # Registry
//! Adding a collector = one new file implementing [`Collector`] + [`CollectorBuild`] and one line
//! in the `collectors!` list below; the dispatch enum, the name table used to parse specs and the
//! `--list` output are generated from it.

pub mod arc;
pub mod belady;
pub mod clock;
pub mod fifo;
pub mod gdsf;
mod ghost;
pub mod interval;
pub mod inverse_bitmap;
pub mod lfu;
pub mod lfuda;
pub mod lru;
pub mod lru_k;
pub mod s3fifo;
mod segments;
pub mod sieve;
pub mod slru;
pub mod twoq;
pub mod windowed_miss;
pub mod wsclock;

use crate::params::{ConfigError, ParamSpec, Params};
use crate::{Nanos, ObjectId, Slot, Tier};

/// What the collector learns about one access.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Touch {
    /// Current time.
    pub now: Nanos,
    /// Engine-wide access sequence number (strictly increasing); breaks ties by recency.
    pub seq: u64,
    /// Number of 4 KiB pages the access covers (at least 1).
    pub pages: u32,
    /// Whether the access was a write.
    pub write: bool,
}

impl Touch {
    /// A touch of one page at `seq` (tests and simple callers).
    pub fn at(seq: u64) -> Touch {
        Touch { now: Nanos(seq), seq, pages: 1, write: false }
    }
}

/// Number of 4 KiB pages covered by `[offset, offset + len)` (at least 1).
#[inline]
pub fn pages_of(offset: u64, len: u64) -> u32 {
    if len == 0 {
        return 1;
    }
    let first = offset >> 12;
    let last = (offset.saturating_add(len) - 1) >> 12;
    u32::try_from(last - first + 1).unwrap_or(u32::MAX)
}

/// Why a slot stops being tracked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Removal {
    /// It was evicted from the fast tier by a cache and is no longer tracked at all (ARC keeps a
    /// ghost; the inverse bitmap remembers its counter for admission).
    Evicted,
    /// The object is gone (deleted) or forgotten for another reason.
    Deleted,
}

/// What a collector is told when it is built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CollectorContext {
    /// Capacity of the fast tier in bytes (ARC sizes its lists by it).
    pub fast_capacity: u64,
}

/// A data collector. See the module docs for the contract.
pub trait Collector {
    /// Starts tracking `slot` (object `id`, `size` bytes) on `tier`, as if just accessed by `t`.
    fn insert(&mut self, slot: Slot, id: ObjectId, tier: Tier, size: u64, t: &Touch);
    /// Records an access to a tracked slot.
    fn touch(&mut self, slot: Slot, t: &Touch);
    /// A tracked slot moved to `tier` (a promotion, demotion, fill or eviction that keeps it
    /// tracked).
    fn set_tier(&mut self, slot: Slot, tier: Tier);
    /// The tracked slot's fast copy went without being evicted: a write made it stale, a move
    /// onto the fast tier failed, or its volume's policy keeps no copy. It is on the slow tier
    /// now, and its heat says nothing about what the fast tier should admit (the inverse bitmap
    /// takes its admission bar from evictions only). Default: [`Collector::set_tier`].
    fn dropped_from_fast(&mut self, slot: Slot) {
        self.set_tier(slot, Tier::Slow);
    }
    /// Stops tracking `slot`.
    fn remove(&mut self, slot: Slot, why: Removal);
    /// The size of a tracked object changed.
    fn resize(&mut self, _slot: Slot, _size: u64) {}
    /// Called on a miss of the untracked object `id`, before its admission is asked and victims
    /// are chosen to make room for it (ARC adapts its target from its ghost lists here).
    fn on_miss(&mut self, _id: ObjectId, _size: u64) {}
    /// A victim the policy evicts although the fast tier as a whole has room, because one of its
    /// lists is over its own share. Asked after a fast-tier hit, with `incoming` `None` (SLRU's
    /// lowest segment after a hit cooled the segments above it), and after room was made for a
    /// missed object, with its id and size (2Q's main queue, which an object found in the
    /// ghost queue enters, is full). The architecture evicts each slot named, as it evicts
    /// [`Collector::coldest_fast`]'s, until none is. Default: none.
    fn overflow_victim(&mut self, _incoming: Option<(ObjectId, u64)>) -> Option<Slot> {
        None
    }
    /// The coldest object on the fast tier: the next victim.
    fn coldest_fast(&mut self, now: Nanos) -> Option<Slot>;
    /// The hottest object on the slow tier: the next promotion candidate.
    fn hottest_slow(&self) -> Option<Slot>;
    /// Whether `a` ranks hotter than `b` (both tracked).
    fn hotter(&self, a: Slot, b: Slot) -> bool;
    /// Admission: may this tracked slow-tier object enter the fast tier? Default: always.
    fn admits(&self, _slot: Slot) -> bool {
        true
    }
    /// Admission of an object not on the fast tier, asked after [`Collector::on_miss`] and
    /// before room is made for it (S3-FIFO never admits an object larger than its small queue).
    /// Default: always.
    fn admits_new(&self, _id: ObjectId, _size: u64) -> bool {
        true
    }
    /// Whether a cache should keep objects that are only on the slow tier tracked (admission
    /// needs their counters). Tiering tracks every object regardless.
    fn tracks_slow_objects(&self) -> bool {
        false
    }
    /// Number of tracked objects on `tier`.
    fn len(&self, tier: Tier) -> usize;
    /// Heap bytes held.
    fn memory_bytes(&self) -> usize;
    /// A hint that `slot` (possibly not tracked) will be touched soon. Default: nothing.
    fn prefetch(&self, _slot: Slot) {}
    /// The part of a tracked slot's ranking that is a count (the inverse bitmap's counter,
    /// LFU's frequency), for a front end to keep across restarts; 0 for collectors that rank by
    /// recency alone (their order is kept by re-inserting objects coldest first).
    fn heat(&self, _slot: Slot) -> u64 {
        0
    }
    /// Re-ranks a tracked slot after a restart as if just accessed by `t`, with the count
    /// [`Collector::heat`] reported before it. Restoring slots coldest first rebuilds the old
    /// ranking. Default: a touch (recency collectors).
    fn restore_heat(&mut self, slot: Slot, _heat: u64, t: &Touch) {
        self.touch(slot, t);
    }
    /// How many fast-tier eviction lists [`Collector::walk_cold`] can walk; 0 when the
    /// collector has no list order (a feeder such as ZFS's L2ARC then cannot use it).
    fn cold_lists(&self) -> usize {
        0
    }
    /// Walks fast-tier eviction list `list` from its cold end towards its hot end: the slot
    /// after `after`, or the coldest one when `after` is `None`. For feeders that copy out what
    /// is about to be evicted.
    fn walk_cold(&self, _list: usize, _after: Option<Slot>) -> Option<Slot> {
        None
    }
}

/// How a collector is built from its spec.
pub trait CollectorBuild: Collector + Sized {
    /// Registry token.
    const NAME: &'static str;
    /// Bumped when behaviour changes (golden numbers move).
    const VERSION: u32;
    /// One line of help.
    const HELP: &'static str;
    /// Knobs with defaults.
    const PARAMS: &'static [ParamSpec];
    /// The fewest objects a fast tier must hold for the policy to work as designed with its
    /// default knobs (S3-FIFO's small queue must exceed one object). Sampled miss-ratio curves
    /// leave out sizes whose scaled cache is smaller.
    const MIN_OBJECTS: u64 = 1;
    /// Other names a spec may use (`s3fifo` for `s3-fifo`).
    const ALIASES: &'static [&'static str] = &[];
    /// The class in libCacheSim's Python package (PyPI `libcachesim`) whose miss counts this
    /// collector reproduces with default knobs; the differential test runs every collector
    /// that names one. `None` when there is no such reference.
    const LIBCACHESIM: Option<&'static str> = None;
    /// How the differential test compares with [`CollectorBuild::LIBCACHESIM`].
    const REFERENCE: Reference = Reference::Exact;
    /// Builds from validated parameters.
    fn build(params: &mut Params, cx: &CollectorContext) -> Result<Self, ConfigError>;
}

/// How a collector's miss counts compare with libCacheSim's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reference {
    /// Equal, miss for miss, in object and byte mode.
    Exact,
    /// Equal in object mode; in byte mode a documented rule differs (ARC's adaptation step), so
    /// the test reports the difference without failing.
    ExactInObjectMode,
    /// Randomised: the miss ratio over several seeds within 1 % of libCacheSim's.
    Seeded,
}

impl Reference {
    /// The name `tierwise list collectors --json` gives it.
    pub fn as_str(self) -> &'static str {
        match self {
            Reference::Exact => "exact",
            Reference::ExactInObjectMode => "exact-in-object-mode",
            Reference::Seeded => "seeded",
        }
    }
}

/// One registry row.
#[derive(Clone, Copy)]
pub struct CollectorInfo {
    /// Token used in specs.
    pub name: &'static str,
    /// Behaviour version.
    pub version: u32,
    /// One line of help.
    pub help: &'static str,
    /// Knobs.
    pub params: &'static [ParamSpec],
    /// See [`CollectorBuild::MIN_OBJECTS`].
    pub min_objects: u64,
    /// See [`CollectorBuild::ALIASES`].
    pub aliases: &'static [&'static str],
    /// See [`CollectorBuild::LIBCACHESIM`].
    pub libcachesim: Option<&'static str>,
    /// See [`CollectorBuild::REFERENCE`].
    pub reference: Reference,
    /// Constructor.
    pub create: fn(&mut Params, &CollectorContext) -> Result<AnyCollector, ConfigError>,
}

macro_rules! collectors {
    ($($variant:ident => $module:ident :: $ty:ident),+ $(,)?) => {
        /// Every registered collector, statically dispatched.
        #[derive(Clone, Debug)]
        pub enum AnyCollector {
            $(
                #[doc = concat!("See [`", stringify!($module), "::", stringify!($ty), "`].")]
                $variant($module::$ty)
            ),+
        }

        /// The registry: one row per collector.
        pub const COLLECTORS: &[CollectorInfo] = &[
            $(CollectorInfo {
                name: <$module::$ty as CollectorBuild>::NAME,
                version: <$module::$ty as CollectorBuild>::VERSION,
                help: <$module::$ty as CollectorBuild>::HELP,
                params: <$module::$ty as CollectorBuild>::PARAMS,
                min_objects: <$module::$ty as CollectorBuild>::MIN_OBJECTS,
                aliases: <$module::$ty as CollectorBuild>::ALIASES,
                libcachesim: <$module::$ty as CollectorBuild>::LIBCACHESIM,
                reference: <$module::$ty as CollectorBuild>::REFERENCE,
                create: |p, cx| {
                    p.declare(<$module::$ty as CollectorBuild>::PARAMS);
                    Ok(AnyCollector::$variant(<$module::$ty as CollectorBuild>::build(p, cx)?))
                },
            }),+
        ];

        macro_rules! dispatch {
            ($self:ident, $c:ident => $e:expr) => {
                match $self { $(AnyCollector::$variant($c) => $e),+ }
            };
        }
    };
}

collectors! {
    Lru => lru::Lru,
    Lfu => lfu::Lfu,
    Arc => arc::Arc,
    Fifo => fifo::Fifo,
    Clock => clock::Clock,
    S3Fifo => s3fifo::S3Fifo,
    WsClock => wsclock::WsClock,
    InverseBitmap => inverse_bitmap::InverseBitmap,
    Sieve => sieve::Sieve,
    Slru => slru::Slru,
    TwoQ => twoq::TwoQ,
    Lfuda => lfuda::Lfuda,
    Gdsf => gdsf::Gdsf,
    LruK => lru_k::LruK,
    Belady => belady::Belady,
}

impl AnyCollector {
    /// The registry token of this collector.
    pub fn name(&self) -> &'static str {
        dispatch!(self, c => collector_name(c))
    }
}

fn collector_name<C: CollectorBuild>(_: &C) -> &'static str {
    C::NAME
}

impl Collector for AnyCollector {
    #[inline]
    fn insert(&mut self, slot: Slot, id: ObjectId, tier: Tier, size: u64, t: &Touch) {
        dispatch!(self, c => c.insert(slot, id, tier, size, t))
    }
    #[inline]
    fn touch(&mut self, slot: Slot, t: &Touch) {
        dispatch!(self, c => c.touch(slot, t))
    }
    #[inline]
    fn set_tier(&mut self, slot: Slot, tier: Tier) {
        dispatch!(self, c => c.set_tier(slot, tier))
    }
    #[inline]
    fn dropped_from_fast(&mut self, slot: Slot) {
        dispatch!(self, c => c.dropped_from_fast(slot))
    }
    #[inline]
    fn remove(&mut self, slot: Slot, why: Removal) {
        dispatch!(self, c => c.remove(slot, why))
    }
    #[inline]
    fn resize(&mut self, slot: Slot, size: u64) {
        dispatch!(self, c => c.resize(slot, size))
    }
    #[inline]
    fn on_miss(&mut self, id: ObjectId, size: u64) {
        dispatch!(self, c => c.on_miss(id, size))
    }
    #[inline]
    fn overflow_victim(&mut self, incoming: Option<(ObjectId, u64)>) -> Option<Slot> {
        dispatch!(self, c => c.overflow_victim(incoming))
    }
    #[inline]
    fn coldest_fast(&mut self, now: Nanos) -> Option<Slot> {
        dispatch!(self, c => c.coldest_fast(now))
    }
    #[inline]
    fn hottest_slow(&self) -> Option<Slot> {
        dispatch!(self, c => c.hottest_slow())
    }
    #[inline]
    fn hotter(&self, a: Slot, b: Slot) -> bool {
        dispatch!(self, c => c.hotter(a, b))
    }
    #[inline]
    fn admits(&self, slot: Slot) -> bool {
        dispatch!(self, c => c.admits(slot))
    }
    #[inline]
    fn admits_new(&self, id: ObjectId, size: u64) -> bool {
        dispatch!(self, c => c.admits_new(id, size))
    }
    fn tracks_slow_objects(&self) -> bool {
        dispatch!(self, c => c.tracks_slow_objects())
    }
    fn len(&self, tier: Tier) -> usize {
        dispatch!(self, c => c.len(tier))
    }
    fn memory_bytes(&self) -> usize {
        dispatch!(self, c => c.memory_bytes())
    }
    #[inline]
    fn prefetch(&self, slot: Slot) {
        dispatch!(self, c => c.prefetch(slot))
    }
    fn cold_lists(&self) -> usize {
        dispatch!(self, c => c.cold_lists())
    }
    #[inline]
    fn walk_cold(&self, list: usize, after: Option<Slot>) -> Option<Slot> {
        dispatch!(self, c => c.walk_cold(list, after))
    }
    fn heat(&self, slot: Slot) -> u64 {
        dispatch!(self, c => c.heat(slot))
    }
    fn restore_heat(&mut self, slot: Slot, heat: u64, t: &Touch) {
        dispatch!(self, c => c.restore_heat(slot, heat, t))
    }
}

/// Looks a collector up by name.
pub fn collector_info(name: &str) -> Result<&'static CollectorInfo, ConfigError> {
    COLLECTORS
        .iter()
        .find(|c| c.name.eq_ignore_ascii_case(name) || c.aliases.iter().any(|a| a.eq_ignore_ascii_case(name)))
        .ok_or_else(|| ConfigError::UnknownName {
            kind: "collector",
            name: name.to_string(),
            allowed: COLLECTORS.iter().map(|c| c.name.to_string()).collect(),
        })
}

/// Builds the collector `name`, taking its knobs from `params` (which may hold other keys for
/// the architecture; unknown-key checking is the caller's).
pub fn build_collector(name: &str, params: &mut Params, cx: &CollectorContext) -> Result<AnyCollector, ConfigError> {
    (collector_info(name)?.create)(params, cx)
}

/// Grows a slot-indexed vector so `slot` is addressable. Amortised O(1) with 25 % geometric
/// growth (memory per object matters more than the rare copy); never allocates once the highest
/// slot has been seen.
#[inline]
pub(crate) fn ensure_slot<T: Clone>(v: &mut Vec<T>, slot: Slot, fill: T) {
    if slot.idx() >= v.len() {
        grow_to(v, slot.idx() + 1, fill);
    }
}

#[cold]
fn grow_to<T: Clone>(v: &mut Vec<T>, len: usize, fill: T) {
    if len > v.capacity() {
        let extra = (len - v.len()).max(v.capacity() / 4).max(64);
        v.reserve_exact(extra);
    }
    v.resize(len, fill);
}

#[cfg(any(test, feature = "test-utils"))]
pub mod test_utils;

#[cfg(test)]
mod tests;
