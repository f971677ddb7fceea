//! How long a mover pauses after failed work, so that a full or lost tier is retried, not
//! spun on.

use crate::{Nanos, Outcome};

/// Doubling pauses after consecutive failures, from `first` up to `longest`; a success resets.
#[derive(Clone, Copy, Debug)]
pub struct Backoff {
    failures: u32,
    first: Nanos,
    longest: Nanos,
}

impl Backoff {
    /// Pauses of `first`, twice that, four times ... at most `longest`.
    pub const fn new(first: Nanos, longest: Nanos) -> Backoff {
        Backoff { failures: 0, first, longest }
    }

    /// Records an outcome and returns the pause before the next work: after a failure, `first`
    /// doubled for each failure before it in a row, capped; none otherwise. A cancellation
    /// neither counts as a failure nor resets the count.
    pub fn after(&mut self, outcome: Outcome) -> Option<Nanos> {
        match outcome {
            Outcome::Done => {
                self.failures = 0;
                None
            }
            Outcome::Cancelled => None,
            Outcome::Failed => {
                let shift = self.failures.min(32);
                self.failures = self.failures.saturating_add(1);
                Some(Nanos(self.first.0.saturating_mul(1u64 << shift).min(self.longest.0)))
            }
        }
    }

    /// Failures in a row so far.
    pub fn failures(&self) -> u32 {
        self.failures
    }
}
