//! `tierwise mount`: a hybrid file system (FUSE) over an SSD directory and an HDD directory. It
//! executes the engine's decisions and has no placement policy of its own: every operation is
//! told to the engine ([`tierwise_core::Engine`]), which answers where to serve it, and a mover
//! thread executes the background work (promotions, demotions, copies, write-backs,
//! invalidations) with the move protocol of [`tiers`].
//!
//! # Safety of the tiers
//! The daemon runs as root over directories its users can change (through the mount). No tier
//! operation follows a symlink or leaves the tier: paths are resolved from the tier's root with
//! `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` under a namespace lock that directory
//! renames take exclusively, every operation then acts on a name in an open directory, and a
//! move removes its source only if it is still the file it copied ([`tiers::at`]).
//!
//! # Concurrency
//! - One lock per file orders data I/O against moves: an operation holds it shared from the
//!   moment it tells the engine until its I/O is done; the mover holds it exclusively for a
//!   whole move (copy, sync, switch, removal of the source). So writes never race a copy, the
//!   work an access triggers starts after that access (the engine's contract), and a write that
//!   arrives during a move waits and lands in the final copy.
//! - An access the engine marks `blocked` (it waits for cleaning, or for its file's move)
//!   releases its file lock, waits until no work on its file is in flight, then runs on the
//!   engine's first answer where the file is now; it is asked again (uncounted,
//!   `Engine::access_again`) only if that answer would leave a copy stale.
//! - Lock order: file lock, then the namespace lock, then the engine or the inode table; never
//!   the other way round (see `shared`).
//!
//! # State
//! Pins, the write-back dirty set, a journal of moves and the counters live in a redb store
//! ([`state`]) under the state directory (default: `.tierwise-state/` in the SSD directory).
//! Mounting first locks both tiers (one daemon per tier pair), finishes or rolls back the moves
//! the journal says a crash interrupted, then adopts the trees: the dirty set says which SSD
//! copies are newer than their HDD copy (mtimes can lie: `rsync -t`, `touch -d`), pins put
//! their files on their tier. A lost store is rebuilt from the trees alone (a corrupt one is
//! kept aside; one that another process holds is never touched).

pub mod control;
pub mod emulate;
mod health;
mod inodes;
pub mod lockfile;
pub mod log;
pub mod metrics;
mod mover;
mod ops;
mod page_cache;
mod passthrough;
mod pins;
mod privs;
mod recovery;
pub mod session;
mod shared;
pub mod state;
mod stats;
pub mod tiers;
mod truncation;

