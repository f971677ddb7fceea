//! Miss-ratio curves for any collector, exact or on a spatial sample.
//!
//! Exact: the collector runs as a read-allocate cache (`cache:mode=read-only,collector=X`,
//! libCacheSim's request stream) at every size, each size its own simulation: what
//! `tierwise sim` reports for that size, and what `scripts/libcachesim_diff.py` checks against
//! libCacheSim. LRU keeps its one-pass stack algorithm ([`crate::mrc::lru_mrc`]).
//!
//! Sampled: SHARDS spatial sampling (Waldspurger et al., FAST '15) with miniature simulation
//! (Waldspurger et al., USENIX ATC '17). An object is in the sample when a hash of its id (and
//! the seed) falls below `rate`, so every access of a sampled object is kept and none of the
//! others; a cache of `C` bytes is simulated as a cache of `rate × C` on the sample, and the
//! sample's miss ratio estimates the full trace's. The seed picks another sample (replicates).

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use tierwise_core::ObjectId;

use crate::mrc::{Mrc, MrcPoint, lru_mrc};
use crate::objects::{Mapper, ObjectMode};
use crate::sim::{FoldHash, NoProgress, Progress, SimConfig, simulate};
use crate::trace::{IoOp, Trace, TraceError, TraceRecord, memory::memory_trace};

/// How a curve was computed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sampling {
    /// Share of objects kept (1: every object, the exact curve).
    pub rate: f64,
    /// Seed of the sample's hash.
    pub seed: u64,
    /// Accesses in the sample.
    pub sampled_accesses: u64,
    /// Distinct objects in the sample.
    pub sampled_objects: u64,
    /// Sizes asked for that were left out: their scaled cache would hold less than one object.
    #[serde(default)]
    pub sizes_left_out: u64,
    /// The smallest size on the curve.
    #[serde(default)]
    pub smallest_bytes: u64,
}

/// The sampled curve against the exact one, over the same sizes.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct CurveError {
    /// Largest |sampled − exact| miss ratio over the sizes.
    pub max_abs: f64,
    /// Mean |sampled − exact| miss ratio (libCacheSim's and SHARDS' "MAE").
    pub mean_abs: f64,
}

/// Errors of a curve run.
#[derive(Debug, thiserror::Error)]
pub enum CurveRunError {
    /// The trace could not be read.
    #[error(transparent)]
    Trace(#[from] TraceError),
    /// A simulation of one size failed (an unknown collector, …).
    #[error("{0}")]
    Sim(String),
    /// The sample is too small for any size asked.
    #[error("{0}")]
    TooSmall(String),
}

/// SplitMix64 of the object id and the seed: uniform, so a threshold keeps `rate` of the ids.
fn sample_hash(id: u64, seed: u64) -> u64 {
    let mut z = id ^ seed.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The sampled accesses as libCacheSim-style object records (one per object access, reads),
/// the mode they are simulated in, the object unit (0: sizes vary), and the full trace's
/// accesses and distinct objects.
pub(crate) struct Sample {
    /// The sampled accesses (length 1 when every object has one size, else bytes).
    pub(crate) records: Arc<Vec<TraceRecord>>,
    pub(crate) mode: ObjectMode,
    /// Bytes of an object when every object has one size, else 0.
    pub(crate) unit: u64,
    /// Accesses and distinct objects of the whole trace.
    pub(crate) accesses: u64,
    pub(crate) objects: u64,
    footprint: u64,
    sampled_objects: u64,
}

impl Sample {
    /// A cache of `size` bytes as the sample simulates it: objects (fixed sizes) or bytes,
    /// times the sampling rate.
    pub(crate) fn scaled(&self, size: u64, rate: f64) -> u64 {
        let units = size.checked_div(self.unit).unwrap_or(size) as f64;
        (units * rate.min(1.0)).round() as u64
    }
}

/// `f` of every size in `jobs`, `threads` at a time, in the order of `jobs`.
pub(crate) fn per_size<T: Send>(
    jobs: &[u64],
    threads: usize,
    f: impl Fn(u64) -> Result<T, CurveRunError> + Sync,
) -> Result<Vec<T>, CurveRunError> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results = std::sync::Mutex::new((0..jobs.len()).map(|_| None).collect::<Vec<_>>());
    std::thread::scope(|scope| {
        for _ in 0..threads.clamp(1, jobs.len().max(1)) {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(&job) = jobs.get(i) else { break };
                    let r = f(job);
                    if let Ok(mut v) = results.lock() {
                        v[i] = Some(r);
                    }
                }
            });
        }
    });
    let results = results.into_inner().map_err(|_| CurveRunError::Sim("a worker panicked".into()))?;
    results.into_iter().map(|r| r.unwrap_or_else(|| Err(CurveRunError::Sim("a size did not run".into())))).collect()
}

