//! `blkparse` default text output, e.g.
//! `  8,0    3        1     0.000000000  4162  Q  WS 2048 + 8 [kworker/u8:2]`:
//! device, cpu, sequence, time (s), pid, action, RWBS, sector, `+`, sectors, process.
//!
//! Only one action is replayed (default `Q`, the request as queued by the file system; use
//! `blkparse:action=D` for dispatches to the driver). Discards, flushes without data and other
//! actions are skipped, as are non-event lines (headers, the per-CPU summary at the end). Each
//! device (major,minor) is a volume.

use super::parse::{Words, decimal_to_ns, u64_dec};
use super::{IoOp, Lines, TraceError, TraceReader, TraceRecord, VolumeMap};

/// The blkparse reader.
pub struct BlkparseReader {
    lines: Lines,
    action: Vec<u8>,
    devices: VolumeMap<(u64, u64)>,
}

impl BlkparseReader {
    /// Reads `action` events (e.g. `Q`, `D`, `C`) from `lines`.
    pub fn new(lines: Lines, action: &str) -> BlkparseReader {
        BlkparseReader { lines, action: action.as_bytes().to_vec(), devices: VolumeMap::default() }
    }
}

fn device(word: &[u8]) -> Option<(u64, u64)> {
    let comma = memchr::memchr(b',', word)?;
    Some((u64_dec(&word[..comma])?, u64_dec(&word[comma + 1..])?))
}

impl TraceReader for BlkparseReader {
    fn read(&mut self, rec: &mut TraceRecord) -> Result<bool, TraceError> {
        loop {
            if !self.lines.advance()? {
                return Ok(false);
            }
            let line = self.lines.current();
            let mut f = Words::new(line);
            let Some((major, minor)) = f.next().and_then(device) else {
                continue;
            };
            let (Some(_cpu), Some(_seq), Some(time), Some(_pid), Some(action)) =
                (f.next(), f.next(), f.next(), f.next(), f.next())
            else {
                return Err(self
                    .lines
                    .error("action", "an event line needs device, cpu, sequence, time, pid and action"));
            };
            if action != self.action.as_slice() {
                continue;
            }
            let time =
                decimal_to_ns(time, 1_000_000_000).ok_or_else(|| self.lines.error("time", "expected seconds"))?;
            let rwbs = f.next().ok_or_else(|| self.lines.error("rwbs", "missing"))?;
            if rwbs.contains(&b'D') {
                continue; // discard
            }
            let op = if rwbs.contains(&b'W') {
                IoOp::Write
            } else if rwbs.contains(&b'R') {
                IoOp::Read
            } else {
                continue; // flush or no data
            };
            let Some(sector) = f.next() else { continue };
            let sector = u64_dec(sector).ok_or_else(|| self.lines.error("sector", "expected a sector number"))?;
            if f.next() != Some(b"+") {
                return Err(self.lines.error("sectors", "expected `+ <count>` after the sector"));
            }
            let n = f.next().and_then(u64_dec).ok_or_else(|| self.lines.error("sectors", "expected a sector count"))?;
            let volume = self.devices.index((major, minor));
            let offset = sector.checked_mul(512).ok_or_else(|| self.lines.error("sector", "too large"))?;
            let len = n.checked_mul(512).ok_or_else(|| self.lines.error("sectors", "too large"))?;
            *rec = TraceRecord { time_ns: time, op, volume, offset, len, key: sector };
            return Ok(true);
        }
    }
}
