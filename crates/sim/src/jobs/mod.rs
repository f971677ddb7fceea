//! The simulator's jobs as plain, serialisable requests: what `tierwise sim`, `compare`, `mrc`,
//! `trace stat` and `reproduce` run, with the CLI's defaults. The command line, the Python
//! package and sweeps all call these, so the same request gives the same numbers everywhere.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use tierwise_core::Nanos;
use tierwise_core::params::{parse_duration, parse_size};

use crate::compare::{CompareConfig, CompareError, Comparison, ProgressFactory, SsdSize, compare};
use crate::device::{Presets, QueueConfig};
use crate::filesim::{FileSim, FileSimConfig, WorkingSet, file_arch_allowed};
use crate::filetrace::FileTraceReader;
use crate::metrics::SimReport;
use crate::objects::{Mapper, ObjectMode};
use crate::reproduce::{ReproError, ReproOptions, Reproduction, reproduce};
use crate::sim::{Progress, SimError};
use crate::stat::TraceStats;
use crate::trace::{OpenOptions, TraceError, open_trace};
use crate::{SimConfig, Timing, simulate};

mod mrc;
pub use mrc::{MrcJob, MrcOutcome, run_mrc};

/// Outstanding requests of the main job's throughput table (a SATA disk's NCQ depth).
pub const CLOSED_DEPTH: u32 = 32;

/// The architectures `compare` runs when none are named: the baselines, the generic cache in
/// each mode, and the real systems' stand-ins.
pub const DEFAULT_ARCHS: &[&str] = &[
    "hdd-only",
    "linear",
    "cache:mode=read-only",
    "cache:mode=write-through",
    "cache:mode=write-back",
    "cache:mode=write-back,collector=arc",
    "bcache-like:cache-mode=writeback",
    "dm-cache-smq-like",
    "greendm-tiering",
    "ssd-only",
];

/// A job failure, sorted by whose fault it is.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JobError {
    /// The trace is missing, unreadable or malformed (the message names file, line and field).
    #[error(transparent)]
    Trace(#[from] TraceError),
    /// An option, size or spec is invalid (the message names it and what is allowed).
    #[error("{0}")]
    Input(String),
    /// A run failed.
    #[error("{0}")]
    Run(String),
}

impl JobError {
    /// `trace`, `input` or `run`: lets bindings pick an exception class.
    pub fn kind(&self) -> &'static str {
        match self {
            JobError::Trace(_) => "trace",
            JobError::Input(_) => "input",
            JobError::Run(_) => "run",
        }
    }
}

impl From<SimError> for JobError {
    fn from(e: SimError) -> JobError {
        match e {
            SimError::Trace(t) => JobError::Trace(t),
            SimError::Config(_) | SimError::Device(_) | SimError::Unsupported(_) => JobError::Input(e.to_string()),
            other => JobError::Run(other.to_string()),
        }
    }
}

impl From<CompareError> for JobError {
    fn from(e: CompareError) -> JobError {
        match e {
            CompareError::Trace(t) => JobError::Trace(t),
            CompareError::Input(m) => JobError::Input(m),
            CompareError::Run { arch, size, source } => match JobError::from(*source) {
                JobError::Input(m) => JobError::Input(format!("{arch} at {size}: {m}")),
                JobError::Trace(t) => JobError::Trace(t),
                JobError::Run(m) => JobError::Run(format!("{arch} at {size}: {m}")),
            },
        }
    }
}

impl From<ReproError> for JobError {
    fn from(e: ReproError) -> JobError {
        match e {
            ReproError::UnknownTarget(_) | ReproError::Options(_) => JobError::Input(e.to_string()),
            other => JobError::Run(other.to_string()),
        }
    }
}

/// An invalid option, named by its command-line flag (`--read-weight`; `read_weight` in Python).
fn input(what: &str, e: impl std::fmt::Display) -> JobError {
    JobError::Input(format!("--{what}: {e}"))
}

/// How a trace is read.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TraceOptions {
    /// Format name (detected when absent).
    pub format: Option<String>,
    /// Count and skip malformed lines instead of stopping.
    pub skip_bad_lines: bool,
}

impl TraceOptions {
    /// The reader's options.
    pub fn open_options(&self) -> OpenOptions {
        OpenOptions { format: self.format.clone(), skip_bad_lines: self.skip_bad_lines }
    }
}

