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

/// `r`/`R`/`w`/`W` (and words starting with them).
pub(crate) fn rw_letter(s: &[u8]) -> Option<IoOp> {
    match trim(s) {
        [b'r' | b'R', ..] => Some(IoOp::Read),
        [b'w' | b'W', ..] => Some(IoOp::Write),
        _ => None,
    }
}

impl TraceReader for SpcReader {
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
            let asu = l.field(
                f.next(),
                "ASU",
                |v| u64_dec(v).and_then(|a| u32::try_from(a).ok()),
                "expected a small integer",
            )?;
            let lba = l.field(f.next(), "LBA", u64_dec, "expected a sector number")?;
            let size = l.field(f.next(), "Size", u64_dec, "expected a byte count")?;
            let op = l.field(f.next(), "Opcode", rw_letter, "expected r or w")?;
            let ts = l.field(f.next(), "Timestamp", |t| decimal_to_ns(t, 1_000_000_000), "expected seconds")?;
            let offset = l.sectors(lba, "LBA")?;
            *rec = TraceRecord { time_ns: ts, op, volume: asu, offset, len: size, key: lba };
            return Ok(true);
        }
    }
}
