//! What every front end does around the engine, written once: the mount, the block device
//! and both simulators run it, so that what the simulator predicts is what the others do.
//!
//! - [`WorkQueue`]: the work taken from the engine and not finished, in issue order for the
//!   movers and per object for the accesses that wait for it; completion reported once.
//! - [`revalidate`] (with [`still_valid`]): after an access waited for work, its first answer,
//!   unless that work made it unsafe; then the engine is asked again without counting the
//!   access twice.
//! - [`Backoff`]: the pause after failed work.
//! - [`MoveJournal`] and [`journalled`]: a move recorded before it starts and cleared after,
//!   for recovery after a crash (the mount's state store is one).
//!
//! No I/O and no threads here: a front end keeps the engine and its [`WorkQueue`] under one
//! lock, executes the work its own way, and journals moves in its own store.

mod backoff;
mod journal;
mod queue;

use std::ops::{Deref, DerefMut};

pub use backoff::Backoff;
pub use journal::{MoveJournal, journalled};
pub use queue::{Route, WorkQueue};

use crate::{Clock, Engine, Level, Op, Placement, Request, Served};

/// An engine and the work taken from it, kept together under a front end's lock, for a front
/// end whose movers execute every piece of work (invalidations too). Reading the engine goes
/// through `Deref`; after calling the engine directly in a way that may issue work (a timer,
/// a completion, a flush), call [`Driver::take_issued`].
pub struct Driver<C: Clock> {
    engine: Engine<C>,
    /// The work taken and not finished.
    pub work: WorkQueue,
}

impl<C: Clock> Driver<C> {
    /// A driver around `engine`.
    pub fn new(engine: Engine<C>) -> Driver<C> {
        Driver { engine, work: WorkQueue::new() }
    }

    /// Tells the engine `req` (`again`: asks again after a wait, uncounted, see
    /// [`Engine::access_again`]) and takes the work it issued. Returns the answer and how many
    /// pieces were queued: [`WorkQueue::newest`] names them.
    pub fn access(&mut self, req: &Request, again: bool) -> (Served, usize) {
        let served = if again { self.engine.access_again(req) } else { self.engine.access(req) };
        (served, self.take_issued())
    }

    /// Takes the work the engine issued since last asked; returns how many pieces.
    pub fn take_issued(&mut self) -> usize {
        self.work.take_issued(&mut self.engine, |_| Route::Queue)
    }

    /// Reports the outcome of `work` (taken with [`WorkQueue::start_next`]) and takes what the
    /// engine issues on hearing it; returns how many pieces that was.
    pub fn finish(&mut self, work: &crate::Work, outcome: crate::Outcome) -> usize {
        // A completion the engine does not know (already reported) changes nothing.
        let _ = self.work.finish(&mut self.engine, work, outcome);
        self.take_issued()
    }
}

impl<C: Clock> Deref for Driver<C> {
    type Target = Engine<C>;
    fn deref(&self) -> &Engine<C> {
        &self.engine
    }
}

impl<C: Clock> DerefMut for Driver<C> {
    fn deref_mut(&mut self) -> &mut Engine<C> {
        &mut self.engine
    }
}

/// The answer to act on for `req`, told before it waited for work and answered `served`:
/// `served` itself while [`still_valid`] with the object where it is now, else the engine's
/// fresh answer ([`Engine::access_again`], which counts nothing twice). The flag says whether
/// it was asked again (its new work is in the engine's queue).
pub fn revalidate<C: Clock>(engine: &mut Engine<C>, req: &Request, served: Served) -> (Served, bool) {
    if still_valid(req, &served, &engine.placement(req.obj)) {
        (served, false)
    } else {
        (engine.access_again(req), true)
    }
}

