//! The mover: one thread that executes the engine's background work (promotions, demotions,
//! copies, write-backs, invalidations) with the move protocol of [`crate::tiers`], one item at
//! a time, under the file's lock, journalled, paced and cancellable.

use std::io;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tierwise_core::driver::{Backoff, journalled};
use tierwise_core::{Clock, Level, Nanos, Outcome, Tier, Work, WorkKind};

use crate::shared::{Shared, lock};
use crate::state::{self, MoveRecord};
use crate::tiers::{self, CopyPlan};

/// Counters of the mover.
#[derive(Debug, Default)]
pub struct MoverStats {
    /// Moves, copies and write-backs done.
    pub done: AtomicU64,
    /// Of which failed.
    pub failed: AtomicU64,
    /// Bytes copied between tiers.
    pub bytes: AtomicU64,
    /// Moves cancelled (by `tierwise cancel`, or to let an access through).
    pub cancelled: AtomicU64,
    /// Accesses served outside the policy (pinned files, files open by passthrough, files
    /// unlinked while open), by tier: reads, writes, read bytes, written bytes.
    pub outside: [[AtomicU64; 4]; 2],
}

/// The move in progress, shared between the mover and the control commands.
#[derive(Debug, Default)]
pub(crate) struct Progress {
    /// The file moving (0: none).
    pub(crate) ino: AtomicU64,
    pub(crate) kind: Mutex<&'static str>,
    pub(crate) done: AtomicU64,
    pub(crate) total: AtomicU64,
    /// Set to stop the move at its next chunk.
    pub(crate) cancel: AtomicBool,
    /// Accesses waiting for the moving file's lock.
    pub(crate) waiters: AtomicU64,
    /// Accesses waiting for work on their file to finish (`Shared::wait_for`): the mover does
    /// not back off while one waits, or a read would wait out the pause after a failed move.
    pub(crate) waiting_for_work: AtomicU64,
    /// The file whose move is about to start or running (set before its lock is taken, so an
    /// access that finds the lock held knows to ask for a cancellation).
    pub(crate) claimed: AtomicU64,
    /// When the move started (for the cancel-on-contention estimate).
    pub(crate) started: Mutex<Option<Instant>>,
}

/// Clears the claim of [`Shared::claim`].
pub(crate) struct Claim<'a>(&'a Progress);

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        self.0.claimed.store(0, Ordering::Release);
    }
}

/// Whether a move should be cancelled to let an access through: it will take a while yet.
pub(crate) fn worth_cancelling(elapsed: Duration, done: u64, total: u64) -> bool {
    let left = total.saturating_sub(done);
    if left == 0 {
        return false;
    }
    if done == 0 {
        return elapsed > Duration::from_millis(100);
    }
    elapsed.as_secs_f64() * left as f64 / done as f64 > 0.1
}

fn tier_of(l: Level) -> Tier {
    if l == Level::Fast { Tier::Fast } else { Tier::Slow }
}

