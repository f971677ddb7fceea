//! A vector whose freed slots are reused: the event loops keep in-flight records (waiters, moves,
//! deferred accesses) in one, indexed by a `u32` that events carry, with no allocation per record
//! once it has grown.

/// Records indexed by `u32`, freed slots reused.
#[derive(Debug)]
pub(crate) struct Slab<T> {
    items: Vec<T>,
    free: Vec<u32>,
}

impl<T> Default for Slab<T> {
    fn default() -> Self {
        Slab { items: Vec::new(), free: Vec::new() }
    }
}

impl<T> Slab<T> {
    /// Stores `v` in a free slot (or a new one) and returns its index.
    pub(crate) fn insert(&mut self, v: T) -> u32 {
        match self.free.pop() {
            Some(i) => {
                self.items[i as usize] = v;
                i
            }
            None => {
                self.items.push(v);
                (self.items.len() - 1) as u32
            }
        }
    }

    /// Frees slot `i` for reuse (its record stays until overwritten).
    pub(crate) fn free(&mut self, i: u32) {
        self.free.push(i);
    }
}

impl<T> std::ops::Index<u32> for Slab<T> {
    type Output = T;
    fn index(&self, i: u32) -> &T {
        &self.items[i as usize]
    }
}

impl<T> std::ops::IndexMut<u32> for Slab<T> {
    fn index_mut(&mut self, i: u32) -> &mut T {
        &mut self.items[i as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn freed_slots_are_reused() {
        let mut s = Slab::default();
        let (a, b) = (s.insert(1), s.insert(2));
        assert_eq!((a, b, s[a], s[b]), (0, 1, 1, 2));
        s.free(a);
        let c = s.insert(3);
        assert_eq!((c, s[c]), (0, 3));
        s[b] = 5;
        assert_eq!(s[b], 5);
        assert_eq!(s.insert(4), 2);
    }
}
