//! The ARC paper's `.lis` traces (Megiddo and Modha, FAST'03): whitespace-separated
//! `starting_block num_blocks ignore request_number` with 512-byte blocks. The traces have no
//! timestamps and only reads (they were filtered by upstream caches); replay them closed-loop.

use super::parse::{Words, u64_dec};
use super::{IoOp, LineFormat, Lines, TraceError, TraceRecord};

/// The ARC `.lis` format.
#[derive(Default)]
pub struct ArcLis;

impl LineFormat for ArcLis {
    fn parse(&mut self, l: &Lines) -> Result<Option<TraceRecord>, TraceError> {
        let mut f = Words::new(l.current());
        let start = l.field(f.next(), "starting_block", u64_dec, "expected a block number")?;
        let n = l.field(f.next(), "num_blocks", u64_dec, "expected a block count")?;
        let (offset, len) = (l.sectors(start, "starting_block")?, l.sectors(n, "num_blocks")?);
        Ok(Some(TraceRecord { time_ns: 0, op: IoOp::Read, volume: 0, offset, len, key: start }))
    }
}
