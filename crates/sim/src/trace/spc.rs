//! SPC traces (UMass Financial1/2, WebSearch1/2/3): CSV `ASU,LBA,Size,Opcode,Timestamp` with
//! the LBA in 512-byte sectors, the size in bytes, the opcode `r`/`w` and the timestamp in
//! seconds. Extra trailing fields (some copies have them) are ignored.

use super::parse::{Split, decimal_to_ns, trim, u64_dec};
use super::{IoOp, Lines, TraceError, TraceReader, TraceRecord};

/// The SPC reader.
pub struct SpcReader {
    lines: Lines,
}

impl SpcReader {
    /// Reads from `lines`.
    pub fn new(lines: Lines) -> SpcReader {
        SpcReader { lines }
    }
}

impl TraceReader for SpcReader {
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
            let asu = f.next().and_then(u64_dec).ok_or_else(|| self.lines.error("ASU", "expected an integer"))?;
            let lba = f.next().and_then(u64_dec).ok_or_else(|| self.lines.error("LBA", "expected a sector number"))?;
            let size = f.next().and_then(u64_dec).ok_or_else(|| self.lines.error("Size", "expected a byte count"))?;
            let op = match f.next().map(trim) {
                Some([b'r' | b'R', ..]) => IoOp::Read,
                Some([b'w' | b'W', ..]) => IoOp::Write,
                _ => return Err(self.lines.error("Opcode", "expected r or w")),
            };
            let ts = f
                .next()
                .and_then(|t| decimal_to_ns(t, 1_000_000_000))
                .ok_or_else(|| self.lines.error("Timestamp", "expected seconds"))?;
            let volume = u32::try_from(asu).map_err(|_| self.lines.error("ASU", "too large"))?;
            let offset = lba.checked_mul(512).ok_or_else(|| self.lines.error("LBA", "too large"))?;
            *rec = TraceRecord { time_ns: ts, op, volume, offset, len: size, key: lba };
            return Ok(true);
        }
    }
}