use std::collections::{HashMap, HashSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::Instant;

pub use control::{Counters, MoveInProgress, Snapshot};
use emulate::Emulator;
pub use lockfile::LockError;
pub use mover::MoverStats;
use shared::{Shared, lock};
use state::StateError;
pub use tiers::{TierError, Tiers};
use tierwise_core::arch::CostClass;
use tierwise_core::arch::type_aware::{file_volumes, volume_archs};
use tierwise_core::driver::Driver;
use tierwise_core::{Clock, ConfigError, Engine, Nanos, Setup, Tier, build_arch};

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
    /// The tiers are mounted already.
    #[error(transparent)]
    Locked(#[from] LockError),
    /// The policy spec is invalid.
    #[error(transparent)]
    Policy(#[from] ConfigError),
    /// The policy is a block-level architecture.
    #[error("`{0}` is a block-level architecture; a mount places files. File-level architectures: {1}")]
    NotFileLevel(String, String),
    /// Reading the tiers failed.
    #[error("scanning the tiers: {0}")]
    Io(#[from] io::Error),
    /// The state store could not be opened or written.
    #[error(transparent)]
    State(#[from] StateError),
    /// Another process has the state store open.
    #[error(
        "the state store `{0}` is open in another process (another tierwise mount of these tiers, or one sharing its --state-dir); it was left untouched"
    )]
    StoreInUse(PathBuf),
    /// An emulation preset is unknown.
    #[error("--emulate-{0}: {1}")]
    Emulation(&'static str, String),
    /// Two data-path options that exclude each other.
    #[error("{0}")]
    Modes(&'static str),
    /// The volume was mounted with another policy, and changing it was not asked for.
    #[error(
        "these tiers were last mounted with the policy `{stored}`, not `{asked}`: mount without --policy to keep it, or add --force-policy to change it (dirty files are written back to the HDD first); nothing was changed"
    )]
    PolicyMismatch {
        /// The policy recorded with the data.
        stored: String,
        /// The policy asked for.
        asked: String,
    },
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
    /// xattr, and check the engine's invariants after every call (tests; costs a pass over
    /// the engine's files per operation).
    pub debug_events: bool,
    /// Of the quota, bytes kept for files pinned to the SSD.
    pub pin_reserve: u64,
    /// Of the pin reserve, bytes each user other than root may pin to the SSD (0: only root
    /// pins to the SSD).
    pub user_pin_quota: u64,
    /// Where the state store lives; `None`: `.tierwise-state/` in the SSD directory.
    pub state_dir: Option<PathBuf>,
    /// Background moves copy at most this many bytes per second (0 = unlimited).
    pub move_rate: u64,
    /// Delay HDD-tier I/O by this simulator HDD preset.
    pub emulate_hdd: Option<String>,
    /// Delay SSD-tier I/O by this simulator SSD preset.
    pub emulate_ssd: Option<String>,
    /// The emulated HDD's request queue (the simulator's `--hdd-queue`).
    pub hdd_queue: tierwise_devices::QueueConfig,
    /// Serve opened files by FUSE passthrough (the kernel does their I/O on the tier file)
    /// when their placement is settled, where the policy's capabilities allow it (default).
    pub passthrough: bool,
    /// Let the kernel's page cache sit above the policy (FUSE writeback cache and
    /// `FOPEN_KEEP_CACHE`): reads it holds and writes it has not flushed yet never reach the
    /// daemon.
    pub kernel_cache: bool,
    /// Bypass the page cache for regular I/O (`FOPEN_DIRECT_IO`): each read and write reaches
    /// the daemon at the size the application asked for; mmap still works through the page
    /// cache (`FUSE_DIRECT_IO_ALLOW_MMAP`). Not with `kernel_cache`.
    pub direct_io: bool,
    /// A read-only mount: every file served where it is, nothing moved or written, the
    /// trees and the state store left exactly as they are.
    pub read_only: bool,
    /// Where the mount is (for the lock file, status and metrics).
    pub mountpoint: Option<PathBuf>,
    /// Run `policy` even though the volume was last mounted with another one: its dirty files
    /// are written back first. Without it a different policy is refused (see [`stored_policy`]).
    pub force_policy: bool,
}

impl MountConfig {
    /// A configuration with the given policy and quota and everything else at its default.
    pub fn new(policy: &str, ssd_quota: u64) -> MountConfig {
        MountConfig {
            policy: policy.to_string(),
            ssd_quota,
            debug_events: false,
            pin_reserve: 0,
            user_pin_quota: 0,
            state_dir: None,
            move_rate: 0,
            emulate_hdd: None,
            emulate_ssd: None,
            hdd_queue: tierwise_devices::QueueConfig::default(),
            passthrough: true,
            kernel_cache: false,
            direct_io: false,
            read_only: false,
            mountpoint: None,
            force_policy: false,
        }
    }
}

/// The state directory used when none is given: inside the SSD tier, hidden from the mount.
pub const DEFAULT_STATE_DIR: &str = ".tierwise-state";

/// How a policy lays files out, which decides the space a user can store (`df`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// Every file on the HDD tier.
    HddOnly,
    /// Every file on the SSD tier.
    SsdOnly,
    /// Every file on the HDD, some copied to the SSD (any volume caches).
    Caching,
    /// One copy of each file, on either tier.
    Tiering,
}

impl Layout {
    /// The layout of `policy` (with volumes: caching if any volume caches).
    pub fn of(policy: &str) -> Result<Layout, ConfigError> {
        let archs = volume_archs(policy)?;
        Ok(match archs.as_slice() {
            [one] if cost_of(one) == Some(CostClass::HddOnly) => Layout::HddOnly,
            [one] if cost_of(one) == Some(CostClass::SsdOnly) => Layout::SsdOnly,
            _ if archs.iter().any(|a| keeps_copies(a)) => Layout::Caching,
            _ => Layout::Tiering,
        })
    }
}

/// Reads the accesses a mount told its engine (see [`HybridFs::record_calls`]).
pub struct CallRecorder(Arc<Shared>);

impl CallRecorder {
    /// The accesses recorded so far, in the order the engine was told them.
    pub fn calls(&self) -> Vec<tierwise_core::Call> {
        lock(&self.0.engine).calls().to_vec()
    }
}

/// The hybrid file system; see the crate docs.
pub struct HybridFs {
    shared: Arc<Shared>,
    mover: Option<std::thread::JoinHandle<()>>,
}

impl HybridFs {
    /// Builds the file system over `tiers`: checks the policy, locks the tiers, adopts the
    /// files already in the trees, and starts the mover.
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
        let emulate = [
            cfg.emulate_ssd.as_deref().map(Emulator::ssd).transpose().map_err(|e| MountError::Emulation("ssd", e))?,
            (cfg.emulate_hdd.as_deref().map(|p| Emulator::hdd(p, cfg.hdd_queue)).transpose())
                .map_err(|e| MountError::Emulation("hdd", e))?,
        ];
        // One daemon per tier pair: before the store is opened or anything is touched.
        let tier_locks = lockfile::TierLocks::acquire(&tiers, cfg.mountpoint.as_deref())?;
        let state_dir = cfg.state_dir.clone().unwrap_or_else(|| tiers.ssd.join(DEFAULT_STATE_DIR));
        let store = recovery::open_store(&state_dir, cfg.read_only)?;
        let stored = store.policy()?;
        let changing = match &stored {
            Some(s) if !tierwise_core::same_policy(s, &cfg.policy) => {
                if !cfg.force_policy && !cfg.read_only {
                    return Err(MountError::PolicyMismatch { stored: s.clone(), asked: cfg.policy.clone() });
                }
                !cfg.read_only
            }
            _ => false,
        };
        let saved = Counters::from_saved(&store.counters()?);
        let policy_bytes = cfg.ssd_quota.saturating_sub(cfg.pin_reserve).max(1);
        let setup = Setup { fast_capacity: policy_bytes, slow_capacity: 0, object_size: 0 };
        let mut engine = Engine::new(build_arch(&cfg.policy, &setup)?, SysClock(Instant::now()));
        // Tests: every engine call is also checked against the architecture's invariants.
        engine.check_every_call(cfg.debug_events);
        let prefixes = file_volumes(&cfg.policy)?;
        let plan = data_path_plan(cfg)?;
        let shared = Arc::new(Shared {
            tiers,
            engine: Mutex::new(Driver::new(engine)),
            work_cv: Condvar::new(),
            done_cv: Condvar::new(),
            inodes: Mutex::new(inodes::Inodes::default()),
            ns: RwLock::new(()),
            locks: Mutex::new(HashMap::new()),
            prefixes,
            stop: AtomicBool::new(false),
            stats: MoverStats::default(),
            dirs: Mutex::new(HashMap::new()),
            next_fh: AtomicU64::new(1),
            events: Mutex::new(HashMap::new()),
            fds: Mutex::new(HashMap::new()),
            store,
            pins: RwLock::new(HashMap::new()),
            frozen: RwLock::new(HashMap::new()),
            linked: RwLock::new(HashMap::new()),
            open_counts: Mutex::new(HashMap::new()),
            orphans: Mutex::new(HashMap::new()),
            replaced: Mutex::new(Vec::new()),
            pending_renames: Mutex::new(Vec::new()),
            truncations: crate::truncation::TruncationFence::default(),
            passthrough: AtomicBool::new(false),
            backing: Mutex::new(HashMap::new()),
            dirty_marked: Mutex::new(HashSet::new()),
            killpriv: AtomicBool::new(false),
            lost: [AtomicBool::new(false), AtomicBool::new(false)],
            unclean_start: AtomicBool::new(false),
            tier_errors: health::TierErrors::default(),
            privs_clear: Mutex::new(HashSet::new()),
            progress: mover::Progress::default(),
            move_rate: AtomicU64::new(cfg.move_rate),
            emulate,
            saved,
            latency: metrics::Latencies::default(),
            engine_view: Mutex::new(None),
            layout: Layout::of(&cfg.policy)?,
            passthrough_volumes: plan.passthrough_volumes,
            caching_volumes: volume_archs(&cfg.policy)?.iter().map(|a| keeps_copies(a)).collect(),
            data_path: Mutex::new((plan.description, plan.declined)),
            _tier_locks: tier_locks,
            cfg: cfg.clone(),
            started: Instant::now(),
            page_cache: crate::page_cache::PageCache::default(),
        });
        if changing {
            // The old policy's dirty files reach the HDD before the new one adopts anything.
            shared.write_back_dirty()?;
        }
        // After a crash, two copies that look alike may not be (see `recovery::adopt_file`).
        shared.unclean_start.store(!shared.store.was_clean()?, Ordering::Relaxed);
        if !cfg.read_only {
            // Mounted from now on: a crash before the next clean unmount is one.
            shared.store.set_clean(false)?;
        }
        shared.adopt()?;
        shared.unclean_start.store(false, Ordering::Relaxed);
        if !cfg.read_only {
            shared.store.set_policy(&tierwise_core::full_spec(&cfg.policy)?)?;
        }
        // A read-only mount moves nothing: no mover.
        let mover = if cfg.read_only {
            None
        } else {
            let s = Arc::clone(&shared);
            Some(std::thread::Builder::new().name("tierwise-mover".into()).spawn(move || s.mover())?)
        };
        Ok(HybridFs { shared, mover })
    }

    /// Starts recording every access the mount tells the engine, and returns a handle that
    /// reads the record while the mount runs (differential tests against the file simulator).
    pub fn record_calls(&self) -> CallRecorder {
        lock(&self.shared.engine).record_calls(true);
        CallRecorder(Arc::clone(&self.shared))
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

    /// Stops the mover after the move in hand (cancelled: it rolls back) and saves the state:
    /// what unmounting does, callable before the session ends (a signal handler's shutdown).
    pub fn stop_handle(&self) -> impl Fn() + Send + Sync + 'static {
        let s = Arc::clone(&self.shared);
        move || {
            s.stop.store(true, Ordering::SeqCst);
            s.progress.cancel.store(true, Ordering::Release);
            s.work_cv.notify_all();
        }
    }
}

