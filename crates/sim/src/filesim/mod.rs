//! The file-level simulator: replays file operations ([`FileOp`], from a file trace or a
//! generator) through a namespace, an optional RAM buffer cache and the engine running a
//! file-level architecture, and — in timed modes — through the device models.
//!
//! What it models, and why:
//! - **Namespace.** Paths map to object ids (inode numbers) that stay the same across renames;
//!   every object carries its volume (type-aware policy) and kind. Directories are objects too
//!   (Loris saw them pinned hot): a create, delete or rename writes a 64-byte entry into the
//!   parent directory, and the first operation of a session on a path (a run of operations on
//!   the same path, as between open and close; begun by a create, read, write, append or
//!   truncate, ended by an operation on another path) reads the parent directory (a lookup)
//!   and tells the engine the file was opened (HyCache promotes on open). A stat tells the
//!   engine nothing. The mount, fed the same operations this way, makes exactly the same engine
//!   calls (`crates/fs/tests/engine_calls.rs`).
//! - **RAM buffer cache** ([`page_cache`]; Loris ran with a 64 MB data cache). Reads that hit it
//!   never reach the tiers. Writes are buffered and reach the tiers when evicted (clustered per
//!   file) or at the final sync; a write that covers part of a page that is not cached and lies
//!   inside the file first reads that page (Loris's "append-read"). Deletes and truncates drop
//!   buffered pages at once, so deleted files never reach the SSD.
//! - **Devices** ([`timed`]). Each data access the engine serves is charged on the devices it
//!   touches, at the file's address (one region per file, so the HDD seeks between files). The
//!   HDD has the block simulator's queue (merging, mq-deadline, NCQ), so reads go before the
//!   backlog of writes a real host would also hold back. Background work runs as soon as it is
//!   issued: the source reads, then the destination writes, at the work's I/O priority. An
//!   access the engine marks [`Served::blocked`] starts only after that work and any work in
//!   flight on the same file.
//! - **Closed loop = `tierwise replay`'s workers.** With `Timing::Closed { depth }` operations
//!   start in trace order, at most `depth` at a time, and one waits while an operation on the
//!   same path, or on a directory around it, runs ([`FileOp::conflicts_with`]), as the
//!   replayer's workers do. Without that rule two readers of one hot file overlapped here and
//!   never on the mount, which put more load on the HDD queue than the mount saw.
//! - **Front end** ([`FrontEndCost`], on a modelled FUSE mount). Each operation costs its FUSE
//!   requests' time, and on regular FUSE I/O its data reaches the engine in 128 KiB pieces told
//!   one after another, each when the previous one's I/O is done, as the kernel sends a
//!   reader's requests.
//! - **Measurement window.** Operations before `measure_from` (a benchmark's preallocation
//!   phase) run but are not counted: Loris reports Postmark's transaction time without its
//!   preallocation, and FileBench's IOPS without fileset creation.

mod front_end;
pub mod page_cache;
pub(crate) mod report;
mod timed;
mod working_set;

pub use front_end::FrontEndCost;
pub use working_set::WorkingSet;

use std::time::Instant;

use hashbrown::HashMap;
use tierwise_core::arch::type_aware::{file_volumes, volume_of};
use tierwise_core::{
    Clock, Engine, EngineStats, Level, ManualClock, Nanos, ObjectClass, ObjectId, ObjectKind, Op, Request, Setup, Work,
    arch_info, build_arch,
};

use crate::device::{DevOp, DeviceSet, DeviceStats, QueueConfig};
use crate::filetrace::{FileOp, FileOpKind};
use crate::metrics::{Histogram, SimReport};
use crate::sim::{FoldHash, Progress, SimError, Timing};
use page_cache::{DirtyRun, PAGE, PageCache};

/// Bytes of one directory entry.
pub const DIR_ENTRY: u64 = 64;

