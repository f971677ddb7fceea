//! Rename: a file or a whole directory, on both tiers, with the engine told of every file
//! whose path (and so maybe volume) changed.

use std::ffi::OsStr;

use fuser::Errno;
use tierwise_core::{ObjectId, Op, Request, Tier};

use crate::shared::{Shared, errno, lock, read_lock, write_lock};
use crate::tiers::{self, Tiers};

/// Renames `name` in `parent` to `newname` in `newparent` (replacing a file, or an empty
/// directory, there).
pub(crate) fn rename(s: &Shared, parent: u64, name: &OsStr, newparent: u64, newname: &OsStr) -> Result<(), Errno> {
    tiers::check_name(newname).map_err(Errno::from_i32)?;
    s.both_tiers()?;
    s.reap_replaced();
    for _ in 0..8 {
        let (ino, from) = s.lookup_child(parent, name)?;
        let target = {
            let _ns = read_lock(&s.ns);
            let to = s.node(newparent)?.rel.join(newname);
            lock(&s.inodes).by_path.get(&to).copied()
        };
        // File locks first (the mover may hold one for a whole move), then the namespace lock
        // exclusively: no path is resolved on the tiers while paths change.
        let lock_a = s.file_lock(ino);
        let _ga = write_lock(&lock_a);
        let lock_b = target.filter(|&t| t != ino).map(|t| s.file_lock(t));
        let _gb = lock_b.as_ref().map(|l| write_lock(l));
        let _ns = write_lock(&s.ns);
        // Paths as they are now: a rename of a parent directory may have run meanwhile.
        let from_now = s.node(parent)?.rel.join(name);
        let to = s.node(newparent)?.rel.join(newname);
        {
            let inodes = lock(&s.inodes);
            if inodes.by_path.get(&from_now) != Some(&ino) || inodes.by_path.get(&to).copied() != target {
                continue; // look again
            }
        }
        let _ = from;
        return s.rename_locked(ino, &from_now, &to, target);
    }
    Err(Errno::EAGAIN)
}

impl Shared {
    /// Renames file or directory `ino` from `from` to `to`, replacing `target` (its inode, when
    /// known). The caller holds both file locks and the namespace lock exclusively.
    fn rename_locked(
        &self,
        ino: u64,
        from: &std::path::Path,
        to: &std::path::Path,
        target: Option<u64>,
    ) -> Result<(), Errno> {
        if from == to || target == Some(ino) {
            // Two names of one file: rename does nothing (POSIX).
            return Ok(());
        }
        if to.starts_with(from) {
            return Err(Errno::EINVAL);
        }
        let src_dir = [Tier::Slow, Tier::Fast]
            .into_iter()
            .find_map(|t| self.tiers.metadata(t, from).ok())
            .map(|m| m.is_dir())
            .ok_or_else(|| self.missing())?;
        let target_dir = Tier::ALL.into_iter().any(|t| self.tiers.is_dir(t, to));
        if target_dir && !src_dir {
            return Err(Errno::EISDIR);
        }
        if src_dir && !target_dir && Tier::ALL.into_iter().any(|t| self.tiers.exists(t, to)) {
            return Err(Errno::ENOTDIR);
        }
        if target_dir && self.dir_has_entries(to) {
            return Err(Errno::ENOTEMPTY);
        }
        // A replaced name of a hard-linked file: only that name goes (below).
        let target_linked =
            target.filter(|t| read_lock(&self.linked).contains_key(t) && lock(&self.inodes).names_of(*t).len() > 1);
        let plan = self.tiers.plan_rename(from, to).map_err(|e| errno(&e))?;
        // More than one name changes on the tiers, or the store keeps marks by path: journalled
        // first, with the marks moved in the same commit, so a crash in between is finished by
        // the next mount rather than leaving a mix (the replaced file gone, the source under its
        // old name).
        let marks = !lock(&self.dirty_marked).is_empty() || !read_lock(&self.pins).is_empty();
        let journal = if Tiers::rename_calls(&plan) > 1 || marks {
            Some(self.store.begin_rename(&plan).map_err(|_| Errno::EIO)?)
        } else {
            None
        };
        if let Some(t) = target
            && !target_dir
            && target_linked.is_none()
        {
            // The replaced file lives on under a hidden name while it is open, and for a
            // moment anyway: an open may have looked the name up just before this.
            self.forget_replaced(t, to)?;
        }
        let changed = self.tiers.finish_rename(&plan).map_err(|e| errno(&e))?;
        if let Some(id) = journal {
            // Ended once the directories it changed are synced (by the mover, soon).
            lock(&self.pending_renames).push((id, changed));
        }
        let (moved, target_left) = {
            let mut inodes = lock(&self.inodes);
            let left = if target != Some(ino) { inodes.forget_path(to).map_or(0, |(_, n)| n) } else { 0 };
            (inodes.rename(from, to), left)
        };
        if let Some(t) = target_linked
            && target_left == 1
        {
            // Bound first: the guard must be gone before `unlinked_to_one_name` writes the map.
            let tier = read_lock(&self.linked).get(&t).copied();
            if let Some(tier) = tier {
                self.unlinked_to_one_name(t, tier);
            }
        }
        for (i, rel) in moved {
            if read_lock(&self.pins).contains_key(&i) || read_lock(&self.linked).contains_key(&i) {
                continue; // outside the policy
            }
            let dir = self.node(i).map(|n| n.dir).unwrap_or(false);
            self.tell(&Request::op(ObjectId(i), Op::Rename).with_class(self.class(&rel, dir)));
        }
        Ok(())
    }
}

impl Shared {
    /// Ends the journalled renames done so far: the directories they changed are synced first,
    /// so that no power cut can keep an end and lose a change (a record kept longer is only
    /// found finished by the next mount). Called by the mover between works, by fsync and
    /// fsyncdir, and at unmount.
    pub(crate) fn end_renames(&self) {
        let pending = std::mem::take(&mut *lock(&self.pending_renames));
        if pending.is_empty() {
            return;
        }
        let mut synced: Vec<&std::sync::Arc<std::fs::File>> = Vec::new();
        let mut ids = Vec::with_capacity(pending.len());
        for (id, dirs) in &pending {
            let mut ok = true;
            for d in dirs {
                if synced.iter().any(|s| std::sync::Arc::ptr_eq(s, d)) {
                    continue;
                }
                ok &= tiers::at::sync_dir_handle(d).is_ok();
                synced.push(d);
            }
            // A directory that cannot be synced keeps its record: the next mount finds it.
            if ok {
                ids.push(*id);
            }
        }
        if let Err(e) = self.store.end_renames(&ids) {
            crate::log::warn(format_args!("ending journalled renames: {e}"));
        }
    }
}
