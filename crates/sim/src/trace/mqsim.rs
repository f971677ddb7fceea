//! MQSim / DiskSim ascii traces (the UMass WebSearch sample and MQSim's TPC-C sample):
//! whitespace-separated `arrival_ns device lba size type` with the LBA and size in 512-byte
//! sectors and type 1 = read, 0 = write.

use super::parse::{Words, u64_dec};
use super::spc::small;
use super::{IoOp, LineFormat, Lines, TraceError, TraceRecord};

/// The MQSim ascii format.
#[derive(Default)]
pub struct Mqsim;

impl LineFormat for Mqsim {
    fn parse(&mut self, l: &Lines) -> Result<Option<TraceRecord>, TraceError> {
        let mut f = Words::new(l.current());
        let ts = l.field(f.next(), "arrival_time", u64_dec, "expected nanoseconds")?;
        let dev = l.field(f.next(), "device", small, "expected a small integer")?;
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
        Ok(Some(TraceRecord { time_ns: ts, op, volume: dev, offset, len, key: lba }))
    }
}
