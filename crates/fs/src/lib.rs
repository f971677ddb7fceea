//! `tierwise mount`: a hybrid file system (FUSE) over an SSD directory and an HDD directory. It
//! executes the engine's decisions and has no placement policy of its own: every operation is
//! told to the engine ([`tierwise_core::Engine`]), which answers where to serve it, and a mover
//! thread executes the background work (promotions, demotions, copies, write-backs,
//! invalidations) with the move protocol of [`tiers`].
//!
//! # Concurrency
//! - One lock per file orders data I/O against moves: an operation holds it shared from the
//!   moment it tells the engine until its I/O is done; the mover holds it exclusively for a
//!   whole move (copy, sync, switch, removal of the source). So writes never race a copy, the
//!   work an access triggers starts after that access (the engine's contract), and a write that
//!   arrives during a move waits and lands in the final copy.
//! - An access the engine marks `blocked` (it waits for cleaning, or for its file's move)
//!   releases its file lock, waits until no work on its file is in flight, then runs where the
//!   file is now.
//! - Lock order: file lock, then the engine or the inode table; never the other way round.
//!
//! # State
//! Pins, the write-back dirty set, a journal of moves and the counters live in a redb store
//! ([`state`]) under the state directory (default: `.tierwise-state/` in the SSD directory).
//! Mounting first finishes or rolls back the moves the journal says a crash interrupted, then
//! adopts the trees: the dirty set says which SSD copies are newer than their HDD copy (mtimes
//! can lie: `rsync -t`, `touch -d`), pins put their files on their tier. A lost or unreadable
//! store is rebuilt from the trees alone (a corrupt one is kept aside).
//!
//! # Pins
//! A pinned file is taken out of the policy: the engine forgets it, the file system keeps its
//! one copy on the pinned tier and serves it there. Files pinned to the SSD use a reserve of
//! the quota (`pin_reserve`) that the policy never gets, so the SSD never holds more than the
//! quota; a pin that does not fit the reserve is refused with ENOSPC.

pub mod control;
pub mod emulate;
pub mod state;
pub mod tiers;

use std::collections::{HashMap, HashSet};
use std::ffi::{OsStr, OsString};
use std::fs;
use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, RwLock};
use std::time::{Duration, Instant, SystemTime};

pub use control::{Counters, MoveInProgress, Snapshot};
use emulate::Emulator;
use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, KernelConfig, LockOwner,
    OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen,
    ReplyStatfs, ReplyWrite, ReplyXattr, Request as FuseRequest, TimeOrNow, WriteFlags,
};
use state::{MoveRecord, StateError, StateStore};
pub use tiers::{TierError, Tiers};
use tierwise_core::arch::type_aware::{file_volumes, volume_of};
use tierwise_core::{
    Clock, ConfigError, Engine, Level, Nanos, ObjectClass, ObjectId, ObjectKind, Op, Outcome, Placement, Request,
    Served, Setup, Tier, Work, WorkKind, build_arch,
};

/// Time since the file system started, for the engine (the engine never reads the OS clock).
#[derive(Clone, Debug)]
pub struct SysClock(Instant);

impl Clock for SysClock {
    fn now(&self) -> Nanos {
        Nanos(self.0.elapsed().as_nanos().min(u128::from(u64::MAX)) as u64)
    }
}

/// Mount-time failures.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MountError {
    /// A tier or the mountpoint is unusable.
    #[error(transparent)]
    Tiers(#[from] TierError),
    /// The policy spec is invalid.
    #[error(transparent)]
    Policy(#[from] ConfigError),
    /// The policy is a block-level architecture.
    #[error(
        "`{0}` is a block-level architecture; a mount places files: use a file-level one (tierwise list architectures)"
    )]
    NotFileLevel(String),
    /// Reading the tiers failed.
    #[error("scanning the tiers: {0}")]
    Io(#[from] io::Error),
    /// The state store could not be opened or written.
    #[error(transparent)]
    State(#[from] StateError),
    /// An emulation preset is unknown.
    #[error("--emulate-{0}: {1}")]
    Emulation(&'static str, String),
    /// Two data-path options that exclude each other.
    #[error("{0}")]
    Modes(&'static str),
    /// The pin reserve does not leave the policy any SSD space.
    #[error("the pin reserve ({reserve} bytes) must be smaller than the SSD quota ({quota} bytes)")]
    Reserve {
        /// The reserve asked for.
        reserve: u64,
        /// The quota.
        quota: u64,
    },
}

/// How to run a mount.
#[derive(Clone, Debug)]
pub struct MountConfig {
    /// Architecture spec (a file-level one, or `hdd-only`/`ssd-only`).
    pub policy: String,
    /// SSD bytes tierwise may use.
    pub ssd_quota: u64,
    /// Keep the last decisions and moves of each file, readable as the `user.tierwise.debug`
    /// xattr (tests; costs a little per operation).
    pub debug_events: bool,
    /// Of the quota, bytes kept for files pinned to the SSD.
    pub pin_reserve: u64,
    /// Where the state store lives; `None`: `.tierwise-state/` in the SSD directory.
    pub state_dir: Option<PathBuf>,
    /// Background moves copy at most this many bytes per second (0 = unlimited).
    pub move_rate: u64,
    /// Delay HDD-tier I/O by this simulator HDD preset.
    pub emulate_hdd: Option<String>,
    /// Delay SSD-tier I/O by this simulator SSD preset.
    pub emulate_ssd: Option<String>,
    /// Serve opened files by FUSE passthrough (the kernel does their I/O on the tier file)
    /// when their placement is settled; see [`passthrough`](crate#passthrough).
    pub passthrough: bool,
    /// Let the kernel's page cache sit above the policy (FUSE writeback cache and
    /// `FOPEN_KEEP_CACHE`): reads it holds and writes it has not flushed yet never reach the
    /// daemon; see [`kernel cache`](crate#kernel-page-cache).
    pub kernel_cache: bool,
    /// Bypass the page cache for regular I/O (`FOPEN_DIRECT_IO`): each read and write reaches
    /// the daemon at the size the application asked for; mmap still works through the page
    /// cache (`FUSE_DIRECT_IO_ALLOW_MMAP`). Not with `kernel_cache`.
    pub direct_io: bool,
}

impl MountConfig {
    /// A configuration with the given policy and quota and everything else at its default.
    pub fn new(policy: &str, ssd_quota: u64) -> MountConfig {
        MountConfig {
            policy: policy.to_string(),
            ssd_quota,
            debug_events: false,
            pin_reserve: 0,
            state_dir: None,
            move_rate: 0,
            emulate_hdd: None,
            emulate_ssd: None,
            passthrough: false,
            kernel_cache: false,
            direct_io: false,
        }
    }
}

/// The state directory used when none is given: inside the SSD tier, hidden from the mount.
pub const DEFAULT_STATE_DIR: &str = ".tierwise-state";

const TTL: Duration = Duration::from_secs(1);
const ROOT: u64 = 1;

/// One directory entry of a listing: inode, kind, name.
type DirEntry = (u64, FileType, OsString);

/// One inode: its relative path (shared: every operation takes a copy) and kind.
#[derive(Clone, Debug)]
struct Node {
    rel: Arc<Path>,
    dir: bool,
}

#[derive(Default)]
struct Inodes {
    by_ino: HashMap<u64, Node>,
    by_path: HashMap<PathBuf, u64>,
    next: u64,
}

impl Inodes {
    fn get(&self, ino: u64) -> Option<&Node> {
        self.by_ino.get(&ino)
    }
    fn ino_of(&mut self, rel: &Path, dir: bool) -> u64 {
        if let Some(&i) = self.by_path.get(rel) {
            return i;
        }
        self.next += 1;
        let ino = self.next;
        self.by_ino.insert(ino, Node { rel: rel.into(), dir });
        self.by_path.insert(rel.to_path_buf(), ino);
        ino
    }
    fn forget_path(&mut self, rel: &Path) -> Option<u64> {
        let ino = self.by_path.remove(rel)?;
        self.by_ino.remove(&ino);
        Some(ino)
    }
    /// Moves `from` (and, for a directory, everything under it) to `to`.
    fn rename(&mut self, from: &Path, to: &Path) -> Vec<(u64, PathBuf)> {
        let mut moved = Vec::new();
        let Some(&ino) = self.by_path.get(from) else { return moved };
        if !self.by_ino.get(&ino).is_some_and(|n| n.dir) {
            // A file: one entry, no scan of the table.
            self.by_path.remove(from);
            if let Some(n) = self.by_ino.get_mut(&ino) {
                n.rel = to.into();
            }
            self.by_path.insert(to.to_path_buf(), ino);
            moved.push((ino, to.to_path_buf()));
            return moved;
        }
        let keys: Vec<PathBuf> = self.by_path.keys().filter(|p| p.starts_with(from)).cloned().collect();
        for old in keys {
            let Some(ino) = self.by_path.remove(&old) else { continue };
            let new = match old.strip_prefix(from) {
                Ok(rest) if rest.as_os_str().is_empty() => to.to_path_buf(),
                Ok(rest) => to.join(rest),
                Err(_) => continue,
            };
            if let Some(n) = self.by_ino.get_mut(&ino) {
                n.rel = new.as_path().into();
            }
            self.by_path.insert(new.clone(), ino);
            moved.push((ino, new));
        }
        moved
    }
}

/// Counters of the mover.
#[derive(Debug, Default)]
pub struct MoverStats {
    /// Moves, copies and write-backs done.
    pub done: AtomicU64,
    /// Of which failed.
    pub failed: AtomicU64,
    /// Bytes copied between tiers.
    pub bytes: AtomicU64,
    /// Moves cancelled (by `tierwise cancel`, or to let an access through).
    pub cancelled: AtomicU64,
    /// Accesses served outside the policy (pinned files, files open by passthrough, files
    /// unlinked while open), by tier: reads, writes, read bytes, written bytes.
    pub outside: [[AtomicU64; 4]; 2],
}

/// A file open by passthrough.
struct Backing {
    id: fuser::BackingId,
    opens: u32,
    tier: Tier,
    writable: bool,
    size_at_open: u64,
}

/// The file handle of a passthrough open (regular opens use 0).
const PASSTHROUGH_FH: u64 = 1;

/// File capabilities, which a write clears.
const CAPABILITY_XATTR: &str = "security.capability";

/// The move in progress, shared between the mover and the control commands.
#[derive(Debug, Default)]
struct Progress {
    /// The file moving (0: none).
    ino: AtomicU64,
    kind: Mutex<&'static str>,
    done: AtomicU64,
    total: AtomicU64,
    /// Set to stop the move at its next chunk.
    cancel: AtomicBool,
    /// Accesses waiting for the moving file's lock.
    waiters: AtomicU64,
    /// When the move started (for the cancel-on-contention estimate).
    started: Mutex<Option<Instant>>,
}

struct Shared {
    tiers: Tiers,
    engine: Mutex<Engine<SysClock>>,
    /// Signalled when work is queued (the mover waits on it).
    work_cv: Condvar,
    /// Signalled when work completes (blocked accesses wait on it).
    done_cv: Condvar,
    inodes: Mutex<Inodes>,
    locks: Mutex<HashMap<u64, Arc<RwLock<()>>>>,
    prefixes: Vec<String>,
    stop: AtomicBool,
    stats: MoverStats,
    /// Listings of open directories, by handle.
    dirs: Mutex<HashMap<u64, Vec<DirEntry>>>,
    next_fh: AtomicU64,
    /// Recent decisions and moves per file (read through the `user.tierwise.debug` xattr).
    events: Mutex<HashMap<u64, std::collections::VecDeque<String>>>,
    /// Tier files open for files the kernel has open, by (inode, tier). Dropped when a move
    /// replaces the file, on unlink and rename, and when the kernel releases the file.
    fds: Mutex<HashMap<(u64, usize), Arc<fs::File>>>,
    debug_events: bool,
    store: StateStore,
    /// Pinned files and their tier (taken out of the policy).
    pins: RwLock<HashMap<u64, Tier>>,
    /// Opens the kernel holds per file (an unlinked file lives on until the last is released).
    open_counts: Mutex<HashMap<u64, u32>>,
    /// Files unlinked while open: kept under a hidden name on this tier until the last release.
    orphans: Mutex<HashMap<u64, Tier>>,
    /// The kernel granted passthrough (asked for with `MountConfig::passthrough`).
    passthrough: AtomicBool,
    /// Files open by passthrough: their backing file and opens. Such a file does not move.
    backing: Mutex<HashMap<u64, Backing>>,
    /// Files marked dirty in the store (mirror, so a write checks memory, not the store).
    dirty_marked: Mutex<HashSet<u64>>,
    /// The kernel left clearing set-id bits and capabilities to us (FUSE_HANDLE_KILLPRIV_V2).
    killpriv: AtomicBool,
    /// Tiers whose root is gone (fast, slow), as last checked.
    lost: [AtomicBool; 2],
    /// Files known to have no set-id bits and no capabilities (a write need not clear them);
    /// forgotten when their mode or extended attributes change.
    privs_clear: Mutex<HashSet<u64>>,
    progress: Progress,
    /// Bytes per second moves may copy (0 = unlimited); changeable while mounted.
    move_rate: AtomicU64,
    /// Latency emulation per tier (fast, slow).
    emulate: [Option<Emulator>; 2],
    /// Counters of earlier mounts, from the store.
    saved: Counters,
    cfg: MountConfig,
    started: Instant,
}

/// The hybrid file system; see the crate docs.
pub struct HybridFs {
    shared: Arc<Shared>,
    mover: Option<std::thread::JoinHandle<()>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn errno(e: &io::Error) -> Errno {
    Errno::from_i32(e.raw_os_error().unwrap_or(nix::errno::Errno::EIO as i32))
}

impl HybridFs {
    /// Builds the file system over `tiers`: checks the policy, adopts the files already in the
    /// trees, and starts the mover.
    pub fn new(tiers: Tiers, cfg: &MountConfig) -> Result<HybridFs, MountError> {
        check_policy(&cfg.policy)?;
        if cfg.kernel_cache && cfg.direct_io {
            return Err(MountError::Modes(
                "--kernel-cache keeps pages cached, --direct-io bypasses the page cache: pick one",
            ));
        }
        if cfg.pin_reserve > 0 && cfg.pin_reserve >= cfg.ssd_quota {
            return Err(MountError::Reserve { reserve: cfg.pin_reserve, quota: cfg.ssd_quota });
        }
        let emulator = |which: &'static str, preset: &Option<String>, build: fn(&str) -> Result<Emulator, String>| {
            preset.as_deref().map(build).transpose().map_err(|e| MountError::Emulation(which, e))
        };
        let emulate =
            [emulator("ssd", &cfg.emulate_ssd, Emulator::ssd)?, emulator("hdd", &cfg.emulate_hdd, Emulator::hdd)?];
        let state_dir = cfg.state_dir.clone().unwrap_or_else(|| tiers.ssd.join(DEFAULT_STATE_DIR));
        let store = open_store(&state_dir)?;
        let saved = Counters::from_saved(&store.counters()?);
        let policy_bytes = cfg.ssd_quota.saturating_sub(cfg.pin_reserve).max(1);
        let setup = Setup { fast_capacity: policy_bytes, slow_capacity: 0, object_size: 0 };
        let engine = Engine::new(build_arch(&cfg.policy, &setup)?, SysClock(Instant::now()));
        let prefixes = file_volumes(&cfg.policy)?;
        let mut inodes = Inodes { next: ROOT, ..Inodes::default() };
        inodes.by_ino.insert(ROOT, Node { rel: Path::new("").into(), dir: true });
        inodes.by_path.insert(PathBuf::new(), ROOT);
        let shared = Arc::new(Shared {
            tiers,
            engine: Mutex::new(engine),
            work_cv: Condvar::new(),
            done_cv: Condvar::new(),
            inodes: Mutex::new(inodes),
            locks: Mutex::new(HashMap::new()),
            prefixes,
            stop: AtomicBool::new(false),
            stats: MoverStats::default(),
            dirs: Mutex::new(HashMap::new()),
            next_fh: AtomicU64::new(1),
            events: Mutex::new(HashMap::new()),
            fds: Mutex::new(HashMap::new()),
            debug_events: cfg.debug_events,
            store,
            pins: RwLock::new(HashMap::new()),
            open_counts: Mutex::new(HashMap::new()),
            orphans: Mutex::new(HashMap::new()),
            passthrough: AtomicBool::new(false),
            backing: Mutex::new(HashMap::new()),
            dirty_marked: Mutex::new(HashSet::new()),
            killpriv: AtomicBool::new(false),
            lost: [AtomicBool::new(false), AtomicBool::new(false)],
            privs_clear: Mutex::new(HashSet::new()),
            progress: Progress::default(),
            move_rate: AtomicU64::new(cfg.move_rate),
            emulate,
            saved,
            cfg: cfg.clone(),
            started: Instant::now(),
        });
        shared.recover_moves()?;
        shared.adopt()?;
        let s = Arc::clone(&shared);
        let mover = std::thread::Builder::new().name("tierwise-mover".into()).spawn(move || s.mover())?;
        Ok(HybridFs { shared, mover: Some(mover) })
    }

    /// Where the file at `rel` (relative to the mount) is: `ssd`, `hdd` or `ssd+hdd`.
    pub fn which_tier(&self, rel: &Path) -> Option<&'static str> {
        let ino = lock(&self.shared.inodes).by_path.get(rel).copied()?;
        Some(self.shared.tier_label(ino))
    }

    /// Waits until no background work is queued or in flight (tests, flush).
    pub fn settle(&self) {
        self.shared.settle();
    }

    /// The mover's counters.
    pub fn mover_stats(&self) -> &MoverStats {
        &self.shared.stats
    }

    /// Everything the mount reports (`tierwise stats`).
    pub fn snapshot(&self) -> Snapshot {
        self.shared.snapshot()
    }

    /// A function that takes a snapshot, for the metrics endpoint's thread.
    pub fn snapshot_fn(&self) -> Arc<dyn Fn() -> Snapshot + Send + Sync> {
        let s = Arc::clone(&self.shared);
        Arc::new(move || s.snapshot())
    }
}

impl Drop for HybridFs {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.shared.work_cv.notify_all();
        if let Some(m) = self.mover.take() {
            let _ = m.join();
        }
        self.shared.save_heat(false);
        self.shared.save_counters(true);
    }
}

/// Opens the state store; an unreadable one is kept aside and a new one started (placement is
/// then rebuilt from the trees, as after losing the store).
fn open_store(dir: &Path) -> Result<StateStore, MountError> {
    match StateStore::open(dir) {
        Ok((s, _)) => Ok(s),
        Err(e) => {
            let path = dir.join(state::STATE_FILE);
            if !path.exists() {
                return Err(e.into());
            }
            let stamp = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs());
            let aside = dir.join(format!("{}.unreadable-{stamp}", state::STATE_FILE));
            fs::rename(&path, &aside)?;
            eprintln!(
                "tierwise: the state store {} could not be read ({e}); kept it as {} and rebuilding placement from the trees",
                path.display(),
                aside.display()
            );
            Ok(StateStore::open(dir)?.0)
        }
    }
}