impl Drop for HybridFs {
    fn drop(&mut self) {
        // The move in hand rolls back rather than hold the exit for a rate-limited copy.
        self.shared.stop.store(true, Ordering::SeqCst);
        self.shared.progress.cancel.store(true, Ordering::Release);
        self.shared.work_cv.notify_all();
        if let Some(m) = self.mover.take() {
            let _ = m.join();
        }
        self.shared.end_renames();
        self.shared.save_heat(false);
        self.shared.save_counters(true);
        if !self.shared.cfg.read_only {
            // Last, once both tiers' file systems are synced (the store's own sync covers only
            // the SSD's): every copy and mark is durable, and they agree. A failed sync leaves
            // the volume marked unclean, which only costs a cautious adoption.
            let synced = Tier::ALL.into_iter().all(|t| self.shared.tiers.sync_fs(t).is_ok());
            if synced {
                let _ = self.shared.store.set_clean(true);
            }
        }
    }
}

/// The policy recorded with the tiers whose state store is in `state_dir` (by default
/// `.tierwise-state/` in the SSD directory): what a mount without `--policy` runs. `None` when
/// there is no store, or it records none (made before policies were recorded). Read only.
pub fn stored_policy(ssd: &Path, state_dir: Option<&Path>) -> Result<Option<String>, MountError> {
    let dir = state_dir.map_or_else(|| ssd.join(DEFAULT_STATE_DIR), Path::to_path_buf);
    match state::StateStore::open_read_only(&dir) {
        Ok(Some(s)) => Ok(s.policy()?),
        Ok(None) => Ok(None),
        Err(e) if e.is_locked() => Err(MountError::StoreInUse(dir.join(state::STATE_FILE))),
        // Unreadable: the mount sets it aside and rebuilds; no policy to keep.
        Err(_) => Ok(None),
    }
}

