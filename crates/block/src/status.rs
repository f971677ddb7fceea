//! Block status (NBD's `NBD_CMD_BLOCK_STATUS`): which ranges are holes, so that `nbdcopy`,
//! `qemu-img convert` and `qemu-img map` skip them. A block is a hole only when every copy of it
//! is: no SSD slot, no RAM level holding it, no move in flight, and a hole in the HDD image
//! (never written, or trimmed). Anything else is reported as data, which is always safe.

use tierwise_core::ObjectId;

use crate::backend::Dev;
use crate::device::Shared;
use crate::error::DeviceError;
use crate::format::Layout;

/// A run of blocks of one kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Extent {
    /// Byte offset.
    pub offset: u64,
    /// Bytes.
    pub len: u64,
    /// Unallocated and reads as zeroes.
    pub hole: bool,
}

/// Blocks looked at per call: a client asks again from where the answer ends.
const MAX_BLOCKS: u64 = 4096;

/// Blocks whose other copies are checked under one acquisition of their stripes and the core.
const CHECKED_AT_ONCE: usize = 256;

/// The extents from `offset`, covering at most `len` bytes (fewer when the range is long).
///
/// The HDD image is asked for its holes once per call, without locks: a block with data there
/// is data (always a safe answer). A block that looked like a hole is confirmed with its stripe
/// held, so that no move or client write is half-way through it: no other copy, and still a
/// hole. Blocks are confirmed `CHECKED_AT_ONCE` at a time, not one lock and one `lseek` each
/// (a copy of a 1 GiB device asked 262,144 of each, in the time of the copy itself).
pub(crate) fn extents(sh: &Shared, offset: u64, len: u64) -> Result<Vec<Extent>, DeviceError> {
    let size = sh.size();
    if offset.checked_add(len).is_none_or(|e| e > size) || len == 0 {
        return Err(DeviceError::OutOfRange { offset, len, size });
    }
    if sh.layout() == Layout::Concatenated {
        return Ok(vec![Extent { offset, len, hole: false }]);
    }
    let bs = sh.block_size();
    let first = offset / bs;
    let last = ((offset + len - 1) / bs).min(first + MAX_BLOCKS - 1);
    let holes_of = |from: u64, n: usize| {
        sh.backend.holes(Dev::Hdd, from * bs, bs, n).map_err(|e| DeviceError::io("asking the HDD image for holes", e))
    };
    let mut hole = holes_of(first, (last - first + 1) as usize)?;
    let mut i = 0;
    while i < hole.len() {
        if !hole[i] {
            i += 1;
            continue;
        }
        let mut j = i + 1;
        while j < hole.len() && hole[j] && j - i < CHECKED_AT_ONCE {
            j += 1;
        }
        let blocks = first + i as u64..first + j as u64;
        let _g = crate::io::lock_stripes(sh, blocks.clone(), false);
        let still = holes_of(blocks.start, j - i)?;
        let c = sh.lock();
        for (k, block) in blocks.enumerate() {
            hole[i + k] = still[k]
                && c.slots.slot_of(block).is_none()
                && !c.work.busy(ObjectId(block))
                && !c.engine.placement(ObjectId(block)).in_ram
                && !sh.wbuf.moving(block);
        }
        i = j;
    }
    let mut out: Vec<Extent> = Vec::new();
    for (k, &hole) in hole.iter().enumerate() {
        let block = first + k as u64;
        let start = (block * bs).max(offset);
        let end = ((block + 1) * bs).min(offset + len);
        match out.last_mut() {
            Some(e) if e.hole == hole => e.len = end - e.offset,
            _ => out.push(Extent { offset: start, len: end - start, hole }),
        }
    }
    Ok(out)
}
