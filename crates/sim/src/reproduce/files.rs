//! What the file-level reproductions (Loris, HyCache) share: generated file workloads held in
//! memory with their setup phase and working set, and a runner for file simulations.

use super::{ReproError, RunRecord, WorkloadNote};
use crate::filesim::{FileSimConfig, WorkingSet, simulate_file_ops};
use crate::filetrace::FileOp;
use crate::filetrace::generate::FileWorkload;
use crate::sim::NoProgress;

/// A generated file workload.
pub(super) struct FileLoad {
    pub name: String,
    pub ops: Vec<FileOp>,
    /// Index of the first measured operation (the setup phase — directories, preallocated
    /// files — comes before it).
    pub measure_from: u64,
    /// Peak live bytes (Loris sizes the SSD from the disk-only working set).
    pub working_set: u64,
    pub note: WorkloadNote,
}

impl FileLoad {
    /// Generates `w`; `detail` says how it relates to the paper's benchmark.
    pub fn new(name: &str, w: &FileWorkload, seed: u64, detail: String) -> FileLoad {
        let ops = w.collect(seed);
        let measure_from = crate::filetrace::setup_len(&ops) as u64;
        let working_set = WorkingSet::of(&ops).peak_bytes;
        let note = WorkloadNote {
            name: name.into(),
            kind: "SYNTHETIC file workload (seeded generator; the paper ran the benchmark itself)".into(),
            detail: format!(
                "{detail}; {} operations, {} of them setup; working set {}",
                ops.len(),
                measure_from,
                tierwise_core::Bytes(working_set)
            ),
        };
        FileLoad { name: name.into(), ops, measure_from, working_set, note }
    }
}

/// One file simulation of a reproduction.
pub(super) struct FileJob {
    pub load: usize,
    pub label: String,
    pub cfg: FileSimConfig,
    pub ssd_fraction: f64,
}

/// Runs the jobs on `threads` threads; records come back in job order.
pub(super) fn run_file_jobs(
    loads: &[FileLoad],
    jobs: &[FileJob],
    threads: usize,
    progress: &(dyn Fn(&str, usize, usize) + Sync),
) -> Result<Vec<RunRecord>, ReproError> {
    super::run_parallel(
        jobs,
        threads,
        |job| (loads[job.load].name.clone(), job.label.clone(), job.ssd_fraction),
        |job, label| {
            let load = &loads[job.load];
            simulate_file_ops(&load.ops, &load.name, &job.cfg, &mut NoProgress)
                .map_err(|e| ReproError::Sim { label, source: Box::new(e) })
        },
        progress,
    )
}