/// The mount's counters from the engine's and the mover's.
fn counters_of(e: &tierwise_core::EngineStats, m: &MoverStats) -> Counters {
    use tierwise_core::engine::EngineStats as S;
    let outside = |t: Tier, i: usize| m.outside[t.index()][i].load(Ordering::Relaxed);
    Counters {
        reads_ssd: e.reads_by_level[0] + e.reads_by_level[1] + outside(Tier::Fast, 0),
        reads_hdd: e.reads_by_level[2] + outside(Tier::Slow, 0),
        writes_ssd: e.writes_by_level[0] + e.writes_by_level[1] + outside(Tier::Fast, 1),
        writes_hdd: e.writes_by_level[2] + outside(Tier::Slow, 1),
        read_bytes_ssd: e.read_bytes_by_level[0] + e.read_bytes_by_level[1] + outside(Tier::Fast, 2),
        read_bytes_hdd: e.read_bytes_by_level[2] + outside(Tier::Slow, 2),
        write_bytes_ssd: e.write_bytes_by_level[0] + e.write_bytes_by_level[1] + outside(Tier::Fast, 3),
        write_bytes_hdd: e.write_bytes_by_level[2] + outside(Tier::Slow, 3),
        promotions: e.done[S::kind_index(WorkKind::Promote)],
        demotions: e.done[S::kind_index(WorkKind::Demote)],
        copies: e.done[S::kind_index(WorkKind::Copy)],
        writebacks: e.done[S::kind_index(WorkKind::Writeback)],
        bytes_moved: m.bytes.load(Ordering::Relaxed),
        moves_failed: m.failed.load(Ordering::Relaxed),
        moves_cancelled: m.cancelled.load(Ordering::Relaxed),
    }
}

