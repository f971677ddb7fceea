//! Conformance of every file-level architecture against a model of the two directories' contents.
//! A front-end model executes the engine's work (reading the source when it starts, writing the
//! destination when it completes, in random order, sometimes failing), runs blocked accesses
//! after the work they wait for, and checks after every step that:
//! - every read is served from a tier holding the latest version of the file,
//! - DST files are on exactly one tier once settled, sieved files never settle on the SSD,
//! - the SSD never holds more than its capacity once moves out are done,
//! - write-through copies are identical, write-back never loses a dirty file (after a flush the
//!   HDD holds the latest version of everything),
//! - deleted files leave no copies behind.

use std::collections::BTreeMap;

use proptest::prelude::*;

use crate::{
    Engine, Level, ManualClock, Nanos, ObjectClass, ObjectId, ObjectKind, Op, Outcome, Request, Setup, Work, WorkKind,
    build_arch,
};

#[derive(Clone, Debug)]
enum Step {
    Create(u64, u64),
    Write(u64, u64, u64),
    Read(u64),
    Truncate(u64, u64),
    Delete(u64),
    /// File `.0` renamed over the name of `.1` (which is replaced), into volume `.2`.
    Rename(u64, u64, u16),
    Open(u64),
    Execute(usize),
    Complete(usize, u8),
    Tick,
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    let step = prop_oneof![
        2 => (0u64..10, 0u64..3000).prop_map(|(f, l)| Step::Create(f, l)),
        4 => (0u64..10, 0u64..3000, 1u64..2000).prop_map(|(f, o, l)| Step::Write(f, o, l)),
        5 => (0u64..10).prop_map(Step::Read),
        1 => (0u64..10, 0u64..4000).prop_map(|(f, s)| Step::Truncate(f, s)),
        1 => (0u64..10).prop_map(Step::Delete),
        1 => (0u64..10, 0u64..10, 0u16..3).prop_map(|(f, g, v)| Step::Rename(f, g, v)),
        1 => (0u64..10).prop_map(Step::Open),
        3 => (0usize..6).prop_map(Step::Execute),
        4 => (0usize..6, 0u8..12).prop_map(|(i, o)| Step::Complete(i, o)),
        1 => Just(Step::Tick),
    ];
    proptest::collection::vec(step, 1..200)
}

/// A drained work, the source content it read when executed, and whether it was orphaned.
type Queued = (Work, Option<(u64, u64)>, bool);

/// The model front end: which version of each file each tier holds.
struct Harness {
    engine: Engine<ManualClock>,
    clock: ManualClock,
    spec: String,
    capacity: u64,
    sieve: u64,
    latest: BTreeMap<u64, (u64, u64)>,
    fast: BTreeMap<u64, (u64, u64)>,
    slow: BTreeMap<u64, (u64, u64)>,
    /// Work drained and not completed: (work, source content read when executed, whether its
    /// file was deleted meanwhile — the front end then drops the move's result).
    queued: Vec<Queued>,
    version: u64,
    /// Volumes of renamed files (others: `f % 2`).
    volumes: BTreeMap<u64, u16>,
}

impl Harness {
    fn new(spec: &str, capacity: u64) -> Harness {
        let clock = ManualClock::new();
        let setup = Setup { fast_capacity: capacity, slow_capacity: 0, object_size: 0 };
        let arch = build_arch(spec, &setup).expect("spec builds");
        let engine = Engine::new(arch, clock.clone());
        let sieve = if spec.starts_with("hycache") { u64::MAX } else { 2048 };
        Harness {
            engine,
            clock,
            spec: spec.to_string(),
            capacity,
            sieve,
            latest: BTreeMap::new(),
            fast: BTreeMap::new(),
            slow: BTreeMap::new(),
            queued: Vec::new(),
            version: 0,
            volumes: BTreeMap::new(),
        }
    }

    fn class(&self, f: u64) -> ObjectClass {
        let volume = self.volumes.get(&f).copied().unwrap_or((f % 2) as u16);
        ObjectClass { volume, kind: if f == 9 { ObjectKind::Meta } else { ObjectKind::Data } }
    }

