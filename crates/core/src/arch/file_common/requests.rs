//! The requests a file-level architecture serves: read, write (to the SSD, the HDD or a copy),
//! create, delete, truncate and open. The machinery they share is in the parent module.

use super::*;

impl FileCore {
    pub(super) fn read(&mut self, cx: &mut Ctx<'_>, req: &Request) -> Served {
        let t = Self::touch_of(cx, req);
        let s = self.lookup_or_adopt(cx, req, req.offset.saturating_add(req.len));
        let m = *self.table.meta(s);
        if m.has(IN_COLL) && !cx.repeat {
            self.collector.touch(s, &t);
        }
        if m.has(ON_FAST) {
            if m.has(LEAVING) && m.has(STALE) {
                return Served::by(Level::Slow).after_work();
            }
            return Served::by(Level::Fast);
        }
        let mode = self.mode_of(m.volume());
        if mode.promote == Promote::OnHddRead {
            self.promote(cx, s, false, &t);
        }
        Served::by(Level::Slow)
    }

    pub(super) fn write(&mut self, cx: &mut Ctx<'_>, req: &Request) -> Served {
        let t = Self::touch_of(cx, req);
        let end = req.offset.saturating_add(req.len);
        let s = self.lookup_or_adopt(cx, req, 0);
        let m = *self.table.meta(s);
        if m.has(IN_COLL) && !cx.repeat {
            self.collector.touch(s, &t);
        }
        let new_size = m.size().max(end);
        let mode = self.mode_of(m.volume());
        let whole = req.offset == 0 && req.len >= m.size();
        let served = if m.has(ON_FAST) {
            self.write_cached(cx, s, m, mode, new_size, &t)
        } else {
            if m.has(MOVING) {
                self.set_flags(s, STALE, 0);
            }
            self.resize(s, new_size);
            let allocate = !m.has(MOVING)
                && whole
                && mode.whole_file_writes_allocate
                && !self.sieved(new_size)
                && (!m.has(IN_COLL) || self.collector.admits(s));
            if allocate && self.clean(cx, new_size, self.capacity, Some(s), &t).0 {
                // A whole-file write makes a complete copy: no fill needed.
                self.fast_used += new_size;
                if mode.dirties() {
                    self.set_flags(s, ON_FAST | DIRTY, ON_SLOW);
                    self.add_dirty(s, new_size as i64);
                    Served::by(Level::Fast)
                } else {
                    self.set_flags(s, ON_FAST, 0);
                    Served::written_to(Levels::one(Level::Fast).with(Level::Slow))
                }
            } else {
                Served::by(Level::Slow)
            }
        };
        self.sync_coll(s, &t);
        served
    }

    /// A write to a file with an SSD copy; `m` is its state before the write.
    pub(super) fn write_cached(
        &mut self,
        cx: &mut Ctx<'_>,
        s: Slot,
        m: FileMeta,
        mode: &FilePolicy,
        new_size: u64,
        t: &Touch,
    ) -> Served {
        let delta = new_size - m.size();
        // A dirty SSD copy is authoritative whatever the volume's policy (a rename may have moved
        // it under one that keeps no dirty data; it is written back before it converts).
        let dirty_copy = m.has(DIRTY);
        if m.has(LEAVING) && dirty_copy && m.has(REDIRTY) {
            // The SSD copy changed after the eviction's write-back started, so that write-back
            // will be issued again with the whole copy: this write joins the copy (a write sent
            // to the HDD now would be overwritten by it).
            let held = self.held.get(&s.0).copied().unwrap_or(0);
            self.held.insert(s.0, held + delta);
            self.leaving += delta;
            self.fast_used += delta;
            self.resize(s, new_size);
            return Served::by(Level::Fast);
        }
        // A dirty copy being written back for eviction may take the write and stay, but only
        // while the eviction holds the whole file and no write waits for it on the HDD side.
        let keep = dirty_copy && !m.has(STALE) && self.held.get(&s.0) == Some(&m.size());
        if m.has(LEAVING) && !keep {
            // On its way to the HDD: the write lands there after the move.
            self.set_flags(s, STALE, 0);
            self.resize(s, new_size);
            return Served::by(Level::Slow).after_work();
        }
        if m.has(LEAVING) {
            let held = self.held.remove(&s.0).unwrap_or(0);
            self.leaving -= held;
            self.set_flags(s, 0, LEAVING);
        }
        if m.has(MOVING) {
            self.set_flags(s, REDIRTY, 0);
        }
        let clean_copy = mode.copies() && !m.has(DIRTY);
        if mode.writes == Writes::DropCopy && clean_copy && !m.has(MOVING) {
            self.send_off_fast(cx, s, t, false);
            self.resize(s, new_size);
            return Served::by(Level::Slow);
        }
        if self.sieved(new_size) && !m.has(MOVING) {
            self.counters.sieved_out += 1;
            let served = self.leave_fast(cx, s, t);
            self.resize(s, new_size);
            return served;
        }
        let Some(blocked) = self.grow_on_fast(cx, s, delta, t) else {
            if m.has(MOVING) && !m.has(REDIRTY) {
                // A write-back in flight holds everything the SSD copy has: make it an eviction
                // and let this write land on the HDD after it.
                self.held.insert(s.0, m.size());
                self.leaving += m.size();
                self.set_flags(s, LEAVING | STALE, REDIRTY);
                self.resize(s, new_size);
                return Served::by(Level::Slow).after_work();
            }
            if m.has(MOVING) {
                // The SSD copy is newer than the write-back in flight and nothing else can make
                // room: the write lands on the SSD over capacity (counted) and the next access or
                // completion evicts down again.
                self.fast_used += delta;
                self.overcommit += delta;
                self.counters.overcommitted_writes += 1;
                self.resize(s, new_size);
                return Served::by(Level::Fast);
            }
            let served = self.leave_fast(cx, s, t);
            self.resize(s, new_size);
            return served;
        };
        self.resize(s, new_size);
        let served = if mode.dirties() {
            if !m.has(DIRTY) {
                self.set_flags(s, DIRTY, 0);
                self.add_dirty(s, new_size as i64);
            }
            Served::by(Level::Fast)
        } else if mode.copies() {
            Served::written_to(Levels::one(Level::Fast).with(Level::Slow))
        } else {
            Served::by(Level::Fast)
        };
        if blocked { served.after_work() } else { served }
    }

