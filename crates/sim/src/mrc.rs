//! One-pass LRU miss-ratio curves (Mattson's stack algorithm with a Fenwick tree, after
//! Bennett and Kruskal / Olken).
//!
//! Each object's last access holds a marker, weighted by its size, at that access's time
//! position in a Fenwick tree. On a re-access, the bytes of the distinct objects used since are
//! the markers after the object's previous position: one prefix query, O(log n). An LRU cache
//! of `C` bytes hits iff that distance plus the object's own size is at most `C` — the cache is
//! always the longest prefix of the recency stack that fits. So one pass yields the miss count
//! at every size. Time positions are compacted when they run out, keeping the tree at about
//! twice the number of live objects.
//!
//! Exact for fixed-size objects (blocks, `lcs:ignore-size`); with variable sizes it differs
//! from a size-by-size libCacheSim run only for objects larger than the cache and requests whose
//! size differs from the object's cached size (libCacheSim keeps the size at insertion).

use serde::{Deserialize, Serialize};

use crate::objects::{Mapper, ObjectMode};
use crate::sim::{FoldHash, Progress};
use crate::trace::{Trace, TraceError, TraceRecord};

/// A Fenwick tree of byte counts over time positions 1..=n.
struct Fenwick {
    tree: Vec<u64>,
}

impl Fenwick {
    fn new(n: usize) -> Fenwick {
        Fenwick { tree: vec![0; n + 1] }
    }
    #[inline]
    fn add(&mut self, mut i: usize, v: u64) {
        while i < self.tree.len() {
            self.tree[i] = self.tree[i].wrapping_add(v);
            i += i & i.wrapping_neg();
        }
    }
    #[inline]
    fn sub(&mut self, mut i: usize, v: u64) {
        while i < self.tree.len() {
            self.tree[i] = self.tree[i].wrapping_sub(v);
            i += i & i.wrapping_neg();
        }
    }
    /// Sum of positions 1..=i.
    #[inline]
    fn prefix(&self, mut i: usize) -> u64 {
        let mut s = 0u64;
        while i > 0 {
            s = s.wrapping_add(self.tree[i]);
            i &= i - 1;
        }
        s
    }
    fn capacity(&self) -> usize {
        self.tree.len() - 1
    }
}

/// One point of the curve.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct MrcPoint {
    /// Cache size in bytes.
    pub size_bytes: u64,
    /// Misses at that size.
    pub misses: u64,
    /// Misses / accesses.
    pub miss_ratio: f64,
}

/// The curve and what it was computed over.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Mrc {
    /// Accesses counted (blocks or objects).
    pub accesses: u64,
    /// Distinct objects.
    pub objects: u64,
    /// Their bytes.
    pub footprint_bytes: u64,
    /// Cold (first-access) misses, a floor for every size.
    pub cold_misses: u64,
    /// The points, by size.
    pub points: Vec<MrcPoint>,
}