    fn tier(&mut self, l: Level) -> &mut BTreeMap<u64, (u64, u64)> {
        if l == Level::Fast { &mut self.fast } else { &mut self.slow }
    }

    fn drain(&mut self) {
        let works: Vec<Work> = self.engine.drain_work().collect();
        for w in works {
            if w.kind == WorkKind::Invalidate {
                self.fast.remove(&w.obj.0);
            } else {
                self.queued.push((w, None, false));
            }
        }
    }

    fn execute(&mut self, i: usize) {
        if self.queued.is_empty() {
            return;
        }
        let i = i % self.queued.len();
        if self.queued[i].1.is_none() {
            let w = self.queued[i].0;
            let src = self.tier(w.from).get(&w.obj.0).copied().unwrap_or((u64::MAX, 0));
            self.queued[i].1 = Some(src);
        }
    }

    fn complete(&mut self, i: usize, outcome: Outcome) -> Result<Outcome, TestCaseError> {
        if self.queued.is_empty() {
            return Ok(Outcome::Done);
        }
        let i = i % self.queued.len();
        self.execute(i);
        let (w, src, orphan) = self.queued.remove(i);
        let outcome = if orphan && outcome == Outcome::Done && self.latest.contains_key(&w.obj.0) {
            Outcome::Cancelled
        } else {
            outcome
        };
        if outcome == Outcome::Done && !orphan {
            let src = src.unwrap_or((u64::MAX, 0));
            if self.latest.contains_key(&w.obj.0) {
                self.tier(w.to).insert(w.obj.0, src);
                if matches!(w.kind, WorkKind::Promote | WorkKind::Demote) {
                    self.tier(w.from).remove(&w.obj.0);
                }
            }
        }
        self.engine.complete(w.id, outcome).map_err(|e| TestCaseError::fail(e.to_string()))?;
        self.drain();
        Ok(outcome)
    }

    /// Runs every queued work to completion (what a front end does before a blocked access).
    fn settle(&mut self) -> Result<(), TestCaseError> {
        let mut guard = 0;
        while !self.queued.is_empty() {
            self.complete(0, Outcome::Done)?;
            guard += 1;
            prop_assert!(guard < 10_000, "{}: work never settles", self.spec);
        }
        Ok(())
    }

    fn orphan(&mut self, f: u64) {
        for q in self.queued.iter_mut().filter(|q| q.0.obj.0 == f) {
            q.2 = true;
        }
    }

    fn delete(&mut self, f: u64) -> Result<(), TestCaseError> {
        if self.latest.remove(&f).is_none() {
            return Ok(());
        }
        self.access(Request { obj: ObjectId(f), op: Op::Delete, offset: 0, len: 0, class: self.class(f) })?;
        self.orphan(f);
        self.fast.remove(&f);
        self.slow.remove(&f);
        self.volumes.remove(&f);
        Ok(())
    }

    fn access(&mut self, req: Request) -> Result<crate::Served, TestCaseError> {
        for _ in 0..100 {
            let before = self.queued.len();
            let served = self.engine.access(&req);
            self.drain();
            if !served.blocked {
                return Ok(served);
            }
            // Run exactly the work this access waits for: what it issued and what was in flight
            // on its file (not what their completions issue). If any of it did not succeed, the
            // front end submits the access again.
            let ids: Vec<_> = self
                .queued
                .iter()
                .enumerate()
                .filter(|(i, q)| *i >= before || q.0.obj == req.obj)
                .map(|(_, q)| q.0.id)
                .collect();
            let mut all_done = true;
            for id in ids {
                if let Some(i) = self.queued.iter().position(|q| q.0.id == id) {
                    all_done &= self.complete(i, Outcome::Done)? == Outcome::Done;
                }
            }
            if all_done {
                return Ok(served);
            }
        }
        Err(TestCaseError::fail(format!("{}: a blocked access never got through", self.spec)))
    }

