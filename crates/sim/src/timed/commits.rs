//! A served device's metadata commits, charged to the devices (`SimConfig::metadata_commits`).
//!
//! `tierwise serve` commits its slot table once a second while it changes
//! (`crates/block/src/mover.rs`): it syncs both images, so that the blocks the table names are
//! durable, writes the checkpoint (48 bytes + 16 per mapped slot) to the SSD image and its
//! replica after the HDD image's data, and syncs both again. On an HDD with its write cache
//! on, each sync is a FLUSH CACHE: the drive writes back everything it holds before the next
//! command. The simulator runs the same sequence on its devices, so that a prediction of the
//! served device pays for it; the commits the served device makes when a copy finds every free
//! slot waiting for one are modelled in [`super::quarantine`].

use tierwise_core::{Engine, EngineStats, Level, ManualClock, Nanos};

use super::quarantine::Quarantine;
use super::{EventKind, Purpose, Timed};
use crate::device::{Class, DevOp};

/// Where and how often the served device commits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MetadataCommits {
    /// The commit period while the table changes (`serve`'s 1 s).
    pub interval: Nanos,
    /// Byte address of the checkpoint's replica on the HDD (after the image's data).
    pub hdd_addr: u64,
    /// Byte address of the checkpoint on the SSD.
    pub ssd_addr: u64,
    /// The device's SSD slots (its `stats` `slots`: the engine's capacity plus a spare); 0
    /// leaves out the slot quarantine and the commits it forces.
    pub slots: u64,
}

/// Bytes of a checkpoint naming `entries` slots (`Checkpoint::encode`).
pub(crate) fn checkpoint_bytes(entries: u64) -> u64 {
    48 + 16 * entries + 4
}

/// Commit progress.
#[derive(Clone, Debug)]
pub(super) struct Commits {
    pub(super) cfg: MetadataCommits,
    /// Whether a commit check is scheduled.
    scheduled: bool,
    /// What the table's changes are counted by: moves done and writes to the SSD, at the last
    /// commit and now.
    moves_at_commit: u64,
    pub(super) ssd_writes: u64,
    ssd_writes_at_commit: u64,
    /// Slots the checkpoint under way names.
    entries: u64,
    /// The slot quarantine, when `cfg.slots` is known.
    pub(super) quarantine: Option<Quarantine>,
    /// The periodic commit under way took the quarantine's snapshot (no forced commit was).
    snapshot_taken: bool,
    /// Periodic commits made.
    pub(super) periodic: u64,
}

impl Commits {
    pub(super) fn new(cfg: MetadataCommits) -> Commits {
        Commits {
            cfg,
            scheduled: false,
            moves_at_commit: 0,
            ssd_writes: 0,
            ssd_writes_at_commit: 0,
            entries: 0,
            quarantine: (cfg.slots > 0).then(|| Quarantine::new(cfg.slots)),
            snapshot_taken: false,
            periodic: 0,
        }
    }

    /// The commits the prediction made, as the device's `stats` counts them.
    pub(super) fn note(&self) -> String {
        match &self.quarantine {
            Some(q) => format!(
                "served device's metadata commits: {} ({} periodic, {} forced by slot pressure, {} of them SSD-only)",
                self.periodic + q.forced,
                self.periodic,
                q.forced,
                q.forced_ssd_only
            ),
            None => {
                format!("served device's metadata commits: {} periodic (slot quarantine not modelled)", self.periodic)
            }
        }
    }
}

/// Moves of every kind done so far.
fn moves(stats: &EngineStats) -> u64 {
    stats.done.iter().sum()
}

impl Timed {
    /// The first request arrived at `now`: the commit clock starts.
    pub(super) fn start_commits(&mut self, now: Nanos) {
        if let Some(c) = self.commits.as_mut().filter(|c| !c.scheduled) {
            c.scheduled = true;
            let at = now.saturating_add(c.cfg.interval);
            self.push_event(at, EventKind::Commit, 0);
        }
    }

    /// The period ended at `now`: commits if the table changed since the last commit, and
    /// checks again a period later while requests keep arriving.
    pub(super) fn commit_due(&mut self, engine: &Engine<ManualClock>, now: Nanos) {
        let moved = moves(engine.stats());
        let Some(c) = self.commits.as_mut() else { return };
        c.scheduled = false;
        let changed = moved != c.moves_at_commit || c.ssd_writes != c.ssd_writes_at_commit;
        if changed {
            c.moves_at_commit = moved;
            c.ssd_writes_at_commit = c.ssd_writes;
            c.periodic += 1;
            // The table as it is now; both images synced, then the checkpoint is written. A
            // forced commit under way frees the quarantine itself (the device runs one commit
            // at a time; this one then finds little to free).
            c.entries = engine.usage().fast_objects as u64;
            c.snapshot_taken = match c.quarantine.as_mut() {
                Some(q) if !q.committing() => {
                    q.snapshot();
                    true
                }
                _ => false,
            };
            let synced = self.flush_both(now);
            self.push_event(synced, EventKind::CommitWrite, 0);
        }
        if !self.arrivals_done {
            self.start_commits(now);
        }
    }

    /// Both images are synced at `now`: the checkpoint goes to each.
    pub(super) fn write_checkpoint(&mut self, now: Nanos) {
        let Some(c) = self.commits.as_ref() else { return };
        let (hdd_addr, ssd_addr, len) = (c.cfg.hdd_addr, c.cfg.ssd_addr, checkpoint_bytes(c.entries));
        let w = self.new_waiter(Purpose::Commit);
        self.io(now, Level::Fast, (DevOp::Write, ssd_addr, len), Class::Normal, w);
        self.io(now, Level::Slow, (DevOp::Write, hdd_addr, len), Class::Normal, w);
    }

    /// The checkpoint's writes are back at `now`: both images are synced again, and then the
    /// slots it recorded free are.
    pub(super) fn checkpoint_written(&mut self, now: Nanos) {
        let done = self.flush_both(now);
        if self.commits.as_mut().is_some_and(|c| std::mem::take(&mut c.snapshot_taken)) {
            self.push_event(done, EventKind::CommitDone, 0);
        }
    }

    /// A FLUSH CACHE to each device at `now`; returns when both are done. The flush takes the
    /// disk after the command in service, and the next one waits for it.
    fn flush_both(&mut self, now: Nanos) -> Nanos {
        if let Some(q) = self.commits.as_mut().and_then(|c| c.quarantine.as_mut()) {
            q.hdd_synced();
        }
        let ssd = self.dev.ssd.flush(now);
        let hdd = self.dev.hdd.device.flush(now);
        ssd.max(hdd)
    }
}
