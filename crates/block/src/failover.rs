//! When the SSD image fails. A read the SSD cannot serve is served from the HDD when the HDD
//! holds the block's current bytes (every clean block: write-through, read caches, written-back
//! blocks), and the failing slot is retired, as bcache and dm-cache fall back to the origin on a
//! cache read error. A dirty block's SSD copy is its only current one: that read fails. An SSD
//! that keeps failing is detached ([`after_error`]).

use std::collections::HashSet;
use std::sync::atomic::Ordering;

use tierwise_core::{Level, ObjectId, Request};

use crate::backend::Dev;
use crate::device::Shared;
use crate::error::DeviceError;
use crate::format::Layout;
use crate::io::{Piece, ReadRoute, execute_read, hdd_offset};

/// [`execute_read`]; a piece the SSD fails to read is read from the HDD when the HDD's copy of
/// the block is current (clean: write-through, read caches, a written-back block), and its
/// slot is retired (the engine learns the block is on the HDD only). A dirty block's SSD copy
/// is its only current one: that error stands.
pub(crate) fn read_or_fall_back(sh: &Shared, buf: &mut [u8], p: &Piece, r: &ReadRoute) -> Result<(), DeviceError> {
    let e = match execute_read(sh, buf, p, r) {
        Ok(()) => return Ok(()),
        Err(e) => e,
    };
    let uses_ssd = r.dev == Dev::Ssd || r.overlay.is_some();
    if !uses_ssd || sh.layout() != Layout::Identity || !retire_failed_slot(sh, p.block) {
        return Err(e);
    }
    let hdd = ReadRoute { ram: false, dev: Dev::Hdd, off: hdd_offset(sh, p), overlay: None, pinned: None };
    execute_read(sh, buf, p, &hdd)
}

