//! The two tier directories: where a relative path lives on each, the move protocol, and the
//! scan that adopts existing trees.
//!
//! Every file lives at the same relative path on whichever tier holds it, so both trees stay
//! readable without tierwise. A move copies the file to a hidden temporary name next to its
//! destination (`.tierwise-tmp-INO`), syncs it, renames it into place (atomic on one file
//! system), syncs the directory, and only then removes the source. A crash at any point leaves
//! either the source alone (plus a temporary file that the next mount deletes), or two identical
//! copies (which the next mount resolves: see [`Tiers::scan`]).

use std::ffi::OsStr;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};
use std::time::SystemTime;

use tierwise_core::Tier;

/// Names tierwise keeps for itself inside the tiers (hidden from listings).
pub const RESERVED_PREFIX: &str = ".tierwise-";

/// Bytes a move copies between two calls of its pacing hook.
pub const COPY_CHUNK: usize = 1 << 20;

/// The SSD and HDD directories.
#[derive(Clone, Debug)]
pub struct Tiers {
    /// The fast tier's root.
    pub ssd: PathBuf,
    /// The slow tier's root.
    pub hdd: PathBuf,
    /// Device and inode of each root when it was opened (fast first): a root whose path now
    /// names something else (its file system was unmounted, the directory removed) is lost.
    roots: [(u64, u64); 2],
}

/// Errors found in the tier directories before mounting.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TierError {
    /// A tier directory is missing or not a directory.
    #[error("{which} tier `{path}`: {why}")]
    Bad {
        /// `ssd` or `hdd`.
        which: &'static str,
        /// The path given.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
    /// The two tiers are one directory, or one is inside the other.
    #[error("the SSD and HDD tiers must be two separate directories: `{0}` and `{1}` overlap")]
    Overlap(PathBuf, PathBuf),
    /// The mountpoint is one of the tiers or inside one (the mount would hide or recurse into its data).
    #[error("the mountpoint `{0}` is inside a tier (`{1}`); mount it somewhere else")]
    MountInsideTier(PathBuf, PathBuf),
}

