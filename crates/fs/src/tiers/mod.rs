//! The two tier directories: where a relative path lives on each, the move protocol, and the
//! scan that adopts existing trees.
//!
//! Every file lives at the same relative path on whichever tier holds it, so both trees stay
//! readable without tierwise, and every directory exists on both tiers. A move copies the file
//! to a hidden temporary name next to its destination (`.tierwise-tmp-INO`), syncs it, renames
//! it into place (atomic on one file system), syncs the directory, and only then removes the
//! source. A crash at any point leaves either the source alone (plus a temporary file that the
//! next mount deletes), or two identical copies (which the next mount resolves: see
//! [`Tiers::scan`]).
//!
//! Nothing here follows a symlink or leaves a tier: every operation goes through [`at`], which
//! resolves relative paths from the tier's root with `openat2(RESOLVE_BENEATH |
//! RESOLVE_NO_SYMLINKS)` and acts on the final name without following it.

pub mod at;
pub mod backend;
pub mod calls;
mod copy;
#[cfg(test)]
mod fault_tests;
mod rename;
mod scan;

use std::cell::{Cell, RefCell};
use std::ffi::OsStr;
use std::fs::{self, File};
use std::io;
use std::os::fd::AsFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

pub use at::{Access, At};
pub use backend::{Backend, Direct};
pub use copy::CopyPlan;
use nix::fcntl::OFlag;
use nix::sys::stat::Mode;
pub use scan::Found;
use tierwise_core::Tier;

thread_local! {
    /// Inside an [`OperationScope`] on this thread: the tiers (fast first) whose root has been
    /// checked since it began. Outside one (movers, recovery, tests): `None`, every access checks.
    static ROOTS_CHECKED: Cell<Option<[bool; 2]>> = const { Cell::new(None) };
    /// Inside an [`OperationScope`]: the directories it opened by path, reused by its later
    /// accesses to names in them (a create resolved the same parent five times).
    static OPEN_DIRS: RefCell<Vec<OpenDir>> = const { RefCell::new(Vec::new()) };
}

/// A directory an operation opened by path.
struct OpenDir {
    /// The tier root it was resolved from (as a descriptor number: one per mount).
    root: std::os::fd::RawFd,
    rel: PathBuf,
    /// [`at::namespace_changes`] before it was opened: any rename or rmdir since, and the path
    /// may name another directory now.
    changes: u64,
    dir: Arc<File>,
}

/// Directories one operation keeps open at most.
const OPEN_DIRS_KEPT: usize = 8;

/// One operation of the file system on this thread. A tier's root is checked (one stat of its
/// path) at the operation's first access to that tier instead of at every access: a create
/// touched the roots ~20 times. A tier lost while an operation runs is noticed by the next
/// operation, which is no later than a check at every access could promise, since the loss
/// can as well come just after the check.
#[derive(Debug)]
pub struct OperationScope(());

impl OperationScope {
    /// Begins an operation on this thread (until the value is dropped).
    pub fn enter() -> OperationScope {
        ROOTS_CHECKED.set(Some([false; 2]));
        OperationScope(())
    }
}

impl Drop for OperationScope {
    fn drop(&mut self) {
        ROOTS_CHECKED.set(None);
        OPEN_DIRS.with_borrow_mut(Vec::clear);
    }
}

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
    /// The roots, opened at mount (fast first): paths are resolved from these once a cheap
    /// check of the path says the root is still the same directory.
    root_fds: [Arc<File>; 2],
    /// What moves do their steps through ([`Direct`] unless a test injects faults).
    backend: Arc<dyn Backend>,
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
    #[error("the mountpoint `{0}` is inside the tier `{1}`; mount it somewhere else")]
    MountInsideTier(PathBuf, PathBuf),
    /// A tier is inside the mountpoint (the mount would hide the tier under itself).
    #[error("the tier `{1}` is inside the mountpoint `{0}`; keep the tiers outside the directory you mount on")]
    TierInsideMount(PathBuf, PathBuf),
}

