//! A circular log of fixed-size slots on the SSD, shared by the architectures whose SSD level
//! is fed from RAM (HCA's L2, ZFS's L2ARC). Not an architecture itself.
//!
//! Pages are written at the hand, which moves forward and wraps; a slot reached by the hand is
//! overwritten, evicting the page it held (so eviction is FIFO by write time, as in ZFS's
//! L2ARC, and every feed is one sequential SSD write). A page that leaves early (moved up,
//! invalidated) leaves a hole that is reused when the hand comes round. A slot whose write is
//! still in flight stops the hand.

/// "No page".
pub(super) const NO_PAGE: u32 = u32::MAX;

const EMPTY: u8 = 0;
const WRITING: u8 = 1;
/// Written while in flight: becomes empty when the write completes.
const WRITING_STALE: u8 = 2;
const VALID: u8 = 3;

#[derive(Clone, Copy, Debug)]
struct LogSlot {
    page: u32,
    state: u8,
}

/// What became of a slot's write when it completed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Landed {
    /// The slot now holds `page`.
    Valid(u32),
    /// The page was invalidated meanwhile; the slot is empty again.
    Stale(u32),
    /// The write failed; the slot is empty again.
    Failed(u32),
}

/// The log.
#[derive(Debug)]
pub(super) struct SsdLog {
    slots: Vec<LogSlot>,
    hand: u32,
    /// Slots not empty.
    occupied: u32,
    /// Writes in flight.
    writing: u32,
    /// Times the hand wrapped (0 while the log is filling for the first time).
    laps: u64,
}

impl SsdLog {
    /// A log of `slots` empty slots.
    pub(super) fn new(slots: u32) -> SsdLog {
        SsdLog {
            slots: vec![LogSlot { page: NO_PAGE, state: EMPTY }; slots as usize],
            hand: 0,
            occupied: 0,
            writing: 0,
            laps: 0,
        }
    }

    /// Number of slots.
    pub(super) fn len(&self) -> u32 {
        self.slots.len() as u32
    }

    /// Slots holding or receiving a page (the committed SSD space).
    pub(super) fn occupied(&self) -> u32 {
        self.occupied
    }

    /// Whether the hand has wrapped at least once (the log has been full).
    pub(super) fn warm(&self) -> bool {
        self.laps > 0
    }

    /// Takes the slot at the hand for a write of `page`: returns the slot and the page it
    /// evicts, if any; `None` when the slot at the hand is still being written (the caller
    /// stops feeding).
    pub(super) fn take(&mut self, page: u32) -> Option<(u32, Option<u32>)> {
        if self.slots.is_empty() {
            return None;
        }
        let pos = self.hand;
        let s = self.slots[pos as usize];
        let evicted = match s.state {
            WRITING | WRITING_STALE => return None,
            VALID => Some(s.page),
            _ => {
                self.occupied += 1;
                None
            }
        };
        self.slots[pos as usize] = LogSlot { page, state: WRITING };
        self.writing += 1;
        self.hand += 1;
        if self.hand == self.len() {
            self.hand = 0;
            self.laps += 1;
        }
        Some((pos, evicted))
    }

    /// The write to `pos` completed (`ok`) or failed.
    pub(super) fn landed(&mut self, pos: u32, ok: bool) -> Landed {
        let s = self.slots[pos as usize];
        debug_assert!(s.state == WRITING || s.state == WRITING_STALE);
        self.writing -= 1;
        if ok && s.state == WRITING {
            self.slots[pos as usize].state = VALID;
            return Landed::Valid(s.page);
        }
        self.slots[pos as usize] = LogSlot { page: NO_PAGE, state: EMPTY };
        self.occupied -= 1;
        if s.state == WRITING_STALE { Landed::Stale(s.page) } else { Landed::Failed(s.page) }
    }

    /// The page in `pos` is no longer wanted: a valid slot empties now (true), one being
    /// written empties when its write completes (false).
    pub(super) fn invalidate(&mut self, pos: u32) -> bool {
        let s = &mut self.slots[pos as usize];
        match s.state {
            VALID => {
                *s = LogSlot { page: NO_PAGE, state: EMPTY };
                self.occupied -= 1;
                true
            }
            WRITING => {
                s.state = WRITING_STALE;
                false
            }
            _ => false,
        }
    }

    /// Whether `pos` holds a valid copy of `page`.
    pub(super) fn holds(&self, pos: u32, page: u32) -> bool {
        let s = self.slots[pos as usize];
        s.state == VALID && s.page == page
    }

    /// Whether `pos` is being written with `page` (stale or not).
    pub(super) fn writing_page(&self, pos: u32, page: u32) -> bool {
        let s = self.slots[pos as usize];
        (s.state == WRITING || s.state == WRITING_STALE) && s.page == page
    }

    /// Pages in valid slots, with their slots (invariant checks).
    pub(super) fn valid(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        self.slots.iter().enumerate().filter(|(_, s)| s.state == VALID).map(|(i, s)| (i as u32, s.page))
    }

    /// Pages being written (stale or not), with their slots (invariant checks).
    pub(super) fn in_flight(&self) -> impl Iterator<Item = (u32, u32, bool)> + '_ {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.state == WRITING || s.state == WRITING_STALE)
            .map(|(i, s)| (i as u32, s.page, s.state == WRITING_STALE))
    }

    /// Verifies the counters.
    /// Space and object counts of a read cache whose L2 is this log of `page`-byte pages and
    /// which tracks `objects` pages in all.
    pub(super) fn usage(&self, page: u64, objects: usize) -> super::Usage {
        super::Usage {
            fast_capacity: u64::from(self.len()) * page,
            fast_used: u64::from(self.occupied()) * page,
            dirty_bytes: 0,
            objects,
            fast_objects: self.valid().count(),
            in_flight: 0,
        }
    }

    pub(super) fn check(&self) -> Result<(), String> {
        let occupied = self.slots.iter().filter(|s| s.state != EMPTY).count() as u32;
        let writing = self.slots.iter().filter(|s| s.state == WRITING || s.state == WRITING_STALE).count() as u32;
        if occupied != self.occupied || writing != self.writing {
            return Err(format!(
                "SSD log: {occupied} occupied / {writing} writing found, {} / {} counted",
                self.occupied, self.writing
            ));
        }
        Ok(())
    }

    /// Heap bytes held.
    pub(super) fn memory_bytes(&self) -> usize {
        self.slots.capacity() * std::mem::size_of::<LogSlot>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hand_evicts_in_write_order_and_stops_at_writes_in_flight() {
        let mut log = SsdLog::new(3);
        assert_eq!(log.take(10), Some((0, None)));
        assert_eq!(log.take(11), Some((1, None)));
        assert_eq!(log.landed(0, true), Landed::Valid(10));
        assert_eq!(log.landed(1, true), Landed::Valid(11));
        assert!(log.invalidate(1), "a valid slot empties at once");
        assert!(!log.warm());
        assert_eq!(log.take(12), Some((2, None)));
        assert!(log.warm(), "the hand wrapped");
        assert_eq!(log.take(13), Some((0, Some(10))), "the oldest goes first");
        assert_eq!(log.take(14), Some((1, None)), "the hole is reused");
        assert_eq!(log.take(15), None, "slot 2 is still being written");
        assert!(!log.invalidate(2), "in flight: empties on completion");
        assert_eq!(log.landed(2, true), Landed::Stale(12));
        assert_eq!(log.landed(0, false), Landed::Failed(13));
        assert_eq!(log.occupied(), 1);
        log.check().unwrap();
    }
}