pub(crate) fn take_sample(trace: &mut Trace, mode: ObjectMode, rate: f64, seed: u64) -> Result<Sample, TraceError> {
    let mapper = Mapper::new(mode, trace.info().object_trace);
    let (unit, sim_mode) = match mapper.mode() {
        ObjectMode::Blocks { size, .. } => (size, ObjectMode::LibCacheSim { ignore_size: true }),
        ObjectMode::LibCacheSim { ignore_size: true } => (1, ObjectMode::LibCacheSim { ignore_size: true }),
        _ => (0, ObjectMode::LibCacheSim { ignore_size: false }),
    };
    let threshold = if rate >= 1.0 { u64::MAX } else { (rate * 2f64.powi(64)) as u64 };
    let mut seen: hashbrown::HashMap<u64, u64, FoldHash> = hashbrown::HashMap::with_hasher(FoldHash);
    let (mut records, mut accesses, mut sampled_objects) = (Vec::new(), 0u64, 0u64);
    let mut rec = TraceRecord::default();
    while trace.next(&mut rec)? {
        mapper.split(&rec, |p| {
            accesses += 1;
            let ObjectId(id) = p.req.obj;
            let size = if unit == 0 { p.req.len.max(1) } else { unit };
            let first = seen.insert(id, size).is_none();
            if rate >= 1.0 || sample_hash(id, seed) < threshold {
                sampled_objects += u64::from(first);
                let len = if unit == 0 { size } else { 1 };
                records.push(TraceRecord { time_ns: rec.time_ns, op: IoOp::Read, volume: 0, offset: 0, len, key: id });
            }
        });
    }
    let footprint = seen.values().sum();
    Ok(Sample {
        records: Arc::new(records),
        mode: sim_mode,
        unit,
        accesses,
        objects: seen.len() as u64,
        footprint,
        sampled_objects,
    })
}

/// Misses of `collector` as a read-allocate cache of `capacity` (objects when every object
/// has one size, else bytes) on the sample.
fn simulate_size(s: &Sample, base: &SimConfig, collector: &str, capacity: u64) -> Result<(u64, u64), CurveRunError> {
    if capacity == 0 {
        return Ok((s.records.len() as u64, s.records.len() as u64));
    }
    let mut cfg = base.clone();
    cfg.arch = format!("cache:mode=read-only,collector={collector}");
    cfg.objects = s.mode;
    cfg.ssd_bytes = capacity;
    let mut t = memory_trace(Arc::clone(&s.records), "sample", false);
    let r = simulate(&mut t, &cfg, &mut NoProgress).map_err(|e| CurveRunError::Sim(e.to_string()))?;
    Ok((r.request_misses, r.request_hits + r.request_misses))
}