/// What to simulate.
#[derive(Clone, Debug)]
pub struct FileSimConfig {
    /// Architecture spec: a file-level architecture, `ssd-only` or `hdd-only`.
    pub arch: String,
    /// SSD bytes for the architecture.
    pub ssd_bytes: u64,
    /// RAM buffer cache bytes (0: none; every operation reaches the engine).
    pub ram_bytes: u64,
    /// Timing: `None` (placement and hit counting only), `Open` (the trace's timestamps) or
    /// `Closed` (that many operations outstanding).
    pub timing: Timing,
    /// Devices.
    pub devices: DeviceSet,
    /// The HDD's queue (scheduler, merging).
    pub hdd_queue: QueueConfig,
    /// Bytes of device address space per file (0: the file's size rounded up to a power of
    /// two, at least 1 MiB, files laid out in the order first touched). The mount's HDD
    /// emulation gives each file 64 MiB; a prediction of an emulated mount uses the same.
    pub region_bytes: u64,
    /// Background work items executed at once; 0: all as soon as issued (the default, as the
    /// block simulator does). The mount's mover runs one at a time, but with one mover the
    /// file-level caches stall: a cold file whose copy is still queued is the coldest SSD file,
    /// is not evictable while it moves, and eviction stops (on-demand caching on the Zipf web
    /// server at 25 % issues 15,862 copies instead of 37,763). The shared front-end driver
    /// (issue 16) decides this for every front end.
    pub movers: u32,
    /// Directories are objects the engine places (lookups and entry updates access them).
    pub dirs: bool,
    /// HDD spin-down after this idle time (None: never).
    pub spin_down: Option<Nanos>,
    /// Endurance read weight (GreenDM's r).
    pub read_weight: f64,
    /// Operations before this index are not measured (a benchmark's setup phase).
    pub measure_from: u64,
    /// Write back buffered and dirty data at the end (not measured).
    pub flush_at_end: bool,
    /// Stop after this many operations.
    pub max_ops: Option<u64>,
    /// Check the engine's invariants every this many operations (0: never).
    pub check_every: u64,
    /// The workload's working set, when known (cost, report).
    pub footprint_bytes: Option<u64>,
    /// The front end's own time per operation (a FUSE mount's round trips), added to each
    /// timed operation; `None`: the operations reach the devices directly.
    pub front_end: Option<FrontEndCost>,
}

impl FileSimConfig {
    /// A configuration with the paper presets, closed loop of one, a 64 MiB buffer cache (Loris)
    /// and directories as objects.
    pub fn new(arch: &str, ssd_bytes: u64) -> FileSimConfig {
        FileSimConfig {
            arch: arch.to_string(),
            ssd_bytes,
            ram_bytes: 64 << 20,
            timing: Timing::Closed { depth: 1 },
            devices: DeviceSet::default(),
            hdd_queue: QueueConfig::default(),
            region_bytes: 0,
            movers: 0,
            dirs: true,
            spin_down: None,
            read_weight: 0.1,
            measure_from: 0,
            flush_at_end: false,
            front_end: None,
            max_ops: None,
            check_every: 0,
            footprint_bytes: None,
        }
    }
}

/// Architectures the file simulator runs: the file-level ones and the two single-device
/// baselines.
pub fn file_arch_allowed(spec: &str) -> Result<(), SimError> {
    let name = spec.split(':').next().unwrap_or("");
    let info = arch_info(name)?;
    if info.caps.runs_on_files() {
        return Ok(());
    }
    let allowed: Vec<&str> =
        tierwise_core::ARCHITECTURES.iter().filter(|a| a.caps.runs_on_files()).map(|a| a.name).collect();
    Err(SimError::Unsupported(format!(
        "`{}` is a block-level architecture; a file trace runs on a file-level one: {}",
        info.name,
        allowed.join(", ")
    )))
}

/// One namespace object.
#[derive(Clone, Copy, Debug, Default)]
struct Node {
    size: u64,
    /// Entries, for a directory.
    entries: u64,
    volume: u16,
    dir: bool,
}

/// Paths to ids, ids to nodes. Ids are never reused, so a recreated path is a new object.
struct Namespace {
    paths: HashMap<Box<str>, u64, StrHash>,
    nodes: Vec<Node>,
    prefixes: Vec<String>,
}

const ROOT: u64 = 0;

