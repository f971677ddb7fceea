//! The state every request, the mover and the control commands share, and the helpers they
//! all use: locks, the engine gateway, where a file's copies are, attributes.
//!
//! # Locks, in the order they are taken
//! 1. A file's lock ([`Shared::file_lock`]): shared by an access from the moment it tells the
//!    engine until its I/O is done, exclusive for a whole move, an unlink or a rename of it.
//! 2. The namespace lock (`ns`): shared while a path is resolved on the tiers, exclusive for a
//!    directory rename or removal, which change the paths of other files. It is only ever held
//!    around resolution and the tier calls that follow it, never while waiting for a file lock,
//!    so it cannot close a cycle. Helpers that take an inode resolve under it themselves;
//!    helpers that take a relative path expect the caller to hold it.
//! 3. Leaf locks (the engine, the inode table, the tables of open files, pins...), never held
//!    while taking 1 or 2.

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, RwLock};
use std::time::{Duration, Instant, SystemTime};

use fuser::{Errno, FileAttr, FileHandle, FileType, FopenFlags, INodeNo};
use tierwise_core::arch::type_aware::volume_of;
use tierwise_core::driver::Driver;
use tierwise_core::{ObjectClass, ObjectId, ObjectKind, Op, Request, Served, Tier, WorkId};

use crate::control::Counters;
use crate::emulate::Emulator;
use crate::inodes::{Inodes, Node, ROOT};
use crate::mover::{MoverStats, Progress};
use crate::passthrough::Backing;
use crate::state::StateStore;
use crate::tiers::{self, Access, At, Tiers};
use crate::{MountConfig, SysClock};

/// One directory entry of a listing: inode, kind, name.
pub(crate) type DirEntry = (u64, FileType, OsString);

