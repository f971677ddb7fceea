//! Trace analysis a paper uses: the op × size mix, object popularity (rank-frequency, the
//! share of accesses of the most popular objects, a Zipf exponent), reuse distances (in time and
//! in distinct objects) and a per-volume breakdown. `tierwise trace stat` prints and writes it;
//! the report draws it.
//!
//! Reuse distance in objects is LRU's stack distance, so its distribution is read off the
//! one-pass LRU miss-ratio curve ([`crate::mrc::lru_mrc`]) at power-of-two sizes: the accesses
//! that hit in a cache of 2^k objects but not in one of 2^(k−1) have a stack distance in
//! (2^(k−1), 2^k].

use serde::{Deserialize, Serialize};

use crate::objects::{Mapper, ObjectMode};
use crate::sim::{FoldHash, NoProgress, Progress};
use crate::trace::{IoOp, Trace, TraceError};

/// Reads and writes of one request-size bucket.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SizeMix {
    /// Upper bound of the bucket in bytes (powers of two; the bucket holds sizes above half of it).
    pub upper_bytes: u64,
    /// Read requests.
    pub reads: u64,
    /// Write requests.
    pub writes: u64,
}

/// How accesses spread over objects.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Popularity {
    /// Objects accessed exactly once ("one-hit wonders").
    pub one_hit_objects: u64,
    /// Share of accesses that went to the most popular objects: (share of the objects, share
    /// of the accesses), for the top 0.1 %, 1 %, 10 %, 20 % and 50 %.
    pub top_shares: Vec<(f64, f64)>,
    /// Accesses of the object of each rank (1 = most popular), at log-spaced ranks.
    pub rank_frequency: Vec<(u64, u64)>,
    /// Least-squares slope of log(accesses) against log(rank) over those log-spaced points (each
    /// decade of ranks weighs alike), negated: a Zipf exponent. `None` with fewer than 3 ranks.
    pub zipf_alpha: Option<f64>,
    /// Objects by access count: (upper bound of the count, power-of-two buckets; objects).
    pub frequency_histogram: Vec<(u64, u64)>,
}

/// One volume's share of the trace.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct VolumeStats {
    /// Volume number.
    pub volume: u32,
    /// Requests.
    pub requests: u64,
    /// Reads.
    pub reads: u64,
    /// Bytes read.
    pub read_bytes: u64,
    /// Bytes written.
    pub write_bytes: u64,
    /// Distinct objects.
    pub objects: u64,
    /// Their bytes.
    pub footprint_bytes: u64,
}

/// The analysis of a trace.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TraceAnalysis {
    /// Object mode of the object-level figures.
    pub object_mode: String,
    /// Object accesses (a request covering n objects is n accesses).
    pub accesses: u64,
    /// Request sizes by operation.
    pub op_size_mix: Vec<SizeMix>,
    /// Object popularity.
    pub popularity: Popularity,
    /// Reuse time: accesses since the same object's previous access, (upper bound, power-of-two
    /// buckets; accesses). First accesses are not in it (`first_accesses`).
    pub reuse_time: Vec<(u64, u64)>,
    /// Stack distance: distinct objects accessed since the same object's previous access,
    /// itself included, (upper bound, power-of-two buckets; accesses).
    pub stack_distance: Vec<(u64, u64)>,
    /// First accesses (cold misses of any cache).
    pub first_accesses: u64,
    /// Per volume, in volume order.
    pub per_volume: Vec<VolumeStats>,
}

/// The power-of-two bucket of `v`: 0 for 0 and 1, else ceil(log2 v) (`trace stat`'s size
/// histogram uses it too).
pub(crate) fn bucket(v: u64) -> usize {
    if v <= 1 { 0 } else { (64 - (v - 1).leading_zeros()) as usize }
}

fn upper(b: usize) -> u64 {
    1u64.checked_shl(b as u32).unwrap_or(u64::MAX)
}