impl Namespace {
    fn new(prefixes: Vec<String>) -> Namespace {
        let mut paths = HashMap::with_hasher(StrHash);
        paths.insert(Box::from("/"), ROOT);
        Namespace { paths, nodes: vec![Node { dir: true, ..Node::default() }], prefixes }
    }
    fn get(&self, path: &str) -> Option<u64> {
        self.paths.get(path).copied()
    }
    fn add(&mut self, path: &str, dir: bool) -> u64 {
        let id = self.nodes.len() as u64;
        self.nodes.push(Node { size: 0, entries: 0, volume: volume_of(&self.prefixes, path), dir });
        self.paths.insert(Box::from(path), id);
        id
    }
    fn node(&mut self, id: u64) -> &mut Node {
        &mut self.nodes[id as usize]
    }
    fn class(&self, id: u64) -> ObjectClass {
        let n = &self.nodes[id as usize];
        ObjectClass { volume: n.volume, kind: if n.dir { ObjectKind::Meta } else { ObjectKind::Data } }
    }
}

fn parent_of(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) | None => "/",
        Some(i) => &path[..i],
    }
}

/// A fast string hasher for paths (the simulator's namespace is its hottest map).
#[derive(Clone, Copy, Default)]
pub struct StrHash;

impl std::hash::BuildHasher for StrHash {
    type Hasher = page_cache::PageKeyHasher;
    fn build_hasher(&self) -> page_cache::PageKeyHasher {
        std::hash::BuildHasher::build_hasher(&page_cache::PageKeyHash)
    }
}

/// Counters of the measured window.
#[derive(Clone, Debug, Default)]
struct Tally {
    ops: u64,
    reads: u64,
    writes: u64,
    read_bytes: u64,
    write_bytes: u64,
    /// Data operations (read, write, append) by the slowest level that served them.
    read_levels: [u64; 3],
    write_levels: [u64; 3],
    /// Operations that touched no HDD.
    fast_ops: u64,
    accesses: u64,
    ram_read_hits: u64,
}

/// The file-level simulator; feed it operations with [`FileSim::op`], then [`FileSim::finish`].
pub struct FileSim {
    cfg: FileSimConfig,
    engine: Engine<ManualClock>,
    clock: ManualClock,
    timed: Option<timed::Timed>,
    ns: Namespace,
    cache: PageCache,
    addrs: HashMap<u64, u64, FoldHash>,
    next_addr: u64,
    last_arrival: Nanos,
    first_time: Option<u64>,
    /// The operation being served: arrival, waiter (timed runs), slowest level.
    now: Nanos,
    cur_op: u32,
    op_level: Option<Level>,
    prev_path: String,
    runs: Vec<DirtyRun>,
    missing: Vec<(u64, u64)>,
    work_buf: Vec<Work>,
    ios: Vec<(Level, DevOp, u64, u64)>,
    n: u64,
    tally: Tally,
    measure_start: Nanos,
    last_completion: Nanos,
    base_engine: EngineStats,
    base_hdd: DeviceStats,
    base_ssd: DeviceStats,
    unknown_paths: u64,
    wall: Instant,
    label: String,
}

impl FileSim {
    /// A simulator for `cfg`; `label` names the workload in the report.
    pub fn new(cfg: &FileSimConfig, label: &str) -> Result<FileSim, SimError> {
        file_arch_allowed(&cfg.arch)?;
        let setup = Setup { fast_capacity: cfg.ssd_bytes, slow_capacity: 0, object_size: 0 };
        let clock = ManualClock::new();
        let mut engine = Engine::new(build_arch(&cfg.arch, &setup)?, clock.clone());
        engine.set_report_invalidations(false);
        let timed = match cfg.timing {
            Timing::None => {
                engine.set_instant(true);
                None
            }
            _ => Some(timed::Timed::new(&cfg.devices, cfg.spin_down, cfg.hdd_queue, cfg.movers)?),
        };
        let prefixes = file_volumes(&cfg.arch)?;
        let mut sim = FileSim {
            cfg: cfg.clone(),
            engine,
            clock,
            timed,
            ns: Namespace::new(prefixes),
            cache: PageCache::new(cfg.ram_bytes),
            addrs: HashMap::with_hasher(FoldHash),
            next_addr: 0,
            last_arrival: Nanos::ZERO,
            first_time: None,
            now: Nanos::ZERO,
            cur_op: timed::NOBODY,
            op_level: None,
            prev_path: String::new(),
            runs: Vec::new(),
            missing: Vec::new(),
            work_buf: Vec::new(),
            ios: Vec::new(),
            n: 0,
            tally: Tally::default(),
            measure_start: Nanos::ZERO,
            last_completion: Nanos::ZERO,
            base_engine: EngineStats::default(),
            base_hdd: DeviceStats::default(),
            base_ssd: DeviceStats::default(),
            unknown_paths: 0,
            wall: Instant::now(),
            label: label.to_string(),
        };
        if sim.cfg.dirs {
            let class = sim.ns.class(ROOT);
            sim.engine.access(&Request::op(ObjectId(ROOT), Op::Create).with_class(class));
        }
        Ok(sim)
    }

