//! A bcache-like cache, re-implemented from the bcache documentation
//! (Documentation/admin-guide/bcache.rst and the sysfs knobs it lists), for comparing what
//! people run today against the papers' architectures.
//!
//! - `cache-mode`: `writethrough` (bcache's default: writes go to both devices and are cached),
//!   `writeback`, `writearound` (writes go to the HDD and drop a cached copy) or `none`.
//! - `sequential-cutoff` (4 MiB): a stream of sequential I/O that has reached this many bytes
//!   bypasses the cache, reads and writes alike (bcache tracks recent streams by where they
//!   ended; so do we, see [`super::seq_cutoff`]). A bypassed write drops a clean cached copy;
//!   one to dirty data is still absorbed, as bcache does when a write overlaps dirty keys.
//! - `writeback-percent` (10): bcache's write-back rate controller holds dirty data near this
//!   share of the cache ([`super::bcache_writeback_rate`]): a PI controller on the dirty bytes
//!   sets a rate every `writeback-rate-update-seconds`, and the writeback thread writes dirty
//!   blocks back in LBA order at that rate, at most `writeback-inflight` at a time, at normal
//!   I/O priority (bcache marks its write-back I/O idle-class only with `writeback_percent` 0);
//!   after 30 s without I/O it writes back at the highest rate. With `writeback-percent=0`
//!   write-back is unthrottled, in the idle class.
//! - `cutoff-writeback-sync` (70) and `cutoff-writeback` (40): bcache caches a write as dirty
//!   only while the share of the cache in use by dirty data (its `gc_stats.in_use`: clean
//!   buckets count as reclaimable) is at most 70 %, or 40 % for writes without REQ_SYNC; above
//!   it the write is written through. Traces carry no REQ_SYNC: `sync-writes` (true) says
//!   which cutoff applies. A write to a block that is dirty already stays a dirty write.
//!
//! Not modelled: buckets and their garbage collection (replacement here is per block, LRU by
//! default as bcache's bucket priorities approximate), congestion-based bypass, and journal
//! writes.

use super::bcache_writeback_rate::{RateKnobs, WritebackRate};
use super::cache::{Cache, delegate_to_cache};
use super::seq_cutoff::SeqCutoff;
use super::{ArchBuild, Architecture, Placement, Setup, Usage};
use crate::engine::Ctx;
use crate::params::{ConfigError, ParamSpec, Params};
use crate::{Level, Nanos, ObjectId, Outcome, Priority, Request, Served, Work};

/// What bcache's writeback thread writes back at most in one go (5000 sectors).
const MAX_WRITESIZE_IN_PASS: u64 = 5000 * 512;

const MODES: [&str; 4] = ["writethrough", "writeback", "writearound", "none"];

/// The bcache-like architecture.
#[derive(Debug)]
pub struct Bcache {
    cache: Cache,
    none: bool,
    seq: SeqCutoff,
    object_size: u64,
    bypassed: u64,
    /// The paced writeback thread (write-back mode with `writeback-percent` above 0).
    writeback: Option<WritebackRate>,
    /// Write-back mode: writes are cached dirty only while the dirty share is at most this
    /// (bcache's `cutoff_writeback_sync`, or `cutoff_writeback` for writes not marked sync).
    writeback_cutoff: Option<u64>,
    written_through_at_cutoff: u64,
    paced_writebacks: u64,
}

