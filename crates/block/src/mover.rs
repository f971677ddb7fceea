//! The movers: background threads that execute the engine's work in issue order (copies into
//! the SSD, write-backs, promotions and demotions), report each outcome, and commit
//! checkpoints.
//!
//! A move holds its block's stripe exclusively from the first byte read to its completion, so
//! client I/O to that block waits and lands before or after the whole move, never inside it.
//!
//! # Commit protocol
//! 1. Snapshot the slot table under the core lock. Every slot it names holds its block's bytes
//!    already (a copy maps its slot only once written; a slot a client write maps is left out
//!    until the write is in).
//! 2. Sync both images: those bytes, and the HDD copies of blocks recorded clean, are durable.
//! 3. Write the checkpoint to copy `seq % 2` on the SSD and on the HDD, and sync both.
//! 4. Only now are the slots unmapped before the snapshot free for reuse: the previous
//!    checkpoint, the one a crash during step 3 falls back to, may still name them.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tierwise_core::driver::Backoff;
use tierwise_core::{Clock, EngineStats, Level, ObjectId, Outcome, Work, WorkKind};
use tierwise_devices::Class;
use tierwise_devices::realtime_queue::with_class;

use crate::backend::Dev;
use crate::device::Shared;
use crate::error::DeviceError;
use crate::format::{Checkpoint, SECTOR};

/// A mover's loop. The first mover also runs the engine's timers and the periodic commit.
pub(crate) fn run(sh: &Shared, timekeeper: bool) {
    let mut last_commit = Instant::now();
    let mut backoff = Backoff::new(tierwise_core::Nanos::from_millis(10), tierwise_core::Nanos::from_secs(2));
    loop {
        let work = {
            let mut c = sh.lock();
            loop {
                if c.stopping {
                    return;
                }
                if timekeeper {
                    let now = c.engine.clock().now();
                    if c.engine.next_deadline().is_some_and(|d| d <= now) {
                        c.engine.tick();
                        if c.drain() {
                            sh.work_ready.notify_all();
                        }
                    }
                    if c.table_changed && last_commit.elapsed() >= sh.opts.commit_interval {
                        break None;
                    }
                }
                if let Some(w) = c.work.start_next() {
                    break Some(w);
                }
                let wait = if timekeeper {
                    let now = c.engine.clock().now();
                    let tick = c.engine.next_deadline().map(|d| Duration::from_nanos(d.0.saturating_sub(now.0)));
                    tick.unwrap_or(sh.opts.commit_interval).min(sh.opts.commit_interval).max(Duration::from_millis(1))
                } else {
                    Duration::from_secs(1)
                };
                c = sh.work_ready.wait_timeout(c, wait).unwrap_or_else(std::sync::PoisonError::into_inner).0;
            }
        };
        match work {
            Some(w) => {
                // A sub-LUN move paces itself chunk by chunk.
                if !crate::subluns::chunked(sh, &w) {
                    pace(sh, w.bytes);
                }
                // An emulated HDD queues the work's I/O in its priority class, as the
                // simulator's device queue does (idle-class write-backs wait for client I/O).
                let class = match w.priority {
                    tierwise_core::Priority::Normal => Class::Normal,
                    tierwise_core::Priority::Idle(after) => Class::Idle { after },
                };
                let ok = with_class(class, || execute(sh, &w));
                if !ok {
                    crate::failover::after_error(sh);
                }
                // Work that keeps failing (a full or read-only HDD) is retried after a pause
                // that doubles up to a few seconds, not at once: without it a failing
                // write-back was retried millions of times at 100-190 % CPU.
                if let Some(pause) = backoff.after(if ok { Outcome::Done } else { Outcome::Failed }) {
                    sh.health.backed_off.fetch_add(1, Ordering::Relaxed);
                    pause_unless_stopping(sh, Duration::from_nanos(pause.0));
                }
            }
            None => {
                last_commit = Instant::now();
                // A failed periodic commit is retried at the next period; flushes report theirs.
                let _ = commit(sh, false);
            }
        }
    }
}