fn read_lock<T>(l: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn write_lock<T>(l: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Whether a move should be cancelled to let an access through: it will take a while yet.
fn worth_cancelling(elapsed: Duration, done: u64, total: u64) -> bool {
    let left = total.saturating_sub(done);
    if left == 0 {
        return false;
    }
    if done == 0 {
        return elapsed > Duration::from_millis(100);
    }
    elapsed.as_secs_f64() * left as f64 / done as f64 > 0.1
}

impl Shared {
    fn class(&self, rel: &Path, dir: bool) -> ObjectClass {
        // Only per-volume policies need the path (as the engine spells it, from the root).
        let volume = if self.prefixes.is_empty() {
            0
        } else {
            volume_of(&self.prefixes, &format!("/{}", rel.to_string_lossy()))
        };
        ObjectClass { volume, kind: if dir { ObjectKind::Meta } else { ObjectKind::Data } }
    }

    /// How regular (not passthrough) opens are answered: with the kernel cache, keep the
    /// pages cached by earlier opens.
    fn open_flags(&self) -> FopenFlags {
        if self.cfg.kernel_cache {
            FopenFlags::FOPEN_KEEP_CACHE
        } else if self.cfg.direct_io {
            FopenFlags::FOPEN_DIRECT_IO
        } else {
            FopenFlags::empty()
        }
    }

    fn file_lock(&self, ino: u64) -> Arc<RwLock<()>> {
        Arc::clone(lock(&self.locks).entry(ino).or_default())
    }

    /// The tier of a file outside the policy (pinned, unlinked while open, or open by
    /// passthrough), if it is.
    fn fixed_tier(&self, ino: u64) -> Option<Tier> {
        read_lock(&self.pins)
            .get(&ino)
            .copied()
            .or_else(|| lock(&self.orphans).get(&ino).copied())
            .or_else(|| lock(&self.backing).get(&ino).map(|b| b.tier))
    }

    /// Unlinks file `ino` at `rel` (its lock held exclusively): removed from both tiers, or,
    /// while the kernel has it open, its one valid copy renamed to a hidden name in the tier's
    /// root and removed at the last release (POSIX: an open file outlives its name).
    fn unlink_file(&self, ino: u64, rel: &Path) -> Result<(), Errno> {
        let auth = self.copies(ino, rel).first().copied();
        let pinned = write_lock(&self.pins).remove(&ino).is_some();
        if !pinned {
            self.tell(&Request::op(ObjectId(ino), Op::Delete).with_class(self.class(rel, false)));
        }
        if lock(&self.dirty_marked).remove(&ino) || pinned {
            self.store.forget(rel).map_err(|_| Errno::EIO)?;
        }
        self.drop_fds(ino);
        // Held until the file is an orphan: a last release (which takes no file lock) then
        // either came before, and the file goes now, or comes after and finds the orphan.
        let counts = lock(&self.open_counts);
        let open = counts.get(&ino).is_some_and(|&n| n > 0);
        let Some(auth) = auth.filter(|_| open) else {
            drop(counts);
            return self.remove_everywhere(rel, |p| fs::remove_file(p));
        };
        let hidden = PathBuf::from(format!("{}unlinked-{ino}", tiers::RESERVED_PREFIX));
        fs::rename(self.tiers.path(auth, rel), self.tiers.path(auth, &hidden)).map_err(|e| errno(&e))?;
        match fs::remove_file(self.tiers.path(auth.other(), rel)) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(errno(&e)),
            _ => {}
        }
        let mut inodes = lock(&self.inodes);
        inodes.forget_path(rel);
        inodes.by_ino.insert(ino, Node { rel: hidden.as_path().into(), dir: false });
        inodes.by_path.insert(hidden, ino);
        drop(inodes);
        lock(&self.orphans).insert(ino, auth);
        drop(counts);
        Ok(())
    }

    /// Registers file `ino` for a passthrough open when its placement is settled: the policy
    /// sees the open as a read of the whole file and its work on the file is finished first
    /// (placement is decided at open time), then the file must have exactly one valid copy.
    /// While it is open this way it does not move, and every access to it (regular handles too)
    /// goes to that copy outside the policy; the policy hears of a size change at the last close.
    /// `Some(())`: registered (the caller replies with the backing id); `None`: use regular I/O.
    fn open_passthrough(
        &self,
        ino: u64,
        node: &Node,
        writable: bool,
        pinned: bool,
        register: impl FnOnce(&fs::File) -> io::Result<fuser::BackingId>,
    ) -> Option<()> {
        if !pinned && !lock(&self.backing).contains_key(&ino) {
            let size = self.attr(ino).map(|a| a.size).unwrap_or(0);
            if size > 0 {
                let req = self.data_request(ino, node, Op::Read, 0, size);
                let queued = {
                    let mut e = lock(&self.engine);
                    let before = e.pending_work().len();
                    e.access(&req);
                    let issued: Vec<u64> =
                        e.pending_work().get(before..).unwrap_or_default().iter().map(|w| w.id.0).collect();
                    self.work_cv.notify_all();
                    issued
                };
                self.wait_for(ino, &queued);
            }
        }
        let file_lock = self.file_lock(ino);
        let _g = self.access_lock(ino, &file_lock);
        if lock(&self.orphans).contains_key(&ino) {
            return None;
        }
        let copies = self.copies(ino, &node.rel);
        let tier = *copies.first()?;
        if copies.len() != 1 {
            return None; // a cached file: its copies must stay in step, regular I/O does that
        }
        if writable && pinned && tier == Tier::Fast {
            // Its growth is held to the pin reserve: regular I/O checks that.
            return None;
        }
        let path = self.tiers.path(tier, &node.rel);
        if writable && has_privs(&path) {
            // Its writes must clear set-id bits or capabilities: regular I/O does that.
            return None;
        }
        let mut b = lock(&self.backing);
        if let Some(e) = b.get_mut(&ino) {
            if e.tier != tier || (writable && !e.writable) {
                return None;
            }
            e.opens += 1;
            return Some(());
        }
        // Read-write when the daemon may, so later write opens share the backing file.
        let (file, backing_writable) = match fs::OpenOptions::new().read(true).write(true).open(&path) {
            Ok(f) => (f, true),
            Err(_) if !writable => (fs::File::open(&path).ok()?, false),
            Err(_) => return None,
        };
        let size_at_open = file.metadata().map(|m| m.len()).unwrap_or(0);
        let id = register(&file).ok()?;
        b.insert(ino, Backing { id, opens: 1, tier, writable: backing_writable, size_at_open });
        Some(())
    }

    /// A passthrough open of `ino` is released; at the last one the file may move again, and
    /// the policy hears of a size change the kernel made meanwhile.
    fn release_passthrough(&self, ino: u64) {
        let ended = {
            let mut b = lock(&self.backing);
            let Some(e) = b.get_mut(&ino) else { return };
            e.opens = e.opens.saturating_sub(1);
            if e.opens > 0 {
                return;
            }
            b.remove(&ino)
        };
        let Some(e) = ended else { return };
        if self.fixed_tier(ino).is_some() {
            return;
        }
        let Ok(node) = self.node(ino) else { return };
        let size = fs::metadata(self.tiers.path(e.tier, &node.rel)).map(|m| m.len()).unwrap_or(e.size_at_open);
        let req = match size.cmp(&e.size_at_open) {
            std::cmp::Ordering::Greater => {
                self.data_request(ino, &node, Op::Write, e.size_at_open, size - e.size_at_open)
            }
            std::cmp::Ordering::Less => self.data_request(ino, &node, Op::Truncate, size, 0),
            std::cmp::Ordering::Equal => return,
        };
        let file_lock = self.file_lock(ino);
        let _g = self.access_lock(ino, &file_lock);
        if self.fixed_tier(ino).is_some() {
            // Pinned since the check above (a release is asynchronous): the engine forgot the
            // file and must not adopt it again.
            return;
        }
        self.tell(&req);
        drop(_g);
        self.sync_dirty_mark(ino);
    }

    /// Takes file `ino`'s lock shared for an access: when a move holds it, a long move is
    /// cancelled rather than waited for (see [`Shared::yield_move`]).
    fn access_lock<'a>(&self, ino: u64, file_lock: &'a RwLock<()>) -> std::sync::RwLockReadGuard<'a, ()> {
        match file_lock.try_read() {
            Ok(g) => g,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => {
                // The mover sees the waiter and cancels its move if it will take a while yet.
                let p = &self.progress;
                let waiting = p.ino.load(Ordering::Acquire) == ino;
                if waiting {
                    p.waiters.fetch_add(1, Ordering::AcqRel);
                }
                let g = read_lock(file_lock);
                if waiting {
                    p.waiters.fetch_sub(1, Ordering::AcqRel);
                }
                g
            }
        }
    }

    fn node(&self, ino: u64) -> Result<Node, Errno> {
        lock(&self.inodes).get(ino).cloned().ok_or(Errno::ENOENT)
    }

    /// Remembers an event of file `ino` (the last 32 are kept).
    fn note(&self, ino: u64, what: impl FnOnce() -> String) {
        if !self.debug_events {
            return;
        }
        let what = what();
        let mut ev = lock(&self.events);
        let q = ev.entry(ino).or_default();
        if q.len() >= 32 {
            q.pop_front();
        }
        q.push_back(what);
    }

    /// Tells the engine; queues its work for the mover.
    fn tell(&self, req: &Request) -> Served {
        let mut e = lock(&self.engine);
        let served = e.access(req);
        if !e.pending_work().is_empty() {
            self.work_cv.notify_all();
        }
        if self.debug_events {
            let p = e.placement(req.obj);
            let work: Vec<String> = e
                .pending_work()
                .iter()
                .map(|w| format!("{}#{}({})", w.kind.name(), w.obj.0, w.id.0 & 0xffff))
                .collect();
            drop(e);
            self.note(req.obj.0, || {
                format!(
                    "{:?} {}+{} -> {:?}{} now f{}s{}d{}m{} queued {work:?}",
                    req.op,
                    req.offset,
                    req.len,
                    served.level,
                    if served.blocked { " blocked" } else { "" },
                    u8::from(p.on_fast),
                    u8::from(p.on_slow),
                    u8::from(p.dirty),
                    u8::from(p.moving),
                )
            });
        }
        served
    }

    /// Waits until no work on `ino`, and none of the works `ids`, is queued or in flight.
    fn wait_for(&self, ino: u64, ids: &[u64]) {
        self.yield_move(ino);
        let mut e = lock(&self.engine);
        let busy = |w: &Work| w.obj.0 == ino || ids.contains(&w.id.0);
        while e.in_flight().any(busy) || e.pending_work().iter().any(busy) {
            self.work_cv.notify_all();
            e = self.done_cv.wait_timeout(e, Duration::from_millis(50)).map_or_else(|p| p.into_inner().0, |r| r.0);
        }
    }

    fn settle(&self) {
        let mut e = lock(&self.engine);
        while e.in_flight().next().is_some() || !e.pending_work().is_empty() {
            self.work_cv.notify_all();
            e = self.done_cv.wait_timeout(e, Duration::from_millis(50)).map_or_else(|p| p.into_inner().0, |r| r.0);
        }
    }

    /// The tiers that hold a copy of file `ino` now, the authoritative (newest) one first.
    fn copies(&self, ino: u64, rel: &Path) -> Vec<Tier> {
        let p = lock(&self.engine).placement(ObjectId(ino));
        let mut v = Vec::with_capacity(2);
        if p.tracked {
            if p.on_fast {
                v.push(Tier::Fast);
            }
            if p.on_slow && !(p.dirty && p.on_fast) {
                v.push(Tier::Slow);
            }
            v.retain(|&t| self.tiers.exists(t, rel));
            if !v.is_empty() {
                return v;
            }
        }
        Tier::ALL.into_iter().filter(|&t| self.tiers.exists(t, rel)).collect()
    }

    fn tier_label(&self, ino: u64) -> &'static str {
        let Ok(n) = self.node(ino) else { return "none" };
        let file_lock = self.file_lock(ino);
        let _g = match file_lock.try_read() {
            Ok(g) => g,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) if self.progress.ino.load(Ordering::Acquire) == ino => {
                // Moving (maybe slowly, rate-limited): say so rather than wait for it.
                return match *lock(&self.progress.kind) {
                    "promote" => "hdd (moving to ssd)",
                    "demote" => "ssd (moving to hdd)",
                    "copy" => "hdd (copying to ssd)",
                    "writeback" => "ssd+hdd (writing back)",
                    _ => "moving (pin)",
                };
            }
            Err(std::sync::TryLockError::WouldBlock) => read_lock(&file_lock),
        };
        let c = self.copies(ino, &n.rel);
        match (c.contains(&Tier::Fast), c.contains(&Tier::Slow)) {
            (true, true) => "ssd+hdd",
            (true, false) => "ssd",
            (false, true) => "hdd",
            (false, false) => "none",
        }
    }

    /// The path attributes are read from: the authoritative copy, or for a directory or symlink
    /// whichever tier has it (HDD first).
    fn meta_path(&self, ino: u64, node: &Node) -> Option<PathBuf> {
        if node.dir || ino == ROOT {
            return [Tier::Slow, Tier::Fast].into_iter().map(|t| self.tiers.path(t, &node.rel)).find(|p| p.is_dir());
        }
        self.copies(ino, &node.rel).first().map(|&t| self.tiers.path(t, &node.rel))
    }

    /// Attributes of `ino`, read under its shared lock (a move never runs in between).
    fn attr(&self, ino: u64) -> Result<FileAttr, Errno> {
        let file_lock = self.file_lock(ino);
        let _g = self.access_lock(ino, &file_lock);
        self.attr_locked(ino)
    }

    /// Attributes of `ino`; the caller holds its lock.
    fn attr_locked(&self, ino: u64) -> Result<FileAttr, Errno> {
        let node = self.node(ino)?;
        let path = self.meta_path(ino, &node).ok_or_else(|| self.missing())?;
        let m = fs::symlink_metadata(&path).map_err(|e| errno(&e))?;
        Ok(to_attr(ino, &m))
    }

    /// Finishes or rolls back the moves the journal says were interrupted. A move's copy is
    /// complete exactly when the destination has the size and modification time the source had
    /// when it started (the copy carries the time over; the temporary files of unfinished
    /// copies are deleted by the scan).
    fn recover_moves(&self) -> Result<(), MountError> {
        for rec in self.store.unfinished_moves()? {
            let matches = |t: Tier| {
                fs::symlink_metadata(self.tiers.path(t, &rec.rel))
                    .is_ok_and(|m| m.len() == rec.size && state::epoch_ns(tiers::mtime(&m)) == rec.mtime_ns)
            };
            let (src, dst) = (rec.from, rec.from.other());
            match rec.kind {
                // The switch happened: the destination is the file; finish by removing the source.
                WorkKind::Promote | WorkKind::Demote if matches(dst) && self.tiers.exists(src, &rec.rel) => {
                    self.tiers.remove(src, &rec.rel)?;
                }
                // A write-back that finished, of data not written since: the file is clean.
                WorkKind::Writeback if matches(dst) && matches(src) => self.store.set_dirty(&rec.rel, false)?,
                // Otherwise the source is the file, untouched; a finished copy is identical.
                _ => {}
            }
        }
        self.store.clear_journal()?;
        Ok(())
    }

    /// Adopts every file already in the trees: pinned files go to their tier, the others are
    /// told to the engine. The store's dirty set is then rewritten to what the engine holds dirty.
    fn adopt(&self) -> Result<(), MountError> {
        let pins: HashMap<PathBuf, Tier> = self.store.pins()?.into_iter().collect();
        let dirty: HashSet<PathBuf> = self.store.dirty()?.into_iter().collect();
        let heat = self.store.heat()?;
        let mut pins_found = HashSet::new();
        let mut found = self.tiers.scan()?;
        // Hottest first (files without saved statistics last): when the SSD holds more than
        // the policy may use, the hottest keep their place.
        found.sort_by_key(|f| std::cmp::Reverse(heat.get(&f.rel).map_or(0, |&(rank, _)| rank + 1)));
        let mut restore: Vec<(u64, u64, u64)> = Vec::new();
        for f in found {
            let ino = lock(&self.inodes).ino_of(&f.rel, false);
            let ssd_newer = dirty.contains(&f.rel) && f.copies[0].is_some();
            if let Some(&tier) = pins.get(&f.rel) {
                self.place_pinned(ino, &f.rel, &f.copies, ssd_newer, tier)?;
                write_lock(&self.pins).insert(ino, tier);
                pins_found.insert(f.rel);
                continue;
            }
            self.adopt_file(ino, &f.rel, &f.copies, ssd_newer)?;
            if let Some(&(rank, count)) = heat.get(&f.rel) {
                restore.push((rank, ino, count));
            }
        }
        // The collector's ranking as it was saved: re-rank coldest first, with the counts.
        restore.sort_unstable();
        {
            let mut e = lock(&self.engine);
            for (_, ino, count) in restore {
                e.restore_heat(ObjectId(ino), count);
            }
        }
        for rel in pins.keys().filter(|r| !pins_found.contains(*r)) {
            self.store.set_pin(rel, None)?; // the file is gone
        }
        for rel in &dirty {
            self.store.set_dirty(rel, false)?;
        }
        let files: Vec<(u64, PathBuf)> =
            lock(&self.inodes).by_ino.iter().filter(|(_, n)| !n.dir).map(|(&i, n)| (i, n.rel.to_path_buf())).collect();
        let mut marked = lock(&self.dirty_marked);
        for (ino, rel) in files {
            if lock(&self.engine).placement(ObjectId(ino)).dirty {
                self.store.set_dirty(&rel, true)?;
                marked.insert(ino);
            }
        }
        self.store.sync()?;
        Ok(())
    }

    /// Tells the engine about one existing file with copies `copies` (size and mtime on the
    /// fast and the slow tier) and makes the trees agree with what it decided. `ssd_newer`: the
    /// store says the SSD copy is the file (write-back dirty).
    fn adopt_file(
        &self,
        ino: u64,
        rel: &Path,
        copies: &[Option<(u64, SystemTime)>; 2],
        ssd_newer: bool,
    ) -> io::Result<()> {
        let level = match *copies {
            [Some((size, _)), Some(_)] if ssd_newer => (Level::Fast, size, true),
            [Some((size, m_fast)), Some((hsize, m_slow))] => {
                if size == hsize && m_fast == m_slow {
                    // A finished copy or an interrupted move: identical; keep both as a clean
                    // cached copy (a DST policy then treats the SSD one as the file).
                    (Level::Fast, size, false)
                } else if m_fast >= m_slow {
                    (Level::Fast, size, true)
                } else {
                    (Level::Slow, hsize, false)
                }
            }
            [Some((size, _)), None] => (Level::Fast, size, false),
            [None, Some((size, _))] => (Level::Slow, size, false),
            [None, None] => return Ok(()),
        };
        let (level, size, newer_on_ssd) = level;
        let both = copies[0].is_some() && copies[1].is_some();
        {
            let mut e = lock(&self.engine);
            // Dirty: the SSD copy is newer than the HDD one, or the only one (a caching
            // policy must never drop it as a clean copy).
            e.adopt(ObjectId(ino), level, size, newer_on_ssd || (level == Level::Fast && !both));
        }
        // Make the trees agree with what the engine decided.
        let p = lock(&self.engine).placement(ObjectId(ino));
        let ssd_is_the_file = copies[0].is_some() && (newer_on_ssd || !both || level == Level::Fast);
        if !p.on_fast && copies[0].is_some() {
            if ssd_is_the_file {
                // The SSD copy is the file but did not fit the quota: move it down now,
                // replacing any older HDD copy.
                self.tiers.copy_across(rel, Tier::Fast, ino, &mut |_, _, _| Ok(()))?;
            }
            self.tiers.remove(Tier::Fast, rel)?;
        } else if p.on_fast && !p.on_slow && !p.dirty && both {
            // A DST policy keeps one copy, the SSD one (newer, or identical after a move).
            self.tiers.remove(Tier::Slow, rel)?;
        }
        Ok(())
    }

    /// Puts a pinned file's one copy on `tier`, from its newest copy.
    fn place_pinned(
        &self,
        ino: u64,
        rel: &Path,
        copies: &[Option<(u64, SystemTime)>; 2],
        ssd_newer: bool,
        tier: Tier,
    ) -> io::Result<()> {
        let newest = match *copies {
            [Some((_, m_fast)), Some((_, m_slow))] => {
                if ssd_newer || m_fast >= m_slow {
                    Tier::Fast
                } else {
                    Tier::Slow
                }
            }
            [Some(_), None] => Tier::Fast,
            [None, Some(_)] => Tier::Slow,
            [None, None] => return Ok(()),
        };
        if newest != tier {
            self.tiers.copy_across(rel, newest, ino, &mut |_, _, _| Ok(()))?;
        }
        self.tiers.remove(tier.other(), rel)
    }

    /// Pins file `ino` to `want`, or unpins it (`None`); see the crate docs.
    fn set_pin(&self, ino: u64, want: Option<Tier>) -> Result<(), Errno> {
        let node = self.node(ino)?;
        if node.dir || ino == ROOT {
            return Err(Errno::EISDIR);
        }
        // Let the work already queued or running on the file finish first.
        self.wait_for(ino, &[]);
        let file_lock = self.file_lock(ino);
        let _g = write_lock(&file_lock);
        let current = read_lock(&self.pins).get(&ino).copied();
        if current == want {
            return Ok(());
        }
        if lock(&self.backing).contains_key(&ino) {
            // Open by passthrough: moving it would leave the kernel on the old copy.
            return Err(Errno::EBUSY);
        }
        let auth = *self.copies(ino, &node.rel).first().ok_or(Errno::ENOENT)?;
        let meta = fs::symlink_metadata(self.tiers.path(auth, &node.rel)).map_err(|e| errno(&e))?;
        if !meta.is_file() {
            return Err(Errno::EINVAL);
        }
        self.drop_fds(ino);
        match want {
            Some(tier) => {
                if tier == Tier::Fast && self.pinned_ssd_bytes().0 + meta.len() > self.cfg.pin_reserve {
                    return Err(Errno::ENOSPC);
                }
                if auth != tier {
                    let kind = if tier == Tier::Fast { WorkKind::Promote } else { WorkKind::Demote };
                    self.journalled(ino, &node.rel, kind, "pin", auth, || {
                        self.tiers.copy_across(&node.rel, auth, ino, &mut self.pace(ino, auth))
                    })
                    .map_err(|e| errno(&e))?;
                }
                if current.is_none() {
                    // Out of the policy: the engine forgets it (work it queued for the file is
                    // skipped by the mover, which sees the pin).
                    self.tell(&Request::op(ObjectId(ino), Op::Delete).with_class(self.class(&node.rel, false)));
                }
                self.tiers.remove(tier.other(), &node.rel).map_err(|e| errno(&e))?;
                self.store.set_pin(&node.rel, Some(tier)).map_err(|_| Errno::EIO)?;
                if lock(&self.dirty_marked).remove(&ino) {
                    let _ = self.store.set_dirty(&node.rel, false);
                }
                write_lock(&self.pins).insert(ino, tier);
            }
            None => {
                self.store.set_pin(&node.rel, None).map_err(|_| Errno::EIO)?;
                write_lock(&self.pins).remove(&ino);
                let mut copies = [None, None];
                copies[auth.index()] = Some((meta.len(), tiers::mtime(&meta)));
                self.adopt_file(ino, &node.rel, &copies, false).map_err(|e| errno(&e))?;
                self.sync_dirty_mark(ino);
            }
        }
        Ok(())
    }

    /// Refuses (ENOSPC) growing file `ino`, pinned to the SSD, to `end` bytes beyond the pin
    /// reserve. Files outside the policy for other reasons are not held to it, and nothing is
    /// with the kernel's writeback cache: the application has been told its write succeeded
    /// before the daemon sees it, so a refusal then would lose acknowledged data.
    fn check_pin_growth(&self, ino: u64, node: &Node, end: u64) -> Result<(), Errno> {
        if self.cfg.kernel_cache || read_lock(&self.pins).get(&ino) != Some(&Tier::Fast) {
            return Ok(());
        }
        let size = fs::symlink_metadata(self.tiers.path(Tier::Fast, &node.rel)).map_err(|e| errno(&e))?.len();
        if end <= size {
            return Ok(());
        }
        if self.pinned_ssd_bytes().0.saturating_add(end - size) > self.cfg.pin_reserve {
            return Err(Errno::ENOSPC);
        }
        Ok(())
    }

    /// Counts an access served outside the policy in the per-tier counters.
    fn count_outside(&self, tier: Tier, req: &Request) {
        let c = &self.stats.outside[tier.index()];
        match req.op {
            Op::Read => {
                c[0].fetch_add(1, Ordering::Relaxed);
                c[2].fetch_add(req.len, Ordering::Relaxed);
            }
            Op::Write => {
                c[1].fetch_add(1, Ordering::Relaxed);
                c[3].fetch_add(req.len, Ordering::Relaxed);
            }
            _ => {}
        }
    }

    /// Files pinned to the SSD tier: (bytes, files).
    fn pinned_ssd_bytes(&self) -> (u64, u64) {
        let on_ssd: Vec<u64> =
            read_lock(&self.pins).iter().filter(|(_, t)| **t == Tier::Fast).map(|(&i, _)| i).collect();
        let inodes = lock(&self.inodes);
        let bytes = on_ssd
            .iter()
            .filter_map(|i| inodes.get(*i))
            .filter_map(|n| fs::symlink_metadata(self.tiers.path(Tier::Fast, &n.rel)).ok())
            .map(|m| m.len())
            .sum();
        (bytes, on_ssd.len() as u64)
    }

    /// Keeps the store's dirty mark of `ino` in step with the engine. The engine is read under
    /// the mark's lock, so two threads cannot leave a stale mark.
    fn sync_dirty_mark(&self, ino: u64) {
        let mut marked = lock(&self.dirty_marked);
        let dirty = lock(&self.engine).placement(ObjectId(ino)).dirty;
        if dirty == marked.contains(&ino) {
            return;
        }
        let Some(rel) = lock(&self.inodes).get(ino).map(|n| n.rel.clone()) else { return };
        if self.store.set_dirty(&rel, dirty).is_ok() {
            if dirty {
                marked.insert(ino);
            } else {
                marked.remove(&ino);
            }
        }
    }

    /// What a write or truncate must clear, with FUSE_HANDLE_KILLPRIV_V2, on the copies `paths`
    /// of file `ino`: file capabilities always, and when `kill_setid` (the writer lacks
    /// CAP_FSETID) set-user-ID, and set-group-ID where the group may execute. The VFS does this
    /// for a local writer; the daemon writes as root, which would keep them.
    fn kill_privs(&self, ino: u64, paths: &[PathBuf], kill_setid: bool) -> io::Result<()> {
        use nix::libc::{S_ISGID, S_ISUID, S_IXGRP};
        if !self.killpriv.load(Ordering::Acquire) || lock(&self.privs_clear).contains(&ino) {
            return Ok(());
        }
        let mut setid_left = false;
        for path in paths {
            let mode = fs::symlink_metadata(path)?.mode();
            let mut new = mode;
            if kill_setid {
                new &= !S_ISUID;
                if mode & S_IXGRP != 0 {
                    new &= !S_ISGID;
                }
            }
            if new != mode {
                fs::set_permissions(path, fs::Permissions::from_mode(new & 0o7777))?;
            }
            setid_left |= new & (S_ISUID | S_ISGID) != 0;
            match xattr::remove(path, CAPABILITY_XATTR) {
                Err(e) if !matches!(e.raw_os_error(), Some(nix::libc::ENODATA | nix::libc::EOPNOTSUPP)) => {
                    return Err(e);
                }
                _ => {}
            }
        }
        if !setid_left {
            lock(&self.privs_clear).insert(ino);
        }
        Ok(())
    }

    /// Runs a copy of `rel` from `from` as the move in progress, journalled: the record is
    /// durable before the copy starts and removed after it ended (either way).
    fn journalled(
        &self,
        ino: u64,
        rel: &Path,
        kind: WorkKind,
        label: &'static str,
        from: Tier,
        copy: impl FnOnce() -> io::Result<u64>,
    ) -> io::Result<u64> {
        // Without a record (the store failed) a crash still leaves the source intact, or two
        // identical copies, which adoption resolves; the move goes ahead.
        let record = fs::symlink_metadata(self.tiers.path(from, rel)).ok().and_then(|m| {
            let rec =
                MoveRecord { kind, from, size: m.len(), mtime_ns: state::epoch_ns(tiers::mtime(&m)), rel: rel.into() };
            self.store.begin_move(&rec).ok()
        });
        let p = &self.progress;
        *lock(&p.kind) = label;
        p.done.store(0, Ordering::Relaxed);
        p.total.store(0, Ordering::Relaxed);
        *lock(&p.started) = Some(Instant::now());
        p.ino.store(ino, Ordering::Release);
        let r = copy();
        p.ino.store(0, Ordering::Release);
        p.cancel.store(false, Ordering::Release);
        if let Some(id) = record {
            let _ = self.store.end_move(id);
        }
        r
    }

    /// The pacing of a move of file `ino` from `from`: progress, cancellation, the rate limit
    /// and the emulated devices' time.
    fn pace(&self, ino: u64, from: Tier) -> impl FnMut(u64, u64, u64) -> io::Result<()> + '_ {
        let start = Instant::now();
        move |offset, len, total| {
            let p = &self.progress;
            p.total.store(total, Ordering::Relaxed);
            p.done.store(offset, Ordering::Relaxed);
            // Cancelled by command, or an access waits for a move that will take a while yet.
            let check = || {
                let waited = p.waiters.load(Ordering::Acquire) > 0 && worth_cancelling(start.elapsed(), offset, total);
                if p.cancel.load(Ordering::Acquire) || waited {
                    return Err(io::Error::new(io::ErrorKind::Interrupted, "move cancelled"));
                }
                Ok(())
            };
            check()?;
            if let Some(e) = &self.emulate[from.index()] {
                e.delay(false, ino, offset, len);
            }
            if let Some(e) = &self.emulate[from.other().index()] {
                e.delay(true, ino, offset, len);
            }
            let rate = self.move_rate.load(Ordering::Relaxed);
            if rate > 0 {
                let due = Duration::from_secs_f64((offset + len) as f64 / rate as f64);
                // In slices, so a cancellation is seen within 50 ms.
                while let Some(wait) = due.checked_sub(start.elapsed()).filter(|w| !w.is_zero()) {
                    std::thread::sleep(wait.min(Duration::from_millis(50)));
                    check()?;
                }
            }
            Ok(())
        }
    }

    /// A blocked access waits for file `ino`'s work: cancel its move if that would take a
    /// while yet (the engine rolls the move back and may retry it later).
    fn yield_move(&self, ino: u64) {
        let p = &self.progress;

        if p.ino.load(Ordering::Acquire) != ino {
            return;
        }
        let elapsed = lock(&p.started).map(|t| t.elapsed()).unwrap_or_default();
        if worth_cancelling(elapsed, p.done.load(Ordering::Relaxed), p.total.load(Ordering::Relaxed)) {
            p.cancel.store(true, Ordering::Release);
        }
    }

    /// Checks both tier roots; says so in the log when one is lost or back. Returns whether
    /// any is lost now.
    fn refresh_health(&self) -> bool {
        let mut any = false;
        for t in Tier::ALL {
            let lost = !self.tiers.root_intact(t);
            any |= lost;
            if self.lost[t.index()].swap(lost, Ordering::AcqRel) != lost {
                let name = if t == Tier::Fast { "SSD" } else { "HDD" };
                let root = self.tiers.root(t).display();
                if lost {
                    eprintln!(
                        "tierwise: the {name} tier {root} is gone (its file system was unmounted or the directory removed): its files answer EIO and nothing is written there until it is back"
                    );
                } else {
                    eprintln!("tierwise: the {name} tier {root} is back");
                    self.work_cv.notify_all();
                }
            }
        }
        any
    }

    /// Namespace changes (create, mkdir, symlink, unlink, rmdir, rename) wait for both tiers: a
    /// change made on one alone would resurrect or duplicate names when the other comes back.
    fn both_tiers(&self) -> Result<(), Errno> {
        if self.refresh_health() { Err(Errno::EIO) } else { Ok(()) }
    }

    /// ENOENT for a name no tier holds, or EIO when a tier that may hold it is lost.
    fn missing(&self) -> Errno {
        if self.refresh_health() { Errno::EIO } else { Errno::ENOENT }
    }

    /// Saves the access statistics (the collector's ranking and counts of every file the
    /// policy tracks) to the store; see [`Engine::heat_ranking`].
    fn save_heat(&self, durable: bool) {
        let files: HashMap<u64, Arc<Path>> = {
            let pins = read_lock(&self.pins);
            let orphans = lock(&self.orphans);
            lock(&self.inodes)
                .by_ino
                .iter()
                .filter(|(i, n)| !n.dir && !pins.contains_key(i) && !orphans.contains_key(i))
                .map(|(&i, n)| (i, Arc::clone(&n.rel)))
                .collect()
        };
        let ids: Vec<ObjectId> = files.keys().map(|&i| ObjectId(i)).collect();
        let ranked = lock(&self.engine).heat_ranking(&ids);
        let rows: Vec<(PathBuf, u64)> =
            ranked.into_iter().filter_map(|(o, h)| files.get(&o.0).map(|p| (p.to_path_buf(), h))).collect();
        let _ = self.store.save_heat(&rows, durable);
    }

    /// Saves the counters (totals over the volume's life) to the store.
    fn save_counters(&self, durable: bool) {
        let session = counters_of(lock(&self.engine).stats(), &self.stats);
        let _ = self.store.save_counters(&self.saved.plus(&session).pairs(), durable);
    }

    /// Everything the mount reports.
    fn snapshot(&self) -> Snapshot {
        let (session, usage, queue) = {
            let e = lock(&self.engine);
            (counters_of(e.stats(), &self.stats), e.usage(), e.pending_work().len() + e.in_flight().count())
        };
        let (pinned_ssd_bytes, pinned_ssd_files) = self.pinned_ssd_bytes();
        let pinned_hdd_files = read_lock(&self.pins).values().filter(|t| **t == Tier::Slow).count() as u64;
        let p = &self.progress;
        let moving_ino = p.ino.load(Ordering::Acquire);
        let moving = (moving_ino != 0).then(|| MoveInProgress {
            kind: (*lock(&p.kind)).to_string(),
            path: lock(&self.inodes).get(moving_ino).map(|n| n.rel.to_string_lossy().into_owned()).unwrap_or_default(),
            done: p.done.load(Ordering::Relaxed),
            total: p.total.load(Ordering::Relaxed),
        });
        Snapshot {
            policy: self.cfg.policy.clone(),
            ssd_dir: self.tiers.ssd.display().to_string(),
            hdd_dir: self.tiers.hdd.display().to_string(),
            state: self.store.path().display().to_string(),
            ssd_quota: self.cfg.ssd_quota,
            pin_reserve: self.cfg.pin_reserve,
            ssd_used: usage.fast_used,
            pinned_ssd_files,
            pinned_ssd_bytes,
            pinned_hdd_files,
            files: usage.objects as u64,
            files_on_ssd: usage.fast_objects as u64,
            dirty_bytes: usage.dirty_bytes,
            queue_depth: queue as u64,
            move_rate: self.move_rate.load(Ordering::Relaxed),
            moving,
            emulation: self.emulate.iter().flatten().map(|e| e.label().to_string()).collect(),
            emulate_hdd: self.cfg.emulate_hdd.clone(),
            emulate_ssd: self.cfg.emulate_ssd.clone(),
            lost_tiers: Tier::ALL
                .into_iter()
                .filter(|t| self.lost[t.index()].load(Ordering::Relaxed))
                .map(|t| if t == Tier::Fast { "ssd" } else { "hdd" }.to_string())
                .collect(),
            uptime_s: self.started.elapsed().as_secs_f64(),
            pid: std::process::id(),
            total: self.saved.plus(&session),
            session,
        }
    }

    /// The mover: executes queued work in order, one item at a time, under the file's lock.
    fn mover(&self) {
        let mut saved_at = Instant::now();
        let mut heat_saved_at = Instant::now();
        // Work that keeps failing (a full or lost tier) is retried by the engine: back off
        // rather than spin.
        let mut failures = 0u32;
        let mut checked_at = Instant::now();
        while !self.stop.load(Ordering::SeqCst) {
            if checked_at.elapsed() >= Duration::from_secs(1) {
                self.refresh_health();
                checked_at = Instant::now();
            }
            if saved_at.elapsed() >= state::COUNTER_SAVE_INTERVAL {
                self.save_counters(false);
                saved_at = Instant::now();
            }
            if heat_saved_at.elapsed() >= state::HEAT_SAVE_INTERVAL {
                self.save_heat(false);
                heat_saved_at = Instant::now();
            }
            let batch: Vec<Work> = {
                let mut e = lock(&self.engine);
                if let Some(d) = e.next_deadline()
                    && d <= e.clock().now()
                {
                    e.tick();
                }
                if e.pending_work().is_empty() {
                    let (g, _) = self
                        .work_cv
                        .wait_timeout(e, Duration::from_millis(100))
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                    e = g;
                }
                e.drain_work().collect()
            };
            for w in batch {
                if self.stop.load(Ordering::SeqCst) {
                    break;
                }
                self.note(w.obj.0, || format!("mover starts {}({})", w.kind.name(), w.id.0 & 0xffff));
                // The engine hears the outcome while the file's lock is still held: until then
                // it routes accesses by the old placement, so no access may run in between.
                let file_lock = self.file_lock(w.obj.0);
                let _g = file_lock.write().unwrap_or_else(std::sync::PoisonError::into_inner);
                let outcome = self.execute(&w);
                self.note(w.obj.0, || format!("mover {} -> {outcome:?}", w.kind.name()));
                if w.kind.needs_completion() {
                    let mut e = lock(&self.engine);
                    let _ = e.complete(w.id, outcome);
                    if !e.pending_work().is_empty() {
                        self.work_cv.notify_all();
                    }
                }
                if w.kind == WorkKind::Writeback {
                    self.sync_dirty_mark(w.obj.0);
                }
                drop(_g);
                self.done_cv.notify_all();
                match outcome {
                    Outcome::Failed => {
                        failures = failures.saturating_add(1);
                        let pause = Duration::from_millis(10u64 << failures.min(7)).min(Duration::from_secs(1));
                        let until = Instant::now() + pause;
                        while Instant::now() < until && !self.stop.load(Ordering::SeqCst) {
                            std::thread::sleep(Duration::from_millis(10));
                        }
                    }
                    Outcome::Done => failures = 0,
                    _ => {}
                }
            }
        }
    }

    /// Executes one work item; the caller holds the file's lock exclusively.
    fn execute(&self, w: &Work) -> Outcome {
        if self.fixed_tier(w.obj.0).is_some() {
            // Pinned or unlinked since the engine queued it: out of the policy.
            return Outcome::Cancelled;
        }
        if lock(&self.backing).contains_key(&w.obj.0) {
            // Open by passthrough: the kernel does I/O on this tier file; it stays put.
            self.stats.cancelled.fetch_add(1, Ordering::Relaxed);
            return Outcome::Cancelled;
        }
        // The move replaces or removes tier files: open handles on them are stale.
        self.drop_fds(w.obj.0);
        let Some(rel) = lock(&self.inodes).get(w.obj.0).map(|n| n.rel.clone()) else {
            return Outcome::Cancelled;
        };
        let tier = |l: Level| if l == Level::Fast { Tier::Fast } else { Tier::Slow };
        let result = match w.kind {
            // The invalidation took effect in the engine when it was issued. A whole-file write
            // may have put the file back on the SSD since (write-back, write-through-all): that
            // copy is the file now, so the stale one is already replaced.
            WorkKind::Invalidate if lock(&self.engine).placement(w.obj).on_fast => Ok(0),
            WorkKind::Invalidate => self.tiers.remove(Tier::Fast, &rel).map(|_| 0),
            WorkKind::Promote | WorkKind::Demote => {
                let from = tier(w.from);
                self.journalled(w.obj.0, &rel, w.kind, w.kind.name(), from, || {
                    self.tiers
                        .copy_across(&rel, from, w.obj.0, &mut self.pace(w.obj.0, from))
                        .and_then(|n| self.tiers.remove(from, &rel).map(|_| n))
                })
            }
            WorkKind::Copy | WorkKind::Writeback => {
                let from = tier(w.from);
                self.journalled(w.obj.0, &rel, w.kind, w.kind.name(), from, || {
                    self.tiers.copy_across(&rel, from, w.obj.0, &mut self.pace(w.obj.0, from))
                })
            }
        };
        match result {
            Ok(n) => {
                if w.kind.needs_completion() {
                    self.stats.done.fetch_add(1, Ordering::Relaxed);
                    self.stats.bytes.fetch_add(n, Ordering::Relaxed);
                }
                Outcome::Done
            }
            // The file went (deleted meanwhile): nothing to do. Unless a tier's root went: then
            // it is a failure, which the mover backs off from.
            Err(e)
                if e.kind() == io::ErrorKind::NotFound && Tier::ALL.into_iter().all(|t| self.tiers.root_intact(t)) =>
            {
                Outcome::Cancelled
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {
                self.stats.cancelled.fetch_add(1, Ordering::Relaxed);
                Outcome::Cancelled
            }
            Err(_) => {
                self.stats.failed.fetch_add(1, Ordering::Relaxed);
                Outcome::Failed
            }
        }
    }

    /// Handles a write of one of tierwise's control attributes (see [`control`]); `None` when
    /// `name` is an ordinary attribute.
    fn control_set(&self, ino: u64, name: &OsStr, value: &[u8]) -> Option<Result<(), Errno>> {
        let text = String::from_utf8_lossy(value);
        let text = text.trim();
        let root_only = |r: Result<(), Errno>| Some(if ino == ROOT { r } else { Err(Errno::EINVAL) });
        if name == control::XATTR_TIER || name == control::XATTR_STATS {
            Some(Err(Errno::EPERM))
        } else if name == control::XATTR_PIN {
            let want = match text {
                "ssd" => Some(Tier::Fast),
                "hdd" => Some(Tier::Slow),
                "none" | "" => None,
                _ => return Some(Err(Errno::EINVAL)),
            };
            Some(self.set_pin(ino, want))
        } else if name == control::XATTR_FLUSH {
            let mut e = lock(&self.engine);
            e.flush();
            self.work_cv.notify_all();
            drop(e);
            root_only(Ok(()))
        } else if name == control::XATTR_CANCEL {
            if self.progress.ino.load(Ordering::Acquire) != 0 {
                self.progress.cancel.store(true, Ordering::Release);
            }
            root_only(Ok(()))
        } else if name == control::XATTR_MOVE_RATE {
            match text.parse::<f64>() {
                Ok(mb) if mb >= 0.0 && mb.is_finite() => {
                    self.move_rate.store((mb * 1e6) as u64, Ordering::Relaxed);
                    root_only(Ok(()))
                }
                _ => Some(Err(Errno::EINVAL)),
            }
        } else {
            None
        }
    }

    /// Runs a data access: tells the engine (under the file's shared lock), and gives `io` the
    /// engine's answer and where the file was when it decided. A blocked access releases the
    /// lock, waits for the work it issued and the work on its file, and is told again: between
    /// the wait and the I/O other work on the file may have run (a write-back that did not
    /// contain this write, say), so only a fresh answer under the lock is safe to act on.
    /// A file outside the policy (pinned, unlinked while open, open by passthrough) is served
    /// where it is, and `io` gets no placement.
    fn data_op<T>(
        &self,
        ino: u64,
        req: Request,
        io: impl Fn(&Self, &Served, &Node, Option<&Placement>) -> Result<T, Errno>,
    ) -> Result<T, Errno> {
        let file_lock = self.file_lock(ino);
        for attempt in 0.. {
            let guard = self.access_lock(ino, &file_lock);
            if let Some(tier) = self.fixed_tier(ino) {
                // Pinned, or unlinked while open: out of the policy, served where it is.
                let level = if tier == Tier::Fast { Level::Fast } else { Level::Slow };
                let node = self.node(ino)?;
                if tier == Tier::Fast && matches!(req.op, Op::Write | Op::Truncate) {
                    self.check_pin_growth(ino, &node, req.offset.saturating_add(req.len))?;
                }
                let r = io(self, &Served::by(level), &node, None);
                self.note(ino, || {
                    format!("{:?} {}+{} outside the policy on {tier:?}: ok={}", req.op, req.offset, req.len, r.is_ok())
                });
                if r.is_ok() {
                    self.count_outside(tier, &req);
                }
                return r;
            }
            let (before, served, issued) = {
                let mut e = lock(&self.engine);
                let before = e.placement(ObjectId(ino));
                // The engine appends what an access issues to its queue.
                let queued = e.pending_work().len();
                let served = e.access(&req);
                let issued: Vec<u64> = if served.blocked {
                    e.pending_work().get(queued..).unwrap_or_default().iter().map(|w| w.id.0).collect()
                } else {
                    Vec::new()
                };
                if !e.pending_work().is_empty() {
                    self.work_cv.notify_all();
                }
                (before, served, issued)
            };
            self.note(ino, || {
                format!("{:?} {}+{} -> {:?} blocked={}", req.op, req.offset, req.len, served.level, served.blocked)
            });
            if !served.blocked || attempt >= 64 {
                let node = self.node(ino)?;
                let r = io(self, &served, &node, Some(&before));
                drop(guard);
                return r;
            }
            drop(guard);
            self.wait_for(ino, &issued);
        }
        Err(Errno::EIO)
    }

    /// A data access of file `ino` for the engine.
    fn data_request(&self, ino: u64, node: &Node, op: Op, offset: u64, len: u64) -> Request {
        Request { obj: ObjectId(ino), op, offset, len, class: self.class(&node.rel, node.dir) }
    }

    /// The tier file of `ino` on `tier` if it is open already.
    fn open_fd(&self, ino: u64, tier: Tier) -> Option<Arc<fs::File>> {
        lock(&self.fds).get(&(ino, tier.index())).cloned()
    }

    /// The open tier file of `ino` on `tier` (opened, or created when `create`, on first use).
    /// The caller holds the file's lock, so no move replaces it meanwhile.
    fn fd(&self, ino: u64, tier: Tier, rel: &Path, create: bool) -> io::Result<Arc<fs::File>> {
        if let Some(f) = lock(&self.fds).get(&(ino, tier.index())) {
            return Ok(Arc::clone(f));
        }
        // Opening (maybe creating) by path: never in the directory under a lost tier.
        self.tiers.check_root(tier)?;
        let f = Arc::new(
            fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(create)
                .truncate(false)
                .open(self.tiers.path(tier, rel))?,
        );
        lock(&self.fds).insert((ino, tier.index()), Arc::clone(&f));
        Ok(f)
    }

    /// Forgets the open tier files of `ino` (its files were replaced or removed).
    fn drop_fds(&self, ino: u64) {
        let mut fds = lock(&self.fds);
        for t in Tier::ALL {
            fds.remove(&(ino, t.index()));
        }
    }

    /// Whether directory `rel` has entries (other than tierwise's own) on either tier.
    fn dir_has_entries(&self, rel: &Path) -> bool {
        Tier::ALL.into_iter().any(|t| {
            fs::read_dir(self.tiers.path(t, rel))
                .is_ok_and(|mut d| d.any(|e| e.is_ok_and(|e| !tiers::is_reserved(&e.file_name()))))
        })
    }

    /// Removes `rel` from both tiers with `remove` and forgets its path; ENOENT when neither
    /// tier had it.
    fn remove_everywhere(&self, rel: &Path, remove: fn(&Path) -> io::Result<()>) -> Result<(), Errno> {
        let mut found = false;
        for t in Tier::ALL {
            match remove(&self.tiers.path(t, rel)) {
                Ok(()) => found = true,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(errno(&e)),
            }
        }
        lock(&self.inodes).forget_path(rel);
        if found { Ok(()) } else { Err(Errno::ENOENT) }
    }

    fn lookup_child(&self, parent: u64, name: &OsStr) -> Result<(u64, PathBuf), Errno> {
        tiers::check_name(name).map_err(Errno::from_i32)?;
        let pnode = self.node(parent)?;
        let rel = pnode.rel.join(name);
        // A known file may be moving: look under its lock, or both checks could miss it while
        // it switches tiers. An unknown path has no work in flight.
        let known = lock(&self.inodes).by_path.get(&rel).copied();
        let file_lock = known.map(|i| self.file_lock(i));
        let _g = file_lock.as_ref().zip(known).map(|(l, i)| self.access_lock(i, l));
        let exists = Tier::ALL.into_iter().find_map(|t| fs::symlink_metadata(self.tiers.path(t, &rel)).ok());
        let m = exists.ok_or_else(|| self.missing())?;
        let ino = lock(&self.inodes).ino_of(&rel, m.is_dir());
        Ok((ino, rel))
    }
}

