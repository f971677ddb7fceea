//! Pieces GreenDM's tiering and caching modes share: the bitmap of used SSD extents (handed out
//! from low addresses) and the periodic metadata flush.

use crate::engine::Ctx;
use crate::{Level, Nanos, ObjectId, Work, WorkKind};

/// An SSD extent owned by no virtual extent.
pub(super) const FREE: u64 = u64::MAX;

/// Tag of the metadata-flush work item.
pub(super) const TAG_META: u64 = u64::MAX;

/// Used SSD extents, lowest free first.
#[derive(Clone, Debug)]
pub(super) struct SsdBitmap {
    words: Vec<u64>,
    free: u32,
    /// Lowest word that may have a free bit.
    hint: usize,
}

impl SsdBitmap {
    /// `n` extents, all in use (GreenDM tiering's scanned start) or all free. Bits past the last
    /// extent are set and never cleared, so they are never handed out.
    pub(super) fn new(n: u32, all_used: bool) -> SsdBitmap {
        let len = (n as usize).div_ceil(64);
        let mut words = vec![if all_used { u64::MAX } else { 0 }; len];
        if !all_used && !n.is_multiple_of(64) {
            words[len - 1] = !((1u64 << (n % 64)) - 1);
        }
        SsdBitmap { words, free: if all_used { 0 } else { n }, hint: 0 }
    }

    /// The lowest free extent, now marked used.
    pub(super) fn alloc(&mut self) -> Option<u32> {
        if self.free == 0 {
            return None;
        }
        for w in self.hint..self.words.len() {
            let word = self.words[w];
            if word != u64::MAX {
                let b = (!word).trailing_zeros();
                self.words[w] |= 1 << b;
                self.hint = w;
                self.free -= 1;
                return Some((w * 64) as u32 + b);
            }
        }
        None
    }

    /// Marks `le` free.
    pub(super) fn release(&mut self, le: u32) {
        let (w, b) = ((le / 64) as usize, le % 64);
        self.words[w] &= !(1 << b);
        self.free += 1;
        self.hint = self.hint.min(w);
    }

    pub(super) fn is_used(&self, le: u32) -> bool {
        self.words[(le / 64) as usize] & (1 << (le % 64)) != 0
    }

    /// Checks the bitmap against the reverse map (`owner[le]`, [`FREE`] when free) and the
    /// free count; returns the owned extents as (SSD extent, virtual extent).
    pub(super) fn check<'a>(&self, owner: &'a [u64]) -> Result<impl Iterator<Item = (u32, u64)> + 'a, String> {
        let mut used = 0u32;
        for (le, &v) in owner.iter().enumerate() {
            let bit = self.is_used(le as u32);
            if bit != (v != FREE) {
                return Err(format!("SSD extent {le}: bitmap {bit} but owner {v:#x}"));
            }
            used += u32::from(bit);
        }
        if owner.len() as u32 - used != self.free {
            return Err(format!("free SSD extents {} but the bitmap has {}", self.free, owner.len() as u32 - used));
        }
        Ok(owner.iter().enumerate().filter(|(_, v)| **v != FREE).map(|(le, &v)| (le as u32, v)))
    }

    /// Free extents.
    pub(super) fn free(&self) -> u32 {
        self.free
    }

    pub(super) fn memory_bytes(&self) -> usize {
        self.words.capacity() * 8
    }
}

/// Writes the mapping table to the SSD every `every` (0 = never); migrations are refused for
/// `time` after each flush starts.
#[derive(Clone, Debug)]
pub(super) struct MetaFlush {
    every: Nanos,
    time: Nanos,
    next: Nanos,
    until: Nanos,
    /// Flushes so far.
    pub(super) count: u64,
}

impl MetaFlush {
    pub(super) fn new(every: Nanos, time: Nanos) -> MetaFlush {
        MetaFlush { every, time, next: every, until: Nanos::ZERO, count: 0 }
    }

    /// A flush is in progress at `now`.
    pub(super) fn flushing(&self, now: Nanos) -> bool {
        now < self.until
    }

    /// Starts a flush of `table_bytes` when one is due.
    pub(super) fn tick(&mut self, cx: &mut Ctx<'_>, table_bytes: u64) {
        if self.every == Nanos::ZERO || cx.now < self.next {
            return;
        }
        self.count += 1;
        self.until = cx.now.saturating_add(self.time);
        while self.next <= cx.now {
            self.next = self.next.saturating_add(self.every);
        }
        let bytes = table_bytes.max(4096);
        cx.issue(
            Work::new(WorkKind::Copy, ObjectId(u64::MAX), Level::Ram, Level::Fast, bytes).with_tag(TAG_META).at(0, 0),
        );
    }

    pub(super) fn next_tick(&self) -> Option<Nanos> {
        (self.every != Nanos::ZERO).then_some(self.next)
    }
}
