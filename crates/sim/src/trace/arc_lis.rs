//! The ARC paper's `.lis` traces (Megiddo and Modha, FAST'03): whitespace-separated
//! `starting_block num_blocks ignore request_number` with 512-byte blocks. The traces have no
//! timestamps and only reads (they were filtered by upstream caches); replay them closed-loop.

use super::parse::{Words, u64_dec};
use super::{IoOp, Lines, TraceError, TraceReader, TraceRecord};

/// The ARC `.lis` reader.
pub struct ArcLisReader {
    lines: Lines,
}

impl ArcLisReader {
    /// Reads from `lines`.
    pub fn new(lines: Lines) -> ArcLisReader {
        ArcLisReader { lines }
    }
}

impl TraceReader for ArcLisReader {
    fn read(&mut self, rec: &mut TraceRecord) -> Result<bool, TraceError> {
        loop {
            if !self.lines.advance()? {
                return Ok(false);
            }
            if self.lines.is_blank() {
                continue;
            }
            let l = &self.lines;
            let mut f = Words::new(l.current());
            let start = l.field(f.next(), "starting_block", u64_dec, "expected a block number")?;
            let n = l.field(f.next(), "num_blocks", u64_dec, "expected a block count")?;
            let (offset, len) = (l.sectors(start, "starting_block")?, l.sectors(n, "num_blocks")?);
            *rec = TraceRecord { time_ns: 0, op: IoOp::Read, volume: 0, offset, len, key: start };
            return Ok(true);
        }
    }
}
