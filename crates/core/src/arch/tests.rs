//! Conformance of every architecture × collector × mode against a model of the devices'
//! contents. A front-end model executes the engine's work in random order with random outcomes
//! (including failures and cancellations, and accesses between a copy's execution and its
//! completion), tracks which version of each object every device holds, and checks after every
//! step that:
//! - every read is served from a level holding the latest version,
//! - the fast tier never physically holds more bytes than its capacity,
//! - the architecture's own bookkeeping is consistent,
//! - and after a final flush, the slow tier holds the latest version of every object: no dirty
//!   data is ever lost.

use std::collections::BTreeMap;

use proptest::prelude::*;

use crate::collector::COLLECTORS;
use crate::{Engine, Level, ManualClock, Nanos, ObjectId, Outcome, Request, Setup, Work, WorkKind, build_arch};

const GARBAGE: u64 = u64::MAX;
pub(super) const OBJ: u64 = 4096;

#[derive(Clone, Debug)]
pub(super) enum Step {
    Read(u64, bool),
    Write(u64, bool),
    Delete(u64),
    Execute(usize),
    Complete(usize, u8),
    Flush,
    Tick,
}

pub(super) fn steps() -> impl Strategy<Value = Vec<Step>> {
    let step = prop_oneof![
        4 => (0u64..12, any::<bool>()).prop_map(|(o, w)| Step::Read(o, w)),
        4 => (0u64..12, any::<bool>()).prop_map(|(o, w)| Step::Write(o, w)),
        1 => (0u64..12).prop_map(Step::Delete),
        3 => (0usize..8).prop_map(Step::Execute),
        3 => (0usize..8, 0u8..10).prop_map(|(i, o)| Step::Complete(i, o)),
        1 => Just(Step::Flush),
        1 => Just(Step::Tick),
    ];
    proptest::collection::vec(step, 1..250)
}

#[derive(Default)]
struct Devices {
    latest: BTreeMap<u64, u64>,
    fast: BTreeMap<u64, u64>,
    /// Where on the SSD the copy in `fast` is, for architectures that place objects in slots
    /// (an invalidation of another slot of the same object leaves it alone).
    fast_at: BTreeMap<u64, u64>,
    slow: BTreeMap<u64, u64>,
    /// RAM copies held by the front end while an object is promoted or prefetched.
    ram: BTreeMap<u64, u64>,
    /// Objects whose RAM copy absorbed a write (the front end must not lose it).
    ram_written: std::collections::BTreeSet<u64>,
    /// Objects deleted since their last write: content undefined.
    deleted: std::collections::BTreeSet<u64>,
    /// Fast copies that hold only the sectors a partial write wrote (a partial block absorbed
    /// by a write-back cache), with the versions whose other sectors are the same: the slow
    /// tier must hold one of these for the block to be read (assembled) or written back.
    partial: BTreeMap<u64, std::collections::BTreeSet<u64>>,
    /// Copies issued to an object that was cached already: the fill of a partial block's
    /// missing sectors, which writes only those; once run, whether the HDD still held the
    /// version those sectors came from (the block is whole, or wrong, when it completes).
    completions: BTreeMap<crate::WorkId, Option<bool>>,
    next_version: u64,
}

impl Devices {
    fn latest(&self, o: u64) -> u64 {
        self.latest.get(&o).copied().unwrap_or(0)
    }
    fn level(&mut self, l: Level) -> &mut BTreeMap<u64, u64> {
        match l {
            Level::Fast => &mut self.fast,
            Level::Ram => &mut self.ram,
            Level::Slow => &mut self.slow,
        }
    }
    /// Whether the slow tier holds the sectors a partial fast copy of `o` lacks.
    fn partial_base_intact(&self, o: u64) -> bool {
        let slow = self.slow.get(&o).copied().unwrap_or(0);
        self.partial.get(&o).is_some_and(|lineage| lineage.contains(&slow))
    }
    /// What level `l` holds for object `o`.
    fn holds(&self, l: Level, o: u64) -> Option<u64> {
        match l {
            Level::Fast => self.fast.get(&o).copied(),
            Level::Slow => Some(self.slow.get(&o).copied().unwrap_or(0)),
            Level::Ram => self.ram.get(&o).copied(),
        }
    }
}

pub(super) struct Harness {
    pub(super) engine: Engine<ManualClock>,
    clock: ManualClock,
    dev: Devices,
    pub(super) queued: Vec<Work>,
    executed: Vec<Work>,
    capacity: u64,
    variable: bool,
    name: String,
    seen: std::collections::BTreeSet<u64>,
}

