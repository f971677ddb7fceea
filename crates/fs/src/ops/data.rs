//! File data: open, read, write, truncate, fsync, release, and the engine gateway they share.

use std::os::unix::fs::FileExt;

use fuser::Errno;
use tierwise_core::driver::still_valid;
use tierwise_core::{Level, ObjectId, Op, Placement, Request, Served, Tier, WorkId};

use crate::health::IoOp;
use crate::inodes::Node;
use crate::shared::{Shared, errno, lock};
use crate::tiers;
use crate::tiers::calls::{self, Call};

impl Shared {
    /// Runs a data access: tells the engine (under the file's shared lock), and gives `io` the
    /// engine's answer and where the file was when it decided. A blocked access releases the
    /// lock, waits for the work it issued and the work on its file, and then runs on the
    /// engine's first answer — the engine is told once, as the simulator tells it, so its
    /// statistics and rankings count the access once. Only when other work changed the file
    /// meanwhile so that the first answer would leave a valid copy stale (a write that would
    /// miss a copy made since) is the engine asked again.
    /// A file outside the policy (pinned, unlinked while open, open by passthrough, any file of
    /// a read-only mount) is served where it is, and `io` gets no placement.
    pub(crate) fn data_op<T>(
        &self,
        ino: u64,
        req: Request,
        io: impl Fn(&Self, &Served, &Node, Option<&Placement>) -> Result<T, Errno>,
    ) -> Result<T, Errno> {
        let file_lock = self.file_lock(ino);
        // The answer of an access that had to wait: acted on after the wait.
        let mut waited: Option<(Placement, Served)> = None;
        let mut again = false;
        for attempt in 0.. {
            let guard = self.access_lock(ino, &file_lock);
            if let Some(tier) = self.fixed_tier(ino) {
                // Pinned, or unlinked while open: out of the policy, served where it is.
                let level = if tier == Tier::Fast { Level::Fast } else { Level::Slow };
                let node = self.node(ino)?;
                if tier == Tier::Fast && matches!(req.op, Op::Write | Op::Truncate) {
                    self.check_pin_growth(ino, req.offset.saturating_add(req.len))?;
                }
                // A cached file passed through to its SSD copy: writes keep both copies in step.
                let served = if self.mirrored(ino) && matches!(req.op, Op::Write | Op::Truncate) {
                    Served::written_to(tierwise_core::Levels::one(Level::Fast).with(Level::Slow))
                } else {
                    Served::by(level)
                };
                let r = io(self, &served, &node, None);
                self.note(ino, || {
                    format!("{:?} {}+{} outside the policy on {tier:?}: ok={}", req.op, req.offset, req.len, r.is_ok())
                });
                if r.is_ok() {
                    self.count_outside(tier, &req);
                }
                return r;
            }
            if let Some((before, served)) = waited.take() {
                let now = lock(&self.engine).placement(ObjectId(ino));
                if still_valid(&req, &served, &now) {
                    let node = self.node(ino)?;
                    let r = io(self, &served, &node, Some(&before));
                    drop(guard);
                    return r;
                }
                self.note(ino, || {
                    format!("{:?} {}+{}: the file changed while waiting; asked again", req.op, req.offset, req.len)
                });
                again = true;
            }
            let (before, served, issued) = {
                let mut e = lock(&self.engine);
                let before = e.placement(ObjectId(ino));
                // Told once: asked again after a wait, the access is not counted twice.
                let (served, queued) = e.access(&req, again);
                let issued: Vec<(ObjectId, WorkId)> =
                    if served.blocked { e.work.newest(queued).map(|w| (w.obj, w.id)).collect() } else { Vec::new() };
                if queued > 0 {
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
            waited = Some((before, served));
        }
        Err(Errno::EIO)
    }
}

/// Reads `size` bytes at `offset` of file `ino`.
pub(crate) fn read(s: &Shared, ino: u64, offset: u64, size: u32) -> Result<Vec<u8>, Errno> {
    let n = s.node(ino)?;
    let req = s.data_request(ino, &n, Op::Read, offset, u64::from(size));
    s.data_op(ino, req, |s, served, _, _| {
        let want = if served.level == Level::Fast { Tier::Fast } else { Tier::Slow };
        // A tier file already open is the file there now (moves and unlinks drop them): no
        // lookup on the common path.
        let (tier, f) = match s.open_fd(ino, want) {
            Some(f) => (want, f),
            None => {
                let copies = s.copies(ino);
                let tier = if copies.contains(&want) { want } else { *copies.first().ok_or_else(|| s.missing())? };
                (tier, s.fd(ino, tier, false)?)
            }
        };
        let data = tiers::read_at_file(&f, offset, size as usize).map_err(|e| {
            s.tier_errors.record(tier, IoOp::Read, &e);
            errno(&e)
        })?;
        if let Some(e) = &s.emulate[tier.index()] {
            e.delay(false, ino, offset, data.len() as u64);
        }
        Ok(data)
    })
}

/// Writes `data` at `offset` of file `ino`; `kill_setid`: the writer lacks CAP_FSETID.
pub(crate) fn write(s: &Shared, ino: u64, offset: u64, data: &[u8], kill_setid: bool) -> Result<u32, Errno> {
    if s.cfg.read_only {
        return Err(Errno::EROFS);
    }
    let n = s.node(ino)?;
    let req = s.data_request(ino, &n, Op::Write, offset, data.len() as u64);
    let r = s.data_op(ino, req, |s, served, _, before| {
        // A file outside the policy (no `before`) is written where it is, whatever the
        // engine may still remember of it (its record would have the write recreate it).
        let p = before.map_or_else(Placement::default, |_| lock(&s.engine).placement(ObjectId(ino)));
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
            targets = s.copies(ino);
        }
        if targets.is_empty() {
            return Err(Errno::ENOENT);
        }
        if before.is_some() && !targets.contains(&Tier::Fast) {
            s.drop_stale_ssd_copy(ino, &p)?;
        }
        // The SSD first (the engine's order, fastest first): the SSD copy is never older than
        // the HDD copy, which recovery after an unclean shutdown relies on.
        for t in &targets {
            let had = before.is_some_and(|b| if *t == Tier::Fast { b.on_fast } else { b.on_slow });
            if p.tracked && !had && !served.blocked {
                // A whole-file write the engine allocated on a tier that held no valid
                // copy: it replaces whatever stale file is there.
                s.drop_fds(ino);
                s.with_rel(ino, |rel| s.tiers.recreate(*t, rel))?;
            }
            let f = s.fd(ino, *t, true)?;
            calls::on_fd(Call::Write, &*f, || f.write_all_at(data, offset)).map_err(|e| {
                s.tier_errors.record(*t, IoOp::Write, &e);
                errno(&e)
            })?;
            if let Some(e) = &s.emulate[t.index()] {
                e.delay(true, ino, offset, data.len() as u64);
            }
        }
        s.kill_privs(ino, &targets, kill_setid).map_err(|e| errno(&e))?;
        Ok(data.len() as u32)
    });
    if r.is_ok() {
        s.sync_dirty_mark(ino);
    }
    r
}

/// Truncates file `ino` to `size`; `kill_setid`: the caller lacks CAP_FSETID.
pub(crate) fn truncate(s: &Shared, ino: u64, size: u64, kill_setid: bool) -> Result<(), Errno> {
    if s.cfg.read_only {
        return Err(Errno::EROFS);
    }
    let node = s.node(ino)?;
    let req = s.data_request(ino, &node, Op::Truncate, size, 0);
    s.data_op(ino, req, |s, _, _, before| {
        // Both copies of a cached file passed through (its SSD copy is read meanwhile, even
        // if the policy has since dropped it).
        let copies = if s.mirrored(ino) {
            Tier::ALL.into_iter().filter(|&t| s.at(ino, t).is_ok_and(|a| a.exists())).collect()
        } else {
            s.copies(ino)
        };
        if before.is_some() && !copies.contains(&Tier::Fast) {
            // Its own statement: the engine's lock is released before the call takes it.
            let p = lock(&s.engine).placement(ObjectId(ino));
            s.drop_stale_ssd_copy(ino, &p)?;
        }
        for &t in &copies {
            let f = s.at(ino, t)?.open(tiers::Access::ReadWrite).map_err(|e| errno(&e))?;
            calls::on_fd(Call::SetLen, &f, || f.set_len(size)).map_err(|e| {
                s.tier_errors.record(t, IoOp::Write, &e);
                errno(&e)
            })?;
        }
        s.kill_privs(ino, &copies, kill_setid).map_err(|e| errno(&e))
    })?;
    s.sync_dirty_mark(ino);
    Ok(())
}

impl Shared {
    /// Removes file `ino`'s SSD file before a write or truncation reaches its HDD copy alone,
    /// when the engine (`p`) no longer counts that file a valid copy: an eviction whose removal
    /// the mover has not run yet. Left in place, the HDD copy would hold newer bytes than a
    /// second copy that recovery after a crash takes for the newest whenever the two copies'
    /// times tie — and they do tie under the kernel's writeback cache, whose time updates
    /// reach every copy (found by `mount_crash`: a `kill -9` after such a write served the
    /// evicted content). Removed with its directory synced, so it stays gone. Looked for only
    /// while work on the file is queued (the removal is such work): a lookup of the SSD path
    /// on every HDD write cost 20-30 % of 4 KiB direct writes on tmpfs tiers.
    fn drop_stale_ssd_copy(&self, ino: u64, p: &Placement) -> Result<(), Errno> {
        if !p.tracked || p.on_fast || lock(&self.engine).work.on(ObjectId(ino)).is_empty() {
            return Ok(());
        }
        if self.mirrored(ino) || !self.at(ino, Tier::Fast).is_ok_and(|a| a.exists()) {
            return Ok(());
        }
        self.drop_fds(ino);
        self.with_rel(ino, |rel| {
            self.tiers.remove(Tier::Fast, rel).inspect_err(|e| self.tier_errors.record(Tier::Fast, IoOp::Write, e))
        })
    }
}

/// Makes file `ino`'s data (every copy) and its dirty mark durable.
pub(crate) fn fsync(s: &Shared, ino: u64) -> Result<(), Errno> {
    for t in s.copies(ino) {
        let f = s.fd(ino, t, false)?;
        calls::on_fd(Call::SyncFile, &*f, || f.sync_all()).map_err(|e| {
            s.tier_errors.record(t, IoOp::Sync, &e);
            errno(&e)
        })?;
        // An fsync ends with a cache flush: the emulated drive writes its cache back.
        if let Some(e) = &s.emulate[t.index()] {
            e.flush();
        }
    }
    // The file's dirty mark becomes durable with its data, and the renames that gave it its
    // name are done with.
    s.end_renames();
    s.store.sync().map_err(|_| Errno::EIO)
}

/// The kernel closed file `ino` (handle `fh`): descriptors go, and at the last close a file
/// unlinked while open goes too.
pub(crate) fn release(s: &Shared, ino: u64, fh: u64) {
    // Keeps descriptors bounded by the files the kernel has open (another handle of the same
    // file just reopens). No file lock: a close must not wait for a move of the file (a
    // rate-limited one can take minutes, and unmounting waits for every request); the
    // descriptor table has its own lock, operations hold their own handle, and the mover
    // drops a moving file's descriptors before it copies.
    if fh == crate::passthrough::PASSTHROUGH_FH {
        s.release_passthrough(ino);
    } else if fh == crate::page_cache::WRITER_FH {
        s.page_cache.release_writer(ino);
    }
    s.drop_fds(ino);
    let orphan = {
        // Under the open counts' lock, which `unlink_file_at` holds until its orphan is known,
        // and an open holds while it checks that the file still exists.
        let mut counts = lock(&s.open_counts);
        let n = counts.entry(ino).or_default();
        *n = n.saturating_sub(1);
        let last = *n == 0;
        if last {
            counts.remove(&ino);
            lock(&s.privs_clear).remove(&ino);
            s.bury_orphan(ino)
        } else {
            None
        }
    };
    if let Some((tier, hidden)) = orphan {
        // The last open of a file unlinked while open: now it goes.
        let _ = s.tiers.remove(tier, &hidden);
    }
}
