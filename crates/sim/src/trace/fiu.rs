//! FIU SRCMap / IODedup traces (homes, webmail, online, mail): whitespace-separated
//! `ts pid process lba size op major minor md5` with the timestamp in nanoseconds, the LBA and
//! the size in 512-byte sectors, and op `R` or `W`. Each (major, minor) device is a volume.

use super::parse::{Words, u64_dec};
use super::spc::rw_letter;
use super::{LineFormat, Lines, TraceError, TraceRecord, VolumeMap};

/// The FIU format.
#[derive(Default)]
pub struct Fiu {
    devices: VolumeMap<(u64, u64)>,
}

impl LineFormat for Fiu {
    fn parse(&mut self, l: &Lines) -> Result<Option<TraceRecord>, TraceError> {
        let mut f = Words::new(l.current());
        let ts = l.field(f.next(), "ts", u64_dec, "expected nanoseconds")?;
        l.field(f.next(), "pid", Some, "missing (9 fields expected)")?;
        l.field(f.next(), "process", Some, "missing")?;
        let lba = l.field(f.next(), "lba", u64_dec, "expected a sector number")?;
        let size = l.field(f.next(), "size", u64_dec, "expected a sector count")?;
        let op = l.field(f.next(), "op", rw_letter, "expected R or W")?;
        let major = l.field(f.next(), "major", u64_dec, "expected an integer")?;
        let minor = l.field(f.next(), "minor", u64_dec, "expected an integer")?;
        let (offset, len) = (l.sectors(lba, "lba")?, l.sectors(size, "size")?);
        let volume = self.devices.index((major, minor));
        Ok(Some(TraceRecord { time_ns: ts, op, volume, offset, len, key: lba }))
    }
}
