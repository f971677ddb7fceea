//! FUSE passthrough: the kernel does a file's reads and writes on its tier file directly.
//!
//! The kernel holds an inode open by passthrough to one backing file, and refuses (EIO) any
//! other open of it meanwhile that is not passthrough to that same registration. So the
//! choice is per file, not per open: while a file has a passthrough open, every further open
//! joins it, and a file with regular opens gets no passthrough until they are closed.

use std::collections::HashMap;
use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;

use tierwise_core::{ObjectId, Op, Tier, WorkId};

use crate::inodes::Node;
use crate::shared::{Shared, lock};
use crate::tiers::Access;

/// A file open by passthrough.
pub(crate) struct Backing {
    pub(crate) id: fuser::BackingId,
    pub(crate) opens: u32,
    pub(crate) tier: Tier,
    pub(crate) writable: bool,
    pub(crate) size_at_open: u64,
    /// A cached file, passed through read-only to its SSD copy: its HDD copy is as valid, so
    /// writes through regular handles meanwhile go to both (see [`Shared::mirrored`]).
    pub(crate) mirrored: bool,
    /// Device and inode of the tier file registered: an idle registration is reused only for
    /// the same file.
    pub(crate) file_id: (u64, u64),
    /// When the last open was released (idle since then).
    pub(crate) idle_since: Option<std::time::Instant>,
    /// A cached file's SSD copy written through a writable open that joined a read-only one:
    /// the HDD copy is brought in step at the last close.
    pub(crate) written: bool,
}

/// Joins this open to file `ino`'s passthrough open, if it has one (the kernel allows no other
/// kind of open meanwhile); a writable open of a cached file's SSD copy marks it written.
fn join_active(backing: &mut HashMap<u64, Backing>, ino: u64, writable: bool) -> bool {
    match backing.get_mut(&ino) {
        Some(e) if e.opens > 0 => {
            e.opens += 1;
            e.written |= writable && e.mirrored;
            true
        }
        _ => false,
    }
}

/// How long an idle registration may still be held by the kernel: it lets go when it reads
/// our reply to the release, which is written right after the release is handled.
const KERNEL_LETS_GO: std::time::Duration = std::time::Duration::from_millis(20);

/// Registrations kept after their last close (see [`Shared::release_passthrough`]) before
/// the idle ones are dropped.
const IDLE_KEPT: usize = 1024;

/// The file handle of a passthrough open (regular opens use 0).
pub(crate) const PASSTHROUGH_FH: u64 = 1;

impl Shared {
    /// Whether opens of `node` may use passthrough: the kernel granted it, it is a file, and
    /// its volume's policy keeps one copy.
    pub(crate) fn passthrough_for(&self, node: &Node) -> bool {
        if node.dir || !self.passthrough.load(std::sync::atomic::Ordering::Acquire) {
            return false;
        }
        let volume = usize::from(self.class(&node.rel, false).volume);
        self.passthrough_volumes.get(volume).copied().unwrap_or(false)
    }

