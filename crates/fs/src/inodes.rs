//! The inode table: tierwise's own inode numbers (the engine's object ids), each with its
//! relative path. Numbers stay the same across renames.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The root directory's inode.
pub(crate) const ROOT: u64 = 1;

/// One inode: its relative path (shared: every operation takes a copy) and kind.
#[derive(Clone, Debug)]
pub(crate) struct Node {
    pub(crate) rel: Arc<Path>,
    pub(crate) dir: bool,
}

/// Inodes by number and by path. A hard-linked file has several paths (its names); its node's
/// `rel` is one of them, any being as good as another for reaching the file.
#[derive(Debug)]
pub(crate) struct Inodes {
    pub(crate) by_ino: HashMap<u64, Node>,
    pub(crate) by_path: HashMap<PathBuf, u64>,
    /// Every name of the files that have more than one.
    names: HashMap<u64, Vec<PathBuf>>,
    next: u64,
}

impl Default for Inodes {
    fn default() -> Inodes {
        let mut t = Inodes { by_ino: HashMap::new(), by_path: HashMap::new(), names: HashMap::new(), next: ROOT };
        t.by_ino.insert(ROOT, Node { rel: Path::new("").into(), dir: true });
        t.by_path.insert(PathBuf::new(), ROOT);
        t
    }
}

impl Inodes {
    pub(crate) fn get(&self, ino: u64) -> Option<&Node> {
        self.by_ino.get(&ino)
    }

    /// The inode of `rel`, numbered now if it has none.
    pub(crate) fn ino_of(&mut self, rel: &Path, dir: bool) -> u64 {
        if let Some(&i) = self.by_path.get(rel) {
            return i;
        }
        self.next += 1;
        let ino = self.next;
        self.by_ino.insert(ino, Node { rel: rel.into(), dir });
        self.by_path.insert(rel.to_path_buf(), ino);
        ino
    }

    /// Gives file `ino` the further name `rel` (a hard link).
    pub(crate) fn add_name(&mut self, ino: u64, rel: &Path) {
        let Some(n) = self.by_ino.get(&ino) else { return };
        let names = self.names.entry(ino).or_insert_with(|| vec![n.rel.to_path_buf()]);
        names.push(rel.to_path_buf());
        self.by_path.insert(rel.to_path_buf(), ino);
    }

    /// The names of file `ino` (one unless it is hard-linked).
    pub(crate) fn names_of(&self, ino: u64) -> Vec<PathBuf> {
        match self.names.get(&ino) {
            Some(v) => v.clone(),
            None => self.by_ino.get(&ino).map(|n| vec![n.rel.to_path_buf()]).unwrap_or_default(),
        }
    }

    /// Forgets the name `rel`. Returns its inode and how many names the inode has left: with
    /// none, the inode is forgotten too.
    pub(crate) fn forget_path(&mut self, rel: &Path) -> Option<(u64, usize)> {
        let ino = self.by_path.remove(rel)?;
        if let Some(names) = self.names.get_mut(&ino) {
            names.retain(|p| p != rel);
            let left = names.len();
            if let (Some(first), Some(n)) = (names.first().cloned(), self.by_ino.get_mut(&ino))
                && &*n.rel == rel
            {
                n.rel = first.as_path().into();
            }
            if left <= 1 {
                self.names.remove(&ino);
            }
            if left > 0 {
                return Some((ino, left));
            }
        }
        self.by_ino.remove(&ino);
        Some((ino, 0))
    }

    /// Forgets inode `ino` (wherever it is now).
    pub(crate) fn forget(&mut self, ino: u64) {
        for p in self.names.remove(&ino).unwrap_or_default() {
            self.by_path.remove(&p);
        }
        if let Some(n) = self.by_ino.remove(&ino)
            && self.by_path.get(&*n.rel) == Some(&ino)
        {
            self.by_path.remove(&*n.rel);
        }
    }

    /// Gives inode `ino` the path `rel` (a file hidden while it is open after an unlink).
    pub(crate) fn relocate(&mut self, ino: u64, rel: &Path) {
        if let Some(n) = self.by_ino.get_mut(&ino) {
            if self.by_path.get(&*n.rel) == Some(&ino) {
                self.by_path.remove(&*n.rel);
            }
            n.rel = rel.into();
            self.by_path.insert(rel.to_path_buf(), ino);
        }
    }

