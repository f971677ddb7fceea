//! The working set of a file workload, as Loris sized its SSD.

use hashbrown::HashMap;

use super::{DIR_ENTRY, StrHash};
use crate::filetrace::{FileOp, FileOpKind};

/// The working set of a file workload: the most bytes its live files (and directory entries)
/// ever hold at once — what a disk-only run would need (Loris sizes the SSD from it).
#[derive(Clone, Debug, Default)]
pub struct WorkingSet {
    live: HashMap<Box<str>, u64, StrHash>,
    bytes: u64,
    /// Largest live bytes seen.
    pub peak_bytes: u64,
    /// Files and directories created.
    pub created: u64,
}

impl WorkingSet {
    /// Accounts one operation.
    pub fn op(&mut self, op: &FileOp) {
        let set = |ws: &mut WorkingSet, path: &str, size: u64| {
            let old = ws.live.insert(Box::from(path), size).unwrap_or(0);
            ws.bytes = ws.bytes - old + size;
        };
        match op.kind {
            FileOpKind::Create | FileOpKind::Mkdir => {
                if !self.live.contains_key(op.path.as_str()) {
                    self.created += 1;
                    set(self, &op.path, 0);
                    self.bytes += DIR_ENTRY;
                }
            }
            FileOpKind::Write | FileOpKind::Read => {
                let cur = self.live.get(op.path.as_str()).copied().unwrap_or(0);
                set(self, &op.path, cur.max(op.offset.saturating_add(op.length)));
            }
            FileOpKind::Append => {
                let cur = self.live.get(op.path.as_str()).copied().unwrap_or(0);
                set(self, &op.path, cur.saturating_add(op.length));
            }
            FileOpKind::Truncate => set(self, &op.path, op.length),
            FileOpKind::Delete | FileOpKind::Rmdir => {
                if let Some(old) = self.live.remove(op.path.as_str()) {
                    self.bytes = self.bytes.saturating_sub(old + DIR_ENTRY);
                }
            }
            FileOpKind::Rename => {
                if let Some(size) = self.live.remove(op.path.as_str()) {
                    let old = self.live.insert(Box::from(op.path2.as_str()), size);
                    if let Some(o) = old {
                        self.bytes = self.bytes.saturating_sub(o + DIR_ENTRY);
                    }
                }
            }
            FileOpKind::Stat => {}
        }
        self.peak_bytes = self.peak_bytes.max(self.bytes);
    }

    /// The working set of a list of operations.
    pub fn of<'a>(ops: impl IntoIterator<Item = &'a FileOp>) -> WorkingSet {
        let mut ws = WorkingSet::default();
        for op in ops {
            ws.op(op);
        }
        ws
    }
}
