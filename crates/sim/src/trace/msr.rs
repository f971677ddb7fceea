//! MSR Cambridge block traces (SNIA IOTTA set 388): CSV without header,
//! `Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime`; the timestamp is a Windows
//! FILETIME (100 ns ticks), Type is `Read` or `Write`, Offset and Size are bytes. Each
//! (host, disk) pair becomes a volume.

use super::parse::{Split, eq_ignore_case, trim, u64_dec};
use super::{IoOp, LineFormat, Lines, TraceError, TraceRecord, VolumeMap};

/// The MSR format.
#[derive(Default)]
pub struct Msr {
    volumes: VolumeMap<(Vec<u8>, u64)>,
}

impl LineFormat for Msr {
    fn parse(&mut self, l: &Lines) -> Result<Option<TraceRecord>, TraceError> {
        let mut f = Split::new(l.current(), b',');
        let ts = f.next().unwrap_or_default();
        let Some(ticks) = u64_dec(ts) else {
            if l.line_no() == 1 && eq_ignore_case(trim(ts), "timestamp") {
                return Ok(None); // a header some conversions add
            }
            return Err(l.error("Timestamp", "expected FILETIME ticks (a non-negative integer)"));
        };
        let host = l.field(f.next(), "Hostname", Some, "missing (7 comma-separated fields expected)")?;
        let disk = l.field(f.next(), "DiskNumber", u64_dec, "expected an integer")?;
        let op = l.field(
            f.next(),
            "Type",
            |t| {
                if eq_ignore_case(t, "Read") {
                    Some(IoOp::Read)
                } else if eq_ignore_case(t, "Write") {
                    Some(IoOp::Write)
                } else {
                    None
                }
            },
            "expected Read or Write",
        )?;
        let offset = l.field(f.next(), "Offset", u64_dec, "expected a byte offset")?;
        let size = l.field(f.next(), "Size", u64_dec, "expected a byte count")?;
        let volume = self.volumes.index((host.to_vec(), disk));
        Ok(Some(TraceRecord { time_ns: ticks.saturating_mul(100), op, volume, offset, len: size, key: offset }))
    }
}
