//! Volume changes, the timers (interval passes, the background cleaner) and the entry points the engine calls.

use super::*;

impl FileCore {
    /// Puts `s` under the policy of `volume` (a rename across volumes). Between policies that
    /// keep copies differently its state is converted first: a DST file alone on the SSD becomes
    /// a dirty copy; a clean cached copy entering DST is dropped from the SSD; a dirty copy
    /// entering DST is written back first. A file with work in flight switches when it settles.
    pub(super) fn move_to_volume(&mut self, cx: &mut Ctx<'_>, s: Slot, volume: u16) {
        let m = *self.table.meta(s);
        let (old, new) = (self.mode_of(m.volume()), self.mode_of(volume));
        if m.volume() == volume || m.has(DELETED) {
            return;
        }
        if old.copies() == new.copies() {
            self.table.meta_mut(s).set_volume(volume);
            return;
        }
        if m.has(MOVING) {
            self.pending_volume.insert(s.0, volume);
            return;
        }
        if new.copies() {
            if m.has(ON_FAST) && !m.has(ON_SLOW) && !m.has(DIRTY) {
                self.set_flags(s, DIRTY, 0);
                self.add_dirty(s, m.size() as i64);
            }
        } else if m.has(ON_FAST) && m.has(DIRTY) {
            self.pending_volume.insert(s.0, volume);
            self.writebacks += 1;
            self.issue(cx, s, WorkKind::Writeback, (Level::Fast, Level::Slow), m.size(), false);
            return;
        } else if m.has(ON_FAST) && m.has(ON_SLOW) {
            self.fast_used -= m.size();
            self.set_flags(s, 0, ON_FAST);
            cx.issue(Work::new(WorkKind::Invalidate, self.table.id(s), Level::Fast, Level::Fast, m.size()));
        }
        self.table.meta_mut(s).set_volume(volume);
        self.sync_coll(s, &Self::background_touch(cx));
    }

    /// One interval migration pass: hottest-on-HDD in while hotter than coldest-on-SSD.
    pub(super) fn interval_pass(&mut self, cx: &mut Ctx<'_>) {
        self.counters.interval_runs += 1;
        let t = Self::background_touch(cx);
        let mut budget = self.table.len();
        while budget > 0 {
            budget -= 1;
            let Some(c) = self.collector.hottest_slow() else { return };
            let m = *self.table.meta(c);
            if m.has(MOVING) || m.has(ON_FAST) || self.mode_of(m.volume()).promote != Promote::OnInterval {
                return;
            }
            if !self.collector.admits(c) || m.size() > self.capacity {
                return;
            }
            while self.fast_used + m.size() > self.capacity + self.leaving {
                let Some(v) = self.victim(cx.now, None) else { return };
                if !self.collector.hotter(c, v) {
                    return;
                }
                self.evict(cx, v, &t);
                self.counters.background_evictions += 1;
            }
            // Without room yet it waits for the demotions (pending); the next pass continues.
            self.promote(cx, c, true, &t);
            if !self.table.meta(c).has(MOVING) {
                return;
            }
        }
    }

    /// The background cleaner: frees ahead of demand what foreground cleaning had to free.
    pub(super) fn background_clean(&mut self, cx: &mut Ctx<'_>) {
        let t = Self::background_touch(cx);
        let target = self.counters.foreground_evicted_bytes.min(self.cleaner_cap);
        while self.capacity.saturating_sub(self.fast_used - self.leaving) < target {
            let Some(v) = self.victim(cx.now, None) else { break };
            self.evict(cx, v, &t);
            self.counters.background_evictions += 1;
        }
    }

    /// [`crate::arch::Architecture::access`].
    pub fn access(&mut self, cx: &mut Ctx<'_>, req: &Request) -> Served {
        let served = match req.op {
            Op::Read => self.read(cx, req),
            Op::Write => self.write(cx, req),
            Op::Create => self.create(cx, req),
            Op::Delete => self.delete(cx, req.obj),
            Op::Truncate => self.truncate(cx, req),
            Op::Open => self.open(cx, req),
            Op::Rename => {
                if let Some(s) = self.table.get(req.obj) {
                    self.pending_volume.remove(&s.0);
                    self.move_to_volume(cx, s, req.class.volume);
                }
                Served::metadata()
            }
            Op::Stat => Served::metadata(),
        };
        let t = Self::background_touch(cx);
        self.last_access = cx.now;
        self.after_access(cx, &t, Some(req.obj));
        served
    }