impl Tiers {
    /// Checks the two directories and the mountpoint and returns them canonical.
    pub fn open(ssd: &Path, hdd: &Path, mountpoint: &Path) -> Result<Tiers, TierError> {
        let canon = |which: &'static str, p: &Path| -> Result<PathBuf, TierError> {
            let bad = |why: String| TierError::Bad { which, path: p.to_path_buf(), why };
            let c = fs::canonicalize(p).map_err(|e| bad(e.to_string()))?;
            if !c.is_dir() {
                return Err(bad("not a directory".into()));
            }
            Ok(c)
        };
        let (ssd, hdd) = (canon("ssd", ssd)?, canon("hdd", hdd)?);
        if ssd.starts_with(&hdd) || hdd.starts_with(&ssd) {
            return Err(TierError::Overlap(ssd, hdd));
        }
        if let Ok(m) = fs::canonicalize(mountpoint) {
            for t in [&ssd, &hdd] {
                if m.starts_with(t) || t.starts_with(&m) {
                    return Err(TierError::MountInsideTier(m, t.clone()));
                }
            }
        }
        let id = |p: &Path| fs::metadata(p).map(|m| (m.dev(), m.ino())).unwrap_or_default();
        let roots = [id(&ssd), id(&hdd)];
        Ok(Tiers { ssd, hdd, roots })
    }

    /// Whether `tier`'s root is still the directory it was at mount. Its file system may have
    /// been unmounted (the path then names the empty mountpoint underneath), or the directory
    /// removed: tierwise must then never create anything there.
    pub fn root_intact(&self, tier: Tier) -> bool {
        fs::metadata(self.root(tier)).is_ok_and(|m| (m.dev(), m.ino()) == self.roots[tier.index()])
    }

    /// Fails with EIO when `tier`'s root is lost (see [`Tiers::root_intact`]).
    pub fn check_root(&self, tier: Tier) -> io::Result<()> {
        if self.root_intact(tier) { Ok(()) } else { Err(io::Error::from_raw_os_error(nix::libc::EIO)) }
    }

    /// The root of `tier`.
    pub fn root(&self, tier: Tier) -> &Path {
        match tier {
            Tier::Fast => &self.ssd,
            Tier::Slow => &self.hdd,
        }
    }

    /// Where `rel` lives on `tier`. `rel` is always a relative path of normal components (the
    /// inode table builds it from names the kernel checked and [`check_name`] accepted).
    pub fn path(&self, tier: Tier, rel: &Path) -> PathBuf {
        self.root(tier).join(rel)
    }

    /// Whether `rel` exists on `tier` (without following a final symlink).
    pub fn exists(&self, tier: Tier, rel: &Path) -> bool {
        fs::symlink_metadata(self.path(tier, rel)).is_ok()
    }

    /// Copies `rel` from one tier to the other with the move protocol, keeping the source.
    /// Returns the bytes copied. `pace(offset, len, total)` runs before each chunk is written:
    /// it may sleep (rate limit, emulation) or fail to cancel the copy (the source is intact and
    /// the temporary file is removed).
    pub fn copy_across(
        &self,
        rel: &Path,
        from: Tier,
        ino: u64,
        pace: &mut dyn FnMut(u64, u64, u64) -> io::Result<()>,
    ) -> io::Result<u64> {
        let src = self.path(from, rel);
        let dst = self.path(from.other(), rel);
        let dir = dst.parent().ok_or_else(|| io::Error::other("a tier path has no parent"))?;
        self.make_parents(from.other(), rel)?;
        let tmp = dir.join(format!("{RESERVED_PREFIX}tmp-{ino}"));
        let result = (|| {
            let meta = fs::symlink_metadata(&src)?;
            let input = File::open(&src)?;
            let out = OpenOptions::new().write(true).create(true).truncate(true).open(&tmp)?;
            let n = copy_data(&input, &out, meta.len(), pace)?;
            copy_metadata(&src, &meta, &out)?;
            out.set_times(fs::FileTimes::new().set_accessed(atime(&meta)).set_modified(mtime(&meta)))?;
            out.sync_all()?;
            drop(out);
            fs::rename(&tmp, &dst)?;
            File::open(dir)?.sync_all()?;
            Ok(n)
        })();
        if result.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        result
    }

    /// Creates `rel` on `tier` empty, replacing a stale file there, with the owner, mode and
    /// extended attributes of the copy on the other tier (when there is one): a new copy of the
    /// same file, not a new file.
    pub fn recreate(&self, tier: Tier, rel: &Path) -> io::Result<()> {
        self.make_parents(tier, rel)?;
        let f = File::create(self.path(tier, rel))?;
        let other = self.path(tier.other(), rel);
        if let Ok(meta) = fs::symlink_metadata(&other) {
            copy_metadata(&other, &meta, &f)?;
        }
        Ok(())
    }

    /// Removes `rel` from `tier` (a move's source, or a dropped copy) and syncs its directory.
    pub fn remove(&self, tier: Tier, rel: &Path) -> io::Result<()> {
        self.check_root(tier)?;
        let p = self.path(tier, rel);
        match fs::remove_file(&p) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        }
        if let Some(dir) = p.parent() {
            File::open(dir)?.sync_all()?;
        }
        Ok(())
    }

    /// Creates the parent directories of `rel` on `tier`, copying each one's permissions and
    /// owner from the other tier when it has them. EIO when the tier's root is lost.
    pub fn make_parents(&self, tier: Tier, rel: &Path) -> io::Result<()> {
        // Every path that creates something on a tier comes here first.
        self.check_root(tier)?;
        let Some(parent) = rel.parent() else { return Ok(()) };
        let mut cur = PathBuf::new();
        for c in parent.components() {
            cur.push(c);
            let p = self.path(tier, &cur);
            if p.is_dir() {
                continue;
            }
            match fs::create_dir(&p) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
            if let Ok(m) = fs::metadata(self.path(tier.other(), &cur)) {
                let _ = fs::set_permissions(&p, fs::Permissions::from_mode(m.mode() & 0o7777));
                let _ = std::os::unix::fs::chown(&p, Some(m.uid()), Some(m.gid()));
            }
        }
        Ok(())
    }

    /// Walks both trees: every regular file with the tiers that hold it, after deleting the
    /// temporary files of moves a crash interrupted (their source is intact). Directories and
    /// symlinks are not listed (they are not placed).
    pub fn scan(&self) -> io::Result<Vec<Found>> {
        let mut found: std::collections::BTreeMap<PathBuf, Found> = std::collections::BTreeMap::new();
        for tier in Tier::ALL {
            let root = self.root(tier).to_path_buf();
            let mut stack = vec![PathBuf::new()];
            while let Some(rel) = stack.pop() {
                for entry in fs::read_dir(root.join(&rel))? {
                    let entry = entry?;
                    let name = entry.file_name();
                    let child = rel.join(&name);
                    let ft = entry.file_type()?;
                    if is_reserved(&name) {
                        // A copy a crash interrupted (its source is intact), or a file unlinked
                        // while open whose last release the crash prevented.
                        let leftover = ["tmp-", "unlinked-"]
                            .iter()
                            .any(|k| name.to_string_lossy().starts_with(&format!("{RESERVED_PREFIX}{k}")));
                        if ft.is_file() && leftover {
                            fs::remove_file(entry.path())?;
                        }
                        continue;
                    }
                    if ft.is_dir() {
                        stack.push(child);
                    } else if ft.is_file() {
                        let m = entry.metadata()?;
                        let f =
                            found.entry(child.clone()).or_insert_with(|| Found { rel: child, copies: [None, None] });
                        f.copies[tier.index()] = Some((m.len(), mtime(&m)));
                    }
                }
            }
        }
        Ok(found.into_values().collect())
    }
}