/// The model: objects, timing, devices and run limits (the CLI's shared flags, same defaults).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ModelOptions {
    /// blocks[:SIZE[@ANCHOR]], requests, lcs or lcs:ignore-size.
    pub objects: String,
    /// none, open[:SPEEDUP], closed[:DEPTH] or auto.
    pub timing: String,
    /// HDD preset.
    pub hdd: String,
    /// SSD preset.
    pub ssd_model: String,
    /// RAM preset.
    pub ram: String,
    /// A TOML file merged over the presets.
    pub devices: Option<PathBuf>,
    /// mq-deadline, none or fifo.
    pub hdd_queue: String,
    /// Spin-down idle time (`preset` for the preset's).
    pub spin_down: Option<String>,
    /// Endurance read weight.
    pub read_weight: f64,
    /// Write back all dirty data at the end.
    pub flush: bool,
    /// Stop after this many requests.
    pub max_requests: Option<u64>,
    /// Stop admitting requests after this much simulated time.
    pub max_time: Option<String>,
    /// Check the engine's invariants every N requests.
    pub check_every: u64,
    /// Direct I/O unit (e.g. 4KiB; `0`: requests as given).
    pub io_align: String,
}

impl Default for ModelOptions {
    fn default() -> ModelOptions {
        ModelOptions {
            objects: "blocks:4KiB".into(),
            timing: "auto".into(),
            hdd: "wd5000aaks".into(),
            ssd_model: "vertex3".into(),
            ram: "ddr3".into(),
            devices: None,
            hdd_queue: "mq-deadline".into(),
            spin_down: None,
            read_weight: 0.1,
            flush: false,
            max_requests: None,
            max_time: None,
            check_every: 0,
            io_align: "0".into(),
        }
    }
}

/// The built-in presets with the `--devices` TOML file, when given, merged over them.
pub fn load_presets(devices: Option<&std::path::Path>) -> Result<Presets, JobError> {
    match devices {
        Some(p) => {
            let text = std::fs::read_to_string(p).map_err(|e| input(&format!("devices {}", p.display()), e))?;
            Presets::with_overrides(&text, &p.display().to_string()).map_err(|e| input("devices", e))
        }
        None => Ok(Presets::builtin()),
    }
}

impl ModelOptions {
    /// The simulator configuration these options describe (architecture and size unset).
    pub fn base(&self) -> Result<SimConfig, JobError> {
        let objects = ObjectMode::parse(&self.objects).map_err(|e| input("objects", e))?;
        let timing_text = if self.timing == "auto" { "open" } else { self.timing.as_str() };
        let timing = Timing::parse(timing_text).map_err(|e| input("timing", e))?;
        let presets = load_presets(self.devices.as_deref())?;
        let devices = presets.set(&self.hdd, &self.ssd_model, &self.ram).map_err(|e| JobError::Input(e.to_string()))?;
        let spin_down = match self.spin_down.as_deref() {
            None => None,
            Some("preset") => Some(Nanos::from_secs_f64(devices.hdd.spin_down_after_s)),
            Some(d) => Some(parse_duration(d).map_err(|e| input("spin-down", e))?),
        };
        if !(self.read_weight >= 0.0 && self.read_weight <= 1.0) {
            return Err(JobError::Input(format!(
                "--read-weight {}: expected a number from 0 to 1 (GreenDM used 0.1 and 0.01)",
                self.read_weight
            )));
        }
        let mut c = SimConfig::new("hdd-only", 1);
        c.objects = objects;
        c.timing = timing;
        c.devices = devices;
        c.spin_down = spin_down;
        c.read_weight = self.read_weight;
        c.flush_at_end = self.flush;
        c.max_requests = self.max_requests;
        c.max_time = match &self.max_time {
            Some(t) => Some(parse_duration(t).map_err(|e| input("max-time", e))?),
            None => None,
        };
        c.check_every = self.check_every;
        c.hdd_queue = QueueConfig::parse(&self.hdd_queue).map_err(|e| input("hdd-queue", e))?;
        c.devices.io_align = match parse_size(&self.io_align) {
            Ok(a) if a == 0 || (a.is_power_of_two() && a >= 512) => a,
            _ => {
                return Err(input(
                    "io-align",
                    format!("{}: expected 0 or a power of two from 512 bytes, such as 4KiB", self.io_align),
                ));
            }
        };
        Ok(c)
    }
}

