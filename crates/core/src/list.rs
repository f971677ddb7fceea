//! Intrusive doubly-linked lists over slot indices. Nodes live in the collector's own
//! slot-indexed vector; a list is just a head, a tail and a length, so pushing, unlinking and
//! moving never allocate.

/// "No slot".
pub const NIL: u32 = u32::MAX;

/// The two links of a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Link {
    /// Towards the head (more recent).
    pub prev: u32,
    /// Towards the tail (older).
    pub next: u32,
}

impl Default for Link {
    fn default() -> Self {
        Link { prev: NIL, next: NIL }
    }
}

/// Anything that holds a [`Link`].
pub trait Linked {
    /// The node's links.
    fn link(&self) -> &Link;
    /// The node's links, mutably.
    fn link_mut(&mut self) -> &mut Link;
}

/// A list of nodes stored in some `[N]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct List {
    head: u32,
    tail: u32,
    len: usize,
}

impl Default for List {
    fn default() -> Self {
        List { head: NIL, tail: NIL, len: 0 }
    }
}

impl List {
    /// Most recently pushed node.
    #[inline]
    pub fn front(&self) -> Option<u32> {
        (self.head != NIL).then_some(self.head)
    }
    /// Oldest node.
    #[inline]
    pub fn back(&self) -> Option<u32> {
        (self.tail != NIL).then_some(self.tail)
    }
    /// Number of nodes.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }
    /// True when empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Links `s` at the head. Caller guarantees `s` is in no list.
    #[inline]
    pub fn push_front<N: Linked>(&mut self, nodes: &mut [N], s: u32) {
        *nodes[s as usize].link_mut() = Link { prev: NIL, next: self.head };
        if self.head != NIL {
            nodes[self.head as usize].link_mut().prev = s;
        } else {
            self.tail = s;
        }
        self.head = s;
        self.len += 1;
    }

    /// Links `s` at the tail. Caller guarantees `s` is in no list.
    #[inline]
    pub fn push_back<N: Linked>(&mut self, nodes: &mut [N], s: u32) {
        *nodes[s as usize].link_mut() = Link { prev: self.tail, next: NIL };
        if self.tail != NIL {
            nodes[self.tail as usize].link_mut().next = s;
        } else {
            self.head = s;
        }
        self.tail = s;
        self.len += 1;
    }

    /// Links `s` just before `at` (towards the head). Caller guarantees `at` is in this list.
    #[inline]
    pub fn insert_before<N: Linked>(&mut self, nodes: &mut [N], at: u32, s: u32) {
        let prev = nodes[at as usize].link().prev;
        *nodes[s as usize].link_mut() = Link { prev, next: at };
        nodes[at as usize].link_mut().prev = s;
        if prev != NIL {
            nodes[prev as usize].link_mut().next = s;
        } else {
            self.head = s;
        }
        self.len += 1;
    }

    /// Unlinks `s`. Caller guarantees `s` is in this list.
    #[inline]
    pub fn unlink<N: Linked>(&mut self, nodes: &mut [N], s: u32) {
        let Link { prev, next } = *nodes[s as usize].link();
        if prev != NIL {
            nodes[prev as usize].link_mut().next = next;
        } else {
            self.head = next;
        }
        if next != NIL {
            nodes[next as usize].link_mut().prev = prev;
        } else {
            self.tail = prev;
        }
        *nodes[s as usize].link_mut() = Link::default();
        self.len -= 1;
    }

    /// Moves `s` (in this list) to the head.
    #[inline]
    pub fn move_to_front<N: Linked>(&mut self, nodes: &mut [N], s: u32) {
        if self.head != s {
            self.unlink(nodes, s);
            self.push_front(nodes, s);
        }
    }

    /// The node after `s` towards the tail, wrapping to the head (for clock hands).
    #[inline]
    pub fn next_wrapping<N: Linked>(&self, nodes: &[N], s: u32) -> u32 {
        let n = nodes[s as usize].link().next;
        if n == NIL { self.head } else { n }
    }

    /// Iterates from head to tail.
    pub fn iter<'a, N: Linked>(&self, nodes: &'a [N]) -> impl Iterator<Item = u32> + 'a {
        let mut cur = self.head;
        std::iter::from_fn(move || {
            if cur == NIL {
                return None;
            }
            let s = cur;
            cur = nodes[s as usize].link().next;
            Some(s)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default, Clone)]
    struct N(Link);
    impl Linked for N {
        fn link(&self) -> &Link {
            &self.0
        }
        fn link_mut(&mut self) -> &mut Link {
            &mut self.0
        }
    }

    #[test]
    fn push_unlink_move() {
        let mut nodes = vec![N::default(); 5];
        let mut l = List::default();
        for s in 0..4 {
            l.push_front(&mut nodes, s);
        }
        assert_eq!(l.iter(&nodes).collect::<Vec<_>>(), vec![3, 2, 1, 0]);
        l.move_to_front(&mut nodes, 0);
        assert_eq!(l.iter(&nodes).collect::<Vec<_>>(), vec![0, 3, 2, 1]);
        l.unlink(&mut nodes, 2);
        assert_eq!(l.iter(&nodes).collect::<Vec<_>>(), vec![0, 3, 1]);
        l.insert_before(&mut nodes, 0, 4);
        assert_eq!(l.iter(&nodes).collect::<Vec<_>>(), vec![4, 0, 3, 1]);
        l.push_back(&mut nodes, 2);
        assert_eq!(l.back(), Some(2));
        assert_eq!(l.len(), 5);
        assert_eq!(l.next_wrapping(&nodes, 2), 4);
    }
}
