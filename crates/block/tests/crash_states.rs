//! Crash consistency of the served device by enumeration: bounded ACE-like block workloads
//! (write, overwrite, flush, FUA write, trim, write zeroes, reads that promote) on every
//! servable architecture, with the movers copying, promoting, demoting and writing back
//! meanwhile; every write, discard and sync the device makes on its images is recorded, and a
//! crash after each one is checked: a `kill -9` (every call done so far reached the images) and
//! power cuts (each image keeps what its last sync made durable plus none, all, one, all but
//! one, or a torn last one of the writes since). Each state is opened (recovery must succeed and
//! its bookkeeping hold) and read whole: what was flushed or FUA'd reads back, and every other
//! byte holds a value it was given since.
//!
//! `TIERWISE_CRASH_SCOPE=full` runs every ordered pair of operations (seq-2) on every
//! architecture; the default is every operation alone and a seeded sample of pairs.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tierwise_block::backend::Dev;
use tierwise_block::{Backend, CreateOptions, HybridDevice, MemBackend, ServeOptions, create, open, servable_names};

const BS: u64 = 4096;
const HDD: u64 = 256 << 10;
const SSD: u64 = 48 << 10;

/// Every servable architecture, with knobs scaled to a device of 64 blocks.
fn specs() -> Vec<String> {
    let mut specs: Vec<String> = servable_names()
        .iter()
        .map(|s| match *s {
            "greendm-tiering" => "greendm-tiering:es=4KiB,lt=1,ht=2,reserved=4,md-flush=1s".to_string(),
            "greendm-caching" => "greendm-caching:es=4KiB,lt=1,ht=2".to_string(),
            "hca" => "hca:l1=8KiB,tb=8KiB".to_string(),
            "zfs-l2arc-like" => "zfs-l2arc-like:l1=8KiB,feed=1ms,write-max=64KiB,write-boost=64KiB".to_string(),
            // Their moves take intervals of a second or more: these workloads see none (their
            // sub-LUN moves are power-cut by tests/subluns.rs).
            "otf-ast" => "otf-ast:sub-lun=4KiB".to_string(),
            "static-tiering" => "static-tiering:sub-lun=4KiB".to_string(),
            other => other.to_string(),
        })
        .collect();
    specs.extend(["cache:mode=write-through".to_string(), "bcache-like:cache-mode=writeback".to_string()]);
    specs
}

/// One call the device made on its images.
#[derive(Clone, Debug)]
enum Event {
    Write(Dev, u64, Vec<u8>),
    Sync(Dev),
}

/// The images, recording every change and sync in the order they happened, with how many
/// client operations had returned and whether one was in flight.
struct Recording {
    inner: MemBackend,
    log: Mutex<Vec<(Event, usize, bool)>>,
    ops: Mutex<(usize, bool)>,
}

impl Backend for Recording {
    fn read(&self, dev: Dev, buf: &mut [u8], off: u64) -> std::io::Result<()> {
        self.inner.read(dev, buf, off)
    }
    fn write(&self, dev: Dev, buf: &[u8], off: u64) -> std::io::Result<()> {
        // Under the log's lock: the log's order is the order the writes happened in.
        let mut log = self.log.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        self.inner.write(dev, buf, off)?;
        let (done, in_flight) = *self.ops.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        log.push((Event::Write(dev, off, buf.to_vec()), done, in_flight));
        Ok(())
    }
    fn sync(&self, dev: Dev) -> std::io::Result<()> {
        let mut log = self.log.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        self.inner.sync(dev)?;
        let (done, in_flight) = *self.ops.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        log.push((Event::Sync(dev), done, in_flight));
        Ok(())
    }
    fn discard(&self, dev: Dev, off: u64, len: u64) -> std::io::Result<()> {
        // MemBackend discards by writing zeroes.
        self.write(dev, &vec![0u8; len as usize], off)
    }
    fn len(&self, dev: Dev) -> std::io::Result<u64> {
        self.inner.len(dev)
    }
    fn grow(&self, dev: Dev, len: u64) -> std::io::Result<()> {
        self.inner.grow(dev, len)
    }
}

/// One client operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    /// Write a range (3 blocks from block `b`, starting 512 bytes in).
    Write(u64),
    Flush,
    FuaWrite(u64),
    /// Trim 4 whole blocks from block `b`.
    Trim(u64),
    /// Write zeroes over 2 blocks from `b`.
    Zeroes(u64),
    /// Read 8 blocks from `b` twice (promotions, copies).
    Read(u64),
}