impl Harness {
    pub(super) fn new(spec: &str, capacity_objects: u64, variable: bool) -> Harness {
        let clock = ManualClock::new();
        let setup = Setup {
            fast_capacity: capacity_objects * OBJ,
            slow_capacity: 0,
            object_size: if variable { 0 } else { OBJ },
        };
        let arch = build_arch(spec, &setup).unwrap_or_else(|e| panic!("{spec}: {e}"));
        Harness {
            engine: Engine::new(arch, clock.clone()),
            clock,
            dev: Devices::default(),
            queued: Vec::new(),
            executed: Vec::new(),
            capacity: capacity_objects * OBJ,
            variable,
            name: spec.to_string(),
            seen: std::collections::BTreeSet::new(),
        }
    }

    /// The harness's clock now.
    pub(super) fn now(&self) -> Nanos {
        crate::Clock::now(&self.clock)
    }

    /// Moves the clock forward (timers are not run).
    pub(super) fn clock_advance_secs(&mut self, s: u64) {
        self.clock.advance(Nanos::from_secs(s));
    }

    fn size_of(&self, _o: u64) -> u64 {
        OBJ
    }

    fn holds(&self, l: Level, o: u64) -> Option<u64> {
        self.dev.holds(l, o)
    }

    /// The first time an object is seen, its initial content (version 0) is wherever the
    /// architecture starts it (GreenDM and Linear start some objects on the SSD).
    fn observe(&mut self, o: u64) {
        if self.seen.insert(o) {
            let p = self.engine.placement(ObjectId(o));
            if p.on_fast && !p.on_slow {
                self.dev.fast.insert(o, 0);
            }
        }
    }

    /// Takes new work; invalidations apply at once, in order. A promotion's source is read
    /// into RAM when it is issued (GreenDM holds I/O to the extent until it is there).
    /// Whether the front end holds object `o` in RAM.
    pub(super) fn ram_holds(&self, o: u64) -> bool {
        self.dev.ram.contains_key(&o)
    }

    pub(super) fn drain(&mut self) {
        let work: Vec<Work> = self.engine.drain_work().collect();
        for w in work {
            if w.from != Level::Ram {
                self.observe(w.obj.0);
            }
            if w.kind == WorkKind::Invalidate {
                if w.from == Level::Ram {
                    self.dev.ram.remove(&w.obj.0);
                    self.dev.ram_written.remove(&w.obj.0);
                } else if w.fast_addr == crate::LOGICAL_ADDR
                    || self.dev.fast_at.get(&w.obj.0).is_none_or(|&a| a == w.fast_addr)
                {
                    self.dev.fast.remove(&w.obj.0);
                    self.dev.fast_at.remove(&w.obj.0);
                    self.dev.partial.remove(&w.obj.0);
                }
            } else {
                // The device fills only a mapped block's invalid sectors (none when whole).
                let completion =
                    w.kind == WorkKind::Copy && w.from == Level::Slow && self.engine.placement(w.obj).on_fast;
                if completion {
                    self.dev.completions.insert(w.id, None);
                } else if matches!(w.kind, WorkKind::Promote | WorkKind::Demote | WorkKind::Copy)
                    && w.from != Level::Ram
                {
                    let v = self.holds(w.from, w.obj.0).unwrap_or(0);
                    self.dev.ram.insert(w.obj.0, v);
                    self.dev.ram_written.remove(&w.obj.0);
                }
                self.queued.push(w);
            }
        }
    }

    fn check_physical(&self) -> Result<(), TestCaseError> {
        // Objects an architecture starts on the SSD count only once touched (the rest of its
        // initial residents are implicit), so this bound is conservative for those.
        let bytes: u64 = self.dev.fast.keys().map(|&o| self.size_of(o)).sum();
        prop_assert!(bytes <= self.capacity, "{}: SSD holds {} bytes, capacity {}", self.name, bytes, self.capacity);
        if let Err(e) = self.engine.check_invariants() {
            return Err(TestCaseError::fail(format!("{}: {e}", self.name)));
        }
        let u = self.engine.usage();
        prop_assert!(u.fast_used <= u.fast_capacity);
        Ok(())
    }

    fn request(&self, o: u64, whole: bool, write: bool) -> Request {
        let (offset, len) = if whole || self.variable { (0, OBJ) } else { (512, 1024) };
        if write { Request::write(ObjectId(o), offset, len) } else { Request::read(ObjectId(o), offset, len) }
    }

