//! Symlink-safe access to names inside a tier: every operation is relative to an open directory
//! that was reached from the tier's root without following a symlink, and acts on one name in
//! it without following a final symlink either.
//!
//! Why: the daemon runs as root, and users of the mount can rename directories and create
//! symlinks in the tiers (through the mount) while the daemon works on a file. A path that
//! named a directory when the daemon read it may name a symlink to `/etc` a moment later. So
//! nothing here opens a path through a symlink: directories are opened with `openat2` and
//! `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS` (or, where the kernel lacks it, a walk of `openat`
//! with `O_NOFOLLOW` component by component), and the final name is used with `O_NOFOLLOW` /
//! `AT_SYMLINK_NOFOLLOW`. Once a directory is open, renames of it or of its parents do not
//! matter: its descriptor follows it, and it stays inside the tier.

use std::ffi::{OsStr, OsString};
use std::fs::{self, File};
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::calls::{self, Call};
use nix::errno::Errno;
use nix::fcntl::{OFlag, ResolveFlag};
use nix::sys::stat::Mode;

/// Flags every open here carries.
const BASE: OFlag = OFlag::O_CLOEXEC.union(OFlag::O_NOFOLLOW);

/// Set when the kernel has no `openat2` (Linux < 5.6, or a seccomp filter refuses it): the
/// component walk is used from then on.
static NO_OPENAT2: AtomicBool = AtomicBool::new(false);

fn io_err(e: Errno) -> io::Error {
    io::Error::from_raw_os_error(e as i32)
}

/// The normal components of `rel`, or EINVAL for anything else (`..`, `/`, `.`): the inode
/// table only ever builds relative paths of normal names, so anything else is a bug to refuse.
fn components(rel: &Path) -> io::Result<Vec<&OsStr>> {
    rel.components()
        .map(|c| match c {
            Component::Normal(n) => Ok(n),
            _ => Err(io::Error::from_raw_os_error(nix::libc::EINVAL)),
        })
        .collect()
}

/// Opens `rel` under the directory `root` with `flags`, never through a symlink (intermediate
/// or final) and never outside `root`. An empty `rel` opens `root` itself again.
pub fn open_beneath(root: &impl AsFd, rel: &Path, flags: OFlag) -> io::Result<File> {
    let comps = components(rel)?;
    if comps.is_empty() {
        return nix::fcntl::openat(root, ".", flags | OFlag::O_CLOEXEC, Mode::empty()).map(File::from).map_err(io_err);
    }
    if !NO_OPENAT2.load(Ordering::Relaxed) {
        let how = nix::fcntl::OpenHow::new().flags(flags | BASE).resolve(
            ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_SYMLINKS | ResolveFlag::RESOLVE_NO_MAGICLINKS,
        );
        match nix::fcntl::openat2(root, rel, how) {
            Ok(fd) => return Ok(File::from(fd)),
            // openat2 refuses with EAGAIN when a rename raced the lookup: retry by walking.
            Err(Errno::ENOSYS | Errno::EPERM) => NO_OPENAT2.store(true, Ordering::Relaxed),
            Err(Errno::EAGAIN) => {}
            Err(e) => return Err(io_err(e)),
        }
    }
    walk_beneath(root, &comps, flags)
}

/// [`open_beneath`] by hand: each directory is opened with `O_NOFOLLOW` relative to the one
/// before. Since every component is a normal name, this cannot leave `root` either.
pub fn walk_beneath(root: &impl AsFd, comps: &[&OsStr], flags: OFlag) -> io::Result<File> {
    let Some((last, dirs)) = comps.split_last() else {
        return nix::fcntl::openat(root, ".", flags | OFlag::O_CLOEXEC, Mode::empty()).map(File::from).map_err(io_err);
    };
    let dir_flags = OFlag::O_PATH | OFlag::O_DIRECTORY | BASE;
    let mut cur: Option<OwnedFd> = None;
    for c in dirs {
        let next = match &cur {
            Some(fd) => nix::fcntl::openat(fd, *c, dir_flags, Mode::empty()),
            None => nix::fcntl::openat(root, *c, dir_flags, Mode::empty()),
        }
        .map_err(io_err)?;
        cur = Some(next);
    }
    let fd = match &cur {
        Some(fd) => nix::fcntl::openat(fd, *last, flags | BASE, Mode::empty()),
        None => nix::fcntl::openat(root, *last, flags | BASE, Mode::empty()),
    }
    .map_err(io_err)?;
    Ok(File::from(fd))
}