const OPS: &[Op] =
    &[Op::Write(2), Op::Write(20), Op::Flush, Op::FuaWrite(3), Op::Trim(0), Op::Zeroes(1), Op::Read(8), Op::Read(40)];

fn pattern(version: u64, len: usize) -> Vec<u8> {
    (0..len).map(|i| ((i as u64 * 13 + version * 101) % 251) as u8 + 1).collect()
}

/// The model: what every byte may read after a crash.
struct Model {
    /// Durable for sure: as of the last flush or FUA write acknowledged.
    flushed: Vec<u8>,
    /// Values each byte was given since that (a crash may keep any of them).
    since: HashMap<usize, Vec<u8>>,
}

impl Model {
    fn allowed(&self, i: usize, v: u8) -> bool {
        v == self.flushed[i] || self.since.get(&i).is_some_and(|s| s.contains(&v))
    }
}

fn apply(dev: &HybridDevice, op: Op, n: u64, current: &mut [u8]) -> (Vec<(usize, u8)>, bool) {
    let mut changed = Vec::new();
    let mut flush = false;
    let mut write = |off: u64, data: Vec<u8>, fua: bool, changed: &mut Vec<(usize, u8)>| {
        dev.write(&data, off, fua).unwrap_or_else(|e| panic!("write: {e}"));
        for (k, &b) in data.iter().enumerate() {
            current[off as usize + k] = b;
            changed.push((off as usize + k, b));
        }
    };
    match op {
        Op::Write(b) => write(b * BS + 512, pattern(n, 3 * BS as usize), false, &mut changed),
        Op::FuaWrite(b) => {
            write(b * BS + 512, pattern(n, 3 * BS as usize), true, &mut changed);
            flush = true;
        }
        Op::Flush => {
            dev.flush().unwrap_or_else(|e| panic!("flush: {e}"));
            flush = true;
        }
        Op::Trim(b) => {
            dev.trim(b * BS, 4 * BS, false).unwrap_or_else(|e| panic!("trim: {e}"));
            // A discarded block reads as zeroes, or as before where the architecture keeps it.
            let mut now = vec![0u8; (4 * BS) as usize];
            dev.read(&mut now, b * BS).unwrap_or_else(|e| panic!("read: {e}"));
            for (k, &v) in now.iter().enumerate() {
                let i = (b * BS) as usize + k;
                current[i] = v;
                changed.push((i, 0));
                changed.push((i, v));
            }
        }
        Op::Zeroes(b) => {
            dev.write_zeroes(b * BS, 2 * BS, false).unwrap_or_else(|e| panic!("zeroes: {e}"));
            let range = (b * BS) as usize..((b + 2) * BS) as usize;
            current[range.clone()].fill(0);
            changed.extend(range.map(|i| (i, 0)));
        }
        Op::Read(b) => {
            for _ in 0..2 {
                let mut buf = vec![0u8; (8 * BS) as usize];
                dev.read(&mut buf, b * BS).unwrap_or_else(|e| panic!("read: {e}"));
                assert!(
                    buf[..] == current[(b * BS) as usize..((b + 8) * BS) as usize],
                    "a read differs from the model"
                );
            }
        }
    }
    (changed, flush)
}

/// What a crash after log entry `k` may leave: (SSD image, HDD image, kill).
fn crash_images(base: &[Vec<u8>; 2], log: &[(Event, usize, bool)], k: usize) -> Vec<([Vec<u8>; 2], bool)> {
    let mut durable = base.clone();
    let mut current = base.clone();
    let mut volatile: [Vec<(u64, Vec<u8>)>; 2] = [Vec::new(), Vec::new()];
    for (e, _, _) in &log[..=k] {
        match e {
            Event::Write(d, off, data) => {
                let img = &mut current[*d as usize];
                img[*off as usize..*off as usize + data.len()].copy_from_slice(data);
                volatile[*d as usize].push((*off, data.clone()));
            }
            Event::Sync(d) => {
                durable[*d as usize] = current[*d as usize].clone();
                volatile[*d as usize].clear();
            }
        }
    }
    let mut out = vec![(current.clone(), true)];
    // Per image: the durable bytes plus a choice of the writes since its last sync.
    let variants = |d: usize| -> Vec<Vec<u8>> {
        let vol = &volatile[d];
        let with = |keep: &dyn Fn(usize) -> bool| {
            let mut img = durable[d].clone();
            for (i, (off, data)) in vol.iter().enumerate() {
                if keep(i) {
                    img[*off as usize..*off as usize + data.len()].copy_from_slice(data);
                }
            }
            img
        };
        let mut v = vec![with(&|_| false)];
        if vol.len() <= 6 {
            for j in 0..vol.len() {
                v.push(with(&|i| i == j));
                v.push(with(&|i| i != j));
            }
        }
        // The last write torn at a sector boundary.
        if let Some((off, data)) = vol.last().filter(|(_, d)| d.len() > 512) {
            let mut img = with(&|i| i + 1 < vol.len());
            let cut = (data.len() / 2) / 512 * 512;
            img[*off as usize..*off as usize + cut].copy_from_slice(&data[..cut]);
            v.push(img);
        }
        v
    };
    for s in variants(0) {
        out.push(([s, current[1].clone()], false));
    }
    for h in variants(1) {
        out.push(([current[0].clone(), h], false));
    }
    for (s, h) in variants(0).into_iter().zip(variants(1)) {
        out.push(([s, h], false));
    }
    out
}

