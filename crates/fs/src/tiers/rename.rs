//! A rename on the tiers. One rename through the mount can be several calls on the tiers: the
//! source renamed on each tier that holds a copy of it (a cached file, a directory: two), and
//! the replaced file's copy removed from a tier the source is not on. A crash between two of
//! them must not leave a mix (the replaced file gone and the source still under its old name,
//! or a directory renamed on one tier only). So such a rename is journalled first
//! ([`crate::state::StateStore::begin_rename`]) with what each tier held at both names, and the
//! next mount finishes it on every tier where it did not happen yet ([`Tiers::finish_rename`]),
//! as a journalling file system replays its log: after a crash the new name holds the old
//! content or the new, never nothing.

use std::fs::File;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Arc;

use tierwise_core::Tier;

use super::{At, Tiers, is_reserved, mtime};
use crate::state::{NameId, RenameRecord, epoch_ns};

/// What the name holds, as a [`NameId`] (size and time only for a file).
fn id_of(m: &std::fs::Metadata) -> NameId {
    if m.is_dir() {
        NameId { dev: m.dev(), ino: m.ino(), size: 0, mtime_ns: 0 }
    } else {
        NameId { dev: m.dev(), ino: m.ino(), size: m.len(), mtime_ns: epoch_ns(mtime(m)) }
    }
}

/// Whether `at` holds exactly `want` (`None`: nothing).
fn holds(at: &At, want: Option<NameId>) -> bool {
    match (at.metadata(), want) {
        (Err(e), None) => e.kind() == io::ErrorKind::NotFound,
        (Ok(m), Some(w)) => {
            let id = id_of(&m);
            if m.is_dir() { (id.dev, id.ino) == (w.dev, w.ino) } else { id == w }
        }
        _ => false,
    }
}

/// Whether `at` holds the file or directory `want` names, whatever its size and time now.
fn same_inode(at: &At, want: NameId) -> bool {
    at.metadata().is_ok_and(|m| (m.dev(), m.ino()) == (want.dev, want.ino))
}

/// Removes what tierwise leaves inside a directory (temporary copies, hidden names), so that
/// a rename may replace it or rmdir remove it: to users it is empty.
pub(crate) fn clear_reserved(dir: &At) {
    if let Ok(d) = dir.open_dir() {
        for (name, _) in super::at::list_dir(&d).unwrap_or_default() {
            if is_reserved(&name)
                && let Ok(d2) = d.try_clone()
                && let Ok(child) = At::new(d2, &name)
            {
                let _ = child.unlink();
            }
        }
    }
}

impl Tiers {
    /// What renaming `from` to `to` changes on each tier: the source's copies and what `to`
    /// holds there. The caller holds the namespace lock exclusively.
    pub fn plan_rename(&self, from: &Path, to: &Path) -> io::Result<RenameRecord> {
        let mut rec =
            RenameRecord { from: from.to_path_buf(), to: to.to_path_buf(), source: [None; 2], replaced: [None; 2] };
        for t in Tier::ALL {
            let look = |rel: &Path| match self.at(t, rel).and_then(|a| a.metadata()) {
                Ok(m) => Ok(Some(id_of(&m))),
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(e),
            };
            rec.source[t.index()] = look(from)?;
            rec.replaced[t.index()] = look(to)?;
        }
        Ok(rec)
    }

    /// How many names the rename changes on the tiers (one needs no journal: a rename on one
    /// file system is atomic).
    pub fn rename_calls(rec: &RenameRecord) -> usize {
        Tier::ALL.into_iter().filter(|t| rec.source[t.index()].is_some() || rec.replaced[t.index()].is_some()).count()
    }

    /// Carries out `rec` on every tier where it has not happened yet: where `from` still holds
    /// the source and `to` still holds what it held, the source is renamed over it; where the
    /// source has no copy and `to` still holds the replaced file, that is removed. A tier whose
    /// names changed otherwise since (the rename happened there, and maybe more after it) is
    /// left alone. Renames first, so the new name is never empty on every tier at once.
    /// Returns the directories whose entries changed: the record may be ended once they are
    /// synced (ended before, a power cut could keep the end and lose a change).
    pub fn finish_rename(&self, rec: &RenameRecord) -> io::Result<Vec<Arc<File>>> {
        let mut changed = Vec::new();
        for t in Tier::ALL {
            let Some(source) = rec.source[t.index()] else { continue };
            let src = match self.at(t, &rec.from) {
                Ok(a) => a,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            };
            let dst = self.at_creating(t, &rec.to)?;
            // The new name may also have lost the file it held (a power cut took back its
            // creation): the rename replaces it anyway.
            if !holds(&src, Some(source)) || !(holds(&dst, rec.replaced[t.index()]) || holds(&dst, None)) {
                continue;
            }
            if rec.replaced[t.index()].is_some() && dst.is_dir() {
                clear_reserved(&dst);
            }
            src.rename_to(&dst)?;
            changed.push(dst.dir_handle());
            if rec.from.parent() != rec.to.parent() {
                changed.push(src.dir_handle());
            }
        }
        for t in Tier::ALL {
            let (None, Some(replaced)) = (rec.source[t.index()], rec.replaced[t.index()]) else { continue };
            let dst = match self.at(t, &rec.to) {
                Ok(a) => a,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            };
            // The replaced file may have lost unsynced changes to a power cut (its size and time
            // differ from the record's, its inode does not): once the rename is done where the
            // source is, it is still the file the rename replaced, and must go, or adoption would
            // take this older file for a newer copy of the renamed one and drop that.
            let replaced_here = holds(&dst, Some(replaced))
                || (same_inode(&dst, replaced)
                    && Tier::ALL.into_iter().any(|s| {
                        rec.source[s.index()].is_some_and(|id| self.at(s, &rec.to).is_ok_and(|a| holds(&a, Some(id))))
                    }));
            if !replaced_here {
                continue;
            }
            if dst.is_dir() {
                clear_reserved(&dst);
                dst.rmdir()?;
            } else {
                dst.unlink()?;
            }
            changed.push(dst.dir_handle());
        }
        Ok(changed)
    }
}