/// Opens the directory `rel` under `root` (readable, so it can be listed and synced).
pub fn open_dir_beneath(root: &impl AsFd, rel: &Path) -> io::Result<File> {
    open_beneath(root, rel, OFlag::O_RDONLY | OFlag::O_DIRECTORY).map_err(not_a_dir_is_missing)
}

/// A path component that is a symlink or a file where a directory should be: for a tier, the
/// directory is simply not there (a stale path, or something placed behind the mount's back).
fn not_a_dir_is_missing(e: io::Error) -> io::Error {
    match e.raw_os_error() {
        Some(nix::libc::ELOOP | nix::libc::ENOTDIR | nix::libc::EXDEV) => {
            io::Error::from_raw_os_error(nix::libc::ENOENT)
        }
        _ => e,
    }
}

/// One name in an open directory of a tier. Every operation acts on that name in that
/// directory and never follows a final symlink.
#[derive(Debug)]
pub struct At {
    /// Shared with other names in the same directory (see [`At::in_dir`]).
    dir: Arc<File>,
    name: OsString,
}

/// Bumped after every rename and rmdir done here, from any thread: a directory opened by path
/// before one of them ended may no longer be what that path names (see `Tiers::dir`'s
/// cache). After, not before: an open that read the old count then ran before the change ended.
static NAMESPACE_CHANGES: AtomicU64 = AtomicU64::new(0);

/// How many renames and rmdirs tierwise has done in the tiers so far.
pub fn namespace_changes() -> u64 {
    NAMESPACE_CHANGES.load(Ordering::Acquire)
}

fn namespace_changed() {
    NAMESPACE_CHANGES.fetch_add(1, Ordering::AcqRel);
}

/// How [`At::open`] opens a regular file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Read only.
    Read,
    /// Read and write.
    ReadWrite,
    /// Read and write, created empty (mode 0600) when missing.
    ReadWriteCreate,
    /// Write only, created (mode 0600); fails when the name exists.
    CreateNew,
    /// Write only, created or truncated (mode 0600).
    CreateTruncate,
}

impl At {
    /// `name` in the open directory `dir`. `name` must be one normal component.
    pub fn new(dir: File, name: &OsStr) -> io::Result<At> {
        At::in_dir(Arc::new(dir), name)
    }

    /// `name` in the open directory `dir`, shared with other names there (no descriptor is
    /// duplicated).
    pub fn in_dir(dir: Arc<File>, name: &OsStr) -> io::Result<At> {
        match components(Path::new(name))?.as_slice() {
            [n] if *n == name => Ok(At { dir, name: name.to_os_string() }),
            _ => Err(io::Error::from_raw_os_error(nix::libc::EINVAL)),
        }
    }

    /// The open directory `dir` itself (operations act on it as `.`; it cannot be unlinked
    /// or renamed through this).
    pub fn itself(dir: File) -> io::Result<At> {
        Ok(At { dir: Arc::new(dir), name: OsString::from(".") })
    }

    /// The directory.
    pub fn dir(&self) -> &File {
        &self.dir
    }

    /// The directory, shared (kept open to sync it later: it follows renames).
    pub fn dir_handle(&self) -> Arc<File> {
        Arc::clone(&self.dir)
    }

    /// The name.
    pub fn name(&self) -> &OsStr {
        &self.name
    }

    /// Another name in the same directory.
    pub fn sibling(&self, name: &OsStr) -> io::Result<At> {
        At::in_dir(Arc::clone(&self.dir), name)
    }

    /// Opens the name itself as `O_PATH` (a symlink too): for stat and attributes.
    fn handle(&self) -> io::Result<File> {
        nix::fcntl::openat(&self.dir, self.name.as_os_str(), OFlag::O_PATH | BASE, Mode::empty())
            .map(File::from)
            .map_err(io_err)
    }

    /// Metadata of the name (of a symlink itself, not its target).
    pub fn metadata(&self) -> io::Result<fs::Metadata> {
        // The name opened as O_PATH (one component, not followed) and its descriptor stat'ed:
        // three cheap calls. A stat through the directory's /proc link walked /proc, the
        // process and its magic link each time: 11 % of the daemon's time in a create loop.
        self.handle()?.metadata()
    }