    pub(super) fn create(&mut self, cx: &mut Ctx<'_>, req: &Request) -> Served {
        if self.table.get(req.obj).is_some() {
            self.delete(cx, req.obj);
        }
        let t = Self::touch_of(cx, req);
        let mode = self.mode_of(req.class.volume);
        let mut flags = if req.class.kind == ObjectKind::Meta { META } else { 0 };
        let on_fast = mode.allocates_on_ssd() && !self.sieved(req.len) && self.fast_used + req.len <= self.capacity;
        if on_fast {
            self.fast_used += req.len;
            flags |= if mode.dirties() { ON_FAST | DIRTY } else { ON_FAST };
        } else {
            flags |= ON_SLOW;
        }
        let s = self.table.insert(req.obj, FileMeta::new(req.len, flags, req.class.volume));
        if flags & DIRTY != 0 {
            self.add_dirty(s, req.len as i64);
        }
        self.sync_coll(s, &t);
        Served::metadata()
    }

    pub(super) fn delete(&mut self, _cx: &mut Ctx<'_>, obj: ObjectId) -> Served {
        let Some(s) = self.table.get(obj) else { return Served::metadata() };
        self.pending_volume.remove(&s.0);
        let m = *self.table.meta(s);
        if m.has(DIRTY) {
            self.dirty_bytes = self.dirty_bytes.saturating_sub(m.size());
        }
        if m.has(MOVING) {
            // The work in flight still holds its bytes; they are released on completion.
            if m.has(ON_FAST) && !self.held.contains_key(&s.0) {
                self.fast_used -= m.size();
            }
            self.set_flags(s, DELETED, DIRTY);
            self.sync_coll(s, &Touch::at(0));
            // Free the id for a file created under it before the work completes.
            self.ghosts += 1;
            self.table.rekey(s, ObjectId(u64::MAX - self.ghosts));
        } else {
            if m.has(ON_FAST) {
                self.fast_used -= m.size();
            }
            self.set_flags(s, DELETED, 0);
            self.sync_coll(s, &Touch::at(0));
            self.table.remove(s);
        }
        Served::metadata()
    }

    pub(super) fn truncate(&mut self, cx: &mut Ctx<'_>, req: &Request) -> Served {
        let t = Self::touch_of(cx, req);
        let s = self.lookup_or_adopt(cx, req, req.offset);
        let m = *self.table.meta(s);
        let new_size = req.offset;
        if new_size > m.size() && m.has(ON_FAST) {
            // Growing is a write of zeroes.
            let grow = Request { op: Op::Write, offset: m.size(), len: new_size - m.size(), ..*req };
            let served = self.write(cx, &grow);
            return if served.blocked { Served::metadata().after_work() } else { Served::metadata() };
        }
        if m.has(MOVING) {
            self.set_flags(s, STALE | REDIRTY, 0);
        }
        if m.has(ON_FAST) && !self.held.contains_key(&s.0) {
            self.fast_used -= m.size() - new_size;
        }
        self.resize(s, new_size);
        self.sync_coll(s, &t);
        Served::metadata()
    }

    pub(super) fn open(&mut self, cx: &mut Ctx<'_>, req: &Request) -> Served {
        let Some(s) = self.table.get(req.obj) else { return Served::metadata() };
        let mode = self.mode(s);
        if mode.promote == Promote::OnOpen {
            let t = Self::touch_of(cx, req);
            if self.table.meta(s).has(IN_COLL) && !cx.repeat {
                self.collector.touch(s, &t);
            }
            self.promote(cx, s, true, &t);
        }
        Served::metadata()
    }
}