/// The file-level architectures a mount can run, for messages.
pub fn file_level_architectures() -> String {
    file_level_names().join(", ")
}

fn file_level_names() -> Vec<String> {
    let mut names: Vec<String> =
        tierwise_core::ARCHITECTURES.iter().filter(|a| a.caps.runs_on_files()).map(|a| a.name.to_string()).collect();
    names.sort_unstable();
    names
}

/// The cost class of the architecture named in `spec`, from the registry.
fn cost_of(spec: &str) -> Option<CostClass> {
    tierwise_core::arch_info(spec.split(':').next().unwrap_or("")).ok().map(|i| i.caps.cost)
}

/// Whether the architecture `spec` keeps copies (the HDD holds every file).
fn keeps_copies(spec: &str) -> bool {
    tierwise_core::arch_info(spec.split(':').next().unwrap_or(""))
        .is_ok_and(|i| i.caps.copies == tierwise_core::arch::Copies::SsdCopies)
}

/// Checks that `spec` is a valid policy a mount can run: a file-level architecture (or a
/// single-device baseline) with valid knobs.
pub fn check_policy(spec: &str) -> Result<(), MountError> {
    let name = spec.split(':').next().unwrap_or("");
    let info = match tierwise_core::arch_info(name) {
        Ok(info) => info,
        Err(_) => {
            return Err(MountError::Policy(ConfigError::UnknownName {
                kind: "file-level architecture",
                name: name.to_string(),
                allowed: file_level_names(),
            }));
        }
    };
    if !info.caps.runs_on_files() {
        return Err(MountError::NotFileLevel(info.name.to_string(), file_level_architectures()));
    }
    build_arch(spec, &Setup { fast_capacity: 1 << 30, slow_capacity: 0, object_size: 0 })?;
    Ok(())
}

