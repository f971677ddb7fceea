//! The served device's slot quarantine and the commits it forces (`MetadataCommits::slots`).
//!
//! `tierwise serve` keeps a few SSD slots over the engine's capacity (1/16, at least 1, at most
//! 1,024). A slot unmapped since the last commit (an eviction, a demotion, an invalidation)
//! waits in quarantine until a commit records it free; a copy that finds every free slot
//! waiting commits at once (`crates/block/src/mover.rs`, `commit_for_slots`): it syncs the SSD,
//! writes the checkpoint to the SSD and syncs it again, and syncs the HDD first (and writes
//! the checkpoint's replica there) only when a block the commit drops took an HDD write since
//! the HDD's last sync. A tiering architecture, which unmaps a slot for each demotion and maps
//! one for each promotion, can force a commit per promotion on a small SSD; without this model
//! the prediction charged none of them (GreenDM on MSR: 40 HDD flushes measured, 0 predicted).
//!
//! The model counts slots by object: a move that writes an object without a slot to the SSD
//! takes one when its source is read (the device allocates between its read and its write),
//! and waits for a forced commit if none is free; a foreground write that maps a slot takes
//! one without waiting (the device's write waits for the commit; the model charges the
//! commit's I/O to the devices only). A move in chunks takes its slot before its first chunk's
//! write.

use std::collections::HashSet;

use tierwise_core::{Engine, Level, ManualClock, Nanos, Work};

use super::{EventKind, Purpose, Timed};
use crate::device::{Class, DevOp};

/// Blocks the device's HDD write log holds before it counts every block unsynced
/// (`crates/block/src/hdd_log.rs`).
const LOG_BOUND: usize = 65_536;

/// A move waiting for a slot.
#[derive(Clone, Copy, Debug)]
enum Parked {
    Batch(u32),
    Chunked(u32),
}

/// Slot accounting for one served device.
#[derive(Clone, Debug, Default)]
pub(super) struct Quarantine {
    /// The device's SSD slots (the engine's capacity plus the spare).
    slots: u64,
    /// Objects holding a slot.
    mapped: HashSet<u64>,
    /// Slots unmapped since the last commit's snapshot.
    quarantined: u64,
    /// Objects unmapped since the last commit's snapshot.
    dropped: Vec<u64>,
    /// Slots the commit under way frees when it ends.
    releasing: u64,
    /// A commit (periodic or forced) is under way.
    committing: bool,
    /// Objects written to the HDD since its last sync; `overflowed`: more than the log holds.
    hdd_unsynced: HashSet<u64>,
    overflowed: bool,
    /// Moves whose SSD writes wait for a slot.
    parked: Vec<Parked>,
    /// Commits forced by slot pressure, and how many of them touched the SSD only.
    pub(super) forced: u64,
    pub(super) forced_ssd_only: u64,
}

impl Quarantine {
    pub(super) fn new(slots: u64) -> Quarantine {
        Quarantine { slots, ..Quarantine::default() }
    }

    pub(super) fn committing(&self) -> bool {
        self.committing
    }

    fn free(&self) -> u64 {
        self.slots.saturating_sub(self.mapped.len() as u64 + self.quarantined)
    }

    /// `obj` lost its slot: it waits for a commit.
    pub(super) fn unmap(&mut self, obj: u64) {
        if self.mapped.remove(&obj) {
            self.quarantined += 1;
            self.dropped.push(obj);
        }
    }

    /// `obj`'s new slot was never used: free again.
    fn give_back(&mut self, obj: u64) {
        self.mapped.remove(&obj);
    }

    /// `obj` was written to the HDD (the write is done).
    pub(super) fn hdd_written(&mut self, obj: u64) {
        if self.hdd_unsynced.len() < LOG_BOUND {
            self.hdd_unsynced.insert(obj);
        } else {
            self.overflowed = true;
        }
    }

