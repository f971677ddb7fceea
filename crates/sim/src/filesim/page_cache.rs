//! The RAM buffer cache in front of the tiers: Loris ran with a 64 MB data cache, and several of
//! its findings depend on it (reads that hit it never reach the tiers, writes are buffered and
//! reach the tiers only when evicted or flushed, deletes drop buffered pages at once).
//!
//! Pages of 4 KiB keyed by (file, page number), replaced LRU. A dirty page that is evicted is
//! written back together with the dirty pages of the same file next to it (one contiguous run),
//! as a kernel's write-back clusters an inode's dirty pages.

use hashbrown::HashMap;

/// The page size of the buffer cache.
pub const PAGE: u64 = 4096;

const NIL: u32 = u32::MAX;

#[derive(Clone, Copy, Debug)]
struct Node {
    obj: u64,
    page: u64,
    prev: u32,
    next: u32,
    dirty: bool,
}

/// A run of dirty pages to write back: file, first page, page count.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct DirtyRun {
    /// The file.
    pub obj: u64,
    /// First page.
    pub first: u64,
    /// Pages.
    pub pages: u64,
}

/// Mixes a (file, page) key into one well-spread word.
#[derive(Clone, Copy, Default)]
pub struct PageKeyHash;

impl std::hash::BuildHasher for PageKeyHash {
    type Hasher = PageKeyHasher;
    fn build_hasher(&self) -> PageKeyHasher {
        PageKeyHasher(0x9e37_79b9_7f4a_7c15)
    }
}

/// See [`PageKeyHash`].
#[derive(Clone, Copy)]
pub struct PageKeyHasher(u64);

impl std::hash::Hasher for PageKeyHasher {
    fn finish(&self) -> u64 {
        let x = self.0;
        (x ^ (x >> 29)).wrapping_mul(0xbf58_476d_1ce4_e5b9) ^ (x >> 32)
    }
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(w));
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(23) ^ v).wrapping_mul(0x94d0_49bb_1331_11eb);
    }
}

/// An LRU cache of 4 KiB pages; see the module docs.
pub struct PageCache {
    capacity: usize,
    map: HashMap<(u64, u64), u32, PageKeyHash>,
    nodes: Vec<Node>,
    free: Vec<u32>,
    /// Most recently used.
    head: u32,
    /// Least recently used.
    tail: u32,
    dirty: usize,
}

impl PageCache {
    /// A cache of `bytes` (rounded down to whole pages).
    pub fn new(bytes: u64) -> PageCache {
        PageCache {
            capacity: usize::try_from(bytes / PAGE).unwrap_or(usize::MAX),
            map: HashMap::with_hasher(PageKeyHash),
            nodes: Vec::new(),
            free: Vec::new(),
            head: NIL,
            tail: NIL,
            dirty: 0,
        }
    }

    /// Whether the cache holds any page at all (capacity above zero).
    pub fn enabled(&self) -> bool {
        self.capacity > 0
    }

    /// Pages held.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// True when no page is held.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Dirty pages held.
    pub fn dirty_pages(&self) -> usize {
        self.dirty
    }

    fn unlink(&mut self, i: u32) {
        let Node { prev, next, .. } = self.nodes[i as usize];
        if prev == NIL {
            self.head = next;
        } else {
            self.nodes[prev as usize].next = next;
        }
        if next == NIL {
            self.tail = prev;
        } else {
            self.nodes[next as usize].prev = prev;
        }
    }

    fn push_front(&mut self, i: u32) {
        self.nodes[i as usize].prev = NIL;
        self.nodes[i as usize].next = self.head;
        if self.head != NIL {
            self.nodes[self.head as usize].prev = i;
        }
        self.head = i;
        if self.tail == NIL {
            self.tail = i;
        }
    }

    /// Whether the page is cached, making it most recently used when it is.
    pub fn touch(&mut self, obj: u64, page: u64) -> bool {
        match self.map.get(&(obj, page)) {
            Some(&i) => {
                if self.head != i {
                    self.unlink(i);
                    self.push_front(i);
                }
                true
            }
            None => false,
        }
    }

    /// Whether the page is cached (no recency change).
    pub fn contains(&self, obj: u64, page: u64) -> bool {
        self.map.contains_key(&(obj, page))
    }

