//! MQSim / DiskSim ascii traces (the UMass WebSearch sample and MQSim's TPC-C sample):
//! whitespace-separated `arrival_ns device lba size type` with the LBA and size in 512-byte
//! sectors and type 1 = read, 0 = write.

use super::parse::{Words, u64_dec};
use super::{IoOp, Lines, TraceError, TraceReader, TraceRecord};

/// The MQSim ascii reader.
pub struct MqsimReader {
    lines: Lines,
}

impl MqsimReader {
    /// Reads from `lines`.
    pub fn new(lines: Lines) -> MqsimReader {
        MqsimReader { lines }
    }
}

impl TraceReader for MqsimReader {
    fn read(&mut self, rec: &mut TraceRecord) -> Result<bool, TraceError> {
        loop {
            if !self.lines.advance()? {
                return Ok(false);
            }
            let line = self.lines.current();
            let mut f = Words::new(line);
            let Some(ts) = f.next() else { continue };
            let ts = u64_dec(ts).ok_or_else(|| self.lines.error("arrival_time", "expected nanoseconds"))?;
            let dev = f.next().and_then(u64_dec).ok_or_else(|| self.lines.error("device", "expected an integer"))?;
            let lba = f.next().and_then(u64_dec).ok_or_else(|| self.lines.error("lba", "expected a sector number"))?;
            let size = f.next().and_then(u64_dec).ok_or_else(|| self.lines.error("size", "expected a sector count"))?;
            let op = match f.next().and_then(u64_dec) {
                Some(1) => IoOp::Read,
                Some(0) => IoOp::Write,
                _ => return Err(self.lines.error("type", "expected 1 (read) or 0 (write)")),
            };
            let volume = u32::try_from(dev).map_err(|_| self.lines.error("device", "too large"))?;
            let offset = lba.checked_mul(512).ok_or_else(|| self.lines.error("lba", "too large"))?;
            let len = size.checked_mul(512).ok_or_else(|| self.lines.error("size", "too large"))?;
            *rec = TraceRecord { time_ns: ts, op, volume, offset, len, key: lba };
            return Ok(true);
        }
    }
}
