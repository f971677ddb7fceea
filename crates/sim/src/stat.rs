//! `tierwise trace stat`: what a trace holds.

use serde::{Deserialize, Serialize};

use crate::alignment::Alignment;
use crate::objects::{Mapper, ObjectMode};
use crate::sim::{FoldHash, Progress};
use crate::trace::{IoOp, Trace, TraceError};

/// Statistics of a trace.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TraceStats {
    /// File.
    pub trace: String,
    /// Format.
    pub format: String,
    /// Records.
    pub requests: u64,
    /// Reads.
    pub reads: u64,
    /// Writes.
    pub writes: u64,
    /// Bytes read.
    pub read_bytes: u64,
    /// Bytes written.
    pub write_bytes: u64,
    /// Records of length 0.
    pub zero_length: u64,
    /// Distinct volumes.
    pub volumes: u32,
    /// Seconds from the first to the last timestamp.
    pub duration_s: f64,
    /// Records whose timestamp is earlier than the previous one.
    pub out_of_order: u64,
    /// Distinct objects under the object mode.
    pub objects: u64,
    /// Their bytes (the footprint).
    pub footprint_bytes: u64,
    /// Object mode used for the footprint.
    pub object_mode: String,
    /// Request sizes: (upper bound in bytes, count) per power-of-two bucket.
    pub size_histogram: Vec<(u64, u64)>,
    /// Malformed lines skipped.
    pub skipped: u64,
    /// Request offsets modulo the block size (block traces in block mode).
    #[serde(default)]
    pub alignment: Option<Alignment>,
    /// Popularity, reuse distances, op × size mix and volumes, when asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub analysis: Option<crate::analysis::TraceAnalysis>,
}

impl TraceStats {
    /// Share of reads.
    pub fn read_fraction(&self) -> f64 {
        if self.requests == 0 { 0.0 } else { self.reads as f64 / self.requests as f64 }
    }
}

/// Reads the whole trace once.
pub fn trace_stats(trace: &mut Trace, mode: ObjectMode, progress: &mut dyn Progress) -> Result<TraceStats, TraceError> {
    let mapper = Mapper::new(mode, trace.info().object_trace);
    let fixed = mapper.mode().object_size();
    let mut s = TraceStats {
        trace: trace.path().to_string(),
        format: trace.info().name.to_string(),
        object_mode: mapper.mode().label(),
        ..TraceStats::default()
    };
    let mut seen: hashbrown::HashMap<u64, u64, FoldHash> = hashbrown::HashMap::with_hasher(FoldHash);
    let mut hist = [0u64; 65];
    let mut alignment = Alignment { block_size: fixed.max(512), ..Alignment::default() };
    let mut residues = std::collections::BTreeMap::new();
    let block_mode = matches!(mapper.mode(), ObjectMode::Blocks { .. });
    let (mut first, mut last, mut max_vol) = (None, 0u64, None::<u32>);
    trace.for_each(u64::MAX, |rec| -> Result<(), TraceError> {
        s.requests += 1;
        if s.requests & 0xffff == 0 {
            progress.update(s.requests);
        }
        match rec.op {
            IoOp::Read => {
                s.reads += 1;
                s.read_bytes += rec.len;
            }
            IoOp::Write => {
                s.writes += 1;
                s.write_bytes += rec.len;
            }
        }
        if rec.len == 0 {
            s.zero_length += 1;
        }
        if first.is_none() {
            first = Some(rec.time_ns);
        } else if rec.time_ns < last {
            s.out_of_order += 1;
        }
        last = last.max(rec.time_ns);
        max_vol = Some(max_vol.map_or(rec.volume, |v| v.max(rec.volume)));
        hist[crate::analysis::bucket(rec.len).min(64)] += 1;
        if block_mode {
            alignment.add(&mut residues, rec.offset, rec.len);
        }
        mapper.split(rec, |p| {
            let size = if fixed != 0 { fixed } else { p.req.len };
            seen.entry(p.req.obj.0).or_insert(size);
        });
        Ok(())
    })?;
    progress.update(s.requests);
    s.volumes = max_vol.map_or(0, |v| v + 1);
    s.duration_s = first.map_or(0.0, |f| (last - f) as f64 / 1e9);
    s.objects = seen.len() as u64;
    s.footprint_bytes = seen.values().sum();
    s.size_histogram = hist
        .iter()
        .enumerate()
        .filter(|(_, c)| **c > 0)
        .map(|(b, c)| (1u64.checked_shl(b as u32).unwrap_or(u64::MAX), *c))
        .collect();
    s.skipped = trace.skipped().0;
    if block_mode {
        alignment.finish(residues);
        s.alignment = Some(alignment);
    }
    Ok(s)
}
