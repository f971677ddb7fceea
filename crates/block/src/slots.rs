//! The SSD's slots: which block each holds, which of its sectors are valid, and the rule that
//! makes the table crash-safe: a slot unmapped since the last commit is not reused until a
//! commit has recorded it free (the last checkpoint may still name it, and a crash would then
//! serve another block's bytes), as dm-cache waits for a commit before reusing a demoted block.

use std::sync::atomic::{AtomicU32, Ordering};

use crate::format::{Entry, SECTOR, words_per_slot};
use crate::slot_map::SlotMap;

const NONE: u64 = u64::MAX;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Allocatable.
    Free,
    /// Unmapped since the last commit's snapshot: waits for a commit.
    Quarantined,
    /// Holds its block.
    Mapped,
    /// Mapped by a foreground write whose bytes are still on their way: left out of
    /// checkpoints until they land.
    Pending,
    /// Taken out of use after a read error: never allocated again while the device runs (a
    /// restart tries it again: the error may have been passing).
    Retired,
}

/// The slot table. Lives under the device's core lock; `pins` (one counter per slot, outside
/// the lock) keep a slot that an I/O is reading or writing from being handed to another block.
#[derive(Debug)]
pub(crate) struct Slots {
    owner: Vec<u64>,
    /// The address the architecture gave the copy in each slot (`LOGICAL_ADDR`: none): an
    /// invalidation naming another address is of an older copy (HCA's log).
    addr: Vec<u64>,
    state: Vec<State>,
    valid: Vec<u64>,
    words: usize,
    sectors: u64,
    free: Vec<u32>,
    quarantine: Vec<u32>,
    /// Blocks unmapped (or retired) since the last snapshot: the next checkpoint sends their
    /// reads to the HDD.
    dropped: Vec<u64>,
    map: SlotMap,
}

/// What a commit of a snapshot frees: the slots quarantined before it, and the blocks unmapped
/// before it (their HDD bytes must be durable before the checkpoint is).
#[derive(Debug, Default)]
pub(crate) struct Freed {
    pub(crate) slots: Vec<u32>,
    pub(crate) blocks: Vec<u64>,
}

impl Slots {
    /// A table of `slots` slots of `block_size` bytes for a device of `blocks` blocks.
    pub(crate) fn new(slots: u64, block_size: u64, blocks: u64) -> Slots {
        let n = slots as usize;
        let words = words_per_slot(block_size);
        Slots {
            owner: vec![NONE; n],
            addr: vec![NONE; n],
            state: vec![State::Free; n],
            valid: vec![0; n * words],
            words,
            sectors: block_size / SECTOR,
            // Popped from the end: low slots first.
            free: (0..slots as u32).rev().collect(),
            quarantine: Vec::new(),
            dropped: Vec::new(),
            map: SlotMap::new(blocks, slots),
        }
    }

    /// The slot holding `block`, if any.
    pub(crate) fn slot_of(&self, block: u64) -> Option<u32> {
        self.map.get(block)
    }

    /// Starts loading what [`Slots::slot_of`] reads for `block` into the CPU cache.
    #[inline]
    pub(crate) fn prefetch(&self, block: u64) {
        self.map.prefetch(block);
    }

    /// Starts loading what a route reads and pins for `block`'s slot: its valid bits and its
    /// pin. Only with a dense map, whose entry [`Slots::prefetch`] has started loading; a
    /// hashed lookup here would wait for its own misses and hide nothing.
    #[inline]
    pub(crate) fn prefetch_slot_of(&self, block: u64, pins: &[AtomicU32]) {
        if let Some(slot) = self.map.get_if_dense(block) {
            let s = slot as usize;
            tierwise_core::object_table::prefetch(self.valid.as_ptr().wrapping_add(s * self.words));
            tierwise_core::object_table::prefetch(pins.as_ptr().wrapping_add(s));
        }
    }

    /// How many blocks have a slot.
    pub(crate) fn mapped(&self) -> usize {
        self.map.len()
    }