fn parse_ssd(s: &str, what: &str) -> Result<SsdSize, JobError> {
    SsdSize::parse(s).map_err(|e| input(what, e))
}

/// `tierwise sim`: one architecture at one SSD size.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimJob {
    /// The trace file.
    pub trace: PathBuf,
    /// Architecture spec.
    pub arch: String,
    /// SSD size: bytes or a share of the footprint.
    pub ssd: String,
    /// How the trace is read.
    #[serde(default)]
    pub trace_options: TraceOptions,
    /// The model.
    #[serde(default)]
    pub model: ModelOptions,
    /// File traces: the RAM buffer cache in front of the tiers.
    #[serde(default = "default_ram_cache")]
    pub ram_cache: String,
    /// File traces: directories are not objects.
    #[serde(default)]
    pub no_dirs: bool,
    /// Where measuring starts. File traces: `auto` (after the setup phase) or an operation
    /// index. Block traces: `auto` (= 0, everything), a request index or a share of the
    /// requests (`20%`); the requests before it warm the cache up.
    #[serde(default = "default_measure_from")]
    pub measure_from: String,
}

fn default_ram_cache() -> String {
    "64MiB".into()
}
fn default_measure_from() -> String {
    "auto".into()
}

impl SimJob {
    /// A job with every option at its default.
    pub fn new(trace: impl Into<PathBuf>, arch: &str, ssd: &str) -> SimJob {
        SimJob {
            trace: trace.into(),
            arch: arch.into(),
            ssd: ssd.into(),
            trace_options: TraceOptions::default(),
            model: ModelOptions::default(),
            ram_cache: default_ram_cache(),
            no_dirs: false,
            measure_from: default_measure_from(),
        }
    }
}

/// What a sim job produced: the report and the SSD size as a share of the footprint.
#[derive(Clone, Debug)]
pub struct SimOutcome {
    /// The report (`tierwise sim --json`).
    pub report: SimReport,
    /// The size as asked for.
    pub size_label: String,
    /// The SSD as a share of the footprint (0 when unknown).
    pub size_fraction: f64,
}

/// Whether `job` names a file trace (by format or content).
pub fn is_file_job(job: &SimJob) -> Result<bool, JobError> {
    Ok(job.trace_options.format.as_deref() == Some("file")
        || (job.trace_options.format.is_none() && crate::filetrace::is_file_trace(&job.trace)?))
}

/// Runs a sim job (block or file trace).
pub fn run_sim(job: &SimJob, progress: &mut dyn Progress) -> Result<SimOutcome, JobError> {
    if is_file_job(job)? {
        return run_file_sim(job, progress);
    }
    let open = job.trace_options.open_options();
    let mut cfg = job.model.base()?;
    cfg.arch = job.arch.clone();
    let (anchored, anchor_note) = crate::alignment::resolve_anchor_of(&job.trace, &open, cfg.objects)?;
    cfg.objects = anchored;
    // The footprint and the SSD's bytes are counted in the objects asked for, before an
    // architecture with its own extent size (GreenDM's `es`, OTF-AST's `sub-lun`) has requests
    // split at its extents (`simulate` does that): "10%" is then the same bytes for every
    // architecture, in `sim`, `compare` and sweeps alike.
    let size = parse_ssd(&job.ssd, "ssd")?;
    let mut t = open_trace(&job.trace, &open)?;
    let mode = Mapper::new(cfg.objects, t.info().object_trace).mode();
    // The footprint costs a pass over the trace: needed for a relative size and for the cost
    // figures of timed runs.
    let fp = if matches!(size, SsdSize::Fraction(_)) || cfg.timing != Timing::None {
        let (_, fp, volumes) = crate::sim::footprint_and_layout(&mut t, mode)?;
        cfg.footprint_bytes = Some(fp);
        cfg.volumes = volumes;
        fp
    } else {
        0
    };
    cfg.ssd_bytes = size.resolve(fp, mode.object_size().max(1));
    cfg.measure_from = block_measure_from(&job.measure_from, || {
        let mut t = open_trace(&job.trace, &open)?;
        let mut n = 0u64;
        t.for_each(cfg.max_requests.unwrap_or(u64::MAX), |_| -> Result<(), TraceError> {
            n += 1;
            Ok(())
        })?;
        Ok(n)
    })?;
    let mut t = open_trace(&job.trace, &open)?;
    let mut r = simulate(&mut t, &cfg, progress)?;
    r.notes.extend(anchor_note);
    let size_fraction = if fp > 0 { cfg.ssd_bytes as f64 / fp as f64 } else { 0.0 };
    Ok(SimOutcome { report: r, size_label: size.label(), size_fraction })
}