    /// [`crate::arch::Architecture::tick`].
    pub fn tick(&mut self, cx: &mut Ctx<'_>) {
        if self.modes.iter().any(|m| m.promote == Promote::OnInterval) && cx.now >= self.next_interval {
            self.interval_pass(cx);
            while self.next_interval <= cx.now {
                self.next_interval = self.next_interval.saturating_add(self.interval);
            }
        }
        if self.cleaner_active && cx.now >= self.next_clean {
            self.background_clean(cx);
            while self.next_clean <= cx.now {
                self.next_clean = self.next_clean.saturating_add(self.cleaner_period);
            }
        }
        if let Some(due) = self.idle_writeback_due()
            && cx.now >= due
        {
            // Idle: the dirty files above the low watermark go to the HDD, as dm-cache writes
            // back when the device is idle.
            self.draining = true;
            self.write_back_some(cx, self.dirty_low, None);
        }
    }

    /// When dirty bytes above `dirty-low` are written back for want of accesses.
    fn idle_writeback_due(&self) -> Option<Nanos> {
        (self.writeback_idle.0 > 0 && self.dirty_bytes > self.dirty_low && !self.draining)
            .then(|| self.last_access.saturating_add(self.writeback_idle))
    }

    /// [`crate::arch::Architecture::next_tick`].
    pub fn next_tick(&self) -> Option<Nanos> {
        let interval = self.modes.iter().any(|m| m.promote == Promote::OnInterval).then_some(self.next_interval);
        let clean = self.cleaner_active.then_some(self.next_clean);
        [interval, clean, self.idle_writeback_due()].into_iter().flatten().min()
    }

    /// [`crate::arch::Architecture::flush`]: writes back every dirty file.
    pub fn flush(&mut self, cx: &mut Ctx<'_>) {
        let dirty: Vec<Slot> =
            self.table.slots().filter(|&s| self.table.meta(s).has(DIRTY) && !self.table.meta(s).has(MOVING)).collect();
        for s in dirty {
            let size = self.table.meta(s).size();
            self.writebacks += 1;
            self.issue(cx, s, WorkKind::Writeback, (Level::Fast, Level::Slow), size, false);
        }
    }

    /// [`crate::arch::Architecture::adopt`].
    pub fn adopt(&mut self, cx: &mut Ctx<'_>, obj: ObjectId, level: Level, size: u64, dirty: bool) {
        let t = Self::background_touch(cx);
        if self.table.get(obj).is_some() {
            return;
        }
        let fast = level == Level::Fast && !self.sieved(size) && self.fast_used + size <= self.capacity;
        // `dirty`: the SSD copy is newer than the HDD one, or the only one. DST keeps one copy
        // and has no dirty state.
        let copies = self.modes[0].copies();
        let flags = match (fast, dirty) {
            (true, _) if !copies => ON_FAST,
            (true, true) => ON_FAST | DIRTY,
            (true, false) => ON_FAST | ON_SLOW,
            (false, _) => ON_SLOW,
        };
        let s = self.table.insert(obj, FileMeta::new(size, flags, 0));
        if fast {
            self.fast_used += size;
        }
        if flags & DIRTY != 0 {
            self.add_dirty(s, size as i64);
        }
        self.sync_coll(s, &t);
    }

    /// [`crate::arch::Architecture::heat_ranking`]: ranked by the collector's own comparison.
    pub fn heat_ranking(&self, objs: &[ObjectId]) -> Vec<(ObjectId, u64)> {
        let mut slots: Vec<(ObjectId, Slot)> = objs
            .iter()
            .filter_map(|&o| self.table.get(o).map(|s| (o, s)))
            .filter(|(_, s)| self.table.meta(*s).has(IN_COLL))
            .collect();
        // Not `sort_by`: it may panic when a comparison is not a total order, and a
        // collector's `hotter` need not be one (ARC across its lists, wrapping stamps).
        merge_sort(&mut slots, |a, b| self.collector.hotter(b.1, a.1));
        slots.into_iter().map(|(o, s)| (o, self.collector.heat(s))).collect()
    }

    /// [`crate::arch::Architecture::restore_heat`].
    pub fn restore_heat(&mut self, cx: &mut Ctx<'_>, obj: ObjectId, heat: u64) {
        if let Some(s) = self.table.get(obj)
            && self.table.meta(s).has(IN_COLL)
        {
            let t = Self::background_touch(cx);
            self.collector.restore_heat(s, heat, &t);
        }
    }
}
