//! The namespace: lookup, mkdir, symlink, readlink, unlink, rmdir, create. Every tier
//! operation goes through [`crate::tiers::At`] (no symlink followed), with the path resolved
//! under the namespace lock.

use std::ffi::{OsStr, OsString};
use std::path::Path;
use std::time::{Duration, Instant};

use fuser::{Errno, FileAttr};
use tierwise_core::{ObjectId, Op, Request, Tier};

use crate::shared::{Shared, errno, lock, read_lock, write_lock};
use crate::tiers::{self, At, RESERVED_PREFIX};

/// Who asks: the user and group a new file or directory belongs to.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Caller {
    pub(crate) uid: u32,
    pub(crate) gid: u32,
}

/// Attributes of `name` in directory `parent`.
pub(crate) fn lookup(s: &Shared, parent: u64, name: &OsStr) -> Result<FileAttr, Errno> {
    s.lookup_attr(parent, name)
}

/// Whether `rel` exists on either tier; the caller holds the namespace lock.
fn taken(s: &Shared, rel: &Path) -> bool {
    Tier::ALL.into_iter().any(|t| s.tiers.exists(t, rel))
}

/// Makes directory `name` in `parent` on both tiers, so either can hold the files inside.
pub(crate) fn mkdir(s: &Shared, parent: u64, name: &OsStr, mode: u32, who: Caller) -> Result<FileAttr, Errno> {
    tiers::check_name(name).map_err(Errno::from_i32)?;
    s.both_tiers()?;
    let ino = {
        let _ns = read_lock(&s.ns);
        let rel = s.node(parent)?.rel.join(name);
        if taken(s, &rel) {
            return Err(Errno::EEXIST);
        }
        let mut made: Vec<At> = Vec::new();
        for t in [Tier::Slow, Tier::Fast] {
            let r = s.tiers.at_creating(t, &rel).and_then(|at| {
                at.make_dir(mode, Some((who.uid, who.gid)))?;
                Ok(at)
            });
            match r {
                Ok(at) => made.push(at),
                Err(e) => {
                    // Not on both tiers: take back the half made.
                    for at in made {
                        let _ = at.rmdir();
                    }
                    return Err(errno(&e));
                }
            }
        }
        lock(&s.inodes).ino_of(&rel, true)
    };
    s.attr(ino)
}

/// Makes symlink `name` in `parent` to `target`. Symlinks are not placed: they live on the
/// HDD tier. The target is stored as given and resolved by the kernel, never by tierwise.
pub(crate) fn symlink(s: &Shared, parent: u64, name: &OsStr, target: &Path, who: Caller) -> Result<FileAttr, Errno> {
    tiers::check_name(name).map_err(Errno::from_i32)?;
    s.both_tiers()?;
    let ino = {
        let _ns = read_lock(&s.ns);
        let rel = s.node(parent)?.rel.join(name);
        if taken(s, &rel) {
            return Err(Errno::EEXIST);
        }
        let at = s.tiers.at_creating(Tier::Slow, &rel).map_err(|e| errno(&e))?;
        at.symlink(target).map_err(|e| errno(&e))?;
        let _ = at.chown(Some(who.uid), Some(who.gid));
        lock(&s.inodes).ino_of(&rel, false)
    };
    s.attr(ino)
}

/// The target of symlink `ino`.
pub(crate) fn readlink(s: &Shared, ino: u64) -> Result<Vec<u8>, Errno> {
    Tier::ALL
        .into_iter()
        .find_map(|t| s.at(ino, t).ok().and_then(|a| a.readlink().ok()))
        .map(|p| p.into_os_string().into_encoded_bytes())
        .ok_or(Errno::ENOENT)
}

