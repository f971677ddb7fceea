//! `tierwise mrc` as a job: sizes from the footprint, then LRU's one-pass curve or any
//! collector's, exact or on a SHARDS sample.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::{JobError, ModelOptions, TraceOptions, default_objects, input, parse_ssd};
use crate::mrc::{Mrc, log_sizes, lru_mrc};
use crate::objects::{Mapper, ObjectMode};
use crate::sim::{Progress, footprint};
use crate::trace::open_trace;

/// `tierwise mrc`: a miss-ratio curve.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MrcJob {
    /// The trace file.
    pub trace: PathBuf,
    /// How the trace is read.
    #[serde(default)]
    pub trace_options: TraceOptions,
    /// How requests become objects.
    #[serde(default = "default_objects")]
    pub objects: String,
    /// Cache sizes (bytes or % of the footprint); empty: `points` log-spaced sizes.
    #[serde(default)]
    pub sizes: Vec<String>,
    /// Log-spaced sizes when `sizes` is empty.
    #[serde(default = "default_points")]
    pub points: usize,
    /// The collector whose curve it is (`lru`, `arc`, `fifo`, `clock`, `lfu`, … with knobs as
    /// `arc` takes them); LRU uses its one-pass stack algorithm, the others one simulation per
    /// size.
    #[serde(default = "default_collector")]
    pub collector: String,
    /// SHARDS spatial sampling: the share of objects kept, in (0, 1]; 1 = exact.
    #[serde(default = "default_sample")]
    pub sample: f64,
    /// Seed of the sample (another seed, another sample).
    #[serde(default = "default_sample_seed")]
    pub seed: u64,
    /// Also compute the exact curve and state the sampled curve's error against it.
    #[serde(default)]
    pub exact_error: bool,
    /// Threads for the per-size simulations (0: every core).
    #[serde(default)]
    pub threads: usize,
    /// Also compute Belady's MIN at the same sizes on the same accesses (the reference line).
    #[serde(default)]
    pub belady: bool,
}

fn default_collector() -> String {
    "lru".into()
}
fn default_sample() -> f64 {
    1.0
}
fn default_sample_seed() -> u64 {
    1
}

fn default_points() -> usize {
    64
}

/// What an MRC job produced.
#[derive(Clone, Debug)]
pub struct MrcOutcome {
    /// The curve (`mrc.json`).
    pub mrc: Mrc,
    /// The object mode used (after anchoring).
    pub mode: ObjectMode,
    /// What anchoring decided, if anything.
    pub note: Option<String>,
}

/// Runs an MRC job.
pub fn run_mrc(job: &MrcJob, progress: &mut dyn Progress) -> Result<MrcOutcome, JobError> {
    let open = job.trace_options.open_options();
    let mode = ObjectMode::parse(&job.objects).map_err(|e| input("objects", e))?;
    let (mode, note) = crate::alignment::resolve_anchor_of(&job.trace, &open, mode)?;
    let mut t = open_trace(&job.trace, &open)?;
    let mode = Mapper::new(mode, t.info().object_trace).mode();
    let unit = mode.object_size().max(1);
    let needs_fp = job.sizes.is_empty() || job.sizes.iter().any(|s| s.contains('%'));
    let fp = if needs_fp { footprint(&mut t, mode)?.1 } else { 0 };
    let sizes: Vec<u64> = if job.sizes.is_empty() {
        log_sizes(unit, fp, job.points.max(2), unit)
    } else {
        job.sizes.iter().map(|s| parse_ssd(s, "sizes").map(|x| x.resolve(fp, unit))).collect::<Result<Vec<_>, _>>()?
    };
    if !(job.sample > 0.0 && job.sample <= 1.0) {
        return Err(JobError::Input(format!("sample {}: the share of objects kept, within (0, 1]", job.sample)));
    }
    let threads =
        if job.threads == 0 { std::thread::available_parallelism().map_or(1, |n| n.get()) } else { job.threads };
    let with_belady = |mut mrc: Mrc| -> Result<MrcOutcome, JobError> {
        if job.belady {
            let on_curve: Vec<u64> = mrc.points.iter().map(|p| p.size_bytes).collect();
            let mut t = open_trace(&job.trace, &open)?;
            mrc.belady = crate::mrc_belady::belady_mrc(&mut t, mode, &on_curve, job.sample, job.seed, threads)
                .map_err(curve_error)?;
        }
        Ok(MrcOutcome { mrc, mode, note: note.clone() })
    };
    if job.collector == "lru" && job.sample >= 1.0 {
        let mut t = open_trace(&job.trace, &open)?;
        return with_belady(lru_mrc(&mut t, mode, &sizes, progress)?);
    }
    let collector = job.collector.split(':').next().unwrap_or("");
    tierwise_core::collector::collector_info(collector).map_err(|e| input("collector", e))?;
    let base = ModelOptions { timing: "none".into(), ..ModelOptions::default() }.base()?;
    let curve = |rate: f64, progress: &mut dyn Progress| -> Result<Mrc, JobError> {
        let mut t = open_trace(&job.trace, &open)?;
        crate::mrc_sampled::collector_mrc(
            &mut t,
            mode,
            &sizes,
            &job.collector,
            rate,
            job.seed,
            &base,
            threads,
            progress,
        )
        .map_err(curve_error)
    };
    let mut mrc = curve(job.sample, progress)?;
    if job.exact_error && job.sample < 1.0 {
        let exact = curve(1.0, &mut crate::sim::NoProgress)?;
        mrc.error = Some(crate::mrc_sampled::curve_error(&mrc, &exact));
    }
    with_belady(mrc)
}

fn curve_error(e: crate::mrc_sampled::CurveRunError) -> JobError {
    match e {
        crate::mrc_sampled::CurveRunError::Trace(t) => JobError::from(t),
        crate::mrc_sampled::CurveRunError::Sim(m) | crate::mrc_sampled::CurveRunError::TooSmall(m) => {
            JobError::Input(m)
        }
    }
}
