//! Trace readers: one file per format behind [`TraceReader`], streaming, with gzip/zstd read
//! transparently and the format detected from the file name or its content.
//!
//! Every reader produces [`TraceRecord`]s: a byte range on a volume (block traces) or an object
//! id with a size (object traces). A malformed line is an error naming the file, the line and the
//! field; [`Trace`] can count and skip such lines instead (`--skip-bad-lines`).

pub mod arc_lis;
pub mod binary;
pub mod blkparse;
pub mod csv;
pub mod fiu;
pub mod memory;
pub mod merge;
pub mod mqsim;
pub mod msr;
pub mod open;
pub mod oracle_general;
pub mod parse;
pub mod spc;
pub mod systor;
pub mod vscsi;

use std::io::{self, BufRead};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

pub use open::{OpenOptions, open_bytes, open_lines, open_trace};

/// Read or write.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum IoOp {
    /// A read.
    #[default]
    Read,
    /// A write.
    Write,
}

/// One request of a trace.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceRecord {
    /// Timestamp in nanoseconds, in the trace's own epoch (0 when the format has none).
    pub time_ns: u64,
    /// Read or write.
    pub op: IoOp,
    /// Volume / device / LUN / ASU index within the trace (0 when there is one).
    pub volume: u32,
    /// Byte offset on the volume (block traces); 0 for object traces.
    pub offset: u64,
    /// Length in bytes (object size for object traces).
    pub len: u64,
    /// The trace's own request key, as libCacheSim would use it as the object id: the address in
    /// the format's native unit (sectors for vscsi, bytes for MSR) or the object id.
    pub key: u64,
}

/// Problems reading a trace. Each names the file and, where there is one, the line or record
/// and the field.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TraceError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// A text line does not parse.
    #[error("{path}:{line}: field `{field}`: {problem} (line: `{text}`)")]
    Malformed {
        /// The file.
        path: String,
        /// 1-based line number.
        line: u64,
        /// The field at fault.
        field: &'static str,
        /// What is wrong and what was expected.
        problem: String,
        /// The line (shortened).
        text: String,
    },
    /// A binary record does not make sense.
    #[error("{path}: record {record} (byte offset {offset}): field `{field}`: {problem}")]
    BadRecord {
        /// The file.
        path: String,
        /// 0-based record index.
        record: u64,
        /// Byte offset of the record in the (decompressed) stream.
        offset: u64,
        /// The field at fault.
        field: &'static str,
        /// What is wrong.
        problem: String,
    },
    /// A binary trace ends in the middle of a record.
    #[error("{path}: truncated: {trailing} bytes after the last whole {record_size}-byte record")]
    Truncated {
        /// The file.
        path: String,
        /// Bytes left over.
        trailing: usize,
        /// Record size of the format.
        record_size: usize,
    },
    /// The format could not be detected or is not what the file holds.
    #[error("{path}: {reason}")]
    Format {
        /// The file.
        path: String,
        /// Why, and what is allowed.
        reason: String,
    },
}

impl TraceError {
    /// Whether skipping the offending line/record and going on is meaningful.
    pub fn is_skippable(&self) -> bool {
        matches!(self, TraceError::Malformed { .. } | TraceError::BadRecord { .. })
    }
}

/// A streaming reader of one format.
///
/// Implementations MUST NOT panic on any input, MUST return `Ok(false)` at the end, and after a
/// skippable error MUST be positioned after the offending line or record.
pub trait TraceReader: Send {
    /// Reads the next record into `rec`; `Ok(false)` at the end of the trace.
    fn read(&mut self, rec: &mut TraceRecord) -> Result<bool, TraceError>;

    /// Appends up to `max` records to `out`; `Ok(false)` once the end is reached (records may
    /// still have been appended). Binary formats override this with a tight decoding loop.
    fn read_batch(&mut self, out: &mut Vec<TraceRecord>, max: usize) -> Result<bool, TraceError> {
        let mut rec = TraceRecord::default();
        for _ in 0..max {
            if !self.read(&mut rec)? {
                return Ok(false);
            }
            out.push(rec);
        }
        Ok(true)
    }

