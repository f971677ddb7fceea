//! WSClock (Carr and Hennessy), GreenDM's demotion policy: CLOCK whose victims must also have
//! left the working set — not referenced since the last sweep *and* idle for longer than the
//! window `tau`. If a full sweep finds no such object, the least recently used object seen in the
//! sweep is the victim.

use super::clock::Clock;
use super::{Collector, CollectorBuild, CollectorContext, Removal, Touch, ensure_slot};
use crate::params::{ConfigError, ParamSpec, Params};
use crate::{Nanos, ObjectId, Slot, Tier};

/// WSClock over the fast tier.
#[derive(Clone, Debug)]
pub struct WsClock {
    clock: Clock,
    last_use: Vec<Nanos>,
    tau: Nanos,
}

impl CollectorBuild for WsClock {
    const NAME: &'static str = "wsclock";
    const VERSION: u32 = 1;
    const HELP: &'static str = "WSClock: CLOCK that only evicts objects idle for longer than a window";
    const PARAMS: &'static [ParamSpec] =
        &[ParamSpec { name: "window", default: "10s", help: "working-set window tau (1ms..=1d)" }];
    fn build(p: &mut Params, _: &CollectorContext) -> Result<Self, ConfigError> {
        let tau = p.duration("window", Nanos::from_millis(1), Nanos::from_secs(86_400))?;
        Ok(WsClock::new(tau))
    }
}

impl WsClock {
    /// A WSClock with window `tau`.
    pub fn new(tau: Nanos) -> WsClock {
        WsClock { clock: Clock::default(), last_use: Vec::new(), tau }
    }
    /// The window.
    pub fn window(&self) -> Nanos {
        self.tau
    }
}

impl Collector for WsClock {
    fn insert(&mut self, slot: Slot, id: ObjectId, tier: Tier, size: u64, t: &Touch) {
        ensure_slot(&mut self.last_use, slot, Nanos::ZERO);
        self.last_use[slot.idx()] = t.now;
        self.clock.insert(slot, id, tier, size, t);
    }

    fn touch(&mut self, slot: Slot, t: &Touch) {
        self.last_use[slot.idx()] = t.now;
        self.clock.touch(slot, t);
    }

    fn set_tier(&mut self, slot: Slot, tier: Tier) {
        self.clock.set_tier(slot, tier);
    }

    fn remove(&mut self, slot: Slot, why: Removal) {
        self.clock.remove(slot, why);
    }

    fn coldest_fast(&mut self, now: Nanos) -> Option<Slot> {
        let n = self.clock.ring.len();
        if n == 0 {
            return None;
        }
        let mut oldest: Option<(Nanos, u32)> = None;
        // Two laps: the first may only clear reference bits.
        for _ in 0..2 * n {
            let h = self.clock.hand;
            if self.clock.referenced(Slot(h)) {
                self.clock.clear_ref(h);
            } else {
                let used = self.last_use[h as usize];
                if now.saturating_sub(used) > self.tau {
                    return Some(Slot(h));
                }
                if oldest.is_none_or(|(t, _)| used < t) {
                    oldest = Some((used, h));
                }
            }
            self.clock.advance_hand();
        }
        let (_, victim) = oldest?;
        self.clock.hand = victim;
        Some(Slot(victim))
    }

    fn hottest_slow(&self) -> Option<Slot> {
        self.clock.hottest_slow()
    }

    fn hotter(&self, a: Slot, b: Slot) -> bool {
        self.last_use[a.idx()] > self.last_use[b.idx()]
            || (self.last_use[a.idx()] == self.last_use[b.idx()] && self.clock.hotter(a, b))
    }

    fn len(&self, tier: Tier) -> usize {
        self.clock.len(tier)
    }

    fn memory_bytes(&self) -> usize {
        self.clock.memory_bytes() + self.last_use.capacity() * 8
    }
}
