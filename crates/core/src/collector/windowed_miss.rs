//! GreenDM's windowed miss counter: per extent, a miss within `TW` seconds of the previous one
//! increments the count, otherwise the count restarts at 1; the extent is hot when the count
//! reaches `PT`. Three bytes of state: the time of the last miss in whole seconds (wrapping
//! every 18 hours, so `TW` must stay below 9 hours) and a saturating count.

use crate::Nanos;

/// Per-extent state (3 bytes, byte-aligned, so that it packs into an 8-byte table entry with a
/// u32 and a u8 beside it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C, packed)]
pub struct WindowedMiss {
    last_s: u16,
    count: u8,
}

/// Largest window the 16-bit clock supports.
pub const MAX_WINDOW_S: u64 = 32_000;

impl WindowedMiss {
    /// Records a miss at `now`; returns the count.
    #[inline]
    pub fn miss(&mut self, now: Nanos, window_s: u16) -> u8 {
        let t = (now.0 / 1_000_000_000) as u16;
        self.count =
            if self.count > 0 && t.wrapping_sub(self.last_s) <= window_s { self.count.saturating_add(1) } else { 1 };
        self.last_s = t;
        self.count
    }

    /// The current count.
    pub fn count(&self) -> u8 {
        self.count
    }

    /// Records a use that is not a miss (the clock then means "last used"; GreenDM's WSClock
    /// reads it for extents on the SSD, which never miss).
    #[inline]
    pub fn touch_at(&mut self, now: Nanos) {
        self.last_s = (now.0 / 1_000_000_000) as u16;
    }

    /// The time of the last miss or use, in wrapping whole seconds.
    #[inline]
    pub fn last_seen(&self) -> u16 {
        self.last_s
    }

    /// Forgets the history (after a promotion).
    pub fn reset(&mut self) {
        self.count = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn misses_within_the_window_accumulate() {
        let mut w = WindowedMiss::default();
        assert_eq!(w.miss(Nanos::from_secs(100), 60), 1);
        assert_eq!(w.miss(Nanos::from_secs(150), 60), 2);
        assert_eq!(w.miss(Nanos::from_secs(210), 60), 3, "60 s after the previous miss is still inside");
        assert_eq!(w.miss(Nanos::from_secs(271), 60), 1, "61 s later the count restarts");
        // Across the 16-bit wrap of the seconds clock.
        let mut w = WindowedMiss::default();
        w.miss(Nanos::from_secs(65_530), 60);
        assert_eq!(w.miss(Nanos::from_secs(65_540), 60), 2);
    }
}