    fn step(&mut self, step: &Step) -> Result<(), TestCaseError> {
        match *step {
            Step::Create(f, len) => {
                let req = Request { obj: ObjectId(f), op: Op::Create, offset: 0, len, class: self.class(f) };
                // Creating over an existing file replaces it (the front end deletes both copies).
                self.fast.remove(&f);
                self.slow.remove(&f);
                self.orphan(f);
                self.access(req)?;
                self.version += 1;
                let v = (self.version, len);
                self.latest.insert(f, v);
                let p = self.engine.placement(ObjectId(f));
                if p.on_fast {
                    self.fast.insert(f, v);
                }
                if p.on_slow {
                    self.slow.insert(f, v);
                }
            }
            Step::Write(f, off, len) => {
                let Some(&(_, size)) = self.latest.get(&f) else { return Ok(()) };
                let req = Request { obj: ObjectId(f), op: Op::Write, offset: off, len, class: self.class(f) };
                let served = self.access(req)?;
                if !served.blocked {
                    // A move that already read its source would miss this write: the front end
                    // cancels it (it could also redo the copy).
                    for q in self.queued.iter_mut().filter(|q| q.0.obj.0 == f && q.1.is_some()) {
                        q.2 = true;
                    }
                }
                self.version += 1;
                let v = (self.version, size.max(off + len));
                self.latest.insert(f, v);
                for l in served.touches.iter() {
                    self.tier(l).insert(f, v);
                }
            }
            Step::Truncate(f, new) => {
                if !self.latest.contains_key(&f) {
                    return Ok(());
                }
                let req = Request { obj: ObjectId(f), op: Op::Truncate, offset: new, len: 0, class: self.class(f) };
                if !self.access(req)?.blocked {
                    for q in self.queued.iter_mut().filter(|q| q.0.obj.0 == f && q.1.is_some()) {
                        q.2 = true;
                    }
                }
                self.version += 1;
                let v = (self.version, new);
                self.latest.insert(f, v);
                // Truncate applies to every copy the front end holds.
                for t in [&mut self.fast, &mut self.slow] {
                    if let Some(x) = t.get_mut(&f) {
                        *x = v;
                    }
                }
            }
            Step::Read(f) => {
                let Some(&v) = self.latest.get(&f) else { return Ok(()) };
                let req = Request { obj: ObjectId(f), op: Op::Read, offset: 0, len: v.1.max(1), class: self.class(f) };
                let served = self.access(req)?;
                let held = self.tier(served.level).get(&f).copied();
                prop_assert_eq!(
                    held,
                    Some(v),
                    "{}: read of {} from {:?} is not the latest",
                    &self.spec,
                    f,
                    served.level
                );
            }
            Step::Delete(f) => self.delete(f)?,
            Step::Rename(f, g, volume) => {
                if !self.latest.contains_key(&f) {
                    return Ok(());
                }
                if g != f {
                    // The front end removes the replaced file's copies; the object keeps its id.
                    self.delete(g)?;
                }
                self.volumes.insert(f, volume);
                let req = Request { obj: ObjectId(f), op: Op::Rename, offset: 0, len: 0, class: self.class(f) };
                self.access(req)?;
            }
            Step::Open(f) => {
                if self.latest.contains_key(&f) {
                    self.access(Request { obj: ObjectId(f), op: Op::Open, offset: 0, len: 0, class: self.class(f) })?;
                }
            }
            Step::Execute(i) => self.execute(i),
            Step::Complete(i, o) => {
                let outcome = match o {
                    0 => Outcome::Failed,
                    1 => Outcome::Cancelled,
                    _ => Outcome::Done,
                };
                self.complete(i, outcome)?;
            }
            Step::Tick => {
                self.clock.advance(Nanos::from_secs(3));
                self.engine.tick();
                self.drain();
            }
        }
        self.engine.check_invariants().map_err(|e| TestCaseError::fail(format!("{}: {e}", self.spec)))?;
        Ok(())
    }

