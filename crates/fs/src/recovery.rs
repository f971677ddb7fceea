//! Starting over existing trees: the state store opened (or set aside when corrupt), moves a
//! crash interrupted finished or rolled back, every file adopted where it is.

use std::collections::{HashMap, HashSet};
use std::io;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use tierwise_core::{Level, ObjectId, Tier, WorkKind};

use crate::shared::{Shared, lock, write_lock};
use crate::state::{self, StateStore};
use crate::tiers;
use crate::{MountError, log};

/// Opens the state store. A store another process holds (a second mount of the same tiers)
/// is refused; a corrupt one is kept aside under a new name (never over an earlier one) and a
/// new one started: placement is then rebuilt from the trees, as after losing the store.
pub(crate) fn open_store(dir: &Path, read_only: bool) -> Result<StateStore, MountError> {
    let path = dir.join(state::STATE_FILE);
    if read_only {
        // Read, never written; without one (or unreadable), placement comes from the trees.
        return match StateStore::open_read_only(dir) {
            Ok(Some(s)) => Ok(s),
            Ok(None) => Ok(StateStore::in_memory()?),
            Err(e) if e.is_locked() => Err(MountError::StoreInUse(path)),
            Err(e) => {
                log::warn(format_args!(
                    "the state store {} could not be read ({e}); placement comes from the trees",
                    path.display()
                ));
                Ok(StateStore::in_memory()?)
            }
        };
    }
    match StateStore::open(dir) {
        Ok((s, _)) => Ok(s),
        Err(e) if e.is_locked() => Err(MountError::StoreInUse(path)),
        Err(e) => {
            if !path.exists() {
                return Err(e.into());
            }
            let aside = set_aside(&path)?;
            log::warn(format_args!(
                "the state store {} could not be read ({e}); kept it as {} and rebuilding placement from the trees",
                path.display(),
                aside.display()
            ));
            Ok(StateStore::open(dir)?.0)
        }
    }
}

/// Renames a corrupt store to `state.redb.unreadable-SECONDS[-N]`, a name no earlier copy has.
fn set_aside(path: &Path) -> io::Result<PathBuf> {
    let stamp = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let dir = path.parent().unwrap_or(Path::new("."));
    let file = path.file_name().unwrap_or_default().to_string_lossy().into_owned();
    for n in 0..1000u32 {
        let name = if n == 0 { format!("{file}.unreadable-{stamp}") } else { format!("{file}.unreadable-{stamp}-{n}") };
        let aside = dir.join(&name);
        // RENAME_NOREPLACE: an earlier copy of that name is never overwritten.
        match nix::fcntl::renameat2(
            nix::fcntl::AT_FDCWD,
            path,
            nix::fcntl::AT_FDCWD,
            &aside,
            nix::fcntl::RenameFlags::RENAME_NOREPLACE,
        ) {
            Ok(()) => return Ok(aside),
            Err(nix::errno::Errno::EEXIST) => continue,
            Err(e) => return Err(io::Error::from_raw_os_error(e as i32)),
        }
    }
    Err(io::Error::other("too many unreadable copies of the state store kept aside"))
}

impl Shared {
    /// Finishes or rolls back the moves the journal says were interrupted. A move's copy is
    /// complete exactly when the destination has the size and modification time the source had
    /// when it started (the copy carries the time over; the temporary files of unfinished
    /// copies are deleted by the scan). A read-only mount changes nothing: it returns the files
    /// whose destination is the file (served from there), and the files a write-back left clean.
    pub(crate) fn recover_moves(&self) -> Result<(HashMap<PathBuf, Tier>, HashSet<PathBuf>), MountError> {
        let mut switched = HashMap::new();
        let mut clean = HashSet::new();
        for rec in self.store.unfinished_moves()? {
            let matches = |t: Tier| {
                self.tiers.metadata(t, &rec.rel).is_ok_and(|m| {
                    m.is_file() && m.len() == rec.size && state::epoch_ns(tiers::mtime(&m)) == rec.mtime_ns
                })
            };
            let (src, dst) = (rec.from, rec.from.other());
            match rec.kind {
                // The switch happened: the destination is the file; finish by removing the source.
                WorkKind::Promote | WorkKind::Demote if matches(dst) && self.tiers.exists(src, &rec.rel) => {
                    if self.cfg.read_only {
                        switched.insert(rec.rel.clone(), dst);
                    } else {
                        self.tiers.remove(src, &rec.rel)?;
                    }
                }
                // A write-back that finished, of data not written since: the file is clean.
                WorkKind::Writeback if matches(dst) && matches(src) => {
                    self.store.set_dirty(&rec.rel, false)?;
                    clean.insert(rec.rel.clone());
                }
                // Otherwise the source is the file, untouched; a finished copy is identical.
                _ => {}
            }
        }
        if !self.cfg.read_only {
            self.store.clear_journal()?;
        }
        Ok((switched, clean))
    }