    /// Whether the name exists (as anything).
    pub fn exists(&self) -> bool {
        nix::sys::stat::fstatat(&self.dir, self.name.as_os_str(), nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW).is_ok()
    }

    /// Whether the name is a directory (not a symlink to one).
    pub fn is_dir(&self) -> bool {
        nix::sys::stat::fstatat(&self.dir, self.name.as_os_str(), nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW)
            .is_ok_and(|st| st.st_mode & nix::libc::S_IFMT == nix::libc::S_IFDIR)
    }

    /// Opens the name as a regular file; a symlink answers ELOOP.
    pub fn open(&self, access: Access) -> io::Result<File> {
        let flags = match access {
            Access::Read => OFlag::O_RDONLY,
            Access::ReadWrite => OFlag::O_RDWR,
            Access::ReadWriteCreate => OFlag::O_RDWR | OFlag::O_CREAT,
            Access::CreateNew => OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL,
            Access::CreateTruncate => OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_TRUNC,
        };
        let open = || {
            nix::fcntl::openat(&self.dir, self.name.as_os_str(), flags | BASE, Mode::from_bits_truncate(0o600))
                .map(File::from)
                .map_err(io_err)
        };
        let f = if flags.contains(OFlag::O_CREAT) { calls::on_fd(Call::Create, &*self.dir, open)? } else { open()? };
        if !f.metadata()?.is_file() {
            // A directory opened read-only, a FIFO or a device: not a file tierwise serves.
            return Err(io::Error::from_raw_os_error(nix::libc::EISDIR));
        }
        Ok(f)
    }

    /// Creates the name as an empty regular file with `mode` (exactly: no umask), owned by
    /// `owner` where the process may give it away, and returns it open for writing; EEXIST when
    /// the name exists. The file appears with its mode and owner at once (made unnamed with
    /// `O_TMPFILE`, then linked in), so a crash never leaves it root's with mode 0600; on a
    /// file system without `O_TMPFILE` it is created, then changed.
    pub fn create_file(&self, mode: u32, owner: Option<(u32, u32)>) -> io::Result<File> {
        let set = |f: &File| -> io::Result<()> {
            f.set_permissions(fs::Permissions::from_mode(mode & 0o7777))?;
            if let Some((uid, gid)) = owner {
                // Not fatal: an unprivileged daemon keeps files its own (as before).
                let _ = std::os::unix::fs::fchown(f, Some(uid), Some(gid));
            }
            Ok(())
        };
        let unnamed = nix::fcntl::openat(
            &self.dir,
            ".",
            OFlag::O_TMPFILE | OFlag::O_WRONLY | BASE,
            Mode::from_bits_truncate(0o600),
        );
        match unnamed {
            Ok(fd) => {
                let f = File::from(fd);
                set(&f)?;
                calls::on_fd(Call::Create, &*self.dir, || {
                    nix::unistd::linkat(
                        nix::fcntl::AT_FDCWD,
                        &proc_path(&f),
                        &self.dir,
                        self.name.as_os_str(),
                        nix::fcntl::AtFlags::AT_SYMLINK_FOLLOW,
                    )
                })
                .map_err(io_err)?;
                Ok(f)
            }
            Err(Errno::EOPNOTSUPP | Errno::EISDIR | Errno::EINVAL) => {
                let f = self.open(Access::CreateNew)?;
                calls::on_fd(Call::Attrs, &f, || set(&f))?;
                Ok(f)
            }
            Err(e) => Err(io_err(e)),
        }
    }

    /// Opens the name as a directory.
    pub fn open_dir(&self) -> io::Result<File> {
        nix::fcntl::openat(&self.dir, self.name.as_os_str(), OFlag::O_RDONLY | OFlag::O_DIRECTORY | BASE, Mode::empty())
            .map(File::from)
            .map_err(|e| not_a_dir_is_missing(io_err(e)))
    }

    /// Removes the name (not a directory).
    pub fn unlink(&self) -> io::Result<()> {
        calls::on_fd(Call::Unlink, &*self.dir, || {
            nix::unistd::unlinkat(&self.dir, self.name.as_os_str(), nix::unistd::UnlinkatFlags::NoRemoveDir)
                .map_err(io_err)
        })
    }