/// Waits `pause`, or less if the device is stopping.
fn pause_unless_stopping(sh: &Shared, pause: Duration) {
    let deadline = Instant::now() + pause;
    let mut c = sh.lock();
    while !c.stopping {
        let now = Instant::now();
        if now >= deadline {
            break;
        }
        c = sh.work_ready.wait_timeout(c, deadline - now).unwrap_or_else(std::sync::PoisonError::into_inner).0;
    }
}

/// `--move-rate`: spreads moves so that they copy at most that many bytes per second.
pub(crate) fn pace(sh: &Shared, bytes: u64) {
    let rate = sh.move_rate.load(Ordering::Relaxed);
    if rate == 0 {
        return;
    }
    let cost = bytes.saturating_mul(1_000_000_000) / rate;
    let now = sh.started.elapsed().as_nanos() as u64;
    let start = sh.moved_at.fetch_max(now, Ordering::AcqRel).max(now);
    let due = sh.moved_at.fetch_add(cost, Ordering::AcqRel).max(start);
    if due > now {
        std::thread::sleep(Duration::from_nanos(due - now));
    }
}

/// Executes one piece of work and reports its outcome; returns whether it succeeded.
fn execute(sh: &Shared, w: &Work) -> bool {
    let block = w.obj.0;
    if crate::failover::detached(sh) {
        // The SSD failed: nothing moves any more (the work fails, and is retried with back-off
        // only if the engine insists).
        let _stripe = sh.stripe(block).write().unwrap_or_else(std::sync::PoisonError::into_inner);
        return complete(sh, w, Err(None), None);
    }
    if crate::subluns::chunked(sh, w) {
        let (outcome, _stripe) = crate::subluns::move_block(sh, w);
        return complete(sh, w, outcome, None);
    }
    if w.kind == WorkKind::Writeback && (w.from, w.to) == (Level::Fast, Level::Slow) && !crate::subluns::is_merge(sh, w)
    {
        let outcome = write_back(sh, w);
        let _stripe = sh.stripe(block).write().unwrap_or_else(std::sync::PoisonError::into_inner);
        crate::trace::note(block, || format!("executed {:?}: {:?}", w.kind, outcome));
        return complete(sh, w, outcome, None);
    }
    let _stripe = sh.stripe(block).write().unwrap_or_else(std::sync::PoisonError::into_inner);
    wait_cleaned(sh, block);
    let mut ram_copy = None;
    let outcome = match (w.kind, w.from, w.to) {
        // A sub-LUN's buffer merge: its sectors are at home already (crate::subluns).
        _ if crate::subluns::is_merge(sh, w) => Ok(None),
        // The architecture's own metadata written from RAM (GreenDM's table flush) carries no
        // block: the device's checkpoint is its metadata, committed now.
        (_, Level::Ram, _) if block == u64::MAX => crate::mover::commit(sh, false).map(|()| None).map_err(|_| None),
        // A RAM cache level writes the page it holds to the SSD (HCA's transient buffer
        // flush, L2ARC's feed).
        (WorkKind::Copy, Level::Ram, Level::Fast) => match sh.ram.bytes(sh, block) {
            Ok(bytes) => fill(sh, w, Some(bytes)),
            Err(_) => Err(None),
        },
        (WorkKind::Copy | WorkKind::Promote, Level::Slow, Level::Fast) => {
            // A block served from RAM while it moves: the move writes the RAM copy.
            ram_copy =
                if sh.ram_level == tierwise_core::arch::RamLevel::MoveCopies { sh.ram.for_move(block) } else { None };
            fill(sh, w, ram_copy.as_ref().map(|c| c.bytes.clone()))
        }
        (WorkKind::Writeback | WorkKind::Demote, Level::Fast, Level::Slow) => clean(sh, w),
        _ => {
            // A RAM level (refused when the device opens) or a move this layout has no place for.
            sh.lock().stats.anomalies += 1;
            Err(None)
        }
    };
    crate::trace::note(block, || format!("executed {:?}: {:?}", w.kind, outcome));
    complete(sh, w, outcome, ram_copy)
}