    /// Finishes the renames the journal says a crash interrupted, oldest first, on every tier
    /// where they had not happened yet (see `tiers::rename`), syncs what changed, and empties
    /// the rename journal. A read-only mount changes nothing and serves the trees as they are
    /// (it warns when a rename is pending: the next read-write mount finishes it).
    pub(crate) fn recover_renames(&self) -> Result<(), MountError> {
        let pending = self.store.unfinished_renames()?;
        if pending.is_empty() {
            return Ok(());
        }
        if self.cfg.read_only {
            log::warn(format_args!(
                "{} rename(s) were interrupted by a crash; a read-only mount shows them unfinished, the next read-write mount finishes them",
                pending.len()
            ));
            return Ok(());
        }
        let mut changed = Vec::new();
        for rec in &pending {
            changed.extend(self.tiers.finish_rename(rec)?);
        }
        for d in &changed {
            tiers::at::sync_dir_handle(d)?;
        }
        self.store.clear_renames()?;
        Ok(())
    }

    /// Writes every file the store records dirty back to the HDD (its SSD copy is the file):
    /// before a mount under another policy adopts the trees, so that no policy that keeps no
    /// dirty data inherits some. The copy goes through the move protocol; the HDD copy then has
    /// the SSD copy's bytes and time, and adoption finds two identical copies.
    pub(crate) fn write_back_dirty(&self) -> Result<(), MountError> {
        self.recover_renames()?;
        let dirty = self.store.dirty()?;
        for (i, rel) in dirty.iter().enumerate() {
            if !self.tiers.exists(Tier::Fast, rel) {
                continue;
            }
            self.tiers.plan_copy(rel, Tier::Fast, u64::MAX - i as u64)?.run(&mut |_, _, _| Ok(()))?;
            self.store.set_dirty(rel, false)?;
        }
        self.store.sync()?;
        if !dirty.is_empty() {
            log::info(format_args!("policy changed: {} dirty file(s) written back to the HDD first", dirty.len()));
        }
        Ok(())
    }

