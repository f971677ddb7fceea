//! Plain reference models, written for obviousness rather than speed: O(n) scans over vectors.
//! Differential tests run the same operations through these and through the real collectors
//! and caches and demand identical answers.

use std::collections::VecDeque;

/// libCacheSim-semantics LRU cache over (id, size): a hit moves to the head; a miss evicts from
/// the tail until the object fits, then inserts it; an object larger than the cache is never
/// inserted; the size recorded is the size at insertion.
#[derive(Clone, Debug, Default)]
pub struct NaiveLruCache {
    capacity: u64,
    used: u64,
    /// Most recent first.
    items: VecDeque<(u64, u64)>,
}

impl NaiveLruCache {
    /// A cache of `capacity` bytes (or objects, with unit sizes).
    pub fn new(capacity: u64) -> Self {
        NaiveLruCache { capacity, used: 0, items: VecDeque::new() }
    }

    /// One request; true on a hit.
    pub fn access(&mut self, id: u64, size: u64) -> bool {
        if let Some(pos) = self.items.iter().position(|&(i, _)| i == id) {
            let it = self.items.remove(pos).unwrap_or((id, size));
            self.items.push_front(it);
            return true;
        }
        if size > self.capacity {
            return false;
        }
        while self.used + size > self.capacity {
            let Some((_, s)) = self.items.pop_back() else {
                break;
            };
            self.used -= s;
        }
        self.items.push_front((id, size));
        self.used += size;
        false
    }
}

/// libCacheSim-semantics FIFO cache: hits do not reorder.
#[derive(Clone, Debug, Default)]
pub struct NaiveFifoCache {
    capacity: u64,
    used: u64,
    /// Newest first.
    items: VecDeque<(u64, u64)>,
}

impl NaiveFifoCache {
    /// A cache of `capacity` bytes.
    pub fn new(capacity: u64) -> Self {
        NaiveFifoCache { capacity, used: 0, items: VecDeque::new() }
    }

    /// One request; true on a hit.
    pub fn access(&mut self, id: u64, size: u64) -> bool {
        if self.items.iter().any(|&(i, _)| i == id) {
            return true;
        }
        if size > self.capacity {
            return false;
        }
        while self.used + size > self.capacity {
            let Some((_, s)) = self.items.pop_back() else {
                break;
            };
            self.used -= s;
        }
        self.items.push_front((id, size));
        self.used += size;
        false
    }
}

/// ARC exactly as in Megiddo and Modha's Figure 4 (unit-size pages, capacity `c` pages). The
/// target `p` is real-valued: the adaptation steps are ratios |B2|/|B1| and |B1|/|B2|, not
/// rounded (libCacheSim 0.3.5's ARC gives the same hits).
#[derive(Clone, Debug)]
pub struct NaiveArc {
    c: usize,
    p: f64,
    /// Each list holds the most recent page first.
    t1: VecDeque<u64>,
    t2: VecDeque<u64>,
    b1: VecDeque<u64>,
    b2: VecDeque<u64>,
}

fn take(l: &mut VecDeque<u64>, x: u64) -> bool {
    if let Some(pos) = l.iter().position(|&y| y == x) {
        l.remove(pos);
        true
    } else {
        false
    }
}

impl NaiveArc {
    /// ARC over `c` pages.
    pub fn new(c: usize) -> Self {
        NaiveArc { c, p: 0.0, t1: VecDeque::new(), t2: VecDeque::new(), b1: VecDeque::new(), b2: VecDeque::new() }
    }

    fn replace(&mut self, x_in_b2: bool) {
        let t1 = self.t1.len();
        let t1 = t1 as f64;
        if t1 >= 1.0 && ((x_in_b2 && t1 == self.p) || t1 > self.p) {
            if let Some(v) = self.t1.pop_back() {
                self.b1.push_front(v);
            }
        } else if let Some(v) = self.t2.pop_back() {
            self.b2.push_front(v);
        }
    }

    /// One request; true on a hit.
    pub fn access(&mut self, x: u64) -> bool {
        if take(&mut self.t1, x) || take(&mut self.t2, x) {
            self.t2.push_front(x);
            return true;
        }
        if self.b1.contains(&x) {
            let d = if self.b1.len() >= self.b2.len() { 1.0 } else { self.b2.len() as f64 / self.b1.len() as f64 };
            self.p = (self.p + d).min(self.c as f64);
            self.replace(false);
            take(&mut self.b1, x);
            self.t2.push_front(x);
            return false;
        }
        if self.b2.contains(&x) {
            let d = if self.b2.len() >= self.b1.len() { 1.0 } else { self.b1.len() as f64 / self.b2.len() as f64 };
            self.p = (self.p - d).max(0.0);
            self.replace(true);
            take(&mut self.b2, x);
            self.t2.push_front(x);
            return false;
        }
        let l1 = self.t1.len() + self.b1.len();
        let total = l1 + self.t2.len() + self.b2.len();
        if l1 == self.c {
            if self.t1.len() < self.c {
                self.b1.pop_back();
                self.replace(false);
            } else {
                self.t1.pop_back();
            }
        } else if l1 < self.c && total >= self.c {
            if total == 2 * self.c {
                self.b2.pop_back();
            }
            self.replace(false);
        }
        self.t1.push_front(x);
        false
    }
}