    /// After all work is done: placement agrees with the model and with the architecture's rules.
    fn check_settled(&mut self) -> Result<(), TestCaseError> {
        self.settle()?;
        let u = self.engine.usage();
        prop_assert!(
            u.fast_used <= self.capacity,
            "{}: {} bytes on a {}-byte SSD",
            &self.spec,
            u.fast_used,
            self.capacity
        );
        let dst = !self.spec.contains("caching") && !self.spec.contains("file-");
        let mut on_fast = 0;
        for (&f, &v) in &self.latest {
            let p = self.engine.placement(ObjectId(f));
            prop_assert!(p.tracked, "{}: file {} forgotten", &self.spec, f);
            prop_assert!(p.on_fast || p.on_slow, "{}: file {} on no tier", &self.spec, f);
            if dst {
                prop_assert!(p.on_fast != p.on_slow, "{}: DST file {} on both or neither tier", &self.spec, f);
            }
            if p.on_fast {
                on_fast += v.1;
                prop_assert_eq!(self.fast.get(&f), Some(&v), "{}: SSD copy of {} is stale", &self.spec, f);
                prop_assert!(v.1 <= self.sieve, "{}: sieved file {} ({} B) on the SSD", &self.spec, f, v.1);
            }
            if p.on_slow && !p.dirty {
                prop_assert_eq!(self.slow.get(&f), Some(&v), "{}: HDD copy of {} is stale", &self.spec, f);
            }
        }
        prop_assert_eq!(on_fast, u.fast_used, "{}: SSD accounting", &self.spec);
        for f in self.fast.keys().chain(self.slow.keys()) {
            prop_assert!(self.latest.contains_key(f), "{}: orphan copy of deleted file {}", &self.spec, f);
        }
        // No dirty data lost: after a flush the HDD has everything.
        self.engine.flush();
        self.drain();
        self.settle()?;
        for (&f, &v) in &self.latest {
            let p = self.engine.placement(ObjectId(f));
            let holder = if p.on_slow { self.slow.get(&f) } else { self.fast.get(&f) };
            prop_assert_eq!(holder, Some(&v), "{}: file {} lost its latest version", &self.spec, f);
        }
        Ok(())
    }
}

fn specs() -> Vec<String> {
    let mut v: Vec<String> = crate::arch::type_aware::volume_policies()
        .map(|m| {
            // Each with the timer knobs it takes, at 3 s.
            let mut spec = format!("{}:sieve=2048", m.name);
            for knob in ["interval", "cleaner-period"] {
                if m.params.iter().any(|p| p.name == knob) {
                    spec.push_str(&format!(",{knob}=3s"));
                }
            }
            spec
        })
        .collect();
    v.push("hycache:threshold=70%".into());
    v.push("hycache:collector=lfu".into());
    v.push("dynamic-hot-dst:sieve=2048,collector=lru".into());
    v.push("type-aware:volumes=/web=on-demand-caching;/files=dynamic-hot-dst,default=plain-cold-dst,sieve=2048".into());
    v.push("type-aware:volumes=/a=file-write-through-all;/b=interval-hot-dst,sieve=2048,interval=3s".into());
    v.push("type-aware:volumes=/a=file-write-back;/b=dynamic-cold-dst,default=on-demand-caching,sieve=2048".into());
    v.push("file-write-back:sieve=2048,dirty-high=20%,dirty-low=5%,max-writebacks=2".into());
    // Every registered file-level architecture is tested: a new one with its defaults (and a
    // small sieve) when the list above does not name it.
    for a in super::ARCHITECTURES.iter().filter(|a| a.caps.granularity == super::Granularity::File) {
        if !v.iter().any(|s| s.split(':').next() == Some(a.name)) {
            v.push(format!("{}:sieve=2048", a.name));
        }
    }
    v
}

proptest! {
    // A fixed seed keeps CI deterministic; random-seed runs of 4 × 40,000 cases pass too
    // (with write-back, and renames across volumes of different policies).
    #![proptest_config(ProptestConfig {
        cases: 512,
        rng_seed: proptest::test_runner::RngSeed::Fixed(0x7469_6572),
        ..ProptestConfig::default()
    })]

    #[test]
    fn every_file_architecture_keeps_files_safe(ops in steps(), cap in 1500u64..8000) {
        for spec in specs() {
            let mut h = Harness::new(&spec, cap);
            for s in &ops {
                h.step(s)?;
            }
            h.check_settled()?;
        }
    }
}