impl Tiers {
    /// Checks the two directories and the mountpoint and returns them canonical.
    pub fn open(ssd: &Path, hdd: &Path, mountpoint: &Path) -> Result<Tiers, TierError> {
        let canon = |which: &'static str, p: &Path| -> Result<PathBuf, TierError> {
            let bad = |why: String| TierError::Bad { which, path: p.to_path_buf(), why };
            let c = fs::canonicalize(p).map_err(|e| {
                if e.kind() == io::ErrorKind::NotFound { bad("does not exist".into()) } else { bad(e.to_string()) }
            })?;
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
                if m.starts_with(t) {
                    return Err(TierError::MountInsideTier(m, t.clone()));
                }
                if t.starts_with(&m) {
                    return Err(TierError::TierInsideMount(m, t.clone()));
                }
            }
        }
        let open = |which: &'static str, p: &Path| -> Result<(Arc<File>, (u64, u64)), TierError> {
            let bad = |why: String| TierError::Bad { which, path: p.to_path_buf(), why };
            let f = nix::fcntl::open(p, OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC, Mode::empty())
                .map(File::from)
                .map_err(|e| bad(e.to_string()))?;
            let m = f.metadata().map_err(|e| bad(e.to_string()))?;
            Ok((Arc::new(f), (m.dev(), m.ino())))
        };
        let ((ssd_fd, ssd_id), (hdd_fd, hdd_id)) = (open("ssd", &ssd)?, open("hdd", &hdd)?);
        Ok(Tiers { ssd, hdd, roots: [ssd_id, hdd_id], root_fds: [ssd_fd, hdd_fd], backend: Arc::new(Direct) })
    }

    /// The same tiers with moves done through `backend` (fault injection in tests).
    pub fn with_backend(mut self, backend: Arc<dyn Backend>) -> Tiers {
        self.backend = backend;
        self
    }

    /// Device and inode of `tier`'s root as it was at mount.
    pub fn root_id(&self, tier: Tier) -> (u64, u64) {
        self.roots[tier.index()]
    }

    /// Opens `tier`'s root, checking it is still the directory it was at mount: its file
    /// system may have been unmounted (the path then names the empty mountpoint underneath), or
    /// the directory removed. EIO then: tierwise must never create anything there.
    pub fn root_dir(&self, tier: Tier) -> io::Result<File> {
        self.checked_root(tier)?.try_clone()
    }

    /// The root of `tier` as opened at mount, after checking that its path still names it
    /// (one stat). EIO when it is lost (see [`Tiers::root_dir`]).
    fn checked_root(&self, tier: Tier) -> io::Result<&File> {
        let i = tier.index();
        let scope = ROOTS_CHECKED.get();
        if scope.is_some_and(|checked| checked[i]) {
            return Ok(&self.root_fds[i]);
        }
        let id = fs::metadata(self.root(tier)).map(|m| (m.dev(), m.ino()));
        if id.ok() != Some(self.roots[i]) {
            return Err(io::Error::from_raw_os_error(nix::libc::EIO));
        }
        if let Some(mut checked) = scope {
            checked[i] = true;
            ROOTS_CHECKED.set(Some(checked));
        }
        Ok(&self.root_fds[i])
    }

    /// Whether `tier`'s root is still the directory it was at mount (see [`Tiers::root_dir`]).
    pub fn root_intact(&self, tier: Tier) -> bool {
        self.checked_root(tier).is_ok()
    }

    /// Fails with EIO when `tier`'s root is lost (see [`Tiers::root_dir`]).
    pub fn check_root(&self, tier: Tier) -> io::Result<()> {
        self.checked_root(tier).map(drop)
    }

    /// The root of `tier` (for messages and the state directory: tier files are never opened
    /// by path).
    pub fn root(&self, tier: Tier) -> &Path {
        match tier {
            Tier::Fast => &self.ssd,
            Tier::Slow => &self.hdd,
        }
    }

    /// Where `rel` is on `tier`, for messages only.
    pub fn display(&self, tier: Tier, rel: &Path) -> PathBuf {
        self.root(tier).join(rel)
    }

    /// The directory `rel` on `tier` (`rel` empty: the root), opened without following any
    /// symlink.
    pub fn dir(&self, tier: Tier, rel: &Path) -> io::Result<File> {
        if rel.as_os_str().is_empty() {
            return self.root_dir(tier);
        }
        at::open_dir_beneath(self.checked_root(tier)?, rel)
    }

    /// The directory `rel` on `tier` for names in it (never listed or read through: it may be
    /// shared). Inside an [`OperationScope`], a directory the operation opened before is
    /// reused unless something was renamed or removed since.
    fn dir_for_names(&self, tier: Tier, rel: &Path) -> io::Result<Arc<File>> {
        let root = self.checked_root(tier)?;
        if rel.as_os_str().is_empty() {
            return Ok(Arc::clone(&self.root_fds[tier.index()]));
        }
        if ROOTS_CHECKED.get().is_none() {
            return Ok(Arc::new(at::open_dir_beneath(root, rel)?));
        }
        use std::os::fd::AsRawFd;
        let root_fd = root.as_raw_fd();
        let changes = at::namespace_changes();
        let kept = OPEN_DIRS.with_borrow(|dirs| {
            dirs.iter().find(|d| d.root == root_fd && d.changes == changes && d.rel == rel).map(|d| Arc::clone(&d.dir))
        });
        if let Some(dir) = kept {
            return Ok(dir);
        }
        let dir = Arc::new(at::open_dir_beneath(root, rel)?);
        OPEN_DIRS.with_borrow_mut(|dirs| {
            dirs.retain(|d| d.changes == changes);
            if dirs.len() >= OPEN_DIRS_KEPT {
                dirs.remove(0);
            }
            dirs.push(OpenDir { root: root_fd, rel: rel.to_path_buf(), changes, dir: Arc::clone(&dir) });
        });
        Ok(dir)
    }

    /// The name `rel` on `tier`: its parent directory opened without following any symlink.
    /// `rel` must have at least one component (the root is [`Tiers::dir`]).
    pub fn at(&self, tier: Tier, rel: &Path) -> io::Result<At> {
        let (parent, name) = split(rel)?;
        At::in_dir(self.dir_for_names(tier, parent)?, name)
    }

    /// Metadata of `rel` on `tier` (the root for an empty `rel`), not following a final symlink.
    pub fn metadata(&self, tier: Tier, rel: &Path) -> io::Result<fs::Metadata> {
        if rel.as_os_str().is_empty() {
            return self.checked_root(tier)?.metadata();
        }
        self.at(tier, rel)?.metadata()
    }

    /// Whether `rel` exists on `tier` (without following a final symlink).
    pub fn exists(&self, tier: Tier, rel: &Path) -> bool {
        self.at(tier, rel).is_ok_and(|a| a.exists())
    }

    /// Whether `rel` is a directory on `tier` (not a symlink to one).
    pub fn is_dir(&self, tier: Tier, rel: &Path) -> bool {
        if rel.as_os_str().is_empty() {
            return self.root_intact(tier);
        }
        self.at(tier, rel).is_ok_and(|a| a.is_dir())
    }

    /// The parent directory of `rel` on `tier`, created (with the owner and mode of the same
    /// directory on the other tier) where missing. A directory is only ever created as a copy
    /// of one the other tier has at that moment, so a stale path cannot bring a renamed-away
    /// directory back. EIO when the tier's root is lost.
    pub fn parent_dir(&self, tier: Tier, rel: &Path) -> io::Result<File> {
        let (parent, _) = split(rel)?;
        self.mirror_dir(tier, parent)
    }

    /// The name `rel` on `tier`, its parent directory created as in [`Tiers::parent_dir`].
    pub fn at_creating(&self, tier: Tier, rel: &Path) -> io::Result<At> {
        let (parent, name) = split(rel)?;
        // Usually the parent is there: then it is opened as for any name (and reused).
        match self.dir_for_names(tier, parent) {
            Ok(dir) => At::in_dir(dir, name),
            Err(e) if e.kind() == io::ErrorKind::NotFound => At::new(self.mirror_dir(tier, parent)?, name),
            Err(e) => Err(e),
        }
    }

    /// The directory `rel` on `tier`, each missing component created as a copy of the other
    /// tier's (see [`Tiers::parent_dir`]).
    pub fn mirror_dir(&self, tier: Tier, rel: &Path) -> io::Result<File> {
        let mut cur = self.root_dir(tier)?;
        // The other tier's matching directory, opened only when something must be created.
        let mut other: Option<File> = None;
        let mut done = PathBuf::new();
        for c in rel.components() {
            let Component::Normal(name) = c else { return Err(io::Error::from_raw_os_error(nix::libc::EINVAL)) };
            done.push(name);
            let here = At::new(cur.try_clone()?, name)?;
            let next = match here.open_dir() {
                Ok(d) => {
                    other = None;
                    d
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    let model = match other.take() {
                        Some(o) => At::new(o, name)?.open_dir()?,
                        None => self.dir(tier.other(), &done)?,
                    };
                    let m = model.metadata()?;
                    match here.make_dir(m.mode(), Some((m.uid(), m.gid()))) {
                        Ok(()) => {
                            // The new entry must survive a crash before anything is put in it.
                            here.sync_dir()?;
                        }
                        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                        Err(e) => return Err(e),
                    }
                    other = Some(model);
                    here.open_dir()?
                }
                Err(e) => return Err(e),
            };
            cur = next;
        }
        Ok(cur)
    }

    /// Creates `rel` on `tier` empty, replacing a stale file there, with the owner, mode and
    /// extended attributes of the copy on the other tier (when there is one): a new copy of the
    /// same file, not a new file.
    pub fn recreate(&self, tier: Tier, rel: &Path) -> io::Result<()> {
        let here = self.at_creating(tier, rel)?;
        let f = here.open(Access::CreateTruncate)?;
        if let Ok(model) = self.at(tier.other(), rel).and_then(|a| a.open(Access::Read)) {
            calls::on_fd(calls::Call::Attrs, &f, || copy::copy_metadata(&model, &model.metadata()?, &f))?;
        }
        Ok(())
    }

    /// Removes `rel` from `tier` (a move's source, or a dropped copy) and syncs its directory.
    /// Nothing there is fine.
    pub fn remove(&self, tier: Tier, rel: &Path) -> io::Result<()> {
        let a = match self.at(tier, rel) {
            Ok(a) => a,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        };
        match a.unlink() {
            Ok(()) => a.sync_dir(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Makes everything written to `tier`'s file system durable (`syncfs`).
    pub fn sync_fs(&self, tier: Tier) -> io::Result<()> {
        let root = self.checked_root(tier)?;
        calls::on_fd(calls::Call::SyncFs, root, || {
            nix::unistd::syncfs(root).map_err(|e| io::Error::from_raw_os_error(e as i32))
        })
    }

    /// Statistics of `tier`'s file system.
    pub fn statvfs(&self, tier: Tier) -> io::Result<nix::sys::statvfs::Statvfs> {
        let root = self.checked_root(tier)?;
        nix::sys::statvfs::fstatvfs(root.as_fd()).map_err(|e| io::Error::from_raw_os_error(e as i32))
    }
}

/// `rel` as (parent, name); EINVAL for an empty path.
fn split(rel: &Path) -> io::Result<(&Path, &OsStr)> {
    match (rel.parent(), rel.file_name()) {
        (Some(p), Some(n)) => Ok((p, n)),
        _ => Err(io::Error::from_raw_os_error(nix::libc::EINVAL)),
    }
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
        assert!(tiers.parent_dir(Tier::Slow, Path::new("d/f")).is_err(), "nothing is created there");
        assert!(!b.path().join("d").exists());
    }

    /// Tiers inside the mountpoint and a mountpoint inside a tier are told apart.
    #[test]
    fn overlaps_with_the_mountpoint_are_named_the_right_way_round() {
        let root = tempfile::tempdir().unwrap();
        for t in ["ssd", "hdd"] {
            fs::create_dir(root.path().join(t)).unwrap();
        }
        let e = Tiers::open(&root.path().join("ssd"), &root.path().join("hdd"), root.path()).unwrap_err();
        assert!(matches!(e, TierError::TierInsideMount(..)), "{e}");
        assert!(e.to_string().contains("is inside the mountpoint"), "{e}");
        fs::create_dir(root.path().join("ssd/m")).unwrap();
        let e =
            Tiers::open(&root.path().join("ssd"), &root.path().join("hdd"), &root.path().join("ssd/m")).unwrap_err();
        assert!(matches!(e, TierError::MountInsideTier(..)), "{e}");
        let e = Tiers::open(&root.path().join("nope"), &root.path().join("hdd"), root.path()).unwrap_err();
        assert!(e.to_string().contains("does not exist"), "{e}");
    }

    /// A directory is created on one tier only as a copy of the other tier's: once both are
    /// renamed away, a stale path creates nothing (no ghost directory).
    #[test]
    fn directories_are_mirrored_never_invented() {
        use std::os::unix::fs::PermissionsExt;
        let (a, b, m) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let tiers = Tiers::open(a.path(), b.path(), m.path()).unwrap();
        fs::create_dir_all(b.path().join("d/e")).unwrap();
        fs::set_permissions(b.path().join("d"), fs::Permissions::from_mode(0o751)).unwrap();
        tiers.parent_dir(Tier::Fast, Path::new("d/e/f")).unwrap();
        assert!(a.path().join("d/e").is_dir());
        assert_eq!(fs::metadata(a.path().join("d")).unwrap().permissions().mode() & 0o7777, 0o751);
        fs::rename(a.path().join("d"), a.path().join("x")).unwrap();
        fs::rename(b.path().join("d"), b.path().join("x")).unwrap();
        let e = tiers.parent_dir(Tier::Fast, Path::new("d/e/f")).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        assert!(!a.path().join("d").exists(), "no ghost directory");
    }

    /// Inside one operation a root is checked once and a parent directory opened once; a
    /// rename or rmdir through the tiers (from any thread) makes the next access resolve its
    /// path again, and the next operation checks the roots again.
    #[test]
    fn an_operation_checks_each_root_once_and_reopens_directories_after_a_rename() {
        let (a, b, m) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let tiers = Tiers::open(a.path(), b.path(), m.path()).unwrap();
        fs::create_dir(a.path().join("d")).unwrap();
        fs::write(a.path().join("d/f"), b"one").unwrap();
        {
            let _op = OperationScope::enter();
            let first = tiers.at(Tier::Fast, Path::new("d/f")).unwrap();
            let again = tiers.at(Tier::Fast, Path::new("d/f")).unwrap();
            use std::os::fd::AsRawFd;
            assert_eq!(first.dir().as_raw_fd(), again.dir().as_raw_fd(), "the parent is opened once per operation");
            // Renamed through the tiers (another thread could have done it): `d` is reopened.
            let from = tiers.at(Tier::Fast, Path::new("d")).unwrap();
            from.rename_to(&tiers.at(Tier::Fast, Path::new("e")).unwrap()).unwrap();
            fs::create_dir(a.path().join("d")).unwrap();
            let e = tiers.at(Tier::Fast, Path::new("d/f")).unwrap().metadata().unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::NotFound, "the new `d` is looked in, not the renamed one");
            // The root was checked at the operation's first access: a loss now shows in the next.
            fs::rename(a.path(), m.path().join("moved")).unwrap();
            assert!(tiers.check_root(Tier::Fast).is_ok());
        }
        assert_eq!(tiers.check_root(Tier::Fast).unwrap_err().raw_os_error(), Some(nix::libc::EIO));
        // Outside an operation (movers, recovery) every access checks.
        fs::rename(m.path().join("moved"), a.path()).unwrap();
        assert!(tiers.check_root(Tier::Fast).is_ok());
        assert_eq!(fs::read(a.path().join("e/f")).unwrap(), b"one");
    }
}