    /// Removes the name when it is the file `id` (device, inode): a name that now holds
    /// another file is left alone (ENOENT). Callers hold the file's lock, so no rename through
    /// the mount can swap the name between the check and the unlink.
    pub fn unlink_if(&self, id: (u64, u64)) -> io::Result<()> {
        let m = self.metadata()?;
        if (m.dev(), m.ino()) != id {
            return Err(io::Error::from_raw_os_error(nix::libc::ENOENT));
        }
        self.unlink()
    }

    /// Removes the name, an empty directory.
    pub fn rmdir(&self) -> io::Result<()> {
        let r = calls::on_fd(Call::Rmdir, &*self.dir, || {
            nix::unistd::unlinkat(&self.dir, self.name.as_os_str(), nix::unistd::UnlinkatFlags::RemoveDir)
        });
        namespace_changed();
        r.map_err(io_err)
    }

    /// Creates the name as a directory with `mode`.
    pub fn mkdir(&self, mode: u32) -> io::Result<()> {
        calls::on_fd(Call::Mkdir, &*self.dir, || {
            nix::sys::stat::mkdirat(&self.dir, self.name.as_os_str(), Mode::from_bits_truncate(mode & 0o7777))
        })
        .map_err(io_err)
    }

    /// Creates the name as a directory with `mode` (exactly: no umask), owned by `owner` where
    /// the process may give it away; EEXIST when the name exists. Made under a temporary name,
    /// changed, then renamed in (no replacing), so a crash never leaves it root's with mode
    /// 0700; a temporary a crash leaves is removed by the next mount's scan.
    pub fn make_dir(&self, mode: u32, owner: Option<(u32, u32)>) -> io::Result<()> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let tmp =
            self.sibling(&OsString::from(format!("{}tmp-dir-{}-{n}", super::RESERVED_PREFIX, std::process::id())))?;
        tmp.mkdir(0o700)?;
        let r = (|| {
            if let Some((uid, gid)) = owner {
                // Not fatal: an unprivileged daemon keeps directories its own (as before).
                let _ = tmp.chown(Some(uid), Some(gid));
            }
            tmp.chmod(mode)?;
            tmp.rename_noreplace(self)
        })();
        if r.is_err() {
            let _ = tmp.rmdir();
        }
        r
    }

    /// Creates the name as a symlink to `target` (stored as given, never followed here).
    pub fn symlink(&self, target: &Path) -> io::Result<()> {
        calls::on_fd(Call::Symlink, &*self.dir, || nix::unistd::symlinkat(target, &self.dir, self.name.as_os_str()))
            .map_err(io_err)
    }

    /// The target of the symlink at the name.
    pub fn readlink(&self) -> io::Result<PathBuf> {
        nix::fcntl::readlinkat(&self.dir, self.name.as_os_str()).map(PathBuf::from).map_err(io_err)
    }

    /// Renames the name to `to` (same file system), replacing what is there.
    pub fn rename_to(&self, to: &At) -> io::Result<()> {
        let r = calls::on_fd(Call::Rename, &*to.dir, || {
            nix::fcntl::renameat(&self.dir, self.name.as_os_str(), &to.dir, to.name.as_os_str())
        });
        namespace_changed();
        r.map_err(io_err)
    }

    /// Renames the name to `to` unless `to` exists (EEXIST).
    pub fn rename_noreplace(&self, to: &At) -> io::Result<()> {
        let r = calls::on_fd(Call::Rename, &*to.dir, || {
            nix::fcntl::renameat2(
                &self.dir,
                self.name.as_os_str(),
                &to.dir,
                to.name.as_os_str(),
                nix::fcntl::RenameFlags::RENAME_NOREPLACE,
            )
        });
        namespace_changed();
        r.map_err(io_err)
    }

    /// Makes `to` a hard link of the name.
    pub fn link_to(&self, to: &At) -> io::Result<()> {
        calls::on_fd(Call::Link, &*to.dir, || {
            nix::unistd::linkat(
                &self.dir,
                self.name.as_os_str(),
                &to.dir,
                to.name.as_os_str(),
                nix::fcntl::AtFlags::empty(),
            )
        })
        .map_err(io_err)
    }

    /// Sets the permission bits (a symlink's cannot be set: EOPNOTSUPP, as on Linux).
    pub fn chmod(&self, mode: u32) -> io::Result<()> {
        let h = self.handle()?;
        if h.metadata()?.file_type().is_symlink() {
            return Err(io::Error::from_raw_os_error(nix::libc::EOPNOTSUPP));
        }
        // The O_PATH handle's /proc link names exactly this inode (it is not resolved again).
        calls::on_fd(Call::Attrs, &*self.dir, || {
            fs::set_permissions(proc_path(&h), fs::Permissions::from_mode(mode & 0o7777))
        })
    }

    /// Sets the owner and group (of a symlink itself).
    pub fn chown(&self, uid: Option<u32>, gid: Option<u32>) -> io::Result<()> {
        calls::on_fd(Call::Attrs, &*self.dir, || {
            nix::unistd::fchownat(
                &self.dir,
                self.name.as_os_str(),
                uid.map(nix::unistd::Uid::from_raw),
                gid.map(nix::unistd::Gid::from_raw),
                nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
            )
        })
        .map_err(io_err)
    }

    /// Sets access and modification times (`None` leaves one as it is).
    pub fn set_times(
        &self,
        atime: Option<nix::sys::time::TimeSpec>,
        mtime: Option<nix::sys::time::TimeSpec>,
    ) -> io::Result<()> {
        let omit = nix::sys::time::TimeSpec::UTIME_OMIT;
        calls::on_fd(Call::Attrs, &*self.dir, || {
            nix::sys::stat::utimensat(
                &self.dir,
                self.name.as_os_str(),
                &atime.unwrap_or(omit),
                &mtime.unwrap_or(omit),
                nix::sys::stat::UtimensatFlags::NoFollowSymlink,
            )
        })
        .map_err(io_err)
    }

    /// The extended attribute `attr` (`None` when it is not set).
    pub fn xattr_get(&self, attr: &OsStr) -> io::Result<Option<Vec<u8>>> {
        xattr::get_deref(proc_path(&self.handle()?), attr)
    }

    /// Sets the extended attribute `attr`.
    pub fn xattr_set(&self, attr: &OsStr, value: &[u8]) -> io::Result<()> {
        let h = self.handle()?;
        calls::on_fd(Call::Attrs, &*self.dir, || xattr::set_deref(proc_path(&h), attr, value))
    }

    /// Removes the extended attribute `attr`.
    pub fn xattr_remove(&self, attr: &OsStr) -> io::Result<()> {
        let h = self.handle()?;
        calls::on_fd(Call::Attrs, &*self.dir, || xattr::remove_deref(proc_path(&h), attr))
    }

    /// The names of the extended attributes set.
    pub fn xattr_list(&self) -> io::Result<Vec<OsString>> {
        Ok(xattr::list_deref(proc_path(&self.handle()?))?.collect())
    }

    /// Makes the directory's entries durable (after a create, rename or unlink in it).
    pub fn sync_dir(&self) -> io::Result<()> {
        calls::on_fd(Call::SyncDir, &*self.dir, || self.dir.sync_all())
    }
}

