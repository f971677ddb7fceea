//! What the architecture reports: placements, usage, invariants, memory and counters.

use super::*;

impl FileCore {
    /// [`crate::arch::Architecture::placement`].
    pub fn placement(&self, obj: ObjectId) -> Placement {
        let Some(s) = self.table.get(obj) else { return Placement::default() };
        let m = self.table.meta(s);
        Placement {
            tracked: true,
            on_fast: m.has(ON_FAST),
            on_slow: m.has(ON_SLOW),
            dirty: m.has(DIRTY),
            moving: m.has(MOVING),
            in_ram: false,
        }
    }

    /// The size the engine believes `obj` has (tests, front ends).
    pub fn size_of(&self, obj: ObjectId) -> Option<u64> {
        self.table.get(obj).map(|s| self.table.meta(s).size())
    }

    /// [`crate::arch::Architecture::usage`].
    pub fn usage(&self) -> Usage {
        let fast_objects = self.table.slots().filter(|&s| self.table.meta(s).has(ON_FAST)).count();
        Usage {
            fast_capacity: self.capacity,
            fast_used: self.fast_used,
            dirty_bytes: self.dirty_bytes,
            objects: self.table.len(),
            fast_objects,
            in_flight: 0,
        }
    }

    /// [`crate::arch::Architecture::check_invariants`].
    pub fn check_invariants(&self) -> Result<(), String> {
        let mut used = 0u64;
        let mut leaving = 0u64;
        let mut dirty = 0u64;
        for s in self.table.slots() {
            let m = self.table.meta(s);
            let id = self.table.id(s);
            let mode = self.mode_of(m.volume());
            let held = self.held.get(&s.0).copied();
            if !m.has(ON_FAST) && !m.has(ON_SLOW) {
                return Err(format!("file {id:?} is on neither tier"));
            }
            if !mode.copies() && m.has(ON_FAST) && m.has(ON_SLOW) && !m.has(DELETED) {
                return Err(format!("DST file {id:?} is on both tiers"));
            }
            if m.has(DIRTY) && !m.has(ON_FAST) {
                return Err(format!("file {id:?} is dirty without an SSD copy"));
            }
            if !m.has(ON_SLOW) && mode.copies() && !m.has(DIRTY) && !m.has(DELETED) {
                return Err(format!("cached file {id:?} has no HDD copy and is not dirty"));
            }
            if m.has(ON_FAST) && self.sieved(m.size()) && !m.has(MOVING) && !m.has(DELETED) {
                return Err(format!("sieved file {id:?} ({} bytes) is settled on the SSD", m.size()));
            }
            if m.has(LEAVING) {
                leaving += held.unwrap_or(0);
            }
            match held {
                Some(b) => used += b,
                None if m.has(ON_FAST) && !m.has(DELETED) => used += m.size(),
                None => {}
            }
            if m.has(DIRTY) {
                dirty += m.size();
            }
            if m.has(IN_COLL) != self.coll_wanted(m).0 {
                return Err(format!("file {id:?}: collector membership disagrees with its state"));
            }
        }
        if used != self.fast_used {
            return Err(format!("fast_used {} but files hold {used}", self.fast_used));
        }
        if leaving != self.leaving {
            return Err(format!("leaving {} but moves out hold {leaving}", self.leaving));
        }
        if dirty != self.dirty_bytes {
            return Err(format!("dirty_bytes {} but dirty files hold {dirty}", self.dirty_bytes));
        }
        if self.fast_used > self.capacity + self.leaving + self.overcommit {
            return Err(format!(
                "SSD over capacity: {} used, {} capacity, {} leaving",
                self.fast_used, self.capacity, self.leaving
            ));
        }
        Ok(())
    }

    /// [`crate::arch::Architecture::memory_bytes`].
    pub fn memory_bytes(&self) -> usize {
        self.table.memory_bytes()
            + self.collector.memory_bytes()
            + (self.held.capacity() + self.pending_volume.capacity()) * 16
            + (self.pending.capacity() + self.dirty_queue.capacity()) * 8
    }

    /// [`crate::arch::Architecture::counters`].
    pub fn counters(&self) -> Vec<(&'static str, u64)> {
        let c = &self.counters;
        vec![
            ("blocked writes", c.blocked_writes),
            ("foreground evictions", c.foreground_evictions),
            ("foreground evicted bytes", c.foreground_evicted_bytes),
            ("background evictions", c.background_evictions),
            ("threshold evictions", c.threshold_evictions),
            ("sieved out of the SSD", c.sieved_out),
            ("moves that took writes", c.stale_moves),
            ("interval passes", c.interval_runs),
            ("writes over capacity", c.overcommitted_writes),
        ]
    }

    /// [`crate::arch::Architecture::prefetch`].
    pub fn prefetch(&self, obj: ObjectId, deep: bool) {
        if !deep {
            self.table.prefetch(obj);
        } else if let Some(s) = self.table.prefetch_entry(obj) {
            self.collector.prefetch(s);
        }
    }
}
