//! Partial blocks: a write-back cache that absorbed a write smaller than its block holds some of
//! the block's sectors. A read of such a block takes those from the SSD and the rest from the
//! HDD, and fills the rest into the block's SSD copy, as a miss on the missing sectors would
//! (bcache inserts what it read from the backing device; Open CAS fills a line's invalid
//! sectors). Without that the block stayed partial for as long as it stayed cached: every read
//! of it went to the HDD too, and the larger the SSD, the more blocks stayed so (CloudPhysics
//! with 64 KiB blocks: the SSD's share of reads fell from 49 % to 19 % as the SSD grew from 1 %
//! to 100 % of the footprint).
//!
//! While the fill runs the block stays ranked and usable; evicting it, or dropping it after a
//! delete, waits for the fill as it waits for a write-back.

use super::{Cache, DIRTY, EVICTING, PARTIAL, WRITING_BACK};
use crate::engine::Ctx;
use crate::{Outcome, Slot, Work, WorkKind};

impl Cache {
    /// A read found `s` cached in part: fill its missing sectors from the HDD, unless a fill is
    /// under way already or the block is on its way out.
    pub(super) fn complete_partial(&mut self, cx: &mut Ctx<'_>, s: Slot) {
        let m = *self.table.meta(s);
        if m.completing || m.flags & EVICTING != 0 {
            return;
        }
        self.table.meta_mut(s).completing = true;
        let id = self.table.id(s);
        Self::issue(cx, WorkKind::Copy, id, s, u64::from(m.size), false);
    }

    /// The fill of a partial block's missing sectors is done: the block is whole unless it
    /// failed, and a victim waiting for it goes (unless it still waits for a write-back).
    pub(super) fn partial_completed(&mut self, cx: &mut Ctx<'_>, s: Slot, outcome: Outcome) {
        let meta = self.table.meta_mut(s);
        meta.completing = false;
        if outcome == Outcome::Done {
            meta.flags &= !PARTIAL;
        }
        let m = *meta;
        if m.flags & EVICTING != 0 && m.state != DIRTY && m.flags & WRITING_BACK == 0 {
            let size = u64::from(m.size);
            self.table.meta_mut(s).flags &= !EVICTING;
            self.evicting_bytes -= size;
            let id = self.table.id(s);
            Self::issue(cx, WorkKind::Invalidate, id, s, size, false);
            self.used -= size;
            self.drop_to_slow_or_forget(s);
        }
    }

    /// A deleted, cached object's `work` completed: whether other work on it (its write-back,
    /// or the fill of its missing sectors) is still in flight, which then drops it.
    pub(super) fn completion_left(&mut self, s: Slot, work: &Work) -> bool {
        if work.kind == WorkKind::Copy {
            self.table.meta_mut(s).completing = false;
        }
        let m = self.table.meta(s);
        m.completing || m.flags & WRITING_BACK != 0
    }
}