/// Computes the LRU miss-ratio curve at `sizes` (bytes, any order) in one pass. Every access
/// counts, writes included (LRU with allocation on every access).
pub fn lru_mrc(trace: &mut Trace, mode: ObjectMode, sizes: &[u64], progress: &mut dyn Progress) -> Result<Mrc, TraceError> {
    let mut sizes: Vec<u64> = sizes.to_vec();
    sizes.sort_unstable();
    sizes.dedup();
    let mapper = Mapper::new(mode, trace.info().object_trace);
    let fixed = mapper.mode().object_size();
    // Per object: (position, size).
    let mut last: hashbrown::HashMap<u64, (u32, u64), FoldHash> = hashbrown::HashMap::with_hasher(FoldHash);
    let mut who: Vec<u64> = vec![0; (1 << 16) + 1];
    let mut tree = Fenwick::new(1 << 16);
    let mut now: usize = 0;
    let mut total: u64 = 0;
    // hits_from[k]: accesses that hit for every size >= sizes[k].
    let mut hits_from = vec![0u64; sizes.len()];
    let mut accesses = 0u64;
    let mut cold = 0u64;
    let mut rec = TraceRecord::default();
    let mut records = 0u64;
    while trace.next(&mut rec)? {
        records += 1;
        if records & 0xffff == 0 {
            progress.update(records);
        }
        mapper.split(&rec, |p| {
            accesses += 1;
            let id = p.req.obj.0;
            let size = if fixed != 0 { fixed } else { p.req.len };
            if now + 1 > tree.capacity() {
                compact(&mut tree, &mut who, &mut last, &mut now);
            }
            now += 1;
            match last.get_mut(&id) {
                Some((pos, old_size)) => {
                    let p_old = *pos as usize;
                    let distance = total - tree.prefix(p_old);
                    let need = distance.saturating_add(*old_size);
                    let k = sizes.partition_point(|&s| s < need);
                    if k < sizes.len() {
                        hits_from[k] += 1;
                    }
                    tree.sub(p_old, *old_size);
                    total -= *old_size;
                    *pos = now as u32;
                    *old_size = size;
                }
                None => {
                    cold += 1;
                    last.insert(id, (now as u32, size));
                }
            }
            tree.add(now, size);
            total += size;
            who[now] = id;
        });
    }
    progress.update(records);
    let mut points = Vec::with_capacity(sizes.len());
    let mut hits = 0;
    for (k, &s) in sizes.iter().enumerate() {
        hits += hits_from[k];
        let misses = accesses - hits;
        points.push(MrcPoint {
            size_bytes: s,
            misses,
            miss_ratio: if accesses == 0 { 0.0 } else { misses as f64 / accesses as f64 },
        });
    }
    Ok(Mrc { accesses, objects: last.len() as u64, footprint_bytes: last.values().map(|v| v.1).sum(), cold_misses: cold, points })
}

/// Renumbers the live markers 1..=L in time order and sizes the tree to fit twice as many.
#[cold]
fn compact(
    tree: &mut Fenwick,
    who: &mut Vec<u64>,
    last: &mut hashbrown::HashMap<u64, (u32, u64), FoldHash>,
    now: &mut usize,
) {
    let live = last.len();
    let cap = (2 * live + 1024).max(1 << 16).min(u32::MAX as usize - 1);
    let mut new_who = vec![0u64; cap + 1];
    let mut new_tree = vec![0u64; cap + 1];
    let mut n = 0usize;
    for p in 1..=*now {
        let id = who[p];
        if let Some(entry) = last.get_mut(&id)
            && entry.0 as usize == p
        {
            n += 1;
            entry.0 = n as u32;
            new_who[n] = id;
            new_tree[n] = entry.1;
        }
    }
    // Build the Fenwick tree in O(n): push each node's sum to its parent.
    for i in 1..=cap {
        let j = i + (i & i.wrapping_neg());
        if j <= cap {
            new_tree[j] = new_tree[j].wrapping_add(new_tree[i]);
        }
    }
    tree.tree = new_tree;
    *who = new_who;
    *now = n;
}

/// `count` cache sizes spaced evenly on a log scale from `min` to `max` bytes, rounded to
/// multiples of `unit` (at least one unit).
pub fn log_sizes(min: u64, max: u64, count: usize, unit: u64) -> Vec<u64> {
    let unit = unit.max(1);
    let (lo, hi) = (min.max(unit) as f64, max.max(min).max(unit) as f64);
    let mut v: Vec<u64> = (0..count.max(1))
        .map(|i| {
            let f = if count <= 1 { 1.0 } else { i as f64 / (count - 1) as f64 };
            let s = lo * (hi / lo).powf(f);
            ((s / unit as f64).round() as u64).max(1) * unit
        })
        .collect();
    v.dedup();
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fenwick_prefix_sums() {
        let mut f = Fenwick::new(16);
        for i in 1..=16 {
            f.add(i, i as u64);
        }
        assert_eq!(f.prefix(16), 136);
        assert_eq!(f.prefix(4), 10);
        f.sub(3, 3);
        assert_eq!(f.prefix(4), 7);
    }

    #[test]
    fn log_sizes_are_increasing_multiples() {
        let s = log_sizes(4096, 1 << 30, 64, 4096);
        assert_eq!(s[0], 4096);
        assert_eq!(*s.last().unwrap(), 1 << 30);
        assert!(s.windows(2).all(|w| w[0] < w[1] && w[1] % 4096 == 0));
    }
}
