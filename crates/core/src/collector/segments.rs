//! Slot-indexed nodes on one of `N` fast-tier lists (segments, queues) with a byte count per
//! list, plus the slow tier's recency list: the building block of the list-based policies
//! (Sieve, SLRU, 2Q). Each policy decides which list an object enters and leaves; this keeps the
//! links, the sizes, the per-object bits and the recency stamp that ranks objects across tiers.

use super::{Touch, ensure_slot};
use crate::list::{Link, Linked, List, NIL};
use crate::{ObjectId, Slot, Tier};

/// The list index of a slow-tier object.
pub(crate) const SLOW: u8 = u8::MAX;

/// Per-object state (32 bytes).
#[derive(Clone, Copy, Debug)]
pub(crate) struct SegNode {
    link: Link,
    pub(crate) id: ObjectId,
    pub(crate) size: u64,
    /// Low bits of the last access sequence (wrapping comparison).
    pub(crate) stamp: u32,
    /// The list it is on, or [`SLOW`].
    pub(crate) list: u8,
    /// The policy's own bits (Sieve's visited bit).
    pub(crate) bits: u8,
}

impl Default for SegNode {
    fn default() -> Self {
        SegNode { link: Link::default(), id: ObjectId(0), size: 0, stamp: 0, list: SLOW, bits: 0 }
    }
}

impl Linked for SegNode {
    #[inline]
    fn link(&self) -> &Link {
        &self.link
    }
    #[inline]
    fn link_mut(&mut self) -> &mut Link {
        &mut self.link
    }
}

/// `N` fast-tier lists and the slow tier's recency list over one node vector.
#[derive(Clone, Debug)]
pub(crate) struct Segments<const N: usize> {
    pub(crate) nodes: Vec<SegNode>,
    lists: [List; N],
    slow: List,
    bytes: [u64; N],
    /// Low bits of the highest access sequence seen; an object changing tier is stamped with it.
    latest: u32,
}

impl<const N: usize> Default for Segments<N> {
    fn default() -> Self {
        Segments { nodes: Vec::new(), lists: [List::default(); N], slow: List::default(), bytes: [0; N], latest: 0 }
    }
}

impl<const N: usize> Segments<N> {
    /// Starts tracking `slot`, on no list yet (the caller places a fast-tier object) or, for the
    /// slow tier, at the front of its recency list.
    #[inline]
    pub(crate) fn track(&mut self, slot: Slot, id: ObjectId, tier: Tier, size: u64, t: &Touch) {
        ensure_slot(&mut self.nodes, slot, SegNode::default());
        self.latest = t.seq as u32;
        self.nodes[slot.idx()] = SegNode { id, size, stamp: t.seq as u32, ..SegNode::default() };
        if tier == Tier::Slow {
            self.slow.push_front(&mut self.nodes, slot.0);
        }
    }

    /// Records an access's stamp; a slow-tier object moves to the front of its list. Returns
    /// the object's list.
    #[inline]
    pub(crate) fn stamp(&mut self, slot: Slot, t: &Touch) -> u8 {
        self.latest = t.seq as u32;
        let n = &mut self.nodes[slot.idx()];
        n.stamp = t.seq as u32;
        let list = n.list;
        if list == SLOW {
            self.slow.move_to_front(&mut self.nodes, slot.0);
        }
        list
    }

    /// Node of `slot`.
    #[inline]
    pub(crate) fn node(&self, slot: Slot) -> &SegNode {
        &self.nodes[slot.idx()]
    }

    /// Node of `slot`, mutably.
    #[inline]
    pub(crate) fn node_mut(&mut self, slot: Slot) -> &mut SegNode {
        &mut self.nodes[slot.idx()]
    }

    /// Puts an object that is on no list at the front (newest end) of fast list `list`.
    #[inline]
    pub(crate) fn push_front(&mut self, slot: Slot, list: u8) {
        let n = &mut self.nodes[slot.idx()];
        debug_assert_eq!(n.list, SLOW);
        n.list = list;
        self.bytes[list as usize] += n.size;
        self.lists[list as usize].push_front(&mut self.nodes, slot.0);
    }

    /// Takes `slot` off whatever list it is on (fast or slow); returns that list. It is on no
    /// list afterwards until pushed again.
    #[inline]
    pub(crate) fn leave(&mut self, slot: Slot) -> u8 {
        let n = self.nodes[slot.idx()];
        if n.list == SLOW {
            self.slow.unlink(&mut self.nodes, slot.0);
        } else {
            self.lists[n.list as usize].unlink(&mut self.nodes, slot.0);
            self.bytes[n.list as usize] -= n.size;
            self.nodes[slot.idx()].list = SLOW;
        }
        n.list
    }

    /// Moves a fast-tier object to the front of list `to`.
    #[inline]
    pub(crate) fn move_front(&mut self, slot: Slot, to: u8) {
        if self.nodes[slot.idx()].list == to {
            self.lists[to as usize].move_to_front(&mut self.nodes, slot.0);
        } else {
            self.leave(slot);
            self.push_front(slot, to);
        }
    }

    /// Puts an object that left the fast tier at the front of the slow tier's recency list.
    pub(crate) fn push_slow(&mut self, slot: Slot) {
        let latest = self.latest;
        let n = &mut self.nodes[slot.idx()];
        n.list = SLOW;
        n.stamp = latest;
        self.slow.push_front(&mut self.nodes, slot.0);
    }

    /// Oldest object of fast list `list`.
    #[inline]
    pub(crate) fn back(&self, list: u8) -> Option<Slot> {
        self.lists[list as usize].back().map(Slot)
    }

    /// The next object towards the newest end of its list, `None` at the front.
    #[inline]
    pub(crate) fn newer(&self, slot: Slot) -> Option<Slot> {
        Some(self.nodes[slot.idx()].link.prev).filter(|&p| p != NIL).map(Slot)
    }

    /// Bytes on fast list `list`.
    #[inline]
    pub(crate) fn bytes(&self, list: u8) -> u64 {
        self.bytes[list as usize]
    }

    /// Objects on fast list `list`.
    #[inline]
    pub(crate) fn count(&self, list: u8) -> usize {
        self.lists[list as usize].len()
    }

    /// The slow tier's most recently accessed object.
    pub(crate) fn hottest_slow(&self) -> Option<Slot> {
        self.slow.front().map(Slot)
    }

    /// Whether `a` was accessed more recently than `b`.
    pub(crate) fn more_recent(&self, a: Slot, b: Slot) -> bool {
        (self.nodes[a.idx()].stamp.wrapping_sub(self.nodes[b.idx()].stamp) as i32) > 0
    }

    /// Tracked objects on `tier`.
    pub(crate) fn len(&self, tier: Tier) -> usize {
        match tier {
            Tier::Fast => self.lists.iter().map(List::len).sum(),
            Tier::Slow => self.slow.len(),
        }
    }

    /// A tracked object's new size.
    pub(crate) fn resize(&mut self, slot: Slot, size: u64) {
        let n = &mut self.nodes[slot.idx()];
        if n.list != SLOW {
            self.bytes[n.list as usize] = self.bytes[n.list as usize] - n.size + size;
        }
        n.size = size;
    }

    /// Heap bytes held.
    pub(crate) fn memory_bytes(&self) -> usize {
        self.nodes.capacity() * std::mem::size_of::<SegNode>()
    }
}