    /// The HDD is synced from here on: the writes logged so far are durable.
    pub(super) fn hdd_synced(&mut self) {
        self.hdd_unsynced.clear();
        self.overflowed = false;
    }

    /// A commit takes its snapshot: the slots quarantined so far are freed when it ends.
    /// Returns whether a dropped object's HDD bytes are not yet durable.
    pub(super) fn snapshot(&mut self) -> bool {
        self.committing = true;
        self.releasing = self.quarantined;
        let unsynced = self.overflowed || self.dropped.iter().any(|o| self.hdd_unsynced.contains(o));
        self.dropped.clear();
        unsynced
    }

    /// The commit ended: its slots are free.
    pub(super) fn release(&mut self) {
        self.committing = false;
        self.quarantined -= self.releasing.min(self.quarantined);
        self.releasing = 0;
    }

    /// A foreground write maps `obj` to a slot if it has none; true if a commit must be forced
    /// for it.
    pub(super) fn map_for_write(&mut self, obj: u64) -> bool {
        if self.mapped.contains(&obj) {
            return false;
        }
        let short = self.free() == 0 && self.quarantined > 0;
        self.mapped.insert(obj);
        short && !self.committing
    }

    /// Maps the objects of a batch about to be written to the SSD, if slots are free for all.
    fn map_batch(&mut self, objs: impl Iterator<Item = u64> + Clone) -> bool {
        let need = objs.clone().filter(|o| !self.mapped.contains(o)).count() as u64;
        // More than the spare lets in (no quarantined slot left to free): taken anyway, as the
        // engine never holds more objects than it has room for.
        if need > self.free() && self.quarantined > 0 {
            return false;
        }
        self.mapped.extend(objs);
        true
    }
}

impl Timed {
    /// Batch `slot` has read its sources at `now`: writes its destinations, once the SSD slots
    /// they need are free (`Quarantine`).
    pub(super) fn write_batch(&mut self, now: Nanos, slot: u32) {
        let Some(to) = self.batches[slot as usize].first().map(|w| w.to) else { return };
        if to == Level::Fast && self.commits.as_ref().is_some_and(|c| c.quarantine.is_some()) {
            let batch = std::mem::take(&mut self.batches[slot as usize]);
            let objs = batch.iter().filter(|w| w.from != Level::Fast).map(|w| w.obj.0);
            let mapped = self.slots_for_move(now, Parked::Batch(slot), objs);
            self.batches[slot as usize] = batch;
            if !mapped {
                return;
            }
        }
        let w = self.new_waiter(Purpose::BatchWrite(slot));
        self.batch_io(now, slot, to, DevOp::Write, w);
    }

    /// Chunked move `slot` writes its next chunk at `now`; the first, once its slot is free.
    pub(super) fn write_chunk(&mut self, now: Nanos, slot: u32) {
        let Some(c) = self.chunked[slot] else { return };
        let w = c.work;
        if c.next == 0
            && w.to == Level::Fast
            && w.from != Level::Fast
            && !self.slots_for_move(now, Parked::Chunked(slot), std::iter::once(w.obj.0))
        {
            return;
        }
        self.chunk_io(now, slot, true);
    }

    /// Maps `objs` to slots for a move at `now`; false if the move is parked until a commit
    /// frees them.
    fn slots_for_move(&mut self, now: Nanos, parked: Parked, objs: impl Iterator<Item = u64> + Clone) -> bool {
        let Some(q) = self.quarantine_mut() else { return true };
        if q.map_batch(objs) {
            return true;
        }
        q.parked.push(parked);
        if !q.committing {
            self.force_commit(now);
        }
        false
    }

    /// The engine issued an invalidation: its slot is unmapped at once, as the device's drain
    /// does.
    pub(super) fn slots_after_invalidation(&mut self, w: &Work) {
        if let Some(q) = self.quarantine_mut().filter(|_| w.from == Level::Fast) {
            q.unmap(w.obj.0);
        }
    }

