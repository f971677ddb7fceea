//! An Open-CAS-like cache, re-implemented from the Open CAS Linux documentation (cache modes,
//! promotion policies, sequential cutoff and cleaning policies, with their documented
//! defaults).
//!
//! - `cache-mode`: `wt` (write-through, the default), `wb` (write-back), `wa` (write-around:
//!   writes go to the core device and update lines already cached) or `pt` (pass-through).
//! - `promotion`: `always` (the default) or `nhit`: once the cache is at least `nhit-trigger`
//!   full (80 %), a core line enters only after `nhit-threshold` accesses (3), counted in a
//!   fixed-size table of recently seen lines.
//! - Sequential cutoff: `seq-cutoff=full` (the default: only while the cache is full),
//!   `always` or `never`; streams of `seq-cutoff-threshold` bytes (1 MiB) bypass the cache.
//! - Cleaning (write-back): `alru` (the default) wakes every `alru-wake-up` (20 s) and, if the
//!   core has been idle for `alru-activity` (10 s), writes back up to `alru-flush-max` (100)
//!   lines dirty for longer than `alru-staleness` (120 s), oldest first; `acp` cleans up to 128
//!   dirty lines every 10 ms regardless of activity; `nop` never cleans (dirty lines are written
//!   back only when evicted).
//!
//! Not modelled: the write-only mode, ACP's per-chunk ordering (we clean oldest first),
//! OCF's sequential-cutoff promotion count and its metadata I/O.

use super::bcache::stream_position;
use super::cache::{Cache, delegate_to_cache};
use super::seq_cutoff::SeqCutoff;
use super::{ArchBuild, Architecture, Placement, Setup, Usage};
use crate::engine::Ctx;
use crate::object_table::hash_id;
use crate::params::{ConfigError, ParamSpec, Params};
use crate::{Level, Nanos, ObjectId, Outcome, Request, Served, Work};

const MODES: [&str; 4] = ["wt", "wb", "wa", "pt"];
const SEQ_POLICIES: [&str; 3] = ["full", "always", "never"];
const CLEANING: [&str; 3] = ["alru", "acp", "nop"];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cleaning {
    Alru { wake_up: Nanos, staleness: Nanos, flush_max: usize, activity: Nanos },
    Acp { wake_up: Nanos, flush_max: usize },
    Nop,
}

#[derive(Clone, Copy, Debug, Default)]
struct Seen {
    /// Object id + 1 (0 = empty).
    tag: u64,
    count: u32,
}

/// The Open-CAS-like architecture.
#[derive(Debug)]
pub struct OpenCas {
    cache: Cache,
    object_size: u64,
    passthrough: bool,
    nhit: Option<(u32, f64)>,
    seen: Vec<Seen>,
    seq: SeqCutoff,
    seq_policy: usize,
    cleaning: Cleaning,
    last_io: Nanos,
    next_clean: Nanos,
    refused_nhit: u64,
    seq_bypassed: u64,
    cleaned: u64,
}

const PARAMS: &[ParamSpec] = &[
    ParamSpec { name: "cache-mode", default: "wt", help: "wt, wb, wa or pt" },
    ParamSpec { name: "promotion", default: "always", help: "always or nhit" },
    ParamSpec { name: "nhit-threshold", default: "3", help: "nhit: accesses before a line enters (2..=1000)" },
    ParamSpec { name: "nhit-trigger", default: "80", help: "nhit: applies from this cache occupancy, % (0..=100)" },
    ParamSpec { name: "seq-cutoff", default: "full", help: "sequential cutoff policy: full, always or never" },
    ParamSpec { name: "seq-cutoff-threshold", default: "1MiB", help: "sequential stream length that bypasses" },
    ParamSpec { name: "cleaning", default: "alru", help: "write-back cleaning: alru, acp or nop" },
    ParamSpec { name: "alru-wake-up", default: "20s", help: "alru: interval between cleaning rounds" },
    ParamSpec { name: "alru-staleness", default: "120s", help: "alru: clean lines dirty for longer than this" },
    ParamSpec { name: "alru-flush-max", default: "100", help: "alru: lines per round at most (1..=10000)" },
    ParamSpec { name: "alru-activity", default: "10s", help: "alru: clean only after this long without I/O" },
    ParamSpec { name: "collector", default: "lru", help: "eviction (Open CAS: LRU)" },
];

impl ArchBuild for OpenCas {
    const NAME: &'static str = "open-cas-like";
    const CAPS: crate::arch::Capabilities = crate::arch::Capabilities::BLOCK_CACHING;
    const VERSION: u32 = 2;
    const HELP: &'static str =
        "Open-CAS-like: wt/wb/wa/pt cache, always/nhit promotion, sequential cutoff, alru/acp cleaning";
    const PARAMS: &'static [ParamSpec] = PARAMS;
    const USES_COLLECTOR: bool = true;