/// Removes `name` (a file or symlink) from `parent`.
pub(crate) fn unlink(s: &Shared, parent: u64, name: &OsStr) -> Result<(), Errno> {
    s.both_tiers()?;
    for _ in 0..8 {
        let (ino, _) = s.lookup_child(parent, name)?;
        let file_lock = s.file_lock(ino);
        let _g = write_lock(&file_lock);
        let _ns = read_lock(&s.ns);
        let rel = s.node(parent)?.rel.join(name);
        if lock(&s.inodes).by_path.get(&rel) != Some(&ino) {
            continue; // renamed or replaced meanwhile: look again
        }
        return s.unlink_file_at(ino, &rel);
    }
    Err(Errno::EAGAIN)
}

/// Makes `newname` in `newparent` another name of file `ino` (a hard link). The file keeps one
/// copy, on the tier of its newest, outside the policy: moving it would copy one name and leave
/// the others on the old file. When it is down to one name again it goes back to the policy.
pub(crate) fn link(s: &Shared, ino: u64, newparent: u64, newname: &OsStr) -> Result<FileAttr, Errno> {
    tiers::check_name(newname).map_err(Errno::from_i32)?;
    s.both_tiers()?;
    let node = s.node(ino)?;
    if node.dir || ino == crate::inodes::ROOT {
        return Err(Errno::EPERM);
    }
    if lock(&s.orphans).contains_key(&ino) {
        return Err(Errno::ENOENT); // unlinked while open: no name to link to
    }
    // Work in flight on the file finishes first; then nothing moves it.
    s.wait_for(ino, &[]);
    let file_lock = s.file_lock(ino);
    let guard = write_lock(&file_lock);
    let linked = read_lock(&s.linked).get(&ino).copied();
    let tier = match linked {
        Some(t) => t,
        None => s.single_copy(ino)?,
    };
    {
        let _ns = read_lock(&s.ns);
        let rel = s.node(ino)?.rel;
        let new_rel = s.node(newparent)?.rel.join(newname);
        if taken(s, &new_rel) {
            return Err(Errno::EEXIST);
        }
        let src = s.tiers.at(tier, &rel).map_err(|e| errno(&e))?;
        let dst = s.tiers.at_creating(tier, &new_rel).map_err(|e| errno(&e))?;
        src.link_to(&dst).map_err(|e| errno(&e))?;
        dst.sync_dir().map_err(|e| errno(&e))?;
        lock(&s.inodes).add_name(ino, &new_rel);
    }
    write_lock(&s.linked).insert(ino, tier);
    s.note(ino, || format!("hard-linked on {tier:?}: out of the policy"));
    let a = s.attr_locked(ino);
    drop(guard);
    a
}

/// Removes the empty directory `name` from `parent`, on both tiers.
pub(crate) fn rmdir(s: &Shared, parent: u64, name: &OsStr) -> Result<(), Errno> {
    s.both_tiers()?;
    s.lookup_child(parent, name)?;
    let _ns = write_lock(&s.ns);
    let rel = s.node(parent)?.rel.join(name);
    // Not empty on either tier: refuse before touching anything.
    if s.dir_has_entries(&rel) {
        return Err(Errno::ENOTEMPTY);
    }
    s.remove_everywhere_at(&rel, true)
}

/// Creates file `name` in `parent` where the engine places it, returning its attributes.
pub(crate) fn create(s: &Shared, parent: u64, name: &OsStr, mode: u32, who: Caller) -> Result<FileAttr, Errno> {
    tiers::check_name(name).map_err(Errno::from_i32)?;
    s.both_tiers()?;
    for _ in 0..8 {
        let ns = read_lock(&s.ns);
        let rel = s.node(parent)?.rel.join(name);
        if taken(s, &rel) {
            return Err(Errno::EEXIST);
        }
        let ino = lock(&s.inodes).ino_of(&rel, false);
        let file_lock = s.file_lock(ino);
        // The file's lock before its work can start; never waited for under the namespace
        // lock (see the lock order in `shared`).
        let guard = match file_lock.try_write() {
            Ok(g) => g,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => {
                drop(ns);
                drop(write_lock(&file_lock));
                continue;
            }
        };
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
            let at = s.tiers.at_creating(t, &rel).map_err(|e| errno(&e))?;
            at.create_file(mode, Some((who.uid, who.gid))).map_err(|e| errno(&e))?;
        }
        drop(ns);
        let a = s.attr_locked(ino);
        drop(guard);
        return a;
    }
    Err(Errno::EAGAIN)
}