const PARAMS: &[ParamSpec] = &[
    ParamSpec { name: "cache-mode", default: "writethrough", help: "writethrough, writeback, writearound or none" },
    ParamSpec {
        name: "sequential-cutoff",
        default: "4MiB",
        help: "sequential streams this long bypass the cache (0 = never)",
    },
    ParamSpec {
        name: "writeback-percent",
        default: "10",
        help: "writeback: dirty share the write-back holds (0..=99)",
    },
    ParamSpec {
        name: "writeback-inflight",
        default: "64",
        help: "writeback: write-backs in flight at most (1..=65536)",
    },
    ParamSpec {
        name: "writeback-rate-minimum",
        default: "4KiB",
        help: "writeback: bytes per second at least (bcache: 8 sectors)",
    },
    ParamSpec {
        name: "writeback-rate-update-seconds",
        default: "5s",
        help: "writeback: how often the rate controller runs",
    },
    ParamSpec {
        name: "writeback-rate-p-term-inverse",
        default: "40",
        help: "writeback: the excess dirty data is written back over this many seconds (1..=10000)",
    },
    ParamSpec {
        name: "writeback-rate-i-term-inverse",
        default: "10000",
        help: "writeback: the integral term's divisor (1..=1000000)",
    },
    ParamSpec {
        name: "writeback-delay",
        default: "30s",
        help: "writeback: the thread sleeps this long after a pass that wrote back all it found",
    },
    ParamSpec {
        name: "cutoff-writeback-sync",
        default: "70",
        help: "writeback: above this percentage of the cache dirty, writes are written through (1..=100)",
    },
    ParamSpec {
        name: "cutoff-writeback",
        default: "40",
        help: "writeback: the same for writes not marked sync (1..=100)",
    },
    ParamSpec {
        name: "sync-writes",
        default: "true",
        help: "writeback: the traced writes carry REQ_SYNC (O_DIRECT, fsync): cutoff-writeback-sync applies, else cutoff-writeback",
    },
    ParamSpec {
        name: "idle-max-writeback-rate",
        default: "true",
        help: "writeback: after six rate updates (30 s) without I/O, write back at the highest rate",
    },
    ParamSpec { name: "collector", default: "lru", help: "block replacement (bcache: bucket LRU)" },
];

impl ArchBuild for Bcache {
    const NAME: &'static str = "bcache-like";
    const CAPS: crate::arch::Capabilities = crate::arch::Capabilities::BLOCK_CACHING;
    const VERSION: u32 = 2;
    const HELP: &'static str =
        "bcache-like: writethrough/writeback/writearound cache with sequential cutoff and writeback_percent";
    const PARAMS: &'static [ParamSpec] = PARAMS;
    const USES_COLLECTOR: bool = true;

    fn build(p: &mut Params, setup: &Setup) -> Result<Self, ConfigError> {
        let mode = p.choice("cache-mode", &MODES)?;
        let cutoff = p.size("sequential-cutoff", 0, 1 << 50)?;
        let wbp = p.u64("writeback-percent", 0, 99)?;
        let inflight = p.u64("writeback-inflight", 1, 65_536)?;
        let collector = p.string("collector")?;
        let rate_minimum = p.size("writeback-rate-minimum", 512, 1 << 40)?;
        let update = p.duration("writeback-rate-update-seconds", Nanos::from_millis(10), Nanos::from_secs(3600))?;
        let p_term_inverse = p.u64("writeback-rate-p-term-inverse", 1, 10_000)?;
        let i_term_inverse = p.u64("writeback-rate-i-term-inverse", 1, 1_000_000)?;
        let idle_max = p.bool("idle-max-writeback-rate")?;
        let delay = p.duration("writeback-delay", Nanos::ZERO, Nanos::from_secs(3600))?;
        let cutoff_sync = p.u64("cutoff-writeback-sync", 1, 100)?;
        let cutoff_other = p.u64("cutoff-writeback", 1, 100)?.min(cutoff_sync);
        let sync_writes = p.bool("sync-writes")?;
        let paced = mode == 1 && wbp > 0;
        let cache_mode = match mode {
            1 => "write-back",
            2 | 3 => "read-only",
            _ => "write-through",
        };
        // The paced thread does the cleaning; the cache's own threshold cleaner (unthrottled,
        // idle class) only with writeback-percent 0, from 1 % dirty.
        let (high, low) = if paced { (100, 99) } else { (wbp.max(1), wbp.saturating_sub(1)) };
        let knobs = [
            ("mode", cache_mode.to_string()),
            ("dirty-high", format!("{high}%")),
            ("dirty-low", format!("{low}%")),
            ("max-writebacks", inflight.to_string()),
            ("collector", collector),
        ];
        let cache = Cache::from_knobs(Self::NAME, &knobs, setup).map_err(|e| p.inconsistent(e.to_string()))?;
        Ok(Bcache {
            cache,
            none: mode == 3,
            seq: SeqCutoff::new(64, cutoff),
            object_size: setup.object_size,
            bypassed: 0,
            writeback: paced.then(|| {
                WritebackRate::new(RateKnobs {
                    target: setup.fast_capacity * wbp / 100,
                    minimum: rate_minimum,
                    update,
                    p_term_inverse,
                    i_term_inverse,
                    idle_max_after: idle_max.then(|| Nanos(update.0.saturating_mul(6))),
                    delay,
                })
            }),
            paced_writebacks: 0,
            writeback_cutoff: (mode == 1).then(|| {
                let percent = if sync_writes { cutoff_sync } else { cutoff_other };
                setup.fast_capacity * percent / 100
            }),
            written_through_at_cutoff: 0,
        })
    }
}