    /// Whether the run reached `max_ops`.
    pub fn done(&self) -> bool {
        self.cfg.max_ops.is_some_and(|m| self.n >= m)
    }

    /// Operations replayed so far.
    pub fn ops(&self) -> u64 {
        self.n
    }

    /// The engine (inspection, tests).
    pub fn engine(&self) -> &Engine<ManualClock> {
        &self.engine
    }

    /// Records every access told to the engine from now on ([`Engine::calls`]).
    pub fn record_calls(&mut self) {
        self.engine.record_calls(true);
    }

    /// The size the simulator's namespace gives `path` (tests).
    pub fn size_of(&self, path: &str) -> Option<u64> {
        self.ns.get(path).map(|id| self.ns.nodes[id as usize].size)
    }

    /// The object id of `path` (tests, which-tier style queries).
    pub fn id_of(&self, path: &str) -> Option<ObjectId> {
        self.ns.get(path).map(ObjectId)
    }

    /// Replays one operation.
    pub fn op(&mut self, op: &FileOp) -> Result<(), SimError> {
        if self.done() {
            return Ok(());
        }
        if self.n == self.cfg.measure_from {
            self.begin_measure()?;
        }
        let arrival = match self.cfg.timing {
            Timing::Open { speedup } => {
                let t0 = *self.first_time.get_or_insert(op.time_ns);
                Nanos((op.time_ns.saturating_sub(t0) as f64 / speedup) as u64).max(self.last_arrival)
            }
            Timing::Closed { depth } => {
                self.wait_for_slot(depth, op)?;
                self.clock.now().max(self.last_arrival)
            }
            Timing::None => {
                let t0 = *self.first_time.get_or_insert(op.time_ns);
                Nanos(op.time_ns.saturating_sub(t0)).max(self.last_arrival)
            }
        };
        self.last_arrival = arrival;
        self.advance_to(arrival)?;
        self.now = arrival;
        let measured = self.n >= self.cfg.measure_from;
        if let Some(t) = self.timed.as_mut() {
            let front_end = self.cfg.front_end.map_or(Nanos::ZERO, |f| f.cost(op));
            self.cur_op = t.op_waiter(arrival, measured, front_end);
            if matches!(self.cfg.timing, Timing::Closed { .. }) {
                t.op_running(self.cur_op, op);
            }
        }
        self.op_level = None;
        // A session is a run of operations on one open file: an operation on another path ends
        // it, and only those that open a file start one (a stat, delete or rename opens
        // nothing, as on the mount).
        let session = op.path != self.prev_path;
        if session {
            self.prev_path.clear();
            if matches!(
                op.kind,
                FileOpKind::Create | FileOpKind::Read | FileOpKind::Write | FileOpKind::Append | FileOpKind::Truncate
            ) {
                self.prev_path.push_str(&op.path);
            }
        }
        self.dispatch(op, session)?;
        if measured {
            self.count(op);
        }
        if let Some(t) = self.timed.as_mut() {
            t.resume_if_idle(self.cur_op, arrival);
            self.cur_op = timed::NOBODY;
        }
        self.n += 1;
        if self.cfg.check_every > 0 && self.n.is_multiple_of(self.cfg.check_every) {
            self.engine.check_invariants().map_err(|message| SimError::Invariant { request: self.n, message })?;
        }
        Ok(())
    }