/// How long a file replaced by a rename is kept for an open that looked its name up before.
pub(crate) const REPLACED_GRACE: Duration = Duration::from_millis(100);

impl Shared {
    /// Unlinks file `ino` at `rel` (its lock held exclusively, the namespace lock held): removed
    /// from both tiers, or, while the kernel has it open, its one valid copy renamed to a hidden
    /// name in the tier's root and removed at the last release (POSIX: an open file outlives
    /// its name).
    pub(crate) fn unlink_file_at(&self, ino: u64, rel: &Path) -> Result<(), Errno> {
        let linked = read_lock(&self.linked).get(&ino).copied();
        if let Some(tier) = linked {
            if lock(&self.inodes).names_of(ino).len() > 1 {
                // One name of several: only it goes; the file lives on under the others.
                let at = self.tiers.at(tier, rel).map_err(|e| errno(&e))?;
                at.unlink().map_err(|e| errno(&e))?;
                at.sync_dir().map_err(|e| errno(&e))?;
                let left = lock(&self.inodes).forget_path(rel).map_or(0, |(_, n)| n);
                if left == 1 {
                    self.unlinked_to_one_name(ino, tier);
                }
                return Ok(());
            }
            // Its last name: an ordinary unlink.
            write_lock(&self.linked).remove(&ino);
        }
        let auth = self.copies_at(ino, rel).first().copied();
        // Two copies that differ: the SSD's is the file (write-back dirty).
        let differ = lock(&self.engine).placement(ObjectId(ino)).dirty;
        if self.leave_policy(ino, rel)? {
            self.store.forget(rel).map_err(|_| Errno::EIO)?;
        }
        // Held until the file is an orphan: a last release (which takes no file lock) then
        // either came before, and the file goes now, or comes after and finds the orphan.
        let counts = lock(&self.open_counts);
        let open = counts.get(&ino).is_some_and(|&n| n > 0);
        let Some(auth) = auth.filter(|_| open) else {
            // Removed and forgotten with the counts' lock still held: a racing open either
            // counted itself first (and the file is hidden instead) or finds no file. Before,
            // an open could count itself in between and succeed on a file about to go, whose
            // reads then failed with ENOENT.
            let removed = self.remove_file_copies(rel, auth, differ);
            drop(counts);
            return removed;
        };
        let hidden = OsString::from(format!("{RESERVED_PREFIX}unlinked-{ino}"));
        let src = self.tiers.at(auth, rel).map_err(|e| errno(&e))?;
        let dst = At::new(self.tiers.root_dir(auth).map_err(|e| errno(&e))?, &hidden).map_err(|e| errno(&e))?;
        src.rename_to(&dst).map_err(|e| errno(&e))?;
        self.tiers.remove(auth.other(), rel).map_err(|e| errno(&e))?;
        lock(&self.inodes).relocate(ino, Path::new(&hidden));
        lock(&self.orphans).insert(ino, auth);
        drop(counts);
        Ok(())
    }

    /// File `ino` at `rel` is leaving the namespace (unlinked, or replaced by a rename): out of
    /// the policy and the in-memory marks, its descriptors closed. Returns whether it was
    /// pinned (its store marks are the caller's to forget).
    fn leave_policy(&self, ino: u64, rel: &Path) -> Result<bool, Errno> {
        let pinned = write_lock(&self.pins).remove(&ino).is_some();
        if !pinned {
            self.tell(&Request::op(ObjectId(ino), Op::Delete).with_class(self.class(rel, false)));
        }
        let dirty = lock(&self.dirty_marked).remove(&ino);
        self.drop_fds(ino);
        Ok(pinned || dirty)
    }

