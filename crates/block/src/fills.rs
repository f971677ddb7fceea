//! Copies fed by the read that missed. A read served from the HDD, part of a block the engine
//! has just decided to copy to the SSD (a promotion or a fill), reads the whole block and
//! hands it to the mover, which then needs no HDD read of its own: one seek instead of two,
//! as bcache fills its cache from the read that missed, and as the simulator models a miss
//! (`sim::timed`: a miss that issues a fill of its object reads the whole object). A read
//! of whole blocks hands them over as it is ([`keep_for_fills`]).

use tierwise_core::arch::RamLevel;
use tierwise_core::{Level, WorkKind};

use crate::backend::Dev;
use crate::device::{Core, Shared};
use crate::error::DeviceError;
use crate::format::Layout;
use crate::io::{Piece, ReadRoute, hdd_offset};

/// Whether piece `p`, routed by `r` under the core lock just after the engine's answer, should
/// read its whole block for a copy of it the engine issued; if so, the copy waits for it.
pub(crate) fn feeds_copy(sh: &Shared, c: &mut Core, p: &Piece, r: &ReadRoute) -> bool {
    let plain_hdd = r.dev == Dev::Hdd && !r.ram && r.overlay.is_none() && r.off == hdd_offset(sh, p);
    let partial = p.inner != 0 || p.len != sh.block_size();
    // Sub-LUNs move a chunk at a time and take no bytes from a read (`crate::subluns`).
    let whole_moves = sh.ram_level != RamLevel::WriteBuffer;
    if !plain_hdd || !partial || !whole_moves || sh.layout() == Layout::Concatenated {
        return false;
    }
    // The engine's new work, not yet drained: a copy of this block from the HDD to the SSD.
    let copies = c.engine.pending_work().iter().any(|w| {
        w.obj.0 == p.block
            && (w.from, w.to) == (Level::Slow, Level::Fast)
            && matches!(w.kind, WorkKind::Promote | WorkKind::Copy)
    });
    if copies {
        c.want_ram.insert(p.block);
    }
    copies
}

/// Reads piece `p`'s whole block from the HDD, gives the piece its bytes, and hands the block
/// to the copy waiting for it. The caller holds the block's stripe, so no write changes it
/// before the copy writes it to the SSD.
pub(crate) fn read_whole(sh: &Shared, buf: &mut [u8], p: &Piece) -> Result<(), DeviceError> {
    let bs = sh.block_size();
    let mut block = vec![0u8; bs as usize];
    sh.backend.read(Dev::Hdd, &mut block, p.block * bs).map_err(|e| DeviceError::io("reading the HDD image", e))?;
    let part = &block[p.inner as usize..(p.inner + p.len) as usize];
    buf[p.at..p.at + p.len as usize].copy_from_slice(part);
    let mut c = sh.lock();
    if c.want_ram.remove(&p.block) {
        c.ram_fill.insert(p.block, block);
    }
    Ok(())
}

/// Hands the bytes of whole blocks this read took from the HDD to the copies it issued, while
/// the blocks' stripes are still held (so no write can have changed them).
pub(crate) fn keep_for_fills(sh: &Shared, buf: &[u8], routes: &[(Piece, ReadRoute)]) {
    let bs = sh.block_size();
    let whole = routes.iter().filter(|(p, r)| p.inner == 0 && p.len == bs && r.dev == Dev::Hdd && r.overlay.is_none());
    let mut c = None;
    for (p, _) in whole {
        let core = c.get_or_insert_with(|| sh.lock());
        if core.want_ram.remove(&p.block) {
            core.ram_fill.insert(p.block, buf[p.at..p.at + p.len as usize].to_vec());
        }
    }
}
