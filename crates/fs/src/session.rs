//! Mounting: as root, tierwise makes the mount itself, so the mount table names it
//! `fuse.tierwise` with the tiers as its source (`df`, `findmnt -t fuse.tierwise` and `mount -a`
//! see what it is); other users go through fusermount3, which does the same.

use std::fs::OpenOptions;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use fuser::{MountOption, SessionACL};

use crate::HybridFs;

/// The file system type in the mount table.
pub const FS_TYPE: &str = "fuse.tierwise";

/// A FUSE session for `fs` mounted on `mountpoint` with `cfg` (its `FSName` option is the
/// source). Nothing unmounts it on drop: [`unmount`] does, or the kernel when the daemon dies.
pub fn mount_session(fs: HybridFs, mountpoint: &Path, cfg: &fuser::Config) -> io::Result<fuser::Session<HybridFs>> {
    let shared = std::sync::Arc::clone(&fs.shared);
    let session = new_session(fs, mountpoint, cfg)?;
    // Cached pages are dropped by notification, when no writer can be racing the drop. What
    // they need of the file comes through weak references: the page cache is part of `shared`.
    let (opens, sizes) = (std::sync::Arc::downgrade(&shared), std::sync::Arc::downgrade(&shared));
    // The opener is counted before it drops pages.
    let others_open = move |ino| {
        opens.upgrade().is_none_or(|s| crate::shared::lock(&s.open_counts).get(&ino).is_some_and(|&n| n > 1))
    };
    let size_of = move |ino| sizes.upgrade().and_then(|s| s.attr_locked(ino).ok()).map(|a| a.size);
    shared.page_cache.start(session.notifier(), cfg.n_threads.unwrap_or(1), others_open, size_of);
    Ok(session)
}

fn new_session(fs: HybridFs, mountpoint: &Path, cfg: &fuser::Config) -> io::Result<fuser::Session<HybridFs>> {
    if nix::unistd::geteuid().is_root() {
        match mount_direct(mountpoint, cfg) {
            Ok(dev) => return fuser::Session::from_fd(fs, dev, cfg.acl, cfg.clone()),
            // Root without CAP_SYS_ADMIN (a container): fusermount3 may still do it.
            Err(e) if e.raw_os_error() == Some(nix::libc::EPERM) => {}
            Err(e) => return Err(e),
        }
    }
    let mut cfg = cfg.clone();
    if !cfg.mount_options.iter().any(|o| matches!(o, MountOption::Subtype(_))) {
        cfg.mount_options.push(MountOption::Subtype("tierwise".into()));
    }
    fuser::Session::new(fs, mountpoint, &cfg)
}

/// mount(2) of a new FUSE connection: the `/dev/fuse` descriptor serving it.
fn mount_direct(mountpoint: &Path, cfg: &fuser::Config) -> io::Result<OwnedFd> {
    use nix::mount::MsFlags;
    let dev = OpenOptions::new().read(true).write(true).open("/dev/fuse")?;
    let rootmode = std::fs::metadata(mountpoint)?.mode() & nix::libc::S_IFMT;
    let mut data = format!(
        "fd={},rootmode={rootmode:o},user_id={},group_id={}",
        dev.as_raw_fd(),
        nix::unistd::getuid(),
        nix::unistd::getgid()
    );
    let mut flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV;
    let mut source = "tierwise".to_string();
    for o in &cfg.mount_options {
        match o {
            MountOption::FSName(s) => source.clone_from(s),
            MountOption::DefaultPermissions => data.push_str(",default_permissions"),
            MountOption::RO => flags |= MsFlags::MS_RDONLY,
            MountOption::NoAtime => flags |= MsFlags::MS_NOATIME,
            MountOption::NoExec => flags |= MsFlags::MS_NOEXEC,
            MountOption::Sync => flags |= MsFlags::MS_SYNCHRONOUS,
            _ => {}
        }
    }
    if matches!(cfg.acl, SessionACL::All | SessionACL::RootAndOwner) {
        data.push_str(",allow_other");
    }
    nix::mount::mount(Some(source.as_str()), mountpoint, Some(FS_TYPE), flags, Some(data.as_str()))
        .map_err(|e| io::Error::from_raw_os_error(e as i32))?;
    Ok(OwnedFd::from(dev))
}

/// Unmounts `mountpoint`: at once, or while files are open there, detached (it disappears from
/// the namespace now and ends when they are closed). Returns whether it had to detach.
pub fn unmount(mountpoint: &Path) -> io::Result<bool> {
    use nix::mount::{MntFlags, umount2};
    match umount2(mountpoint, MntFlags::empty()) {
        Ok(()) | Err(nix::errno::Errno::EINVAL) => Ok(false),
        Err(nix::errno::Errno::EBUSY) => {
            umount2(mountpoint, MntFlags::MNT_DETACH).map_err(|e| io::Error::from_raw_os_error(e as i32))?;
            Ok(true)
        }
        Err(nix::errno::Errno::EPERM) => {
            // Not root: fusermount3 unmounts what its user mounted.
            let st = std::process::Command::new("fusermount3").arg("-u").arg("-z").arg(mountpoint).status()?;
            if st.success() { Ok(false) } else { Err(io::Error::other(format!("fusermount3 -u: {st}"))) }
        }
        Err(e) => Err(io::Error::from_raw_os_error(e as i32)),
    }
}
