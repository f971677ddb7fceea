//! Time is injected: the engine never reads the OS clock, so the simulator and the tests are
//! deterministic and the real front ends decide what "now" means.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::Nanos;

/// A source of the current time.
///
/// Implementations MUST be monotonic (never go backwards) and cheap: the engine reads the clock
/// on every access.
pub trait Clock {
    /// The current time.
    fn now(&self) -> Nanos;
}

/// A clock that only moves when told to. Cloning yields a handle to the same clock, so a
/// simulator can keep one handle and give another to the engine.
#[derive(Clone, Debug, Default)]
pub struct ManualClock(Arc<AtomicU64>);

impl ManualClock {
    /// A clock at time zero.
    pub fn new() -> ManualClock {
        ManualClock::default()
    }
    /// Sets the time; a value earlier than the current time is ignored (monotonicity).
    pub fn set(&self, t: Nanos) {
        self.0.fetch_max(t.0, Ordering::Relaxed);
    }
    /// Moves the clock forward by `d`.
    pub fn advance(&self, d: Nanos) {
        self.0.fetch_add(d.0, Ordering::Relaxed);
    }
}

impl Clock for ManualClock {
    #[inline]
    fn now(&self) -> Nanos {
        Nanos(self.0.load(Ordering::Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_is_shared_and_monotonic() {
        let a = ManualClock::new();
        let b = a.clone();
        a.set(Nanos(10));
        assert_eq!(b.now(), Nanos(10));
        b.set(Nanos(5));
        assert_eq!(a.now(), Nanos(10), "setting an earlier time must not move the clock back");
        b.advance(Nanos(3));
        assert_eq!(a.now(), Nanos(13));
    }
}