/// Whether passthrough is offered for the architecture `policy`, as its registry capabilities
/// say: DST policies, the read caches (read-only to a cached file's SSD copy) and the
/// single-device baselines; not write-back, which must see every write it absorbs.
pub fn passthrough_allowed(policy: &str) -> bool {
    let name = policy.split(':').next().unwrap_or("");
    tierwise_core::arch_info(name).is_ok_and(|i| i.caps.passthrough)
}

/// How a mount serves file data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DataPath {
    /// Per volume (0: paths outside every prefix), whether passthrough may serve its files.
    pub passthrough_volumes: Vec<bool>,
    /// What `status` shows: `passthrough`, `regular FUSE I/O`, ...
    pub description: String,
    /// Why passthrough was declined, when it was asked for and some policy cannot use it.
    pub declined: Option<String>,
}

/// The data path of a mount configured by `cfg` (see [`DataPath`]).
pub fn data_path_plan(cfg: &MountConfig) -> Result<DataPath, ConfigError> {
    let archs = volume_archs(&cfg.policy)?;
    let prefixes = file_volumes(&cfg.policy)?;
    let allowed: Vec<bool> = archs.iter().map(|a| cfg.passthrough && passthrough_allowed(a)).collect();
    let regular = if cfg.kernel_cache {
        "kernel page cache"
    } else if cfg.direct_io {
        "direct I/O"
    } else {
        "regular FUSE I/O"
    };
    if !cfg.passthrough {
        return Ok(DataPath { passthrough_volumes: allowed, description: regular.to_string(), declined: None });
    }
    let name =
        |v: usize| if v == 0 { "other paths".to_string() } else { prefixes.get(v - 1).cloned().unwrap_or_default() };
    let declined: Vec<String> = archs
        .iter()
        .enumerate()
        .filter(|(v, _)| !allowed[*v])
        .map(|(v, a)| {
            let scope = if archs.len() > 1 { format!("{} ({a})", name(v)) } else { a.clone() };
            format!(
                "{scope} must see every write (it absorbs them on the SSD copy), which passthrough I/O would bypass"
            )
        })
        .collect();
    let path = match (allowed.iter().any(|&b| b), allowed.iter().all(|&b| b)) {
        (true, true) => "passthrough".to_string(),
        (false, _) => regular.to_string(),
        (true, false) => {
            let pt: Vec<String> = (0..archs.len()).filter(|&v| allowed[v]).map(name).collect();
            format!("passthrough for {}; {regular} elsewhere", pt.join(", "))
        }
    };
    let declined = (!declined.is_empty()).then(|| declined.join("; "));
    Ok(DataPath { passthrough_volumes: allowed, description: path, declined })
}

