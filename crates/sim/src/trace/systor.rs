//! SNIA SYSTOR'17 enterprise VDI traces: CSV with header `Timestamp,Response,IOType,LUN,Offset,Size`,
//! the timestamp in (fractional) Unix seconds, IOType `R`/`W`, offset and size in bytes. Rows
//! are not strictly time-sorted in the originals; the simulator tolerates that (it never moves
//! its clock backwards).

use super::parse::{Split, decimal_to_ns, eq_ignore_case, trim, u64_dec};
use super::spc::rw_letter;
use super::{Lines, TraceError, TraceReader, TraceRecord};

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
            if self.lines.is_blank() {
                continue;
            }
            let l = &self.lines;
            let mut f = Split::new(l.current(), b',');
            let ts = f.next().unwrap_or_default();
            let Some(ts) = decimal_to_ns(ts, 1_000_000_000) else {
                if eq_ignore_case(trim(ts), "timestamp") {
                    continue;
                }
                return Err(l.error("Timestamp", "expected seconds"));
            };
            l.field(f.next(), "Response", Some, "missing (6 fields expected)")?;
            let op = l.field(f.next(), "IOType", rw_letter, "expected R or W")?;
            let lun = l.field(
                f.next(),
                "LUN",
                |v| u64_dec(v).and_then(|x| u32::try_from(x).ok()),
                "expected a small integer",
            )?;
            let offset = l.field(f.next(), "Offset", u64_dec, "expected a byte offset")?;
            let size = l.field(f.next(), "Size", u64_dec, "expected a byte count")?;
            *rec = TraceRecord { time_ns: ts, op, volume: lun, offset, len: size, key: offset };
            return Ok(true);
        }
    }
}
