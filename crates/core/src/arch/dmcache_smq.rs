//! A dm-cache-like cache with an smq-like policy, re-implemented from the kernel's
//! documentation (Documentation/admin-guide/device-mapper/cache.rst and cache-policies.rst).
//!
//! smq's distinctive idea is *hot-spot* promotion: it tracks hits not per block but per
//! hot spot, a run of `hotspot` consecutive blocks, so a block can be promoted on its first miss
//! when its neighbourhood is hot. Here:
//! - every request (bio) counts one hit for each hot spot it touches, in a fixed-size,
//!   direct-mapped hot-spot table (a colliding hot spot replaces the old one; all counts halve
//!   once per table-size hits, so the counts follow the recent past). The engine hands over a
//!   request block by block, numbered by the front end (`Ctx::request`); a block of the same
//!   request in the same hot spot counts nothing more (counted per block, one 16 KiB request
//!   alone would reach `promote-hits` 4);
//! - a miss promotes its block while the cache has free blocks (smq's fast promotion), and
//!   afterwards only when its hot spot has at least `promote-hits` hits;
//! - `migration-threshold` (dm-cache's knob, 2048 sectors = 1 MiB) caps the bytes of background
//!   work (promotions and write-backs) in flight; a promotion beyond it is skipped;
//! - write-back (dm-cache's default; `mode=writethrough` and `passthrough` exist too) keeps at
//!   least 25 % of the cache clean while busy and cleans everything when the device has been idle
//!   for `idle` (smq's clean target).
//!
//! Not modelled: smq's 64-level multiqueues with their sentinels (replacement here is the
//! collector, LRU by default), its adaptive promote levels and hit-ratio self-assessment, and
//! the on-disk metadata commits.

use super::bcache::stream_position;
use super::cache::{Cache, delegate_to_cache};
use super::{ArchBuild, Architecture, Placement, Setup, Usage};
use crate::engine::Ctx;
use crate::object_table::hash_id;
use crate::params::{ConfigError, ParamSpec, Params};
use crate::{Level, Nanos, ObjectId, Outcome, Request, Served, Work};

const MODES: [&str; 3] = ["writeback", "writethrough", "passthrough"];

#[derive(Clone, Copy, Debug, Default)]
struct Hotspot {
    /// Hot-spot number + 1 (0 = empty).
    tag: u64,
    hits: u32,
}

/// The dm-cache smq-like architecture.
#[derive(Debug)]
pub struct DmCacheSmq {
    cache: Cache,
    block: u64,
    hotspot_bytes: u64,
    hotspots: Vec<Hotspot>,
    since_aging: usize,
    /// The last hot spot counted and the request it was counted for.
    last_counted: Option<(u64, u64)>,
    promote_hits: u32,
    migration_bytes: u64,
    passthrough: bool,
    idle: Nanos,
    last_io: Nanos,
    next_check: Nanos,
    refused_cold: u64,
    refused_migration: u64,
    idle_cleanings: u64,
}

const PARAMS: &[ParamSpec] = &[
    ParamSpec { name: "mode", default: "writeback", help: "writeback, writethrough or passthrough" },
    ParamSpec { name: "hotspot", default: "16", help: "blocks per hot spot (1..=65536)" },
    ParamSpec {
        name: "promote-hits",
        default: "4",
        help: "hot-spot hits for a promotion once the cache is full (1..=1000)",
    },
    ParamSpec {
        name: "migration-threshold",
        default: "1MiB",
        help: "background bytes in flight at most (dm-cache: 2048 sectors)",
    },
    ParamSpec { name: "idle", default: "1s", help: "no I/O for this long: clean every dirty block" },
    ParamSpec { name: "collector", default: "lru", help: "block replacement" },
];

impl ArchBuild for DmCacheSmq {
    const NAME: &'static str = "dm-cache-smq-like";
    const CAPS: crate::arch::Capabilities =
        crate::arch::Capabilities::BLOCK_CACHING.with_objects(crate::arch::ObjectSizes::Fixed);
    const VERSION: u32 = 1;
    const HELP: &'static str = "dm-cache smq-like: hot-spot promotion, migration threshold, clean-when-idle write-back";
    const PARAMS: &'static [ParamSpec] = PARAMS;
    const USES_COLLECTOR: bool = true;

