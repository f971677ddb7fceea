//! File-level traces: one file-system operation per line, so that the simulator and a real
//! mount can replay exactly the same operations.
//!
//! # Format (CSV, optionally gzip/zstd-compressed)
//!
//! ```text
//! # tierwise file trace v1
//! time_ns,op,path,offset,length,path2
//! 0,mkdir,/d0,0,0,
//! 1000,create,/d0/f1,0,0,
//! 2000,write,/d0/f1,0,16384,
//! 3000,append,/d0/f1,0,4096,
//! 4000,read,/d0/f1,0,20480,
//! 5000,rename,/d0/f1,0,0,/d0/f2
//! 6000,delete,/d0/f2,0,0,
//! ```
//!
//! - `time_ns`: nanoseconds since the start (non-decreasing in generated traces).
//! - `op`: `create` (an empty file), `mkdir`, `read`, `write` (at `offset`), `append` (`length`
//!   bytes at the current end; `offset` ignored), `truncate` (to `length`), `delete`, `rmdir`,
//!   `rename` (to `path2`, replacing it if it exists), `stat`.
//! - `path`: absolute, `/`-separated, without `,`, control characters, `.` or `..` parts.
//! - Lines starting with `#` and a `time_ns,op,...` header are skipped; blank lines too.
//!
//! A malformed line is an error that names the file, the line and the field.

pub mod generate;

use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::trace::{Lines, TraceError, open_lines};

/// A file-system operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum FileOpKind {
    /// Create an empty file.
    Create,
    /// Create a directory.
    Mkdir,
    /// Read `length` bytes at `offset`.
    Read,
    /// Write `length` bytes at `offset`.
    Write,
    /// Write `length` bytes at the end.
    Append,
    /// Set the size to `length`.
    Truncate,
    /// Remove a file.
    Delete,
    /// Remove an empty directory.
    Rmdir,
    /// Move `path` to `path2`.
    Rename,
    /// Look up the attributes.
    Stat,
}

impl FileOpKind {
    /// Every kind with its name in the format.
    pub const ALL: [(FileOpKind, &'static str); 10] = [
        (FileOpKind::Create, "create"),
        (FileOpKind::Mkdir, "mkdir"),
        (FileOpKind::Read, "read"),
        (FileOpKind::Write, "write"),
        (FileOpKind::Append, "append"),
        (FileOpKind::Truncate, "truncate"),
        (FileOpKind::Delete, "delete"),
        (FileOpKind::Rmdir, "rmdir"),
        (FileOpKind::Rename, "rename"),
        (FileOpKind::Stat, "stat"),
    ];

    /// The name used in the format.
    pub fn name(self) -> &'static str {
        Self::ALL.iter().find(|(k, _)| *k == self).map_or("?", |(_, n)| n)
    }

    fn parse(s: &[u8]) -> Option<FileOpKind> {
        Self::ALL.iter().find(|(_, n)| n.as_bytes() == s).map(|(k, _)| *k)
    }
}

/// One operation of a file trace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileOp {
    /// Nanoseconds since the start.
    pub time_ns: u64,
    /// What to do.
    pub kind: FileOpKind,
    /// The file or directory.
    pub path: String,
    /// Byte offset (read, write).
    pub offset: u64,
    /// Bytes (read, write, append) or the new size (truncate).
    pub length: u64,
    /// The destination of a rename (empty otherwise).
    pub path2: String,
}

impl FileOp {
    /// An operation without offset, length or second path.
    pub fn new(time_ns: u64, kind: FileOpKind, path: impl Into<String>) -> FileOp {
        FileOp { time_ns, kind, path: path.into(), offset: 0, length: 0, path2: String::new() }
    }

    /// With a byte range.
    pub fn range(mut self, offset: u64, length: u64) -> FileOp {
        self.offset = offset;
        self.length = length;
        self
    }

    /// Whether `self` and `other` must not run at the same time when a trace is replayed by
    /// several workers: they name one path, or one names a directory the other is inside (a
    /// `create /d/f` waits for its `mkdir /d`, a rename for both its paths). `tierwise replay`
    /// orders its workers by this rule, and the file simulator's closed loop models it.
    pub fn conflicts_with(&self, other: &FileOp) -> bool {
        self.paths().any(|p| other.paths().any(|q| related_paths(p, q)))
    }

