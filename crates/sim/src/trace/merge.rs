//! Several block traces as one multi-tenant trace: each source becomes one volume, requests
//! interleaved by time (each source's clock starting at 0), written as an SPC trace
//! (`ASU,LBA,Size,Opcode,Timestamp`) whose ASU is the volume number given. SPC keeps volume
//! numbers as written (readers of MSR or blkparse number volumes by first appearance), so large
//! ids survive — the case issue 35's multi-volume bugs needed.

use std::io::Write;

use super::{IoOp, Trace, TraceError, TraceRecord};

/// What [`merge_to_spc`] wrote.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MergeSummary {
    /// Requests written, per source.
    pub per_source: Vec<u64>,
    /// Requests whose offset was not a multiple of 512 bytes (rounded down to a sector).
    pub unaligned: u64,
    /// Seconds from the first request to the last.
    pub duration_s: f64,
    /// The source had no timestamps: its requests were spaced 1 ms apart.
    pub spaced: bool,
}

/// Merges the first `head` requests of each source (all with `u64::MAX`), source `i` as volume
/// `volumes[i]`. Sources must be block traces with timestamps, but for one source alone (a
/// slice), whose requests are then spaced 1 ms apart if it has none.
pub fn merge_to_spc(
    sources: &mut [Trace],
    volumes: &[u32],
    head: u64,
    out: &mut dyn Write,
) -> Result<MergeSummary, TraceError> {
    let mut all: Vec<TraceRecord> = Vec::new();
    let mut summary = MergeSummary::default();
    for (t, &volume) in sources.iter_mut().zip(volumes) {
        let name = t.path().to_string();
        if t.info().object_trace {
            return Err(TraceError::Format {
                path: name,
                reason: format!("a merged trace needs block traces ({} holds objects, not addresses)", t.info().name),
            });
        }
        // Without timestamps there is nothing to interleave by: one such source alone is
        // sliced with its requests 1 ms apart (said in the summary), several are refused.
        let untimed = !t.info().has_time;
        if untimed && volumes.len() > 1 {
            return Err(TraceError::Format {
                path: name,
                reason: format!(
                    "a merged trace interleaves its sources by time and {} has no timestamps (merge it alone to slice it)",
                    t.info().name
                ),
            });
        }
        summary.spaced |= untimed;
        let start = all.len();
        t.for_each(head, |r| -> Result<(), TraceError> {
            let time_ns = if untimed { (all.len() - start) as u64 * 1_000_000 } else { r.time_ns };
            all.push(TraceRecord { volume, time_ns, ..*r });
            Ok(())
        })?;
        let t0 = all[start..].iter().map(|r| r.time_ns).min().unwrap_or(0);
        for r in &mut all[start..] {
            r.time_ns -= t0;
        }
        summary.per_source.push((all.len() - start) as u64);
    }
    all.sort_by_key(|r| (r.time_ns, r.volume));
    let io = |e: std::io::Error| TraceError::Io { path: "merged trace".into(), source: e };
    for r in &all {
        if r.offset % 512 != 0 {
            summary.unaligned += 1;
        }
        let op = if r.op == IoOp::Write { 'w' } else { 'r' };
        let (s, ns) = (r.time_ns / 1_000_000_000, r.time_ns % 1_000_000_000);
        writeln!(out, "{},{},{},{op},{s}.{ns:09}", r.volume, r.offset / 512, r.len).map_err(io)?;
    }
    summary.duration_s = all.last().map_or(0.0, |r| r.time_ns as f64 / 1e9);
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::trace::memory::memory_trace;
    use crate::trace::{OpenOptions, open::open_bytes};

    fn rec(t: u64, off: u64, write: bool) -> TraceRecord {
        TraceRecord {
            time_ns: t,
            op: if write { IoOp::Write } else { IoOp::Read },
            volume: 3,
            offset: off,
            len: 4096,
            key: 0,
        }
    }

    #[test]
    fn sources_become_volumes_interleaved_by_time_and_read_back() {
        let a = memory_trace(Arc::new(vec![rec(5_000, 0, false), rec(9_000, 8192, true)]), "a", true);
        let b = memory_trace(Arc::new(vec![rec(1_000_000_000, 1000, false), rec(1_000_004_000, 512, true)]), "b", true);
        let mut out = Vec::new();
        let s = merge_to_spc(&mut [a, b], &[17, 4000], u64::MAX, &mut out).expect("merged");
        assert_eq!(s.per_source, [2, 2]);
        assert_eq!(s.unaligned, 1);
        let text = String::from_utf8(out).expect("utf-8");
        assert_eq!(
            text,
            "17,0,4096,r,0.000000000\n4000,1,4096,r,0.000000000\n17,16,4096,w,0.000004000\n4000,1,4096,w,0.000004000\n"
        );
        let mut t = open_bytes("m.spc", text.into_bytes(), &OpenOptions::default()).expect("opens");
        let mut vols = Vec::new();
        t.for_each(u64::MAX, |r| -> Result<(), TraceError> {
            vols.push(r.volume);
            Ok(())
        })
        .expect("reads");
        assert_eq!(vols, [17, 4000, 17, 4000]);
    }

    #[test]
    fn a_source_without_timestamps_is_refused_unless_alone() {
        let a = memory_trace(Arc::new(vec![rec(0, 0, false)]), "untimed", false);
        let b = memory_trace(Arc::new(vec![rec(0, 0, false)]), "timed", true);
        let e = merge_to_spc(&mut [a, b], &[0, 1], 10, &mut Vec::new()).expect_err("refused");
        assert!(e.to_string().contains("untimed") && e.to_string().contains("no timestamps"), "{e}");
        // Alone, it is sliced, its requests 1 ms apart.
        let a = memory_trace(Arc::new(vec![rec(0, 0, false), rec(0, 4096, false)]), "untimed", false);
        let mut out = Vec::new();
        let s = merge_to_spc(&mut [a], &[0], 10, &mut out).expect("a slice");
        assert!(s.spaced);
        assert_eq!(String::from_utf8(out).expect("utf-8"), "0,0,4096,r,0.000000000\n0,8,4096,r,0.001000000\n");
    }
}