/// The miss-ratio curve of `collector` at `sizes` (bytes), on a `rate` sample (1: exact) drawn
/// with `seed`, sizes simulated `threads` at a time under `base` (an untimed model).
#[expect(clippy::too_many_arguments, reason = "the curve's inputs, each a plain value")]
pub fn collector_mrc(
    trace: &mut Trace,
    mode: ObjectMode,
    sizes: &[u64],
    collector: &str,
    rate: f64,
    seed: u64,
    base: &SimConfig,
    threads: usize,
    progress: &mut dyn Progress,
) -> Result<Mrc, CurveRunError> {
    let mut sizes = sizes.to_vec();
    sizes.sort_unstable();
    sizes.dedup();
    let s = take_sample(trace, mode, rate, seed)?;
    progress.update(s.accesses);
    let scaled = |size: u64| s.scaled(size, rate);
    // A size whose scaled cache holds less than one object (fixed sizes; a byte for variable
    // ones), or fewer than the policy needs to work as designed (S3-FIFO's small queue), is
    // below what the sample can tell: it is left out, and said (`smallest_bytes`).
    let least = tierwise_core::collector::collector_info(collector).map_or(1, |c| c.min_objects);
    let least = if s.unit == 0 { 1 } else { least };
    let all = sizes.len();
    sizes.retain(|&c| rate >= 1.0 || scaled(c) >= least);
    if sizes.is_empty() && all > 0 {
        return Err(CurveRunError::TooSmall(format!(
            "no size on the curve: at a {}% sample the trace keeps {} objects, and {collector} needs a scaled \
             cache of at least {least} to work as designed; sample more (--sample) or ask for larger sizes",
            rate * 100.0,
            s.sampled_objects
        )));
    }
    let smallest_bytes = sizes.first().copied().unwrap_or(0);
    let points: Vec<(u64, u64)> = if collector == "lru" {
        // LRU: the one-pass stack algorithm over the sample, at the scaled sizes.
        let cap: Vec<u64> = sizes.iter().map(|&c| scaled(c)).collect();
        let mut t = memory_trace(Arc::clone(&s.records), "sample", false);
        let m = lru_mrc(&mut t, s.mode, &cap, &mut NoProgress)?;
        let by_size: std::collections::HashMap<u64, u64> = m.points.iter().map(|p| (p.size_bytes, p.misses)).collect();
        cap.iter().map(|c| (by_size.get(c).copied().unwrap_or(m.accesses), m.accesses)).collect()
    } else {
        let jobs: Vec<u64> = sizes.iter().map(|&c| scaled(c)).collect();
        per_size(&jobs, threads, |cap| simulate_size(&s, base, collector, cap))?
    };
    let mrc_points = sizes
        .iter()
        .zip(&points)
        .map(|(&size, &(misses, n))| {
            // Over the sample's own accesses (fixed-rate SHARDS). SHARDS-adj (over the accesses
            // a sample of this rate should have had) was measured: better on CloudPhysics, worse
            // on ARC OLTP's few hot blocks (docs/MODELS.md), so not used.
            let ratio = if n == 0 { 0.0 } else { misses as f64 / n as f64 };
            MrcPoint { size_bytes: size, misses: (ratio * s.accesses as f64).round() as u64, miss_ratio: ratio }
        })
        .collect();
    let footprint = if s.unit == 0 { s.footprint } else { s.objects * s.unit };
    let mrc = Mrc {
        build: crate::stamp::build(),
        trace: trace.path().to_string(),
        accesses: s.accesses,
        objects: s.objects,
        footprint_bytes: footprint,
        cold_misses: s.objects,
        points: mrc_points,
        collector: collector.to_string(),
        sampling: (rate < 1.0).then_some(Sampling {
            rate,
            seed,
            sampled_accesses: s.records.len() as u64,
            sampled_objects: s.sampled_objects,
            sizes_left_out: (all - sizes.len()) as u64,
            smallest_bytes,
        }),
        error: None,
        belady: Vec::new(),
    };
    Ok(mrc)
}

/// The error of `sampled` against `exact`, over the sizes both have.
pub fn curve_error(sampled: &Mrc, exact: &Mrc) -> CurveError {
    let diffs: Vec<f64> = sampled
        .points
        .iter()
        .filter_map(|a| {
            exact.points.iter().find(|b| b.size_bytes == a.size_bytes).map(|b| (a.miss_ratio - b.miss_ratio).abs())
        })
        .collect();
    let n = diffs.len().max(1) as f64;
    CurveError { max_abs: diffs.iter().copied().fold(0.0, f64::max), mean_abs: diffs.iter().sum::<f64>() / n }
}