pub(crate) struct Shared {
    pub(crate) tiers: Tiers,
    pub(crate) engine: Mutex<Driver<SysClock>>,
    /// Signalled when work is queued (the mover waits on it).
    pub(crate) work_cv: Condvar,
    /// Signalled when work completes (blocked accesses wait on it).
    pub(crate) done_cv: Condvar,
    pub(crate) inodes: Mutex<Inodes>,
    /// The namespace lock (see the module docs).
    pub(crate) ns: RwLock<()>,
    pub(crate) locks: Mutex<HashMap<u64, Arc<RwLock<()>>>>,
    /// Regular handles open for writing, and drops of cached pages (see [`crate::page_cache`]).
    pub(crate) page_cache: crate::page_cache::PageCache,
    pub(crate) prefixes: Vec<String>,
    pub(crate) stop: AtomicBool,
    pub(crate) stats: MoverStats,
    /// Listings of open directories, by handle.
    pub(crate) dirs: Mutex<HashMap<u64, Vec<DirEntry>>>,
    pub(crate) next_fh: AtomicU64,
    /// Recent decisions and moves per file (read through the `user.tierwise.debug` xattr).
    pub(crate) events: Mutex<HashMap<u64, std::collections::VecDeque<String>>>,
    /// Tier files open for files the kernel has open, by (inode, tier). Dropped when a move
    /// replaces the file, on unlink, and when the kernel releases the file.
    pub(crate) fds: Mutex<HashMap<(u64, usize), Arc<fs::File>>>,
    pub(crate) store: StateStore,
    /// Pinned files and their tier (taken out of the policy).
    pub(crate) pins: RwLock<HashMap<u64, Tier>>,
    /// A read-only mount serves every file where it is, outside the policy: its tier.
    pub(crate) frozen: RwLock<HashMap<u64, Tier>>,
    /// Files with more than one name (hard links): one copy, on this tier, outside the policy
    /// (a move would copy one name and leave the others on the old file).
    pub(crate) linked: RwLock<HashMap<u64, Tier>>,
    /// Opens the kernel holds per file (an unlinked file lives on until the last is released).
    pub(crate) open_counts: Mutex<HashMap<u64, u32>>,
    /// Files unlinked while open: kept under a hidden name on this tier until the last release.
    pub(crate) orphans: Mutex<HashMap<u64, Tier>>,
    /// Orphans that no one had open when a rename replaced them, and until when they are kept.
    pub(crate) replaced: Mutex<Vec<(u64, Instant)>>,
    /// Journalled renames done on the tiers, with the directories they changed: each record is
    /// ended once those are synced (`Shared::end_renames`).
    pub(crate) pending_renames: Mutex<Vec<(u64, Vec<Arc<fs::File>>)>>,
    /// Size changes in flight and just answered: short reads wait for them (`crate::truncation`).
    pub(crate) truncations: crate::truncation::TruncationFence,
    /// The kernel granted passthrough (asked for with `MountConfig::passthrough`).
    pub(crate) passthrough: AtomicBool,
    /// Files open by passthrough: their backing file and opens. Such a file does not move.
    pub(crate) backing: Mutex<HashMap<u64, Backing>>,
    /// Files marked dirty in the store (mirror, so a write checks memory, not the store).
    pub(crate) dirty_marked: Mutex<HashSet<u64>>,
    /// The kernel left clearing set-id bits and capabilities to us (FUSE_HANDLE_KILLPRIV_V2).
    pub(crate) killpriv: AtomicBool,
    /// Tiers whose root is gone (fast, slow), as last checked.
    pub(crate) lost: [AtomicBool; 2],
    /// While adopting after an unclean shutdown (`crate::recovery`).
    pub(crate) unclean_start: AtomicBool,
    /// I/O errors per tier and operation (`crate::health`).
    pub(crate) tier_errors: crate::health::TierErrors,
    /// Files known to have no set-id bits and no capabilities (a write need not clear them);
    /// forgotten when their mode or extended attributes change.
    pub(crate) privs_clear: Mutex<HashSet<u64>>,
    pub(crate) progress: Progress,
    /// Bytes per second moves may copy (0 = unlimited); changeable while mounted.
    pub(crate) move_rate: AtomicU64,
    /// Latency emulation per tier (fast, slow).
    pub(crate) emulate: [Option<Emulator>; 2],
    /// Counters of earlier mounts, from the store.
    pub(crate) saved: Counters,
    /// Request latencies, for the metrics endpoint.
    pub(crate) latency: crate::metrics::Latencies,
    /// The engine's part of the last snapshot, and when it was read: what a snapshot reports
    /// when the engine's lock is held too long (`tierwise stats` answers even then).
    pub(crate) engine_view: Mutex<Option<(Instant, crate::stats::EngineView)>>,
    /// How the policy lays files out (what `df` shows).
    pub(crate) layout: crate::Layout,
    /// Per volume (0: paths outside every prefix): whether its policy may use passthrough.
    pub(crate) passthrough_volumes: Vec<bool>,
    /// Per volume: whether its policy keeps copies (a read cache: the HDD holds every file).
    pub(crate) caching_volumes: Vec<bool>,
    /// The data path in use, and why passthrough was declined (for `status`).
    pub(crate) data_path: Mutex<(String, Option<String>)>,
    /// The locks on the two tiers, held for the mount's life.
    pub(crate) _tier_locks: crate::lockfile::TierLocks,
    pub(crate) cfg: MountConfig,
    pub(crate) started: Instant,
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

pub(crate) fn read_lock<T>(l: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(std::sync::PoisonError::into_inner)
}

pub(crate) fn write_lock<T>(l: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(std::sync::PoisonError::into_inner)
}

pub(crate) fn errno(e: &io::Error) -> Errno {
    Errno::from_i32(e.raw_os_error().unwrap_or(nix::errno::Errno::EIO as i32))
}

impl Shared {
    pub(crate) fn class(&self, rel: &Path, dir: bool) -> ObjectClass {
        // Only per-volume policies need the path (as the engine spells it, from the root).
        let volume = if self.prefixes.is_empty() {
            0
        } else {
            volume_of(&self.prefixes, &format!("/{}", rel.to_string_lossy()))
        };
        ObjectClass { volume, kind: if dir { ObjectKind::Meta } else { ObjectKind::Data } }
    }

    /// How a regular (not passthrough) open of file `ino` is answered, and its handle
    /// (`writable`: open for writing): with the kernel cache, keep the pages cached by earlier
    /// opens; with the page cache, drop them only when it is safe (see [`crate::page_cache`]).
    pub(crate) fn open_regular(&self, ino: u64, writable: bool) -> (FileHandle, FopenFlags) {
        if self.cfg.kernel_cache {
            (FileHandle(0), FopenFlags::FOPEN_KEEP_CACHE)
        } else if self.cfg.direct_io {
            (FileHandle(0), FopenFlags::FOPEN_DIRECT_IO)
        } else {
            // A writer's handle is counted until its release.
            let fh = if writable { crate::page_cache::WRITER_FH } else { 0 };
            (FileHandle(fh), self.page_cache.open(ino, writable))
        }
    }

