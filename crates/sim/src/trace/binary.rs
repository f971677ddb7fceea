//! Fixed-size binary records read in large chunks.

use std::io::Read;
use std::sync::Arc;

use super::TraceError;

/// Hands out fixed-size records from a reader, detecting a truncated tail.
pub struct Records {
    reader: Box<dyn Read + Send>,
    buf: Vec<u8>,
    pos: usize,
    end: usize,
    record_size: usize,
    index: u64,
    eof: bool,
    path: Arc<str>,
}

impl Records {
    /// Records of `record_size` bytes from `reader` (the decompressed file at `path`).
    pub fn new(reader: Box<dyn Read + Send>, record_size: usize, path: Arc<str>) -> Records {
        Records { reader, buf: vec![0; 1 << 20], pos: 0, end: 0, record_size, index: 0, eof: false, path }
    }

    /// Makes at least `n` bytes available (fewer only at end of file); returns them.
    pub fn peek(&mut self, n: usize) -> Result<&[u8], TraceError> {
        while self.end - self.pos < n && !self.eof {
            if self.pos > 0 {
                self.buf.copy_within(self.pos..self.end, 0);
                self.end -= self.pos;
                self.pos = 0;
            }
            if self.end == self.buf.len() {
                self.buf.resize(self.buf.len() * 2, 0);
            }
            let got = loop {
                match self.reader.read(&mut self.buf[self.end..]) {
                    Ok(g) => break g,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(source) => {
                        return Err(TraceError::Io { path: self.path.to_string(), source });
                    }
                }
            };
            if got == 0 {
                self.eof = true;
            }
            self.end += got;
        }
        let avail = (self.end - self.pos).min(n);
        Ok(&self.buf[self.pos..self.pos + avail])
    }

    /// Changes the record size (after detecting a version).
    pub fn set_record_size(&mut self, n: usize) {
        self.record_size = n;
    }

    /// The next record, or `None` at a clean end.
    #[inline]
    pub fn next_record(&mut self) -> Result<Option<&[u8]>, TraceError> {
        let n = self.record_size;
        if self.end - self.pos < n {
            let avail = self.peek(n)?.len();
            if avail == 0 {
                return Ok(None);
            }
            if avail < n {
                self.pos = self.end;
                return Err(TraceError::Truncated { path: self.path.to_string(), trailing: avail, record_size: n });
            }
        }
        let r = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        self.index += 1;
        Ok(Some(r))
    }

    /// Up to `max` whole records as one slice (refilling the buffer once if it holds none);
    /// empty at a clean end.
    #[inline]
    pub fn next_many(&mut self, max: usize) -> Result<&[u8], TraceError> {
        let n = self.record_size;
        if self.end - self.pos < n {
            let avail = self.peek(n)?.len();
            if avail == 0 {
                return Ok(&[]);
            }
            if avail < n {
                self.pos = self.end;
                return Err(TraceError::Truncated { path: self.path.to_string(), trailing: avail, record_size: n });
            }
        }
        let whole = ((self.end - self.pos) / n).min(max);
        let r = &self.buf[self.pos..self.pos + whole * n];
        self.pos += whole * n;
        self.index += whole as u64;
        Ok(r)
    }

    /// Index of the record last returned.
    pub fn index(&self) -> u64 {
        self.index.saturating_sub(1)
    }

    /// An error about the record last returned.
    #[cold]
    pub fn error(&self, field: &'static str, problem: impl Into<String>) -> TraceError {
        let record = self.index();
        TraceError::BadRecord {
            path: self.path.to_string(),
            record,
            offset: record * self.record_size as u64,
            field,
            problem: problem.into(),
        }
    }

    /// The file.
    pub fn path(&self) -> &str {
        &self.path
    }
}

/// Little-endian field readers over a record slice (bounds are the caller's record size).
#[inline]
pub fn le_u16(r: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([r[at], r[at + 1]])
}
/// See [`le_u16`].
#[inline]
pub fn le_u32(r: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([r[at], r[at + 1], r[at + 2], r[at + 3]])
}
/// See [`le_u16`].
#[inline]
pub fn le_u64(r: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&r[at..at + 8]);
    u64::from_le_bytes(b)
}