/// Whether the answer `served` to `req`, given before the access waited for work, is still
/// safe to act on with the object now at `now`. A write must reach every valid copy, or one
/// goes stale behind the engine's back (say a write-back of the file ran while the write
/// waited, and the engine now believes the HDD copy current): then the front end asks again
/// with [`crate::Engine::access_again`], which does not count the access twice. Reads and
/// truncates (which cut every copy) are always safe, as is anything on an untracked object.
pub fn still_valid(req: &Request, served: &Served, now: &Placement) -> bool {
    if req.op != Op::Write || !now.tracked {
        return true;
    }
    let fast_valid = now.on_fast;
    let slow_valid = now.on_slow && !(now.dirty && now.on_fast);
    (!fast_valid || served.touches.contains(Level::Fast)) && (!slow_valid || served.touches.contains(Level::Slow))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Levels, ManualClock, Nanos, ObjectId, Outcome, Setup, WorkKind, build_arch};

    fn engine(spec: &str) -> Engine<ManualClock> {
        let setup = Setup { fast_capacity: 1 << 20, slow_capacity: 0, object_size: 0 };
        Engine::new(build_arch(spec, &setup).expect("spec builds"), ManualClock::new())
    }

    /// Creates file `f` of 4 KiB on the HDD (Dynamic Hot-DST allocates there).
    fn create(e: &mut Engine<ManualClock>, f: u64) {
        e.access(&Request { op: Op::Create, ..Request::write(ObjectId(f), 0, 0) });
        e.access(&Request::write(ObjectId(f), 0, 4096));
    }

    #[test]
    fn work_is_taken_in_issue_order_and_an_object_waits_until_its_work_is_finished() {
        let mut e = engine("dynamic-hot-dst");
        let mut q = WorkQueue::new();
        for f in [1, 2] {
            create(&mut e, f);
        }
        // An HDD read promotes: one promotion each, queued in issue order.
        e.access(&Request::read(ObjectId(1), 0, 4096));
        e.access(&Request::read(ObjectId(2), 0, 4096));
        assert_eq!(q.take_issued(&mut e, |_| Route::Queue), 2);
        assert!(q.busy(ObjectId(1)) && q.busy(ObjectId(2)) && !q.busy(ObjectId(3)));
        let first = q.start_next().expect("queued");
        assert_eq!((first.kind, first.obj), (WorkKind::Promote, ObjectId(1)));
        assert_eq!(q.on(ObjectId(1)), [first.id]);
        let waited = [(ObjectId(1), first.id)];
        assert_eq!((q.len(), q.queued()), (2, 1), "one running, one queued");
        q.finish(&mut e, &first, Outcome::Done).expect("the engine knew it");
        assert!(!q.busy(ObjectId(1)) && !q.any_left(&waited));
        assert!(e.placement(ObjectId(1)).on_fast, "the engine heard the outcome");
        // Reporting it again is the engine's error, not silently accepted.
        assert!(q.finish(&mut e, &first, Outcome::Done).is_err());
        // Shutting down: the queued promotion is cancelled and rolled back.
        assert_eq!(q.cancel_queued(&mut e).len(), 1);
        assert!(q.is_empty() && !q.busy(ObjectId(2)));
        assert!(!e.placement(ObjectId(2)).on_fast && !e.placement(ObjectId(2)).moving);
    }

    #[test]
    fn a_cancellation_by_choice_keeps_the_rest_queued_in_order() {
        let mut e = engine("dynamic-hot-dst");
        let mut q = WorkQueue::new();
        for f in [1, 2, 3] {
            create(&mut e, f);
            e.access(&Request::read(ObjectId(f), 0, 4096));
        }
        assert_eq!(q.take_issued(&mut e, |_| Route::Queue), 3);
        let cancelled = q.cancel_queued_where(&mut e, |w| w.obj == ObjectId(2));
        assert_eq!(cancelled.iter().map(|w| w.obj).collect::<Vec<_>>(), [ObjectId(2)]);
        assert!(!q.busy(ObjectId(2)) && !e.placement(ObjectId(2)).moving, "rolled back");
        let order: Vec<ObjectId> = std::iter::from_fn(|| q.start_next()).map(|w| w.obj).collect();
        assert_eq!(order, [ObjectId(1), ObjectId(3)]);
    }

    #[test]
    fn work_applied_on_the_spot_is_never_waited_for_but_work_the_engine_waits_for_is_queued() {
        let mut e = engine("on-demand-caching");
        let mut q = WorkQueue::new();
        create(&mut e, 1);
        e.access(&Request::read(ObjectId(1), 0, 4096));
        // A copy needs its outcome: even a front end that would apply everything queues it.
        assert_eq!(q.take_issued(&mut e, |_| Route::Applied), 1);
        let copy = q.start_next().expect("the copy");
        q.finish(&mut e, &copy, Outcome::Done).expect("known");
        assert!(e.placement(ObjectId(1)).on_fast);
        // Deleting the cached file invalidates its copy: no completion, so it may be applied now.
        e.access(&Request { op: Op::Delete, ..Request::read(ObjectId(1), 0, 0) });
        let mut applied = Vec::new();
        assert_eq!(
            q.take_issued(&mut e, |w| {
                applied.push(w.kind);
                Route::Applied
            }),
            0
        );
        assert!(applied.iter().all(|&k| k == WorkKind::Invalidate), "{applied:?}");
        assert!(q.is_empty() && !q.busy(ObjectId(1)));
    }

    #[test]
    fn a_write_that_waited_is_asked_again_only_when_its_answer_went_stale() {
        let mut e = engine("dynamic-hot-dst");
        create(&mut e, 1);
        let write = Request::write(ObjectId(1), 0, 4096);
        let served = e.access(&write);
        assert_eq!(served.level, Level::Slow, "the file's one copy is on the HDD");
        let told = e.stats().writes;
        // Nothing changed: the first answer stands.
        let (same, again) = revalidate(&mut e, &write, served);
        assert!(!again && same.level == Level::Slow);
        // An answer that would miss the valid copy (say the file moved while the write waited)
        // is asked again.
        let (fresh, again) = revalidate(&mut e, &write, Served::by(Level::Fast));
        assert!(again && fresh.touches.contains(Level::Slow));
        assert_eq!(e.stats().writes, told, "asking again counts nothing twice");
    }

    #[test]
    fn backoff_doubles_after_each_failure_up_to_its_cap_and_a_success_resets_it() {
        let mut b = Backoff::new(Nanos::from_millis(10), Nanos::from_secs(1));
        assert_eq!(b.after(Outcome::Done), None);
        let pauses: Vec<u64> = (0..9).map(|_| b.after(Outcome::Failed).map_or(0, |p| p.0 / 1_000_000)).collect();
        assert_eq!(pauses, [10, 20, 40, 80, 160, 320, 640, 1000, 1000]);
        assert_eq!(b.after(Outcome::Cancelled), None);
        assert_eq!(b.failures(), 9, "a cancellation is no failure and no success");
        assert_eq!(b.after(Outcome::Done), None);
        assert_eq!(b.after(Outcome::Failed), Some(Nanos::from_millis(10)));
    }

    fn placed(on_fast: bool, on_slow: bool, dirty: bool) -> Placement {
        Placement { tracked: true, on_fast, on_slow, dirty, ..Placement::default() }
    }

    #[test]
    fn a_write_that_would_miss_a_valid_copy_is_asked_again() {
        let write = Request::write(ObjectId(1), 0, 4096);
        let to_ssd = Served::by(Level::Fast);
        // Dirty on the SSD: the HDD copy is old, writing the SSD alone is right.
        assert!(still_valid(&write, &to_ssd, &placed(true, true, true)));
        // Cleaned meanwhile: the HDD copy counts as current, the SSD-only write would leave it stale.
        assert!(!still_valid(&write, &to_ssd, &placed(true, true, false)));
        // Written through both: always right.
        let both = Served::written_to(Levels::one(Level::Fast).with(Level::Slow));
        assert!(still_valid(&write, &both, &placed(true, true, false)));
        // Moved to the HDD meanwhile and the write was meant for the HDD.
        assert!(still_valid(&write, &Served::by(Level::Slow), &placed(false, true, false)));
        // Reads are served from whichever copy is valid now.
        assert!(still_valid(&Request::read(ObjectId(1), 0, 4096), &to_ssd, &placed(false, true, false)));
        // Untracked objects (the baselines) have no copies to keep in step.
        assert!(still_valid(&write, &to_ssd, &Placement::default()));
    }
}
