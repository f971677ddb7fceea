//! The write-back side of the cache: the dirty set (in dirtying order, or by LBA from a cursor
//! as bcache's writeback thread walks its keys), and the write-backs it issues.

use super::*;

impl Cache {
    /// Writes back, oldest-dirtied first, up to `max` dirty objects that became dirty at or
    /// before `cutoff` (an age-based cleaner); returns how many were issued.
    pub fn clean_dirty_before(&mut self, cx: &mut Ctx<'_>, cutoff: Nanos, max: usize) -> usize {
        let mut n = 0;
        while n < max {
            let Some(s) = self.dirty_order.front() else { break };
            if self.dirty_links[s as usize].since > cutoff {
                break;
            }
            self.issue_writeback(cx, Slot(s), Priority::Idle(Nanos::ZERO));
            n += 1;
        }
        n
    }

    /// Whether a dirty object waits for a write-back that may start now (one not already
    /// being written back, and a write-back slot free).
    pub fn can_write_back(&self) -> bool {
        self.writebacks_in_flight < self.max_writebacks && self.has_dirty_waiting()
    }

    /// Dirty bytes, those being written back included (what [`Cache::usage`] reports, without
    /// building the rest of it on every access).
    pub fn dirty_bytes(&self) -> u64 {
        self.dirty_bytes
    }

    /// Whether a dirty object waits for its write-back (not counting those in flight).
    pub fn has_dirty_waiting(&self) -> bool {
        self.dirty_order.front().is_some()
    }

    /// Starts the write-back of the next dirty object in the cleaner's order, at `priority`
    /// (a cleaner paced by its owner, as bcache's rate controller), and, in LBA order, of the
    /// dirty blocks right after it, up to `max_bytes` in all (bcache writes back contiguous
    /// dirty keys together, at most 5000 sectors a pass); returns the bytes.
    pub fn write_back_next(&mut self, cx: &mut Ctx<'_>, priority: Priority, max_bytes: u64) -> Option<u64> {
        if !self.can_write_back() {
            return None;
        }
        let s = self.next_to_clean()?;
        let mut bytes = u64::from(self.table.meta(s).size);
        let mut last = self.table.id(s).0;
        self.issue_writeback(cx, s, priority);
        while self.dirty_by_lba.as_ref().is_some_and(|set| set.contains(&last.wrapping_add(1)))
            && self.writebacks_in_flight < self.max_writebacks
        {
            let Some(s) = self.table.get(ObjectId(last.wrapping_add(1))) else { break };
            let size = u64::from(self.table.meta(s).size);
            if bytes + size > max_bytes {
                break;
            }
            self.issue_writeback(cx, s, priority);
            bytes += size;
            last = last.wrapping_add(1);
            self.lba_cursor = last.wrapping_add(1);
        }
        Some(bytes)
    }

    pub(super) fn dirty_push(&mut self, s: Slot, now: Nanos) {
        ensure_slot(&mut self.dirty_links, s, DirtyLink::default());
        self.dirty_links[s.idx()].since = now;
        self.dirty_order.push_back(&mut self.dirty_links, s.0);
        if let Some(set) = &mut self.dirty_by_lba {
            set.insert(self.table.id(s).0);
        }
    }

    pub(super) fn dirty_unlink(&mut self, s: Slot) {
        self.dirty_order.unlink(&mut self.dirty_links, s.0);
        if let Some(set) = &mut self.dirty_by_lba {
            set.remove(&self.table.id(s).0);
        }
    }

    /// The next dirty object the cleaner writes back.
    pub(super) fn next_to_clean(&mut self) -> Option<Slot> {
        match &self.dirty_by_lba {
            Some(set) => {
                let id = set.range(self.lba_cursor..).next().or_else(|| set.iter().next()).copied()?;
                self.lba_cursor = id.wrapping_add(1);
                self.table.get(ObjectId(id))
            }
            None => self.dirty_order.front().map(Slot),
        }
    }

    pub(super) fn mark_dirty(&mut self, s: Slot, now: Nanos) {
        let m = *self.table.meta(s);
        match m.state {
            CLEAN => {
                self.table.meta_mut(s).state = DIRTY;
                self.dirty_bytes += u64::from(m.size);
                if m.flags & WRITING_BACK != 0 {
                    // Cannot happen (only dirty objects are written back), kept for safety.
                    self.table.meta_mut(s).flags |= REDIRTIED;
                } else {
                    self.dirty_push(s, now);
                }
            }
            DIRTY if m.flags & WRITING_BACK != 0 => self.table.meta_mut(s).flags |= REDIRTIED,
            _ => {}
        }
    }

    pub(super) fn issue_writeback(&mut self, cx: &mut Ctx<'_>, s: Slot, priority: Priority) {
        let m = *self.table.meta(s);
        debug_assert!(m.state == DIRTY && m.flags & WRITING_BACK == 0);
        self.dirty_unlink(s);
        self.table.meta_mut(s).flags |= WRITING_BACK;
        self.writing_back_bytes += u64::from(m.size);
        self.writebacks_in_flight += 1;
        let id = self.table.id(s);
        let w = Work::new(WorkKind::Writeback, id, Level::Fast, Level::Slow, u64::from(m.size))
            .with_tag(u64::from(s.0))
            .with_priority(priority);
        cx.issue(w);
    }

    pub(super) fn maybe_writeback(&mut self, cx: &mut Ctx<'_>) {
        if self.mode != Mode::WriteBack || self.dirty_bytes <= self.dirty_high {
            return;
        }
        while self.dirty_bytes.saturating_sub(self.writing_back_bytes) > self.dirty_low
            && self.writebacks_in_flight < self.max_writebacks
        {
            let Some(s) = self.next_to_clean() else {
                break;
            };
            self.issue_writeback(cx, s, Priority::Idle(Nanos::ZERO));
        }
    }
}