    /// Caches a page (or marks a cached one) as most recently used; `dirty` marks it dirty (a
    /// clean insert never cleans a dirty page). Evicted dirty pages are appended to `out` as runs
    /// to write back.
    pub fn insert(&mut self, obj: u64, page: u64, dirty: bool, out: &mut Vec<DirtyRun>) {
        if self.capacity == 0 {
            return;
        }
        if let Some(&i) = self.map.get(&(obj, page)) {
            let n = &mut self.nodes[i as usize];
            if dirty && !n.dirty {
                n.dirty = true;
                self.dirty += 1;
            }
            if self.head != i {
                self.unlink(i);
                self.push_front(i);
            }
            return;
        }
        while self.map.len() >= self.capacity && self.tail != NIL {
            self.evict_lru(out);
        }
        let node = Node { obj, page, prev: NIL, next: NIL, dirty };
        let i = match self.free.pop() {
            Some(i) => {
                self.nodes[i as usize] = node;
                i
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        };
        self.map.insert((obj, page), i);
        self.push_front(i);
        if dirty {
            self.dirty += 1;
        }
    }

    fn remove_node(&mut self, i: u32) {
        let n = self.nodes[i as usize];
        self.unlink(i);
        self.map.remove(&(n.obj, n.page));
        if n.dirty {
            self.dirty -= 1;
        }
        self.free.push(i);
    }

    fn evict_lru(&mut self, out: &mut Vec<DirtyRun>) {
        let i = self.tail;
        let n = self.nodes[i as usize];
        if n.dirty {
            out.push(self.clean_run_around(n.obj, n.page));
        }
        self.remove_node(i);
    }

    /// Cleans the run of dirty pages of `obj` that contains `page` and returns it.
    fn clean_run_around(&mut self, obj: u64, page: u64) -> DirtyRun {
        let dirty_at = |c: &PageCache, p: u64| c.map.get(&(obj, p)).is_some_and(|&i| c.nodes[i as usize].dirty);
        let mut first = page;
        while first > 0 && dirty_at(self, first - 1) {
            first -= 1;
        }
        let mut end = page + 1;
        while dirty_at(self, end) {
            end += 1;
        }
        for p in first..end {
            if let Some(&i) = self.map.get(&(obj, p)) {
                self.nodes[i as usize].dirty = false;
                self.dirty -= 1;
            }
        }
        DirtyRun { obj, first, pages: end - first }
    }

    /// Drops pages `from..to` of `obj` without writing them back (delete, truncate).
    pub fn drop_pages(&mut self, obj: u64, from: u64, to: u64) {
        if self.capacity == 0 || from >= to {
            return;
        }
        if to - from > self.map.len() as u64 {
            // A huge range: scan the cache instead of the range.
            let victims: Vec<u32> =
                self.map.iter().filter(|((o, p), _)| *o == obj && (from..to).contains(p)).map(|(_, &i)| i).collect();
            for i in victims {
                self.remove_node(i);
            }
            return;
        }
        for p in from..to {
            if let Some(&i) = self.map.get(&(obj, p)) {
                self.remove_node(i);
            }
        }
    }

    /// Cleans every dirty page and returns them as runs, in file and page order (a sync).
    pub fn take_all_dirty(&mut self) -> Vec<DirtyRun> {
        let mut pages: Vec<(u64, u64)> =
            self.map.iter().filter(|&(_, &i)| self.nodes[i as usize].dirty).map(|(&k, _)| k).collect();
        pages.sort_unstable();
        let mut runs: Vec<DirtyRun> = Vec::new();
        for (obj, page) in pages {
            if let Some(&i) = self.map.get(&(obj, page)) {
                self.nodes[i as usize].dirty = false;
            }
            match runs.last_mut() {
                Some(r) if r.obj == obj && r.first + r.pages == page => r.pages += 1,
                _ => runs.push(DirtyRun { obj, first: page, pages: 1 }),
            }
        }
        self.dirty = 0;
        runs
    }

    /// Heap bytes held.
    pub fn memory_bytes(&self) -> usize {
        self.map.capacity() * (std::mem::size_of::<((u64, u64), u32)>() + 1)
            + self.nodes.capacity() * std::mem::size_of::<Node>()
            + self.free.capacity() * 4
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lru_replacement_matches_a_plain_model() {
        // Reference: a vector ordered most recent first.
        let mut c = PageCache::new(8 * PAGE);
        let mut model: Vec<(u64, u64)> = Vec::new();
        let mut out = Vec::new();
        let mut x = 12345u64;
        for _ in 0..20_000 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let key = ((x >> 40) % 3, (x >> 20) % 7);
            let hit = c.touch(key.0, key.1);
            let pos = model.iter().position(|k| *k == key);
            assert_eq!(hit, pos.is_some());
            if let Some(p) = pos {
                model.remove(p);
            } else {
                c.insert(key.0, key.1, false, &mut out);
                if model.len() == 8 {
                    model.pop();
                }
            }
            model.insert(0, key);
            assert_eq!(c.len(), model.len());
        }
        assert!(out.is_empty(), "clean pages are never written back");
    }

    #[test]
    fn an_evicted_dirty_page_writes_back_its_dirty_neighbours_once() {
        let mut c = PageCache::new(4 * PAGE);
        let mut out = Vec::new();
        for p in 0..3 {
            c.insert(7, p, true, &mut out);
        }
        c.insert(9, 0, false, &mut out);
        assert_eq!(c.dirty_pages(), 3);
        c.insert(9, 1, false, &mut out); // evicts (7, 0): the run 0..3 is written back
        assert_eq!(out, vec![DirtyRun { obj: 7, first: 0, pages: 3 }]);
        assert_eq!(c.dirty_pages(), 0);
        out.clear();
        c.insert(9, 2, false, &mut out);
        c.insert(9, 3, false, &mut out);
        assert!(out.is_empty(), "the neighbours are clean now");
    }

    #[test]
    fn dropped_pages_are_never_written_back_and_sync_returns_sorted_runs() {
        let mut c = PageCache::new(64 * PAGE);
        let mut out = Vec::new();
        for p in [5, 1, 2, 3, 9] {
            c.insert(2, p, true, &mut out);
        }
        c.insert(1, 0, true, &mut out);
        c.drop_pages(2, 3, 6);
        let runs = c.take_all_dirty();
        assert_eq!(
            runs,
            vec![
                DirtyRun { obj: 1, first: 0, pages: 1 },
                DirtyRun { obj: 2, first: 1, pages: 2 },
                DirtyRun { obj: 2, first: 9, pages: 1 }
            ]
        );
        assert_eq!(c.dirty_pages(), 0);
        assert!(c.take_all_dirty().is_empty());
    }
}