/// The request index a block trace is measured from: `auto` (0), an index, or a share of the
/// requests (`count` counts them, only then).
fn block_measure_from(spec: &str, count: impl FnOnce() -> Result<u64, TraceError>) -> Result<u64, JobError> {
    let bad = || {
        JobError::Input(format!(
            "--measure-from {spec}: for a block trace `auto` (everything measured), a request index, or a share \
             of the requests such as `20%`"
        ))
    };
    if spec == "auto" {
        return Ok(0);
    }
    if let Some(p) = spec.strip_suffix('%') {
        let share: f64 = p.trim().parse().map_err(|_| bad())?;
        if !(0.0..100.0).contains(&share) {
            return Err(bad());
        }
        return Ok((count()? as f64 * share / 100.0).round() as u64);
    }
    spec.parse().map_err(|_| bad())
}

/// A sim job on a file trace: the file-level simulator.
fn run_file_sim(job: &SimJob, progress: &mut dyn Progress) -> Result<SimOutcome, JobError> {
    file_arch_allowed(&job.arch)?;
    let base = job.model.base()?;
    if job.model.objects != ModelOptions::default().objects {
        return Err(JobError::Input(
            "--objects does not apply to a file trace: its objects are the files and directories it names".into(),
        ));
    }
    let size = parse_ssd(&job.ssd, "ssd")?;
    let ram = parse_size(&job.ram_cache).map_err(|e| input(&format!("ram-cache {}", job.ram_cache), e))?;
    // One pass for the working set (a relative SSD size and the cost figures need it) and the
    // setup phase.
    let mut ws = WorkingSet::default();
    let (mut ops, mut setup) = (0u64, None);
    for op in FileTraceReader::open(&job.trace)? {
        let op = op?;
        ws.op(&op);
        if setup.is_none() && !crate::filetrace::is_setup_op(&op) {
            setup = Some(ops);
        }
        ops += 1;
    }
    let measure_from =
        match job.measure_from.as_str() {
            "auto" => setup.unwrap_or(0),
            n => n.parse::<u64>().ok().filter(|&n| n < ops.max(1)).ok_or_else(|| {
                JobError::Input(format!("--measure-from {n}: `auto` or an operation index below {ops}"))
            })?,
        };
    let cfg = FileSimConfig {
        arch: job.arch.clone(),
        ssd_bytes: size.resolve(ws.peak_bytes, 1),
        ram_bytes: ram,
        timing: base.timing,
        devices: base.devices.clone(),
        hdd_queue: base.hdd_queue,
        region_bytes: 0,
        movers: 0,
        dirs: !job.no_dirs,
        spin_down: base.spin_down,
        read_weight: base.read_weight,
        measure_from,
        flush_at_end: base.flush_at_end,
        max_ops: base.max_requests,
        check_every: base.check_every,
        footprint_bytes: Some(ws.peak_bytes),
        front_end: None,
    };
    let mut sim = FileSim::new(&cfg, &job.trace.display().to_string())?;
    for op in FileTraceReader::open(&job.trace)? {
        if sim.done() {
            break;
        }
        sim.op(&op?)?;
        if sim.ops() & 0xffff == 0 {
            progress.update(sim.ops());
        }
    }
    let r = sim.finish()?;
    let size_fraction = if ws.peak_bytes > 0 { cfg.ssd_bytes as f64 / ws.peak_bytes as f64 } else { 0.0 };
    Ok(SimOutcome { report: r, size_label: size.label(), size_fraction })
}

