//! The scan at mount: both trees walked side by side through open directories.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fs::File;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::time::SystemTime;

use nix::dir::Type;
use tierwise_core::Tier;

use super::at::{At, list_dir};
use super::{RESERVED_PREFIX, Tiers, is_reserved, mtime};

/// A file found by [`Tiers::scan`]: size and modification time on each tier (fast first).
#[derive(Clone, Debug)]
pub struct Found {
    /// Relative path.
    pub rel: PathBuf,
    /// (size, mtime) per tier that holds it.
    pub copies: [Option<(u64, SystemTime)>; 2],
    /// (device, inode, link count) per tier that holds it: names of one hard-linked file share
    /// the first two.
    pub ids: [Option<(u64, u64, u64)>; 2],
}

/// What a name is on one tier.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Dir,
    File,
    Other,
}

impl Tiers {
    /// Walks both trees: every regular file with the tiers that hold it. With `tidy` (a
    /// read-write mount), it first deletes the temporary files of moves a crash interrupted
    /// (their source is intact) and of files unlinked while open, and creates every directory
    /// that one tier lacks as a copy of the other's, so that either tier can hold any file.
    /// Directories and symlinks are not listed (they are not placed). No symlink is followed.
    pub fn scan(&self, tidy: bool) -> io::Result<Vec<Found>> {
        let mut found = Vec::new();
        let roots = [self.root_dir(Tier::Fast)?, self.root_dir(Tier::Slow)?];
        let mut stack: Vec<(PathBuf, [Option<File>; 2])> = vec![(PathBuf::new(), roots.map(Some))];
        while let Some((rel, dirs)) = stack.pop() {
            let mut names: BTreeMap<OsString, [Option<Kind>; 2]> = BTreeMap::new();
            for tier in Tier::ALL {
                let Some(dir) = &dirs[tier.index()] else { continue };
                for (name, ty) in list_dir(dir)? {
                    let at = At::new(dir.try_clone()?, &name)?;
                    let kind = match ty {
                        Some(Type::Directory) => Kind::Dir,
                        Some(Type::File) => Kind::File,
                        Some(_) => Kind::Other,
                        None => match at.metadata() {
                            Ok(m) if m.is_dir() => Kind::Dir,
                            Ok(m) if m.is_file() => Kind::File,
                            _ => Kind::Other,
                        },
                    };
                    if is_reserved(&name) {
                        // A copy a crash interrupted (its source is intact), or a file unlinked
                        // while open whose last release the crash prevented.
                        let leftover = ["tmp-", "unlinked-"]
                            .iter()
                            .any(|k| name.to_string_lossy().starts_with(&format!("{RESERVED_PREFIX}{k}")));
                        if tidy && kind == Kind::File && leftover {
                            at.unlink()?;
                        } else if tidy
                            && kind == Kind::Dir
                            && name.to_string_lossy().starts_with(&format!("{RESERVED_PREFIX}tmp-dir-"))
                        {
                            // A directory being made when a crash came: empty, never named.
                            let _ = at.rmdir();
                        }
                        continue;
                    }
                    names.entry(name).or_default()[tier.index()] = Some(kind);
                }
            }
            for (name, kinds) in names {
                let child = rel.join(&name);
                if kinds.contains(&Some(Kind::Dir)) {
                    let mut sub: [Option<File>; 2] = [None, None];
                    for tier in Tier::ALL {
                        let Some(dir) = &dirs[tier.index()] else { continue };
                        let at = At::new(dir.try_clone()?, &name)?;
                        match kinds[tier.index()] {
                            Some(Kind::Dir) => sub[tier.index()] = Some(at.open_dir()?),
                            // Missing here: make it, so that this tier can hold files inside.
                            None if tidy => sub[tier.index()] = Some(self.mirror_dir(tier, &child)?),
                            // A file or symlink of the same name on this tier: left alone.
                            _ => {}
                        }
                    }
                    stack.push((child, sub));
                    continue;
                }
                let (mut copies, mut ids) = ([None, None], [None, None]);
                for tier in Tier::ALL {
                    if kinds[tier.index()] != Some(Kind::File) {
                        continue;
                    }
                    let Some(dir) = &dirs[tier.index()] else { continue };
                    let m = At::new(dir.try_clone()?, &name)?.metadata()?;
                    copies[tier.index()] = Some((m.len(), mtime(&m)));
                    ids[tier.index()] = Some((m.dev(), m.ino(), m.nlink()));
                }
                if copies.iter().any(Option::is_some) {
                    found.push(Found { rel: child, copies, ids });
                }
            }
        }
        found.sort_by(|a, b| a.rel.cmp(&b.rel));
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::path::Path;

    use super::*;

    /// Directories one tier lacks are made there, leftovers go, symlinks are never followed.
    #[test]
    fn the_scan_mirrors_directories_and_never_follows_symlinks() {
        let (a, b, m, outside) = (
            tempfile::tempdir().unwrap(),
            tempfile::tempdir().unwrap(),
            tempfile::tempdir().unwrap(),
            tempfile::tempdir().unwrap(),
        );
        fs::create_dir_all(b.path().join("d/e")).unwrap();
        fs::write(b.path().join("d/e/f"), b"x").unwrap();
        fs::write(a.path().join(".tierwise-tmp-3"), b"partial").unwrap();
        fs::write(outside.path().join("g"), b"outside").unwrap();
        std::os::unix::fs::symlink(outside.path(), b.path().join("d/link")).unwrap();
        let tiers = Tiers::open(a.path(), b.path(), m.path()).unwrap();
        let ro = tiers.scan(false).unwrap();
        assert_eq!(ro.len(), 1);
        assert!(
            !a.path().join("d").exists() && a.path().join(".tierwise-tmp-3").exists(),
            "read-only: nothing changes"
        );
        let found = tiers.scan(true).unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].rel, Path::new("d/e/f"));
        assert!(found[0].copies[0].is_none() && found[0].copies[1].is_some());
        assert!(a.path().join("d/e").is_dir(), "the directory is on both tiers now");
        assert!(!a.path().join(".tierwise-tmp-3").exists(), "the leftover went");
        assert!(!a.path().join("d/link").exists(), "symlinks are not mirrored");
        assert_eq!(fs::read(outside.path().join("g")).unwrap(), b"outside");
    }
}
