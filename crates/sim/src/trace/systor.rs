//! SNIA SYSTOR'17 enterprise VDI traces: CSV with header `Timestamp,Response,IOType,LUN,Offset,Size`,
//! the timestamp in (fractional) Unix seconds, IOType `R`/`W`, offset and size in bytes. Rows
//! are not strictly time-sorted in the originals; the simulator tolerates that (it never moves
//! its clock backwards).

use super::parse::{Split, decimal_to_ns, eq_ignore_case, trim, u64_dec};
use super::{IoOp, Lines, TraceError, TraceReader, TraceRecord};

/// The SYSTOR'17 reader.
pub struct SystorReader {
    lines: Lines,
}

impl SystorReader {
    /// Reads from `lines`.
    pub fn new(lines: Lines) -> SystorReader {
        SystorReader { lines }
    }
}

impl TraceReader for SystorReader {
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
            let Some(ts) = decimal_to_ns(ts, 1_000_000_000) else {
                if eq_ignore_case(trim(ts), "timestamp") {
                    continue;
                }
                return Err(self.lines.error("Timestamp", "expected seconds"));
            };
            let _response = f.next().ok_or_else(|| self.lines.error("Response", "missing (6 fields expected)"))?;
            let op = match f.next().map(trim) {
                Some([b'R' | b'r', ..]) => IoOp::Read,
                Some([b'W' | b'w', ..]) => IoOp::Write,
                _ => return Err(self.lines.error("IOType", "expected R or W")),
            };
            let lun = f.next().and_then(u64_dec).ok_or_else(|| self.lines.error("LUN", "expected an integer"))?;
            let offset =
                f.next().and_then(u64_dec).ok_or_else(|| self.lines.error("Offset", "expected a byte offset"))?;
            let size = f.next().and_then(u64_dec).ok_or_else(|| self.lines.error("Size", "expected a byte count"))?;
            let volume = u32::try_from(lun).map_err(|_| self.lines.error("LUN", "too large"))?;
            *rec = TraceRecord { time_ns: ts, op, volume, offset, len: size, key: offset };
            return Ok(true);
        }
    }
}
