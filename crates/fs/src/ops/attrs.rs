//! Attributes: mode, owner, times (`setattr`) and extended attributes, applied to every copy
//! under the file's lock (a move copies them, and must not copy old ones).

use std::ffi::OsStr;
use std::time::SystemTime;

use fuser::{Errno, FileAttr, TimeOrNow};
use nix::sys::time::TimeSpec;
use tierwise_core::Tier;

use crate::control;
use crate::inodes::ROOT;
use crate::shared::{Shared, errno, lock, read_lock};
use crate::tiers::At;

/// What a `setattr` changes besides the size.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Change {
    pub(crate) mode: Option<u32>,
    pub(crate) uid: Option<u32>,
    pub(crate) gid: Option<u32>,
    pub(crate) atime: Option<TimeOrNow>,
    pub(crate) mtime: Option<TimeOrNow>,
}

fn timespec(t: Option<TimeOrNow>) -> Option<TimeSpec> {
    t.map(|t| match t {
        TimeOrNow::Now => TimeSpec::UTIME_NOW,
        TimeOrNow::SpecificTime(st) => {
            let d = st.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
            TimeSpec::new(d.as_secs() as i64, i64::from(d.subsec_nanos()))
        }
    })
}

/// Every copy of inode `ino` (both tiers for a directory).
fn copies_of(s: &Shared, ino: u64) -> Result<Vec<At>, Errno> {
    let node = s.node(ino)?;
    let mut out = Vec::new();
    for t in Tier::ALL {
        let at = s.at_any(ino, t);
        match at {
            Ok(at) if (node.dir || ino == ROOT) && at.is_dir() => out.push(at),
            Ok(at) if !(node.dir || ino == ROOT) && at.exists() => out.push(at),
            _ => {}
        }
    }
    Ok(out)
}

/// Applies `change` (and a truncation to `size`) to inode `ino`.
pub(crate) fn setattr(
    s: &Shared,
    ino: u64,
    size: Option<u64>,
    change: Change,
    kill_setid: bool,
) -> Result<FileAttr, Errno> {
    if s.cfg.read_only
        && (size.is_some()
            || change.mode.is_some()
            || change.uid.is_some()
            || change.gid.is_some()
            || change.atime.is_some()
            || change.mtime.is_some())
    {
        return Err(Errno::EROFS);
    }
    if let Some(size) = size {
        super::data::truncate(s, ino, size, kill_setid)?;
    }
    let file_lock = s.file_lock(ino);
    let _g = s.access_lock(ino, &file_lock);
    if change.mode.is_some() {
        lock(&s.privs_clear).remove(&ino);
    }
    for at in copies_of(s, ino)? {
        if let Some(m) = change.mode {
            at.chmod(m).map_err(|e| errno(&e))?;
        }
        if change.uid.is_some() || change.gid.is_some() {
            at.chown(change.uid, change.gid).map_err(|e| errno(&e))?;
        }
        if change.atime.is_some() || change.mtime.is_some() {
            at.set_times(timespec(change.atime), timespec(change.mtime)).map_err(|e| errno(&e))?;
        }
    }
    s.attr_locked(ino)
}

/// Sets extended attribute `name` on every copy of `ino`, or runs a control command.
pub(crate) fn setxattr(s: &Shared, ino: u64, name: &OsStr, value: &[u8], uid: u32) -> Result<(), Errno> {
    if let Some(r) = s.control_set(ino, name, value, uid) {
        return r;
    }
    if s.cfg.read_only {
        return Err(Errno::EROFS);
    }
    lock(&s.privs_clear).remove(&ino);
    // Under the file's lock: a move copies attributes, and must not copy the old ones.
    let file_lock = s.file_lock(ino);
    let _g = s.access_lock(ino, &file_lock);
    for at in copies_of(s, ino)? {
        at.xattr_set(name, value).map_err(|e| errno(&e))?;
    }
    Ok(())
}

/// The value of extended attribute `name` of `ino`, or of a control attribute.
pub(crate) fn getxattr(s: &Shared, ino: u64, name: &OsStr) -> Result<Vec<u8>, Errno> {
    if name == control::XATTR_TIER {
        Ok(s.tier_label(ino).as_bytes().to_vec())
    } else if name == control::XATTR_PIN {
        match read_lock(&s.pins).get(&ino) {
            Some(Tier::Fast) => Ok(b"ssd".to_vec()),
            Some(Tier::Slow) => Ok(b"hdd".to_vec()),
            None => Err(Errno::NO_XATTR),
        }
    } else if name == control::XATTR_STATS && ino == ROOT {
        serde_json::to_vec_pretty(&s.snapshot()).map_err(|_| Errno::EIO)
    } else if name == "user.tierwise.debug" {
        Ok(lock(&s.events)
            .get(&ino)
            .map(|q| q.iter().cloned().collect::<Vec<_>>().join("\n"))
            .unwrap_or_default()
            .into_bytes())
    } else {
        let file_lock = s.file_lock(ino);
        let _g = s.access_lock(ino, &file_lock);
        let node = s.node(ino)?;
        match s.meta_at(ino, &node)?.xattr_get(name) {
            Ok(Some(v)) => Ok(v),
            Ok(None) => Err(Errno::NO_XATTR),
            Err(e) => Err(errno(&e)),
        }
    }
}

/// The names of `ino`'s extended attributes (with tierwise's `user.tierwise.tier`).
pub(crate) fn listxattr(s: &Shared, ino: u64) -> Result<Vec<u8>, Errno> {
    let file_lock = s.file_lock(ino);
    let _g = s.access_lock(ino, &file_lock);
    let node = s.node(ino)?;
    let mut out: Vec<u8> = format!("{}\0", control::XATTR_TIER).into_bytes();
    for name in s.meta_at(ino, &node)?.xattr_list().map_err(|e| errno(&e))? {
        out.extend_from_slice(name.as_encoded_bytes());
        out.push(0);
    }
    Ok(out)
}

/// Removes extended attribute `name` from every copy of `ino` (the pin attribute: unpins).
pub(crate) fn removexattr(s: &Shared, ino: u64, name: &OsStr, uid: u32) -> Result<(), Errno> {
    if name == control::XATTR_PIN {
        return s.control_set(ino, name, b"none", uid).unwrap_or(Err(Errno::EINVAL));
    }
    if s.cfg.read_only {
        return Err(Errno::EROFS);
    }
    lock(&s.privs_clear).remove(&ino);
    let file_lock = s.file_lock(ino);
    let _g = s.access_lock(ino, &file_lock);
    let mut removed = false;
    for at in copies_of(s, ino)? {
        if at.xattr_remove(name).is_ok() {
            removed = true;
        }
    }
    if removed { Ok(()) } else { Err(Errno::NO_XATTR) }
}
