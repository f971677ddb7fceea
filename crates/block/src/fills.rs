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
/// read its whole block for a copy of it the engine issued; the copy then waits for the read's
/// bytes (a whole-block piece's too, without widening).
pub(crate) fn feeds_copy(sh: &Shared, c: &mut Core, p: &Piece, r: &ReadRoute) -> bool {
    let plain_hdd = r.dev == Dev::Hdd && !r.ram && r.overlay.is_none() && r.off == hdd_offset(sh, p);
    let partial = p.inner != 0 || p.len != sh.block_size();
    // Sub-LUNs move a chunk at a time and take no bytes from a read (`crate::subluns`).
    let whole_moves = sh.ram_level != RamLevel::WriteBuffer;
    if !plain_hdd || !whole_moves || sh.layout() == Layout::Concatenated {
        return false;
    }
    // The engine's new work, not yet drained: a copy of this block from the HDD to the SSD.
    let copies = c.engine.pending_work().iter().any(|w| {
        w.obj.0 == p.block
            && (w.from, w.to) == (Level::Slow, Level::Fast)
            && matches!(w.kind, WorkKind::Promote | WorkKind::Copy)
    });
    if copies {
        // A whole-block piece hands its bytes over as read ([`keep_for_fills`]); a partial
        // one widens the read.
        c.want_ram.insert(p.block);
    }
    copies && partial
}

/// Reads a run of plain HDD pieces (adjacent in the request and on the HDD) with one call,
/// widened to the block edges of its first and last pieces where those blocks feed a copy
/// (only a request's first and last pieces can be partial), gives the pieces their bytes and
/// hands each fed block to the copy waiting for it. The caller holds the blocks' stripes, so
/// no write changes them before the copies write them to the SSD.
pub(crate) fn read_widened(
    sh: &Shared,
    buf: &mut [u8],
    run: &[(Piece, ReadRoute)],
    whole: &[u64],
) -> Result<(), DeviceError> {
    let bs = sh.block_size();
    let (Some(&(first, r)), Some(&(last, _))) = (run.first(), run.last()) else { return Ok(()) };
    let lead = if whole.contains(&first.block) { first.inner } else { 0 };
    let tail = if whole.contains(&last.block) { bs - (last.inner + last.len) } else { 0 };
    let span = (last.at - first.at) as u64 + last.len;
    let mut bytes = vec![0u8; (lead + span + tail) as usize];
    sh.backend.read(Dev::Hdd, &mut bytes, r.off - lead).map_err(|e| DeviceError::io("reading the HDD image", e))?;
    buf[first.at..first.at + span as usize].copy_from_slice(&bytes[lead as usize..(lead + span) as usize]);
    // A fed first block starts the bytes and is whole in them (more pieces follow it to its
    // end, or the tail widened it); a fed last block of a longer run ends them.
    let mut c = sh.lock();
    if whole.contains(&first.block) && c.want_ram.remove(&first.block) {
        c.ram_fill.insert(first.block, bytes[..bs as usize].to_vec());
    }
    if run.len() > 1 && whole.contains(&last.block) && c.want_ram.remove(&last.block) {
        c.ram_fill.insert(last.block, bytes[bytes.len() - bs as usize..].to_vec());
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