struct Found {
    states: usize,
    violations: Vec<String>,
    /// Commits forced by slot pressure that wrote the SSD only, while recording.
    ssd_only_commits: u64,
}

fn run(spec: &str, ops: &[Op]) -> Found {
    let rec = Arc::new(Recording {
        inner: MemBackend::new(0, HDD),
        log: Mutex::new(Vec::new()),
        ops: Mutex::new((0, false)),
    });
    create(&*rec, &CreateOptions { spec: spec.into(), block_size: Some(BS), ssd_size: SSD, hdd_size: None })
        .unwrap_or_else(|e| panic!("{spec}: {e}"));
    let opts = ServeOptions {
        spec: spec.into(),
        movers: 2,
        commit_interval: Duration::from_millis(5),
        ..ServeOptions::default()
    };
    let dev = open(rec.clone() as Arc<dyn Backend>, opts).unwrap_or_else(|e| panic!("{spec}: {e}"));
    dev.start();
    // Setup: every block written once, some read twice (cached or promoted), all flushed.
    let size = dev.size() as usize;
    let mut current = vec![0u8; size];
    for b in 0..(size as u64 / BS) {
        let data = pattern(b, BS as usize);
        dev.write(&data, b * BS, false).unwrap_or_else(|e| panic!("{spec}: {e}"));
        current[(b * BS) as usize..((b + 1) * BS) as usize].copy_from_slice(&data);
    }
    for b in [0u64, 8, 16, 40] {
        let mut buf = vec![0u8; (4 * BS) as usize];
        for _ in 0..3 {
            dev.read(&mut buf, b * BS).unwrap_or_else(|e| panic!("{spec}: {e}"));
        }
    }
    dev.flush().unwrap_or_else(|e| panic!("{spec}: {e}"));
    let _ = dev.wait_idle(Duration::from_secs(10));
    dev.flush().unwrap_or_else(|e| panic!("{spec}: {e}"));
    // Recording starts from these images: taken with the log's lock held, which every write
    // holds too (a mover's timer may write at any moment).
    let (base, ssd_only_before) = {
        let mut log = rec.log.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        log.clear();
        ([rec.inner.image(Dev::Ssd), rec.inner.image(Dev::Hdd)], dev.stats().ssd_only_commits)
    };
    let mut models = vec![Model { flushed: current.clone(), since: HashMap::new() }];
    for (i, &op) in ops.iter().enumerate() {
        *rec.ops.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = (i, true);
        let (changed, flush) = apply(&dev, op, 1000 + i as u64, &mut current);
        *rec.ops.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = (i + 1, false);
        let last = models.last().expect("a model");
        let mut next = Model { flushed: last.flushed.clone(), since: last.since.clone() };
        for (b, v) in changed {
            next.since.entry(b).or_default().push(v);
        }
        if flush {
            next = Model { flushed: current.clone(), since: HashMap::new() };
        }
        models.push(next);
    }
    // The movers go on: their work is recorded too, until they settle.
    let _ = dev.wait_idle(Duration::from_secs(10));
    let ssd_only_commits = dev.stats().ssd_only_commits - ssd_only_before;
    drop(dev);
    let log = rec.log.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
    if std::env::var_os("TIERWISE_CRASH_VERBOSE").is_some() {
        for (k, (e, done, fl)) in log.iter().enumerate() {
            match e {
                Event::Write(d, off, data) => {
                    eprintln!("  {k}: write {d:?} {off}+{} (ops {done}{})", data.len(), if *fl { "+" } else { "" })
                }
                Event::Sync(d) => eprintln!("  {k}: sync {d:?} (ops {done}{})", if *fl { "+" } else { "" }),
            }
        }
    }
    let mut found = Found { states: 0, violations: Vec::new(), ssd_only_commits };
    let mut seen = std::collections::HashSet::new();
    for k in 0..log.len() {
        let (_, done, in_flight) = &log[k];
        // In flight: the model before it, with what it wrote allowed (it was not acknowledged).
        let model = if *in_flight {
            let (before, after) = (&models[*done], &models[done + 1]);
            let mut m = Model { flushed: before.flushed.clone(), since: before.since.clone() };
            for (b, vs) in &after.since {
                m.since.entry(*b).or_default().extend(vs.iter().copied());
            }
            for (i, (&a, &b)) in after.flushed.iter().zip(&before.flushed).enumerate() {
                if a != b {
                    m.since.entry(i).or_default().push(a);
                }
            }
            m
        } else {
            Model { flushed: models[*done].flushed.clone(), since: models[*done].since.clone() }
        };
        for (images, kill) in crash_images(&base, &log, k) {
            let key = {
                use std::hash::{Hash, Hasher};
                let mut h = std::collections::hash_map::DefaultHasher::new();
                images.hash(&mut h);
                (h.finish(), *done, *in_flight)
            };
            if !seen.insert(key) {
                continue;
            }
            found.states += 1;
            if let Err(e) = check(spec, &images, &model) {
                found.violations.push(format!(
                    "{spec} {ops:?}: {} after log entry {k} ({done} ops done{}): {e}",
                    if kill { "kill -9" } else { "power cut" },
                    if *in_flight { ", one in flight" } else { "" }
                ));
            }
        }
    }
    found
}

