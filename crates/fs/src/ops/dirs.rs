//! Directory listings and `statfs`.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::sync::atomic::Ordering;

use fuser::{Errno, FileType};
use nix::dir::Type;
use tierwise_core::Tier;

use crate::shared::{DirEntry, Shared, errno, lock, read_lock};
use crate::stats::Space;
use crate::tiers::{self, At};

fn kind_of(m: &std::fs::Metadata) -> FileType {
    if m.is_dir() {
        FileType::Directory
    } else if m.file_type().is_symlink() {
        FileType::Symlink
    } else {
        FileType::RegularFile
    }
}

/// Lists directory `ino` (both tiers merged, tierwise's own names hidden); returns the handle
/// its entries are kept under until `releasedir`.
pub(crate) fn opendir(s: &Shared, ino: u64) -> Result<u64, Errno> {
    let node = s.node(ino)?;
    if s.refresh_health() {
        // A listing without the lost tier's files would look like they were deleted.
        return Err(Errno::EIO);
    }
    let mut names: BTreeMap<OsString, FileType> = BTreeMap::new();
    let mut any = false;
    {
        let _ns = read_lock(&s.ns);
        let rel = s.node(ino)?.rel;
        for t in Tier::ALL {
            let Ok(d) = s.tiers.dir(t, &rel) else { continue };
            let Ok(entries) = tiers::at::list_dir(&d) else { continue };
            any = true;
            for (name, ty) in entries {
                if tiers::is_reserved(&name) {
                    continue;
                }
                let kind = match ty {
                    Some(Type::Directory) => FileType::Directory,
                    Some(Type::Symlink) => FileType::Symlink,
                    Some(_) => FileType::RegularFile,
                    None => d
                        .try_clone()
                        .ok()
                        .and_then(|d| At::new(d, &name).ok())
                        .and_then(|a| a.metadata().ok())
                        .map_or(FileType::RegularFile, |m| kind_of(&m)),
                };
                names.entry(name).or_insert(kind);
            }
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
        let _g = read_lock(&file_lock);
        let _ns = read_lock(&s.ns);
        let rel = s.node(ino)?.rel.join(&name);
        if let Some(m) = Tier::ALL.into_iter().find_map(|t| s.tiers.metadata(t, &rel).ok()) {
            names.insert(name, kind_of(&m));
        }
    }
    let mut entries: Vec<DirEntry> =
        vec![(ino, FileType::Directory, OsString::from(".")), (ino, FileType::Directory, OsString::from(".."))];
    {
        let _ns = read_lock(&s.ns);
        let rel = s.node(ino)?.rel;
        let mut inodes = lock(&s.inodes);
        for (name, kind) in names {
            let i = inodes.ino_of(&rel.join(&name), kind == FileType::Directory);
            entries.push((i, kind, name));
        }
    }
    let fh = s.next_fh.fetch_add(1, Ordering::Relaxed);
    lock(&s.dirs).insert(fh, entries);
    Ok(fh)
}

/// What `df` shows: see [`Shared::usable_space`]; inodes are the two file systems' together.
pub(crate) fn statfs(s: &Shared) -> Result<(Space, u64, u64), Errno> {
    let space = s.usable_space().ok_or(Errno::EIO)?;
    let (a, b) =
        (s.tiers.statvfs(Tier::Fast).map_err(|e| errno(&e))?, s.tiers.statvfs(Tier::Slow).map_err(|e| errno(&e))?);
    if s.one_file_system() {
        return Ok((space, b.files(), b.files_free()));
    }
    Ok((space, a.files() + b.files(), a.files_free() + b.files_free()))
}

/// Makes the entries of directory `ino` durable on both tiers (a rename, create or unlink in
/// it survives a power cut once this returns), with the journalled renames and the store's
/// lazy commits. Without it the kernel would take ENOSYS for "nothing to do".
pub(crate) fn fsyncdir(s: &Shared, ino: u64) -> Result<(), Errno> {
    let rel = s.node(ino)?.rel;
    {
        let _ns = read_lock(&s.ns);
        for t in Tier::ALL {
            let d = s.tiers.dir(t, &rel).map_err(|e| errno(&e))?;
            tiers::at::sync_dir_handle(&d).map_err(|e| errno(&e))?;
        }
    }
    s.end_renames();
    s.store.sync().map_err(|_| Errno::EIO)
}