/// Reports a finished piece of work to the engine and settles the slot table (the caller holds
/// the block's stripe). Returns whether the work succeeded.
fn complete(
    sh: &Shared,
    w: &Work,
    outcome: Result<Option<u32>, Option<u32>>,
    ram_copy: Option<crate::ram::RamCopy>,
) -> bool {
    let ok = outcome.is_ok();
    let block = w.obj.0;
    let mut c = sh.lock();
    c.ram_fill.remove(&block);
    // Whether the block's bytes are in a slot mapped now.
    let mut mapped = false;
    let result = match outcome {
        Ok(new_slot) => {
            let c = &mut *c;
            let r = c.work.finish(&mut c.engine, w, Outcome::Done);
            let i = EngineStats::kind_index(w.kind);
            if i < 4 {
                c.stats.moves_done[i] += 1;
            }
            c.stats.moved_bytes += w.bytes;
            if let Some(s) = new_slot {
                // An architecture that writes a block to a new SSD address while an older copy
                // is still valid (HCA's log) invalidates whichever copy is garbage when this
                // completes: the new one is kept unless its own address is invalidated now.
                let refused = w.fast_addr != tierwise_core::LOGICAL_ADDR
                    && c.engine.pending_work().iter().any(|x| {
                        x.kind == WorkKind::Invalidate
                            && x.obj.0 == block
                            && x.from == Level::Fast
                            && x.fast_addr == w.fast_addr
                    });
                if c.engine.placement(ObjectId(block)).on_fast && !refused {
                    c.slots.unmap(block);
                    c.slots.map(s, block, false);
                    c.slots.set_addr(s, w.fast_addr);
                    let _ = c.slots.set_valid(s, 0, sh.block_size() / SECTOR);
                    c.table_changed = true;
                    mapped = true;
                } else {
                    c.slots.give_back(s);
                }
            }
            r
        }
        Err(new_slot) => {
            c.stats.moves_failed += 1;
            if let Some(s) = new_slot {
                c.slots.give_back(s);
            }
            let c = &mut *c;
            c.work.finish(&mut c.engine, w, Outcome::Failed)
        }
    };
    if result.is_err() {
        c.stats.anomalies += 1;
    }
    if let Some(copy) = ram_copy {
        // The move settled: its RAM copy goes. Unless the copy is in the slot just mapped,
        // writes it absorbed go back to the block's source, the HDD address (a failed move).
        if !mapped && copy.written && sh.backend.write(Dev::Hdd, &copy.bytes, block * sh.block_size()).is_err() {
            c.stats.anomalies += 1;
        }
        sh.ram.drop_copy(block);
    }
    c.reconcile(block);
    if c.drain() {
        sh.work_ready.notify_all();
    }
    drop(c);
    sh.work_done.notify_all();
    ok
}

/// Copies a block from the HDD into the SSD: into a new slot (returned, mapped at completion),
/// or into the invalid sectors of the slot that already holds part of it.
fn fill(sh: &Shared, w: &Work, from_ram: Option<Vec<u8>>) -> Result<Option<u32>, Option<u32>> {
    let block = w.obj.0;
    let bs = sh.block_size();
    let mut buf = vec![0u8; bs as usize];
    if let Some(bytes) = from_ram.filter(|b| b.len() == buf.len()) {
        let (core, slot) = crate::io::alloc_slot(sh, sh.lock()).map_err(|_| None)?;
        drop(core);
        let slot = slot.ok_or(None)?;
        sh.backend.write(Dev::Ssd, &bytes, sh.slot_offset(slot)).map_err(|_| Some(slot))?;
        return Ok(Some(slot));
    }
    let existing = {
        let c = sh.lock();
        c.slots.slot_of(block).map(|slot| {
            sh.pin(slot);
            (slot, c.slots.runs(slot, 0, bs / SECTOR))
        })
    };
    if let Some((slot, runs)) = existing {
        // Part of the block is in its slot already (an absorbed partial write): fill the rest.
        let r = crate::io::fill_runs(sh, block, slot, &runs);
        sh.unpin(slot);
        r.map_err(|_| None)?;
        let mut c = sh.lock();
        if c.slots.slot_of(block) == Some(slot) && c.slots.set_valid(slot, 0, bs / SECTOR) {
            c.table_changed = true;
        }
        return Ok(None);
    }
    let mut c = sh.lock();
    c.want_ram.remove(&block);
    match c.ram_fill.remove(&block) {
        // The read that missed has the bytes already (the engine's source_in_ram).
        Some(bytes) if bytes.len() == buf.len() => {
            buf = bytes;
            c.stats.fills_from_ram += 1;
        }
        _ => {
            drop(c);
            sh.backend.read(Dev::Hdd, &mut buf, block * bs).map_err(|_| None)?;
            c = sh.lock();
        }
    }
    let (c, slot) = crate::io::alloc_slot(sh, c).map_err(|_| None)?;
    drop(c);
    let slot = slot.ok_or(None)?;
    sh.backend.write(Dev::Ssd, &buf, sh.slot_offset(slot)).map_err(|_| Some(slot))?;
    Ok(Some(slot))
}