    /// A move is done and the engine told: settled as the device's `complete` and `reconcile`
    /// settle it. A copy's new slot goes back unused if the engine no longer places the block
    /// on the SSD; a block with a slot the engine moved off the SSD is unmapped; an HDD write
    /// is logged.
    pub(super) fn slots_after_move(&mut self, engine: &Engine<ManualClock>, w: &Work) {
        let Some(q) = self.quarantine_mut() else { return };
        let on_fast = engine.placement(w.obj).on_fast;
        if w.to == Level::Slow {
            q.hdd_written(w.obj.0);
        }
        if !on_fast {
            if w.to == Level::Fast && w.from != Level::Fast {
                q.give_back(w.obj.0);
            } else {
                q.unmap(w.obj.0);
            }
        }
    }

    /// A foreground write of `obj` issued at `now` to the SSD and/or the HDD: an HDD write is
    /// logged as it is issued (the device logs it once done, a write's time later).
    pub(super) fn slots_for_write(&mut self, now: Nanos, obj: u64, to_fast: bool, to_slow: bool) {
        let Some(q) = self.quarantine_mut() else { return };
        if to_slow {
            q.hdd_written(obj);
        }
        if to_fast && q.map_for_write(obj) {
            self.force_commit(now);
        }
    }

    fn quarantine_mut(&mut self) -> Option<&mut Quarantine> {
        self.commits.as_mut().and_then(|c| c.quarantine.as_mut())
    }

    /// A commit forced by slot pressure at `now`: the SSD synced (and the HDD, if a dropped
    /// block's HDD bytes are not durable), then the checkpoint written.
    fn force_commit(&mut self, now: Nanos) {
        let Some(q) = self.quarantine_mut() else { return };
        let with_hdd = q.snapshot();
        q.forced += 1;
        q.forced_ssd_only += u64::from(!with_hdd);
        let mut synced = self.dev.ssd.flush(now);
        if with_hdd {
            if let Some(q) = self.quarantine_mut() {
                q.hdd_synced();
            }
            synced = synced.max(self.dev.hdd.device.flush(now));
        }
        self.push_event(synced, EventKind::SlotCommitWrite, u32::from(with_hdd));
    }

    /// The forced commit's syncs are done at `now`: its checkpoint is written.
    pub(super) fn write_forced_checkpoint(&mut self, engine: &Engine<ManualClock>, now: Nanos, with_hdd: bool) {
        let Some(c) = self.commits.as_ref() else { return };
        let (hdd_addr, ssd_addr) = (c.cfg.hdd_addr, c.cfg.ssd_addr);
        let len = super::commits::checkpoint_bytes(engine.usage().fast_objects as u64);
        let w = self.new_waiter(Purpose::ForcedCommit(with_hdd));
        self.io(now, Level::Fast, (DevOp::Write, ssd_addr, len), Class::Normal, w);
        if with_hdd {
            self.io(now, Level::Slow, (DevOp::Write, hdd_addr, len), Class::Normal, w);
        }
    }

    /// The forced checkpoint is written at `now`: synced again, then its slots are free.
    pub(super) fn forced_checkpoint_written(&mut self, now: Nanos, with_hdd: bool) {
        let mut done = self.dev.ssd.flush(now);
        if with_hdd {
            done = done.max(self.dev.hdd.device.flush(now));
        }
        self.push_event(done, EventKind::CommitDone, 0);
    }

    /// A commit ended at `now`: its slots are free, and the batches waiting for one go on.
    pub(super) fn commit_released(&mut self, now: Nanos) {
        let Some(q) = self.quarantine_mut() else { return };
        q.release();
        let parked = std::mem::take(&mut q.parked);
        for p in parked {
            match p {
                Parked::Batch(slot) => self.write_batch(now, slot),
                Parked::Chunked(slot) => self.write_chunk(now, slot),
            }
        }
    }
}