/// A file found by [`Tiers::scan`]: size and modification time on each tier (fast first).
#[derive(Clone, Debug)]
pub struct Found {
    /// Relative path.
    pub rel: PathBuf,
    /// (size, mtime) per tier that holds it.
    pub copies: [Option<(u64, SystemTime)>; 2],
}

/// Whether a name is one tierwise reserves.
pub fn is_reserved(name: &OsStr) -> bool {
    name.as_encoded_bytes().starts_with(RESERVED_PREFIX.as_bytes())
}

/// Accepts a single normal path component that is not reserved (never `..`, `/` or `.`).
pub fn check_name(name: &OsStr) -> Result<&OsStr, i32> {
    let mut comps = Path::new(name).components();
    match (comps.next(), comps.next()) {
        (Some(Component::Normal(n)), None) if n == name && !is_reserved(name) => Ok(name),
        _ if is_reserved(name) => Err(nix::errno::Errno::EPERM as i32),
        _ => Err(nix::errno::Errno::EINVAL as i32),
    }
}

/// Copies the `len` bytes of `input` to `out` in chunks of [`COPY_CHUNK`], calling `pace` before
/// each; holes stay holes (only the data regions `SEEK_DATA`/`SEEK_HOLE` report are read and
/// written), so a sparse file does not grow when it moves. Returns the bytes copied.
fn copy_data(
    input: &File,
    out: &File,
    len: u64,
    pace: &mut dyn FnMut(u64, u64, u64) -> io::Result<()>,
) -> io::Result<u64> {
    use nix::unistd::{Whence, lseek};
    use std::os::unix::fs::FileExt;
    let seek = |pos: u64, whence: Whence| -> io::Result<Option<u64>> {
        let pos = i64::try_from(pos).map_err(|_| io::Error::other("offset out of range"))?;
        match lseek(input, pos, whence) {
            Ok(p) => Ok(Some(p as u64)),
            Err(nix::errno::Errno::ENXIO) => Ok(None), // no data at or after `pos`
            Err(e) => Err(e.into()),
        }
    };
    let mut buf = vec![0u8; COPY_CHUNK];
    let (mut pos, mut copied) = (0u64, 0u64);
    while pos < len {
        let Some(start) = seek(pos, Whence::SeekData)? else { break };
        let end = seek(start, Whence::SeekHole)?.unwrap_or(len).min(len);
        let mut at = start;
        while at < end {
            let want = (end - at).min(COPY_CHUNK as u64) as usize;
            let got = input.read_at(&mut buf[..want], at)?;
            if got == 0 {
                break; // the file shrank under us: the copy is of what was there
            }
            pace(at, got as u64, len)?;
            out.write_all_at(&buf[..got], at)?;
            at += got as u64;
            copied += got as u64;
        }
        pos = end.max(start + 1);
    }
    out.set_len(len)?;
    Ok(copied)
}