    /// File `ino` at `rel` is being replaced by a rename (its lock held exclusively, the
    /// namespace lock held; the rename journalled when it changes more than one name). It
    /// leaves the policy, and its newest copy gets a second, hidden name in its tier's root, so
    /// that an open that looked `rel` up just before the rename (on a local file system that
    /// open gets the replaced file) and the opens the kernel has find it; that name goes after
    /// [`REPLACED_GRACE`] and the last release. Its copies at `rel` are left for the rename to
    /// replace or remove: before, the file was renamed away first, and a crash before the
    /// rename lost both files (the target name was empty, the new file under its temporary
    /// name). Its store marks go with the rename's journal record.
    pub(crate) fn forget_replaced(&self, ino: u64, rel: &Path) -> Result<(), Errno> {
        write_lock(&self.linked).remove(&ino);
        let auth = self.copies_at(ino, rel).first().copied();
        self.leave_policy(ino, rel)?;
        let counts = lock(&self.open_counts);
        let Some(auth) = auth else {
            lock(&self.inodes).forget_path(rel);
            return Ok(());
        };
        let hidden = OsString::from(format!("{RESERVED_PREFIX}unlinked-{ino}"));
        let src = self.tiers.at(auth, rel).map_err(|e| errno(&e))?;
        let dst = At::new(self.tiers.root_dir(auth).map_err(|e| errno(&e))?, &hidden).map_err(|e| errno(&e))?;
        src.link_to(&dst).map_err(|e| errno(&e))?;
        lock(&self.inodes).relocate(ino, Path::new(&hidden));
        lock(&self.orphans).insert(ino, auth);
        // Kept past its last release too, until the grace is over (`reap_replaced`).
        lock(&self.replaced).push((ino, Instant::now() + REPLACED_GRACE));
        drop(counts);
        Ok(())
    }

    /// Removes the replaced files kept for late opens whose time is up and that no one has open
    /// (an open one goes at its last release). Called with no lock held: by the mover every
    /// 100 ms, and by each rename (which adds them: a burst of renames during a long move
    /// cannot pile them up).
    pub(crate) fn reap_replaced(&self) {
        let due: Vec<u64> = {
            let mut kept = lock(&self.replaced);
            if kept.is_empty() {
                return;
            }
            let now = Instant::now();
            let (due, later): (Vec<_>, Vec<_>) = kept.drain(..).partition(|&(_, at)| at <= now);
            *kept = later;
            due.into_iter().map(|(ino, _)| ino).collect()
        };
        for ino in due {
            let buried = {
                let counts = lock(&self.open_counts);
                if counts.get(&ino).is_some_and(|&n| n > 0) {
                    continue; // opened meanwhile: its last release removes it
                }
                self.bury_orphan(ino)
            };
            if let Some((tier, hidden)) = buried {
                let _ = self.tiers.remove(tier, &hidden);
            }
        }
    }

    /// Forgets orphan `ino` (no longer open, and not kept for late opens): returns the tier and
    /// hidden name of its file, for the caller to remove. Called with the open counts' lock
    /// held, under which an open checks that its file exists: no open can take a buried file.
    pub(crate) fn bury_orphan(&self, ino: u64) -> Option<(Tier, std::path::PathBuf)> {
        let tier = {
            // Most last releases are of files with a name: one map lookup for them.
            let mut orphans = lock(&self.orphans);
            if !orphans.contains_key(&ino) || lock(&self.replaced).iter().any(|&(i, _)| i == ino) {
                return None;
            }
            orphans.remove(&ino)?
        };
        let mut inodes = lock(&self.inodes);
        let hidden = inodes.get(ino).map(|n| n.rel.to_path_buf());
        inodes.forget(ino);
        hidden.map(|h| (tier, h))
    }