    /// Non-empty text lines read so far (0 for binary formats): a text file whose lines
    /// yield no request at all is in another format.
    fn lines_read(&self) -> u64 {
        0
    }
}

/// Static facts about a format.
#[derive(Clone, Copy, Debug)]
pub struct FormatInfo {
    /// Name used with `--format`.
    pub name: &'static str,
    /// One line of help.
    pub help: &'static str,
    /// Records are objects (id + size), not byte ranges.
    pub object_trace: bool,
    /// Records carry timestamps.
    pub has_time: bool,
}

/// Every supported format.
pub const FORMATS: &[FormatInfo] = &[
    FormatInfo {
        name: "msr",
        help: "MSR Cambridge CSV: Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime",
        object_trace: false,
        has_time: true,
    },
    FormatInfo {
        name: "spc",
        help: "SPC (Financial, WebSearch): ASU,LBA(sectors),Size(bytes),Opcode,Timestamp(s)",
        object_trace: false,
        has_time: true,
    },
    FormatInfo {
        name: "fiu",
        help: "FIU SRCMap/IODedup: ts(ns) pid proc lba(sectors) size(sectors) op major minor md5",
        object_trace: false,
        has_time: true,
    },
    FormatInfo {
        name: "blkparse",
        help: "blkparse default text output (queue events; blkparse:action=D for dispatches)",
        object_trace: false,
        has_time: true,
    },
    FormatInfo {
        name: "vscsi",
        help: "CloudPhysics VMware vSCSI binary (v1 32-byte or v2 40-byte records)",
        object_trace: false,
        has_time: true,
    },
    FormatInfo {
        name: "oracle-general",
        help: "libCacheSim oracleGeneral binary: u32 time, u64 id, u32 size, i64 next access",
        object_trace: true,
        has_time: true,
    },
    FormatInfo {
        name: "csv",
        help: "libCacheSim-style CSV with a column spec (csv:time-col=1,obj-id-col=2,obj-size-col=3,...)",
        object_trace: true,
        has_time: true,
    },
    FormatInfo {
        name: "mqsim",
        help: "MQSim/DiskSim ascii: time(ns) device lba(sectors) size(sectors) type(1=read)",
        object_trace: false,
        has_time: true,
    },
    FormatInfo {
        name: "arc-lis",
        help: "ARC paper .lis: start_block num_blocks ignore request_no (512-byte blocks)",
        object_trace: false,
        has_time: false,
    },
    FormatInfo {
        name: "systor",
        help: "SNIA SYSTOR'17 VDI CSV: Timestamp,Response,IOType,LUN,Offset,Size",
        object_trace: false,
        has_time: true,
    },
];

/// Looks a format up by name.
pub fn format_info(name: &str) -> Option<&'static FormatInfo> {
    FORMATS.iter().find(|f| f.name.eq_ignore_ascii_case(name))
}

/// Reads lines with 1-based numbering into a reused buffer, and builds errors that quote them.
pub struct Lines {
    reader: Box<dyn BufRead + Send>,
    buf: Vec<u8>,
    line: u64,
    path: Arc<str>,
}

impl Lines {
    /// Wraps a buffered reader of the (decompressed) file at `path`.
    pub fn new(reader: Box<dyn BufRead + Send>, path: Arc<str>) -> Lines {
        Lines { reader, buf: Vec::with_capacity(256), line: 0, path }
    }

    /// Moves to the next line; `false` at the end.
    #[inline]
    pub fn advance(&mut self) -> Result<bool, TraceError> {
        self.buf.clear();
        let n = self
            .reader
            .read_until(b'\n', &mut self.buf)
            .map_err(|source| TraceError::Io { path: self.path.to_string(), source })?;
        if n == 0 {
            return Ok(false);
        }
        self.line += 1;
        while let Some(b'\n' | b'\r') = self.buf.last() {
            self.buf.pop();
        }
        Ok(true)
    }

    /// The current line without its terminator.
    #[inline]
    pub fn current(&self) -> &[u8] {
        &self.buf
    }