    /// Registers file `ino` for a passthrough open when its placement is settled: the policy
    /// sees the open as a read of the whole file and its work on the file is finished first
    /// (placement is decided at open time). A file with one valid copy is then passed through
    /// to it; a cached file (two clean copies) read-only to its SSD copy, and a writable open
    /// of one uses regular I/O (the policy sees its writes and keeps the copies in step).
    /// While it is open this way it does not move, and every access to it (regular handles too)
    /// goes to that copy outside the policy, writes to both copies of a cached file; the policy
    /// hears of a size change at the last close.
    /// `Some(())`: registered (the caller replies with the backing id); `None`: use regular I/O.
    pub(crate) fn open_passthrough(
        &self,
        ino: u64,
        node: &Node,
        writable: bool,
        pinned: bool,
        register: impl FnOnce(&fs::File) -> io::Result<fuser::BackingId>,
    ) -> Option<()> {
        // Open by passthrough already: this open must join it, whatever it is.
        if join_active(&mut lock(&self.backing), ino, writable) {
            return Some(());
        }
        if writable && !pinned && self.copies(ino).len() > 1 {
            return None; // a cached file written: regular I/O, without a whole-file read told first
        }
        // A writable open under a read cache is not a read: told as one, it would copy the file
        // to the SSD and then have to use regular I/O to keep the two copies in step. It is
        // passed through to the file's one copy, and the policy hears of its size at close.
        let volume = usize::from(self.class(&node.rel, false).volume);
        let cache_write = writable && self.caching_volumes.get(volume).copied().unwrap_or(false);
        // A read-only mount moves nothing: its files are where they are (no policy to tell).
        if !pinned && !cache_write && !self.cfg.read_only && !self.passed_through(ino) {
            let size = self.attr(ino).map(|a| a.size).unwrap_or(0);
            if size > 0 {
                let req = self.data_request(ino, node, Op::Read, 0, size);
                let queued = {
                    let mut e = lock(&self.engine);
                    e.take_issued();
                    if e.work.busy(ObjectId(ino)) {
                        // Mid-move: regular I/O (told read by read) while the move runs.
                        return None;
                    }
                    let (_, queued) = e.access(&req, false);
                    let issued: Vec<(ObjectId, WorkId)> = e.work.newest(queued).map(|w| (w.obj, w.id)).collect();
                    self.work_cv.notify_all();
                    issued
                };
                if !queued.is_empty() {
                    if self.moves_are_slow() {
                        // Waiting for the move this open started could take long: regular I/O
                        // while it runs, as for any file mid-move.
                        return None;
                    }
                    self.wait_for(ino, &queued);
                }
            }
        }
        let file_lock = self.file_lock(ino);
        let _g = self.access_lock(ino, &file_lock);
        if lock(&self.orphans).contains_key(&ino) {
            return None;
        }
        let copies = self.copies(ino);
        let tier = *copies.first()?;
        let mirrored = copies.len() > 1;
        if mirrored && (writable || tier != Tier::Fast) {
            return None; // a cached file written: its copies stay in step through the policy
        }
        if crate::shared::read_lock(&self.pins).get(&ino) == Some(&Tier::Fast) {
            // Its growth is held to the pin reserve: regular I/O checks that (for every open,
            // as a later writable open could not leave passthrough).
            return None;
        }
        let at = self.at(ino, tier).ok()?;
        if writable && crate::privs::has_privs(&at) {
            // Its writes must clear set-id bits or capabilities: regular I/O does that.
            return None;
        }
        let file_id = at.metadata().map(|m| (m.dev(), m.ino())).ok()?;
        let mut b = lock(&self.backing);
        if join_active(&mut b, ino, writable) {
            return Some(()); // opened by passthrough since the check above
        }
        // Other opens of the file (regular ones, counted before they decide, under this lock
        // for the passthrough ones) keep the kernel's inode out of passthrough mode.
        if lock(&self.open_counts).get(&ino).copied().unwrap_or(0) > 1 {
            return None;
        }
        if let Some(e) = b.get_mut(&ino) {
            if e.tier == tier && e.file_id == file_id && e.writable && e.mirrored == mirrored {
                e.size_at_open = at.metadata().map_or(0, |m| m.len());
                e.idle_since = None;
                e.opens = 1;
                return Some(());
            }
            // Idle and for another file or mode: registered afresh below.
            b.remove(&ino);
        }
        if b.len() >= IDLE_KEPT {
            b.retain(|_, e| e.opens > 0);
        }
        // Read-write, so that later write opens can join it.
        let access = if self.cfg.read_only { Access::Read } else { Access::ReadWrite };
        let (file, backing_writable) = match at.open(access) {
            Ok(f) => (f, true),
            Err(_) if !writable => (at.open(Access::Read).ok()?, false),
            Err(_) => return None,
        };
        let size_at_open = file.metadata().map(|m| m.len()).unwrap_or(0);
        let id = register(&file).ok()?;
        b.insert(
            ino,
            Backing {
                id,
                opens: 1,
                tier,
                writable: backing_writable,
                size_at_open,
                mirrored,
                file_id,
                idle_since: None,
                written: false,
            },
        );
        Some(())
    }

