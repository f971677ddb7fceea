//! libCacheSim's oracleGeneral binary format: packed little-endian 24-byte records
//! `u32 clock_time (s); u64 obj_id; u32 obj_size; i64 next_access_vtime`. An object trace: each
//! record names an object and its size. [`write_record`] is the inverse, used by
//! `tierwise trace convert`.

use std::io::Write;

use super::binary::{Records, le_u32, le_u64};
use super::{IoOp, TraceError, TraceReader, TraceRecord};

/// Record size in bytes.
pub const RECORD_SIZE: usize = 24;

/// The oracleGeneral reader.
pub struct OracleGeneralReader {
    records: Records,
}

impl OracleGeneralReader {
    /// Reads from `records` (24-byte records).
    pub fn new(records: Records) -> OracleGeneralReader {
        OracleGeneralReader { records }
    }
}

impl TraceReader for OracleGeneralReader {
    #[inline]
    fn read(&mut self, rec: &mut TraceRecord) -> Result<bool, TraceError> {
        let Some(r) = self.records.next()? else { return Ok(false) };
        let ts = le_u32(r, 0);
        let id = le_u64(r, 4);
        let size = le_u32(r, 12);
        *rec = TraceRecord {
            time_ns: u64::from(ts) * 1_000_000_000,
            op: IoOp::Read,
            volume: 0,
            offset: 0,
            len: u64::from(size),
            key: id,
        };
        Ok(true)
    }
}

/// Writes one record. `next_access` is the logical time of the object's next request (-1 or
/// `i64::MAX` when there is none; libCacheSim uses -1).
pub fn write_record(w: &mut impl Write, time_s: u32, id: u64, size: u32, next_access: i64) -> std::io::Result<()> {
    let mut b = [0u8; RECORD_SIZE];
    b[0..4].copy_from_slice(&time_s.to_le_bytes());
    b[4..12].copy_from_slice(&id.to_le_bytes());
    b[12..16].copy_from_slice(&size.to_le_bytes());
    b[16..24].copy_from_slice(&next_access.to_le_bytes());
    w.write_all(&b)
}