impl Shared {
    /// The mover: executes queued work in order, one item at a time, under the file's lock.
    pub(crate) fn mover(&self) {
        let mut saved_at = Instant::now();
        let mut heat_saved_at = Instant::now();
        // Work that keeps failing (a full or lost tier) is retried by the engine: back off
        // rather than spin.
        let mut backoff = Backoff::new(Nanos::from_millis(10), Nanos::from_secs(1));
        let mut checked_at = Instant::now();
        while !self.stop.load(Ordering::SeqCst) {
            if checked_at.elapsed() >= Duration::from_secs(1) {
                self.refresh_health();
                checked_at = Instant::now();
            }
            if saved_at.elapsed() >= state::COUNTER_SAVE_INTERVAL {
                self.save_counters(false);
                saved_at = Instant::now();
            }
            if heat_saved_at.elapsed() >= state::HEAT_SAVE_INTERVAL {
                self.save_heat(false);
                heat_saved_at = Instant::now();
            }
            // Files replaced by renames, kept for late opens, go when their time is up even if
            // nothing else happens on the mount.
            self.reap_replaced();
            self.end_renames();
            let next: Option<Work> = {
                let mut e = lock(&self.engine);
                if let Some(d) = e.next_deadline()
                    && d <= e.clock().now()
                {
                    e.tick();
                }
                e.take_issued();
                if e.work.queued() == 0 {
                    let (g, _) = self
                        .work_cv
                        .wait_timeout(e, Duration::from_millis(100))
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                    e = g;
                    e.take_issued();
                }
                if self.stop.load(Ordering::SeqCst) { None } else { e.work.start_next() }
            };
            if let Some(w) = next {
                self.note(w.obj.0, || format!("mover starts {}({})", w.kind.name(), w.id.0 & 0xffff));
                // The engine hears the outcome while the file's lock is still held: until then
                // it routes accesses by the old placement, so no access may run in between.
                let _claim = self.claim(w.obj.0);
                let file_lock = self.file_lock(w.obj.0);
                let _g = file_lock.write().unwrap_or_else(std::sync::PoisonError::into_inner);
                let outcome = self.execute(&w);
                self.note(w.obj.0, || format!("mover {} -> {outcome:?}", w.kind.name()));
                // The engine hears the outcome of work that needs one; the rest only leaves the
                // queue (an invalidation took effect when it was issued).
                if lock(&self.engine).finish(&w, outcome) > 0 {
                    self.work_cv.notify_all();
                }
                if w.kind == WorkKind::Writeback {
                    self.sync_dirty_mark(w.obj.0);
                }
                drop(_g);
                self.done_cv.notify_all();
                if let Some(pause) = backoff.after(outcome) {
                    let until = Instant::now() + Duration::from_nanos(pause.0);
                    while Instant::now() < until
                        && !self.stop.load(Ordering::SeqCst)
                        && self.progress.waiting_for_work.load(Ordering::Acquire) == 0
                    {
                        std::thread::sleep(Duration::from_millis(10));
                    }
                }
            }
        }
    }

    /// Executes one work item; the caller holds the file's lock exclusively.
    fn execute(&self, w: &Work) -> Outcome {
        let ino = w.obj.0;
        if self.fixed_tier(ino).is_some() {
            // Pinned or unlinked since the engine queued it: out of the policy.
            return Outcome::Cancelled;
        }
        if self.passed_through(ino) {
            // Open by passthrough: the kernel does I/O on this tier file; it stays put.
            self.stats.cancelled.fetch_add(1, Ordering::Relaxed);
            return Outcome::Cancelled;
        }
        // The move replaces or removes tier files: open handles on them are stale.
        self.drop_fds(ino);
        self.retire_backing(ino);
        let result = match w.kind {
            // The invalidation took effect in the engine when it was issued. A whole-file write
            // may have put the file back on the SSD since (write-back, write-through-all): that
            // copy is the file now, so the stale one is already replaced.
            WorkKind::Invalidate if lock(&self.engine).placement(w.obj).on_fast => Ok(0),
            WorkKind::Invalidate => self.with_rel(ino, |rel| self.tiers.remove(Tier::Fast, rel)).map(|_| 0),
            WorkKind::Promote | WorkKind::Demote | WorkKind::Copy | WorkKind::Writeback => {
                let from = tier_of(w.from);
                let moving = matches!(w.kind, WorkKind::Promote | WorkKind::Demote);
                self.plan(ino, from).and_then(|(rel, plan)| {
                    self.journalled(ino, &rel, w.kind, w.kind.name(), from, &plan, || {
                        if moving {
                            plan.run_move(&mut self.pace(ino, from))
                        } else {
                            plan.run(&mut self.pace(ino, from))
                        }
                    })
                    .map_err(|e| {
                        // A move reads its source and writes the other tier: an error is the
                        // destination's unless the source's tier is gone.
                        let tier = if self.tiers.root_intact(from) { from.other() } else { from };
                        self.tier_errors.record(tier, crate::health::IoOp::Write, &e);
                        crate::shared::errno(&e)
                    })
                })
            }
        };
        match result {
            Ok(n) => {
                if w.kind.needs_completion() {
                    self.stats.done.fetch_add(1, Ordering::Relaxed);
                    self.stats.bytes.fetch_add(n, Ordering::Relaxed);
                }
                Outcome::Done
            }
            // The file went (deleted meanwhile): nothing to do. Unless a tier's root went: then
            // it is a failure, which the mover backs off from.
            Err(e) if e == fuser::Errno::ENOENT && Tier::ALL.into_iter().all(|t| self.tiers.root_intact(t)) => {
                Outcome::Cancelled
            }
            Err(e) if e == fuser::Errno::EINTR => {
                self.stats.cancelled.fetch_add(1, Ordering::Relaxed);
                Outcome::Cancelled
            }
            Err(e) => {
                crate::log::debug(format_args!("a {} of inode {ino} failed: {e:?}", w.kind.name()));
                self.stats.failed.fetch_add(1, Ordering::Relaxed);
                Outcome::Failed
            }
        }
    }