    /// The current line number.
    pub fn line_no(&self) -> u64 {
        self.line
    }

    /// The file name.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Parses the next field with `parse`, or fails naming `field` and what was `expected`.
    #[inline]
    pub fn field<'a, T>(
        &self,
        raw: Option<&'a [u8]>,
        field: &'static str,
        parse: impl FnOnce(&'a [u8]) -> Option<T>,
        expected: &str,
    ) -> Result<T, TraceError> {
        raw.and_then(parse).ok_or_else(|| self.error(field, expected))
    }

    /// Converts a count of 512-byte sectors in `field` to bytes, failing on overflow.
    #[inline]
    pub fn sectors(&self, n: u64, field: &'static str) -> Result<u64, TraceError> {
        n.checked_mul(512).ok_or_else(|| self.error(field, "too large for a 64-bit byte address"))
    }

    /// Whether the current line is empty or blank.
    #[inline]
    pub fn is_blank(&self) -> bool {
        self.buf.iter().all(u8::is_ascii_whitespace)
    }

    /// An error about `field` on the current line.
    #[cold]
    pub fn error(&self, field: &'static str, problem: impl Into<String>) -> TraceError {
        let mut text = String::from_utf8_lossy(&self.buf).trim_end().to_string();
        if text.len() > 160 {
            let mut cut = 160;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            text.truncate(cut);
            text.push('…');
        }
        TraceError::Malformed { path: self.path.to_string(), line: self.line, field, problem: problem.into(), text }
    }
}

/// A text format parsed one line at a time; [`LineReader`] does the reading.
pub trait LineFormat: Send {
    /// Parses the current line (never blank): `Ok(Some(record))`, `Ok(None)` to skip it (a
    /// header, an event that is not replayed), or an error naming the field.
    fn parse(&mut self, lines: &Lines) -> Result<Option<TraceRecord>, TraceError>;
}

/// Reads a [`LineFormat`] line by line, skipping blank lines.
pub struct LineReader<F> {
    lines: Lines,
    format: F,
    nonblank: u64,
}

impl<F: LineFormat> LineReader<F> {
    /// Reads `lines` as `format`.
    pub fn new(lines: Lines, format: F) -> LineReader<F> {
        LineReader { lines, format, nonblank: 0 }
    }
}

impl<F: LineFormat> TraceReader for LineReader<F> {
    fn read(&mut self, rec: &mut TraceRecord) -> Result<bool, TraceError> {
        while self.lines.advance()? {
            if self.lines.is_blank() {
                continue;
            }
            self.nonblank += 1;
            if let Some(r) = self.format.parse(&self.lines)? {
                *rec = r;
                return Ok(true);
            }
        }
        Ok(false)
    }

    fn lines_read(&self) -> u64 {
        self.nonblank
    }
}

/// Small dense volume numbers for the (host, disk) or (major, minor) keys a trace uses; there
/// are few, so a linear search beats hashing.
#[derive(Clone, Debug, Default)]
pub struct VolumeMap<K> {
    keys: Vec<K>,
}

impl<K: PartialEq> VolumeMap<K> {
    /// The volume number of `key`, assigning the next one to a new key.
    #[inline]
    pub fn index(&mut self, key: K) -> u32 {
        match self.keys.iter().position(|k| *k == key) {
            Some(v) => v as u32,
            None => {
                self.keys.push(key);
                (self.keys.len() - 1) as u32
            }
        }
    }
}

/// A trace being read, with bad-line skipping and progress counters.
pub struct Trace {
    reader: Box<dyn TraceReader>,
    info: FormatInfo,
    path: String,
    skip_bad: bool,
    skipped: u64,
    first_error: Option<String>,
    records: u64,
}

impl Trace {
    /// Wraps a reader.
    pub fn new(reader: Box<dyn TraceReader>, info: FormatInfo, path: &str, skip_bad: bool) -> Trace {
        Trace { reader, info, path: path.to_string(), skip_bad, skipped: 0, first_error: None, records: 0 }
    }

