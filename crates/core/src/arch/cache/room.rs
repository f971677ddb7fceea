//! Eviction and filling: making room on the SSD (clean victims at once, dirty ones after their
//! write-back) and placing a missed object with a fill.

use super::*;

impl Cache {
    pub(super) fn evict(&mut self, cx: &mut Ctx<'_>, s: Slot) {
        let m = *self.table.meta(s);
        let size = u64::from(m.size);
        self.coll_leave_fast(s, true);
        // A copy being written back (dirty, or revived after a delete) or completed leaves when
        // that work completes.
        if m.state == DIRTY || m.flags & WRITING_BACK != 0 || m.completing {
            self.table.meta_mut(s).flags |= EVICTING;
            self.evicting_bytes += size;
            if m.state == DIRTY && m.flags & WRITING_BACK == 0 {
                // The cache waits on this one for space: not an idle-time job.
                self.issue_writeback(cx, s, Priority::Normal);
            }
        } else {
            let id = self.table.id(s);
            Self::issue(cx, WorkKind::Invalidate, id, s, size, false);
            self.used -= size;
            self.drop_to_slow_or_forget(s);
        }
    }

    /// Evicts until `size` more bytes fit now. Clean victims go at once; a dirty victim is
    /// written back and dropped when clean, and the search goes on for a clean one (as
    /// Flashcache prefers clean blocks), passing at most `MAX_DIRTY_SKIP` dirty victims. False
    /// when the bytes do not fit now (the caller then goes around the cache).
    pub(super) fn make_room(&mut self, cx: &mut Ctx<'_>, id: ObjectId, size: u64) -> bool {
        const MAX_DIRTY_SKIP: usize = 64;
        let mut dirty_seen = 0;
        while self.used + size > self.capacity {
            let enough_leaving = self.used - self.evicting_bytes + size <= self.capacity;
            if enough_leaving && dirty_seen >= MAX_DIRTY_SKIP {
                break;
            }
            let Some(v) = self.collector.coldest_fast(cx.now) else {
                break;
            };
            let m = self.table.meta(v);
            if m.state == DIRTY || m.flags & WRITING_BACK != 0 || m.completing {
                dirty_seen += 1;
            }
            self.evict(cx, v);
        }
        // A policy list the object enters may be full although the SSD is not (2Q's main queue).
        while let Some(v) = self.collector.overflow_victim(Some((id, size))) {
            self.evict(cx, v);
        }
        self.used + size <= self.capacity
    }

    /// Evicts what the collector's lists hold over their shares after a hit (SLRU's lowest
    /// segment, which a hit's promotion cooled into). Done as the next access starts, so the
    /// object a hit is serving never leaves under it.
    #[inline]
    pub(super) fn evict_overflow(&mut self, cx: &mut Ctx<'_>) {
        while let Some(v) = self.collector.overflow_victim(None) {
            self.evict(cx, v);
        }
    }

    /// The collector's admission of a missed object (a tracked slot's counter, then the miss
    /// itself, which S3-FIFO refuses for objects larger than its small queue).
    pub(super) fn admitted(&mut self, slot: Option<Slot>, id: ObjectId, size: u32) -> bool {
        if slot.is_some_and(|s| !self.collector.admits(s)) {
            return false;
        }
        self.collector.on_miss(id, u64::from(size));
        self.collector.admits_new(id, u64::from(size))
    }

    /// Places a missed object: returns its slot when the fill was issued.
    pub(super) fn fill(&mut self, cx: &mut Ctx<'_>, slot: Option<Slot>, id: ObjectId, size: u32, source_in_ram: bool) {
        if !self.admitted(slot, id, size) || !self.make_room(cx, id, u64::from(size)) {
            return;
        }
        let s = match slot {
            Some(s) => s,
            None => self.table.insert(id, CacheMeta::new(size, NOT_CACHED, 0)),
        };
        let m = self.table.meta_mut(s);
        m.state = FILLING;
        m.size = size;
        self.used += u64::from(size);
        Self::issue(cx, WorkKind::Copy, id, s, u64::from(size), source_in_ram);
    }

    /// Tracks a slow-tier object for collectors that rank those.
    pub(super) fn track_slow(&mut self, id: ObjectId, size: u32, t: &Touch) -> Slot {
        let s = self.table.insert(id, CacheMeta::new(size, NOT_CACHED, IN_COLLECTOR));
        self.collector.insert(s, id, Tier::Slow, u64::from(size), t);
        s
    }
}
