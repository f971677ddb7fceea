//! Request alignment: where requests start relative to a block size, and the block anchor that
//! follows from it.
//!
//! A volume partitioned with the old DOS layout starts at sector 63, so a file system's 4 KiB
//! blocks sit at byte 3584 mod 4096 of the disk, and a block trace taken below the partition
//! shows most requests there. Blocks aligned to LBA 0 would make nearly every such request
//! straddle two blocks, with a partial block at each end; real caches see whole blocks because
//! their blocks follow what they cache (bcache keys are sector extents) or are large.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::objects::{Anchor, ObjectMode};
use crate::trace::{OpenOptions, Trace, TraceError, open_trace};

/// Records read to choose an automatic anchor.
pub const ANCHOR_SAMPLE: u64 = 1_000_000;

/// Share of requests at one offset that makes it the anchor.
pub const DOMINANT_SHARE: f64 = 0.5;

/// How request start offsets fall modulo a block size.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Alignment {
    /// The block size, bytes.
    pub block_size: u64,
    /// Requests counted (block traces, non-empty).
    pub requests: u64,
    /// (offset mod block size in bytes, requests), most frequent first.
    pub residues: Vec<(u64, u64)>,
}

impl Alignment {
    /// Counts the first `limit` records of `trace` (object traces have no alignment).
    pub fn of(trace: &mut Trace, block_size: u64, limit: u64) -> Result<Alignment, TraceError> {
        let mut a = Alignment { block_size, ..Alignment::default() };
        if trace.info().object_trace {
            return Ok(a);
        }
        let mut counts = BTreeMap::new();
        trace.for_each(limit, |rec| -> Result<(), TraceError> {
            a.add(&mut counts, rec.offset, rec.len);
            Ok(())
        })?;
        a.finish(counts);
        Ok(a)
    }

    /// Counts one request into `counts`.
    pub fn add(&mut self, counts: &mut BTreeMap<u64, u64>, offset: u64, len: u64) {
        if len > 0 && self.block_size > 0 {
            self.requests += 1;
            *counts.entry(offset % self.block_size).or_insert(0) += 1;
        }
    }

    /// Sorts the counts into `residues`.
    pub fn finish(&mut self, counts: BTreeMap<u64, u64>) {
        self.residues = counts.into_iter().collect();
        self.residues.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    }

    /// Share of requests at `residue`.
    pub fn share(&self, residue: u64) -> f64 {
        let n = self.residues.iter().find(|r| r.0 == residue).map_or(0, |r| r.1);
        if self.requests == 0 { 0.0 } else { n as f64 / self.requests as f64 }
    }

    /// The offset that at least [`DOMINANT_SHARE`] of requests start at, if any.
    pub fn dominant(&self) -> Option<u64> {
        let &(residue, _) = self.residues.first()?;
        (self.share(residue) >= DOMINANT_SHARE).then_some(residue)
    }

    /// The same counts modulo a smaller power-of-two `size`.
    pub fn modulo(&self, size: u64) -> Alignment {
        let mut counts = BTreeMap::new();
        for &(r, n) in &self.residues {
            *counts.entry(r % size).or_insert(0) += n;
        }
        let mut a = Alignment { block_size: size, requests: self.requests, residues: Vec::new() };
        a.finish(counts);
        a
    }
}

/// Resolves an automatic anchor from a sample of the trace: the dominant offset modulo the
/// block size if one dominates; else, for blocks above 4 KiB, the dominant offset modulo 4 KiB
/// (the file system's block); else LBA 0. Returns the mode with a fixed anchor and, when the
/// anchor is not 0, a note for the report.
pub fn resolve_anchor(trace: &mut Trace, mode: ObjectMode) -> Result<(ObjectMode, Option<String>), TraceError> {
    let ObjectMode::Blocks { size, anchor: Anchor::Auto } = mode else { return Ok((mode, None)) };
    let a = Alignment::of(trace, size, ANCHOR_SAMPLE)?;
    let found = a.dominant().map(|r| (r, a.share(r), size)).or_else(|| {
        let small = a.modulo(4096.min(size));
        small.dominant().map(|r| (r, small.share(r), small.block_size))
    });
    let Some((at, share, modulo)) = found.filter(|f| f.0 != 0) else {
        return Ok((ObjectMode::Blocks { size, anchor: Anchor::At(0) }, None));
    };
    let anchored = ObjectMode::Blocks { size, anchor: Anchor::At(at) };
    let sectors = if at % 512 == 0 { format!(" (sector {} mod {})", at / 512, modulo / 512) } else { String::new() };
    let note = format!(
        "objects anchored at byte {at} mod {modulo}{sectors}: {:.0}% of the first {} requests start there \
         (`{}`; `--objects blocks:{}@0` aligns blocks to LBA 0 instead)",
        share * 100.0,
        a.requests,
        anchored.label(),
        tierwise_core::Bytes(size)
    );
    Ok((anchored, Some(note)))
}

/// [`resolve_anchor`] on a trace file opened for the purpose.
pub fn resolve_anchor_of(
    path: &Path,
    open: &OpenOptions,
    mode: ObjectMode,
) -> Result<(ObjectMode, Option<String>), TraceError> {
    if !matches!(mode, ObjectMode::Blocks { anchor: Anchor::Auto, .. }) {
        return Ok((mode, None));
    }
    resolve_anchor(&mut open_trace(path, open)?, mode)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dominant_offset_and_modulo() {
        let mut a = Alignment { block_size: 8192, ..Alignment::default() };
        let mut counts = BTreeMap::new();
        for i in 0..10u64 {
            let off = if i < 7 { i * 8192 + 3584 } else { i * 8192 + 7680 };
            a.add(&mut counts, off, 4096);
        }
        a.add(&mut counts, 0, 0);
        a.finish(counts);
        assert_eq!(a.requests, 10);
        assert_eq!(a.dominant(), Some(3584));
        assert!((a.share(3584) - 0.7).abs() < 1e-9);
        let small = a.modulo(4096);
        assert_eq!(small.residues, vec![(3584, 10)]);
    }
}