    /// A passthrough open of `ino` is released; at the last one the file may move again, and
    /// the policy hears of a size change the kernel made meanwhile.
    pub(crate) fn release_passthrough(&self, ino: u64) {
        let ended = {
            // The registration stays, idle: the kernel lets go of it only once it has our
            // reply to this release, and an open registering another backing file for the
            // inode before that fails with EIO. The next open reuses it.
            let mut b = lock(&self.backing);
            let Some(e) = b.get_mut(&ino) else { return };
            e.opens = e.opens.saturating_sub(1);
            if e.opens > 0 {
                return;
            }
            e.idle_since = Some(std::time::Instant::now());
            (e.tier, e.size_at_open, e.mirrored, std::mem::take(&mut e.written))
        };
        let (tier, size_at_open, mirrored, written) = ended;
        if self.fixed_tier(ino).is_some() {
            return;
        }
        if mirrored {
            self.end_mirror(ino, written);
            if written {
                return; // the copies are in step again, as the policy believes them
            }
        }
        let Ok(node) = self.node(ino) else { return };
        let size = self.at(ino, tier).ok().and_then(|a| a.metadata().ok()).map_or(size_at_open, |m| m.len());
        let req = match size.cmp(&size_at_open) {
            std::cmp::Ordering::Greater => self.data_request(ino, &node, Op::Write, size_at_open, size - size_at_open),
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
}

impl Shared {
    /// Whether file `ino` is open by passthrough read-only to the SSD copy of a cached file:
    /// writes and truncates through regular handles then go to both copies.
    pub(crate) fn mirrored(&self, ino: u64) -> bool {
        lock(&self.backing).get(&ino).is_some_and(|b| b.mirrored && b.opens > 0)
    }

    /// Before file `ino`'s tier file is replaced or removed (the caller holds its lock
    /// exclusively, so no open reuses the registration meanwhile): its idle registration is
    /// dropped once the kernel has surely let go of it, so that the next open registers the
    /// new file without the kernel refusing it (EIO) for a conflicting backing file.
    pub(crate) fn retire_backing(&self, ino: u64) {
        self.wait_for_kernel_release(ino);
        let mut b = lock(&self.backing);
        if b.get(&ino).is_some_and(|e| e.opens == 0) {
            b.remove(&ino);
        }
    }

    /// Before a regular open of file `ino`: a passthrough registration released a moment ago
    /// may still be held by the kernel, which would refuse the open; wait until it surely is not.
    pub(crate) fn wait_for_kernel_release(&self, ino: u64) {
        let since = match lock(&self.backing).get(&ino) {
            Some(e) if e.opens == 0 => e.idle_since,
            _ => None,
        };
        if let Some(wait) = since.and_then(|t| KERNEL_LETS_GO.checked_sub(t.elapsed())) {
            std::thread::sleep(wait);
        }
    }

    /// Whether moves are held back (a rate limit, or emulated devices): an open then does not
    /// wait for the move it started.
    fn moves_are_slow(&self) -> bool {
        self.move_rate.load(std::sync::atomic::Ordering::Relaxed) > 0 || self.emulate.iter().any(Option::is_some)
    }

    /// Whether file `ino` is open by passthrough now (it then stays where it is).
    pub(crate) fn passed_through(&self, ino: u64) -> bool {
        lock(&self.backing).get(&ino).is_some_and(|b| b.opens > 0)
    }

    /// The last passthrough open of cached file `ino` ended. If it was `written` (its SSD
    /// copy), the HDD copy is brought in step with it (the move protocol's copy); if that fails,
    /// the SSD copy is the file, kept outside the policy until the next mount (which adopts it
    /// as the newer copy). An invalidation of the SSD copy the mover had to cancel meanwhile
    /// (the kernel was reading that copy) takes effect now.
    fn end_mirror(&self, ino: u64, written: bool) {
        let file_lock = self.file_lock(ino);
        let _g = crate::shared::write_lock(&file_lock);
        if self.passed_through(ino) || self.fixed_tier(ino).is_some() {
            return; // opened again meanwhile, or out of the policy now
        }
        if written {
            let synced =
                self.with_rel(ino, |rel| self.tiers.plan_copy(rel, Tier::Fast, ino)?.run(&mut |_, _, _| Ok(())));
            if let Err(e) = synced {
                crate::log::warn(format_args!(
                    "inode {ino}: bringing the HDD copy in step after a write by passthrough failed ({e:?}); the SSD copy stays, outside the policy"
                ));
                let class = self.node(ino).map(|n| self.class(&n.rel, false)).unwrap_or_default();
                self.tell(&tierwise_core::Request::op(tierwise_core::ObjectId(ino), Op::Delete).with_class(class));
                crate::shared::write_lock(&self.linked).insert(ino, Tier::Fast);
                return;
            }
            self.drop_fds(ino);
        }
        let p = lock(&self.engine).placement(tierwise_core::ObjectId(ino));
        if p.tracked && !p.on_fast && !p.moving {
            self.drop_fds(ino);
            let _ = self.with_rel(ino, |rel| self.tiers.remove(Tier::Fast, rel));
        }
    }
}