/// Waits until no write-back of `block` is writing the HDD (the caller holds its stripe, which
/// that write-back does not need to finish its write).
fn wait_cleaned(sh: &Shared, block: u64) {
    let mut c = sh.lock();
    while c.cleaning.contains(&block) {
        c = sh.work_done.wait(c).unwrap_or_else(std::sync::PoisonError::into_inner);
    }
}

/// A write-back: the block's valid sectors are read from its slot under the block's stripe,
/// and written to the HDD without it, as bcache's writeback thread does not hold up I/O to the
/// key it writes. An emulated (or real) HDD may keep that idle-class write waiting behind
/// client reads for seconds; a client reading or writing the block's SSD copy meanwhile need
/// not wait as long (the engine counts a write meanwhile as re-dirtying the block). What must
/// not pass the write is anything else that writes the block's HDD bytes: other work on the
/// block and client writes that reach the HDD wait for `Core::cleaning`; a trim waits for the
/// work itself.
fn write_back(sh: &Shared, w: &Work) -> Result<Option<u32>, Option<u32>> {
    let block = w.obj.0;
    let sectors = {
        let _stripe = sh.stripe(block).write().unwrap_or_else(std::sync::PoisonError::into_inner);
        wait_cleaned(sh, block);
        let sectors = valid_sectors(sh, block).ok_or(None)?;
        sh.lock().cleaning.insert(block);
        sectors
    };
    let result = write_sectors(sh, block, &sectors);
    sh.lock().cleaning.remove(&block);
    sh.work_done.notify_all();
    result
}

/// Writes a block's valid sectors from its slot to the HDD (a demotion, whose slot is unmapped
/// at completion: the block's stripe is held throughout).
fn clean(sh: &Shared, w: &Work) -> Result<Option<u32>, Option<u32>> {
    let sectors = valid_sectors(sh, w.obj.0).ok_or(None)?;
    write_sectors(sh, w.obj.0, &sectors)
}

/// The valid sectors of `block`'s slot, one run at a time (first sector, bytes); `None` if it
/// has no slot or a read fails. The slot is pinned while it is read.
fn valid_sectors(sh: &Shared, block: u64) -> Option<Vec<(u64, Vec<u8>)>> {
    let (slot, runs) = {
        let c = sh.lock();
        let slot = c.slots.slot_of(block)?;
        sh.pin(slot);
        (slot, c.slots.runs(slot, 0, sh.block_size() / SECTOR))
    };
    let sectors = runs
        .iter()
        .filter(|r| r.2)
        .map(|&(sec, n, _)| {
            let mut buf = vec![0u8; (n * SECTOR) as usize];
            sh.backend.read(Dev::Ssd, &mut buf, sh.slot_offset(slot) + sec * SECTOR).map(|()| (sec, buf))
        })
        .collect::<std::io::Result<Vec<_>>>();
    sh.unpin(slot);
    sectors.ok()
}

/// Writes sectors read by [`valid_sectors`] to `block`'s HDD address.
fn write_sectors(sh: &Shared, block: u64, sectors: &[(u64, Vec<u8>)]) -> Result<Option<u32>, Option<u32>> {
    let at = block * sh.block_size();
    sectors
        .iter()
        .try_for_each(|(sec, buf)| sh.backend.write(Dev::Hdd, buf, at + sec * SECTOR))
        .map(|()| None)
        .map_err(|_| None)
}

/// Syncs both images and, if the slot table changed since the last checkpoint (or `clean`
/// asks for a final one), commits a new checkpoint. One commit at a time.
pub(crate) fn commit(sh: &Shared, clean: bool) -> Result<(), DeviceError> {
    commit_with(sh, clean, false)
}