    /// Takes file `ino` out of the policy with one copy, on the tier of its newest copy (or of
    /// its pin), before it gets a second name; returns that tier. The caller holds its lock.
    pub(crate) fn single_copy(&self, ino: u64) -> Result<Tier, Errno> {
        let pinned = read_lock(&self.pins).get(&ino).copied();
        let tier = pinned.or_else(|| self.copies(ino).first().copied()).ok_or(Errno::ENOENT)?;
        // Every other copy goes (a clean cached copy, or the stale HDD copy of a dirty file).
        self.drop_fds(ino);
        self.with_rel(ino, |rel| self.tiers.remove(tier.other(), rel))?;
        if pinned.is_none() {
            let class = self.class(&self.node(ino)?.rel, false);
            self.tell(&Request::op(ObjectId(ino), Op::Delete).with_class(class));
        }
        if lock(&self.dirty_marked).remove(&ino) {
            let _ = self.with_rel(ino, |rel| self.store.set_dirty(rel, false).map_err(std::io::Error::other));
        }
        Ok(tier)
    }

    /// File `ino`, hard-linked on `tier`, has one name left: it goes back to the policy (unless
    /// pinned). The caller holds its lock and the namespace lock.
    pub(crate) fn unlinked_to_one_name(&self, ino: u64, tier: Tier) {
        write_lock(&self.linked).remove(&ino);
        self.note(ino, || "one name left: back to the policy".to_string());
        if read_lock(&self.pins).contains_key(&ino) {
            return;
        }
        let Ok(node) = self.node(ino) else { return };
        let Ok(m) = self.tiers.metadata(tier, &node.rel) else { return };
        let mut copies = [None, None];
        copies[tier.index()] = Some((m.len(), tiers::mtime(&m)));
        if let Err(e) = self.adopt_file(ino, &node.rel, &copies, false) {
            // The policy wanted it on the other tier and the move failed: the engine must not
            // believe it there. It stays where it is, outside the policy, until the next mount.
            crate::log::warn(format_args!(
                "{} stays outside the policy on the {tier:?} tier: moving it failed: {e}",
                node.rel.display()
            ));
            let class = self.class(&node.rel, false);
            self.tell(&Request::op(ObjectId(ino), Op::Delete).with_class(class));
            write_lock(&self.linked).insert(ino, tier);
        }
    }

    /// Removes file `rel` from both tiers, the copy that is the file (`auth`) last, and the
    /// other one's removal synced first when the two `differ`: a crash in between then leaves
    /// the file as it was, never its stale copy (a write-back file's older HDD copy came back after
    /// a kill between the two removals, found by the crash enumeration).
    fn remove_file_copies(&self, rel: &Path, auth: Option<Tier>, differ: bool) -> Result<(), Errno> {
        let Some(auth) = auth else { return self.remove_everywhere_at(rel, false) };
        let mut found = false;
        for t in [auth.other(), auth] {
            let at = match self.tiers.at(t, rel) {
                Ok(at) => at,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(errno(&e)),
            };
            match at.unlink() {
                Ok(()) => {
                    found = true;
                    if t != auth && differ {
                        at.sync_dir().map_err(|e| errno(&e))?;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(errno(&e)),
            }
        }
        lock(&self.inodes).forget_path(rel);
        if found { Ok(()) } else { Err(Errno::ENOENT) }
    }

    /// Removes `rel` (a directory when `dir`) from both tiers and forgets its path; ENOENT
    /// when neither tier had it. The caller holds the namespace lock.
    pub(crate) fn remove_everywhere_at(&self, rel: &Path, dir: bool) -> Result<(), Errno> {
        let mut found = false;
        for t in Tier::ALL {
            let at = match self.tiers.at(t, rel) {
                Ok(at) => at,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(errno(&e)),
            };
            let r = if dir {
                // Leftover temporaries inside go first (a directory is empty of user names).
                if let Ok(d) = at.open_dir() {
                    for (name, _) in tiers::at::list_dir(&d).unwrap_or_default() {
                        if tiers::is_reserved(&name)
                            && let Ok(child) = At::new(d.try_clone().map_err(|e| errno(&e))?, &name)
                        {
                            let _ = child.unlink();
                        }
                    }
                }
                at.rmdir()
            } else {
                at.unlink()
            };
            match r {
                Ok(()) => found = true,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(errno(&e)),
            }
        }
        lock(&self.inodes).forget_path(rel);
        if found { Ok(()) } else { Err(Errno::ENOENT) }
    }
}
