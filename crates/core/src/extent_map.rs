//! A dense table indexed by extent number, allocated in small chunks on first touch — the
//! shape of GreenDM's mapping table (virtual extent → entry), without paying for the whole
//! virtual address space up front. Lookups hash the chunk number only; entries carry no id.
//!
//! Memory: `CHUNK * size_of::<T>()` per touched chunk plus about 24 bytes of directory, so a
//! densely used range costs `size_of::<T>()` per extent.

use hashbrown::HashMap;

use crate::object_table::IdHash;

/// Entries per chunk.
pub const CHUNK: usize = 64;
const SHIFT: u32 = CHUNK.trailing_zeros();

/// The table.
#[derive(Clone, Debug)]
pub struct ExtentMap<T> {
    chunks: Vec<[T; CHUNK]>,
    dir: HashMap<u64, u32, IdHash>,
}

impl<T: Copy + Default> Default for ExtentMap<T> {
    fn default() -> Self {
        ExtentMap { chunks: Vec::new(), dir: HashMap::with_hasher(IdHash) }
    }
}

impl<T: Copy + Default> ExtentMap<T> {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// The entry of extent `e`, if its chunk was ever touched (else every field is default).
    #[inline]
    pub fn get(&self, e: u64) -> T {
        match self.dir.get(&(e >> SHIFT)) {
            Some(&c) => self.chunks[c as usize][(e as usize) & (CHUNK - 1)],
            None => T::default(),
        }
    }

    /// The entry of extent `e`, allocating its chunk on first touch.
    #[inline]
    pub fn get_mut(&mut self, e: u64) -> &mut T {
        let key = e >> SHIFT;
        let c = match self.dir.get(&key) {
            Some(&c) => c,
            None => {
                self.chunks.push([T::default(); CHUNK]);
                let c = (self.chunks.len() - 1) as u32;
                self.dir.insert(key, c);
                c
            }
        };
        &mut self.chunks[c as usize][(e as usize) & (CHUNK - 1)]
    }

    /// Every touched entry with its extent number (order unspecified).
    pub fn iter(&self) -> impl Iterator<Item = (u64, &T)> + '_ {
        self.dir.iter().flat_map(move |(&key, &c)| {
            self.chunks[c as usize].iter().enumerate().map(move |(i, t)| ((key << SHIFT) | i as u64, t))
        })
    }

    /// Number of touched chunks.
    pub fn chunks(&self) -> usize {
        self.chunks.len()
    }

    /// Heap bytes held.
    pub fn memory_bytes(&self) -> usize {
        self.chunks.capacity() * std::mem::size_of::<[T; CHUNK]>() + self.dir.capacity() * (8 + 4 + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sparse_and_dense_extents() {
        let mut m: ExtentMap<u32> = ExtentMap::new();
        assert_eq!(m.get(5), 0);
        *m.get_mut(5) = 7;
        *m.get_mut(1 << 50) = 9;
        assert_eq!(m.get(5), 7);
        assert_eq!(m.get(6), 0);
        assert_eq!(m.get(1 << 50), 9);
        assert_eq!(m.chunks(), 2);
        for e in 0..10_000u64 {
            *m.get_mut(e) = e as u32;
        }
        assert_eq!(m.get(9_999), 9_999);
        assert_eq!(m.iter().filter(|(_, v)| **v != 0).count(), 10_000);
    }
}