    /// What the front end leaves on the devices once a move, copy or write-back is reported.
    /// The RAM copy (GreenDM's promotion copy, OTF-AST's buffer merged with the source) goes to
    /// the object's home when it absorbed writes: the destination on success, the source on
    /// failure. A completed move leaves nothing at its source; a failed write may tear its
    /// destination.
    fn after_completion(&mut self, w: &Work, outcome: Outcome) {
        let o = w.obj.0;
        let p = self.engine.placement(ObjectId(o));
        let done = outcome == Outcome::Done;
        if w.from == Level::Ram {
            // A merge of buffered writes (OTF-AST): the home now holds them.
            if done && let Some(&v) = self.dev.ram.get(&o) {
                self.dev.level(w.to).insert(o, v);
                if w.to == Level::Fast {
                    self.dev.fast_at.insert(o, w.fast_addr);
                }
            }
            if !p.moving && !p.in_ram {
                self.dev.ram.remove(&o);
                self.dev.ram_written.remove(&o);
            }
            return;
        }
        // While the architecture still buffers (a merge follows), the RAM copy stays.
        let (ram, keep) = (self.dev.ram.get(&o).copied(), p.moving && self.dev.ram_written.contains(&o));
        if !keep {
            self.dev.ram.remove(&o);
        }
        let ram = if keep || self.dev.ram_written.remove(&o) { ram } else { None };
        if let Some(ran) = self.dev.completions.remove(&w.id) {
            // A partial block's fill wrote only sectors that were not valid: a failed one
            // leaves the block as it was; a done one makes it whole (a whole write meanwhile
            // made it whole already).
            if done && self.dev.partial.contains_key(&o) && self.dev.fast.contains_key(&o) {
                if ran != Some(true) {
                    self.dev.fast.insert(o, GARBAGE);
                }
                self.dev.partial.remove(&o);
            }
            return;
        }
        match w.kind {
            WorkKind::Promote | WorkKind::Copy => {
                if done && p.on_fast {
                    if let Some(v) = ram {
                        self.dev.fast.insert(o, v);
                        self.dev.partial.remove(&o);
                    }
                    if w.kind == WorkKind::Promote && !p.on_slow {
                        self.dev.slow.insert(o, GARBAGE);
                    }
                } else {
                    self.dev.fast.remove(&o);
                    self.dev.partial.remove(&o);
                    if let Some(v) = ram {
                        self.dev.slow.insert(o, v);
                    }
                }
            }
            WorkKind::Demote => {
                if done && !p.on_fast {
                    self.dev.fast.remove(&o);
                    self.dev.partial.remove(&o);
                    if let Some(v) = ram {
                        self.dev.slow.insert(o, v);
                    }
                } else {
                    self.dev.slow.insert(o, GARBAGE);
                    if let Some(v) = ram {
                        self.dev.fast.insert(o, v);
                    }
                }
            }
            WorkKind::Writeback if !done => {
                if let Some(lineage) = self.dev.partial.get_mut(&o) {
                    // A failed write of a partial block tears only its cached sectors.
                    self.dev.next_version += 1;
                    let torn = self.dev.next_version;
                    lineage.insert(torn);
                    self.dev.slow.insert(o, torn);
                } else {
                    self.dev.slow.insert(o, GARBAGE);
                }
            }
            _ => {}
        }
    }