/// Whether the file at `path` has set-id bits or capabilities (which a write must clear).
fn has_privs(path: &Path) -> bool {
    use nix::libc::{S_ISGID, S_ISUID};
    fs::symlink_metadata(path).map_or(true, |m| m.mode() & (S_ISUID | S_ISGID) != 0)
        || xattr::get(path, CAPABILITY_XATTR).ok().flatten().is_some()
}

fn to_attr(ino: u64, m: &fs::Metadata) -> FileAttr {
    let kind = if m.is_dir() {
        FileType::Directory
    } else if m.file_type().is_symlink() {
        FileType::Symlink
    } else {
        FileType::RegularFile
    };
    let t = |s: i64, ns: i64| {
        if s >= 0 { SystemTime::UNIX_EPOCH + Duration::new(s as u64, ns as u32) } else { SystemTime::UNIX_EPOCH }
    };
    FileAttr {
        ino: INodeNo(ino),
        size: m.len(),
        blocks: m.blocks(),
        atime: t(m.atime(), m.atime_nsec()),
        mtime: t(m.mtime(), m.mtime_nsec()),
        ctime: t(m.ctime(), m.ctime_nsec()),
        crtime: t(m.ctime(), m.ctime_nsec()),
        kind,
        perm: (m.mode() & 0o7777) as u16,
        nlink: if m.is_dir() { 2 } else { 1 },
        uid: m.uid(),
        gid: m.gid(),
        rdev: 0,
        blksize: 4096,
        flags: 0,
    }
}

