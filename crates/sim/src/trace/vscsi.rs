//! CloudPhysics VMware vSCSI binary traces (Waldspurger et al., FAST'15), as libCacheSim reads
//! them. Version 1 records are 32 bytes, `u32 sn; u32 len; u32 nSG; u16 cmd; u16 ver; u64 lbn;
//! u64 ts`; version 2 records are 40 bytes, `u16 cmd; u16 ver; u32 sn; u32 len; u32 nSG; u64 lbn;
//! u64 ts; u64 rt`, little-endian. The version is the high byte of `ver`, checked on the first two
//! records. `len` is in bytes, `lbn` in 512-byte sectors, `ts` in microseconds. SCSI READ
//! opcodes (0x08/0x28/0xa8/0x88) are reads, WRITE opcodes (0x0a/0x2a/0xaa/0x8a) writes; other
//! commands are counted as reads (libCacheSim ignores the opcode altogether).

use super::binary::{Records, le_u16, le_u32, le_u64};
use super::{IoOp, TraceError, TraceReader, TraceRecord};

/// The vSCSI reader.
pub struct VscsiReader {
    records: Records,
    version: u8,
}

/// Detects the version from the first two records: 2 or 1, or `None`.
pub fn detect_version(head: &[u8]) -> Option<u8> {
    let v2 = head.len() >= 80 && (0..2).all(|i| le_u16(head, i * 40 + 2) >> 8 == 2);
    if v2 {
        return Some(2);
    }
    let v1 = head.len() >= 64 && (0..2).all(|i| le_u16(head, i * 32 + 14) >> 8 == 1);
    v1.then_some(1)
}

impl VscsiReader {
    /// Reads from `records` (record size is set here after detecting the version).
    pub fn new(mut records: Records) -> Result<VscsiReader, TraceError> {
        let head = records.peek(80)?;
        let Some(version) = detect_version(head) else {
            return Err(TraceError::Format {
                path: records.path().to_string(),
                reason: "not a vscsi trace: the first two records carry neither version 1 nor version 2".into(),
            });
        };
        records.set_record_size(if version == 2 { 40 } else { 32 });
        Ok(VscsiReader { records, version })
    }
}

fn op_of(cmd: u16) -> IoOp {
    match cmd & 0xff {
        0x0a | 0x2a | 0xaa | 0x8a => IoOp::Write,
        _ => IoOp::Read,
    }
}

impl VscsiReader {
    /// Decodes a record; `None` when its sector does not fit a byte address.
    #[inline]
    fn decode(version: u8, r: &[u8]) -> Option<TraceRecord> {
        let (cmd, len, lbn, ts) = if version == 1 {
            (le_u16(r, 12), le_u32(r, 4), le_u64(r, 16), le_u64(r, 24))
        } else {
            (le_u16(r, 0), le_u32(r, 8), le_u64(r, 16), le_u64(r, 24))
        };
        Some(TraceRecord {
            time_ns: ts.saturating_mul(1000),
            op: op_of(cmd),
            volume: 0,
            offset: lbn.checked_mul(512)?,
            len: u64::from(len),
            key: lbn,
        })
    }
}

impl TraceReader for VscsiReader {
    #[inline]
    fn read(&mut self, rec: &mut TraceRecord) -> Result<bool, TraceError> {
        let version = self.version;
        let Some(r) = self.records.next_record()? else {
            return Ok(false);
        };
        match Self::decode(version, r) {
            Some(d) => {
                *rec = d;
                Ok(true)
            }
            None => {
                let lbn = le_u64(r, 16);
                Err(self.records.error("lbn", format!("sector {lbn} is beyond a 64-bit byte address")))
            }
        }
    }
}