impl Bcache {
    /// The writeback thread: starts the write-backs its rate allows now.
    fn pump(&mut self, cx: &mut Ctx<'_>) {
        let Some(wb) = &mut self.writeback else { return };
        while wb.may_write(cx.now) {
            let Some(bytes) = self.cache.write_back_next(cx, Priority::Normal, MAX_WRITESIZE_IN_PASS) else {
                if !self.cache.has_dirty_waiting() {
                    wb.nothing_left(cx.now);
                }
                break;
            };
            wb.wrote(cx.now, bytes);
            self.paced_writebacks += 1;
        }
    }
}

/// The stream key and byte position of an access: each volume of a block trace is one address
/// space (the volume is the key, not part of the position: `volume << 48` times the block size
/// would saturate), each file is one.
pub(super) fn stream_position(object_size: u64, req: &Request) -> (u64, u64) {
    if object_size != 0 {
        (req.obj.volume(), req.obj.block().saturating_mul(object_size).saturating_add(req.offset))
    } else {
        (req.obj.0, req.offset)
    }
}

impl Architecture for Bcache {
    fn access(&mut self, cx: &mut Ctx<'_>, req: &Request) -> Served {
        if !req.op.is_data() {
            return self.cache.access(cx, req);
        }
        let (file, pos) = stream_position(self.object_size, req);
        let sequential = self.seq.access(file, pos, req.len);
        let admit = !self.none && !sequential;
        if !admit {
            self.bypassed += 1;
        }
        let over_cutoff = self.writeback_cutoff.is_some_and(|c| self.cache.dirty_bytes() > c);
        let served = if over_cutoff && req.op == crate::Op::Write {
            let served = self.cache.write_through(cx, req, admit);
            self.written_through_at_cutoff += u64::from(served.touches.contains(Level::Slow));
            served
        } else {
            self.cache.access_admitting(cx, req, admit)
        };
        if let Some(wb) = &mut self.writeback {
            wb.on_io(cx.now);
            self.pump(cx);
        }
        served
    }

    fn complete(&mut self, cx: &mut Ctx<'_>, work: &Work, outcome: Outcome) {
        self.cache.complete(cx, work, outcome);
        self.pump(cx);
    }

    fn tick(&mut self, cx: &mut Ctx<'_>) {
        let dirty = self.cache.dirty_bytes();
        if let Some(wb) = &mut self.writeback {
            wb.update_if_due(cx.now, dirty);
        }
        self.pump(cx);
    }

    fn next_tick(&self) -> Option<Nanos> {
        let wb = self.writeback.as_ref()?;
        if self.cache.dirty_bytes() == 0 {
            return None;
        }
        let update = wb.next_update();
        Some(if self.cache.can_write_back() { update.min(wb.next_write()) } else { update })
    }

