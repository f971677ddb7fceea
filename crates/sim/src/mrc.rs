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

use tierwise_core::object_table::ObjectTable;

use crate::objects::{Mapper, ObjectMode};
use crate::sim::Progress;
use crate::trace::{Trace, TraceError};

/// The weight a Fenwick tree sums: object counts (u32, when every object has one size) or
/// bytes (u64).
pub trait Weight: Copy + Default + Send {
    /// a + b (wrapping).
    fn add(self, b: Self) -> Self;
    /// a - b (wrapping).
    fn sub(self, b: Self) -> Self;
    /// As u64.
    fn get(self) -> u64;
    /// From u64 (truncating; callers keep values in range).
    fn from_u64(v: u64) -> Self;
}

macro_rules! weight {
    ($($t:ty),+) => {$(
        impl Weight for $t {
            #[inline]
            fn add(self, b: Self) -> Self {
                self.wrapping_add(b)
            }
            #[inline]
            fn sub(self, b: Self) -> Self {
                self.wrapping_sub(b)
            }
            #[inline]
            fn get(self) -> u64 {
                u64::from(self)
            }
            #[inline]
            fn from_u64(v: u64) -> Self {
                v as $t
            }
        }
    )+};
}

weight!(u32, u64);

/// A Fenwick tree over time positions 1..=n.
struct Fenwick<W> {
    tree: Vec<W>,
}