    fn paths(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.path.as_str()).chain((!self.path2.is_empty()).then_some(self.path2.as_str()))
    }

    /// Writes the operation as one line of the format.
    pub fn write_line(&self, out: &mut impl Write) -> std::io::Result<()> {
        writeln!(
            out,
            "{},{},{},{},{},{}",
            self.time_ns,
            self.kind.name(),
            self.path,
            self.offset,
            self.length,
            self.path2
        )
    }
}

/// Whether two trace paths are one, or one is inside the other.
fn related_paths(a: &str, b: &str) -> bool {
    let inside = |x: &str, y: &str| x.len() > y.len() && x.starts_with(y) && x.as_bytes()[y.len()] == b'/';
    a == b || inside(a, b) || inside(b, a)
}

/// The header written at the top of a trace.
pub const HEADER: &str = "# tierwise file trace v1\ntime_ns,op,path,offset,length,path2\n";

/// How many operations at the start of `ops` are a benchmark's setup: every generator sets up
/// with mkdir, create and write only, and its first other operation starts the measured phase
/// (Postmark's transactions, FileBench's flows). 0 when no other operation follows.
pub fn setup_len(ops: &[FileOp]) -> usize {
    ops.iter().position(|o| !is_setup_op(o)).unwrap_or(0)
}

/// Whether `op` may belong to a setup phase (see [`setup_len`]).
pub fn is_setup_op(op: &FileOp) -> bool {
    matches!(op.kind, FileOpKind::Mkdir | FileOpKind::Create | FileOpKind::Write)
}

/// Checks a path of the format: absolute, no empty, `.` or `..` parts, no `,` or control
/// characters. Returns what is wrong.
pub fn check_path(p: &str) -> Result<(), &'static str> {
    if !p.starts_with('/') || p.len() < 2 {
        return Err("expected an absolute path such as /dir/file");
    }
    if p.chars().any(|c| c == ',' || c.is_control()) {
        return Err("commas and control characters are not allowed in paths");
    }
    if p[1..].split('/').any(|part| part.is_empty() || part == "." || part == "..") {
        return Err("empty, `.` and `..` path components are not allowed");
    }
    Ok(())
}

/// Whether `path` holds a file trace (its header, or a first data line, names the format).
pub fn is_file_trace(path: &Path) -> Result<bool, TraceError> {
    let mut lines = open_lines(path)?;
    while lines.advance()? {
        let l = lines.current();
        if lines.is_blank() {
            continue;
        }
        return Ok(l.starts_with(b"# tierwise file trace") || l.starts_with(b"time_ns,op,path"));
    }
    Ok(false)
}

/// Reads a file trace.
pub struct FileTraceReader {
    lines: Lines,
}

impl FileTraceReader {
    /// Opens `path` (gzip and zstd are undone).
    pub fn open(path: &Path) -> Result<FileTraceReader, TraceError> {
        Ok(FileTraceReader { lines: open_lines(path)? })
    }

    /// Reads from memory (tests, fuzzing); `name` is used in errors.
    pub fn from_bytes(name: &str, bytes: Vec<u8>) -> FileTraceReader {
        FileTraceReader { lines: Lines::new(Box::new(std::io::Cursor::new(bytes)), std::sync::Arc::from(name)) }
    }

    /// The next operation, or `None` at the end.
    pub fn next_op(&mut self) -> Result<Option<FileOp>, TraceError> {
        loop {
            if !self.lines.advance()? {
                return Ok(None);
            }
            let line = self.lines.current();
            if self.lines.is_blank() || line.starts_with(b"#") || line.starts_with(b"time_ns,") {
                continue;
            }
            return self.parse().map(Some);
        }
    }

    fn parse(&self) -> Result<FileOp, TraceError> {
        let l = &self.lines;
        let mut f = l.current().split(|&b| b == b',');
        let num = |b: &[u8]| std::str::from_utf8(b).ok()?.trim().parse::<u64>().ok();
        let time_ns = l.field(f.next(), "time_ns", num, "expected nanoseconds (an unsigned integer)")?;
        let kind = l.field(f.next(), "op", |b| FileOpKind::parse(b.trim_ascii()), &op_help())?;
        let path = self.path_field(f.next(), "path")?;
        let offset = l.field(f.next(), "offset", num, "expected a byte offset (an unsigned integer)")?;
        let length = l.field(f.next(), "length", num, "expected a byte count (an unsigned integer)")?;
        let path2 = match f.next().map(<[u8]>::trim_ascii) {
            Some(b) if !b.is_empty() => self.path_field(Some(b), "path2")?,
            _ => String::new(),
        };
        if f.next().is_some() {
            return Err(l.error("path2", "too many fields: expected time_ns,op,path,offset,length[,path2]"));
        }
        if kind == FileOpKind::Rename && path2.is_empty() {
            return Err(l.error("path2", "rename needs the destination path in the sixth field"));
        }
        if kind != FileOpKind::Rename && !path2.is_empty() {
            return Err(l.error("path2", format!("only rename takes a second path, not {}", kind.name())));
        }
        if offset.checked_add(length).is_none() {
            return Err(l.error("length", "offset + length overflows 64 bits"));
        }
        Ok(FileOp { time_ns, kind, path, offset, length, path2 })
    }