/// Gives `dst` the owner, mode and extended attributes of `src` (whose metadata is `meta`).
/// Owner first: a chown clears set-id bits, which the mode then restores. An attribute the
/// destination's file system refuses fails the copy (a move then rolls back rather than lose it).
fn copy_metadata(src: &Path, meta: &fs::Metadata, dst: &File) -> io::Result<()> {
    use xattr::FileExt;
    let _ = std::os::unix::fs::fchown(dst, Some(meta.uid()), Some(meta.gid()));
    dst.set_permissions(fs::Permissions::from_mode(meta.mode() & 0o7777))?;
    let names = match xattr::list(src) {
        Ok(names) => names,
        Err(e) if e.raw_os_error() == Some(nix::libc::EOPNOTSUPP) => return Ok(()),
        Err(e) => return Err(e),
    };
    for name in names {
        if let Some(value) = xattr::get(src, &name)? {
            dst.set_xattr(&name, &value)?;
        }
    }
    Ok(())
}

/// The modification time of `m`.
pub fn mtime(m: &fs::Metadata) -> SystemTime {
    m.modified().unwrap_or(SystemTime::UNIX_EPOCH)
}

/// The access time of `m`.
pub fn atime(m: &fs::Metadata) -> SystemTime {
    m.accessed().unwrap_or(SystemTime::UNIX_EPOCH)
}

/// Reads up to `len` bytes at `offset` of an open file.
pub fn read_at_file(f: &File, offset: u64, len: usize) -> io::Result<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let mut buf = vec![0u8; len];
    let mut got = 0;
    while got < len {
        let n = f.read_at(&mut buf[got..], offset + got as u64)?;
        if n == 0 {
            break;
        }
        got += n;
    }
    buf.truncate(got);
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only one normal, unreserved path component gets through: nothing a name can say makes a
    /// tier path leave its tier.
    #[test]
    fn names_that_could_leave_a_tier_are_refused() {
        for bad in ["..", ".", "", "a/b", "/etc", "../x", "a/..", ".tierwise-tmp-1"] {
            assert!(check_name(OsStr::new(bad)).is_err(), "{bad:?} must be refused");
        }
        for good in ["a", "..a", "a..", ".hidden", "with space", "ünïcode"] {
            assert!(check_name(OsStr::new(good)).is_ok(), "{good:?} is an ordinary name");
        }
        assert_eq!(check_name(OsStr::new(".tierwise-x")), Err(nix::errno::Errno::EPERM as i32));
    }

    /// A root whose path names something else (here: removed and re-created) is lost.
    #[test]
    fn a_replaced_root_is_lost() {
        let (a, b, m) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let tiers = Tiers::open(a.path(), b.path(), m.path()).unwrap();
        assert!(tiers.root_intact(Tier::Fast) && tiers.check_root(Tier::Slow).is_ok());
        let other = tempfile::tempdir().unwrap();
        fs::remove_dir(b.path()).unwrap();
        assert!(!tiers.root_intact(Tier::Slow));
        // Another directory moved into its place (made while the tier existed, so its inode differs;
        // a directory re-created after removal may reuse the number and is not told apart).
        fs::rename(other.path(), b.path()).unwrap();
        assert!(!tiers.root_intact(Tier::Slow), "a new directory at the same path is not the tier");
        assert_eq!(tiers.check_root(Tier::Slow).unwrap_err().raw_os_error(), Some(nix::libc::EIO));
        assert!(tiers.make_parents(Tier::Slow, Path::new("d/f")).is_err(), "nothing is created there");
        assert!(!b.path().join("d").exists());
    }
}