    fn count(&mut self, op: &FileOp) {
        let t = &mut self.tally;
        t.ops += 1;
        let level = self.op_level.unwrap_or(Level::Ram);
        match op.kind {
            FileOpKind::Read => {
                t.reads += 1;
                t.read_bytes += op.length;
                t.read_levels[level.index()] += 1;
                if self.op_level.is_none() {
                    t.ram_read_hits += 1;
                }
            }
            FileOpKind::Write | FileOpKind::Append => {
                t.writes += 1;
                t.write_bytes += op.length;
                t.write_levels[level.index()] += 1;
            }
            _ => {}
        }
        if level != Level::Slow {
            t.fast_ops += 1;
        }
    }

    fn begin_measure(&mut self) -> Result<(), SimError> {
        self.tally = Tally::default();
        self.measure_start = self.last_arrival;
        if matches!(self.cfg.timing, Timing::Closed { .. }) {
            // A benchmark measures from a settled system: the setup's operations, the write-backs
            // they queued and the work they issued finish first (as after a sync), so that the
            // measured phase neither pays for the setup's backlog nor skips it.
            self.drain()?;
            self.measure_start = self.last_completion.max(self.measure_start).max(self.clock.now());
        }
        self.base_engine = self.engine.stats().clone();
        if let Some(t) = self.timed.as_mut() {
            t.hist = Histogram::default();
            self.base_hdd = *t.dev.hdd.stats();
            self.base_ssd = *t.dev.ssd.stats();
        }
        Ok(())
    }

    fn dispatch(&mut self, op: &FileOp, session: bool) -> Result<(), SimError> {
        match op.kind {
            FileOpKind::Mkdir | FileOpKind::Create => {
                let dir = op.kind == FileOpKind::Mkdir;
                if let Some(id) = self.ns.get(&op.path) {
                    if !dir && !self.ns.nodes[id as usize].dir {
                        self.truncate(id, 0); // create over an existing file truncates it
                    }
                    return Ok(());
                }
                self.create(&op.path, dir);
            }
            FileOpKind::Read => {
                let id = self.existing_or_adopt(&op.path, op.offset.saturating_add(op.length));
                self.open_session(id, &op.path, session);
                self.read(id, op.offset, op.length);
            }
            FileOpKind::Write | FileOpKind::Append => {
                let id = match self.ns.get(&op.path) {
                    Some(id) => id,
                    None => {
                        self.unknown_paths += 1;
                        self.create(&op.path, false)
                    }
                };
                self.open_session(id, &op.path, session);
                let offset = if op.kind == FileOpKind::Append { self.ns.nodes[id as usize].size } else { op.offset };
                self.write(id, offset, op.length);
            }
            FileOpKind::Truncate => {
                let id = self.existing_or_adopt(&op.path, op.length);
                self.open_session(id, &op.path, session);
                self.truncate(id, op.length);
            }
            FileOpKind::Delete | FileOpKind::Rmdir => match self.ns.get(&op.path) {
                Some(id) => {
                    self.remove(id, &op.path);
                    let parent = self.ensure_dir(parent_of(&op.path));
                    self.dir_entry(parent, false);
                }
                None => self.unknown_paths += 1,
            },
            FileOpKind::Rename => self.rename(&op.path, &op.path2),
            // A stat reads attributes the front end keeps itself: the engine is not told (the
            // mount does not tell it either, and a stat must not count as an open).
            FileOpKind::Stat => {
                if self.ns.get(&op.path).is_none() {
                    self.unknown_paths += 1;
                }
            }
        }
        Ok(())
    }

    /// The id of `path`, adopting an unknown one as an existing file of `size` bytes on the HDD
    /// (a trace that starts with files present).
    fn existing_or_adopt(&mut self, path: &str, size: u64) -> u64 {
        if let Some(id) = self.ns.get(path) {
            return id;
        }
        self.unknown_paths += 1;
        self.ensure_dir(parent_of(path));
        let id = self.ns.add(path, false);
        self.ns.node(id).size = size;
        id
    }

    /// The id of directory `path`, creating it (and its parents) when missing.
    fn ensure_dir(&mut self, path: &str) -> u64 {
        if let Some(id) = self.ns.get(path) {
            return id;
        }
        self.create(path, true)
    }