/// The SSD failed to read `block`'s slot: if the HDD holds the block's current bytes, the slot
/// is retired and the engine told the block is on the HDD only; returns whether the HDD may
/// serve it.
pub(crate) fn retire_failed_slot(sh: &Shared, block: u64) -> bool {
    let mut c = sh.lock();
    let obj = ObjectId(block);
    let p = c.engine.placement(obj);
    if p.dirty || !p.on_slow {
        return false;
    }
    // Work in flight on the block settles first: it is retired at its next failing read.
    if c.work.on(obj).is_empty() && c.slots.retire(block).is_some() {
        // Forgotten and learnt again as an HDD block: every architecture drops its SSD copy so.
        c.engine.access(&Request::op(obj, tierwise_core::Op::Delete));
        c.engine.adopt(obj, Level::Slow, sh.block_size(), false);
        c.table_changed = true;
        c.drain();
        sh.health.retired_slots.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    true
}

/// Whether the SSD was detached after failing.
pub(crate) fn detached(sh: &Shared) -> bool {
    sh.health.ssd_detached.load(Ordering::Acquire)
}

/// After an error: if the SSD has now failed [`crate::health::SSD_LOST_AFTER`] times in a row,
/// it is detached, as bcache detaches a cache device that fails: from then on every block is
/// served from the HDD without the engine. Blocks whose only current copy the SSD held (dirty,
/// or moved there by tiering) are lost until the SSD is back: reads of them fail, a write of
/// the whole block makes it whole on the HDD again. Only the identity layout can detach (with
/// `linear` the SSD's slots are part of the device).
pub(crate) fn after_error(sh: &Shared) {
    if sh.layout() != Layout::Identity || !sh.health.ssd_lost() || detached(sh) {
        return;
    }
    let mut c = sh.lock();
    if detached(sh) {
        return;
    }
    let core = &mut *c;
    let lost: HashSet<u64> = core
        .slots
        .mapped_blocks()
        .filter(|&b| {
            let p = core.engine.placement(ObjectId(b));
            p.dirty || !p.on_slow
        })
        .collect();
    sh.health.lost_dirty_blocks.store(lost.len() as u64, Ordering::Relaxed);
    core.lost = lost;
    core.table_changed = true;
    sh.health.ssd_detached.store(true, Ordering::Release);
    drop(c);
    // The HDD's replica of the table, newest from now on, names only the lost blocks: a
    // restart with the SSD back writes exactly those back, never a slot older than what the
    // HDD got since. A failure is retried at the next commit.
    let _ = crate::mover::commit(sh, false);
    sh.work_ready.notify_all();
    eprintln!(
        "tierwise: the SSD image failed {} times in a row: detached it, every block is served from the HDD{}",
        crate::health::SSD_LOST_AFTER,
        match sh.health.lost_dirty_blocks.load(Ordering::Relaxed) {
            0 => String::new(),
            n => format!("; {n} dirty block(s) had their only current copy there: reads of them fail"),
        }
    );
}

fn lost_block(block: u64) -> DeviceError {
    DeviceError::io(
        format!(
            "block {block}: its only current copy was on the failed SSD (see docs/BLOCK.md, \"When an image fails\")"
        ),
        std::io::Error::from_raw_os_error(5),
    )
}

/// A read with the SSD detached: from the HDD, unless it touches a lost block.
pub(crate) fn read_detached(sh: &Shared, buf: &mut [u8], offset: u64) -> Result<(), DeviceError> {
    let bs = sh.block_size();
    let (first, last) = (offset / bs, (offset + buf.len() as u64).div_ceil(bs));
    {
        let c = sh.lock();
        if let Some(b) = (first..last).find(|b| c.lost.contains(b)) {
            return Err(lost_block(b));
        }
    }
    sh.backend.read(Dev::Hdd, buf, offset).map_err(|e| DeviceError::io("reading the HDD image", e))
}

/// A write with the SSD detached: to the HDD. A lost block must be written whole (a part
/// would sit beside bytes older than the lost ones); then it is whole again.
pub(crate) fn write_detached(sh: &Shared, buf: &[u8], offset: u64) -> Result<(), DeviceError> {
    let bs = sh.block_size();
    let end = offset + buf.len() as u64;
    let c = sh.lock();
    for b in offset / bs..end.div_ceil(bs) {
        let whole = offset <= b * bs && end >= (b + 1) * bs;
        if c.lost.contains(&b) && !whole {
            return Err(lost_block(b));
        }
    }
    let healed: Vec<u64> = (offset / bs..end.div_ceil(bs)).filter(|b| c.lost.contains(b)).collect();
    drop(c);
    sh.backend.write(Dev::Hdd, buf, offset).map_err(|e| DeviceError::io("writing the HDD image", e))?;
    if !healed.is_empty() {
        let mut c = sh.lock();
        for b in healed {
            if c.lost.remove(&b) {
                sh.health.lost_dirty_blocks.fetch_sub(1, Ordering::Relaxed);
            }
        }
        // Out of the table before a restart with the SSD back could write its old bytes back.
        c.table_changed = true;
        drop(c);
        crate::mover::commit(sh, false)?;
    }
    Ok(())
}

/// A commit with the SSD detached: the HDD synced and, if the lost blocks changed, a
/// checkpoint naming only them written to the HDD's copy (the SSD's cannot be).
pub(crate) fn commit_detached(sh: &Shared, seq: &mut u64) -> Result<(), DeviceError> {
    sh.backend.sync(Dev::Hdd).map_err(|e| DeviceError::io("syncing the HDD image", e))?;
    let entries = {
        let mut c = sh.lock();
        if !c.table_changed {
            return Ok(());
        }
        c.table_changed = false;
        let core = &mut *c;
        let (all, _) = core.slots.snapshot(|_| true);
        all.into_iter().filter(|e| core.lost.contains(&e.block)).collect::<Vec<_>>()
    };
    let cp = crate::format::Checkpoint { seq: *seq + 1, clean: false, entries };
    let bytes = cp.encode(sh.ssd_sb.uuid, sh.block_size());
    let r = sh
        .backend
        .write(Dev::Hdd, &bytes, sh.hdd_sb.meta_offset(cp.seq % 2))
        .and_then(|()| sh.backend.sync(Dev::Hdd))
        .map_err(|e| DeviceError::io("writing the HDD's checkpoint", e));
    match r {
        Ok(()) => *seq += 1,
        Err(_) => sh.lock().table_changed = true,
    }
    r
}
