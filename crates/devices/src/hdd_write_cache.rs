//! The data an HDD's volatile write cache holds (write cache on, as SATA drives ship and Linux
//! leaves them): byte ranges not yet on the platters, merged where they touch or overlap, so a
//! stream of small writes is written back as one transfer. The drive writes them back in
//! ascending address order from where its head is, wrapping at the end (C-SCAN, a drive's
//! elevator). Timing lives in `hdd.rs`; this is only the set.

use std::collections::BTreeMap;

/// Cached ranges: start -> end, disjoint and not touching.
#[derive(Clone, Debug)]
pub(crate) struct WriteCache {
    capacity: u64,
    runs: BTreeMap<u64, u64>,
    bytes: u64,
}

impl WriteCache {
    /// An empty cache of `capacity` bytes.
    pub(crate) fn new(capacity: u64) -> WriteCache {
        WriteCache { capacity, runs: BTreeMap::new(), bytes: 0 }
    }

    /// Bytes the cache can hold.
    pub(crate) fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Bytes waiting to be written to the platters.
    #[cfg(test)]
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Whether nothing waits.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    /// The runs overlapping `[start, end)`, or touching it when `touching`, last first.
    fn near(&self, start: u64, end: u64, touching: bool) -> impl Iterator<Item = (u64, u64)> + '_ {
        let upper = if touching { end } else { end.saturating_sub(1) };
        self.runs
            .range(..=upper)
            .rev()
            .take_while(move |&(_, &e)| if touching { e >= start } else { e > start })
            .map(|(&s, &e)| (s, e))
    }

    /// Whether `[addr, addr + len)` can be taken without writing anything back first.
    pub(crate) fn fits(&self, addr: u64, len: u64) -> bool {
        let end = addr.saturating_add(len);
        let cached: u64 = self.near(addr, end, false).map(|(s, e)| e.min(end) - s.max(addr)).sum();
        self.bytes + (len - cached) <= self.capacity
    }

    /// Whether all of `[addr, addr + len)` is cached.
    pub(crate) fn covers(&self, addr: u64, len: u64) -> bool {
        self.runs.range(..=addr).next_back().is_some_and(|(_, &e)| e >= addr.saturating_add(len))
    }

    /// Takes `[addr, addr + len)` (the caller checked [`WriteCache::fits`]).
    pub(crate) fn insert(&mut self, addr: u64, len: u64) {
        let (mut start, mut end) = (addr, addr.saturating_add(len));
        let merged: Vec<(u64, u64)> = self.near(start, end, true).collect();
        for (s, e) in merged {
            self.runs.remove(&s);
            self.bytes -= e - s;
            start = start.min(s);
            end = end.max(e);
        }
        self.runs.insert(start, end);
        self.bytes += end - start;
    }

    /// Forgets the cached parts of `[addr, addr + len)` (a write that went to the platters
    /// directly superseded them).
    pub(crate) fn remove(&mut self, addr: u64, len: u64) {
        let end = addr.saturating_add(len);
        let hit: Vec<(u64, u64)> = self.near(addr, end, false).collect();
        for (s, e) in hit {
            self.runs.remove(&s);
            self.bytes -= e - s;
            if s < addr {
                self.runs.insert(s, addr);
                self.bytes += addr - s;
            }
            if e > end {
                self.runs.insert(end, e);
                self.bytes += e - end;
            }
        }
    }

    /// The starts of the next `n` runs to write back with the head at `head`: ascending from
    /// it, then from the lowest (the sweep wraps).
    pub(crate) fn next_runs(&self, head: u64, n: usize) -> impl Iterator<Item = u64> + '_ {
        self.runs.range(head..).chain(self.runs.range(..head)).take(n).map(|(&s, _)| s)
    }

    /// Removes and returns at most `max_len` bytes from the start of the run at `start`.
    pub(crate) fn take(&mut self, start: u64, max_len: u64) -> Option<(u64, u64)> {
        let e = self.runs.remove(&start)?;
        let len = (e - start).min(max_len.max(1));
        if start + len < e {
            self.runs.insert(start + len, e);
        }
        self.bytes -= len;
        Some((start, len))
    }

    /// Removes and returns the next piece to write back with the head at `head`, at most
    /// `max_len` bytes (the first of [`WriteCache::next_runs`]).
    #[cfg(test)]
    pub(crate) fn next_to_write(&mut self, head: u64, max_len: u64) -> Option<(u64, u64)> {
        let s = self.next_runs(head, 1).next()?;
        self.take(s, max_len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn touching_writes_merge_and_overwrites_take_no_room() {
        let mut c = WriteCache::new(16 << 10);
        c.insert(0, 4096);
        c.insert(4096, 4096);
        c.insert(2048, 4096);
        assert_eq!((c.bytes(), c.runs.len()), (8192, 1));
        assert!(c.covers(1000, 7000) && !c.covers(1000, 8000));
        // Room: 8 KiB more fits, 8 KiB + 1 byte does not; a rewrite of cached bytes always fits.
        assert!(c.fits(1 << 20, 8192) && !c.fits(1 << 20, 8193) && c.fits(0, 8192));
        assert!(c.fits(4096, 12288) && !c.fits(4096, 12289));
    }

    #[test]
    fn write_back_sweeps_upward_from_the_head_and_wraps() {
        let mut c = WriteCache::new(1 << 20);
        for a in [40_960, 8192, 81_920] {
            c.insert(a, 4096);
        }
        let order: Vec<u64> = std::iter::from_fn(|| c.next_to_write(10_000, 1 << 20).map(|r| r.0)).collect();
        assert_eq!(order, [40_960, 81_920, 8192]);
        assert_eq!(c.bytes(), 0);
        assert!(c.is_empty());
    }

    #[test]
    fn removing_a_range_splits_the_runs_it_cuts() {
        let mut c = WriteCache::new(1 << 20);
        c.insert(0, 40_960);
        c.remove(4096, 8192);
        assert_eq!(c.runs.iter().map(|(&s, &e)| (s, e)).collect::<Vec<_>>(), [(0, 4096), (12_288, 40_960)]);
        assert_eq!(c.bytes(), 4096 + 28_672);
        c.remove(0, 1 << 20);
        assert!(c.is_empty() && c.bytes() == 0);
        assert!(c.next_to_write(0, 1 << 20).is_none());
        // A long run goes in pieces.
        c.insert(0, 40_960);
        assert_eq!(
            (c.next_to_write(0, 16_384), c.next_to_write(0, 16_384)),
            (Some((0, 16_384)), Some((16_384, 16_384)))
        );
        assert_eq!(c.bytes(), 8192);
        assert!(c.capacity() == 1 << 20 && c.fits(0, 1));
    }
}