/// The textbook CLOCK over `c` frames: a ring and a hand; a new page replaces the victim in its
/// frame... expressed the way [`super::clock::Clock`] is used by a cache: victims are removed
/// and new pages are inserted just behind the hand.
#[derive(Clone, Debug, Default)]
pub struct NaiveClockCache {
    capacity: usize,
    /// Ring in hand order starting at index `hand`.
    ring: Vec<(u64, bool)>,
    hand: usize,
}

impl NaiveClockCache {
    /// A cache of `capacity` objects.
    pub fn new(capacity: usize) -> Self {
        NaiveClockCache { capacity, ring: Vec::new(), hand: 0 }
    }

    /// One request; true on a hit.
    pub fn access(&mut self, x: u64) -> bool {
        if let Some(e) = self.ring.iter_mut().find(|e| e.0 == x) {
            e.1 = true;
            return true;
        }
        if self.ring.len() >= self.capacity {
            loop {
                if self.ring[self.hand].1 {
                    self.ring[self.hand].1 = false;
                    self.hand = (self.hand + 1) % self.ring.len();
                } else {
                    self.ring.remove(self.hand);
                    if self.hand >= self.ring.len() {
                        self.hand = 0;
                    }
                    break;
                }
            }
        }
        // Behind the hand = just before it in ring order.
        if self.ring.is_empty() {
            self.ring.push((x, false));
            self.hand = 0;
        } else {
            self.ring.insert(self.hand, (x, false));
            self.hand += 1;
        }
        false
    }
}

/// S3-FIFO over unit-size objects, straight from the paper's pseudo-code with libCacheSim's
/// rules (queues of whole objects; insertion into the main queue before the first eviction once
/// the small queue is full): queues are `VecDeque`s with the newest object at the back, and the
/// ghost queue is searched linearly.
#[derive(Debug)]
pub struct NaiveS3Fifo {
    small_cap: usize,
    main_cap: usize,
    ghost_cap: usize,
    small: VecDeque<(u64, u8)>,
    main: VecDeque<(u64, u8)>,
    ghost: VecDeque<u64>,
    has_evicted: bool,
}

impl NaiveS3Fifo {
    /// A cache of `capacity` objects, 10 % small queue, 90 % ghost.
    pub fn new(capacity: usize) -> NaiveS3Fifo {
        let small_cap = capacity / 10;
        NaiveS3Fifo {
            small_cap,
            main_cap: capacity - small_cap,
            ghost_cap: capacity * 9 / 10,
            small: VecDeque::new(),
            main: VecDeque::new(),
            ghost: VecDeque::new(),
            has_evicted: false,
        }
    }

    fn evict(&mut self) {
        self.has_evicted = true;
        if self.main.len() > self.main_cap || self.small.is_empty() {
            while let Some((x, f)) = self.main.pop_front() {
                if f == 0 {
                    return;
                }
                self.main.push_back((x, f.min(3) - 1));
            }
        } else {
            while let Some((x, f)) = self.small.pop_front() {
                if f >= 2 {
                    self.main.push_back((x, 0));
                } else {
                    if self.ghost_cap > 0 {
                        if self.ghost.len() >= self.ghost_cap {
                            self.ghost.pop_front();
                        }
                        self.ghost.push_back(x);
                    }
                    return;
                }
            }
        }
    }

    /// Accesses `x`; whether it hit.
    pub fn access(&mut self, x: u64) -> bool {
        for q in [&mut self.small, &mut self.main] {
            if let Some(e) = q.iter_mut().find(|e| e.0 == x) {
                e.1 = e.1.saturating_add(1);
                return true;
            }
        }
        let ghost = match self.ghost.iter().position(|&g| g == x) {
            Some(i) => {
                self.ghost.remove(i);
                true
            }
            None => false,
        };
        if !ghost && self.small_cap <= 1 {
            return false;
        }
        while self.small.len() + self.main.len() >= self.small_cap + self.main_cap {
            self.evict();
        }
        if ghost || (!self.has_evicted && self.small.len() >= self.small_cap) {
            self.main.push_back((x, 0));
        } else {
            self.small.push_back((x, 0));
        }
        false
    }
}
