//! Ghost lists: ids and sizes (no data) of objects recently evicted, in one or more FIFO lists,
//! with an index by id. ARC keeps two (B1, B2); S3-FIFO keeps one. Entries are pushed at the
//! front and trimmed from the back; a hit takes an entry out of the middle.

use hashbrown::HashTable;

use crate::ObjectId;
use crate::list::{Link, Linked, List};
use crate::object_table::hash_id;

#[derive(Clone, Copy, Debug)]
struct Ghost {
    link: Link,
    id: ObjectId,
    size: u64,
    list: u8,
}

impl Linked for Ghost {
    fn link(&self) -> &Link {
        &self.link
    }
    fn link_mut(&mut self) -> &mut Link {
        &mut self.link
    }
}

/// `N` ghost lists sharing one slab and one index (an id is in at most one of them).
#[derive(Clone, Debug)]
pub(crate) struct Ghosts<const N: usize> {
    slab: Vec<Ghost>,
    free: Vec<u32>,
    index: HashTable<u32>,
    lists: [List; N],
    bytes: [u64; N],
}

impl<const N: usize> Default for Ghosts<N> {
    fn default() -> Self {
        Ghosts {
            slab: Vec::new(),
            free: Vec::new(),
            index: HashTable::new(),
            lists: [List::default(); N],
            bytes: [0; N],
        }
    }
}

impl<const N: usize> Ghosts<N> {
    /// The entry for `id` and the list it is on.
    pub(crate) fn find(&self, id: ObjectId) -> Option<(u32, u8)> {
        let slab = &self.slab;
        self.index.find(hash_id(id), |&g| slab[g as usize].id == id).map(|&g| (g, slab[g as usize].list))
    }

    /// Bytes remembered on `list`.
    pub(crate) fn bytes(&self, list: u8) -> u64 {
        self.bytes[list as usize]
    }

    /// Forgets entry `g`.
    pub(crate) fn drop(&mut self, g: u32) {
        let Ghost { id, size, list, .. } = self.slab[g as usize];
        self.lists[list as usize].unlink(&mut self.slab, g);
        self.bytes[list as usize] -= size;
        let slab = &self.slab;
        if let Ok(e) = self.index.find_entry(hash_id(id), |&x| slab[x as usize].id == id) {
            e.remove();
        }
        self.free.push(g);
    }

    /// Forgets `id` if remembered; whether it was.
    pub(crate) fn take(&mut self, id: ObjectId) -> bool {
        match self.find(id) {
            Some((g, _)) => {
                self.drop(g);
                true
            }
            None => false,
        }
    }

    /// Remembers `id` at the front of `list` (moving it there if it was on any list).
    pub(crate) fn push(&mut self, id: ObjectId, size: u64, list: u8) {
        self.take(id);
        let ghost = Ghost { link: Link::default(), id, size, list };
        let g = match self.free.pop() {
            Some(g) => {
                self.slab[g as usize] = ghost;
                g
            }
            None => {
                self.slab.push(ghost);
                (self.slab.len() - 1) as u32
            }
        };
        self.lists[list as usize].push_front(&mut self.slab, g);
        self.bytes[list as usize] += size;
        let slab = &self.slab;
        self.index.insert_unique(hash_id(id), g, |&x| hash_id(slab[x as usize].id));
    }

    /// Drops the oldest entry of `list`; false when it is empty.
    pub(crate) fn drop_oldest(&mut self, list: u8) -> bool {
        match self.lists[list as usize].back() {
            Some(g) => {
                self.drop(g);
                true
            }
            None => false,
        }
    }

    /// Heap bytes held.
    pub(crate) fn memory_bytes(&self) -> usize {
        self.slab.capacity() * std::mem::size_of::<Ghost>() + self.index.capacity() * 5 + self.free.capacity() * 4
    }
}