    /// The next record, skipping (and counting) malformed ones when asked to.
    #[inline]
    pub fn next(&mut self, rec: &mut TraceRecord) -> Result<bool, TraceError> {
        loop {
            match self.reader.read(rec) {
                Ok(true) => {
                    self.records += 1;
                    return Ok(true);
                }
                Ok(false) => return self.at_end().map(|()| false),
                Err(e) if self.skip_bad && e.is_skippable() => {
                    self.skipped += 1;
                    if self.first_error.is_none() {
                        self.first_error = Some(e.to_string());
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Appends up to `max` records to `out` (clearing it first), skipping (and counting)
    /// malformed ones when asked to; `Ok(false)` when the trace is exhausted and `out` is empty.
    pub fn next_batch(&mut self, out: &mut Vec<TraceRecord>, max: usize) -> Result<bool, TraceError> {
        out.clear();
        while out.len() < max {
            match self.reader.read_batch(out, max - out.len()) {
                Ok(true) => {}
                Ok(false) => break,
                Err(e) if self.skip_bad && e.is_skippable() => {
                    self.skipped += 1;
                    if self.first_error.is_none() {
                        self.first_error = Some(e.to_string());
                    }
                }
                Err(e) => {
                    self.records += out.len() as u64;
                    return Err(e);
                }
            }
        }
        self.records += out.len() as u64;
        if out.is_empty() {
            self.at_end()?;
        }
        Ok(!out.is_empty())
    }

    /// At the end of the input: text lines that gave not one request mean the file is in
    /// another format (or every line was malformed); say so rather than report 0 requests.
    fn at_end(&self) -> Result<(), TraceError> {
        let lines = self.reader.lines_read();
        if self.records > 0 || lines == 0 {
            return Ok(());
        }
        let why = if self.skipped > 0 {
            format!(
                "all {} records were malformed and skipped (first: {})",
                self.skipped,
                self.first_error.as_deref().unwrap_or("?")
            )
        } else {
            format!(
                "{lines} non-empty line{} and not one {} request among them: the file is in another format",
                if lines == 1 { "" } else { "s" },
                self.info.name
            )
        };
        Err(TraceError::Format {
            path: self.path.clone(),
            reason: format!(
                "{why}; name the format with --format, one of: {}",
                FORMATS.iter().map(|f| f.name).collect::<Vec<_>>().join(", ")
            ),
        })
    }

    /// Calls `f` with every record (at most `limit`), reading in batches; returns how many.
    pub fn for_each<E: From<TraceError>>(
        &mut self,
        limit: u64,
        mut f: impl FnMut(&TraceRecord) -> Result<(), E>,
    ) -> Result<u64, E> {
        self.for_each_ahead(limit, (0, 0), |r, _, _| f(r))
    }

    /// Like [`Trace::for_each`], also passing the records `near` and `far` positions later when
    /// they are already read (for prefetching).
    pub fn for_each_ahead<E: From<TraceError>>(
        &mut self,
        limit: u64,
        (near, far): (usize, usize),
        mut f: impl FnMut(&TraceRecord, Option<&TraceRecord>, Option<&TraceRecord>) -> Result<(), E>,
    ) -> Result<u64, E> {
        const BATCH: usize = 1024;
        let mut batch = Vec::with_capacity(BATCH);
        let mut n = 0u64;
        while n < limit {
            let want = (limit - n).min(BATCH as u64) as usize;
            if !self.next_batch(&mut batch, want)? {
                break;
            }
            for (i, r) in batch.iter().enumerate() {
                let get = |k: usize| if k > 0 { batch.get(i + k) } else { None };
                f(r, get(near), get(far))?;
            }
            n += batch.len() as u64;
        }
        Ok(n)
    }

    /// Facts about the format.
    pub fn info(&self) -> &FormatInfo {
        &self.info
    }

    /// The file.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Records returned so far.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Lines or records skipped as malformed, and the first such error.
    pub fn skipped(&self) -> (u64, Option<&str>) {
        (self.skipped, self.first_error.as_deref())
    }
}

#[cfg(test)]
mod tests;
