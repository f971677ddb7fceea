//! OTF-AST's temporary buffer: while a sub-LUN is being migrated, writes to it land in a RAM
//! buffer instead of either device, and a bitmap with one bit per 512-byte sector marks which
//! sectors the buffer holds. Reads of fully buffered ranges are served from it; when the move
//! ends the buffered sectors are merged into the sub-LUN's new home.
//!
//! The engine holds no data, only which sectors are buffered; the front end keeps the bytes.
//! Block I/O is sector-aligned; an unaligned range is rounded out to whole sectors (the front
//! end completes a partial sector from the source before buffering it).

/// Sector size of the bitmap.
pub const SECTOR: u64 = 512;

/// How much of a range the buffer holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Coverage {
    /// No sector of the range.
    None,
    /// Some sectors.
    Partial,
    /// Every sector.
    Full,
}

/// The buffer's bookkeeping for one sub-LUN.
#[derive(Clone, Debug, Default)]
pub struct TempBuffer {
    bits: Vec<u64>,
    valid: u64,
    sectors: u64,
}

impl TempBuffer {
    /// A buffer for an object of `bytes` bytes.
    pub fn new(bytes: u64) -> TempBuffer {
        let sectors = bytes.div_ceil(SECTOR);
        TempBuffer { bits: vec![0; sectors.div_ceil(64) as usize], valid: 0, sectors }
    }

    fn range(&self, offset: u64, len: u64) -> (u64, u64) {
        let first = offset / SECTOR;
        let end = offset.saturating_add(len).div_ceil(SECTOR).min(self.sectors);
        (first.min(end), end)
    }

    /// Marks the sectors of a write as buffered; returns how many were newly marked.
    pub fn write(&mut self, offset: u64, len: u64) -> u64 {
        let (first, end) = self.range(offset, len);
        let mut added = 0;
        for s in first..end {
            let (w, b) = ((s / 64) as usize, s % 64);
            if self.bits[w] & (1 << b) == 0 {
                self.bits[w] |= 1 << b;
                added += 1;
            }
        }
        self.valid += added;
        added
    }

    /// How much of `[offset, offset + len)` is buffered.
    pub fn coverage(&self, offset: u64, len: u64) -> Coverage {
        let (first, end) = self.range(offset, len);
        if first >= end {
            return Coverage::None;
        }
        let held = (first..end).filter(|&s| self.bits[(s / 64) as usize] & (1 << (s % 64)) != 0).count() as u64;
        match held {
            0 => Coverage::None,
            h if h == end - first => Coverage::Full,
            _ => Coverage::Partial,
        }
    }

    /// Whether sector `s` is buffered.
    pub fn holds(&self, s: u64) -> bool {
        s < self.sectors && self.bits[(s / 64) as usize] & (1 << (s % 64)) != 0
    }

    /// Buffered bytes (what a merge writes).
    pub fn valid_bytes(&self) -> u64 {
        self.valid * SECTOR
    }

    /// Forgets everything (after a merge).
    pub fn clear(&mut self) {
        self.bits.iter_mut().for_each(|w| *w = 0);
        self.valid = 0;
    }

    /// Heap bytes held.
    pub fn memory_bytes(&self) -> usize {
        self.bits.capacity() * 8
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[derive(Clone, Debug)]
    enum Op {
        Write(u64, u64),
        Read(u64, u64),
        Merge,
    }

    fn ops() -> impl Strategy<Value = Op> {
        let range = (0u64..64, 1u64..16).prop_map(|(s, n)| (s * SECTOR, n * SECTOR));
        prop_oneof![
            4 => range.clone().prop_map(|(o, l)| Op::Write(o, l)),
            4 => range.prop_map(|(o, l)| Op::Read(o, l)),
            1 => Just(Op::Merge),
        ]
    }

    proptest! {
        /// A sub-LUN of 64 sectors under migration: writes go to the buffer, reads take each
        /// sector from the buffer where it is marked and from the source otherwise, and a merge
        /// moves buffered sectors to the destination. Every read must return the latest written
        /// version of every sector, as a flat reference array says.
        #[test]
        fn buffer_returns_latest_bytes(ops in proptest::collection::vec(ops(), 1..200)) {
            let n = 64usize;
            let mut buf = TempBuffer::new(n as u64 * SECTOR);
            let mut reference = vec![0u64; n];
            let mut source = vec![0u64; n];
            let mut buffered = vec![0u64; n];
            let mut version = 0;
            for op in ops {
                match op {
                    Op::Write(o, l) => {
                        version += 1;
                        let added = buf.write(o, l);
                        let (a, b) = ((o / SECTOR) as usize, ((o + l).div_ceil(SECTOR) as usize).min(n));
                        prop_assert!(added <= (b - a) as u64);
                        for s in a..b {
                            buffered[s] = version;
                            reference[s] = version;
                        }
                        prop_assert_eq!(buf.coverage(o, l), Coverage::Full);
                    }
                    Op::Read(o, l) => {
                        let (a, b) = ((o / SECTOR) as usize, ((o + l).div_ceil(SECTOR) as usize).min(n));
                        for s in a..b {
                            let got = if buf.holds(s as u64) { buffered[s] } else { source[s] };
                            prop_assert_eq!(got, reference[s], "sector {}", s);
                        }
                        let held = (a..b).filter(|&s| buf.holds(s as u64)).count();
                        let want = if held == 0 { Coverage::None } else if held == b - a { Coverage::Full } else { Coverage::Partial };
                        prop_assert_eq!(buf.coverage(o, l), want);
                    }
                    Op::Merge => {
                        for s in 0..n {
                            if buf.holds(s as u64) {
                                source[s] = buffered[s];
                            }
                        }
                        buf.clear();
                        prop_assert_eq!(buf.valid_bytes(), 0);
                        prop_assert_eq!(&source, &reference, "after a merge the destination is complete");
                    }
                }
            }
        }
    }

    #[test]
    fn unaligned_ranges_round_out() {
        let mut b = TempBuffer::new(4096);
        assert_eq!(b.write(100, 10), 1);
        assert!(b.holds(0));
        assert_eq!(b.coverage(0, 512), Coverage::Full);
        assert_eq!(b.coverage(0, 1024), Coverage::Partial);
        assert_eq!(b.write(4000, 1000), 1, "clipped at the end of the object");
        assert_eq!(b.valid_bytes(), 1024);
    }
}