    fn create(&mut self, path: &str, dir: bool) -> u64 {
        let parent = self.ensure_dir(parent_of(path));
        if dir && !self.cfg.dirs {
            return self.ns.add(path, true);
        }
        let id = self.ns.add(path, dir);
        let class = self.ns.class(id);
        self.access(Request::op(ObjectId(id), Op::Create).with_class(class), true);
        self.dir_entry(parent, true);
        id
    }

    /// A lookup at the start of a session: the parent directory is read, and the engine hears
    /// that the file was opened.
    fn open_session(&mut self, id: u64, path: &str, session: bool) {
        if !session {
            return;
        }
        if self.cfg.dirs
            && let Some(parent) = self.ns.get(parent_of(path))
        {
            let size = self.ns.nodes[parent as usize].size;
            self.read(parent, 0, size.clamp(1, PAGE));
        }
        let class = self.ns.class(id);
        self.access(Request::op(ObjectId(id), Op::Open).with_class(class), true);
    }

    /// Adds or removes an entry in directory `dir`.
    fn dir_entry(&mut self, dir: u64, add: bool) {
        if !self.cfg.dirs {
            return;
        }
        let node = self.ns.node(dir);
        let offset = if add { node.entries * DIR_ENTRY } else { 0 };
        node.entries = if add { node.entries + 1 } else { node.entries.saturating_sub(1) };
        self.write(dir, offset, DIR_ENTRY);
    }

    fn remove(&mut self, id: u64, path: &str) {
        if self.ns.nodes[id as usize].dir && !self.cfg.dirs {
            // Directories are not objects in this run: the engine never heard of this one.
            self.ns.paths.remove(path);
            return;
        }
        let size = self.ns.nodes[id as usize].size;
        self.cache.drop_pages(id, 0, size.div_ceil(PAGE));
        let class = self.ns.class(id);
        self.access(Request::op(ObjectId(id), Op::Delete).with_class(class), true);
        self.ns.paths.remove(path);
    }

    fn truncate(&mut self, id: u64, new_size: u64) {
        let old = self.ns.nodes[id as usize].size;
        self.cache.drop_pages(id, new_size.div_ceil(PAGE), old.div_ceil(PAGE));
        self.ns.node(id).size = new_size;
        let class = self.ns.class(id);
        let req = Request { obj: ObjectId(id), op: Op::Truncate, offset: new_size, len: 0, class };
        self.access(req, true);
    }

    fn rename(&mut self, from: &str, to: &str) {
        let Some(id) = self.ns.get(from) else {
            self.unknown_paths += 1;
            return;
        };
        if from == to {
            return;
        }
        if let Some(old) = self.ns.get(to) {
            self.remove(old, to);
        } else {
            let parent = self.ensure_dir(parent_of(to));
            self.dir_entry(parent, true);
        }
        self.ns.paths.remove(from);
        self.ns.paths.insert(Box::from(to), id);
        self.moved(id, to);
        if self.ns.nodes[id as usize].dir {
            // Descendants move with the directory.
            let prefix = format!("{from}/");
            let inside: Vec<(Box<str>, u64)> = self
                .ns
                .paths
                .iter()
                .filter(|(p, _)| p.starts_with(prefix.as_str()))
                .map(|(p, &i)| (p.clone(), i))
                .collect();
            for (p, i) in inside {
                self.ns.paths.remove(&p);
                let new_path = format!("{to}/{}", &p[prefix.len()..]);
                self.ns.paths.insert(Box::from(new_path.as_str()), i);
                self.moved(i, &new_path);
            }
        }
        if let Some(parent) = self.ns.get(parent_of(from)) {
            self.dir_entry(parent, false);
        }
    }

    /// Tells the engine that `id` now lives at `path` (its volume may change).
    fn moved(&mut self, id: u64, path: &str) {
        let volume = volume_of(&self.ns.prefixes, path);
        self.ns.node(id).volume = volume;
        let class = self.ns.class(id);
        self.access(Request::op(ObjectId(id), Op::Rename).with_class(class), true);
    }