#[test]
fn dynamic_hot_dst_promotes_on_an_hdd_read_and_serves_the_next_from_the_ssd() {
    let mut h = Harness::new("dynamic-hot-dst", 1 << 20);
    h.step(&Step::Create(1, 4096)).unwrap();
    let r = |h: &mut Harness| h.access(Request::read(ObjectId(1), 0, 4096)).unwrap().level;
    assert_eq!(r(&mut h), Level::Slow);
    h.settle().unwrap();
    assert_eq!(r(&mut h), Level::Fast);
}

/// A write that drops a hot file's SSD copy (read-only caching) is no eviction: the inverse
/// bitmap takes its admission bar from files evicted as the coldest, and a hot file's counter
/// as the bar shuts every colder file out. (It did: on the Zipf web server the first cached
/// directory that a create wrote to stopped all caching for the rest of the run.)
#[test]
fn a_copy_dropped_by_a_write_does_not_raise_the_admission_bar() {
    let mut h = Harness::new("file-read-only-cache", 1 << 20);
    h.step(&Step::Create(1, 4096)).unwrap();
    h.step(&Step::Create(2, 4096)).unwrap();
    let read = |h: &mut Harness, f: u64| {
        let level = h.access(Request::read(ObjectId(f), 0, 4096)).unwrap().level;
        h.settle().unwrap();
        level
    };
    for _ in 0..8 {
        read(&mut h, 1);
    }
    assert!(h.engine.placement(ObjectId(1)).on_fast, "file 1 is hot and cached");
    assert_eq!(h.access(Request::write(ObjectId(1), 0, 4096)).unwrap().level, Level::Slow);
    h.settle().unwrap();
    assert!(!h.engine.placement(ObjectId(1)).on_fast, "the write dropped the copy");
    assert_eq!(read(&mut h, 2), Level::Slow);
    assert!(h.engine.placement(ObjectId(2)).on_fast, "file 2, read once, is still admitted");
}

#[test]
fn cold_dst_blocks_a_write_that_needs_cleaning_and_demotes_the_coldest() {
    let mut h = Harness::new("plain-cold-dst", 8192);
    h.step(&Step::Create(1, 0)).unwrap();
    h.step(&Step::Write(1, 0, 4096)).unwrap();
    h.step(&Step::Create(2, 0)).unwrap();
    h.step(&Step::Write(2, 0, 4096)).unwrap();
    h.step(&Step::Read(2)).unwrap();
    let served = h.engine.access(&Request::write(ObjectId(2), 4096, 4096));
    assert!(served.blocked, "the write waits for the demotion");
    assert_eq!(served.level, Level::Fast);
    let demoted: Vec<Work> = h.engine.pending_work().to_vec();
    assert_eq!(demoted.len(), 1);
    assert_eq!((demoted[0].kind, demoted[0].obj), (WorkKind::Demote, ObjectId(1)));
}

#[test]
fn a_file_growing_past_the_sieve_leaves_the_ssd() {
    let mut h = Harness::new("plain-cold-dst:sieve=8KiB", 1 << 20);
    h.step(&Step::Create(1, 0)).unwrap();
    h.step(&Step::Write(1, 0, 8192)).unwrap();
    assert!(h.engine.placement(ObjectId(1)).on_fast);
    let served = h.engine.access(&Request::write(ObjectId(1), 8192, 1));
    assert_eq!(served.level, Level::Slow);
    assert!(served.blocked);
    h.drain();
    h.settle().unwrap();
    let p = h.engine.placement(ObjectId(1));
    assert!(p.on_slow && !p.on_fast);
}