fn set_times_on(path: &Path, atime: Option<TimeOrNow>, mtime: Option<TimeOrNow>) -> io::Result<()> {
    use nix::sys::stat::{UtimensatFlags, utimensat};
    use nix::sys::time::TimeSpec;
    let ts = |t: Option<TimeOrNow>| match t {
        None => TimeSpec::UTIME_OMIT,
        Some(TimeOrNow::Now) => TimeSpec::UTIME_NOW,
        Some(TimeOrNow::SpecificTime(st)) => {
            let d = st.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
            TimeSpec::new(d.as_secs() as i64, i64::from(d.subsec_nanos()))
        }
    };
    utimensat(nix::fcntl::AT_FDCWD, path, &ts(atime), &ts(mtime), UtimensatFlags::NoFollowSymlink)
        .map_err(io::Error::from)
}

impl Filesystem for HybridFs {
    fn init(&mut self, _req: &FuseRequest, config: &mut KernelConfig) -> io::Result<()> {
        // Clearing set-id bits and capabilities on write, truncate and chown is ours: without
        // this the kernel asks for `security.capability` before every write (a round trip), and
        // passthrough writes are held to FUSE speed by it.
        let killpriv = config.add_capabilities(fuser::InitFlags::FUSE_HANDLE_KILLPRIV_V2).is_ok();
        self.shared.killpriv.store(killpriv, Ordering::Release);
        if self.shared.cfg.passthrough && !passthrough_allowed(&self.shared.cfg.policy) {
            eprintln!(
                "tierwise: passthrough is used with DST (one-copy) policies only; {} keeps copies in step, so regular FUSE I/O",
                self.shared.cfg.policy
            );
        }
        if self.shared.cfg.kernel_cache {
            // Written pages are flushed to us later, in batches; reads of cached pages, across
            // opens, never come: the page cache is a RAM tier above the policy. Safe because
            // every change of a file's bytes passes through the kernel (moves copy them unchanged).
            if config.add_capabilities(fuser::InitFlags::FUSE_WRITEBACK_CACHE).is_err() {
                eprintln!("tierwise: the kernel does not offer the FUSE writeback cache; writes go through at once");
            }
        }
        if self.shared.cfg.direct_io && config.add_capabilities(fuser::InitFlags::FUSE_DIRECT_IO_ALLOW_MMAP).is_err() {
            eprintln!("tierwise: the kernel cannot mmap direct-I/O files (Linux >= 6.6); mmap of files will fail");
        }
        if self.shared.cfg.passthrough && passthrough_allowed(&self.shared.cfg.policy) {
            let granted = config.add_capabilities(fuser::InitFlags::FUSE_PASSTHROUGH).is_ok()
                && config.set_max_stack_depth(1).is_ok();
            if !granted {
                eprintln!(
                    "tierwise: the kernel does not offer FUSE passthrough (Linux >= 6.9); using regular FUSE I/O"
                );
            }
            self.shared.passthrough.store(granted, Ordering::Release);
        }
        Ok(())
    }

