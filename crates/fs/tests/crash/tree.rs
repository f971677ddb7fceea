//! Trees as values: a tier directory recorded exactly (bytes, modes, times, extended
//! attributes, hard links) so that it can be written back as a crash would have left it, and
//! the view a mount (or a plain directory) gives users, to compare with the model.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// One recorded name of a tier.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entry {
    File {
        content: Arc<Vec<u8>>,
        mode: u32,
        /// Modification time (s, ns): adoption compares them, so they are written back exactly.
        mtime: (i64, i64),
        xattrs: BTreeMap<String, Vec<u8>>,
        /// Device and inode: names sharing one are hard links.
        id: (u64, u64),
    },
    Dir {
        mode: u32,
        id: (u64, u64),
    },
    Symlink {
        target: PathBuf,
        id: (u64, u64),
    },
}

/// A tier directory as recorded: relative path → entry (the daemon's lock file left out: a
/// crash leaves it, and it holds only the pid).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tree(pub BTreeMap<PathBuf, Entry>);

fn xattrs_of(path: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    if let Ok(names) = xattr::list(path) {
        for n in names {
            let name = n.to_string_lossy().into_owned();
            if let Ok(Some(v)) = xattr::get(path, &n) {
                out.insert(name, v);
            }
        }
    }
    out
}

impl Tree {
    /// Records the tree under `root` as it is now.
    pub fn take(root: &Path) -> Tree {
        let mut t = Tree::default();
        walk(root, Path::new(""), &mut t.0);
        t
    }

    /// Writes the tree under `root` (an empty directory). Returns the device and inode each
    /// recorded one has now (a crash keeps them; a restore cannot, so records that name them
    /// are translated: `StateStore::remap_ids`).
    pub fn restore(&self, root: &Path) -> BTreeMap<(u64, u64), (u64, u64)> {
        let mut first_of: BTreeMap<(u64, u64), PathBuf> = BTreeMap::new();
        let mut ids = BTreeMap::new();
        let id_now = |p: &Path| fs::symlink_metadata(p).map(|m| (m.dev(), m.ino())).expect("restored");
        for (rel, e) in &self.0 {
            let p = root.join(rel);
            match e {
                Entry::Dir { mode, id } => {
                    fs::create_dir(&p).expect("restore a directory");
                    fs::set_permissions(&p, fs::Permissions::from_mode(*mode)).expect("chmod");
                    ids.insert(*id, id_now(&p));
                }
                Entry::Symlink { target, id } => {
                    std::os::unix::fs::symlink(target, &p).expect("restore a symlink");
                    ids.insert(*id, id_now(&p));
                }
                Entry::File { content, mode, xattrs, id, .. } => {
                    if let Some(first) = first_of.get(id) {
                        fs::hard_link(root.join(first), &p).expect("restore a hard link");
                        continue;
                    }
                    first_of.insert(*id, rel.clone());
                    fs::write(&p, &***content).expect("restore a file");
                    fs::set_permissions(&p, fs::Permissions::from_mode(*mode)).expect("chmod");
                    for (k, v) in xattrs {
                        xattr::set(&p, k, v).expect("restore an extended attribute");
                    }
                    ids.insert(*id, id_now(&p));
                }
            }
        }
        // Times last (writing a file or a name in a directory changes them).
        for (rel, e) in &self.0 {
            if let Entry::File { mtime: (s, ns), .. } = e {
                let t = std::time::UNIX_EPOCH + std::time::Duration::new(*s as u64, *ns as u32);
                let f = fs::OpenOptions::new().write(true).open(root.join(rel)).expect("open to set times");
                f.set_times(fs::FileTimes::new().set_modified(t)).expect("set times");
            }
        }
        ids
    }
}

