//! FUSE passthrough: the kernel does a file's reads and writes on its tier file directly.

use std::fs;
use std::io;

use tierwise_core::{Op, Tier};

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
}

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
    /// (placement is decided at open time), then the file must have exactly one valid copy.
    /// While it is open this way it does not move, and every access to it (regular handles too)
    /// goes to that copy outside the policy; the policy hears of a size change at the last close.
    /// `Some(())`: registered (the caller replies with the backing id); `None`: use regular I/O.
    pub(crate) fn open_passthrough(
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
        let copies = self.copies(ino);
        let tier = *copies.first()?;
        if copies.len() != 1 {
            return None; // a cached file: its copies must stay in step, regular I/O does that
        }
        if writable && tier == Tier::Fast && crate::shared::read_lock(&self.pins).get(&ino) == Some(&Tier::Fast) {
            // Its growth is held to the pin reserve: regular I/O checks that.
            return None;
        }
        let at = self.at(ino, tier).ok()?;
        if writable && crate::privs::has_privs(&at) {
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
        let (file, backing_writable) = match at.open(Access::ReadWrite) {
            Ok(f) => (f, true),
            Err(_) if !writable => (at.open(Access::Read).ok()?, false),
            Err(_) => return None,
        };
        let size_at_open = file.metadata().map(|m| m.len()).unwrap_or(0);
        let id = register(&file).ok()?;
        b.insert(ino, Backing { id, opens: 1, tier, writable: backing_writable, size_at_open });
        Some(())
    }

    /// A passthrough open of `ino` is released; at the last one the file may move again, and
    /// the policy hears of a size change the kernel made meanwhile.
    pub(crate) fn release_passthrough(&self, ino: u64) {
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
        let size = self.at(ino, e.tier).ok().and_then(|a| a.metadata().ok()).map_or(e.size_at_open, |m| m.len());
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
}
