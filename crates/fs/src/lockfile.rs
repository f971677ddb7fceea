//! One daemon per tier pair: an exclusive lock on a file in each tier's root, held for the
//! mount's life, naming the process and mountpoint that hold it. Two daemons on the same tiers
//! would each move files under the other and race for the state store.

use std::fs::File;
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

use nix::fcntl::{Flock, FlockArg};
use tierwise_core::Tier;

use crate::tiers::{Access, At, Tiers};

/// The lock file's name in each tier's root (reserved: hidden from the mount).
pub const LOCK_FILE: &str = ".tierwise-lock";

/// The locks on both tiers.
#[derive(Debug)]
pub(crate) struct TierLocks {
    _held: Vec<Flock<File>>,
}

/// Why the tiers could not be locked.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another tierwise mount holds them.
    #[error("the {which} tier `{tier}` is already mounted by tierwise ({holder}); unmount that first")]
    InUse {
        /// `SSD` or `HDD`.
        which: &'static str,
        /// The tier's directory.
        tier: PathBuf,
        /// What the lock file says of its holder (pid and mountpoint).
        holder: String,
    },
    /// The lock file could not be made.
    #[error("locking the {which} tier `{tier}`: {source}")]
    Io {
        /// `SSD` or `HDD`.
        which: &'static str,
        /// The tier's directory.
        tier: PathBuf,
        /// The failure.
        #[source]
        source: std::io::Error,
    },
}

impl TierLocks {
    /// Locks both tiers for a mount on `mountpoint`, or says who holds them.
    pub(crate) fn acquire(tiers: &Tiers, mountpoint: Option<&Path>) -> Result<TierLocks, LockError> {
        let mut held = Vec::new();
        for tier in Tier::ALL {
            let which = if tier == Tier::Fast { "SSD" } else { "HDD" };
            let io = |source| LockError::Io { which, tier: tiers.root(tier).to_path_buf(), source };
            let file = tiers
                .root_dir(tier)
                .and_then(|root| At::new(root, std::ffi::OsStr::new(LOCK_FILE)))
                .and_then(|at| at.open(Access::ReadWriteCreate))
                .map_err(io)?;
            let mut lock = match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
                Ok(l) => l,
                Err((mut f, nix::errno::Errno::EWOULDBLOCK)) => {
                    let mut holder = String::new();
                    let _ = f.read_to_string(&mut holder);
                    let holder = holder.trim().replace('\n', ", ");
                    let holder = if holder.is_empty() { "another process".to_string() } else { holder };
                    return Err(LockError::InUse { which, tier: tiers.root(tier).to_path_buf(), holder });
                }
                Err((_, e)) => return Err(io(std::io::Error::from_raw_os_error(e as i32))),
            };
            let text = format!(
                "pid {}\nmountpoint {}\n",
                std::process::id(),
                mountpoint.map_or_else(|| "(none)".to_string(), |m| m.display().to_string())
            );
            lock.set_len(0).and_then(|()| lock.rewind()).and_then(|()| lock.write_all(text.as_bytes())).map_err(io)?;
            held.push(lock);
        }
        Ok(TierLocks { _held: held })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A second lock on the same tiers is refused and names the first holder; it is free
    /// again once the first is dropped.
    #[test]
    fn a_second_holder_is_refused_by_name() {
        let (a, b, m) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let tiers = Tiers::open(a.path(), b.path(), m.path()).unwrap();
        let first = TierLocks::acquire(&tiers, Some(Path::new("/mnt/one"))).unwrap();
        let e = TierLocks::acquire(&tiers, Some(Path::new("/mnt/two"))).unwrap_err().to_string();
        assert!(e.contains("already mounted") && e.contains("/mnt/one") && e.contains("pid"), "{e}");
        drop(first);
        TierLocks::acquire(&tiers, Some(Path::new("/mnt/two"))).unwrap();
    }
}