    /// Moves `from` (and, for a directory, everything under it) to `to`.
    pub(crate) fn rename(&mut self, from: &Path, to: &Path) -> Vec<(u64, PathBuf)> {
        let mut moved = Vec::new();
        let Some(&ino) = self.by_path.get(from) else { return moved };
        if !self.by_ino.get(&ino).is_some_and(|n| n.dir) {
            // A file: one entry, no scan of the table.
            self.by_path.remove(from);
            self.renamed(ino, from, to);
            self.by_path.insert(to.to_path_buf(), ino);
            moved.push((ino, to.to_path_buf()));
            return moved;
        }
        let keys: Vec<PathBuf> = self.by_path.keys().filter(|p| p.starts_with(from)).cloned().collect();
        for old in keys {
            let Some(ino) = self.by_path.remove(&old) else { continue };
            let new = match old.strip_prefix(from) {
                Ok(rest) if rest.as_os_str().is_empty() => to.to_path_buf(),
                Ok(rest) => to.join(rest),
                Err(_) => continue,
            };
            self.renamed(ino, &old, &new);
            self.by_path.insert(new.clone(), ino);
            moved.push((ino, new));
        }
        moved
    }

    /// Inode `ino`'s name `old` is `new` now.
    fn renamed(&mut self, ino: u64, old: &Path, new: &Path) {
        if let Some(names) = self.names.get_mut(&ino) {
            for p in names.iter_mut().filter(|p| p.as_path() == old) {
                *p = new.to_path_buf();
            }
        }
        if let Some(n) = self.by_ino.get_mut(&ino)
            && (&*n.rel == old || !self.names.contains_key(&ino))
        {
            n.rel = new.into();
        }
    }

    /// The files (not directories) and their paths.
    pub(crate) fn files(&self) -> Vec<(u64, PathBuf)> {
        self.by_ino.iter().filter(|(_, n)| !n.dir).map(|(&i, n)| (i, n.rel.to_path_buf())).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A renamed directory carries its subtree; numbers stay; a sibling with a common name
    /// prefix (`d` and `dd`) is not carried along.
    #[test]
    fn renames_carry_subtrees_and_keep_numbers() {
        let mut t = Inodes::default();
        let d = t.ino_of(Path::new("d"), true);
        let f = t.ino_of(Path::new("d/f"), false);
        let g = t.ino_of(Path::new("d/e/g"), false);
        let other = t.ino_of(Path::new("dd/f"), false);
        let moved = t.rename(Path::new("d"), Path::new("x/d"));
        assert_eq!(moved.len(), 3);
        assert_eq!(&*t.get(f).unwrap().rel, Path::new("x/d/f"));
        assert_eq!(&*t.get(g).unwrap().rel, Path::new("x/d/e/g"));
        assert_eq!(t.by_path.get(Path::new("x/d")), Some(&d));
        assert_eq!(&*t.get(other).unwrap().rel, Path::new("dd/f"), "a name with the same prefix stays");
        // A second name: either reaches the file; forgetting one keeps the other.
        let h = t.ino_of(Path::new("x/h"), false);
        t.add_name(h, Path::new("x/d/h2"));
        t.rename(Path::new("x/d"), Path::new("y"));
        let mut names = t.names_of(h);
        names.sort();
        assert_eq!(names, [PathBuf::from("x/h"), PathBuf::from("y/h2")]);
        assert_eq!(t.forget_path(Path::new("x/h")), Some((h, 1)));
        assert_eq!(&*t.get(h).unwrap().rel, Path::new("y/h2"), "the other name reaches it");
        assert_eq!(t.forget_path(Path::new("y/h2")), Some((h, 0)));
        assert!(t.get(h).is_none());
        let d = t.by_path[Path::new("y")];
        let f = t.by_path[Path::new("y/f")];
        assert_eq!(t.get(d).unwrap().rel.as_ref(), Path::new("y"));
        t.relocate(f, Path::new(".tierwise-unlinked-3"));
        assert!(!t.by_path.contains_key(Path::new("x/d/f")));
        t.forget(f);
        assert!(t.get(f).is_none() && !t.by_path.contains_key(Path::new(".tierwise-unlinked-3")));
        assert_eq!(t.ino_of(Path::new("y/e/g"), false), g, "a known path keeps its number");
    }
}