    fn read(&mut self, id: u64, offset: u64, len: u64) {
        if !self.cache.enabled() {
            let class = self.ns.class(id);
            self.tell_data(Request { obj: ObjectId(id), op: Op::Read, offset, len, class });
            return;
        }
        let size = self.ns.nodes[id as usize].size;
        let end = offset.saturating_add(len).min(size);
        if end <= offset {
            return;
        }
        let (first, last) = (offset / PAGE, (end - 1) / PAGE);
        let mut missing = std::mem::take(&mut self.missing);
        missing.clear();
        for p in first..=last {
            if !self.cache.touch(id, p) {
                match missing.last_mut() {
                    Some((a, n)) if *a + *n == p => *n += 1,
                    _ => missing.push((p, 1)),
                }
            }
        }
        let hit_bytes = (last - first + 1 - missing.iter().map(|m| m.1).sum::<u64>()) * PAGE;
        if hit_bytes > 0 {
            self.ram_time(hit_bytes);
        }
        let class = self.ns.class(id);
        for &(p, n) in &missing {
            let start = p * PAGE;
            let len = ((p + n) * PAGE).min(size) - start;
            self.access(Request { obj: ObjectId(id), op: Op::Read, offset: start, len, class }, true);
            for q in p..p + n {
                self.cache.insert(id, q, false, &mut self.runs);
            }
        }
        self.missing = missing;
        self.write_back_runs();
    }

    fn write(&mut self, id: u64, offset: u64, len: u64) {
        let old = self.ns.nodes[id as usize].size;
        let end = offset.saturating_add(len);
        self.ns.node(id).size = old.max(end);
        if !self.cache.enabled() {
            let class = self.ns.class(id);
            self.tell_data(Request { obj: ObjectId(id), op: Op::Write, offset, len, class });
            return;
        }
        if len == 0 {
            return;
        }
        let (first, last) = (offset / PAGE, (end - 1) / PAGE);
        // A page whose existing bytes the write does not cover entirely is read first.
        let class = self.ns.class(id);
        let edges = [first, last];
        for &p in if first == last { &edges[..1] } else { &edges[..] } {
            let (lo, hi) = (p * PAGE, (p * PAGE + PAGE).min(old));
            if lo < hi && (offset > lo || end < hi) && !self.cache.contains(id, p) {
                self.access(Request { obj: ObjectId(id), op: Op::Read, offset: lo, len: hi - lo, class }, true);
            }
        }
        for p in first..=last {
            self.cache.insert(id, p, true, &mut self.runs);
        }
        self.ram_time(len);
        self.write_back_runs();
    }

    /// Charges a RAM hit of `bytes` to the current operation.
    fn ram_time(&mut self, bytes: u64) {
        if let Some(t) = self.timed.as_mut()
            && self.cur_op != timed::NOBODY
        {
            t.ram(self.now, bytes, self.cur_op);
        }
    }

    /// Writes back the dirty runs the buffer cache evicted (background: not charged).
    fn write_back_runs(&mut self) {
        while let Some(r) = self.runs.pop() {
            let Some(node) = self.ns.nodes.get(r.obj as usize).copied() else { continue };
            let start = r.first * PAGE;
            let end = ((r.first + r.pages) * PAGE).min(node.size);
            if end <= start {
                continue;
            }
            let class = self.ns.class(r.obj);
            let req = Request { obj: ObjectId(r.obj), op: Op::Write, offset: start, len: end - start, class };
            self.access(req, false);
        }
    }

    fn addr(&mut self, obj: u64, end: u64) -> u64 {
        let next = &mut self.next_addr;
        let region = self.cfg.region_bytes;
        *self.addrs.entry(obj).or_insert_with(|| {
            let a = *next;
            *next += if region > 0 { region } else { end.max(1 << 20).next_power_of_two() };
            a
        })
    }
}

/// Replays `ops` under `cfg` and reports; `label` names the workload.
pub fn simulate_file_ops<'a>(
    ops: impl IntoIterator<Item = &'a FileOp>,
    label: &str,
    cfg: &FileSimConfig,
    progress: &mut dyn Progress,
) -> Result<SimReport, SimError> {
    let mut sim = FileSim::new(cfg, label)?;
    for op in ops {
        if sim.done() {
            break;
        }
        sim.op(op)?;
        if sim.ops() & 0xffff == 0 {
            progress.update(sim.ops());
        }
    }
    progress.update(sim.ops());
    sim.finish()
}

#[cfg(test)]
mod tests;