    /// Blocks with a slot.
    pub(crate) fn mapped_blocks(&self) -> impl Iterator<Item = u64> + '_ {
        self.map.iter().map(|(b, _)| b)
    }

    /// Takes a free slot no I/O holds; `None` when only quarantined or pinned ones remain.
    pub(crate) fn alloc(&mut self, pins: &[AtomicU32]) -> Option<u32> {
        let pos = self.free.iter().rposition(|&s| pins[s as usize].load(Ordering::Acquire) == 0)?;
        let slot = self.free.swap_remove(pos);
        // Taken, not yet holding a block: neither free nor in a checkpoint.
        self.state[slot as usize] = State::Pending;
        Some(slot)
    }

    /// Maps `slot` to `block` with no sector valid yet (`pending`: a foreground write fills it).
    pub(crate) fn map(&mut self, slot: u32, block: u64, pending: bool) {
        let s = slot as usize;
        self.owner[s] = block;
        self.state[s] = if pending { State::Pending } else { State::Mapped };
        self.addr[s] = NONE;
        self.valid[s * self.words..(s + 1) * self.words].fill(0);
        self.map.insert(block, slot);
        crate::trace::note(block, || format!("map slot {slot} pending={pending}"));
    }

    /// A pending slot's bytes have landed.
    pub(crate) fn settle(&mut self, slot: u32, block: u64) {
        let s = slot as usize;
        if self.owner[s] == block && self.state[s] == State::Pending {
            self.state[s] = State::Mapped;
        }
    }

    /// Gives back a slot that was never part of a checkpoint (a copy that failed).
    pub(crate) fn give_back(&mut self, slot: u32) {
        let s = slot as usize;
        crate::trace::note(self.owner[s], || format!("give back slot {slot}"));
        if self.owner[s] != NONE {
            self.map.remove(self.owner[s]);
        }
        self.owner[s] = NONE;
        self.state[s] = State::Free;
        self.free.push(slot);
    }

    /// Records the address the architecture gave the copy in `slot`.
    pub(crate) fn set_addr(&mut self, slot: u32, addr: u64) {
        self.addr[slot as usize] = addr;
    }

    /// Whether an invalidation of `block` at `addr` is of the copy its slot holds (true when
    /// either has no address).
    pub(crate) fn holds_at(&self, block: u64, addr: u64) -> bool {
        self.slot_of(block).is_some_and(|s| {
            let a = self.addr[s as usize];
            a == NONE || addr == NONE || a == addr
        })
    }

    /// Unmaps `block`: its slot waits for the next commit.
    pub(crate) fn unmap(&mut self, block: u64) -> Option<u32> {
        let slot = self.map.remove(block)?;
        crate::trace::note(block, || format!("unmap slot {slot}"));
        let s = slot as usize;
        self.owner[s] = NONE;
        self.state[s] = State::Quarantined;
        self.quarantine.push(slot);
        self.dropped.push(block);
        Some(slot)
    }

    /// Unmaps `block` and takes its slot out of use (it failed a read); returns the slot.
    pub(crate) fn retire(&mut self, block: u64) -> Option<u32> {
        let slot = self.map.remove(block)?;
        crate::trace::note(block, || format!("retire slot {slot}"));
        self.owner[slot as usize] = NONE;
        self.state[slot as usize] = State::Retired;
        self.dropped.push(block);
        Some(slot)
    }

    /// Marks sectors `[first, first + n)` of `slot` valid; true if one was not (the next
    /// checkpoint must record it).
    pub(crate) fn set_valid(&mut self, slot: u32, first: u64, n: u64) -> bool {
        let base = slot as usize * self.words;
        let mut changed = false;
        for sec in first..(first + n).min(self.sectors) {
            let w = &mut self.valid[base + (sec / 64) as usize];
            changed |= *w & (1 << (sec % 64)) == 0;
            *w |= 1 << (sec % 64);
        }
        changed
    }

    /// Whether sector `sec` of `slot` is valid.
    pub(crate) fn is_valid(&self, slot: u32, sec: u64) -> bool {
        self.valid[slot as usize * self.words + (sec / 64) as usize] & (1 << (sec % 64)) != 0
    }

    /// Whether sectors `[first, first + n)` of `slot` are all valid.
    pub(crate) fn all_valid(&self, slot: u32, first: u64, n: u64) -> bool {
        (first..first + n).all(|sec| self.is_valid(slot, sec))
    }

    /// Whether every sector of `slot` is valid.
    pub(crate) fn is_full(&self, slot: u32) -> bool {
        (0..self.sectors).all(|sec| self.is_valid(slot, sec))
    }

    /// Runs of sectors in `[first, first + n)` of `slot`: `(start, len, valid)`.
    pub(crate) fn runs(&self, slot: u32, first: u64, n: u64) -> Vec<(u64, u64, bool)> {
        let mut out: Vec<(u64, u64, bool)> = Vec::new();
        for sec in first..first + n {
            let v = self.is_valid(slot, sec);
            match out.last_mut() {
                Some(last) if last.2 == v => last.1 += 1,
                _ => out.push((sec, 1, v)),
            }
        }
        out
    }

    /// The table as it is, for a checkpoint (pending slots left out), and the slots that a
    /// commit of it frees: those quarantined before this snapshot.
    pub(crate) fn snapshot(&mut self, dirty: impl Fn(u64) -> bool) -> (Vec<Entry>, Freed) {
        let mut entries = Vec::with_capacity(self.map.len());
        for (block, slot) in self.map.iter() {
            let s = slot as usize;
            if self.state[s] != State::Mapped {
                continue;
            }
            let partial = (!self.is_full(slot)).then(|| self.valid[s * self.words..(s + 1) * self.words].to_vec());
            crate::trace::note(block, || format!("snapshot slot {slot} partial={}", partial.is_some()));
            entries.push(Entry { block, slot, dirty: dirty(block), partial });
        }
        entries.sort_by_key(|e| e.slot);
        let freed = Freed { slots: std::mem::take(&mut self.quarantine), blocks: std::mem::take(&mut self.dropped) };
        (entries, freed)
    }

    /// A commit that freed these slots is durable.
    pub(crate) fn release(&mut self, freed: Freed) {
        for slot in freed.slots {
            if self.state[slot as usize] == State::Quarantined {
                self.state[slot as usize] = State::Free;
                self.free.push(slot);
            }
        }
    }

    /// A commit that would have freed these failed: they wait for the next one.
    pub(crate) fn requarantine(&mut self, freed: Freed) {
        self.quarantine.extend(freed.slots);
        self.dropped.extend(freed.blocks);
    }

    /// Rebuilds the table from a checkpoint (recovery).
    pub(crate) fn restore(&mut self, entries: &[Entry]) {
        for e in entries {
            let s = e.slot as usize;
            if let Some(p) = self.free.iter().position(|&f| f == e.slot) {
                self.free.swap_remove(p);
            }
            self.map(e.slot, e.block, false);
            match &e.partial {
                Some(bits) => {
                    for (w, bits) in bits.iter().enumerate().take(self.words) {
                        self.valid[s * self.words + w] = *bits;
                    }
                }
                None => {
                    self.set_valid(e.slot, 0, self.sectors);
                }
            }
        }
    }

    /// Checks that the map and the per-slot owners agree (tests).
    pub(crate) fn check(&self) -> Result<(), String> {
        for (b, s) in self.map.iter() {
            if self.owner[s as usize] != b || !matches!(self.state[s as usize], State::Mapped | State::Pending) {
                return Err(format!("block {b} maps to slot {s} owned by {}", self.owner[s as usize]));
            }
        }
        let owned = self.owner.iter().filter(|&&o| o != NONE).count();
        if owned != self.map.len() {
            return Err(format!("{owned} slots owned, {} mapped", self.map.len()));
        }
        let free = self.state.iter().filter(|&&s| s == State::Free).count();
        if free != self.free.len() {
            return Err(format!("{free} slots free, {} on the free list", self.free.len()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pins(n: usize) -> Vec<AtomicU32> {
        (0..n).map(|_| AtomicU32::new(0)).collect()
    }

    #[test]
    fn an_unmapped_slot_waits_for_a_commit_and_pinned_slots_are_skipped() {
        // A dense slot map (a 16-block device) and a hashed one (device size unknown).
        for blocks in [16, 0] {
            commit_rule_holds(blocks);
        }
    }

    fn commit_rule_holds(blocks: u64) {
        let p = pins(2);
        let mut s = Slots::new(2, 4096, blocks);
        let a = s.alloc(&p).expect("free slot");
        s.map(a, 10, false);
        assert!(s.set_valid(a, 0, 8));
        let b = s.alloc(&p).expect("free slot");
        s.map(b, 11, false);
        assert_eq!(s.alloc(&p), None);
        s.unmap(10);
        assert_eq!(s.alloc(&p), None, "quarantined until a commit");
        let (entries, freed) = s.snapshot(|_| false);
        assert_eq!(entries.len(), 1, "the pending-free slot is not in the checkpoint");
        s.release(freed);
        p[a as usize].store(1, Ordering::Release);
        assert_eq!(s.alloc(&p), None, "an I/O still reads it");
        p[a as usize].store(0, Ordering::Release);
        assert_eq!(s.alloc(&p), Some(a));
        s.check().expect("consistent");
    }

    #[test]
    fn partial_slots_report_their_runs_and_survive_a_checkpoint() {
        let p = pins(1);
        let mut s = Slots::new(1, 4096, 16);
        let a = s.alloc(&p).expect("free slot");
        s.map(a, 3, false);
        assert!(s.set_valid(a, 2, 3));
        assert_eq!(s.runs(a, 0, 8), vec![(0, 2, false), (2, 3, true), (5, 3, false)]);
        let (entries, _) = s.snapshot(|_| true);
        let mut r = Slots::new(1, 4096, 16);
        r.restore(&entries);
        assert_eq!(r.runs(a, 0, 8), s.runs(a, 0, 8));
        assert!(!r.is_full(a));
        assert_eq!(r.alloc(&p), None);
    }
}
