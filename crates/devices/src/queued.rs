//! A disk behind its [`DiskQueue`], for an event loop: the loop owns the clock and the event
//! heap; the disk says which event to schedule next (a command's end, or a wake-up when idle
//! work may go or when the submissions of one instant are all queued).

use tierwise_core::Nanos;

use super::{Class, DevOp, Device, DeviceStats, DiskQueue, Dispatch, QueueConfig};

/// What the event loop must schedule for the disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DiskEvent {
    /// The command in service ends then: call [`QueuedDisk::complete`], then
    /// [`QueuedDisk::dispatch`].
    Done(Nanos),
    /// Call [`QueuedDisk::woke`] then.
    Wake(Nanos),
}

/// A device and its queue.
pub struct QueuedDisk {
    /// The device model.
    pub device: Device,
    queue: DiskQueue,
    /// The earliest wake-up scheduled and not yet delivered.
    wake: Option<Nanos>,
}

impl QueuedDisk {
    /// `device` behind a queue configured by `cfg`.
    pub fn new(device: Device, cfg: QueueConfig) -> QueuedDisk {
        let queue = DiskQueue::new(cfg, &device);
        QueuedDisk { device, queue, wake: None }
    }

    /// Queues a request at `now`; `token` comes back from [`QueuedDisk::complete`].
    #[must_use]
    pub fn submit(
        &mut self,
        now: Nanos,
        (op, addr, len): (DevOp, u64, u64),
        class: Class,
        token: u64,
    ) -> Option<DiskEvent> {
        self.queue.submit(now, op, addr, len, class, token);
        self.wake_at(now)
    }

    /// A wake-up at `at`, unless the disk is busy (its end dispatches) or an earlier one is due.
    fn wake_at(&mut self, at: Nanos) -> Option<DiskEvent> {
        if self.queue.busy() || self.wake.is_some_and(|w| w <= at) {
            return None;
        }
        self.wake = Some(at);
        Some(DiskEvent::Wake(at))
    }

    /// A wake-up scheduled for `at` is delivered.
    #[must_use]
    pub fn woke(&mut self, at: Nanos) -> Option<DiskEvent> {
        if self.wake == Some(at) {
            self.wake = None;
        }
        self.dispatch(at)
    }

    /// Starts the next command if the disk is free.
    #[must_use]
    pub fn dispatch(&mut self, now: Nanos) -> Option<DiskEvent> {
        match self.queue.dispatch(now, &mut self.device) {
            Dispatch::Started(done) => Some(DiskEvent::Done(done)),
            Dispatch::WaitUntil(t) => self.wake_at(t),
            Dispatch::Nothing => None,
        }
    }

    /// Ends the command in service; returns the tokens of the requests it carried.
    pub fn complete(&mut self) -> &[u64] {
        self.queue.complete()
    }

    /// How long after the [`DiskEvent::Done`] just handled the requests [`QueuedDisk::complete`]
    /// returned complete: zero for a disk; a flash device in the slow level's place is free for
    /// the next command before a request's latency has passed.
    pub fn completion_delay(&self) -> Nanos {
        self.queue.completion_delay()
    }

    /// Counters so far (without the merge count).
    pub fn stats(&self) -> &DeviceStats {
        self.device.stats()
    }

    /// Requests merged by the queue so far.
    pub fn merged(&self) -> u64 {
        self.queue.merged()
    }

    /// Final counters at `end`, with the requests merged by the queue.
    pub fn finish(&mut self, end: Nanos) -> DeviceStats {
        let mut s = self.device.finish(end);
        s.merged = self.queue.merged();
        s
    }
}
