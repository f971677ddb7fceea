//! Records held in memory as a trace (benchmarks, generated workloads replayed many times).

use std::sync::Arc;

use super::{FormatInfo, Trace, TraceError, TraceReader, TraceRecord};

/// Replays shared records.
pub struct MemoryReader {
    records: Arc<Vec<TraceRecord>>,
    at: usize,
}

impl TraceReader for MemoryReader {
    fn read(&mut self, rec: &mut TraceRecord) -> Result<bool, TraceError> {
        match self.records.get(self.at) {
            Some(r) => {
                *rec = *r;
                self.at += 1;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn read_batch(&mut self, out: &mut Vec<TraceRecord>, max: usize) -> Result<bool, TraceError> {
        let start = self.at;
        let end = (start + max).min(self.records.len());
        out.extend_from_slice(&self.records[start..end]);
        self.at = end;
        Ok(end > start)
    }
}

/// A trace over `records` read from `like`, with its format's facts and name.
pub fn memory_trace_like(records: Arc<Vec<TraceRecord>>, like: &Trace) -> Trace {
    Trace::new(Box::new(MemoryReader { records, at: 0 }), *like.info(), like.path(), false)
}

/// A trace over `records` (block records with timestamps when `has_time`).
pub fn memory_trace(records: Arc<Vec<TraceRecord>>, name: &str, has_time: bool) -> Trace {
    let info = FormatInfo { name: "memory", help: "records held in memory", object_trace: false, has_time };
    Trace::new(Box::new(MemoryReader { records, at: 0 }), info, name, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_and_single_reads_see_every_record_once() {
        let recs: Vec<TraceRecord> =
            (0..2500u64).map(|i| TraceRecord { offset: i * 4096, len: 4096, ..Default::default() }).collect();
        let recs = Arc::new(recs);
        let mut t = memory_trace(recs.clone(), "m", false);
        let mut seen = Vec::new();
        let mut batch = Vec::new();
        while t.next_batch(&mut batch, 1000).unwrap() {
            seen.append(&mut batch);
        }
        assert_eq!(seen, *recs);
        let mut t = memory_trace(recs.clone(), "m", false);
        let mut r = TraceRecord::default();
        let mut n = 0;
        while t.next(&mut r).unwrap() {
            n += 1;
        }
        assert_eq!(n, 2500);
    }
}