/// `tierwise compare`: architectures × SSD sizes on one trace.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompareJob {
    /// The trace file.
    pub trace: PathBuf,
    /// Architecture specs (empty: [`DEFAULT_ARCHS`]).
    #[serde(default)]
    pub archs: Vec<String>,
    /// SSD sizes.
    #[serde(default = "default_sizes")]
    pub ssd: Vec<String>,
    /// How the trace is read.
    #[serde(default)]
    pub trace_options: TraceOptions,
    /// The model.
    #[serde(default)]
    pub model: ModelOptions,
    /// Simulations at once (0: available cores).
    #[serde(default)]
    pub threads: usize,
    /// Allow SSD sizes at least as large as the footprint.
    #[serde(default)]
    pub allow_oversize: bool,
}

fn default_sizes() -> Vec<String> {
    ["5%", "10%", "25%", "50%"].iter().map(|s| s.to_string()).collect()
}

/// What a compare job produced.
#[derive(Clone, Debug, Serialize)]
pub struct CompareOutcome {
    /// The main table: closed loop with `timing=auto`, else the one table asked for
    /// (`compare.json`).
    pub throughput: Comparison,
    /// With `timing=auto` and a timed trace: the open-loop latency table (`compare-latency.json`).
    pub latency: Option<Comparison>,
    /// How the latency table's load was chosen.
    pub latency_note: Option<String>,
    /// One verdict per size (with `timing=auto`).
    pub verdicts: Vec<String>,
}

fn threads_or_cores(n: usize) -> usize {
    if n > 0 { n } else { std::thread::available_parallelism().map_or(2, |n| n.get()) }
}

/// Runs a compare job; with `timing=auto`, the main job: throughput with the disk kept busy,
/// then latency at a load HDD-only can carry, then a verdict per size.
pub fn run_compare(job: &CompareJob, progress: &dyn ProgressFactory) -> Result<CompareOutcome, JobError> {
    let open = job.trace_options.open_options();
    let base = job.model.base()?;
    let sizes = job.ssd.iter().map(|s| parse_ssd(s, "ssd")).collect::<Result<Vec<_>, _>>()?;
    let archs: Vec<String> = if job.archs.is_empty() {
        let probe = open_trace(&job.trace, &open)?;
        let fixed = Mapper::new(base.objects, probe.info().object_trace).mode().object_size() != 0;
        // Architectures that map fixed-size blocks or extents are not for object traces.
        DEFAULT_ARCHS
            .iter()
            .filter(|s| fixed || tierwise_core::ArchSpec::parse(s).is_ok_and(|a| a.info.caps.takes_variable_objects()))
            .map(|s| s.to_string())
            .collect()
    } else {
        job.archs.clone()
    };
    let mut cfg = CompareConfig {
        archs,
        sizes,
        base,
        threads: threads_or_cores(job.threads),
        allow_oversize: job.allow_oversize,
    };
    if job.model.timing != "auto" {
        let c = compare(&job.trace, &open, &cfg, progress)?;
        return Ok(CompareOutcome { throughput: c, latency: None, latency_note: None, verdicts: Vec::new() });
    }
    if !cfg.archs.iter().any(|s| s.split(':').next() == Some("hdd-only")) {
        cfg.archs.insert(0, "hdd-only".into());
    }
    cfg.base.timing = Timing::Closed { depth: CLOSED_DEPTH };
    let closed = compare(&job.trace, &open, &cfg, progress)?;
    let mut probe = open_trace(&job.trace, &open)?;
    let burst = crate::verdict::busiest(&mut probe, cfg.base.objects)?;
    let hdd_iops = closed
        .rows
        .iter()
        .filter(|r| r.report.arch.split(':').next() == Some("hdd-only"))
        .map(|r| r.report.iops)
        .fold(0.0, f64::max);
    let (mut latency, mut latency_note) = (None, None);
    if burst.timed {
        let (speedup, probe) = open_loop_speed(job, &open, &cfg, &burst, hdd_iops, progress)?;
        cfg.base.timing = Timing::Open { speedup };
        latency = Some(compare(&job.trace, &open, &cfg, progress)?);
        latency_note = Some(format!(
            "open loop, the trace's timestamps at x{speedup} speed: its busiest 10 s (all of it if shorter) offer {:.0} requests/s, \
             {:.0} at this speed ({:.0}% of HDD-only's closed-loop {hdd_iops:.0} IOPS); measured at this speed, \
             HDD-only's disk was busy {:.0}% of the run and a request spent {:.1}x its service time in the disk's \
             queue and service{}; IOPS here is the offered load",
            burst.peak_iops,
            burst.peak_iops * speedup,
            burst.peak_iops * speedup / hdd_iops.max(1e-9) * 100.0,
            probe.busy * 100.0,
            probe.queueing,
            if probe.queueing <= MAX_QUEUEING { "" } else { " (still queued at the slowest speed tried)" }
        ));
    }
    let verdicts = crate::verdict::verdicts(&closed, &burst);
    Ok(CompareOutcome { throughput: closed, latency, latency_note, verdicts })
}

