//! MSR Cambridge block traces (SNIA IOTTA set 388): CSV without header,
//! `Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime`; the timestamp is a Windows
//! FILETIME (100 ns ticks), Type is `Read` or `Write`, Offset and Size are bytes. Each
//! (host, disk) pair becomes a volume.

use super::parse::{Split, eq_ignore_case, u64_dec};
use super::{IoOp, Lines, TraceError, TraceReader, TraceRecord};

/// The MSR reader.
pub struct MsrReader {
    lines: Lines,
    volumes: Vec<(Vec<u8>, u64)>,
}

impl MsrReader {
    /// Reads from `lines`.
    pub fn new(lines: Lines) -> MsrReader {
        MsrReader { lines, volumes: Vec::new() }
    }
}

impl TraceReader for MsrReader {
    fn read(&mut self, rec: &mut TraceRecord) -> Result<bool, TraceError> {
        loop {
            if !self.lines.advance()? {
                return Ok(false);
            }
            let line = self.lines.current();
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let mut f = Split::new(line, b',');
            let ts = f.next().unwrap_or_default();
            let Some(ticks) = u64_dec(ts) else {
                if self.lines.line_no() == 1 && eq_ignore_case(super::parse::trim(ts), "timestamp") {
                    continue; // a header some conversions add
                }
                return Err(self.lines.error("Timestamp", "expected FILETIME ticks (a non-negative integer)"));
            };
            let host =
                f.next().ok_or_else(|| self.lines.error("Hostname", "missing (7 comma-separated fields expected)"))?;
            let disk = f.next().ok_or_else(|| self.lines.error("DiskNumber", "missing"))?;
            let disk = u64_dec(disk).ok_or_else(|| self.lines.error("DiskNumber", "expected an integer"))?;
            let ty = f.next().ok_or_else(|| self.lines.error("Type", "missing"))?;
            let op = if eq_ignore_case(ty, "Read") {
                IoOp::Read
            } else if eq_ignore_case(ty, "Write") {
                IoOp::Write
            } else {
                return Err(self.lines.error("Type", "expected Read or Write"));
            };
            let offset =
                f.next().and_then(u64_dec).ok_or_else(|| self.lines.error("Offset", "expected a byte offset"))?;
            let size = f.next().and_then(u64_dec).ok_or_else(|| self.lines.error("Size", "expected a byte count"))?;
            let volume = match self.volumes.iter().position(|(h, d)| h == host && *d == disk) {
                Some(v) => v,
                None => {
                    self.volumes.push((host.to_vec(), disk));
                    self.volumes.len() - 1
                }
            };
            *rec = TraceRecord {
                time_ns: ticks.saturating_mul(100),
                op,
                volume: volume as u32,
                offset,
                len: size,
                key: offset,
            };
            return Ok(true);
        }
    }
}