    pub(super) fn step(&mut self, step: &Step) -> Result<(), TestCaseError> {
        self.clock.advance(Nanos(1000));
        if let Step::Read(o, _) | Step::Write(o, _) | Step::Delete(o) = *step {
            self.observe(o);
        }
        match *step {
            Step::Read(o, whole) => {
                // The front end serves the access first, then runs the work it triggered.
                let served = self.engine.access(&self.request(o, whole, false));
                if served.keep_in_ram {
                    // The front end keeps the whole object it read (re-reading it if partial).
                    let v = self.holds(served.level, o).unwrap_or(0);
                    self.dev.ram.insert(o, v);
                }
                if !self.dev.deleted.contains(&o) {
                    let want = self.dev.latest(o);
                    // A read that touches RAM takes what RAM holds over the rest (a buffer of
                    // newer sectors merged with the source): the RAM copy must be the latest.
                    let level = if served.touches.contains(Level::Ram) { Level::Ram } else { served.level };
                    let got = if self.dev.partial.contains_key(&o) {
                        // A partial block: only a read assembled from both tiers is whole.
                        let both = served.touches.contains(Level::Fast) && served.touches.contains(Level::Slow);
                        match level {
                            Level::Slow if both && self.dev.partial_base_intact(o) => self.holds(Level::Fast, o),
                            Level::Slow => self.holds(Level::Slow, o),
                            _ => Some(GARBAGE),
                        }
                    } else {
                        self.holds(level, o)
                    };
                    prop_assert_eq!(
                        got,
                        Some(want),
                        "{}: read of {} served by {:?} returns a stale or missing version",
                        &self.name,
                        o,
                        served.level
                    );
                }
                self.drain();
            }
            Step::Write(o, whole) => {
                let req = self.request(o, whole, true);
                let whole = req.offset == 0 && req.len == OBJ;
                let before = self.dev.latest(o);
                // After a delete the content is undefined until a whole-object write.
                let was_deleted = if whole { self.dev.deleted.remove(&o) } else { self.dev.deleted.contains(&o) };
                self.dev.next_version += 1;
                let v = self.dev.next_version;
                let served = self.engine.access(&req);
                prop_assert!(!served.touches.is_empty());
                for l in served.touches.iter() {
                    let holds = self.holds(l, o);
                    let mut new = if whole || (holds == Some(before) && !was_deleted) { v } else { GARBAGE };
                    if l == Level::Fast && whole {
                        self.dev.partial.remove(&o);
                    } else if l == Level::Fast && holds.is_none() && !was_deleted {
                        // A partial write absorbed into an uncached block: the SSD holds only
                        // the written sectors; the rest are those of `before`, on the HDD.
                        self.dev.partial.insert(o, [before, v].into_iter().collect());
                        new = v;
                    }
                    if !whole && let Some(lineage) = self.dev.partial.get_mut(&o) {
                        lineage.insert(v);
                    }
                    self.dev.level(l).insert(o, new);
                    if l == Level::Ram {
                        self.dev.ram_written.insert(o);
                    }
                }
                self.dev.latest.insert(o, v);
                self.drain();
            }
            Step::Delete(o) => {
                self.engine.access(&Request::op(ObjectId(o), crate::Op::Delete));
                self.drain();
                self.dev.deleted.insert(o);
            }
            Step::Execute(i) => {
                if self.queued.is_empty() {
                    return Ok(());
                }
                let w = self.queued.remove(i % self.queued.len());
                let o = w.obj.0;
                match w.kind {
                    // A RAM cache level writes its copy out (HCA's transient buffer, L2ARC's
                    // feed) as it is when the write runs.
                    _ if w.from == Level::Ram && self.engine.placement(w.obj).in_ram => {
                        if let Some(&v) = self.dev.ram.get(&o) {
                            self.dev.level(w.to).insert(o, v);
                            if w.to == Level::Fast {
                                self.dev.fast_at.insert(o, w.fast_addr);
                            }
                        }
                    }
                    // Architecture metadata written from RAM carries no object data; buffered
                    // writes (OTF-AST) land at completion.
                    _ if w.from == Level::Ram => {}
                    WorkKind::Copy if self.dev.completions.contains_key(&w.id) => {
                        // Only the sectors the SSD copy lacks are read from the HDD: they are
                        // right when the HDD still holds the version they came from.
                        let intact = self.dev.partial_base_intact(o);
                        self.dev.completions.insert(w.id, Some(intact));
                    }
                    WorkKind::Copy | WorkKind::Promote => {
                        let v = match self.dev.ram.get(&o) {
                            Some(&v) => v,
                            None => self.holds(Level::Slow, o).unwrap_or(0),
                        };
                        self.dev.fast.insert(o, v);
                        self.dev.partial.remove(&o);
                    }
                    WorkKind::Writeback | WorkKind::Demote => {
                        let mut v = self.dev.fast.get(&o).copied().unwrap_or(GARBAGE);
                        if self.dev.partial.contains_key(&o) && !self.dev.partial_base_intact(o) {
                            // Only the cached sectors are written: the rest must already be right.
                            v = GARBAGE;
                        }
                        self.dev.slow.insert(o, v);
                    }
                    WorkKind::Invalidate => unreachable!(),
                }
                self.executed.push(w);
            }
            Step::Complete(i, o) => {
                if self.executed.is_empty() {
                    return Ok(());
                }
                let w = self.executed.remove(i % self.executed.len());
                let outcome = match o {
                    0 => Outcome::Failed,
                    1 => Outcome::Cancelled,
                    _ => Outcome::Done,
                };
                self.engine.complete(w.id, outcome).map_err(|e| TestCaseError::fail(e.to_string()))?;
                if w.obj.0 != u64::MAX {
                    self.after_completion(&w, outcome);
                }
                prop_assert!(self.engine.complete(w.id, outcome).is_err(), "double completion accepted");
                self.drain();
            }
            Step::Flush => {
                self.engine.flush();
                self.drain();
            }
            Step::Tick => {
                self.clock.advance(Nanos::from_secs(61));
                self.engine.tick();
                self.drain();
            }
        }
        self.check_physical()
    }

