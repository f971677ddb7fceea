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
            let line = self.lines.current();
            let mut f = Words::new(line);
            let Some(start) = f.next() else { continue };
            let start = u64_dec(start).ok_or_else(|| self.lines.error("starting_block", "expected a block number"))?;
            let n =
                f.next().and_then(u64_dec).ok_or_else(|| self.lines.error("num_blocks", "expected a block count"))?;
            let offset = start.checked_mul(512).ok_or_else(|| self.lines.error("starting_block", "too large"))?;
            let len = n.checked_mul(512).ok_or_else(|| self.lines.error("num_blocks", "too large"))?;
            *rec = TraceRecord { time_ns: 0, op: IoOp::Read, volume: 0, offset, len, key: start };
            return Ok(true);
        }
    }
}