#[test]
fn hycache_evicts_below_the_threshold_and_an_open_brings_a_file_back() {
    let mut h = Harness::new("hycache:threshold=50%", 10_000);
    for f in 0..4 {
        h.step(&Step::Create(f, 2000)).unwrap();
        h.settle().unwrap();
    }
    assert!(h.engine.usage().fast_used <= 5_000);
    assert!(h.engine.placement(ObjectId(0)).on_slow, "the least recently used went first");
    h.step(&Step::Open(0)).unwrap();
    h.settle().unwrap();
    assert!(h.engine.placement(ObjectId(0)).on_fast);
    assert!(h.engine.usage().fast_used <= 5_000);
}

#[test]
fn interval_hot_dst_migrates_only_on_its_timer() {
    let mut h = Harness::new("interval-hot-dst:interval=3s", 1 << 20);
    h.step(&Step::Create(1, 4096)).unwrap();
    h.step(&Step::Read(1)).unwrap();
    h.settle().unwrap();
    assert!(!h.engine.placement(ObjectId(1)).on_fast);
    h.step(&Step::Tick).unwrap();
    h.settle().unwrap();
    assert!(h.engine.placement(ObjectId(1)).on_fast);
}

#[test]
fn bad_file_specs_name_the_problem() {
    let setup = Setup { fast_capacity: 1 << 20, slow_capacity: 0, object_size: 0 };
    let err = |s: &str| build_arch(s, &setup).expect_err("refused").to_string();
    assert!(err("type-aware:volumes=/web=on-demand-caching;/web/x=dynamic-hot-dst").contains("overlaps"));
    assert!(err("type-aware:volumes=/web=nope").contains("allowed"));
    assert!(err("type-aware:volumes=web=on-demand-caching").contains("absolute"));
    assert!(err("interval-hot-dst:collector=lru").contains("ranks"));
    let block = Setup { object_size: 4096, ..setup };
    assert!(build_arch("dynamic-hot-dst", &block).expect_err("refused").to_string().contains("whole files"));
}

#[test]
fn file_engine_memory_per_file_stays_under_64_bytes() {
    // Hash-index and vector growth make the figure saw-tooth with the file count: measure across
    // one doubling of the index (worst just after it doubles) and bound the mean and the worst.
    let setup = Setup { fast_capacity: 1 << 30, slow_capacity: 0, object_size: 0 };
    let mut e = Engine::new(build_arch("dynamic-hot-dst", &setup).expect("builds"), ManualClock::new());
    let mut f = 0u64;
    let mut figures = Vec::new();
    for n in [600_000u64, 700_000, 800_000, 900_000, 1_000_000, 1_100_000, 1_200_000] {
        while f < n {
            e.access(&Request { obj: ObjectId(f), op: Op::Create, offset: 0, len: 0, class: ObjectClass::default() });
            e.access(&Request::write(ObjectId(f), 0, 8192));
            f += 1;
        }
        figures.push(e.memory_bytes() as f64 / n as f64);
    }
    let mean = figures.iter().sum::<f64>() / figures.len() as f64;
    let worst = figures.iter().copied().fold(0.0, f64::max);
    eprintln!("bytes per file: mean {mean:.1}, worst {worst:.1}: {figures:.1?}");
    assert!(mean <= 64.0 && worst <= 72.0, "mean {mean:.1} worst {worst:.1} bytes per file: {figures:?}");
}