    fn build(p: &mut Params, setup: &Setup) -> Result<Self, ConfigError> {
        let mode = p.choice("cache-mode", &MODES)?;
        let nhit = p.choice("promotion", &["always", "nhit"])? == 1;
        let threshold = p.u64("nhit-threshold", 2, 1000)? as u32;
        let trigger = p.percent("nhit-trigger", 0.0, 100.0)?;
        let seq_policy = p.choice("seq-cutoff", &SEQ_POLICIES)?;
        let seq_threshold = p.size("seq-cutoff-threshold", 1, 1 << 50)?;
        let cleaning = match p.choice("cleaning", &CLEANING)? {
            0 => Cleaning::Alru {
                wake_up: p.duration("alru-wake-up", Nanos::from_millis(1), Nanos::from_secs(3600))?,
                staleness: p.duration("alru-staleness", Nanos::ZERO, Nanos::from_secs(86_400))?,
                flush_max: p.u64("alru-flush-max", 1, 10_000)? as usize,
                activity: p.duration("alru-activity", Nanos::ZERO, Nanos::from_secs(86_400))?,
            },
            1 => Cleaning::Acp { wake_up: Nanos::from_millis(10), flush_max: 128 },
            _ => Cleaning::Nop,
        };
        if !matches!(cleaning, Cleaning::Alru { .. }) {
            for k in ["alru-wake-up", "alru-staleness", "alru-flush-max", "alru-activity"] {
                if p.has(k) {
                    return Err(p.inconsistent(format!("{k} applies to cleaning=alru only")));
                }
            }
        }
        let collector = p.string("collector")?;
        let (cache_mode, allocate) = match mode {
            1 => ("write-back", true),
            2 => ("write-through", false),
            _ => ("write-through", true),
        };
        let knobs = [
            ("mode", cache_mode.to_string()),
            ("write-allocate", allocate.to_string()),
            // Only the cleaning policy and eviction write back.
            ("dirty-high", "100%".to_string()),
            ("dirty-low", "99%".to_string()),
            // ALRU cleans the oldest dirty lines.
            ("writeback-order", "age".to_string()),
            ("collector", collector),
        ];
        let knobs: Vec<_> = knobs.into_iter().filter(|(k, _)| mode == 1 || !k.starts_with("dirty")).collect();
        let cache = Cache::from_knobs(Self::NAME, &knobs, setup).map_err(|e| p.inconsistent(e.to_string()))?;
        let lines = (setup.fast_capacity / setup.object_size.max(4096)).clamp(1024, 1 << 26).next_power_of_two();
        let next_clean = match cleaning {
            Cleaning::Alru { wake_up, .. } | Cleaning::Acp { wake_up, .. } => wake_up,
            Cleaning::Nop => Nanos(u64::MAX),
        };
        Ok(OpenCas {
            cache,
            object_size: setup.object_size,
            passthrough: mode == 3,
            nhit: nhit.then_some((threshold, trigger)),
            seen: if nhit { vec![Seen::default(); lines as usize] } else { Vec::new() },
            seq: SeqCutoff::new(128, if seq_policy == 2 { 0 } else { seq_threshold }),
            seq_policy,
            cleaning: if mode == 1 { cleaning } else { Cleaning::Nop },
            last_io: Nanos::ZERO,
            next_clean: if mode == 1 { next_clean } else { Nanos(u64::MAX) },
            refused_nhit: 0,
            seq_bypassed: 0,
            cleaned: 0,
        })
    }
}

impl OpenCas {
    /// Counts an access to an uncached line; returns how many times it has been seen.
    fn count_access(&mut self, obj: ObjectId) -> u32 {
        let i = (hash_id(obj) as usize) & (self.seen.len() - 1);
        let tag = obj.0.wrapping_add(1);
        let e = &mut self.seen[i];
        if e.tag == tag {
            e.count = e.count.saturating_add(1);
        } else {
            *e = Seen { tag, count: 1 };
        }
        e.count
    }
}

impl Architecture for OpenCas {
    fn access(&mut self, cx: &mut Ctx<'_>, req: &Request) -> Served {
        if !req.op.is_data() {
            return self.cache.access(cx, req);
        }
        self.last_io = cx.now;
        if self.passthrough {
            return self.cache.access_admitting(cx, req, false);
        }
        let (file, pos) = stream_position(self.object_size, req);
        let sequential = self.seq.access(file, pos, req.len);
        let occupancy = self.cache.occupancy();
        let full = self.cache.usage().fast_used + self.object_size.max(1) > self.cache.usage().fast_capacity;
        let cutoff = sequential && (self.seq_policy == 1 || (self.seq_policy == 0 && full));
        if cutoff {
            self.seq_bypassed += 1;
            return self.cache.access_admitting(cx, req, false);
        }
        let mut admit = true;
        if let Some((threshold, trigger)) = self.nhit
            && occupancy >= trigger
            && !self.cache.holds(req.obj)
            && self.count_access(req.obj) < threshold
        {
            self.refused_nhit += 1;
            admit = false;
        }
        self.cache.access_admitting(cx, req, admit)
    }