    fn destroy(&mut self) {
        // Unmounting: stop after the move in hand, cancelled (it rolls back); queued work is
        // the policy's intent, not state, and every decision that is state (pins, the dirty set,
        // the journal) is in the store. So the daemon exits at once, and `tierwise umount`,
        // which waits for it, returns when nothing touches the tiers any more.
        self.shared.stop.store(true, Ordering::SeqCst);
        self.shared.progress.cancel.store(true, Ordering::Release);
        self.shared.work_cv.notify_all();
    }

    fn lookup(&self, _req: &FuseRequest, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        match self.shared.lookup_child(parent.0, name).and_then(|(ino, _)| self.shared.attr(ino)) {
            Ok(a) => reply.entry(&TTL, &a, Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn getattr(&self, _req: &FuseRequest, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.shared.attr(ino.0) {
            Ok(a) => reply.attr(&TTL, &a),
            Err(e) => reply.error(e),
        }
    }

    fn setattr(
        &self,
        req: &FuseRequest,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let s = &self.shared;
        let r = (|| -> Result<FileAttr, Errno> {
            let node = s.node(ino.0)?;
            if let Some(size) = size {
                let truncate = s.data_request(ino.0, &node, Op::Truncate, size, 0);
                s.data_op(ino.0, truncate, |s, _, node, _| {
                    let paths: Vec<PathBuf> =
                        s.copies(ino.0, &node.rel).into_iter().map(|t| s.tiers.path(t, &node.rel)).collect();
                    for p in &paths {
                        let f = fs::OpenOptions::new().write(true).open(p);
                        f.and_then(|f| f.set_len(size)).map_err(|e| errno(&e))?;
                    }
                    // Root keeps set-id bits on truncate (CAP_FSETID), anyone else loses them.
                    s.kill_privs(ino.0, &paths, req.uid() != 0).map_err(|e| errno(&e))
                })?;
            }
            let file_lock = s.file_lock(ino.0);
            let _g = s.access_lock(ino.0, &file_lock);
            let paths: Vec<PathBuf> = if node.dir || ino.0 == ROOT {
                Tier::ALL.into_iter().map(|t| s.tiers.path(t, &node.rel)).filter(|p| p.is_dir()).collect()
            } else {
                Tier::ALL
                    .into_iter()
                    .map(|t| s.tiers.path(t, &node.rel))
                    .filter(|p| p.symlink_metadata().is_ok())
                    .collect()
            };
            if mode.is_some() {
                lock(&s.privs_clear).remove(&ino.0);
            }
            for p in &paths {
                if let Some(m) = mode {
                    fs::set_permissions(p, fs::Permissions::from_mode(m & 0o7777)).map_err(|e| errno(&e))?;
                }
                if uid.is_some() || gid.is_some() {
                    std::os::unix::fs::lchown(p, uid, gid).map_err(|e| errno(&e))?;
                }
                if atime.is_some() || mtime.is_some() {
                    set_times_on(p, atime, mtime).map_err(|e| errno(&e))?;
                }
            }
            s.attr_locked(ino.0)
        })();
        match r {
            Ok(a) => reply.attr(&TTL, &a),
            Err(e) => reply.error(e),
        }
    }

    fn readlink(&self, _req: &FuseRequest, ino: INodeNo, reply: ReplyData) {
        let s = &self.shared;
        let r = s.node(ino.0).and_then(|n| {
            Tier::ALL.into_iter().find_map(|t| fs::read_link(s.tiers.path(t, &n.rel)).ok()).ok_or(Errno::ENOENT)
        });
        match r {
            Ok(target) => reply.data(target.as_os_str().as_encoded_bytes()),
            Err(e) => reply.error(e),
        }
    }

    fn mkdir(&self, req: &FuseRequest, parent: INodeNo, name: &OsStr, mode: u32, umask: u32, reply: ReplyEntry) {
        let s = &self.shared;
        let r = (|| -> Result<FileAttr, Errno> {
            tiers::check_name(name).map_err(Errno::from_i32)?;
            s.both_tiers()?;
            let rel = s.node(parent.0)?.rel.join(name);
            if Tier::ALL.into_iter().any(|t| s.tiers.exists(t, &rel)) {
                return Err(Errno::EEXIST);
            }
            // Directories exist on both tiers, so either can hold the files inside.
            for t in [Tier::Slow, Tier::Fast] {
                s.tiers.make_parents(t, &rel).map_err(|e| errno(&e))?;
                let p = s.tiers.path(t, &rel);
                fs::create_dir(&p).map_err(|e| errno(&e))?;
                fs::set_permissions(&p, fs::Permissions::from_mode(mode & !umask & 0o7777)).map_err(|e| errno(&e))?;
                let _ = std::os::unix::fs::chown(&p, Some(req.uid()), Some(req.gid()));
            }
            let ino = lock(&s.inodes).ino_of(&rel, true);
            s.attr(ino)
        })();
        match r {
            Ok(a) => reply.entry(&TTL, &a, Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn unlink(&self, _req: &FuseRequest, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let s = &self.shared;
        let r = (|| -> Result<(), Errno> {
            s.both_tiers()?;
            let (ino, rel) = s.lookup_child(parent.0, name)?;
            let file_lock = s.file_lock(ino);
            let _g = file_lock.write().unwrap_or_else(std::sync::PoisonError::into_inner);
            s.unlink_file(ino, &rel)
        })();
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn rmdir(&self, _req: &FuseRequest, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let s = &self.shared;
        let r = (|| -> Result<(), Errno> {
            s.both_tiers()?;
            let (_, rel) = s.lookup_child(parent.0, name)?;
            // Not empty on either tier: refuse before touching anything.
            if s.dir_has_entries(&rel) {
                return Err(Errno::ENOTEMPTY);
            }
            s.remove_everywhere(&rel, |p| {
                if let Ok(d) = fs::read_dir(p) {
                    for e in d.flatten() {
                        let _ = fs::remove_file(e.path()); // leftover temporaries only
                    }
                }
                fs::remove_dir(p)
            })
        })();
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn symlink(&self, req: &FuseRequest, parent: INodeNo, link_name: &OsStr, target: &Path, reply: ReplyEntry) {
        let s = &self.shared;
        let r = (|| -> Result<FileAttr, Errno> {
            tiers::check_name(link_name).map_err(Errno::from_i32)?;
            s.both_tiers()?;
            let rel = s.node(parent.0)?.rel.join(link_name);
            if Tier::ALL.into_iter().any(|t| s.tiers.exists(t, &rel)) {
                return Err(Errno::EEXIST);
            }
            // Symlinks are not placed: they live on the HDD tier. The target is stored as given
            // and resolved by the kernel, never by tierwise.
            s.tiers.make_parents(Tier::Slow, &rel).map_err(|e| errno(&e))?;
            let p = s.tiers.path(Tier::Slow, &rel);
            std::os::unix::fs::symlink(target, &p).map_err(|e| errno(&e))?;
            let _ = std::os::unix::fs::lchown(&p, Some(req.uid()), Some(req.gid()));
            let ino = lock(&s.inodes).ino_of(&rel, false);
            s.attr(ino)
        })();
        match r {
            Ok(a) => reply.entry(&TTL, &a, Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn rename(
        &self,
        _req: &FuseRequest,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let s = &self.shared;
        let r = (|| -> Result<(), Errno> {
            if !flags.is_empty() {
                return Err(Errno::EINVAL);
            }
            tiers::check_name(newname).map_err(Errno::from_i32)?;
            s.both_tiers()?;
            let (ino, from) = s.lookup_child(parent.0, name)?;
            let to = s.node(newparent.0)?.rel.join(newname);
            if from == to {
                return Ok(());
            }
            if to.starts_with(&from) {
                return Err(Errno::EINVAL);
            }
            let src_dir = fs::symlink_metadata(s.tiers.path(Tier::Slow, &from))
                .or_else(|_| fs::symlink_metadata(s.tiers.path(Tier::Fast, &from)))
                .map(|m| m.is_dir())
                .map_err(|e| errno(&e))?;
            let target = lock(&s.inodes).by_path.get(&to).copied();
            let target_dir = Tier::ALL.into_iter().any(|t| s.tiers.path(t, &to).is_dir());
            if target_dir && !src_dir {
                return Err(Errno::EISDIR);
            }
            if src_dir && !target_dir && Tier::ALL.into_iter().any(|t| s.tiers.exists(t, &to)) {
                return Err(Errno::ENOTDIR);
            }
            let lock_a = s.file_lock(ino);
            let _ga = lock_a.write().unwrap_or_else(std::sync::PoisonError::into_inner);
            let lock_b = target.map(|t| s.file_lock(t));
            let _gb = lock_b.as_ref().map(|l| l.write().unwrap_or_else(std::sync::PoisonError::into_inner));
            if target_dir && s.dir_has_entries(&to) {
                return Err(Errno::ENOTEMPTY);
            }
            if let Some(t) = target
                && !target_dir
                && lock(&s.open_counts).get(&t).is_some_and(|&n| n > 0)
            {
                // The replaced file is open: it lives on under a hidden name.
                s.unlink_file(t, &to)?;
            } else if let Some(t) = target
                && !target_dir
            {
                if write_lock(&s.pins).remove(&t).is_none() {
                    s.tell(&Request::op(ObjectId(t), Op::Delete).with_class(s.class(&to, false)));
                }
                lock(&s.dirty_marked).remove(&t);
                s.drop_fds(t);
            }
            s.drop_fds(ino);
            for t in Tier::ALL {
                let (src, dst) = (s.tiers.path(t, &from), s.tiers.path(t, &to));
                if fs::symlink_metadata(&src).is_ok() {
                    s.tiers.make_parents(t, &to).map_err(|e| errno(&e))?;
                    if target_dir && dst.is_dir() {
                        fs::remove_dir(&dst).map_err(|e| errno(&e))?;
                    }
                    fs::rename(&src, &dst).map_err(|e| errno(&e))?;
                } else if dst.is_dir() {
                    fs::remove_dir(&dst).map_err(|e| errno(&e))?;
                } else if fs::symlink_metadata(&dst).is_ok() {
                    fs::remove_file(&dst).map_err(|e| errno(&e))?;
                }
            }
            let moved = {
                let mut inodes = lock(&s.inodes);
                inodes.forget_path(&to);
                inodes.rename(&from, &to)
            };
            // Pins and dirty marks are kept by path in the store.
            if !lock(&s.dirty_marked).is_empty() || !read_lock(&s.pins).is_empty() {
                s.store.rename(&from, &to).map_err(|_| Errno::EIO)?;
            }
            for (i, rel) in moved {
                if read_lock(&s.pins).contains_key(&i) {
                    continue;
                }
                let dir = s.node(i).map(|n| n.dir).unwrap_or(false);
                s.tell(&Request::op(ObjectId(i), Op::Rename).with_class(s.class(&rel, dir)));
            }
            Ok(())
        })();
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn link(&self, _req: &FuseRequest, _ino: INodeNo, _newparent: INodeNo, _newname: &OsStr, reply: ReplyEntry) {
        // A hard link would tie two names to one placement across tiers; tierwise refuses them
        // (documented), as link(2) does on file systems without hard links.
        reply.error(Errno::EPERM);
    }

    fn open(&self, _req: &FuseRequest, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let s = &self.shared;
        match s.node(ino.0) {
            Ok(n) => {
                *lock(&s.open_counts).entry(ino.0).or_default() += 1;
                let pinned = read_lock(&s.pins).contains_key(&ino.0);
                if !pinned {
                    let class = s.class(&n.rel, n.dir);
                    s.tell(&Request::op(ObjectId(ino.0), Op::Open).with_class(class));
                }
                if s.passthrough.load(Ordering::Acquire) && !n.dir {
                    let writable = flags.acc_mode() != fuser::OpenAccMode::O_RDONLY;
                    if let Some(()) = s.open_passthrough(ino.0, &n, writable, pinned, |f| reply.open_backing(f)) {
                        let b = lock(&s.backing);
                        if let Some(e) = b.get(&ino.0) {
                            reply.opened_passthrough(FileHandle(PASSTHROUGH_FH), FopenFlags::empty(), &e.id);
                            return;
                        }
                    }
                }
                reply.opened(FileHandle(0), s.open_flags());
            }
            Err(e) => reply.error(e),
        }
    }

    fn read(
        &self,
        _req: &FuseRequest,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let s = &self.shared;
        let r = s.node(ino.0).and_then(|n| {
            let req = s.data_request(ino.0, &n, Op::Read, offset, u64::from(size));
            s.data_op(ino.0, req, |s, served, node, _| {
                let want = if served.level == Level::Fast { Tier::Fast } else { Tier::Slow };
                // A tier file already open is the file there now (moves, unlinks and renames
                // drop them): no lookup on the common path.
                let (tier, f) = match s.open_fd(ino.0, want) {
                    Some(f) => (want, f),
                    None => {
                        let copies = s.copies(ino.0, &node.rel);
                        let tier =
                            if copies.contains(&want) { want } else { *copies.first().ok_or_else(|| s.missing())? };
                        (tier, s.fd(ino.0, tier, &node.rel, false).map_err(|e| errno(&e))?)
                    }
                };
                let data = tiers::read_at_file(&f, offset, size as usize).map_err(|e| errno(&e))?;
                if let Some(e) = &s.emulate[tier.index()] {
                    e.delay(false, ino.0, offset, data.len() as u64);
                }
                Ok(data)
            })
        });
        match r {
            Ok(data) => reply.data(&data),
            Err(e) => reply.error(e),
        }
    }

    fn write(
        &self,
        _req: &FuseRequest,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let s = &self.shared;
        let r = s.node(ino.0).and_then(|n| {
            let req = s.data_request(ino.0, &n, Op::Write, offset, data.len() as u64);
            s.data_op(ino.0, req, |s, served, node, before| {
                // A file outside the policy (no `before`) is written where it is, whatever the
                // engine may still remember of it (its record would have the write recreate it).
                let p = before.map_or_else(Placement::default, |_| lock(&s.engine).placement(ObjectId(ino.0)));
                // The engine's answer, corrected by where the file is now (a blocked write runs
                // after its file moved).
                let mut targets: Vec<Tier> = Vec::with_capacity(2);
                for l in served.touches.iter() {
                    let t = if l == Level::Fast { Tier::Fast } else { Tier::Slow };
                    let held = if p.tracked { if t == Tier::Fast { p.on_fast } else { p.on_slow } } else { true };
                    if held || !p.tracked {
                        targets.push(t);
                    }
                }
                if targets.is_empty() {
                    targets = s.copies(ino.0, &node.rel);
                }
                if targets.is_empty() {
                    return Err(Errno::ENOENT);
                }
                let kill_setid = write_flags.contains(WriteFlags::FUSE_WRITE_KILL_SUIDGID);
                let paths: Vec<PathBuf> = targets.iter().map(|t| s.tiers.path(*t, &node.rel)).collect();
                for t in &targets {
                    let had = before.is_some_and(|b| if *t == Tier::Fast { b.on_fast } else { b.on_slow });
                    if p.tracked && !had && !served.blocked {
                        // A whole-file write the engine allocated on a tier that held no valid
                        // copy: it replaces whatever stale file is there.
                        s.drop_fds(ino.0);
                        s.tiers.recreate(*t, &node.rel).map_err(|e| errno(&e))?;
                    }
                    let f = s.fd(ino.0, *t, &node.rel, true).map_err(|e| errno(&e))?;
                    std::os::unix::fs::FileExt::write_all_at(&*f, data, offset).map_err(|e| errno(&e))?;
                    if let Some(e) = &s.emulate[t.index()] {
                        e.delay(true, ino.0, offset, data.len() as u64);
                    }
                }
                s.kill_privs(ino.0, &paths, kill_setid).map_err(|e| errno(&e))?;
                Ok(data.len() as u32)
            })
        });
        if r.is_ok() {
            s.sync_dirty_mark(ino.0);
        }
        match r {
            Ok(n) => reply.written(n),
            Err(e) => reply.error(e),
        }
    }

    fn flush(&self, _req: &FuseRequest, _ino: INodeNo, _fh: FileHandle, _lock_owner: LockOwner, reply: ReplyEmpty) {
        reply.ok();
    }

    fn fsync(&self, _req: &FuseRequest, ino: INodeNo, _fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        let s = &self.shared;
        let r = s.node(ino.0).and_then(|n| {
            for t in s.copies(ino.0, &n.rel) {
                s.fd(ino.0, t, &n.rel, false).and_then(|f| f.sync_all()).map_err(|e| errno(&e))?;
            }
            // The file's dirty mark becomes durable with its data.
            s.store.sync().map_err(|_| Errno::EIO)
        });
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn opendir(&self, _req: &FuseRequest, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let s = &self.shared;
        let r = (|| -> Result<u64, Errno> {
            let node = s.node(ino.0)?;
            if s.refresh_health() {
                // A listing without the lost tier's files would look like they were deleted.
                return Err(Errno::EIO);
            }
            let mut names: std::collections::BTreeMap<OsString, FileType> = std::collections::BTreeMap::new();
            let mut any = false;
            for t in Tier::ALL {
                let Ok(d) = fs::read_dir(s.tiers.path(t, &node.rel)) else { continue };
                any = true;
                for e in d.flatten() {
                    let name = e.file_name();
                    if tiers::is_reserved(&name) {
                        continue;
                    }
                    let kind = match e.file_type() {
                        Ok(ft) if ft.is_dir() => FileType::Directory,
                        Ok(ft) if ft.is_symlink() => FileType::Symlink,
                        _ => FileType::RegularFile,
                    };
                    names.entry(name).or_insert(kind);
                }
            }
            if !any {
                return Err(Errno::ENOENT);
            }
            // A file moving between tiers can be missed by both directory reads (read before it
            // appears on one, after it left the other): look again at every known file of this
            // directory that is missing, under its lock, which waits for the move.
            let known: Vec<(OsString, u64)> = lock(&s.inodes)
                .by_path
                .iter()
                .filter(|(p, _)| p.parent() == Some(&*node.rel) && !p.as_os_str().is_empty())
                .filter_map(|(p, &i)| p.file_name().map(|n| (n.to_os_string(), i)))
                .filter(|(n, _)| !names.contains_key(n) && !tiers::is_reserved(n))
                .collect();
            for (name, i) in known {
                let file_lock = s.file_lock(i);
                let _g = file_lock.read().unwrap_or_else(std::sync::PoisonError::into_inner);
                let rel = node.rel.join(&name);
                if let Some(m) = Tier::ALL.into_iter().find_map(|t| fs::symlink_metadata(s.tiers.path(t, &rel)).ok()) {
                    let kind = if m.is_dir() {
                        FileType::Directory
                    } else if m.file_type().is_symlink() {
                        FileType::Symlink
                    } else {
                        FileType::RegularFile
                    };
                    names.insert(name, kind);
                }
            }
            let mut entries = vec![
                (ino.0, FileType::Directory, OsString::from(".")),
                (ino.0, FileType::Directory, OsString::from("..")),
            ];
            {
                let mut inodes = lock(&s.inodes);
                for (name, kind) in names {
                    let i = inodes.ino_of(&node.rel.join(&name), kind == FileType::Directory);
                    entries.push((i, kind, name));
                }
            }
            let fh = s.next_fh.fetch_add(1, Ordering::Relaxed);
            lock(&s.dirs).insert(fh, entries);
            Ok(fh)
        })();
        match r {
            Ok(fh) => reply.opened(FileHandle(fh), FopenFlags::empty()),
            Err(e) => reply.error(e),
        }
    }

    fn readdir(&self, _req: &FuseRequest, _ino: INodeNo, fh: FileHandle, offset: u64, mut reply: ReplyDirectory) {
        let dirs = lock(&self.shared.dirs);
        let Some(entries) = dirs.get(&fh.0) else {
            reply.error(Errno::EBADF);
            return;
        };
        for (i, (ino, kind, name)) in entries.iter().enumerate().skip(offset as usize) {
            if reply.add(INodeNo(*ino), (i + 1) as u64, *kind, name) {
                break;
            }
        }
        reply.ok();
    }

    fn release(
        &self,
        _req: &FuseRequest,
        ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        // Keeps descriptors bounded by the files the kernel has open (another handle of the same
        // file just reopens). No file lock: a close must not wait for a move of the file (a
        // rate-limited one can take minutes, and unmounting waits for every request); the
        // descriptor table has its own lock, operations hold their own handle, and the mover
        // drops a moving file's descriptors before it copies.
        let s = &self.shared;
        if fh.0 == PASSTHROUGH_FH {
            s.release_passthrough(ino.0);
        }
        s.drop_fds(ino.0);
        let orphan = {
            // Under the open counts' lock, which `unlink_file` holds until its orphan is known.
            let mut counts = lock(&s.open_counts);
            let n = counts.entry(ino.0).or_default();
            *n = n.saturating_sub(1);
            let last = *n == 0;
            if last {
                counts.remove(&ino.0);
                lock(&s.privs_clear).remove(&ino.0);
            }
            if last { lock(&s.orphans).remove(&ino.0) } else { None }
        };
        if let Some(tier) = orphan {
            // The last open of a file unlinked while open: now it goes.
            if let Ok(hidden) = s.node(ino.0).map(|n| n.rel)
                && !hidden.as_os_str().is_empty()
            {
                let _ = fs::remove_file(s.tiers.path(tier, &hidden));
                lock(&s.inodes).forget_path(&hidden);
            }
        }
        reply.ok();
    }

    fn releasedir(&self, _req: &FuseRequest, _ino: INodeNo, fh: FileHandle, _flags: OpenFlags, reply: ReplyEmpty) {
        lock(&self.shared.dirs).remove(&fh.0);
        reply.ok();
    }

    fn statfs(&self, _req: &FuseRequest, _ino: INodeNo, reply: ReplyStatfs) {
        let s = &self.shared;
        let st = |p: &Path| nix::sys::statvfs::statvfs(p).ok();
        match (st(&s.tiers.ssd), st(&s.tiers.hdd)) {
            (Some(a), Some(b)) => {
                let bs = 4096u64;
                let conv = |blocks: u64, frsize: u64| blocks.saturating_mul(frsize) / bs;
                let blocks = conv(a.blocks(), a.fragment_size()) + conv(b.blocks(), b.fragment_size());
                let bfree = conv(a.blocks_free(), a.fragment_size()) + conv(b.blocks_free(), b.fragment_size());
                let bavail =
                    conv(a.blocks_available(), a.fragment_size()) + conv(b.blocks_available(), b.fragment_size());
                reply.statfs(
                    blocks,
                    bfree,
                    bavail,
                    a.files() + b.files(),
                    a.files_free() + b.files_free(),
                    bs as u32,
                    255,
                    bs as u32,
                );
            }
            _ => reply.error(Errno::EIO),
        }
    }

    fn setxattr(
        &self,
        _req: &FuseRequest,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        _flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        let s = &self.shared;
        if let Some(r) = s.control_set(ino.0, name, value) {
            match r {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(e),
            }
            return;
        }
        lock(&s.privs_clear).remove(&ino.0);
        // Under the file's lock: a move copies attributes, and must not copy the old ones.
        let file_lock = s.file_lock(ino.0);
        let _g = s.access_lock(ino.0, &file_lock);
        let r = s.node(ino.0).and_then(|n| {
            for t in Tier::ALL {
                let p = s.tiers.path(t, &n.rel);
                if p.symlink_metadata().is_ok() {
                    xattr::set(&p, name, value).map_err(|e| errno(&e))?;
                }
            }
            Ok(())
        });
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn getxattr(&self, _req: &FuseRequest, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        let s = &self.shared;
        let value: Result<Vec<u8>, Errno> = if name == control::XATTR_TIER {
            Ok(s.tier_label(ino.0).as_bytes().to_vec())
        } else if name == control::XATTR_PIN {
            match read_lock(&s.pins).get(&ino.0) {
                Some(Tier::Fast) => Ok(b"ssd".to_vec()),
                Some(Tier::Slow) => Ok(b"hdd".to_vec()),
                None => Err(Errno::from_i32(61)), // ENODATA
            }
        } else if name == control::XATTR_STATS && ino.0 == ROOT {
            serde_json::to_vec_pretty(&s.snapshot()).map_err(|_| Errno::EIO)
        } else if name == "user.tierwise.debug" {
            Ok(lock(&s.events)
                .get(&ino.0)
                .map(|q| q.iter().cloned().collect::<Vec<_>>().join("\n"))
                .unwrap_or_default()
                .into_bytes())
        } else {
            let file_lock = s.file_lock(ino.0);
            let _g = s.access_lock(ino.0, &file_lock);
            s.node(ino.0).and_then(|n| {
                let p = s.meta_path(ino.0, &n).ok_or(Errno::ENOENT)?;
                match xattr::get(&p, name) {
                    Ok(Some(v)) => Ok(v),
                    Ok(None) => Err(Errno::from_i32(61)), // ENODATA
                    Err(e) => Err(errno(&e)),
                }
            })
        };
        match value {
            Ok(v) if size == 0 => reply.size(v.len() as u32),
            Ok(v) if v.len() <= size as usize => reply.data(&v),
            Ok(_) => reply.error(Errno::ERANGE),
            Err(e) => reply.error(e),
        }
    }

    fn listxattr(&self, _req: &FuseRequest, ino: INodeNo, size: u32, reply: ReplyXattr) {
        let s = &self.shared;
        let file_lock = s.file_lock(ino.0);
        let _g = s.access_lock(ino.0, &file_lock);
        let r = s.node(ino.0).and_then(|n| {
            let p = s.meta_path(ino.0, &n).ok_or(Errno::ENOENT)?;
            let mut out: Vec<u8> = b"user.tierwise.tier\0".to_vec();
            for name in xattr::list(&p).map_err(|e| errno(&e))? {
                out.extend_from_slice(name.as_encoded_bytes());
                out.push(0);
            }
            Ok(out)
        });
        match r {
            Ok(v) if size == 0 => reply.size(v.len() as u32),
            Ok(v) if v.len() <= size as usize => reply.data(&v),
            Ok(_) => reply.error(Errno::ERANGE),
            Err(e) => reply.error(e),
        }
    }

    fn removexattr(&self, _req: &FuseRequest, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let s = &self.shared;
        if name == control::XATTR_PIN {
            match s.set_pin(ino.0, None) {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(e),
            }
            return;
        }
        lock(&s.privs_clear).remove(&ino.0);
        let file_lock = s.file_lock(ino.0);
        let _g = s.access_lock(ino.0, &file_lock);
        let r = s.node(ino.0).and_then(|n| {
            let mut removed = false;
            for t in Tier::ALL {
                let p = s.tiers.path(t, &n.rel);
                if p.symlink_metadata().is_ok() && xattr::remove(&p, name).is_ok() {
                    removed = true;
                }
            }
            if removed { Ok(()) } else { Err(Errno::from_i32(61)) }
        });
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn create(
        &self,
        req: &FuseRequest,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let s = &self.shared;
        let r = (|| -> Result<FileAttr, Errno> {
            tiers::check_name(name).map_err(Errno::from_i32)?;
            s.both_tiers()?;
            let rel = s.node(parent.0)?.rel.join(name);
            if Tier::ALL.into_iter().any(|t| s.tiers.exists(t, &rel)) {
                return Err(Errno::EEXIST);
            }
            let ino = lock(&s.inodes).ino_of(&rel, false);
            let file_lock = s.file_lock(ino);
            let _g = file_lock.write().unwrap_or_else(std::sync::PoisonError::into_inner);
            s.tell(&Request::op(ObjectId(ino), Op::Create).with_class(s.class(&rel, false)));
            let p = lock(&s.engine).placement(ObjectId(ino));
            // Where the engine put it (the baselines answer untracked, with their one device).
            let mut tiers_for: Vec<Tier> = Vec::new();
            if p.on_slow || !p.on_fast {
                tiers_for.push(Tier::Slow);
            }
            if p.on_fast {
                tiers_for.push(Tier::Fast);
            }
            for t in tiers_for {
                s.tiers.make_parents(t, &rel).map_err(|e| errno(&e))?;
                let path = s.tiers.path(t, &rel);
                let f = fs::OpenOptions::new().write(true).create_new(true).open(&path).map_err(|e| errno(&e))?;
                f.set_permissions(fs::Permissions::from_mode(mode & !umask & 0o7777)).map_err(|e| errno(&e))?;
                let _ = std::os::unix::fs::fchown(&f, Some(req.uid()), Some(req.gid()));
            }
            s.attr_locked(ino)
        })();
        match r {
            Ok(a) => {
                let ino = a.ino.0;
                *lock(&s.open_counts).entry(ino).or_default() += 1;
                if s.passthrough.load(Ordering::Acquire)
                    && let Ok(n) = s.node(ino)
                {
                    // A new file is empty: its placement is the engine's allocation, settled.
                    let writable = flags & nix::libc::O_ACCMODE != nix::libc::O_RDONLY;
                    let pinned = read_lock(&s.pins).contains_key(&ino);
                    if let Some(()) = s.open_passthrough(ino, &n, writable, pinned, |f| reply.open_backing(f))
                        && let Some(e) = lock(&s.backing).get(&ino)
                    {
                        reply.created_passthrough(
                            &TTL,
                            &a,
                            Generation(0),
                            FileHandle(PASSTHROUGH_FH),
                            FopenFlags::empty(),
                            &e.id,
                        );
                        return;
                    }
                }
                reply.created(&TTL, &a, Generation(0), FileHandle(0), s.open_flags())
            }
            Err(e) => reply.error(e),
        }
    }
}

/// Checks that `spec` is a valid policy a mount can run: a file-level architecture (or a
/// single-device baseline) with valid knobs.
pub fn check_policy(spec: &str) -> Result<(), MountError> {
    let name = spec.split(':').next().unwrap_or("");
    let info = tierwise_core::arch_info(name)?;
    if !info.file_level && !matches!(info.name, "hdd-only" | "ssd-only") {
        return Err(MountError::NotFileLevel(info.name.to_string()));
    }
    build_arch(spec, &Setup { fast_capacity: 1 << 30, slow_capacity: 0, object_size: 0 })?;
    Ok(())
}

/// Whether passthrough is offered for `policy`: DST policies (one copy per file) and the
/// single-device baselines. Caching policies keep two copies in step, which passthrough I/O
/// would bypass (and a write-back policy under passthrough hung in testing; see DESIGN.md).
pub fn passthrough_allowed(policy: &str) -> bool {
    let name = policy.split(':').next().unwrap_or("");
    tierwise_core::arch_info(name)
        .is_ok_and(|i| i.help.starts_with("file DST") || matches!(i.name, "hdd-only" | "ssd-only"))
}

/// Mount options tierwise always uses.
pub fn mount_options() -> Vec<fuser::MountOption> {
    vec![
        fuser::MountOption::FSName("tierwise".into()),
        fuser::MountOption::Subtype("tierwise".into()),
        fuser::MountOption::DefaultPermissions,
    ]
}