/// Access statistics survive a restart: adopting the files coldest first and restoring each
/// one's count gives the collector the ranking it had (the mount keeps them in its store).
#[test]
fn a_heat_ranking_restored_after_a_restart_ranks_the_same() {
    for collector in ["inverse-bitmap", "lru", "lfu"] {
        let spec = format!("dynamic-hot-dst:sieve=0,collector={collector}");
        let mut h = Harness::new(&spec, 40_000);
        h.sieve = u64::MAX;
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        for f in 0..24 {
            h.step(&Step::Create(f, 1000 + 500 * (f % 5))).unwrap();
        }
        for _ in 0..400 {
            let f = next(24).min(next(24)); // skewed: low numbers hotter
            let step = if next(4) == 0 { Step::Write(f, next(3000), 1 + next(20_000)) } else { Step::Read(f) };
            h.step(&step).unwrap();
            h.settle().unwrap();
        }
        let files: Vec<ObjectId> = (0..24).map(ObjectId).collect();
        let before = h.engine.heat_ranking(&files);
        // Collectors that rank HDD files rank every file; the others the SSD's.
        let on_ssd = files.iter().filter(|&&o| h.engine.placement(o).on_fast).count();
        let ranked = if collector == "inverse-bitmap" { 24 } else { on_ssd };
        assert!(on_ssd >= 2, "{collector}: files were promoted");
        assert_eq!(before.len(), ranked, "{collector}: every file it tracks is ranked");
        if collector != "lru" {
            assert!(before.iter().any(|&(_, heat)| heat > 1), "{collector}: counts are kept");
        }
        // A new engine learns the files where they are (hottest first, so that they get the
        // SSD if it is short), then each is re-ranked coldest first with its count.
        let mut again = Harness::new(&spec, 40_000);
        for &obj in files.iter().rev() {
            let p = h.engine.placement(obj);
            let size = h.latest.get(&obj.0).map_or(0, |&(_, len)| len);
            let level = if p.on_fast { Level::Fast } else { Level::Slow };
            again.engine.adopt(obj, level, size, false);
        }
        for &(obj, heat) in &before {
            again.engine.restore_heat(obj, heat);
        }
        assert_eq!(again.engine.heat_ranking(&files), before, "{collector}: the same ranking after a restart");
    }
}

#[test]
fn merge_sort_sorts_and_survives_a_comparison_that_is_not_an_order() {
    let mut v: Vec<u32> = (0..1000).map(|i| (i * 7919) % 1013).collect();
    let mut want = v.clone();
    want.sort();
    super::file_common::merge_sort(&mut v, |a, b| a < b);
    assert_eq!(v, want);
    let mut w: Vec<u32> = (0..100).collect();
    super::file_common::merge_sort(&mut w, |a, b| (a + b) % 3 == 0); // not an order: no panic
    w.sort();
    assert_eq!(w, (0..100).collect::<Vec<_>>(), "a permutation of the input");
}

/// Files created empty and then written (how every program makes a file) are written back
/// once dirty bytes pass `dirty-high`, like rewrites of existing files. Before, a create queued
/// nothing (its size was 0), the writes that grew it only raised the dirty count, and 120 MiB
/// of new files stayed dirty on the SSD, their only copy, with no write-back ever issued.
#[test]
fn new_files_are_written_back_above_the_high_watermark() {
    let setup = Setup { fast_capacity: 100 << 20, slow_capacity: 0, object_size: 0 };
    let spec = "file-write-back:dirty-high=10%,dirty-low=5%";
    let clock = ManualClock::new();
    let mut e = Engine::new(build_arch(spec, &setup).expect("builds"), clock.clone());
    let mut writebacks = 0;
    for f in 0..60u64 {
        e.access(&Request { obj: ObjectId(f), op: Op::Create, offset: 0, len: 0, class: ObjectClass::default() });
        for chunk in 0..4u64 {
            e.access(&Request::write(ObjectId(f), chunk * (128 << 10), 128 << 10));
        }
        for w in e.drain_work().collect::<Vec<_>>() {
            if w.kind == WorkKind::Writeback {
                writebacks += 1;
            }
            e.complete(w.id, Outcome::Done).expect("completes");
        }
    }
    // Idle past `writeback-idle`: written back down to the low watermark (5 MiB).
    clock.advance(Nanos::from_secs(6));
    e.tick();
    for _ in 0..100 {
        let works: Vec<_> = e.drain_work().collect();
        if works.is_empty() {
            break;
        }
        for w in works {
            writebacks += u32::from(w.kind == WorkKind::Writeback);
            e.complete(w.id, Outcome::Done).expect("completes");
        }
    }
    let dirty: u64 = (0..60).filter(|&f| e.placement(ObjectId(f)).dirty).count() as u64 * (512 << 10);
    assert!(writebacks > 0, "no write-back issued for 30 MiB of new dirty files");
    assert!(dirty <= 5 << 20, "{dirty} bytes still dirty, above dirty-low (5 MiB)");
}