impl<W: Weight> Fenwick<W> {
    fn new(n: usize) -> Fenwick<W> {
        Fenwick { tree: vec![W::default(); n + 1] }
    }
    #[inline]
    fn add(&mut self, mut i: usize, v: W) {
        while i < self.tree.len() {
            self.tree[i] = self.tree[i].add(v);
            i += i & i.wrapping_neg();
        }
    }
    #[inline]
    fn sub(&mut self, mut i: usize, v: W) {
        while i < self.tree.len() {
            self.tree[i] = self.tree[i].sub(v);
            i += i & i.wrapping_neg();
        }
    }
    /// Sum of positions 1..=i.
    #[inline]
    fn prefix(&self, mut i: usize) -> W {
        let mut s = W::default();
        while i > 0 {
            s = s.add(self.tree[i]);
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
    /// The build that computed it (see [`crate::stamp`]); empty in files written before builds
    /// were recorded.
    #[serde(default)]
    pub build: String,
    /// The trace file.
    #[serde(default)]
    pub trace: String,
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
    /// The collector the curve is of (files written before other collectors had curves: LRU).
    #[serde(default = "lru")]
    pub collector: String,
    /// The spatial sample it was computed on; absent: every access (the exact curve).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampling: Option<crate::mrc_sampled::Sampling>,
    /// Its error against the exact curve, when that was computed too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<crate::mrc_sampled::CurveError>,
    /// Belady's MIN at the same sizes on the same accesses (`mrc --belady`): the offline
    /// optimum for objects of one size ([`crate::mrc_belady`]); empty when not asked for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub belady: Vec<MrcPoint>,
}

fn lru() -> String {
    "lru".into()
}

impl Mrc {
    /// `mrc.csv`: size_bytes, miss_ratio, misses, and Belady's two when computed.
    pub fn to_csv(&self) -> String {
        use std::fmt::Write as _;
        let belady = !self.belady.is_empty();
        let mut csv = String::from("size_bytes,miss_ratio,misses");
        csv.push_str(if belady { ",belady_miss_ratio,belady_misses\n" } else { "\n" });
        for (i, p) in self.points.iter().enumerate() {
            let _ = write!(csv, "{},{:.6},{}", p.size_bytes, p.miss_ratio, p.misses);
            if let Some(b) = self.belady.get(i).filter(|_| belady) {
                let _ = write!(csv, ",{:.6},{}", b.miss_ratio, b.misses);
            }
            csv.push('\n');
        }
        csv
    }
}

/// Computes the LRU miss-ratio curve at `sizes` (bytes, any order) in one pass. Every access
/// counts, writes included (LRU with allocation on every access).
pub fn lru_mrc(
    trace: &mut Trace,
    mode: ObjectMode,
    sizes: &[u64],
    progress: &mut dyn Progress,
) -> Result<Mrc, TraceError> {
    let mut sizes: Vec<u64> = sizes.to_vec();
    sizes.sort_unstable();
    sizes.dedup();
    let mapper = Mapper::new(mode, trace.info().object_trace);
    let unit = match mapper.mode() {
        ObjectMode::Blocks { size, .. } => size,
        ObjectMode::LibCacheSim { ignore_size: true } => 1,
        _ => 0,
    };
    if unit != 0 {
        // Every object has the same size: count objects in a compact u32 tree; a cache of C
        // bytes holds floor(C / unit) objects.
        let units: Vec<u64> = sizes.iter().map(|s| s / unit).collect();
        let mut m = one_pass::<u32>(trace, &mapper, &units, |_| 1, progress)?;
        m.footprint_bytes = m.objects * unit;
        for (p, &s) in m.points.iter_mut().zip(&sizes) {
            p.size_bytes = s;
        }
        Ok(m)
    } else {
        one_pass::<u64>(trace, &mapper, &sizes, |len| len, progress)
    }
}

/// Per object: its last time position and its weight.
#[derive(Clone, Copy, Debug, Default)]
struct Last {
    pos: u32,
    weight: u32,
}

fn one_pass<W: Weight>(
    trace: &mut Trace,
    mapper: &Mapper,
    sizes: &[u64],
    weight_of: impl Fn(u64) -> u64,
    progress: &mut dyn Progress,
) -> Result<Mrc, TraceError> {
    let mut last: ObjectTable<Last> = ObjectTable::new();
    let mut who: Vec<u32> = vec![0; (1 << 16) + 1];
    let mut tree: Fenwick<W> = Fenwick::new(1 << 16);
    let mut now: usize = 0;
    let mut total: u64 = 0;
    // hits_from[k]: accesses that hit for every size >= sizes[k].
    let mut hits_from = vec![0u64; sizes.len()];
    let mut accesses = 0u64;
    let mut cold = 0u64;
    let mut footprint = 0u64;
    let mut records = 0u64;
    trace.for_each_ahead(u64::MAX, (8, 24), |rec, near, far| -> Result<(), TraceError> {
        records += 1;
        if records & 0xffff == 0 {
            progress.update(records);
        }
        if let Some(a) = far {
            last.prefetch(mapper.first_object(a));
        }
        if let Some(a) = near {
            last.prefetch_entry(mapper.first_object(a));
        }
        mapper.split(rec, |p| {
            accesses += 1;
            let weight = weight_of(p.req.len).min(u64::from(u32::MAX));
            if now + 1 > tree.capacity() {
                compact(&mut tree, &mut who, &mut last, &mut now);
            }
            now += 1;
            let slot = match last.get(p.req.obj) {
                Some(s) => {
                    let l = *last.meta(s);
                    let old_pos = l.pos as usize;
                    let old_w = u64::from(l.weight);
                    let distance = total - tree.prefix(old_pos).get();
                    let need = distance.saturating_add(old_w);
                    let k = sizes.partition_point(|&s| s < need);
                    if k < sizes.len() {
                        hits_from[k] += 1;
                    }
                    tree.sub(old_pos, W::from_u64(old_w));
                    total -= old_w;
                    s
                }
                None => {
                    cold += 1;
                    footprint += weight;
                    last.insert(p.req.obj, Last::default())
                }
            };
            *last.meta_mut(slot) = Last { pos: now as u32, weight: weight as u32 };
            tree.add(now, W::from_u64(weight));
            total += weight;
            who[now] = slot.0;
        });
        Ok(())
    })?;
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
    Ok(Mrc {
        build: crate::stamp::build(),
        trace: trace.path().to_string(),
        accesses,
        objects: last.len() as u64,
        footprint_bytes: footprint,
        cold_misses: cold,
        points,
        collector: lru(),
        sampling: None,
        error: None,
        belady: Vec::new(),
    })
}

/// Renumbers the live markers 1..=L in time order and sizes the tree to fit half as many again.
#[cold]
fn compact<W: Weight>(tree: &mut Fenwick<W>, who: &mut Vec<u32>, last: &mut ObjectTable<Last>, now: &mut usize) {
    let live = last.len();
    let cap = (live + live / 2 + 1024).max(1 << 16).min(u32::MAX as usize - 1);
    let mut new_who = vec![0u32; cap + 1];
    let mut new_tree = vec![W::default(); cap + 1];
    let mut n = 0usize;
    for (p, &w) in who.iter().enumerate().take(*now + 1).skip(1) {
        let slot = tierwise_core::Slot(w);
        // A position is live when its object's last access is still there.
        if (slot.idx()) < last.slot_bound() && last.meta(slot).pos as usize == p {
            n += 1;
            let l = last.meta_mut(slot);
            l.pos = n as u32;
            new_who[n] = slot.0;
            new_tree[n] = W::from_u64(u64::from(l.weight));
        }
    }
    // Build the Fenwick tree in O(n): push each node's sum to its parent.
    for i in 1..=cap {
        let j = i + (i & i.wrapping_neg());
        if j <= cap {
            new_tree[j] = new_tree[j].add(new_tree[i]);
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
        let mut f: Fenwick<u64> = Fenwick::new(16);
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
