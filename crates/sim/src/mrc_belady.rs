//! Belady's MIN (the offline optimum) as a reference line for miss-ratio curves.
//!
//! MIN needs the future, so it is no collector: it runs offline over the accesses the curve
//! was computed on (every access, or the same SHARDS sample at the same scaled sizes). On a
//! miss the object is always inserted (demand paging, as libCacheSim's `Belady`), and when
//! the cache is full the cached object whose next access lies furthest ahead is evicted
//! first (never again: first of all). For objects of one size this is the fewest misses any
//! policy that caches on every miss can have (Belady 1966; Mattson et al. 1970). A policy that
//! may decline to cache (S3-FIFO's admission) is not bound by it in theory; on every bundled
//! trace every collector's curve lies on or above it (tests/mrc_equivalence.rs). With variable
//! sizes the same rule is libCacheSim's `Belady` too, but no longer an optimum (that problem is
//! NP-hard): a reference, not a bound.
//!
//! One simulation per size, O(n log C): the next access of every access is computed once,
//! backwards, and a max-heap of (next access, object) with lazy deletion picks the victim.

use std::collections::BinaryHeap;

use crate::mrc::MrcPoint;
use crate::mrc_sampled::{CurveRunError, Sample, per_size, take_sample};
use crate::objects::ObjectMode;
use crate::sim::FoldHash;
use crate::trace::{Trace, TraceRecord};

/// No further access.
const NEVER: u64 = u64::MAX;

/// For every access, the index of the next access of the same object (`NEVER`: none).
fn next_accesses(records: &[TraceRecord]) -> Vec<u64> {
    let mut next = vec![NEVER; records.len()];
    let mut seen: hashbrown::HashMap<u64, u64, FoldHash> = hashbrown::HashMap::with_hasher(FoldHash);
    for (i, r) in records.iter().enumerate().rev() {
        if let Some(n) = seen.insert(r.key, i as u64) {
            next[i] = n;
        }
    }
    next
}

/// Misses of MIN with a cache of `capacity` (objects, or bytes when sizes vary: each record's
/// `len` is its object's size in the capacity's unit).
pub fn belady_misses(records: &[TraceRecord], next: &[u64], capacity: u64) -> u64 {
    // Per cached object: its next access (the heap entry that is current) and its size.
    let mut cached: hashbrown::HashMap<u64, (u64, u64), FoldHash> = hashbrown::HashMap::with_hasher(FoldHash);
    let mut heap: BinaryHeap<(u64, u64)> = BinaryHeap::new();
    let (mut used, mut misses) = (0u64, 0u64);
    for (r, &n) in records.iter().zip(next) {
        let id = r.key;
        if let Some(e) = cached.get_mut(&id) {
            e.0 = n;
            heap.push((n, id));
            continue;
        }
        misses += 1;
        let size = r.len.max(1);
        if size > capacity {
            continue;
        }
        while used + size > capacity {
            let Some((when, victim)) = heap.pop() else { break };
            // Entries are unique per (access, object) except NEVER, which an object gets
            // once (at its last access), so an entry is current iff it matches the table.
            if cached.get(&victim).is_some_and(|e| e.0 == when)
                && let Some((_, s)) = cached.remove(&victim)
            {
                used -= s;
            }
        }
        cached.insert(id, (n, size));
        heap.push((n, id));
        used += size;
        if heap.len() > 4 * cached.len() + 1024 {
            // Stale entries (re-accessed objects) would grow the heap to the trace's length.
            heap = cached.iter().map(|(&id, &(when, _))| (when, id)).collect();
        }
    }
    misses
}

/// MIN's curve at `sizes` (bytes, ascending) on a `rate` sample (1: every access) drawn with
/// `seed`: the reference line drawn under a curve of the same sample and sizes.
pub fn belady_mrc(
    trace: &mut Trace,
    mode: ObjectMode,
    sizes: &[u64],
    rate: f64,
    seed: u64,
    threads: usize,
) -> Result<Vec<MrcPoint>, CurveRunError> {
    let s: Sample = take_sample(trace, mode, rate, seed)?;
    let next = next_accesses(&s.records);
    let caps: Vec<u64> = sizes.iter().map(|&c| s.scaled(c, rate)).collect();
    let n = s.records.len() as u64;
    let misses = per_size(&caps, threads, |cap| Ok(if cap == 0 { n } else { belady_misses(&s.records, &next, cap) }))?;
    Ok(sizes
        .iter()
        .zip(misses)
        .map(|(&size, m)| {
            let ratio = if n == 0 { 0.0 } else { m as f64 / n as f64 };
            MrcPoint { size_bytes: size, misses: (ratio * s.accesses as f64).round() as u64, miss_ratio: ratio }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records of the object ids `ids`, one read each.
    fn records_of(ids: &[u64]) -> Vec<TraceRecord> {
        ids.iter()
            .map(|&id| TraceRecord { key: id, len: 1, op: crate::trace::IoOp::Read, ..TraceRecord::default() })
            .collect()
    }

    /// [`belady_misses`] with the next accesses computed here.
    fn belady_misses_of(records: &[TraceRecord], capacity: u64) -> u64 {
        belady_misses(records, &next_accesses(records), capacity)
    }

    /// Every eviction choice tried: the fewest misses any demand-paging policy can have.
    fn brute_force(ids: &[u64], capacity: usize) -> u64 {
        fn go(ids: &[u64], cache: &mut Vec<u64>, capacity: usize) -> u64 {
            let Some((&first, rest)) = ids.split_first() else { return 0 };
            if cache.contains(&first) {
                return go(rest, cache, capacity);
            }
            if cache.len() < capacity {
                cache.push(first);
                let m = 1 + go(rest, cache, capacity);
                cache.pop();
                return m;
            }
            let mut best = u64::MAX;
            for i in 0..cache.len() {
                let old = std::mem::replace(&mut cache[i], first);
                best = best.min(1 + go(rest, cache, capacity));
                cache[i] = old;
            }
            best
        }
        go(ids, &mut Vec::new(), capacity)
    }

    #[test]
    fn min_equals_the_best_of_every_eviction_choice() {
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        for case in 0..300 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let len = 4 + (x % 9) as usize;
            let alphabet = 2 + (x >> 8) % 5;
            let ids: Vec<u64> = (0..len)
                .map(|k| {
                    let v = x.rotate_left(k as u32 * 7) ^ (k as u64).wrapping_mul(0x9E37_79B9);
                    v % alphabet
                })
                .collect();
            for capacity in 1..=3 {
                assert_eq!(
                    belady_misses_of(&records_of(&ids), capacity as u64),
                    brute_force(&ids, capacity),
                    "case {case}: {ids:?} at {capacity}"
                );
            }
        }
    }

    #[test]
    fn libcachesim_examples() {
        // libCacheSim 0.3.5's Belady on the same strings (scripts/libcachesim_diff.py checks
        // the bundled traces).
        assert_eq!(belady_misses_of(&records_of(&[1, 2, 1]), 1), 3);
        assert_eq!(belady_misses_of(&records_of(&[1, 2, 3, 1, 2, 3]), 2), 4);
        assert_eq!(belady_misses_of(&records_of(&[1, 2, 1, 3, 1, 2]), 2), 4);
    }
}