    /// Resolves a copy of file `ino` from `from` under the namespace lock: its path now and
    /// the open source and destination directory (see [`tiers::Tiers::plan_copy`]).
    pub(crate) fn plan(&self, ino: u64, from: Tier) -> Result<(std::path::PathBuf, CopyPlan), fuser::Errno> {
        self.with_rel(ino, |rel| Ok((rel.to_path_buf(), self.tiers.plan_copy(rel, from, ino)?)))
    }

    /// Runs `copy` (of `plan`, file `ino` at `rel` from `from`) as the move in progress,
    /// journalled: the record is durable before the copy starts and removed after it ended
    /// (either way).
    #[expect(clippy::too_many_arguments, reason = "the journal record's parts")]
    pub(crate) fn journalled(
        &self,
        ino: u64,
        rel: &Path,
        kind: WorkKind,
        label: &'static str,
        from: Tier,
        plan: &CopyPlan,
        copy: impl FnOnce() -> io::Result<u64>,
    ) -> io::Result<u64> {
        // Without a record (the store failed) a crash still leaves the source intact, or two
        // identical copies, which adoption resolves; the move goes ahead.
        let record = plan.source_metadata().ok().map(|m| MoveRecord {
            kind,
            from,
            size: m.len(),
            mtime_ns: state::epoch_ns(tiers::mtime(&m)),
            rel: rel.into(),
        });
        let p = &self.progress;
        *lock(&p.kind) = label;
        p.done.store(0, Ordering::Relaxed);
        p.total.store(0, Ordering::Relaxed);
        *lock(&p.started) = Some(Instant::now());
        p.ino.store(ino, Ordering::Release);
        let r = journalled(&self.store, record, copy);
        p.ino.store(0, Ordering::Release);
        p.cancel.store(false, Ordering::Release);
        r
    }

    /// The pacing of a move of file `ino` from `from`: progress, cancellation, the rate limit
    /// and the emulated devices' time.
    pub(crate) fn pace(&self, ino: u64, from: Tier) -> impl FnMut(u64, u64, u64) -> io::Result<()> + '_ {
        let start = Instant::now();
        move |offset, len, total| {
            let p = &self.progress;
            p.total.store(total, Ordering::Relaxed);
            p.done.store(offset, Ordering::Relaxed);
            // Cancelled by command, or an access waits for a move that will take a while yet.
            let check = || {
                let waited = p.waiters.load(Ordering::Acquire) > 0 && worth_cancelling(start.elapsed(), offset, total);
                if p.cancel.load(Ordering::Acquire) || waited {
                    return Err(io::Error::from_raw_os_error(nix::libc::EINTR));
                }
                Ok(())
            };
            check()?;
            if let Some(e) = &self.emulate[from.index()] {
                e.delay(false, ino, offset, len);
            }
            if let Some(e) = &self.emulate[from.other().index()] {
                e.delay(true, ino, offset, len);
            }
            let rate = self.move_rate.load(Ordering::Relaxed);
            if rate > 0 {
                let due = Duration::from_secs_f64((offset + len) as f64 / rate as f64);
                // In slices, so a cancellation is seen within 50 ms.
                while let Some(wait) = due.checked_sub(start.elapsed()).filter(|w| !w.is_zero()) {
                    std::thread::sleep(wait.min(Duration::from_millis(50)));
                    check()?;
                }
            }
            Ok(())
        }
    }

    /// Marks file `ino` as the one a move is about to run on, until the guard drops.
    pub(crate) fn claim(&self, ino: u64) -> Claim<'_> {
        self.progress.claimed.store(ino, Ordering::Release);
        Claim(&self.progress)
    }

    /// A blocked access waits for file `ino`'s work: cancel its move if that would take a
    /// while yet (the engine rolls the move back and may retry it later).
    pub(crate) fn yield_move(&self, ino: u64) {
        let p = &self.progress;
        if p.ino.load(Ordering::Acquire) != ino {
            return;
        }
        let elapsed = lock(&p.started).map(|t| t.elapsed()).unwrap_or_default();
        if worth_cancelling(elapsed, p.done.load(Ordering::Relaxed), p.total.load(Ordering::Relaxed)) {
            p.cancel.store(true, Ordering::Release);
        }
    }
}