    /// Runs every queued work to successful completion, flushing, until quiet; then every
    /// object's latest version must be at its home (the slow tier for caches).
    pub(super) fn settle(&mut self) -> Result<(), TestCaseError> {
        for _ in 0..10_000 {
            self.engine.flush();
            self.drain();
            if self.queued.is_empty() && self.executed.is_empty() {
                break;
            }
            while !self.queued.is_empty() {
                self.step(&Step::Execute(0))?;
            }
            while !self.executed.is_empty() {
                self.step(&Step::Complete(0, 9))?;
            }
        }
        prop_assert_eq!(self.engine.usage().dirty_bytes, 0, "{}: dirty bytes remain after flush", &self.name);
        for (&o, &v) in &self.dev.latest.clone() {
            if self.dev.deleted.contains(&o) {
                continue;
            }
            // Caches must have written everything back; tiering keeps one home per object.
            let p = self.engine.placement(ObjectId(o));
            let home = if p.on_slow { Level::Slow } else { Level::Fast };
            prop_assert!(p.on_slow || p.on_fast, "{}: object {} is nowhere", &self.name, o);
            prop_assert_eq!(self.holds(home, o).unwrap_or(0), v, "{}: object {} lost its latest write", &self.name, o);
        }
        Ok(())
    }
}

fn specs() -> Vec<String> {
    let mut v = vec!["ssd-only".to_string(), "hdd-only".to_string(), "linear".to_string()];
    for mode in ["read-only", "write-through", "write-back"] {
        // The offline collector needs a simulator's future (the cache code it runs is the same).
        for c in COLLECTORS.iter().filter(|c| !crate::collector::belady::is_offline(c.name)) {
            v.push(format!("cache:mode={mode},collector={}", c.name));
        }
    }
    v.push("cache:mode=write-through,write-allocate=false".into());
    v.push("cache:mode=write-back,dirty-high=2,dirty-low=1,max-writebacks=1".into());
    v.push("greendm-tiering".into());
    v.push("greendm-tiering:pt=2,mcml=1,reserved=0,md-flush=1s,md-flush-time=30s".into());
    v.push("greendm-tiering:mcml=3,lt=0,ht=1,window=1s".into());
    v.push("greendm-tiering:scanned=true,mcml=2,lt=0,ht=1".into());
    v.push("greendm-caching".into());
    v.push("greendm-caching:pt=2,mcml=1,wb-queue=1,md-flush=1s,md-flush-time=30s".into());
    v.push("greendm-caching:lt=0,ht=1,wb-queue=2,window=1s".into());
    v.push("otf-ast:t=60s,n=2,c=1,o=1,max-moves=2,promote-time=0,demote-time=0".into());
    v.push("otf-ast:t=60s,n=1,c=2,o=2".into());
    v.push("static-tiering:period=2min,m=2,max-moves=2".into());
    v.push("flashcache-like:assoc=2,dirty-thresh=50,max-clean-set=1,max-clean=1".into());
    v.push("flashcache-like:assoc=1".into());
    v.push("hca:l1=8KiB,tb=8KiB".into());
    v.push("hca:l1=4KiB,tb=0,collector=lru".into());
    v.push("hca:l1=12KiB,tb=4KiB".into());
    v.push("hca:l1=8KiB,l2=false".into());
    v.push("zfs-l2arc-like:l1=8KiB,l2=false".into());
    v.push("zfs-l2arc-like:l1=8KiB,write-max=4KiB,write-boost=4KiB,headroom=1".into());
    v.push("zfs-l2arc-like:l1=4KiB,collector=lru,write-boost=0".into());
    v.push("zfs-l2arc-like:l1=16KiB,collector=fifo".into());
    v.push("bcache-like:cache-mode=writeback,writeback-percent=20,sequential-cutoff=12KiB".into());
    v.push("bcache-like:sequential-cutoff=8KiB".into());
    v.push("bcache-like:cache-mode=writearound".into());
    v.push("bcache-like:cache-mode=writeback,cutoff-writeback-sync=30,writeback-rate-update-seconds=10ms".into());
    v.push("bcache-like:cache-mode=writeback,writeback-percent=0,sync-writes=false,cutoff-writeback=20".into());
    v.push("dm-cache-smq-like:hotspot=2,promote-hits=2,migration-threshold=8KiB,idle=30s".into());
    v.push("dm-cache-smq-like:mode=writethrough".into());
    v.push("open-cas-like:cache-mode=wb,promotion=nhit,nhit-trigger=0,seq-cutoff=always,seq-cutoff-threshold=8KiB,alru-staleness=0,alru-activity=0".into());
    v.push("open-cas-like:cache-mode=wb,cleaning=acp".into());
    v.push("open-cas-like:cache-mode=wa".into());
    v.push("open-cas-like:cache-mode=pt".into());
    // Every registered block architecture is tested, with its defaults when the list above
    // does not name it: a new one needs no line here.
    for a in super::ARCHITECTURES.iter().filter(|a| a.caps.runs_on_blocks()) {
        if !v.iter().any(|s| s.split(':').next() == Some(a.name)) {
            v.push(a.name.to_string());
        }
    }
    v
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn every_architecture_keeps_data_safe(ops in steps(), cap in 1u64..6, variable in any::<bool>()) {
        for spec in specs() {
            if spec.starts_with("ssd-only") {
                // SSD-only has no capacity limit by design; reads come from the SSD which the
                // device model says holds every write.
                continue;
            }
            // Architectures of fixed-size blocks or extents do not take variable-size objects.
            if variable && crate::ArchSpec::parse(&spec).is_ok_and(|a| !a.info.caps.takes_variable_objects()) {
                continue;
            }
            let mut h = Harness::new(&spec, cap, variable);
            for s in &ops {
                h.step(s)?;
            }
            h.settle()?;
        }
    }
}

