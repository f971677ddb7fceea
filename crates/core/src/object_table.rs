//! The map from [`ObjectId`] to a dense [`Slot`], with per-slot metadata chosen by the
//! architecture. Slots are recycled through a free list, so the table never allocates per access
//! once it has grown, and collectors can keep their per-object state in plain vectors indexed by
//! slot.
//!
//! Memory: the hash index stores only a 4-byte slot per bucket (the id lives in the entry), so
//! an entry costs `8 + size_of::<M>()` bytes plus about 6 bytes of index.

use hashbrown::HashTable;

use crate::{ObjectId, Slot};

#[derive(Clone, Debug)]
struct Entry<M> {
    id: ObjectId,
    meta: M,
}

/// A slot-indexed object table.
#[derive(Clone, Debug)]
pub struct ObjectTable<M> {
    index: HashTable<u32>,
    entries: Vec<Entry<M>>,
    free: Vec<u32>,
    live: usize,
}

impl<M> Default for ObjectTable<M> {
    fn default() -> Self {
        ObjectTable { index: HashTable::new(), entries: Vec::new(), free: Vec::new(), live: 0 }
    }
}

/// Hash of an object id. Ids are often multiples of a block size or sector count, so the low
/// bits are mixed with the high ones (hashbrown takes the bucket from the low bits).
#[inline]
pub fn hash_id(id: ObjectId) -> u64 {
    let x = id.0.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x ^ (x >> 29) ^ (x >> 47)
}

impl<M> ObjectTable<M> {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty table with room for `n` objects.
    pub fn with_capacity(n: usize) -> Self {
        ObjectTable { index: HashTable::with_capacity(n), entries: Vec::with_capacity(n), free: Vec::new(), live: 0 }
    }

    /// Number of live objects.
    pub fn len(&self) -> usize {
        self.live
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// One past the highest slot ever handed out (collectors size their vectors by it).
    pub fn slot_bound(&self) -> usize {
        self.entries.len()
    }

    /// Finds the slot of `id`.
    #[inline]
    pub fn get(&self, id: ObjectId) -> Option<Slot> {
        let entries = &self.entries;
        self.index.find(hash_id(id), |&s| entries[s as usize].id == id).map(|&s| Slot(s))
    }

    /// Inserts `id`, which MUST be absent, and returns its new slot.
    pub fn insert(&mut self, id: ObjectId, meta: M) -> Slot {
        debug_assert!(self.get(id).is_none(), "object {id:?} inserted twice");
        let slot = match self.free.pop() {
            Some(s) => {
                self.entries[s as usize] = Entry { id, meta };
                s
            }
            None => {
                let s = u32::try_from(self.entries.len()).unwrap_or(u32::MAX);
                assert!(s < u32::MAX, "object table is limited to 2^32-1 objects");
                self.entries.push(Entry { id, meta });
                s
            }
        };
        let entries = &self.entries;
        self.index.insert_unique(hash_id(id), slot, |&s| hash_id(entries[s as usize].id));
        self.live += 1;
        Slot(slot)
    }

    /// Removes the object in `slot` (which MUST be live); the slot is recycled.
    pub fn remove(&mut self, slot: Slot) {
        let id = self.entries[slot.idx()].id;
        let entries = &self.entries;
        if let Ok(e) = self.index.find_entry(hash_id(id), |&s| entries[s as usize].id == id) {
            e.remove();
            self.free.push(slot.0);
            self.live -= 1;
        } else {
            debug_assert!(false, "removing a slot that is not live");
        }
    }

    /// Re-keys a live slot to a new id (which MUST be absent), keeping its metadata.
    pub fn rekey(&mut self, slot: Slot, new_id: ObjectId) {
        let old = self.entries[slot.idx()].id;
        let entries = &self.entries;
        if let Ok(e) = self.index.find_entry(hash_id(old), |&s| entries[s as usize].id == old) {
            e.remove();
        }
        self.entries[slot.idx()].id = new_id;
        let entries = &self.entries;
        self.index.insert_unique(hash_id(new_id), slot.0, |&s| hash_id(entries[s as usize].id));
    }

    /// The id in a live slot.
    #[inline]
    pub fn id(&self, slot: Slot) -> ObjectId {
        self.entries[slot.idx()].id
    }

    /// Metadata of a live slot.
    #[inline]
    pub fn meta(&self, slot: Slot) -> &M {
        &self.entries[slot.idx()].meta
    }

    /// Mutable metadata of a live slot.
    #[inline]
    pub fn meta_mut(&mut self, slot: Slot) -> &mut M {
        &mut self.entries[slot.idx()].meta
    }

    /// Iterates live slots (order unspecified).
    pub fn slots(&self) -> impl Iterator<Item = Slot> + '_ {
        self.index.iter().map(|&s| Slot(s))
    }

    /// Heap bytes held.
    pub fn memory_bytes(&self) -> usize {
        self.index.capacity() * (std::mem::size_of::<u32>() + 1)
            + self.entries.capacity() * std::mem::size_of::<Entry<M>>()
            + self.free.capacity() * 4
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_get_remove_recycles_slots() {
        let mut t: ObjectTable<u8> = ObjectTable::new();
        let a = t.insert(ObjectId(8), 1);
        let b = t.insert(ObjectId(16), 2);
        assert_ne!(a, b);
        assert_eq!(t.get(ObjectId(8)), Some(a));
        assert_eq!(*t.meta(b), 2);
        t.remove(a);
        assert_eq!(t.get(ObjectId(8)), None);
        assert_eq!(t.len(), 1);
        let c = t.insert(ObjectId(24), 3);
        assert_eq!(c, a, "freed slot is reused");
        t.rekey(c, ObjectId(32));
        assert_eq!(t.get(ObjectId(24)), None);
        assert_eq!(t.get(ObjectId(32)), Some(c));
        assert_eq!(t.slots().count(), 2);
    }

    #[test]
    fn many_objects() {
        let mut t: ObjectTable<()> = ObjectTable::new();
        for i in 0..100_000u64 {
            t.insert(ObjectId(i * 8), ());
        }
        for i in 0..100_000u64 {
            assert!(t.get(ObjectId(i * 8)).is_some());
            assert!(t.get(ObjectId(i * 8 + 1)).is_none());
        }
    }
}