fn histogram(counts: &[u64]) -> Vec<(u64, u64)> {
    counts.iter().enumerate().filter(|(_, c)| **c > 0).map(|(b, c)| (upper(b), *c)).collect()
}

/// Per object while reading: accesses, index of the last access, volume, bytes.
#[derive(Clone, Copy)]
struct Seen {
    count: u64,
    last: u64,
    volume: u32,
    size: u64,
}

/// Analyses the trace at `path` (read twice: once for counts and reuse times, once for the
/// stack distances).
pub fn analyse(
    open: impl Fn() -> Result<Trace, TraceError>,
    mode: ObjectMode,
    progress: &mut dyn Progress,
) -> Result<TraceAnalysis, TraceError> {
    let mut trace = open()?;
    let mapper = Mapper::new(mode, trace.info().object_trace);
    let fixed = mapper.mode().object_size();
    let mut mix = [SizeMix::default(); 65];
    let mut reuse = [0u64; 65];
    let mut seen: hashbrown::HashMap<u64, Seen, FoldHash> = hashbrown::HashMap::with_hasher(FoldHash);
    let mut volumes: std::collections::BTreeMap<u32, VolumeStats> = std::collections::BTreeMap::new();
    let (mut accesses, mut records) = (0u64, 0u64);
    trace.for_each(u64::MAX, |rec| -> Result<(), TraceError> {
        records += 1;
        if records & 0xffff == 0 {
            progress.update(records);
        }
        let b = bucket(rec.len);
        mix[b].upper_bytes = upper(b);
        let v = volumes.entry(rec.volume).or_insert(VolumeStats { volume: rec.volume, ..VolumeStats::default() });
        v.requests += 1;
        match rec.op {
            IoOp::Read => {
                mix[b].reads += 1;
                v.reads += 1;
                v.read_bytes += rec.len;
            }
            IoOp::Write => {
                mix[b].writes += 1;
                v.write_bytes += rec.len;
            }
        }
        mapper.split(rec, |p| {
            let now = accesses;
            accesses += 1;
            let size = if fixed != 0 { fixed } else { p.req.len };
            match seen.entry(p.req.obj.0) {
                hashbrown::hash_map::Entry::Occupied(mut e) => {
                    let s = e.get_mut();
                    reuse[bucket(now - s.last)] += 1;
                    s.count += 1;
                    s.last = now;
                }
                hashbrown::hash_map::Entry::Vacant(e) => {
                    e.insert(Seen { count: 1, last: now, volume: rec.volume, size });
                }
            }
        });
        Ok(())
    })?;
    progress.update(records);
    for s in seen.values() {
        if let Some(v) = volumes.get_mut(&s.volume) {
            v.objects += 1;
            v.footprint_bytes += s.size;
        }
    }
    let mut counts: Vec<u64> = seen.values().map(|s| s.count).collect();
    drop(seen);
    let popularity = popularity(&mut counts, accesses);
    let objects = counts.len() as u64;
    let stack_distance = stack_distances(open()?, mode, objects)?;
    Ok(TraceAnalysis {
        object_mode: mapper.mode().label(),
        accesses,
        op_size_mix: mix.iter().copied().filter(|m| m.reads + m.writes > 0).collect(),
        popularity,
        reuse_time: histogram(&reuse),
        stack_distance,
        first_accesses: objects,
        per_volume: volumes.into_values().collect(),
    })
}

