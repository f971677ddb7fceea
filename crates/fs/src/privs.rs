//! Set-id bits and file capabilities, which a write or truncate by an unprivileged user must
//! clear. The kernel leaves that to us (FUSE_HANDLE_KILLPRIV_V2); the daemon writes as root,
//! which would otherwise keep them.

use std::ffi::OsStr;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::sync::atomic::Ordering;

use tierwise_core::Tier;

use crate::shared::{Shared, lock};
use crate::tiers::At;

/// File capabilities, which a write clears.
pub(crate) const CAPABILITY_XATTR: &str = "security.capability";

/// Whether the file at `at` has set-id bits or capabilities (which a write must clear).
pub(crate) fn has_privs(at: &At) -> bool {
    use nix::libc::{S_ISGID, S_ISUID};
    at.metadata().map_or(true, |m| m.mode() & (S_ISUID | S_ISGID) != 0)
        || at.xattr_get(OsStr::new(CAPABILITY_XATTR)).ok().flatten().is_some()
}

impl Shared {
    /// What a write or truncate must clear on the copies of file `ino` on `tiers`: file
    /// capabilities always, and when `kill_setid` (the writer lacks CAP_FSETID) set-user-ID,
    /// and set-group-ID where the group may execute, as the VFS does for a local writer.
    pub(crate) fn kill_privs(&self, ino: u64, tiers: &[Tier], kill_setid: bool) -> io::Result<()> {
        use nix::libc::{S_ISGID, S_ISUID, S_IXGRP};
        if !self.killpriv.load(Ordering::Acquire) || lock(&self.privs_clear).contains(&ino) {
            return Ok(());
        }
        let mut setid_left = false;
        for &t in tiers {
            let at = self.at(ino, t).map_err(|e| io::Error::from_raw_os_error(e.code()))?;
            let mode = at.metadata()?.mode();
            let mut new = mode;
            if kill_setid {
                new &= !S_ISUID;
                if mode & S_IXGRP != 0 {
                    new &= !S_ISGID;
                }
            }
            if new != mode {
                at.chmod(new)?;
            }
            setid_left |= new & (S_ISUID | S_ISGID) != 0;
            match at.xattr_remove(OsStr::new(CAPABILITY_XATTR)) {
                Err(e) if !matches!(e.raw_os_error(), Some(nix::libc::ENODATA | nix::libc::EOPNOTSUPP)) => {
                    return Err(e);
                }
                _ => {}
            }
        }
        if !setid_left {
            lock(&self.privs_clear).insert(ino);
        }
        Ok(())
    }
}
