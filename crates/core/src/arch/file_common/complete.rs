//! What the outcome of a piece of work (done, failed, cancelled) does to a file.

use super::*;

impl FileCore {
    /// [`crate::arch::Architecture::complete`].
    pub fn complete(&mut self, cx: &mut Ctx<'_>, w: &Work, outcome: Outcome) {
        let s = Slot(w.tag as u32);
        if w.kind == WorkKind::Invalidate || s.idx() >= self.table.slot_bound() {
            return;
        }
        let held = self.held.remove(&s.0);
        let m = *self.table.meta(s);
        let ok = outcome == Outcome::Done;
        let t = Self::background_touch(cx);
        match w.kind {
            WorkKind::Promote | WorkKind::Copy => {
                let bytes = held.unwrap_or(w.bytes);
                if ok && !m.has(DELETED) {
                    // Front-end contract: writes that arrived during the move are in the final
                    // copy. Account for growth; a file that no longer fits or grew past the sieve
                    // leaves again at once.
                    let clear = if w.kind == WorkKind::Promote { MOVING | ON_SLOW | STALE } else { MOVING | STALE };
                    self.set_flags(s, ON_FAST, clear);
                    if m.has(STALE) {
                        self.counters.stale_moves += 1;
                    }
                    let size = m.size();
                    self.fast_used = self.fast_used - bytes + size;
                    if self.sieved(size) || self.fast_used > self.capacity + self.leaving {
                        self.sync_coll(s, &t);
                        self.send_off_fast(cx, s, &t, false);
                    }
                } else {
                    self.fast_used -= bytes;
                    self.set_flags(s, 0, MOVING | STALE);
                }
            }
            WorkKind::Demote => {
                let bytes = held.unwrap_or(w.bytes);
                if ok || m.has(DELETED) {
                    self.leaving -= bytes;
                    self.fast_used -= bytes;
                    self.set_flags(s, ON_SLOW, ON_FAST | MOVING | LEAVING | STALE);
                } else if m.has(STALE) || m.size() != bytes || self.fast_used > self.capacity + self.leaving - bytes {
                    // Writes already went to the HDD side, or waited for this space: the move
                    // must happen; retry it.
                    self.reissue_leaving(cx, s, w, bytes, bytes);
                    return;
                } else {
                    self.leaving -= bytes;
                    self.set_flags(s, 0, MOVING | LEAVING);
                }
            }
            WorkKind::Writeback => {
                self.writebacks = self.writebacks.saturating_sub(1);
                let redirtied = m.has(REDIRTY);
                if let Some(bytes) = held {
                    // An eviction: drop the SSD copy once it is safe on the HDD.
                    if m.has(DELETED) || (ok && !redirtied) {
                        self.leaving -= bytes;
                        self.fast_used -= bytes;
                        if m.has(DIRTY) {
                            self.dirty_bytes = self.dirty_bytes.saturating_sub(m.size());
                        }
                        self.set_flags(s, ON_SLOW, ON_FAST | DIRTY | MOVING | LEAVING | STALE);
                        if !m.has(DELETED) {
                            cx.issue(Work::new(WorkKind::Invalidate, w.obj, Level::Fast, Level::Fast, bytes));
                        }
                    } else if redirtied
                        || m.has(STALE)
                        || m.size() != bytes
                        || self.fast_used > self.capacity + self.leaving - bytes
                    {
                        // The SSD copy changed meanwhile (its growth is not in `fast_used` while
                        // it is held), or writes wait behind the eviction on the HDD side: write
                        // back again and evict then.
                        self.reissue_leaving(cx, s, w, bytes, m.size());
                        return;
                    } else {
                        self.leaving -= bytes;
                        self.set_flags(s, 0, MOVING | LEAVING);
                    }
                } else if ok && !redirtied && m.has(DIRTY) {
                    self.dirty_bytes = self.dirty_bytes.saturating_sub(m.size());
                    self.set_flags(s, ON_SLOW, DIRTY | MOVING);
                } else {
                    self.set_flags(s, 0, MOVING);
                    if m.has(DIRTY) && !m.has(DELETED) {
                        self.dirty_queue.push_back(w.obj);
                    }
                }
            }
            WorkKind::Invalidate => {}
        }
        self.set_flags(s, 0, REDIRTY);
        if m.has(DELETED) {
            // Accounting was settled at delete time (non-held bytes) and above (held bytes).
            self.table.remove(s);
        } else {
            self.sync_coll(s, &t);
            let m = *self.table.meta(s);
            if m.has(ON_FAST) && !m.has(MOVING) && self.sieved(m.size()) {
                // It grew past the sieve while its work was in flight.
                self.counters.sieved_out += 1;
                self.send_off_fast(cx, s, &t, false);
            }
            if !self.table.meta(s).has(MOVING)
                && let Some(volume) = self.pending_volume.remove(&s.0)
            {
                self.move_to_volume(cx, s, volume);
            }
        }
        self.after_access(cx, &t, None);
    }
}