/// Makes the entries of the open directory `dir` durable.
pub fn sync_dir_handle(dir: &File) -> io::Result<()> {
    calls::on_fd(Call::SyncDir, dir, || dir.sync_all())
}

/// `/proc/self/fd/N` for an open handle: the kernel resolves it to exactly that open file
/// (a "magic link"), so a path-taking call through it cannot be redirected by a rename.
pub fn proc_path(f: &impl AsRawFd) -> PathBuf {
    PathBuf::from(format!("/proc/self/fd/{}", f.as_raw_fd()))
}

/// Lists the open directory `dir`: every name (without `.` and `..`) with its type, `None`
/// when the file system does not say (then the caller stats it).
pub fn list_dir(dir: &File) -> io::Result<Vec<(OsString, Option<nix::dir::Type>)>> {
    let fd = dir.try_clone()?;
    let mut d = nix::dir::Dir::from_fd(OwnedFd::from(fd)).map_err(io_err)?;
    let mut out = Vec::new();
    for e in d.iter() {
        let e = e.map_err(io_err)?;
        let name = e.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        use std::os::unix::ffi::OsStrExt;
        out.push((OsStr::from_bytes(name).to_os_string(), e.file_type()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> (tempfile::TempDir, tempfile::TempDir, File) {
        let (tier, outside) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        fs::create_dir_all(tier.path().join("a/b")).unwrap();
        fs::write(tier.path().join("a/b/f"), b"inside").unwrap();
        fs::write(outside.path().join("victim"), b"outside").unwrap();
        std::os::unix::fs::symlink(outside.path(), tier.path().join("a/link")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("victim"), tier.path().join("a/b/flink")).unwrap();
        let root = File::open(tier.path()).unwrap();
        (tier, outside, root)
    }

    /// A symlink anywhere on the path, or at its end, is refused: nothing outside the tier is
    /// ever opened, by openat2 or by the component walk.
    #[test]
    fn symlinks_never_lead_outside_the_tier() {
        let (_tier, outside, root) = setup();
        for walk in [false, true] {
            let open = |rel: &str, flags| {
                if walk {
                    let comps: Vec<&OsStr> = Path::new(rel).iter().collect();
                    walk_beneath(&root, &comps, flags)
                } else {
                    open_beneath(&root, Path::new(rel), flags)
                }
            };
            assert_eq!(fs::read_to_string(proc_path(&open("a/b/f", OFlag::O_RDONLY).unwrap())).unwrap(), "inside");
            let e = open("a/link/victim", OFlag::O_RDONLY).unwrap_err();
            assert!(
                matches!(e.raw_os_error(), Some(nix::libc::ELOOP | nix::libc::EXDEV | nix::libc::ENOTDIR)),
                "walk={walk}: {e}"
            );
            let e = open("a/b/flink", OFlag::O_RDONLY).unwrap_err();
            assert_eq!(e.raw_os_error(), Some(nix::libc::ELOOP), "walk={walk}: a final symlink is refused too");
        }
        for bad in ["../x", "/etc/passwd", "a/../../x", "./a"] {
            assert!(open_beneath(&root, Path::new(bad), OFlag::O_RDONLY).is_err(), "{bad}");
        }
        assert!(open_dir_beneath(&root, Path::new("a/link")).is_err(), "a symlink is no directory here");
        let dir = open_dir_beneath(&root, Path::new("a")).unwrap();
        let link = At::new(dir, OsStr::new("link")).unwrap();
        assert_eq!(link.unlink_if((0, 0)).unwrap_err().raw_os_error(), Some(nix::libc::ENOENT), "not that file");
        assert!(link.open(Access::Read).is_err() && link.open_dir().is_err());
        link.chown(Some(65534), Some(65534)).unwrap();
        assert!(link.chmod(0o777).is_err());
        link.set_times(None, Some(nix::sys::time::TimeSpec::new(1, 0))).unwrap();
        assert_eq!(link.metadata().unwrap().uid(), 65534, "the link itself changed");
        let victim = fs::metadata(outside.path().join("victim")).unwrap();
        assert_ne!(victim.uid(), 65534, "its target did not");
        assert_ne!(victim.mtime(), 1);
        assert_eq!(fs::read_to_string(outside.path().join("victim")).unwrap(), "outside");
    }

    /// An open directory follows renames: an operation on a name in it lands in the renamed
    /// directory, never at the old path (which may now be a symlink).
    #[test]
    fn an_open_directory_follows_its_renames() {
        let (tier, outside, root) = setup();
        let f = At::new(open_dir_beneath(&root, Path::new("a/b")).unwrap(), OsStr::new("f")).unwrap();
        let id = f.metadata().map(|m| (m.dev(), m.ino())).unwrap();
        fs::rename(tier.path().join("a/b"), tier.path().join("a/c")).unwrap();
        std::os::unix::fs::symlink(outside.path(), tier.path().join("a/b")).unwrap();
        fs::write(outside.path().join("f"), b"decoy").unwrap();
        f.unlink_if(id).unwrap();
        assert!(!tier.path().join("a/c/f").exists(), "the file in the renamed directory went");
        assert_eq!(fs::read_to_string(outside.path().join("f")).unwrap(), "decoy", "nothing outside changed");
        let names: Vec<OsString> =
            list_dir(&open_dir_beneath(&root, Path::new("a")).unwrap()).unwrap().into_iter().map(|e| e.0).collect();
        assert_eq!(names.len(), 3, "{names:?}");
    }

    #[test]
    fn names_must_be_one_normal_component() {
        let (_t, _o, root) = setup();
        for bad in ["", ".", "..", "a/b", "/x"] {
            assert!(At::new(root.try_clone().unwrap(), OsStr::new(bad)).is_err(), "{bad:?}");
        }
    }
}
