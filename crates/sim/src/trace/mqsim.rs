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
            if self.lines.is_blank() {
                continue;
            }
            let l = &self.lines;
            let mut f = Words::new(l.current());
            let ts = l.field(f.next(), "arrival_time", u64_dec, "expected nanoseconds")?;
            let dev = l.field(
                f.next(),
                "device",
                |v| u64_dec(v).and_then(|d| u32::try_from(d).ok()),
                "expected a small integer",
            )?;
            let lba = l.field(f.next(), "lba", u64_dec, "expected a sector number")?;
            let size = l.field(f.next(), "size", u64_dec, "expected a sector count")?;
            let op = l.field(
                f.next(),
                "type",
                |t| match u64_dec(t)? {
                    1 => Some(IoOp::Read),
                    0 => Some(IoOp::Write),
                    _ => None,
                },
                "expected 1 (read) or 0 (write)",
            )?;
            let (offset, len) = (l.sectors(lba, "lba")?, l.sectors(size, "size")?);
            *rec = TraceRecord { time_ns: ts, op, volume: dev, offset, len, key: lba };
            return Ok(true);
        }
    }
}
