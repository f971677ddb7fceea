//! SPC traces (UMass Financial1/2, WebSearch1/2/3): CSV `ASU,LBA,Size,Opcode,Timestamp` with
//! the LBA in 512-byte sectors, the size in bytes, the opcode `r`/`w` and the timestamp in
//! seconds. Extra trailing fields (some copies have them) are ignored.

use super::parse::{Split, decimal_to_ns, trim, u64_dec};
use super::{IoOp, LineFormat, Lines, TraceError, TraceRecord};

/// The SPC format.
#[derive(Default)]
pub struct Spc;

/// `r`/`R`/`w`/`W` (and words starting with them).
pub(crate) fn rw_letter(s: &[u8]) -> Option<IoOp> {
    match trim(s) {
        [b'r' | b'R', ..] => Some(IoOp::Read),
        [b'w' | b'W', ..] => Some(IoOp::Write),
        _ => None,
    }
}

/// A non-negative integer that fits a volume number.
pub(crate) fn small(s: &[u8]) -> Option<u32> {
    u64_dec(s).and_then(|v| u32::try_from(v).ok())
}

impl LineFormat for Spc {
    fn parse(&mut self, l: &Lines) -> Result<Option<TraceRecord>, TraceError> {
        let mut f = Split::new(l.current(), b',');
        let asu = l.field(f.next(), "ASU", small, "expected a small integer")?;
        let lba = l.field(f.next(), "LBA", u64_dec, "expected a sector number")?;
        let size = l.field(f.next(), "Size", u64_dec, "expected a byte count")?;
        let op = l.field(f.next(), "Opcode", rw_letter, "expected r or w")?;
        let ts = l.field(f.next(), "Timestamp", |t| decimal_to_ns(t, 1_000_000_000), "expected seconds")?;
        let offset = l.sectors(lba, "LBA")?;
        Ok(Some(TraceRecord { time_ns: ts, op, volume: asu, offset, len: size, key: lba }))
    }
}
