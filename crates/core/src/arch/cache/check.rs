//! The cache's own consistency check: the per-object states recounted against the counters,
//! the dirty list and the collector.

use super::{CLEAN, COLL_FAST, Cache, DELETED, DIRTY, EVICTING, FILLING, IN_COLLECTOR, Mode, WRITING_BACK};
use crate::Tier;
use crate::collector::Collector;

impl Cache {
    /// Recounts the per-object state and compares it with the counters and lists.
    pub(super) fn check_bookkeeping(&self) -> Result<(), String> {
        let (mut used, mut dirty, mut evicting, mut wb, mut wb_n, mut coll_fast, mut coll_slow) = (0, 0, 0, 0, 0, 0, 0);
        for s in self.table.slots() {
            let m = self.table.meta(s);
            let size = u64::from(m.size);
            if m.flags & DELETED != 0 {
                used += size;
                if m.flags & WRITING_BACK != 0 {
                    wb += size;
                    wb_n += 1;
                }
                if m.flags & (IN_COLLECTOR | EVICTING) != 0 || m.state == DIRTY {
                    return Err(format!("deleted {s:?} still ranked, evicting or dirty"));
                }
                if m.state != FILLING && m.flags & WRITING_BACK == 0 && !m.completing {
                    return Err(format!("deleted {s:?} has no work in flight"));
                }
                continue;
            }
            if matches!(m.state, FILLING | CLEAN | DIRTY) {
                used += size;
            }
            if m.state == DIRTY {
                dirty += size;
                if self.mode != Mode::WriteBack {
                    return Err(format!("dirty object {:?} in {:?} mode", self.table.id(s), self.mode));
                }
            }
            if m.flags & EVICTING != 0 {
                evicting += size;
                if m.state != DIRTY && m.flags & WRITING_BACK == 0 && !m.completing {
                    return Err(format!(
                        "evicting object {:?} is neither dirty, nor being written back or completed",
                        self.table.id(s)
                    ));
                }
            }
            if m.flags & WRITING_BACK != 0 {
                wb += size;
                wb_n += 1;
            }
            if m.completing && !m.cached() {
                return Err(format!("object {:?} is being completed but not cached", self.table.id(s)));
            }
            if m.flags & IN_COLLECTOR != 0 {
                if m.flags & COLL_FAST != 0 {
                    coll_fast += 1;
                } else {
                    coll_slow += 1;
                }
            }
            let should_rank_fast = m.cached() && m.flags & (EVICTING | DELETED) == 0;
            if should_rank_fast != (m.flags & COLL_FAST != 0) {
                return Err(format!(
                    "object {:?} state {} flags {:#x}: collector disagrees",
                    self.table.id(s),
                    m.state,
                    m.flags
                ));
            }
        }
        if used != self.used {
            return Err(format!("used {} but objects sum to {used}", self.used));
        }
        if self.used > self.capacity {
            return Err(format!("used {} exceeds capacity {}", self.used, self.capacity));
        }
        if dirty != self.dirty_bytes || evicting != self.evicting_bytes || wb != self.writing_back_bytes {
            return Err(format!(
                "counters dirty {} evicting {} writing-back {} but objects sum to {dirty} {evicting} {wb}",
                self.dirty_bytes, self.evicting_bytes, self.writing_back_bytes
            ));
        }
        if wb_n != self.writebacks_in_flight {
            return Err("write-back count mismatch".into());
        }
        let listed = self.dirty_order.iter(&self.dirty_links).count();
        let expected = self
            .table
            .slots()
            .filter(|&s| {
                let m = self.table.meta(s);
                m.state == DIRTY && m.flags & WRITING_BACK == 0
            })
            .count();
        if listed != expected {
            return Err(format!("dirty list holds {listed}, expected {expected}"));
        }
        if let Some(set) = &self.dirty_by_lba
            && set.len() != expected
        {
            return Err(format!("LBA-ordered dirty set holds {}, expected {expected}", set.len()));
        }
        if coll_fast != self.collector.len(Tier::Fast) {
            return Err(format!(
                "collector ranks {} on the SSD, table says {coll_fast}",
                self.collector.len(Tier::Fast)
            ));
        }
        if self.tracks_slow && coll_slow != self.collector.len(Tier::Slow) {
            return Err(format!(
                "collector ranks {} on the HDD, table says {coll_slow}",
                self.collector.len(Tier::Slow)
            ));
        }
        Ok(())
    }
}