/// The open-loop speed is accepted when HDD-only's requests spend at most this many times
/// their service time in the disk (an M/M/1 queue at 50 % load: 2x).
const MAX_QUEUEING: f64 = 2.0;

/// HDD-only under open loop at one speed, measured.
struct OpenProbe {
    /// Share of the run the disk was busy.
    busy: f64,
    /// Response time over service time, summed over the disk's requests.
    queueing: f64,
}

/// The open-loop speed for the latency table: first from the busiest 10 s against HDD-only's
/// closed-loop throughput, then measured: HDD-only is replayed at that speed and the speed is
/// halved while its requests queue more than [`MAX_QUEUEING`] (at most 8 times). A rate
/// estimate alone left the disk 94–100 % busy (open loop keeps the queue short, so the
/// closed-loop QD32 throughput overstates what it carries).
fn open_loop_speed(
    job: &CompareJob,
    open: &OpenOptions,
    cfg: &CompareConfig,
    burst: &crate::verdict::Burst,
    hdd_iops: f64,
    progress: &dyn crate::compare::ProgressFactory,
) -> Result<(f64, OpenProbe), JobError> {
    let mut speedup = crate::verdict::unsaturated_speedup(burst, hdd_iops);
    let mut probe_cfg = CompareConfig { archs: vec!["hdd-only".into()], sizes: cfg.sizes[..1].to_vec(), ..cfg.clone() };
    let mut tries = 0;
    loop {
        probe_cfg.base.timing = Timing::Open { speedup };
        let c = compare(&job.trace, open, &probe_cfg, progress)?;
        let hdd = c.rows.first().map(|r| r.report.hdd).unwrap_or_default();
        let probe = OpenProbe {
            busy: hdd.busy_ns as f64 / hdd.elapsed_ns.max(1) as f64,
            queueing: hdd.response_ns as f64 / hdd.busy_ns.max(1) as f64,
        };
        tries += 1;
        if probe.queueing <= MAX_QUEUEING || tries == 8 {
            return Ok((speedup, probe));
        }
        speedup = crate::verdict::two_digits(speedup / 2.0);
    }
}

fn default_objects() -> String {
    ModelOptions::default().objects
}

/// `tierwise trace stat`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StatJob {
    /// The trace file.
    pub trace: PathBuf,
    /// How the trace is read.
    #[serde(default)]
    pub trace_options: TraceOptions,
    /// How requests become objects.
    #[serde(default = "default_objects")]
    pub objects: String,
    /// Also the analysis (popularity, reuse distances, op × size mix, volumes): two more
    /// passes over the trace.
    #[serde(default = "default_analysis")]
    pub analysis: bool,
}

fn default_analysis() -> bool {
    true
}

/// Runs a trace-stat job: the statistics, and what anchoring decided if anything.
pub fn run_stat(job: &StatJob, progress: &mut dyn Progress) -> Result<(TraceStats, Option<String>), JobError> {
    let open = job.trace_options.open_options();
    let mode = ObjectMode::parse(&job.objects).map_err(|e| input("objects", e))?;
    let (mode, note) = crate::alignment::resolve_anchor_of(&job.trace, &open, mode)?;
    let mut t = open_trace(&job.trace, &open)?;
    let mut stats = crate::stat::trace_stats(&mut t, mode, progress)?;
    if job.analysis {
        stats.analysis = Some(crate::analysis::analyse(|| open_trace(&job.trace, &open), mode, progress)?);
    }
    Ok((stats, note))
}

/// `tierwise reproduce`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReproduceJob {
    /// greendm, otf-ast, hca, loris or hycache.
    pub target: String,
    /// Fraction of the full experiment.
    #[serde(default = "default_scale")]
    pub scale: f64,
    /// Directory of the bundled traces.
    pub traces: PathBuf,
    /// Seed of the synthetic stand-ins.
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// Simulations at once (0: available cores).
    #[serde(default)]
    pub threads: usize,
}