fn walk(root: &Path, rel: &Path, out: &mut BTreeMap<PathBuf, Entry>) {
    let Ok(rd) = fs::read_dir(root.join(rel)) else { return };
    let mut names: Vec<_> = rd.flatten().map(|e| e.file_name()).collect();
    names.sort();
    for name in names {
        let r = rel.join(&name);
        if r == Path::new(".tierwise-lock") {
            continue;
        }
        let p = root.join(&r);
        let Ok(m) = fs::symlink_metadata(&p) else { continue };
        if m.file_type().is_symlink() {
            out.insert(r, Entry::Symlink { target: fs::read_link(&p).unwrap_or_default(), id: (m.dev(), m.ino()) });
        } else if m.is_dir() {
            out.insert(r.clone(), Entry::Dir { mode: m.mode() & 0o7777, id: (m.dev(), m.ino()) });
            walk(root, &r, out);
        } else if m.is_file() {
            out.insert(
                r,
                Entry::File {
                    content: Arc::new(fs::read(&p).unwrap_or_default()),
                    mode: m.mode() & 0o7777,
                    mtime: (m.mtime(), m.mtime_nsec()),
                    xattrs: xattrs_of(&p),
                    id: (m.dev(), m.ino()),
                },
            );
        }
    }
}

/// What a user sees at one name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Seen {
    File { content: Vec<u8>, mode: u32, xattrs: BTreeMap<String, Vec<u8>>, nlink: u64 },
    Dir { mode: u32 },
    Symlink { target: PathBuf },
}

/// What a user sees under a directory: every name, and which names are one file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct View {
    pub names: BTreeMap<PathBuf, Seen>,
    /// Names that share an inode (only groups of two or more).
    pub links: BTreeSet<BTreeSet<PathBuf>>,
}

impl View {
    /// Reads the view under `root`; errors (a name that cannot be read) are returned as text.
    pub fn read(root: &Path) -> Result<View, String> {
        let mut v = View::default();
        let mut by_ino: BTreeMap<u64, BTreeSet<PathBuf>> = BTreeMap::new();
        read_into(root, Path::new(""), &mut v, &mut by_ino)?;
        v.links = by_ino.into_values().filter(|g| g.len() > 1).collect();
        Ok(v)
    }

    /// The file contents in the view.
    pub fn contents(&self) -> impl Iterator<Item = (&PathBuf, &Vec<u8>)> {
        self.names.iter().filter_map(|(p, s)| match s {
            Seen::File { content, .. } => Some((p, content)),
            _ => None,
        })
    }
}

fn read_into(
    root: &Path,
    rel: &Path,
    v: &mut View,
    by_ino: &mut BTreeMap<u64, BTreeSet<PathBuf>>,
) -> Result<(), String> {
    let dir = root.join(rel);
    let rd = fs::read_dir(&dir).map_err(|e| format!("listing {}: {e}", rel.display()))?;
    let mut names = Vec::new();
    for e in rd {
        names.push(e.map_err(|e| format!("listing {}: {e}", rel.display()))?.file_name());
    }
    let unique: BTreeSet<_> = names.iter().collect();
    if unique.len() != names.len() {
        return Err(format!("{} lists a name twice: {names:?}", rel.display()));
    }
    names.sort();
    for name in names {
        let r = rel.join(&name);
        let p = root.join(&r);
        let m = fs::symlink_metadata(&p).map_err(|e| format!("stat {}: {e}", r.display()))?;
        if m.file_type().is_symlink() {
            let target = fs::read_link(&p).map_err(|e| format!("readlink {}: {e}", r.display()))?;
            v.names.insert(r, Seen::Symlink { target });
        } else if m.is_dir() {
            v.names.insert(r.clone(), Seen::Dir { mode: m.mode() & 0o7777 });
            read_into(root, &r, v, by_ino)?;
        } else {
            let content = fs::read(&p).map_err(|e| format!("read {}: {e}", r.display()))?;
            let xattrs = xattrs_of(&p).into_iter().filter(|(k, _)| !k.starts_with("user.tierwise.")).collect();
            by_ino.entry(m.ino()).or_default().insert(r.clone());
            v.names.insert(r, Seen::File { content, mode: m.mode() & 0o7777, xattrs, nlink: m.nlink() });
        }
    }
    Ok(())
}