    pub(crate) fn file_lock(&self, ino: u64) -> Arc<RwLock<()>> {
        Arc::clone(lock(&self.locks).entry(ino).or_default())
    }

    /// The tier of a file outside the policy (pinned, unlinked while open, open by
    /// passthrough, or any file of a read-only mount), if it is.
    pub(crate) fn fixed_tier(&self, ino: u64) -> Option<Tier> {
        // One leaf lock at a time, none held while a read-only mount resolves a path.
        let pinned = read_lock(&self.pins).get(&ino).copied();
        let linked = || read_lock(&self.linked).get(&ino).copied();
        let orphan = || lock(&self.orphans).get(&ino).copied();
        let backing = || lock(&self.backing).get(&ino).filter(|b| b.opens > 0).map(|b| b.tier);
        pinned
            .or_else(linked)
            .or_else(orphan)
            .or_else(backing)
            .or_else(|| if self.cfg.read_only { self.frozen_tier(ino) } else { None })
    }

    /// Where a read-only mount serves `ino`: the tier adoption found it on, or for a file
    /// the scan did not see, the first that has it.
    fn frozen_tier(&self, ino: u64) -> Option<Tier> {
        if let Some(&t) = read_lock(&self.frozen).get(&ino) {
            return Some(t);
        }
        self.copies(ino).first().copied()
    }

