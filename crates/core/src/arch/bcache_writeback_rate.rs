//! bcache's write-back rate controller, re-implemented from its documentation
//! (Documentation/admin-guide/bcache.rst, the `writeback_rate_*` sysfs files) and the behaviour
//! of drivers/md/bcache/writeback.c:
//!
//! - every `writeback_rate_update_seconds` (5 s) while there is dirty data, a PI controller sets
//!   the rate from the error `dirty - target` (target: `writeback_percent` of the cache):
//!   `rate = error / p_term_inverse + integral / i_term_inverse`, at least
//!   `writeback_rate_minimum` (8 sectors/s); the integral adds `error × update seconds` while the
//!   error is positive and the writeback keeps up with its rate, or while it is negative and the
//!   integral still positive (so it winds down);
//! - the writeback thread writes dirty keys one after another, each moving its next start by
//!   `bytes / rate`; it is never more than 2 s behind that schedule nor sleeps more than 2.5 s;
//! - once the cache set has had no I/O for six rate updates (30 s), it writes back at the
//!   highest rate (`idle_max_writeback_rate`), until the next request;
//! - the first rate is 1024 sectors/s (512 KiB/s);
//! - after a pass that wrote back every dirty key it found, the thread sleeps `writeback_delay`
//!   (30 s) whatever is written meanwhile (a wake-up only shortens the sleep of a thread with
//!   no dirty data at all, which waits for the first).
//!
//! Not modelled: the fragmentation boost of newer kernels (a faster rate when many buckets
//! hold little dirty data); a pass here ends when no dirty block is left to start, where
//! bcache's ends when its scan of the index wraps (at most 500 keys at a time).

use crate::Nanos;

/// The controller's knobs (bcache's sysfs names).
#[derive(Clone, Copy, Debug)]
pub(super) struct RateKnobs {
    /// Dirty bytes the controller aims at.
    pub target: u64,
    /// Bytes per second at least.
    pub minimum: u64,
    pub update: Nanos,
    pub p_term_inverse: u64,
    pub i_term_inverse: u64,
    /// No I/O for this long: write back at the highest rate (`None`: never).
    pub idle_max_after: Option<Nanos>,
    /// The sleep after a pass.
    pub delay: Nanos,
}

/// The rate and the writeback thread's schedule.
#[derive(Debug)]
pub(super) struct WritebackRate {
    knobs: RateKnobs,
    /// Bytes per second; `None`: the highest rate (idle).
    rate: Option<f64>,
    /// Error × seconds accumulated, bytes.
    integral: f64,
    /// When the writeback thread may start its next write-back.
    next: Nanos,
    next_update: Nanos,
    /// The thread sleeps until then after a pass.
    asleep_until: Nanos,
    /// The current pass has written something back.
    pass_wrote: bool,
    passes: u64,
    last_io: Nanos,
    updates: u64,
    idle_updates: u64,
}

const INITIAL_BYTES_PER_S: f64 = 1024.0 * 512.0;
const MAX_BEHIND: Nanos = Nanos::from_secs(2);
const MAX_AHEAD: Nanos = Nanos::from_millis(2500);

impl WritebackRate {
    pub(super) fn new(knobs: RateKnobs) -> WritebackRate {
        WritebackRate {
            knobs,
            rate: Some(INITIAL_BYTES_PER_S),
            integral: 0.0,
            next: Nanos::ZERO,
            next_update: knobs.update,
            asleep_until: Nanos::ZERO,
            pass_wrote: false,
            passes: 0,
            last_io: Nanos::ZERO,
            updates: 0,
            idle_updates: 0,
        }
    }

    /// A request reached the device: the set is not idle.
    pub(super) fn on_io(&mut self, now: Nanos) {
        self.last_io = now;
        if self.rate.is_none() {
            // bcache quits the idle maximum on the first request by setting the rate to one
            // sector a second; the next update computes it again.
            self.rate = Some(512.0);
            self.next = now;
        }
    }

    /// Runs the rate update if it is due, with `dirty` bytes dirty now.
    pub(super) fn update_if_due(&mut self, now: Nanos, dirty: u64) {
        if now < self.next_update {
            return;
        }
        self.next_update = now.saturating_add(self.knobs.update);
        if dirty == 0 {
            return;
        }
        self.updates += 1;
        if let Some(idle) = self.knobs.idle_max_after
            && now.saturating_sub(self.last_io) >= idle
        {
            self.idle_updates += 1;
            self.rate = None;
            return;
        }
        let error = dirty as f64 - self.knobs.target as f64;
        let keeping_up = now < self.next.saturating_add(Nanos::from_millis(1));
        if (error < 0.0 && self.integral > 0.0) || (error > 0.0 && keeping_up) {
            self.integral += error * self.knobs.update.as_secs_f64();
        }
        let wanted = error / self.knobs.p_term_inverse as f64 + self.integral / self.knobs.i_term_inverse as f64;
        // At most 10^9 sectors a second: bcache's ceiling.
        self.rate = Some(wanted.clamp(self.knobs.minimum.max(1) as f64, 512e9));
    }