/// Popularity from every object's access count (sorted here, most popular first).
fn popularity(counts: &mut [u64], accesses: u64) -> Popularity {
    counts.sort_unstable_by(|a, b| b.cmp(a));
    let n = counts.len();
    let mut freq = [0u64; 65];
    for &c in counts.iter() {
        freq[bucket(c)] += 1;
    }
    let mut prefix = 0u64;
    let cumulative: Vec<u64> = counts
        .iter()
        .map(|&c| {
            prefix += c;
            prefix
        })
        .collect();
    let top_shares = [0.001, 0.01, 0.1, 0.2, 0.5]
        .iter()
        .filter(|_| n > 0 && accesses > 0)
        .map(|&f| {
            let k = ((n as f64 * f).ceil() as usize).clamp(1, n);
            (f, cumulative[k - 1] as f64 / accesses as f64)
        })
        .collect();
    // Log-spaced ranks: 1, 2, 3, … 10, 13, 16, 20, …, about 24 per decade at most, and the last.
    let mut ranks: Vec<u64> = Vec::new();
    let mut r = 1f64;
    while (r as usize) <= n {
        let k = r as u64;
        if ranks.last() != Some(&k) {
            ranks.push(k);
        }
        r *= 1.1;
    }
    if n > 0 && ranks.last() != Some(&(n as u64)) {
        ranks.push(n as u64);
    }
    let rank_frequency: Vec<(u64, u64)> = ranks.iter().map(|&k| (k, counts[k as usize - 1])).collect();
    Popularity {
        one_hit_objects: counts.iter().filter(|&&c| c == 1).count() as u64,
        top_shares,
        zipf_alpha: zipf_fit(&rank_frequency),
        rank_frequency,
        frequency_histogram: histogram(&freq),
    }
}

/// Negated least-squares slope of log(count) on log(rank).
fn zipf_fit(points: &[(u64, u64)]) -> Option<f64> {
    if points.len() < 3 {
        return None;
    }
    let xy: Vec<(f64, f64)> = points.iter().map(|&(r, c)| ((r as f64).ln(), (c.max(1) as f64).ln())).collect();
    let n = xy.len() as f64;
    let (mx, my) = (xy.iter().map(|p| p.0).sum::<f64>() / n, xy.iter().map(|p| p.1).sum::<f64>() / n);
    let sxx: f64 = xy.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = xy.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    (sxx > 0.0).then(|| -sxy / sxx)
}

/// Stack distances in power-of-two buckets of objects, from LRU's curve at 2^k objects.
fn stack_distances(mut trace: Trace, mode: ObjectMode, objects: u64) -> Result<Vec<(u64, u64)>, TraceError> {
    // Distances are counted in objects; variable-size objects are counted as one each.
    let unit_mode = match mode {
        ObjectMode::Blocks { .. } => mode,
        _ => ObjectMode::LibCacheSim { ignore_size: true },
    };
    let unit = unit_mode.object_size().max(1);
    let top = bucket(objects.max(1));
    let sizes: Vec<u64> = (0..=top).map(|k| upper(k).saturating_mul(unit)).collect();
    let m = crate::mrc::lru_mrc(&mut trace, unit_mode, &sizes, &mut NoProgress)?;
    let mut out = Vec::new();
    let mut prev_hits = 0u64;
    for (k, p) in m.points.iter().enumerate() {
        let hits = m.accesses - p.misses;
        if hits > prev_hits {
            out.push((upper(k), hits - prev_hits));
        }
        prev_hits = hits;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn popularity_of_a_known_distribution() {
        // 1000 objects, object i accessed round(1000 / i) times: Zipf with alpha 1.
        let mut counts: Vec<u64> = (1..=1000u64).map(|i| (1000.0 / i as f64).round().max(1.0) as u64).collect();
        let total: u64 = counts.iter().sum();
        let p = popularity(&mut counts, total);
        let alpha = p.zipf_alpha.unwrap();
        assert!((alpha - 1.0).abs() < 0.05, "{alpha}");
        assert_eq!(p.rank_frequency[0], (1, 1000));
        assert_eq!(p.rank_frequency.last().copied(), Some((1000, 1)));
        // The top 10 % (100 objects) hold H(100)/H(1000) ≈ 0.69 of the accesses.
        let top10 = p.top_shares.iter().find(|s| s.0 == 0.1).unwrap().1;
        assert!((top10 - 0.69).abs() < 0.02, "{top10}");
        assert_eq!(p.frequency_histogram.iter().map(|b| b.1).sum::<u64>(), 1000);
    }

    #[test]
    fn zipf_needs_three_points() {
        assert_eq!(zipf_fit(&[(1, 5), (2, 3)]), None);
    }
}