#[test]
fn bad_specs_are_refused_with_the_valid_choices() {
    let setup = Setup { fast_capacity: 1 << 20, slow_capacity: 0, object_size: 4096 };
    let e = build_arch("cachee", &setup).unwrap_err().to_string();
    assert!(e.contains("cache") && e.contains("hdd-only"), "{e}");
    let e = build_arch("cache:collector=nope", &setup).unwrap_err().to_string();
    assert!(e.contains("lru") && e.contains("arc"), "{e}");
    let e = build_arch("cache:mode=write-sideways", &setup).unwrap_err().to_string();
    assert!(e.contains("write-back"), "{e}");
    let e = build_arch("cache:dirty-low=50,dirty-high=40", &setup).unwrap_err().to_string();
    assert!(e.contains("dirty-low") && e.contains("dirty-high"), "{e}");
    let e = build_arch("cache:window=5s", &setup).unwrap_err().to_string();
    assert!(e.contains("window") && e.contains("collector"), "{e}");
    build_arch("cache:collector=wsclock,window=5s", &setup).unwrap();
    let tiny = Setup { fast_capacity: 1024, ..setup };
    assert!(build_arch("cache", &tiny).unwrap_err().to_string().contains("smaller than one object"));
    let zero = Setup { fast_capacity: 0, ..setup };
    assert!(build_arch("cache", &zero).is_err());
    let variable = Setup { object_size: 0, ..setup };
    assert!(build_arch("linear", &variable).unwrap_err().to_string().contains("block mode"));
}

#[test]
fn write_back_writes_back_above_the_high_mark() {
    let mut h = Harness::new("cache:mode=write-back,dirty-high=50,dirty-low=25", 8, false);
    for o in 0..4 {
        h.step(&Step::Write(o, true)).unwrap();
    }
    assert!(h.queued.is_empty(), "4 of 8 dirty is not above 50%");
    h.step(&Step::Write(4, true)).unwrap();
    let wb = h.queued.iter().filter(|w| w.kind == WorkKind::Writeback).count();
    assert_eq!(wb, 3, "5 dirty of 8: write back until at most 2 (25%) remain");
    assert_eq!(h.engine.usage().dirty_bytes, 5 * OBJ, "still dirty until the write-backs complete");
    h.settle().unwrap();
}