/// Mount options tierwise always uses; `source` is what the mount table and `df` show as its
/// source (the tiers as the user named them, so `mount -a` recognises an fstab line mounted).
pub fn mount_options(source: &str) -> Vec<fuser::MountOption> {
    vec![
        fuser::MountOption::FSName(source.into()),
        fuser::MountOption::Subtype("tierwise".into()),
        fuser::MountOption::DefaultPermissions,
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Passthrough per volume, by default: DST and read-cache volumes may, write-back ones may
    /// not, and the reason is said.
    #[test]
    fn the_data_path_follows_each_volume_policy() {
        let mut cfg = MountConfig::new("type-aware:default=dynamic-hot-dst,volumes=/web=file-write-back", 1 << 20);
        cfg.passthrough = false;
        let p = data_path_plan(&cfg).unwrap();
        assert_eq!((p.description.as_str(), p.declined), ("regular FUSE I/O", None), "not asked for");
        cfg.passthrough = true;
        let p = data_path_plan(&cfg).unwrap();
        assert_eq!(p.passthrough_volumes, [true, false]);
        assert_eq!(p.description, "passthrough for other paths; regular FUSE I/O elsewhere");
        let why = p.declined.unwrap();
        assert!(why.contains("/web (file-write-back) must see every write"), "{why}");
        assert!(MountConfig::new("on-demand-caching", 1).passthrough, "the default");
        assert_eq!(data_path_plan(&MountConfig::new("on-demand-caching", 1)).unwrap().description, "passthrough");
        assert_eq!(Layout::of("on-demand-caching").unwrap(), Layout::Caching);
        cfg.policy = "hycache".into();
        assert_eq!(data_path_plan(&cfg).unwrap().description, "passthrough");
        assert_eq!(Layout::of("hycache").unwrap(), Layout::Tiering);
        assert_eq!(Layout::of("file-write-back").unwrap(), Layout::Caching);
        assert_eq!(Layout::of("type-aware:volumes=/a=on-demand-caching").unwrap(), Layout::Caching);
        assert_eq!(Layout::of("hdd-only").unwrap(), Layout::HddOnly);
    }
}
