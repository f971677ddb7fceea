//! FIU SRCMap / IODedup traces (homes, webmail, online, mail): whitespace-separated
//! `ts pid process lba size op major minor md5` with the timestamp in nanoseconds, the LBA and
//! the size in 512-byte sectors, and op `R` or `W`. Each (major, minor) device is a volume.

use super::parse::{Words, u64_dec};
use super::{IoOp, Lines, TraceError, TraceReader, TraceRecord};

/// The FIU reader.
pub struct FiuReader {
    lines: Lines,
    devices: Vec<(u64, u64)>,
}

impl FiuReader {
    /// Reads from `lines`.
    pub fn new(lines: Lines) -> FiuReader {
        FiuReader { lines, devices: Vec::new() }
    }
}

impl TraceReader for FiuReader {
    fn read(&mut self, rec: &mut TraceRecord) -> Result<bool, TraceError> {
        loop {
            if !self.lines.advance()? {
                return Ok(false);
            }
            let line = self.lines.current();
            let mut f = Words::new(line);
            let Some(ts) = f.next() else { continue };
            let ts = u64_dec(ts).ok_or_else(|| self.lines.error("ts", "expected nanoseconds"))?;
            let _pid = f.next().ok_or_else(|| self.lines.error("pid", "missing (9 fields expected)"))?;
            let _proc = f.next().ok_or_else(|| self.lines.error("process", "missing"))?;
            let lba = f.next().and_then(u64_dec).ok_or_else(|| self.lines.error("lba", "expected a sector number"))?;
            let size = f.next().and_then(u64_dec).ok_or_else(|| self.lines.error("size", "expected a sector count"))?;
            let op = match f.next() {
                Some([b'R' | b'r', ..]) => IoOp::Read,
                Some([b'W' | b'w', ..]) => IoOp::Write,
                _ => return Err(self.lines.error("op", "expected R or W")),
            };
            let major = f.next().and_then(u64_dec).ok_or_else(|| self.lines.error("major", "expected an integer"))?;
            let minor = f.next().and_then(u64_dec).ok_or_else(|| self.lines.error("minor", "expected an integer"))?;
            let volume = match self.devices.iter().position(|&d| d == (major, minor)) {
                Some(v) => v,
                None => {
                    self.devices.push((major, minor));
                    self.devices.len() - 1
                }
            };
            let offset = lba.checked_mul(512).ok_or_else(|| self.lines.error("lba", "too large"))?;
            let len = size.checked_mul(512).ok_or_else(|| self.lines.error("size", "too large"))?;
            *rec = TraceRecord { time_ns: ts, op, volume: volume as u32, offset, len, key: lba };
            return Ok(true);
        }
    }
}