    /// Adopts every file already in the trees: pinned files go to their tier, the others are
    /// told to the engine. The store's dirty set is then rewritten to what the engine holds dirty.
    pub(crate) fn adopt(&self) -> Result<(), MountError> {
        self.recover_renames()?;
        let (switched, clean) = self.recover_moves()?;
        let pins: HashMap<PathBuf, Tier> = self.store.pins()?.into_iter().collect();
        let mut dirty: HashSet<PathBuf> = self.store.dirty()?.into_iter().collect();
        if self.cfg.read_only {
            dirty.retain(|r| !clean.contains(r));
            return self.adopt_read_only(&dirty, &switched);
        }
        let heat = self.store.heat()?;
        let mut pins_found = HashSet::new();
        let mut found = self.tiers.scan(true)?;
        let mut groups = HashMap::new();
        found.retain(|f| {
            let linked = self.adopt_linked(f, pins.get(&f.rel).copied(), &mut groups);
            if linked && pins.contains_key(&f.rel) {
                pins_found.insert(f.rel.clone());
            }
            !linked
        });
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
        let files = lock(&self.inodes).files();
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

    /// A name of a hard-linked file (more than one link on its tier): its names share one inode
    /// and it stays on that tier, outside the policy. Returns whether `f` was one.
    fn adopt_linked(&self, f: &tiers::Found, pin: Option<Tier>, groups: &mut HashMap<(Tier, u64, u64), u64>) -> bool {
        let Some((tier, (dev, file, _))) =
            Tier::ALL.into_iter().find_map(|t| f.ids[t.index()].filter(|&(_, _, links)| links > 1).map(|id| (t, id)))
        else {
            return false;
        };
        let mut inodes = lock(&self.inodes);
        match groups.get(&(tier, dev, file)) {
            Some(&ino) => inodes.add_name(ino, &f.rel),
            None => {
                let ino = inodes.ino_of(&f.rel, false);
                groups.insert((tier, dev, file), ino);
                write_lock(&self.linked).insert(ino, tier);
                if let Some(p) = pin {
                    write_lock(&self.pins).insert(ino, p);
                }
            }
        }
        if f.copies[tier.other().index()].is_some() {
            log::warn(format_args!(
                "{} is a hard link on the {} tier and has another copy on the other tier, which is ignored",
                f.rel.display(),
                if tier == Tier::Fast { "SSD" } else { "HDD" }
            ));
        }
        true
    }

    /// A read-only mount serves every file from its newest copy, changing nothing.
    fn adopt_read_only(&self, dirty: &HashSet<PathBuf>, switched: &HashMap<PathBuf, Tier>) -> Result<(), MountError> {
        let mut groups = HashMap::new();
        for f in self.tiers.scan(false)? {
            if self.adopt_linked(&f, None, &mut groups) {
                continue;
            }
            let ino = lock(&self.inodes).ino_of(&f.rel, false);
            let tier = match (switched.get(&f.rel), f.copies) {
                (Some(&t), _) => t,
                (None, [Some(_), None]) => Tier::Fast,
                (None, [None, Some(_)]) => Tier::Slow,
                (None, [Some((s_size, m_fast)), Some((h_size, m_slow))]) => {
                    let identical = s_size == h_size && m_fast == m_slow;
                    if dirty.contains(&f.rel) || identical || m_fast >= m_slow { Tier::Fast } else { Tier::Slow }
                }
                (None, [None, None]) => continue,
            };
            write_lock(&self.frozen).insert(ino, tier);
        }
        Ok(())
    }

    /// Tells the engine about one existing file with copies `copies` (size and mtime on the
    /// fast and the slow tier) and makes the trees agree with what it decided. `ssd_newer`: the
    /// store says the SSD copy is the file (write-back dirty).
    pub(crate) fn adopt_file(
        &self,
        ino: u64,
        rel: &Path,
        copies: &[Option<(u64, SystemTime)>; 2],
        ssd_newer: bool,
    ) -> io::Result<()> {
        let level = match *copies {
            [Some((size, _)), Some(_)] if ssd_newer => (Level::Fast, size, true),
            [Some((size, m_fast)), Some((hsize, m_slow))] => {
                // After an unclean shutdown two copies of one size and time may still differ (a
                // write to both was cut between them within one tick of the clock, or a dirty
                // mark's lazy commit was lost with the process). The SSD copy is never older
                // than the HDD copy (writes reach the SSD first, write-backs copy it down), so
                // it is the file, dirty: written back later, never lost (as dm-cache counts
                // every block dirty after a crash).
                // After a clean unmount they are a finished copy or an interrupted move:
                // identical, kept as a clean cached copy (a DST policy then treats the SSD one
                // as the file).
                if size == hsize && m_fast == m_slow {
                    (Level::Fast, size, self.unclean_start.load(std::sync::atomic::Ordering::Relaxed))
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
                self.tiers.plan_copy(rel, Tier::Fast, ino)?.run(&mut |_, _, _| Ok(()))?;
            }
            self.tiers.remove(Tier::Fast, rel)?;
        } else if p.on_fast && !p.on_slow && !p.dirty && both {
            // A DST policy keeps one copy, the SSD one (newer, or identical after a move).
            self.tiers.remove(Tier::Slow, rel)?;
        }
        Ok(())
    }

    /// Puts a pinned file's one copy on `tier`, from its newest copy.
    pub(crate) fn place_pinned(
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
            self.tiers.plan_copy(rel, newest, ino)?.run(&mut |_, _, _| Ok(()))?;
        }
        self.tiers.remove(tier.other(), rel)
    }
}