    fn complete(&mut self, cx: &mut Ctx<'_>, work: &Work, outcome: Outcome) {
        self.cache.complete(cx, work, outcome)
    }

    fn tick(&mut self, cx: &mut Ctx<'_>) {
        match self.cleaning {
            Cleaning::Alru { wake_up, staleness, flush_max, activity } => {
                if cx.now.saturating_sub(self.last_io) >= activity {
                    let n = self.cache.clean_dirty_before(cx, cx.now.saturating_sub(staleness), flush_max);
                    self.cleaned += n as u64;
                }
                self.next_clean = cx.now.saturating_add(wake_up);
            }
            Cleaning::Acp { wake_up, flush_max } => {
                self.cleaned += self.cache.clean_dirty_before(cx, cx.now, flush_max) as u64;
                self.next_clean = cx.now.saturating_add(wake_up);
            }
            Cleaning::Nop => self.next_clean = Nanos(u64::MAX),
        }
    }

    fn next_tick(&self) -> Option<Nanos> {
        (self.next_clean != Nanos(u64::MAX)).then_some(self.next_clean)
    }

    delegate_to_cache!(cache);

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("insertions refused by nhit", self.refused_nhit),
            ("accesses past the sequential cutoff", self.seq_bypassed),
            ("lines cleaned by the cleaning policy", self.cleaned),
        ]
    }

    fn memory_bytes(&self) -> usize {
        self.cache.memory_bytes() + self.seq.memory_bytes() + self.seen.capacity() * std::mem::size_of::<Seen>()
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{Harness, OBJ, Step, run_work};
    use crate::{ObjectId, Setup, build_arch};

    /// With nhit, a line enters a nearly full cache only on its third access.
    #[test]
    fn nhit_admits_on_the_threshold_once_triggered() {
        let mut h = Harness::new("open-cas-like:promotion=nhit,nhit-trigger=50", 4, false);
        for o in [0, 1] {
            h.step(&Step::Read(o, true)).unwrap();
        }
        run_work(&mut h);
        assert!(h.engine.placement(ObjectId(1)).on_fast, "below the trigger: always");
        for round in 1..=3 {
            h.step(&Step::Read(9, true)).unwrap();
            run_work(&mut h);
            assert_eq!(h.engine.placement(ObjectId(9)).on_fast, round == 3, "access {round}");
        }
        h.settle().unwrap();
    }

    /// ALRU writes back lines dirty for longer than the staleness time once the core is idle,
    /// no more than flush-max per round.
    #[test]
    fn alru_cleans_stale_lines_when_idle() {
        let mut h = Harness::new(
            "open-cas-like:cache-mode=wb,alru-staleness=30s,alru-activity=5s,alru-flush-max=2,alru-wake-up=1s",
            8,
            false,
        );
        for o in 0..3 {
            h.step(&Step::Write(o, true)).unwrap();
        }
        assert!(h.queued.is_empty());
        h.step(&Step::Tick).unwrap(); // 61 s later: idle, all three stale; two per round
        assert_eq!(h.queued.len(), 2);
        h.step(&Step::Tick).unwrap();
        assert_eq!(h.queued.len(), 3);
        h.settle().unwrap();
    }

    /// Sequential cutoff `full` applies only once the cache is full; `always` at once.
    #[test]
    fn sequential_cutoff_policies() {
        for (policy, cached_at_start) in [("full", true), ("always", false)] {
            let mut h =
                Harness::new(&format!("open-cas-like:seq-cutoff={policy},seq-cutoff-threshold=8KiB"), 16, false);
            for o in 0..4 {
                h.step(&Step::Read(o, true)).unwrap();
            }
            run_work(&mut h);
            assert_eq!(h.engine.placement(ObjectId(3)).on_fast, cached_at_start, "{policy}");
        }
    }

    #[test]
    fn knobs_are_validated() {
        let setup = Setup { fast_capacity: 64 * OBJ, slow_capacity: 0, object_size: OBJ };
        let err = |spec: &str| build_arch(spec, &setup).unwrap_err().to_string();
        assert!(err("open-cas-like:cache-mode=wx").contains("wt, wb, wa, pt"));
        assert!(err("open-cas-like:cleaning=acp,alru-staleness=5s").contains("cleaning=alru only"));
        assert!(err("open-cas-like:nhit-threshold=1").contains("2..=1000"));
    }
}