    /// Takes file `ino`'s lock shared for an access: when a move holds it, a long move is
    /// cancelled rather than waited for (see [`Shared::yield_move`]).
    pub(crate) fn access_lock<'a>(&self, ino: u64, file_lock: &'a RwLock<()>) -> std::sync::RwLockReadGuard<'a, ()> {
        match file_lock.try_read() {
            Ok(g) => g,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => {
                // The mover sees the waiter and cancels its move if it will take a while yet.
                let p = &self.progress;
                let waiting = p.claimed.load(Ordering::Acquire) == ino;
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

    pub(crate) fn node(&self, ino: u64) -> Result<Node, Errno> {
        lock(&self.inodes).get(ino).cloned().ok_or(Errno::ENOENT)
    }

    /// Runs `f` with file `ino`'s current path under the namespace lock (shared): no directory
    /// rename runs in between, so the path is the file's on both tiers. `f` must not take a
    /// file lock or the namespace lock.
    pub(crate) fn with_rel<T>(&self, ino: u64, f: impl FnOnce(&Path) -> io::Result<T>) -> Result<T, Errno> {
        let _ns = read_lock(&self.ns);
        let rel = lock(&self.inodes).get(ino).map(|n| Arc::clone(&n.rel)).ok_or(Errno::ENOENT)?;
        f(&rel).map_err(|e| errno(&e))
    }

    /// File `ino`'s name on `tier` (its directory open: later renames do not matter).
    pub(crate) fn at(&self, ino: u64, tier: Tier) -> Result<At, Errno> {
        self.with_rel(ino, |rel| self.tiers.at(tier, rel))
    }

    /// Inode `ino` on `tier`, the root included (as its own directory).
    pub(crate) fn at_any(&self, ino: u64, tier: Tier) -> Result<At, Errno> {
        self.with_rel(ino, |rel| {
            if rel.as_os_str().is_empty() { At::itself(self.tiers.root_dir(tier)?) } else { self.tiers.at(tier, rel) }
        })
    }

    /// Remembers an event of file `ino` (the last 32 are kept).
    pub(crate) fn note(&self, ino: u64, what: impl FnOnce() -> String) {
        if !self.cfg.debug_events {
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

    /// Tells the engine; queues its work for the mover. A read-only mount tells it nothing.
    pub(crate) fn tell(&self, req: &Request) -> Served {
        if self.cfg.read_only {
            return Served::by(tierwise_core::Level::Slow);
        }
        let mut e = lock(&self.engine);
        let (served, issued) = e.access(req, false);
        if issued > 0 {
            self.work_cv.notify_all();
        }
        if self.cfg.debug_events {
            let p = e.placement(req.obj);
            let work: Vec<String> =
                e.work.newest(issued).map(|w| format!("{}#{}({})", w.kind.name(), w.obj.0, w.id.0 & 0xffff)).collect();
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

    /// Waits until none of the works `issued`, and none of the work on `ino` queued or in
    /// flight now, is queued or in flight.
    pub(crate) fn wait_for(&self, ino: u64, issued: &[(ObjectId, WorkId)]) {
        /// Counted while waiting (the mover skips its back-off then), also on unwinding.
        struct Waiting<'a>(&'a AtomicU64);
        impl Drop for Waiting<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::AcqRel);
            }
        }
        self.progress.waiting_for_work.fetch_add(1, Ordering::AcqRel);
        let _waiting = Waiting(&self.progress.waiting_for_work);
        self.yield_move(ino);
        let mut e = lock(&self.engine);
        e.take_issued();
        // The work to wait for is fixed now: a move of the file that fails and is queued again
        // later (a failing tier) must not hold the access for ever; it takes the file lock
        // exclusively, so it cannot overlap the access's I/O anyway.
        let mut waited: Vec<(ObjectId, WorkId)> = issued.to_vec();
        waited.extend(e.work.on(ObjectId(ino)).iter().map(|&id| (ObjectId(ino), id)));
        while e.work.any_left(&waited) {
            self.work_cv.notify_all();
            e = self.done_cv.wait_timeout(e, Duration::from_millis(50)).map_or_else(|p| p.into_inner().0, |r| r.0);
        }
    }

    pub(crate) fn settle(&self) {
        let mut e = lock(&self.engine);
        while e.take_issued() > 0 || !e.work.is_empty() {
            self.work_cv.notify_all();
            e = self.done_cv.wait_timeout(e, Duration::from_millis(50)).map_or_else(|p| p.into_inner().0, |r| r.0);
        }
    }

    /// The tiers that hold a copy of file `ino` now, the authoritative (newest) one first.
    pub(crate) fn copies(&self, ino: u64) -> Vec<Tier> {
        self.with_rel(ino, |rel| Ok(self.copies_at(ino, rel))).unwrap_or_default()
    }

    /// [`Shared::copies`] of file `ino` at `rel`; the caller holds the namespace lock.
    pub(crate) fn copies_at(&self, ino: u64, rel: &Path) -> Vec<Tier> {
        let linked = read_lock(&self.linked).get(&ino).copied();
        if let Some(t) = linked {
            // Its one copy: a stale file of the same name on the other tier is not it.
            return if self.tiers.exists(t, rel) { vec![t] } else { Vec::new() };
        }
        let p = lock(&self.engine).placement(ObjectId(ino));
        let mut v = Vec::with_capacity(2);
        if p.tracked && !self.cfg.read_only {
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

    pub(crate) fn tier_label(&self, ino: u64) -> &'static str {
        if self.node(ino).is_err() {
            return "none";
        }
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
        let c = self.copies(ino);
        match (c.contains(&Tier::Fast), c.contains(&Tier::Slow)) {
            (true, true) => "ssd+hdd",
            (true, false) => "ssd",
            (false, true) => "hdd",
            (false, false) => "none",
        }
    }

    /// The copy attributes are read from: the authoritative copy, or for a directory or
    /// symlink whichever tier has it (HDD first).
    pub(crate) fn meta_at(&self, ino: u64, node: &Node) -> Result<At, Errno> {
        if node.dir || ino == ROOT {
            let tier = [Tier::Slow, Tier::Fast]
                .into_iter()
                .find(|&t| self.with_rel(ino, |rel| Ok(self.tiers.is_dir(t, rel))).unwrap_or(false))
                .ok_or_else(|| self.missing())?;
            return self.at_any(ino, tier);
        }
        let tier = *self.copies(ino).first().ok_or_else(|| self.missing())?;
        self.at(ino, tier)
    }

    /// Attributes of `ino`, read under its shared lock (a move never runs in between).
    pub(crate) fn attr(&self, ino: u64) -> Result<FileAttr, Errno> {
        let file_lock = self.file_lock(ino);
        let _g = self.access_lock(ino, &file_lock);
        self.attr_locked(ino)
    }

    /// Attributes of `ino`; the caller holds its lock.
    pub(crate) fn attr_locked(&self, ino: u64) -> Result<FileAttr, Errno> {
        let dir = self.node(ino)?.dir;
        let _ns = read_lock(&self.ns);
        let rel = lock(&self.inodes).get(ino).map(|n| Arc::clone(&n.rel)).ok_or(Errno::ENOENT)?;
        self.attr_at(ino, &rel, dir)
    }

    /// A data access of file `ino` for the engine.
    pub(crate) fn data_request(&self, ino: u64, node: &Node, op: Op, offset: u64, len: u64) -> Request {
        Request { obj: ObjectId(ino), op, offset, len, class: self.class(&node.rel, node.dir) }
    }

    /// The tier file of `ino` on `tier` if it is open already.
    pub(crate) fn open_fd(&self, ino: u64, tier: Tier) -> Option<Arc<fs::File>> {
        lock(&self.fds).get(&(ino, tier.index())).cloned()
    }

    /// The open tier file of `ino` on `tier` (opened, or created when `create`, on first use).
    /// The caller holds the file's lock, so no move replaces it meanwhile.
    pub(crate) fn fd(&self, ino: u64, tier: Tier, create: bool) -> Result<Arc<fs::File>, Errno> {
        if let Some(f) = lock(&self.fds).get(&(ino, tier.index())) {
            return Ok(Arc::clone(f));
        }
        let f = Arc::new(self.with_rel(ino, |rel| {
            if create {
                let at = self.tiers.at_creating(tier, rel)?;
                if !at.exists() {
                    // A copy of an existing file made by a write: it carries the file's owner,
                    // mode and attributes from the other tier, as a move's copy does.
                    self.tiers.recreate(tier, rel)?;
                }
                at.open(Access::ReadWriteCreate)
            } else {
                self.tiers.at(tier, rel)?.open(Access::ReadWrite)
            }
        })?);
        lock(&self.fds).insert((ino, tier.index()), Arc::clone(&f));
        Ok(f)
    }

    /// Forgets the open tier files of `ino` (its files were replaced or removed).
    pub(crate) fn drop_fds(&self, ino: u64) {
        let mut fds = lock(&self.fds);
        for t in Tier::ALL {
            fds.remove(&(ino, t.index()));
        }
    }

    /// Counts an access served outside the policy in the per-tier counters.
    pub(crate) fn count_outside(&self, tier: Tier, req: &Request) {
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

    /// Keeps the store's dirty mark of `ino` in step with the engine. The engine is read under
    /// the mark's lock, so two threads cannot leave a stale mark; the path under the namespace
    /// lock, so a directory rename cannot leave it under an old path.
    pub(crate) fn sync_dirty_mark(&self, ino: u64) {
        // The namespace lock before the marks' (a directory rename holds it while it rekeys).
        let _ns = read_lock(&self.ns);
        let mut marked = lock(&self.dirty_marked);
        let dirty = lock(&self.engine).placement(ObjectId(ino)).dirty;
        if dirty == marked.contains(&ino) {
            return;
        }
        let Some(rel) = lock(&self.inodes).get(ino).map(|n| Arc::clone(&n.rel)) else { return };
        if self.store.set_dirty(&rel, dirty).is_ok() {
            if dirty {
                marked.insert(ino);
            } else {
                marked.remove(&ino);
            }
        }
    }

    /// Whether directory `rel` has entries (other than tierwise's own) on either tier; the
    /// caller holds the namespace lock.
    pub(crate) fn dir_has_entries(&self, rel: &Path) -> bool {
        Tier::ALL.into_iter().any(|t| {
            self.tiers
                .dir(t, rel)
                .and_then(|d| tiers::at::list_dir(&d))
                .is_ok_and(|names| names.iter().any(|(n, _)| !tiers::is_reserved(n)))
        })
    }

    /// The inode of `name` in directory `parent` and its path, when a tier has it.
    pub(crate) fn lookup_child(&self, parent: u64, name: &std::ffi::OsStr) -> Result<(u64, PathBuf), Errno> {
        self.lookup(parent, name, false).map(|(ino, rel, _)| (ino, rel))
    }

    /// [`Shared::lookup_child`] with the attributes, read under the same locks (one lookup).
    pub(crate) fn lookup_attr(&self, parent: u64, name: &std::ffi::OsStr) -> Result<FileAttr, Errno> {
        let (_, _, attr) = self.lookup(parent, name, true)?;
        attr.ok_or(Errno::EIO)
    }

    fn lookup(
        &self,
        parent: u64,
        name: &std::ffi::OsStr,
        with_attr: bool,
    ) -> Result<(u64, PathBuf, Option<FileAttr>), Errno> {
        tiers::check_name(name).map_err(Errno::from_i32)?;
        // A known file may be moving: look under its lock, or both checks could miss it while
        // it switches tiers. An unknown path has no work in flight. The lock is taken without
        // the namespace lock held, and the name resolved again under it.
        for _ in 0..8 {
            let known = {
                let _ns = read_lock(&self.ns);
                let rel = self.node(parent)?.rel.join(name);
                lock(&self.inodes).by_path.get(&rel).copied()
            };
            let file_lock = known.map(|i| self.file_lock(i));
            let _g = file_lock.as_ref().zip(known).map(|(l, i)| self.access_lock(i, l));
            let _ns = read_lock(&self.ns);
            let rel = self.node(parent)?.rel.join(name);
            if lock(&self.inodes).by_path.get(&rel).copied() != known {
                continue; // renamed meanwhile: look again
            }
            if let Some(ino) = known {
                // Known: its attributes from where its copy is, one resolution.
                let dir = self.node(ino)?.dir;
                let m = self.meta_of(ino, &rel, dir)?;
                if m.is_dir() == dir {
                    return Ok((ino, rel, with_attr.then(|| to_attr(ino, &m))));
                }
                // A file replaced by a directory of the same name behind the mount: a new inode.
                lock(&self.inodes).forget_path(&rel);
                continue;
            }
            let m =
                Tier::ALL.into_iter().find_map(|t| self.tiers.metadata(t, &rel).ok()).ok_or_else(|| self.missing())?;
            let ino = lock(&self.inodes).ino_of(&rel, m.is_dir());
            let attr = if !with_attr {
                None
            } else if m.is_dir() {
                Some(self.attr_at(ino, &rel, true)?)
            } else {
                // New to the table: nothing moves it yet, and its one copy is the one found.
                Some(to_attr(ino, &m))
            };
            return Ok((ino, rel, attr));
        }
        Err(Errno::EAGAIN)
    }

    /// Attributes of `ino` at `rel` (a directory when `dir`): the caller holds its lock and
    /// the namespace lock.
    fn attr_at(&self, ino: u64, rel: &Path, dir: bool) -> Result<FileAttr, Errno> {
        Ok(to_attr(ino, &self.meta_of(ino, rel, dir)?))
    }

    /// Metadata of the copy of `ino` at `rel` that attributes come from: the authoritative
    /// copy of a file (where the engine says, else wherever one is), a directory's HDD side
    /// first. One resolution in the common case. The caller holds the namespace lock.
    fn meta_of(&self, ino: u64, rel: &Path, dir: bool) -> Result<fs::Metadata, Errno> {
        let order: [Tier; 2] = if dir || ino == ROOT {
            [Tier::Slow, Tier::Fast]
        } else if let Some(t) = read_lock(&self.linked).get(&ino).copied() {
            [t, t.other()]
        } else {
            let p = lock(&self.engine).placement(ObjectId(ino));
            if p.tracked && !self.cfg.read_only && !p.on_fast {
                [Tier::Slow, Tier::Fast]
            } else {
                [Tier::Fast, Tier::Slow]
            }
        };
        for t in order {
            match self.tiers.metadata(t, rel) {
                Ok(m) if m.is_dir() == dir || ino == ROOT => return Ok(m),
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(nix::libc::EIO) => return Err(Errno::EIO),
                Err(_) => {}
            }
        }
        Err(self.missing())
    }
}

/// FUSE attributes of `ino` from its tier file's metadata.
pub(crate) fn to_attr(ino: u64, m: &fs::Metadata) -> FileAttr {
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
        nlink: if m.is_dir() { 2 } else { m.nlink() as u32 },
        uid: m.uid(),
        gid: m.gid(),
        rdev: 0,
        blksize: 4096,
        flags: 0,
    }
}