    fn build(p: &mut Params, setup: &Setup) -> Result<Self, ConfigError> {
        if setup.object_size == 0 {
            return Err(p.inconsistent("works on blocks: run with --objects blocks:4KiB (or larger)"));
        }
        let mode = p.choice("mode", &MODES)?;
        let hotspot = p.u64("hotspot", 1, 65_536)?;
        let promote_hits = p.u64("promote-hits", 1, 1000)? as u32;
        let migration_bytes = p.size("migration-threshold", setup.object_size, 1 << 50)?;
        let idle = p.duration("idle", Nanos::from_millis(1), Nanos::from_secs(86_400))?;
        let collector = p.string("collector")?;
        let knobs = [
            ("mode", if mode == 0 { "write-back" } else { "write-through" }.to_string()),
            ("dirty-high", "75%".to_string()),
            ("dirty-low", "74%".to_string()),
            ("max-writebacks", (migration_bytes / setup.object_size).max(1).to_string()),
            // dm-cache cannot cache part of a block: a partial write to an uncached block goes
            // to the origin device.
            ("partial-writes", "around".to_string()),
            // smq writes back from its dirty queue, least recently used first.
            ("writeback-order", "age".to_string()),
            ("collector", collector),
        ];
        let cache = Cache::from_knobs(Self::NAME, &knobs, setup).map_err(|e| p.inconsistent(e.to_string()))?;
        let blocks = setup.fast_capacity / setup.object_size;
        // Room for four times as many hot spots as the cache holds, as a power of two.
        let table = (blocks * 4 / hotspot).clamp(1024, 1 << 26).next_power_of_two() as usize;
        Ok(DmCacheSmq {
            cache,
            block: setup.object_size,
            hotspot_bytes: hotspot * setup.object_size,
            hotspots: vec![Hotspot::default(); table],
            since_aging: 0,
            last_counted: None,
            promote_hits,
            migration_bytes,
            passthrough: mode == 2,
            idle,
            last_io: Nanos::ZERO,
            next_check: idle,
            refused_cold: 0,
            refused_migration: 0,
            idle_cleanings: 0,
        })
    }
}

impl DmCacheSmq {
    /// Counts a hit for the hot spot of `req`, once per client `request` (0: every access is
    /// its own); returns its hit count.
    fn hit_hotspot(&mut self, req: &Request, request: u64) -> u32 {
        // Hot spots of different volumes are different hot spots.
        let (volume, pos) = stream_position(self.block, req);
        let tag = ObjectId::block_of(volume, pos / self.hotspot_bytes).0 + 1;
        let i = (hash_id(ObjectId(tag)) as usize) & (self.hotspots.len() - 1);
        let same_bio = request != 0 && self.last_counted == Some((tag, request));
        self.last_counted = Some((tag, request));
        let h = &mut self.hotspots[i];
        if same_bio && h.tag == tag {
            return h.hits;
        }
        if h.tag == tag {
            h.hits = h.hits.saturating_add(1);
        } else {
            *h = Hotspot { tag, hits: 1 };
        }
        let hits = h.hits;
        self.since_aging += 1;
        if self.since_aging >= self.hotspots.len() {
            self.since_aging = 0;
            for h in &mut self.hotspots {
                h.hits /= 2;
            }
        }
        hits
    }
}

impl Architecture for DmCacheSmq {
    fn access(&mut self, cx: &mut Ctx<'_>, req: &Request) -> Served {
        if !req.op.is_data() {
            return self.cache.access(cx, req);
        }
        self.last_io = cx.now;
        let hits = self.hit_hotspot(req, cx.request);
        if self.passthrough || self.cache.holds(req.obj) {
            return self.cache.access_admitting(cx, req, !self.passthrough);
        }
        let full = self.cache.usage().fast_used + self.block > self.cache.usage().fast_capacity;
        let mut admit = !full || hits >= self.promote_hits;
        if !admit {
            self.refused_cold += 1;
        } else if cx.in_flight() as u64 * self.block >= self.migration_bytes {
            self.refused_migration += 1;
            admit = false;
        }
        self.cache.access_admitting(cx, req, admit)
    }

