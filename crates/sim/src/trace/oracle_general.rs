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
        let Some(r) = self.records.next_record()? else {
            return Ok(false);
        };
        *rec = Self::decode(r);
        Ok(true)
    }

    fn read_batch(&mut self, out: &mut Vec<TraceRecord>, max: usize) -> Result<bool, TraceError> {
        let mut left = max;
        while left > 0 {
            let chunk = self.records.next_many(left)?;
            if chunk.is_empty() {
                return Ok(false);
            }
            left -= chunk.len() / RECORD_SIZE;
            out.extend(chunk.chunks_exact(RECORD_SIZE).map(Self::decode));
        }
        Ok(true)
    }
}

impl OracleGeneralReader {
    #[inline]
    fn decode(r: &[u8]) -> TraceRecord {
        TraceRecord {
            time_ns: u64::from(le_u32(r, 0)) * 1_000_000_000,
            op: IoOp::Read,
            volume: 0,
            offset: 0,
            len: u64::from(le_u32(r, 12)),
            key: le_u64(r, 4),
        }
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
