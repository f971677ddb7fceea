//! `blkparse` default text output, e.g.
//! `  8,0    3        1     0.000000000  4162  Q  WS 2048 + 8 [kworker/u8:2]`:
//! device, cpu, sequence, time (s), pid, action, RWBS, sector, `+`, sectors, process.
//!
//! Only one action is replayed (default `Q`, the request as queued by the file system; use
//! `blkparse:action=D` for dispatches to the driver). Discards, flushes without data and other
//! actions are skipped, as are non-event lines (headers, the per-CPU summary at the end). Each
//! device (major,minor) is a volume.

use super::parse::{Words, decimal_to_ns, u64_dec};
use super::{IoOp, LineFormat, Lines, TraceError, TraceRecord, VolumeMap};

/// The blkparse format, replaying one action.
pub struct Blkparse {
    action: Vec<u8>,
    devices: VolumeMap<(u64, u64)>,
}

impl Blkparse {
    /// Replays `action` events (e.g. `Q`, `D`, `C`).
    pub fn new(action: &str) -> Blkparse {
        Blkparse { action: action.as_bytes().to_vec(), devices: VolumeMap::default() }
    }
}

fn device(word: &[u8]) -> Option<(u64, u64)> {
    let comma = memchr::memchr(b',', word)?;
    Some((u64_dec(&word[..comma])?, u64_dec(&word[comma + 1..])?))
}

impl LineFormat for Blkparse {
    fn parse(&mut self, l: &Lines) -> Result<Option<TraceRecord>, TraceError> {
        let mut f = Words::new(l.current());
        let Some((major, minor)) = f.next().and_then(device) else { return Ok(None) };
        let (Some(_cpu), Some(_seq), Some(time), Some(_pid), Some(action)) =
            (f.next(), f.next(), f.next(), f.next(), f.next())
        else {
            return Err(l.error("action", "an event line needs device, cpu, sequence, time, pid and action"));
        };
        if action != self.action.as_slice() {
            return Ok(None);
        }
        let time = l.field(Some(time), "time", |t| decimal_to_ns(t, 1_000_000_000), "expected seconds")?;
        let rwbs = l.field(f.next(), "rwbs", Some, "missing")?;
        let op = if rwbs.contains(&b'D') {
            return Ok(None); // discard
        } else if rwbs.contains(&b'W') {
            IoOp::Write
        } else if rwbs.contains(&b'R') {
            IoOp::Read
        } else {
            return Ok(None); // flush or no data
        };
        let Some(sector) = f.next() else { return Ok(None) };
        let sector = l.field(Some(sector), "sector", u64_dec, "expected a sector number")?;
        if f.next() != Some(b"+") {
            return Err(l.error("sectors", "expected `+ <count>` after the sector"));
        }
        let n = l.field(f.next(), "sectors", u64_dec, "expected a sector count")?;
        let volume = self.devices.index((major, minor));
        let (offset, len) = (l.sectors(sector, "sector")?, l.sectors(n, "sectors")?);
        Ok(Some(TraceRecord { time_ns: time, op, volume, offset, len, key: sector }))
    }
}