    fn complete(&mut self, cx: &mut Ctx<'_>, work: &Work, outcome: Outcome) {
        self.cache.complete(cx, work, outcome)
    }

    fn tick(&mut self, cx: &mut Ctx<'_>) {
        if cx.now.saturating_sub(self.last_io) >= self.idle {
            let budget = (self.migration_bytes / self.block) as usize;
            let room = budget.saturating_sub(cx.in_flight());
            if self.cache.clean_dirty_before(cx, cx.now, room) > 0 {
                self.idle_cleanings += 1;
            }
        }
        self.next_check = cx.now.saturating_add(self.idle);
    }

    fn next_tick(&self) -> Option<Nanos> {
        Some(self.next_check)
    }

    delegate_to_cache!(cache);

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("promotions refused (cold hot spot)", self.refused_cold),
            ("promotions refused (migration threshold)", self.refused_migration),
            ("idle cleanings", self.idle_cleanings),
        ]
    }

    fn memory_bytes(&self) -> usize {
        self.cache.memory_bytes() + self.hotspots.capacity() * std::mem::size_of::<Hotspot>()
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{Harness, Step, run_work};
    use crate::ObjectId;

    /// Once the cache is full, a block is promoted on its first miss if its hot spot is hot,
    /// and not if its hot spot is cold.
    #[test]
    fn hot_spots_decide_promotion_once_full() {
        let mut h = Harness::new("dm-cache-smq-like:hotspot=4,promote-hits=3", 4, false);
        for o in 0..4 {
            h.step(&Step::Read(o, true)).unwrap(); // free blocks: promoted at once
        }
        run_work(&mut h);
        assert!((0..4).all(|o| h.engine.placement(ObjectId(o)).on_fast));
        // Hot spot 2 (blocks 8..12) gets hits on 8 and 9; block 10 is new but its spot is hot.
        h.step(&Step::Read(8, true)).unwrap();
        h.step(&Step::Read(9, true)).unwrap();
        assert!(h.queued.is_empty(), "spot 2 had 1 and 2 hits: below 3");
        h.step(&Step::Read(10, true)).unwrap();
        run_work(&mut h);
        assert!(h.engine.placement(ObjectId(10)).on_fast, "third hit in its hot spot");
        h.step(&Step::Read(20, true)).unwrap();
        assert!(h.queued.is_empty(), "a cold spot");
        let c: std::collections::BTreeMap<_, _> = h.engine.arch_counters().into_iter().collect();
        assert_eq!(c["promotions refused (cold hot spot)"], 3);
        h.settle().unwrap();
    }

    /// A request of several blocks is one bio: one hit for its hot spot, not one per block.
    #[test]
    fn a_multi_block_request_is_one_hot_spot_hit() {
        use crate::{Request, arch::tests::OBJ};
        let mut h = Harness::new("dm-cache-smq-like:hotspot=4,promote-hits=2", 4, false);
        for o in 0..4 {
            h.step(&Step::Read(o, true)).unwrap();
        }
        run_work(&mut h);
        h.clock_advance_secs(1);
        // One 16 KiB request over blocks 8..12: the hot spot has one hit, below 2, so nothing
        // is promoted.
        h.engine.begin_request();
        for b in 8..12 {
            h.engine.access(&Request::read(ObjectId(b), 0, OBJ));
        }
        h.drain();
        assert!(h.queued.is_empty(), "one bio, one hit: {:?}", h.queued);
        // A second request to the spot is its second hit.
        h.engine.begin_request();
        h.engine.access(&Request::read(ObjectId(8), 0, OBJ));
        h.drain();
        assert_eq!(h.queued.len(), 1, "the second bio promotes");
        h.settle().unwrap();
    }

    /// Dirty blocks are cleaned once the device has been idle.
    #[test]
    fn idle_devices_get_cleaned() {
        let mut h = Harness::new("dm-cache-smq-like:idle=10s", 8, false);
        h.step(&Step::Write(1, true)).unwrap();
        h.step(&Step::Write(2, true)).unwrap();
        assert!(h.queued.is_empty(), "busy and under 75 % dirty: no cleaning");
        h.step(&Step::Tick).unwrap();
        assert_eq!(h.queued.len(), 2);
        h.settle().unwrap();
    }
}