    /// Whether the writeback thread may start a write-back now.
    pub(super) fn may_write(&self, now: Nanos) -> bool {
        self.next_write() <= now
    }

    /// The thread found no dirty block left to write back: a pass that wrote some ends with
    /// the sleep.
    pub(super) fn nothing_left(&mut self, now: Nanos) {
        if self.pass_wrote {
            self.pass_wrote = false;
            self.passes += 1;
            self.asleep_until = now.saturating_add(self.knobs.delay);
        }
    }

    /// The thread started a write-back of `bytes` at `now`: its next start moves on.
    pub(super) fn wrote(&mut self, now: Nanos, bytes: u64) {
        self.pass_wrote = true;
        let Some(rate) = self.rate else {
            self.next = now;
            return;
        };
        let step = Nanos::from_secs_f64(bytes as f64 / rate);
        let next = self.next.max(now.saturating_sub(MAX_BEHIND)).saturating_add(step);
        self.next = next.min(now.saturating_add(MAX_AHEAD));
    }

    /// When the thread may write next.
    pub(super) fn next_write(&self) -> Nanos {
        self.next.max(self.asleep_until)
    }

    /// When the next rate update is due.
    pub(super) fn next_update(&self) -> Nanos {
        self.next_update
    }

    /// Bytes per second now (`None`: the highest rate).
    #[cfg(test)]
    pub(super) fn rate(&self) -> Option<f64> {
        self.rate
    }

    /// Rate updates run, those that found the set idle, and passes ended with a sleep.
    pub(super) fn updates(&self) -> (u64, u64, u64) {
        (self.updates, self.idle_updates, self.passes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn knobs() -> RateKnobs {
        RateKnobs {
            target: 10 << 20,
            minimum: 4096,
            update: Nanos::from_secs(5),
            p_term_inverse: 40,
            i_term_inverse: 10_000,
            idle_max_after: Some(Nanos::from_secs(30)),
            delay: Nanos::from_secs(30),
        }
    }

    /// Above the target the rate is the excess over 40 s plus the integral; below it, the
    /// minimum; after 30 s without I/O, the highest rate until the next request.
    #[test]
    fn the_rate_follows_the_error() {
        let mut r = WritebackRate::new(knobs());
        assert_eq!(r.rate(), Some(INITIAL_BYTES_PER_S));
        r.on_io(Nanos::from_secs(4));
        // The thread is on schedule (its next start is ahead): the integral may grow.
        r.wrote(Nanos::from_millis(4500), 4 << 20);
        r.update_if_due(Nanos::from_secs(5), (10 << 20) + (40 << 20));
        // 40 MiB over: 1 MiB/s proportional, plus 40 MiB × 5 s / 10000 = 20.97 KB/s integral.
        let rate = r.rate().unwrap_or(0.0);
        assert!((rate - (1048576.0 + 20971.52)).abs() < 1.0, "{rate}");
        r.on_io(Nanos::from_secs(9));
        r.update_if_due(Nanos::from_secs(10), 1 << 20);
        // Under target: the integral winds down, the rate is the minimum.
        assert_eq!(r.rate(), Some(4096.0));
        r.update_if_due(Nanos::from_secs(40), 1 << 20);
        assert_eq!(r.rate(), None, "idle for 31 s: highest rate");
        r.on_io(Nanos::from_secs(41));
        assert!(r.rate().is_some());
        assert_eq!(r.updates(), (3, 1, 0));
    }

    /// Each write-back moves the schedule by bytes / rate, never more than 2.5 s ahead or 2 s
    /// behind.
    #[test]
    fn the_schedule_is_paced_and_bounded() {
        let mut r = WritebackRate::new(knobs());
        let t = Nanos::from_secs(100);
        assert!(r.may_write(t));
        r.wrote(t, 512 << 10); // 512 KiB at 512 KiB/s: one second, but from 2 s behind
        assert_eq!(r.next_write(), Nanos::from_secs(99));
        r.wrote(t, 4 << 20); // 8 s more: held to 2.5 s ahead
        assert_eq!(r.next_write(), Nanos::from_millis(102_500));
        assert!(!r.may_write(t));
        // The pass ends: 30 s of sleep.
        r.nothing_left(Nanos::from_secs(103));
        assert_eq!(r.next_write(), Nanos::from_secs(133));
        r.nothing_left(Nanos::from_secs(140));
        assert_eq!(r.next_write(), Nanos::from_secs(133), "no pass since: no new sleep");
        assert_eq!(r.updates().2, 1);
    }
}
