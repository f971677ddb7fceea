//! The mount table (`/proc/self/mountinfo`): which mount a path is on, and whether it is a
//! tierwise mount.

use std::fs;
use std::path::{Path, PathBuf};

/// One mount.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MountEntry {
    /// Where it is mounted.
    pub mountpoint: PathBuf,
    /// Its type, e.g. `fuse.tierwise`, `ext4`.
    pub fstype: String,
    /// Its source (for a tierwise mount: the tiers as given).
    pub source: String,
}

impl MountEntry {
    /// Whether it is a tierwise mount.
    pub fn is_tierwise(&self) -> bool {
        self.fstype == "fuse.tierwise"
    }
}

/// A mountinfo field with its octal escapes (`\040` for a space) decoded.
fn unescape(field: &str) -> String {
    let b = field.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && b.get(i + 1..i + 4).is_some_and(|d| d.iter().all(|c| (b'0'..=b'7').contains(c))) {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Parses mountinfo text.
pub fn parse(text: &str) -> Vec<MountEntry> {
    text.lines()
        .filter_map(|l| {
            // ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTIONS
            let (head, tail) = l.split_once(" - ")?;
            let mountpoint = head.split(' ').nth(4)?;
            let mut t = tail.split(' ');
            let fstype = t.next()?;
            let source = t.next().unwrap_or("");
            Some(MountEntry {
                mountpoint: PathBuf::from(unescape(mountpoint)),
                fstype: unescape(fstype),
                source: unescape(source),
            })
        })
        .collect()
}

/// The current mounts.
pub fn mounts() -> Vec<MountEntry> {
    fs::read_to_string("/proc/self/mountinfo").map(|t| parse(&t)).unwrap_or_default()
}

/// The mount mounted exactly on `mountpoint` (the last one, as it hides those below).
/// Only the parent is resolved: the mountpoint itself may be served by a stuck daemon.
pub fn mounted_on(mountpoint: &Path) -> Option<MountEntry> {
    let parent = mountpoint.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = mountpoint.file_name();
    let canon = match name {
        Some(name) => fs::canonicalize(parent).ok()?.join(name),
        // `/`, `..`: nothing to fear from resolving it whole.
        None => fs::canonicalize(mountpoint).ok()?,
    };
    mounts().into_iter().rev().find(|m| m.mountpoint == canon)
}

/// Whether `mountpoint` is a live tierwise mount.
pub fn is_tierwise_mount(mountpoint: &Path) -> bool {
    mounted_on(mountpoint).is_some_and(|m| m.is_tierwise())
}

/// The mount that holds the (already resolved, absolute) path `path`: the longest mountpoint
/// it is under.
pub fn mount_of(path: &Path) -> Option<MountEntry> {
    mounts()
        .into_iter()
        .enumerate()
        .filter(|(_, m)| path.starts_with(&m.mountpoint))
        // The deepest mountpoint, and of those the last mounted (it hides the others).
        .max_by_key(|(i, m)| (m.mountpoint.components().count(), *i))
        .map(|(_, m)| m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_lines_are_parsed_with_escapes_and_the_deepest_mount_wins() {
        let text = "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n\
                    90 22 0:50 / /mnt/my\\040data rw,nosuid - fuse.tierwise /srv/tw rw,user_id=0\n\
                    91 90 0:51 / /mnt/my\\040data/inner rw - tmpfs tmpfs rw\n";
        let m = parse(text);
        assert_eq!(m.len(), 3);
        assert_eq!(m[1].mountpoint, Path::new("/mnt/my data"));
        assert!(m[1].is_tierwise() && m[1].source == "/srv/tw");
        let inner = m.iter().filter(|e| Path::new("/mnt/my data/inner/x").starts_with(&e.mountpoint)).count();
        assert_eq!(inner, 3);
    }
}
