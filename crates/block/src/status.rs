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

/// The extents from `offset`, covering at most `len` bytes (fewer when the range is long).
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
    let mut out: Vec<Extent> = Vec::new();
    for block in first..=last {
        let _g = sh.stripe(block).read().unwrap_or_else(std::sync::PoisonError::into_inner);
        let only_on_hdd = {
            let c = sh.lock();
            c.slots.slot_of(block).is_none()
                && !c.work.busy(ObjectId(block))
                && !c.engine.placement(ObjectId(block)).in_ram
                && !sh.wbuf.moving(block)
        };
        let hole = only_on_hdd
            && sh
                .backend
                .is_hole(Dev::Hdd, block * bs, bs)
                .map_err(|e| DeviceError::io("asking the HDD image for holes", e))?;
        let start = (block * bs).max(offset);
        let end = ((block + 1) * bs).min(offset + len);
        match out.last_mut() {
            Some(e) if e.hole == hole => e.len = end - e.offset,
            _ => out.push(Extent { offset: start, len: end - start, hole }),
        }
    }
    Ok(out)
}