fn check(spec: &str, images: &[Vec<u8>; 2], model: &Model) -> Result<(), String> {
    let mem = Arc::new(MemBackend::new(images[0].len() as u64, images[1].len() as u64));
    mem.write(Dev::Ssd, &images[0], 0).map_err(|e| e.to_string())?;
    mem.write(Dev::Hdd, &images[1], 0).map_err(|e| e.to_string())?;
    let dev = open(mem as Arc<dyn Backend>, ServeOptions { spec: spec.into(), movers: 1, ..ServeOptions::default() })
        .map_err(|e| format!("recovery failed: {e}"))?;
    let mut all = vec![0u8; dev.size() as usize];
    dev.read(&mut all, 0).map_err(|e| format!("reading after recovery: {e}"))?;
    if let Some(i) = (0..all.len()).find(|&i| !model.allowed(i, all[i])) {
        return Err(format!(
            "byte {i} (block {}) reads {}, flushed {}, written since {:?}",
            i as u64 / BS,
            all[i],
            model.flushed[i],
            model.since.get(&i)
        ));
    }
    dev.check()?;
    Ok(())
}

#[test]
fn every_crash_state_of_every_servable_architecture_reads_back_what_was_flushed() {
    let full = std::env::var("TIERWISE_CRASH_SCOPE").is_ok_and(|v| v == "full");
    let only = std::env::var("TIERWISE_CRASH_ONLY").ok();
    let mut workloads: Vec<Vec<Op>> = OPS.iter().map(|&o| vec![o]).collect();
    for (i, &a) in OPS.iter().enumerate() {
        for (j, &b) in OPS.iter().enumerate() {
            // The bounded sample: a quarter of the pairs, every first operation in it.
            if full || (i + j) % 4 == 0 {
                workloads.push(vec![a, b]);
            }
        }
    }
    workloads.push(vec![Op::Write(2), Op::Read(8), Op::FuaWrite(9), Op::Trim(20), Op::Flush]);
    let (mut states, mut violations, mut runs, mut ssd_only) = (0, Vec::new(), 0, 0);
    let started = std::time::Instant::now();
    for spec in specs().iter().filter(|s| only.as_ref().is_none_or(|o| s.starts_with(o.as_str()))) {
        let before = states;
        for ops in &workloads {
            let f = run(spec, ops);
            states += f.states;
            ssd_only += f.ssd_only_commits;
            runs += 1;
            for v in &f.violations {
                eprintln!("VIOLATION {v}");
            }
            violations.extend(f.violations);
        }
        eprintln!("{spec}: {} crash states, {:.0} s so far", states - before, started.elapsed().as_secs_f64());
    }
    eprintln!(
        "block device: {runs} workloads, {states} crash states, {} violations; {ssd_only} SSD-only commits among them",
        violations.len()
    );
    assert!(violations.is_empty(), "{} crash states lose flushed data (first: {})", violations.len(), violations[0]);
    if only.is_none() {
        assert!(states >= 1000, "only {states} crash states were tried");
        // Commits forced by slot pressure that leave the HDD and its replica alone are
        // among the states checked.
        assert!(ssd_only > 0, "no SSD-only commit happened while recording");
    }
}