/// A commit for a copy that found every free slot waiting for one: it frees those slots. Only
/// the SSD is written and synced (its checkpoint copy and the slots it names), as dm-cache
/// commits to its metadata device alone, unless a block this checkpoint drops took an HDD
/// write since the HDD's last sync (a write-back, a demotion, a write around the cache): that
/// block's reads go to the HDD after a crash, so the HDD is synced first. The HDD's replica of
/// the table then lags the SSD's copies; recovery never prefers it to a valid SSD copy, and
/// refuses to guess from it alone after a crash (see [`crate::recovery`]).
pub(crate) fn commit_for_slots(sh: &Shared) -> Result<(), DeviceError> {
    commit_with(sh, false, true)
}

fn commit_with(sh: &Shared, clean: bool, for_slots: bool) -> Result<(), DeviceError> {
    let mut seq = sh.commit_lock.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if crate::failover::detached(sh) {
        return crate::failover::commit_detached(sh, &mut seq);
    }
    let snapshot = {
        let mut c = sh.lock();
        if c.table_changed || clean {
            c.table_changed = false;
            // Dirty: newer than the HDD, or the only copy (tiering): recovery writes such a slot
            // back unless the engine takes it again.
            let core = &mut *c;
            let engine = &core.engine;
            Some(core.slots.snapshot(|b| {
                let p = engine.placement(ObjectId(b));
                p.dirty || !p.on_slow
            }))
        } else {
            None
        }
    };
    if for_slots && snapshot.is_none() {
        // Nothing was unmapped since the last commit: there is nothing to free.
        return Ok(());
    }
    // After the snapshot: a write-back that ended before its block was dropped is logged.
    let ssd_only = for_slots && snapshot.as_ref().is_some_and(|(_, freed)| !sh.hdd_log.any_unsynced(&freed.blocks));
    let sync = |d: Dev| sh.backend.sync(d).map_err(|e| DeviceError::io("syncing an image", e));
    let result = (|| {
        sync(Dev::Ssd)?;
        if !ssd_only {
            sync(Dev::Hdd)?;
        }
        let Some((entries, _)) = &snapshot else {
            return Ok(());
        };
        let cp = Checkpoint { seq: *seq + 1, clean, entries: entries.clone() };
        write_checkpoint(sh, &cp, !ssd_only)?;
        crate::trace::note_test(|| format!("checkpoint {} durable", cp.seq));
        *seq += 1;
        Ok(())
    })();
    let mut c = sh.lock();
    if let Some((_, freed)) = snapshot {
        if result.is_ok() {
            c.slots.release(freed);
            c.stats.commits += 1;
            c.stats.ssd_only_commits += u64::from(ssd_only);
        } else {
            // Not durable: the slots stay quarantined, and the next commit tries again.
            c.table_changed = true;
            c.slots.requarantine(freed);
        }
    }
    result
}

/// Writes a checkpoint to its copy on the SSD and, with `replicate`, on the HDD, and syncs
/// what it wrote.
pub(crate) fn write_checkpoint(sh: &Shared, cp: &Checkpoint, replicate: bool) -> Result<(), DeviceError> {
    let bytes = cp.encode(sh.ssd_sb.uuid, sh.block_size());
    if bytes.len() as u64 > sh.ssd_sb.meta_len {
        return Err(DeviceError::Images(format!(
            "a checkpoint of {} bytes does not fit its {} bytes",
            bytes.len(),
            sh.ssd_sb.meta_len
        )));
    }
    let copy = cp.seq % 2;
    let images =
        if replicate { &[(Dev::Ssd, &sh.ssd_sb), (Dev::Hdd, &sh.hdd_sb)][..] } else { &[(Dev::Ssd, &sh.ssd_sb)][..] };
    for &(dev, sb) in images {
        sh.backend.write(dev, &bytes, sb.meta_offset(copy)).map_err(|e| DeviceError::io("writing a checkpoint", e))?;
    }
    for &(dev, _) in images {
        sh.backend.sync(dev).map_err(|e| DeviceError::io("syncing a checkpoint", e))?;
    }
    Ok(())
}