    delegate_to_cache!(cache);

    fn counters(&self) -> Vec<(&'static str, u64)> {
        let mut c = vec![("accesses bypassed (sequential cutoff or mode none)", self.bypassed)];
        if self.writeback_cutoff.is_some() {
            c.push(("writes written through above the writeback cutoff", self.written_through_at_cutoff));
        }
        if let Some(wb) = &self.writeback {
            let (updates, idle, passes) = wb.updates();
            c.push(("write-backs started by the rate controller", self.paced_writebacks));
            c.push(("writeback rate updates", updates));
            c.push(("writeback rate updates at the idle maximum", idle));
            c.push(("writeback passes ended with the writeback-delay sleep", passes));
        }
        c
    }

    fn memory_bytes(&self) -> usize {
        self.cache.memory_bytes() + self.seq.memory_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{Harness, OBJ, Step, run_work};
    use crate::{Level, Nanos, ObjectId, Priority, Request, Setup, WorkKind, build_arch};

    /// Sequential streams past the cutoff bypass the cache; random I/O is cached.
    #[test]
    fn sequential_streams_past_the_cutoff_bypass_the_cache() {
        let mut h = Harness::new("bcache-like:sequential-cutoff=16KiB", 64, false);
        for o in 0..8 {
            h.step(&Step::Read(o, true)).unwrap();
        }
        run_work(&mut h);
        let cached: Vec<bool> = (0..8).map(|o| h.engine.placement(ObjectId(o)).on_fast).collect();
        assert_eq!(cached, [true, true, true, false, false, false, false, false], "from the 4th block (16 KiB) on");
        for o in [40, 20, 12] {
            h.step(&Step::Read(o, true)).unwrap();
        }
        run_work(&mut h);
        assert!([40, 20, 12].iter().all(|&o| h.engine.placement(ObjectId(o)).on_fast), "random reads are cached");
        // The first stream goes on (other streams do not break it): a bypassed write to the
        // cached block 12 drops it.
        for o in 8..13 {
            h.step(&Step::Write(o, true)).unwrap();
        }
        assert!(!h.engine.placement(ObjectId(12)).on_fast);
        let c: std::collections::BTreeMap<_, _> = h.engine.arch_counters().into_iter().collect();
        assert_eq!(c["accesses bypassed (sequential cutoff or mode none)"], 10);
        h.settle().unwrap();
    }

    /// Write-back is paced by the rate controller, at normal priority; after 30 s without I/O
    /// the rest goes at the highest rate. With writeback-percent 0 it is unthrottled, idle-class.
    #[test]
    fn writeback_is_paced_and_speeds_up_when_idle() {
        let writebacks = |h: &Harness| -> Vec<Priority> {
            h.queued.iter().filter(|w| w.kind == WorkKind::Writeback).map(|w| w.priority).collect()
        };
        let mut h = Harness::new("bcache-like:cache-mode=writeback,writeback-percent=25,sequential-cutoff=0", 8, false);
        for o in [5, 1, 7, 3] {
            h.step(&Step::Write(o, true)).unwrap();
        }
        // One 4 KiB block per 7.8 ms at the first rate (512 KiB/s); the writes came 1 µs apart.
        assert_eq!(writebacks(&h), vec![Priority::Normal]);
        h.step(&Step::Tick).unwrap();
        assert_eq!(writebacks(&h).len(), 4, "61 s without I/O: the rest at once");
        let c: std::collections::BTreeMap<_, _> = h.engine.arch_counters().into_iter().collect();
        assert_eq!(c["writeback rate updates at the idle maximum"], 1);
        assert_eq!(c["write-backs started by the rate controller"], 4);
        h.settle().unwrap();
        let mut h = Harness::new("bcache-like:cache-mode=writeback,writeback-percent=0,sequential-cutoff=0", 8, false);
        for o in [5, 1, 7, 3] {
            h.step(&Step::Write(o, true)).unwrap();
        }
        assert_eq!(writebacks(&h), vec![Priority::Idle(Nanos::ZERO); 4], "above 1 % dirty, all at once");
        h.settle().unwrap();
    }

    /// Above the write-back cutoff (70 % dirty; 40 % for writes not marked sync) writes are
    /// written through; a write to a block that is dirty already stays a dirty write.
    #[test]
    fn writes_above_the_cutoff_are_written_through() {
        use crate::Levels;
        // Up to and at the cutoff a write is cached dirty: 8 of 10 blocks at 70 %, 5 at 40 %.
        for (sync, cached_dirty) in [("true", 8), ("false", 5)] {
            let spec = format!("bcache-like:cache-mode=writeback,sequential-cutoff=0,sync-writes={sync}");
            let mut h = Harness::new(&spec, 10, false);
            let mut dirty_writes = 0;
            for o in 0..10 {
                let w = h.engine.access(&Request::write(ObjectId(o), 0, OBJ));
                if w.touches == Levels::one(Level::Fast) {
                    dirty_writes += 1;
                } else {
                    assert_eq!(w.touches, Levels::one(Level::Fast).with(Level::Slow), "{spec}: written through");
                }
            }
            assert_eq!(dirty_writes, cached_dirty, "{spec}");
            let again = h.engine.access(&Request::write(ObjectId(0), 0, OBJ));
            assert_eq!(again.touches, Levels::one(Level::Fast), "{spec}: block 0 is dirty: stays a dirty write");
            let c: std::collections::BTreeMap<_, _> = h.engine.arch_counters().into_iter().collect();
            assert_eq!(c["writes written through above the writeback cutoff"], 10 - dirty_writes, "{spec}");
            h.settle().unwrap();
        }
    }

    /// Each volume is its own address space: random blocks of volumes 16 and up (whose ids
    /// times the block size overflow) are not one endless sequential stream.
    #[test]
    fn high_volumes_are_not_one_sequential_stream() {
        let mut h = Harness::new("bcache-like:sequential-cutoff=16KiB", 256, false);
        let objects: Vec<u64> = (0..64u64).map(|i| ObjectId::block_of(16 + i % 40, i * 7919 % 1000).0).collect();
        for &o in &objects {
            h.engine.access(&Request::read(ObjectId(o), 0, OBJ));
        }
        let c: std::collections::BTreeMap<_, _> = h.engine.arch_counters().into_iter().collect();
        assert_eq!(c["accesses bypassed (sequential cutoff or mode none)"], 0);
        // A real stream in volume 20 still reaches the cutoff after 16 KiB.
        for b in 0..8 {
            h.engine.access(&Request::read(ObjectId::block_of(20, 5000 + b), 0, OBJ));
        }
        let c: std::collections::BTreeMap<_, _> = h.engine.arch_counters().into_iter().collect();
        assert_eq!(c["accesses bypassed (sequential cutoff or mode none)"], 5);
    }

    #[test]
    fn modes_and_knobs_are_validated() {
        let setup = Setup { fast_capacity: 64 * OBJ, slow_capacity: 0, object_size: OBJ };
        let mut e =
            crate::Engine::new(build_arch("bcache-like:cache-mode=none", &setup).unwrap(), crate::ManualClock::new());
        e.set_instant(true);
        e.access(&Request::read(ObjectId(1), 0, OBJ));
        assert_eq!(e.access(&Request::read(ObjectId(1), 0, OBJ)).level, Level::Slow, "mode none caches nothing");
        let err = build_arch("bcache-like:cache-mode=writeforward", &setup).unwrap_err().to_string();
        assert!(err.contains("writearound"), "{err}");
        assert!(build_arch("bcache-like:writeback-percent=100", &setup).unwrap_err().to_string().contains("0..=99"));
    }
}