/// The cleaner walks dirty blocks in LBA order at idle priority (`age`: oldest first); a dirty
/// victim's write-back, which the cache waits on, has normal priority.
#[test]
fn the_cleaner_walks_lba_order_at_idle_priority() {
    use crate::Priority;
    for (order, want) in [("lba", [1, 3, 5, 7]), ("age", [7, 5, 3, 1])] {
        let mut h =
            Harness::new(&format!("cache:mode=write-back,dirty-high=40,dirty-low=0,writeback-order={order}"), 8, false);
        for o in [7, 5, 3, 1] {
            h.step(&Step::Write(o, true)).unwrap();
        }
        h.step(&Step::Write(9, true)).unwrap();
        let got: Vec<u64> =
            h.queued.iter().filter(|w| w.kind == WorkKind::Writeback).map(|w| w.obj.0).take(4).collect();
        assert_eq!(got, want, "{order}");
        assert!(h.queued.iter().all(|w| w.priority == Priority::Idle(Nanos::ZERO)));
        h.settle().unwrap();
    }
    let mut h = Harness::new("cache:mode=write-back,dirty-high=100,dirty-low=99", 2, false);
    for o in 0..3 {
        h.step(&Step::Write(o, true)).unwrap();
    }
    let victim = h.queued.iter().find(|w| w.kind == WorkKind::Writeback).expect("a dirty victim is written back");
    assert_eq!(victim.priority, Priority::Normal);
    h.settle().unwrap();
}

/// A write-back cache absorbs a partial write to an uncached block as a partial dirty block
/// (bcache, Open CAS); a read of it is assembled from both tiers and fills the rest of the
/// block, which is whole once that completes (or at once on a whole write); with
/// `partial-writes=around` (dm-cache) it goes to the HDD.
#[test]
fn partial_writes_are_absorbed_or_sent_around() {
    use crate::{Level, Levels};
    let mut h = Harness::new("cache:mode=write-back", 8, false);
    let w = h.engine.access(&Request::write(ObjectId(1), 512, 1024));
    assert_eq!((w.level, w.touches), (Level::Fast, Levels::one(Level::Fast)), "absorbed");
    assert_eq!(h.engine.usage().dirty_bytes, OBJ);
    let assembled = (Level::Slow, Levels::one(Level::Fast).with(Level::Slow));
    let r = h.engine.access(&Request::read(ObjectId(1), 0, OBJ));
    assert_eq!((r.level, r.touches), assembled, "assembled");
    h.drain();
    let fills: Vec<_> = h.queued.iter().filter(|w| w.kind == WorkKind::Copy).map(|w| w.obj).collect();
    assert_eq!(fills, vec![ObjectId(1)], "the read fills the rest of the block");
    let r = h.engine.access(&Request::read(ObjectId(1), 1024, 512));
    assert_eq!((r.level, r.touches), assembled, "still partial while the fill runs");
    h.drain();
    assert_eq!(h.queued.len(), 1, "one fill at a time");
    h.step(&Step::Execute(0)).unwrap();
    h.step(&Step::Complete(0, 9)).unwrap();
    assert_eq!(h.engine.access(&Request::read(ObjectId(1), 0, OBJ)).touches, Levels::one(Level::Fast), "whole now");
    assert!(h.engine.placement(ObjectId(1)).dirty, "the absorbed write is still to be written back");
    h.engine.access(&Request::write(ObjectId(2), 512, 1024));
    h.engine.access(&Request::write(ObjectId(2), 0, OBJ));
    assert_eq!(h.engine.access(&Request::read(ObjectId(2), 0, OBJ)).touches, Levels::one(Level::Fast), "whole at once");
    h.settle().unwrap();
    let mut h = Harness::new("cache:mode=write-back,partial-writes=around", 8, false);
    assert_eq!(h.engine.access(&Request::write(ObjectId(1), 512, 1024)).level, Level::Slow);
    for spec in ["bcache-like:cache-mode=writeback", "open-cas-like:cache-mode=wb"] {
        let mut h = Harness::new(spec, 8, false);
        assert_eq!(h.engine.access(&Request::write(ObjectId(1), 512, 1024)).level, Level::Fast, "{spec}");
    }
    let mut h = Harness::new("dm-cache-smq-like", 8, false);
    assert_eq!(h.engine.access(&Request::write(ObjectId(1), 512, 1024)).level, Level::Slow, "dm-cache");
}