fn default_scale() -> f64 {
    1.0
}
fn default_seed() -> u64 {
    42
}

/// Runs a reproduction; `progress(label, done, total)` after each simulation.
pub fn run_reproduce(
    job: &ReproduceJob,
    progress: &(dyn Fn(&str, usize, usize) + Sync),
) -> Result<Reproduction, JobError> {
    let opts = ReproOptions {
        scale: job.scale,
        traces_dir: job.traces.clone(),
        seed: job.seed,
        threads: threads_or_cores(job.threads),
    };
    Ok(reproduce(&job.target, &opts, progress)?)
}

/// A knob of an architecture or collector.
#[derive(Clone, Debug, Serialize)]
pub struct KnobInfo {
    /// Name in specs.
    pub name: String,
    /// Default value.
    pub default: String,
    /// What it does.
    pub help: String,
}

/// A registered architecture or collector, as `tierwise list` shows it.
#[derive(Clone, Debug, Serialize)]
pub struct CatalogueEntry {
    /// `architecture` or `collector`.
    pub kind: String,
    /// Name in specs.
    pub name: String,
    /// Behaviour version.
    pub version: u32,
    /// One line of help.
    pub help: String,
    /// What front ends may assume of it (architectures).
    pub capabilities: String,
    /// Its knobs with defaults.
    pub knobs: Vec<KnobInfo>,
}

/// Every architecture and collector with its knobs and defaults.
pub fn catalogue() -> Vec<CatalogueEntry> {
    use tierwise_core::arch::ARCHITECTURES;
    use tierwise_core::collector::COLLECTORS;
    let knob = |p: &tierwise_core::params::ParamSpec| KnobInfo {
        name: p.name.to_string(),
        default: p.default.to_string(),
        help: p.help.to_string(),
    };
    let mut out = Vec::new();
    for a in ARCHITECTURES {
        let mut knobs: Vec<KnobInfo> = a.params.iter().chain(a.extra_params).map(knob).collect();
        if a.uses_collector && !knobs.iter().any(|k| k.name == "collector") {
            knobs.push(KnobInfo {
                name: "collector".into(),
                default: a.default_collector.into(),
                help: "any collector, with its knobs".into(),
            });
        }
        out.push(CatalogueEntry {
            kind: "architecture".into(),
            name: a.name.into(),
            version: a.version,
            help: a.help.into(),
            capabilities: a.caps.describe(),
            knobs,
        });
    }
    for c in COLLECTORS {
        out.push(CatalogueEntry {
            kind: "collector".into(),
            name: c.name.into(),
            version: c.version,
            help: c.help.into(),
            capabilities: String::new(),
            knobs: c.params.iter().map(knob).collect(),
        });
    }
    out
}

/// Checks a sim job without running it: the trace exists, the size, the model options and the
/// architecture spec are valid. Sweeps call this for every job before the first one starts.
pub fn check_sim_job(job: &SimJob) -> Result<(), JobError> {
    if !job.trace.is_file() {
        return Err(JobError::Input(format!("trace {}: no such file", job.trace.display())));
    }
    let size = parse_ssd(&job.ssd, "ssd")?;
    let base = job.model.base()?;
    let object_size = base.objects.object_size().max(1);
    let ssd = match size {
        SsdSize::Bytes(b) => b.max(object_size),
        SsdSize::Fraction(_) => 1 << 30,
    };
    if is_file_job(job)? {
        if job.measure_from != "auto" && job.measure_from.parse::<u64>().is_err() {
            return Err(JobError::Input(format!(
                "--measure-from {}: for a file trace `auto` or an operation index",
                job.measure_from
            )));
        }
        return Ok(file_arch_allowed(&job.arch)?);
    }
    block_measure_from(&job.measure_from, || Ok(0))?;
    let setup = tierwise_core::Setup { fast_capacity: ssd, slow_capacity: 0, object_size };
    // As `sim` runs it: an architecture with its own extent size has requests split at it.
    tierwise_core::collector::belady::validating(&job.arch, || {
        tierwise_core::ArchSpec::parse(&job.arch).and_then(|a| a.build(&setup).map(drop))
    })
    .map_err(|e| JobError::Input(format!("architecture `{}`: {e}", job.arch)))?;
    Ok(())
}