    fn path_field(&self, raw: Option<&[u8]>, field: &'static str) -> Result<String, TraceError> {
        let l = &self.lines;
        let s = l.field(raw, field, |b| std::str::from_utf8(b.trim_ascii()).ok(), "expected a UTF-8 path")?;
        check_path(s).map_err(|why| l.error(field, why))?;
        Ok(s.to_string())
    }
}

fn op_help() -> String {
    let names: Vec<&str> = FileOpKind::ALL.iter().map(|(_, n)| *n).collect();
    format!("expected one of {}", names.join(", "))
}

impl Iterator for FileTraceReader {
    type Item = Result<FileOp, TraceError>;
    fn next(&mut self) -> Option<Self::Item> {
        self.next_op().transpose()
    }
}

/// Writes `ops` as a file trace with its header.
pub fn write_file_trace<'a>(ops: impl IntoIterator<Item = &'a FileOp>, out: &mut impl Write) -> std::io::Result<u64> {
    out.write_all(HEADER.as_bytes())?;
    let mut n = 0;
    for op in ops {
        op.write_line(out)?;
        n += 1;
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(text: &str) -> Result<Vec<FileOp>, TraceError> {
        FileTraceReader::from_bytes("t.csv", text.as_bytes().to_vec()).collect()
    }

    #[test]
    fn conflicts_are_paths_and_their_ancestors() {
        assert!(related_paths("/d", "/d/f") && related_paths("/d/f", "/d") && related_paths("/a", "/a"));
        assert!(!related_paths("/d", "/dd/f") && !related_paths("/d/f", "/d/g"));
        let rename = FileOp { path2: "/e/g".into(), ..FileOp::new(0, FileOpKind::Rename, "/d/f") };
        assert!(rename.conflicts_with(&FileOp::new(0, FileOpKind::Mkdir, "/e")));
        assert!(FileOp::new(0, FileOpKind::Mkdir, "/e").conflicts_with(&rename));
        assert!(!rename.conflicts_with(&FileOp::new(0, FileOpKind::Read, "/x")));
    }

    #[test]
    fn the_documented_example_parses_and_round_trips() {
        let text = "# tierwise file trace v1\ntime_ns,op,path,offset,length,path2\n0,mkdir,/d0,0,0,\n\
                    1000,create,/d0/f1,0,0,\n2000,write,/d0/f1,0,16384,\n3000,append,/d0/f1,0,4096,\n\
                    4000,read,/d0/f1,0,20480,\n5000,rename,/d0/f1,0,0,/d0/f2\n6000,delete,/d0/f2,0,0,\n";
        let ops = read_all(text).unwrap();
        assert_eq!(ops.len(), 7);
        assert_eq!(ops[5].kind, FileOpKind::Rename);
        assert_eq!(ops[5].path2, "/d0/f2");
        let mut out = Vec::new();
        write_file_trace(&ops, &mut out).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), text);
    }

    #[test]
    fn bad_lines_name_the_line_and_the_field() {
        let cases = [
            ("0,move,/a,0,0,", "field `op`", "expected one of create"),
            ("x,read,/a,0,0,", "field `time_ns`", "nanoseconds"),
            ("0,read,a,0,0,", "field `path`", "absolute"),
            ("0,read,/a/../b,0,0,", "field `path`", "`..`"),
            ("0,read,/a,-1,0,", "field `offset`", "byte offset"),
            ("0,read,/a,0", "field `length`", "byte count"),
            ("0,rename,/a,0,0,", "field `path2`", "destination"),
            ("0,read,/a,0,0,/b", "field `path2`", "only rename"),
            ("0,read,/a,0,0,,extra", "field `path2`", "too many fields"),
            ("0,read,/a,18446744073709551615,2,", "field `length`", "overflows"),
        ];
        for (line, field, why) in cases {
            let e = read_all(&format!("# c\n{line}\n")).unwrap_err().to_string();
            assert!(e.contains("t.csv:2") && e.contains(field) && e.contains(why), "{line}: {e}");
        }
    }
}