#[test]
fn write_back_victims_are_written_back_before_they_go() {
    let mut h = Harness::new("cache:mode=write-back,dirty-high=100,dirty-low=99", 3, false);
    h.step(&Step::Write(0, true)).unwrap();
    h.step(&Step::Write(1, true)).unwrap();
    h.step(&Step::Read(2, true)).unwrap();
    h.step(&Step::Execute(0)).unwrap();
    h.step(&Step::Complete(0, 9)).unwrap();
    h.step(&Step::Read(2, true)).unwrap(); // 2 is clean and most recent: LRU order 0, 1, 2
    // A fourth object needs room: the LRU victims 0 and 1 are dirty, so they are written back
    // (and dropped once clean) while the search goes on to the clean 2, which makes room now.
    h.step(&Step::Write(3, true)).unwrap();
    let wb: Vec<_> = h.queued.iter().filter(|w| w.kind == WorkKind::Writeback).map(|w| w.obj).collect();
    assert_eq!(wb, vec![ObjectId(0), ObjectId(1)]);
    assert!(h.engine.placement(ObjectId(0)).on_fast, "still cached until written back");
    assert!(!h.engine.placement(ObjectId(2)).on_fast, "the clean victim went at once");
    assert!(h.engine.placement(ObjectId(3)).on_fast && h.engine.placement(ObjectId(3)).dirty);
    h.step(&Step::Execute(0)).unwrap();
    h.step(&Step::Complete(0, 9)).unwrap();
    assert!(!h.engine.placement(ObjectId(0)).on_fast, "dropped once clean");
    h.settle().unwrap();
}

#[test]
fn write_back_goes_around_when_only_dirty_victims_remain() {
    let mut h = Harness::new("cache:mode=write-back,dirty-high=100,dirty-low=99", 2, false);
    h.step(&Step::Write(0, true)).unwrap();
    h.step(&Step::Write(1, true)).unwrap();
    let served = h.engine.access(&Request::write(ObjectId(2), 0, OBJ));
    assert_eq!(served.level, Level::Slow, "no clean victim: the write goes to the HDD");
    h.drain();
    assert_eq!(h.queued.iter().filter(|w| w.kind == WorkKind::Writeback).count(), 2);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// The engine's LRU and FIFO caches (libCacheSim semantics: variable sizes, evict until the
    /// object fits, objects larger than the cache never inserted) give the same hit for every
    /// request as naive O(n) reference caches, in instant mode and with completions reported
    /// by a front end.
    #[test]
    fn lru_and_fifo_caches_match_naive_references(
        trace in proptest::collection::vec((0u64..60, 1u64..9000), 1..1500),
        capacity in 1u64..40_000,
        instant in any::<bool>(),
    ) {
        use crate::collector::test_utils::{NaiveFifoCache, NaiveLruCache};
        for collector in ["lru", "fifo"] {
            let clock = ManualClock::new();
            let setup = Setup { fast_capacity: capacity, slow_capacity: 0, object_size: 0 };
            let mut e = Engine::new(build_arch(&format!("cache:mode=read-only,collector={collector}"), &setup).unwrap(), clock);
            e.set_instant(instant);
            let mut lru = NaiveLruCache::new(capacity);
            let mut fifo = NaiveFifoCache::new(capacity);
            for &(id, size) in &trace {
                let hit = e.access(&Request::read(ObjectId(id), 0, size)).level == Level::Fast;
                let work: Vec<_> = e.drain_work().collect();
                for w in work {
                    if w.kind == WorkKind::Copy {
                        e.complete(w.id, Outcome::Done).unwrap();
                    }
                }
                let want = if collector == "lru" { lru.access(id, size) } else { fifo.access(id, size) };
                prop_assert_eq!(hit, want, "{} object {} size {}", collector, id, size);
            }
            e.check_invariants().map_err(TestCaseError::fail)?;
        }
    }
}

/// The memory target (at most 48 bytes of engine memory per tracked object) holds at every
/// table size, not just at the one the benchmark measures: growth steps make it vary.
#[test]
fn engine_memory_per_object_stays_under_48_bytes() {
    for n in [10_000u64, 77_777, 250_000, 600_000, 1_000_000] {
        let clock = ManualClock::new();
        let setup = Setup { fast_capacity: n * OBJ, slow_capacity: 0, object_size: OBJ };
        let mut e = Engine::new(build_arch("cache:mode=read-only,collector=lru", &setup).unwrap(), clock);
        e.set_instant(true);
        for i in 0..n {
            e.access(&Request::read(ObjectId(i * 8), 0, OBJ));
        }
        assert_eq!(e.usage().objects as u64, n);
        let per = e.memory_bytes() as f64 / n as f64;
        assert!(per <= 48.0, "{n} objects: {per:.1} bytes each");
    }
}

pub(super) fn run_work(h: &mut Harness) {
    while !h.queued.is_empty() {
        h.step(&Step::Execute(0)).unwrap();
        h.step(&Step::Complete(0, 9)).unwrap();
    }
}
