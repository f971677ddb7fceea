//! SNIA SYSTOR'17 enterprise VDI traces: CSV with header `Timestamp,Response,IOType,LUN,Offset,Size`,
//! the timestamp in (fractional) Unix seconds, IOType `R`/`W`, offset and size in bytes. Rows
//! are not strictly time-sorted in the originals; the simulator tolerates that (it never moves
//! its clock backwards).

use super::parse::{Split, decimal_to_ns, eq_ignore_case, trim, u64_dec};
use super::spc::{rw_letter, small};
use super::{LineFormat, Lines, TraceError, TraceRecord};

/// The SYSTOR'17 format.
#[derive(Default)]
pub struct Systor;

impl LineFormat for Systor {
    fn parse(&mut self, l: &Lines) -> Result<Option<TraceRecord>, TraceError> {
        let mut f = Split::new(l.current(), b',');
        let ts = f.next().unwrap_or_default();
        let Some(ts) = decimal_to_ns(ts, 1_000_000_000) else {
            if eq_ignore_case(trim(ts), "timestamp") {
                return Ok(None);
            }
            return Err(l.error("Timestamp", "expected seconds"));
        };
        l.field(f.next(), "Response", Some, "missing (6 fields expected)")?;
        let op = l.field(f.next(), "IOType", rw_letter, "expected R or W")?;
        let lun = l.field(f.next(), "LUN", small, "expected a small integer")?;
        let offset = l.field(f.next(), "Offset", u64_dec, "expected a byte offset")?;
        let size = l.field(f.next(), "Size", u64_dec, "expected a byte count")?;
        Ok(Some(TraceRecord { time_ns: ts, op, volume: lun, offset, len: size, key: offset }))
    }
}
