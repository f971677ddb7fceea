//! Which SSD slot holds a block: the lookup every client I/O makes, so its cache misses are
//! most of what the device adds to a 4 KiB request once the engine has answered.
//!
//! Two representations behind one interface:
//! - **Dense**, an array indexed by block (4 bytes per HDD block), when that costs at most
//!   16 MiB or no more than the hash table would (the engine's rule for its own tables,
//!   `direct_index_pays`): one cache line per lookup, which can be prefetched before the
//!   engine is asked (the two lookups then overlap).
//! - **Hashed**, for an HDD far larger than its SSD (16 TB over 1 TB would need 16 GB dense):
//!   memory in proportion to the slots, as dm-cache's hash table.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// No slot (dense representation).
const EMPTY: u32 = u32::MAX;

/// Block numbers hashed so that 8 consecutive blocks land in neighbouring buckets while groups
/// of 8 spread over the table. With SipHash every block of a sequential request went to a
/// random bucket, a cache miss each: 93 % of the write route's samples in a profile of
/// sequential writes to a warm cache.
#[derive(Default)]
pub(crate) struct NearHasher(u64);

impl Hasher for NearHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
    fn finish(&self) -> u64 {
        // The high bits mixed (hashbrown takes its 7-bit tag from the top), the low 3 kept.
        let group = (self.0 >> 3).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        (group & !7) | (self.0 & 7)
    }
}

/// Block → slot.
#[derive(Debug)]
pub(crate) enum SlotMap {
    Dense { slot: Vec<u32>, len: usize },
    Hashed(HashMap<u64, u32, BuildHasherDefault<NearHasher>>),
}

impl SlotMap {
    /// A map for a device of `blocks` blocks (0: unknown) over `slots` slots.
    pub(crate) fn new(blocks: u64, slots: u64) -> SlotMap {
        if tierwise_core::object_table::direct_index_pays(blocks, slots) {
            SlotMap::Dense { slot: vec![EMPTY; blocks as usize], len: 0 }
        } else {
            SlotMap::Hashed(HashMap::with_capacity_and_hasher(slots as usize, BuildHasherDefault::default()))
        }
    }

    #[inline]
    pub(crate) fn get(&self, block: u64) -> Option<u32> {
        match self {
            SlotMap::Dense { .. } => self.get_if_dense(block),
            SlotMap::Hashed(m) => m.get(&block).copied(),
        }
    }

    /// `block`'s slot if the map is dense (one read at a known place); `None` when hashed,
    /// without looking.
    #[inline]
    pub(crate) fn get_if_dense(&self, block: u64) -> Option<u32> {
        match self {
            SlotMap::Dense { slot, .. } => slot.get(block as usize).copied().filter(|&s| s != EMPTY),
            SlotMap::Hashed(_) => None,
        }
    }

    /// Starts loading `block`'s entry into the CPU cache (dense only; a hint, no effect on
    /// the map).
    #[inline]
    pub(crate) fn prefetch(&self, block: u64) {
        if let SlotMap::Dense { slot, .. } = self
            && (block as usize) < slot.len()
        {
            tierwise_core::object_table::prefetch(slot.as_ptr().wrapping_add(block as usize));
        }
    }

    /// Maps `block` to `slot`. A block past a dense map's end (never: blocks are checked
    /// against the device size first) is kept in a hashed map instead of being dropped.
    pub(crate) fn insert(&mut self, block: u64, slot: u32) {
        if let SlotMap::Dense { slot: v, .. } = self
            && (block as usize) >= v.len()
        {
            let all: HashMap<u64, u32, BuildHasherDefault<NearHasher>> = self.iter().collect();
            *self = SlotMap::Hashed(all);
        }
        match self {
            SlotMap::Dense { slot: v, len } => {
                if v[block as usize] == EMPTY {
                    *len += 1;
                }
                v[block as usize] = slot;
            }
            SlotMap::Hashed(m) => {
                m.insert(block, slot);
            }
        }
    }

    pub(crate) fn remove(&mut self, block: u64) -> Option<u32> {
        match self {
            SlotMap::Dense { slot, len } => {
                let e = slot.get_mut(block as usize)?;
                if *e == EMPTY {
                    return None;
                }
                *len -= 1;
                Some(std::mem::replace(e, EMPTY))
            }
            SlotMap::Hashed(m) => m.remove(&block),
        }
    }

    pub(crate) fn len(&self) -> usize {
        match self {
            SlotMap::Dense { len, .. } => *len,
            SlotMap::Hashed(m) => m.len(),
        }
    }

    /// Every (block, slot); dense maps in block order.
    pub(crate) fn iter(&self) -> Box<dyn Iterator<Item = (u64, u32)> + '_> {
        match self {
            SlotMap::Dense { slot, .. } => {
                Box::new(slot.iter().enumerate().filter(|&(_, &s)| s != EMPTY).map(|(b, &s)| (b as u64, s)))
            }
            SlotMap::Hashed(m) => Box::new(m.iter().map(|(&b, &s)| (b, s))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_representations_agree() {
        let mut dense = SlotMap::new(1000, 10);
        let mut hashed = SlotMap::new(0, 10);
        assert!(matches!(dense, SlotMap::Dense { .. }) && matches!(hashed, SlotMap::Hashed(_)));
        for m in [&mut dense, &mut hashed] {
            m.insert(5, 1);
            m.insert(999, 2);
            m.insert(5, 3);
            assert_eq!(m.get(5), Some(3));
            assert_eq!(m.get_if_dense(5), matches!(m, SlotMap::Dense { .. }).then_some(3));
            assert_eq!(m.len(), 2);
            assert_eq!(m.remove(999), Some(2));
            assert_eq!(m.remove(999), None);
            assert_eq!(m.get(999), None);
            assert_eq!(m.len(), 1);
            m.prefetch(5);
            m.prefetch(u64::MAX);
        }
        let mut d: Vec<_> = dense.iter().collect();
        let mut h: Vec<_> = hashed.iter().collect();
        d.sort_unstable();
        h.sort_unstable();
        assert_eq!(d, h);
    }

    #[test]
    fn a_huge_hdd_over_a_small_ssd_is_hashed_and_a_block_past_the_end_is_kept() {
        // 16 TB of 4 KiB blocks over 1 GiB of slots.
        assert!(matches!(SlotMap::new(4 << 30, 1 << 18), SlotMap::Hashed(_)));
        // 1 GiB over 1 GiB: dense (1 MiB, smaller than the hash table).
        assert!(matches!(SlotMap::new(1 << 18, 1 << 18), SlotMap::Dense { .. }));
        let mut m = SlotMap::new(4, 4);
        m.insert(1, 0);
        m.insert(7, 1);
        assert_eq!((m.get(1), m.get(7), m.len()), (Some(0), Some(1), 2));
    }
}
