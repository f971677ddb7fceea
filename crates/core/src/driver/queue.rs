//! The work a front end has taken from the engine and not finished: in issue order for its
//! movers, and per object for the accesses that must wait for it.

use std::collections::VecDeque;

use hashbrown::HashMap;

use crate::object_table::IdHash;
use crate::{Clock, CompleteError, Engine, ObjectId, Outcome, Work, WorkId};

/// What a front end does with a piece of work the engine just issued.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// Queue it for the movers: it counts against its object until [`WorkQueue::finish`].
    Queue,
    /// Done already (the front end applied it on the spot, say dropping a stale copy from its
    /// table): nothing to wait for, and no completion (only work that needs none may go so).
    Applied,
}

/// Work taken from the engine and not finished, as every front end keeps it: the block device
/// and the mount (real movers), the file simulator (modelled ones). Not thread-safe by itself:
/// it lives beside the engine, under the same lock.
#[derive(Debug, Default)]
pub struct WorkQueue {
    /// Queued for a mover, in issue order.
    queued: VecDeque<Work>,
    /// Work queued or running, per object, in issue order.
    on_object: HashMap<u64, Vec<WorkId>, IdHash>,
    /// Taken by a mover, not finished.
    running: usize,
}

impl WorkQueue {
    /// An empty queue.
    pub fn new() -> WorkQueue {
        WorkQueue::default()
    }

    /// Takes what the engine issued since it was last asked, in issue order, routing each piece
    /// with `route`. Returns how many were queued. Work that needs a completion is always
    /// queued: the engine waits for its outcome.
    pub fn take_issued<C: Clock>(&mut self, engine: &mut Engine<C>, mut route: impl FnMut(&Work) -> Route) -> usize {
        let mut queued = 0;
        for w in engine.drain_work() {
            if !w.kind.needs_completion() && route(&w) == Route::Applied {
                continue;
            }
            self.on_object.entry(w.obj.0).or_default().push(w.id);
            self.queued.push_back(w);
            queued += 1;
        }
        queued
    }

    /// The next piece of work for a mover, in issue order; it runs until [`WorkQueue::finish`].
    pub fn start_next(&mut self) -> Option<Work> {
        let w = self.queued.pop_front()?;
        self.running += 1;
        Some(w)
    }

    /// A mover is done with `work` (taken with [`WorkQueue::start_next`]): the engine hears the
    /// outcome when the work needs one, and the object no longer waits for it. New work the
    /// engine issues on hearing it is taken at the next [`WorkQueue::take_issued`].
    pub fn finish<C: Clock>(
        &mut self,
        engine: &mut Engine<C>,
        work: &Work,
        outcome: Outcome,
    ) -> Result<(), CompleteError> {
        self.running = self.running.saturating_sub(1);
        self.settle(work);
        if work.kind.needs_completion() { engine.complete(work.id, outcome) } else { Ok(()) }
    }

    /// Reports every queued piece (not the running ones) cancelled, and returns them: a front
    /// end shutting down or told to stop moving cleans up after each.
    pub fn cancel_queued<C: Clock>(&mut self, engine: &mut Engine<C>) -> Vec<Work> {
        self.cancel_queued_where(engine, |_| true)
    }

    /// [`WorkQueue::cancel_queued`] of the queued pieces `cancel` picks; the others stay queued
    /// in their order.
    pub fn cancel_queued_where<C: Clock>(
        &mut self,
        engine: &mut Engine<C>,
        mut cancel: impl FnMut(&Work) -> bool,
    ) -> Vec<Work> {
        let (cancelled, kept): (Vec<Work>, Vec<Work>) = self.queued.drain(..).partition(|w| cancel(w));
        self.queued.extend(kept);
        for w in &cancelled {
            self.settle(w);
            if w.kind.needs_completion() {
                // Queued work was issued by this engine and not completed: it is known to it.
                let _ = engine.complete(w.id, Outcome::Cancelled);
            }
        }
        cancelled
    }

    fn settle(&mut self, work: &Work) {
        if let Some(ids) = self.on_object.get_mut(&work.obj.0) {
            ids.retain(|&id| id != work.id);
            if ids.is_empty() {
                self.on_object.remove(&work.obj.0);
            }
        }
    }

    /// The `n` pieces queued last, oldest first: what one call of [`WorkQueue::take_issued`]
    /// that returned `n` queued, when no mover has taken any since.
    pub fn newest(&self, n: usize) -> impl Iterator<Item = &Work> {
        self.queued.iter().skip(self.queued.len().saturating_sub(n))
    }

    /// Whether work is queued or running on `obj`.
    pub fn busy(&self, obj: ObjectId) -> bool {
        self.on_object.contains_key(&obj.0)
    }

    /// The work queued or running on `obj` now, in issue order. An access that must wait fixes
    /// this set when it starts waiting (see [`WorkQueue::any_left`]), so work issued on the
    /// object later, such as a failed move issued again, does not hold it for ever.
    pub fn on(&self, obj: ObjectId) -> &[WorkId] {
        self.on_object.get(&obj.0).map_or(&[], Vec::as_slice)
    }

    /// Whether any of `waited` (work and its object) is still queued or running.
    pub fn any_left(&self, waited: &[(ObjectId, WorkId)]) -> bool {
        waited.iter().any(|&(obj, id)| self.on(obj).contains(&id))
    }

    /// Pieces queued or running.
    pub fn len(&self) -> usize {
        self.queued.len() + self.running
    }

    /// Whether nothing is queued or running.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Pieces queued, not yet taken by a mover.
    pub fn queued(&self) -> usize {
        self.queued.len()
    }
}
