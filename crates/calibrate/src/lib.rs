//! `tierwise calibrate`: measures a disk, a partition or a file on one the way fio's and
//! DiskSim's users do — random 4 KiB reads and writes at several queue depths, sequential
//! rates, the time of a read by its distance from the one before, and what the drive's write
//! cache is worth — under direct I/O, fits an HDD or SSD preset to the measurements, and runs
//! the fitted model on the same tests. Tests the preset was not fitted to (deeper queues, the
//! seek curve) say how far the model can be trusted on this device.

pub mod fit;
pub mod measure;
pub mod report;
pub mod target;

use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tierwise_sim::device::{DeviceSet, HddSpec, PresetError, Presets, SsdSpec};

pub use fit::Check;
pub use measure::{Measured, Op, SeekPoint};
pub use target::Target;

use measure::RandomTest;

/// A scratch file's size when none is given.
pub const DEFAULT_SCRATCH_BYTES: u64 = 4 << 30;
/// The smallest span measured over.
pub const MIN_SPAN: u64 = 16 << 20;

/// Problems calibrating.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CalibrateError {
    /// An I/O error, with what was being done.
    #[error("{what}: {source}")]
    Io {
        /// What failed.
        what: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The target's file system refuses `O_DIRECT`.
    #[error(
        "{}: the file system does not support direct I/O (O_DIRECT; tmpfs and some FUSE file systems do not); \
         calibrate measures the device, not the page cache",
        .0.display()
    )]
    NoDirectIo(std::path::PathBuf),
    /// Bad options or target.
    #[error("{0}")]
    Input(String),
    /// The measurements do not fit a preset of the kind asked for.
    #[error("{0}")]
    Fit(String),
    /// The model check failed to run.
    #[error(transparent)]
    Sim(#[from] tierwise_sim::SimError),
    /// A base preset is missing.
    #[error(transparent)]
    Preset(#[from] PresetError),
}

/// What the preset models.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// A hard disk (seek, rotation, NCQ).
    Hdd,
    /// Flash (latency, IOPS and bandwidth ceilings).
    Ssd,
}

impl Kind {
    /// Parses `hdd` or `ssd`.
    pub fn parse(s: &str) -> Result<Kind, String> {
        match s {
            "hdd" => Ok(Kind::Hdd),
            "ssd" => Ok(Kind::Ssd),
            _ => Err(format!(
                "unknown kind `{s}`: expected hdd or ssd (or leave it out to decide from the measurements)"
            )),
        }
    }
    /// `hdd` or `ssd`.
    pub fn label(self) -> &'static str {
        match self {
            Kind::Hdd => "hdd",
            Kind::Ssd => "ssd",
        }
    }
}

/// What to measure and fit.
#[derive(Clone, Debug)]
pub struct Options {
    /// Bytes to measure over (a scratch file's size; at most the target's length).
    pub size: Option<u64>,
    /// Write to an existing file or device (destroys its data).
    pub overwrite: bool,
    /// Seconds per test.
    pub seconds: f64,
    /// Queue depths of the random tests.
    pub depths: Vec<u32>,
    /// The preset's kind; `None` decides from the QD1 random read time.
    pub kind: Option<Kind>,
    /// Spindle speed for an HDD preset (default: the base preset's).
    pub rpm: Option<f64>,
    /// Presets to take what is not measured from (power, price, read-ahead, NCQ).
    pub presets: Presets,
    /// The base HDD preset.
    pub base_hdd: String,
    /// The base SSD preset.
    pub base_ssd: String,
    /// The new preset's name.
    pub name: String,
    /// Seed of the random offsets.
    pub seed: u64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            size: None,
            overwrite: false,
            seconds: 3.0,
            depths: vec![1, 4, 32],
            kind: None,
            rpm: None,
            presets: Presets::builtin(),
            base_hdd: "wd5000aaks".into(),
            base_ssd: "vertex3".into(),
            name: "calibrated".into(),
            seed: 1,
        }
    }
}

/// A calibration: what was measured, the preset fitted to it, and the model beside it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    /// The file or device measured.
    pub target: String,
    /// The kernel's name for the device underneath.
    pub device: Option<String>,
    /// The kernel's `queue/rotational` for it.
    pub rotational: Option<bool>,
    /// Bytes measured over.
    pub span: u64,
    /// A scratch file was made (and removed).
    pub scratch: bool,
    /// The target is on a file system kept in memory (tmpfs): nothing but memory was measured.
    pub memory: bool,
    /// The measurements, in the order run.
    pub tests: Vec<Measured>,
    /// Read time by backward jump distance.
    pub seek: Vec<SeekPoint>,
    /// QD1 random writes without ÷ with `O_DSYNC`: what the drive's write cache is worth.
    pub write_cache_gain: Option<f64>,
    /// The preset's kind.
    pub kind: Kind,
    /// Why that kind.
    pub kind_reason: String,
    /// The preset's name.
    pub name: String,
    /// The fitted HDD preset (kind hdd).
    pub hdd: Option<HddSpec>,
    /// The fitted SSD preset (kind ssd).
    pub ssd: Option<SsdSpec>,
    /// Each random test beside the fitted model.
    pub checks: Vec<Check>,
    /// The HDD model's seek curve for the same jumps (kind hdd).
    pub model_seek: Vec<SeekPoint>,
}

impl Calibration {
    /// The preset as a `--devices` TOML file.
    pub fn preset_toml(&self) -> Result<String, CalibrateError> {
        let err = |e: toml::ser::Error| CalibrateError::Input(format!("writing the preset: {e}"));
        let (kind, flag, spec) = match (&self.hdd, &self.ssd) {
            (Some(h), _) => ("hdd", "--hdd", toml::Value::try_from(h).map_err(err)?),
            (None, Some(s)) => ("ssd", "--ssd-model", toml::Value::try_from(s).map_err(err)?),
            (None, None) => return Err(CalibrateError::Fit("no preset was fitted".into())),
        };
        let mut named = toml::Table::new();
        named.insert(self.name.clone(), spec);
        let mut doc = toml::Table::new();
        doc.insert(kind.into(), toml::Value::Table(named));
        let body = toml::to_string(&doc).map_err(err)?;
        Ok(format!(
            "# Made by `tierwise calibrate {}` ({} MiB measured under direct I/O).\n\
             # Use: tierwise sim --devices THIS_FILE {flag} {} ...\n{body}",
            self.target,
            self.span >> 20,
            self.name
        ))
    }
}

/// Measures `path`, fits a preset and checks it; `progress` hears what runs.
pub fn calibrate(path: &Path, o: &Options, progress: &mut dyn FnMut(&str)) -> Result<Calibration, CalibrateError> {
    if !(o.seconds.is_finite() && o.seconds > 0.0) {
        return Err(CalibrateError::Input("--seconds: a positive number of seconds per test".into()));
    }
    if o.depths.is_empty() || o.depths.iter().any(|&d| d == 0 || d > 256) {
        return Err(CalibrateError::Input("--depths: queue depths from 1 to 256, e.g. 1,4,32".into()));
    }
    let base_hdd = o.presets.hdd(&o.base_hdd)?.clone();
    let base_ssd = o.presets.ssd(&o.base_ssd)?.clone();
    let target = Target::open(path, o.size, o.overwrite)?;
    let io = |what: &str| {
        let what = format!("{what} on {}", target.path.display());
        move |source| CalibrateError::Io { what, source }
    };
    let per_test = Duration::from_secs_f64(o.seconds);
    let span = target.span;
    let mut tests = Vec::new();
    if target.scratch {
        progress(&format!("filling a {} MiB scratch file", span >> 20));
        let mut fill_progress = |f: f64| progress(&format!("filled {:.0} %", f * 100.0));
        tests.push(measure::fill(target.file(), span, &mut fill_progress).map_err(io("filling"))?);
    }
    let mut ops = vec![Op::Read];
    if target.writable {
        ops.push(Op::Write);
    }
    for &op in &ops {
        progress(&format!("sequential 1 MiB {}s", op.label()));
        tests.push(measure::sequential(target.file(), span, op, 1 << 20, per_test).map_err(io("sequential I/O"))?);
    }
    progress("sequential 1 MiB reads at the end of the span (a disk's inner zone)");
    tests.push(measure::sequential_inner(target.file(), span, 1 << 20, per_test).map_err(io("sequential I/O"))?);
    for &op in &ops {
        for &depth in &o.depths {
            progress(&format!("random 4 KiB {}s, {depth} outstanding", op.label()));
            let t = RandomTest { op, depth, block: 4096, sync: false, duration: per_test, seed: o.seed };
            tests.push(measure::random(target.file(), span, t).map_err(io("random I/O"))?);
        }
    }
    if let Some(sync_file) = target.sync_file() {
        progress("random 4 KiB synchronous writes (O_DSYNC), 1 outstanding");
        let t = RandomTest { op: Op::Write, depth: 1, block: 4096, sync: true, duration: per_test, seed: o.seed };
        tests.push(measure::random(sync_file, span, t).map_err(io("synchronous writes"))?);
    }
    progress("read time by seek distance");
    let seek = measure::seek_curve(target.file(), span, per_test, o.seed).map_err(io("the seek curve"))?;
    let write_cache_gain = match (fit::find(&tests, "randwrite-qd1"), fit::find(&tests, "randwrite-sync-qd1")) {
        (Some(a), Some(s)) if s.iops > 0.0 => Some(a.iops / s.iops),
        _ => None,
    };
    let qd1 = fit::find(&tests, "randread-qd1").map_or(0.0, |m| m.mean_us);
    let kernel = match (target.memory, target.rotational) {
        (true, _) => "a file system in memory (tmpfs): no device underneath".into(),
        (false, Some(r)) => format!("the kernel says rotational={}", u8::from(r)),
        (false, None) => "the kernel's rotational flag was not found".into(),
    };
    let (kind, kind_reason) = match o.kind {
        Some(k) => (k, format!("--kind {} ({kernel})", k.label())),
        // No flash device needs a millisecond for a 4 KiB read at QD1; no disk answers
        // random reads over its span in less.
        None if qd1 >= 1000.0 => {
            (Kind::Hdd, format!("QD1 random 4 KiB reads take {qd1:.0} µs, as a hard disk's do ({kernel})"))
        }
        None => (Kind::Ssd, format!("QD1 random 4 KiB reads take {qd1:.0} µs, as flash does ({kernel})")),
    };
    let mut devices = DeviceSet::default();
    let (hdd, ssd, model_seek) = match kind {
        Kind::Hdd => {
            let spec = fit::fit_hdd(&tests, &seek, span, &base_hdd, o.rpm)?;
            devices.hdd = spec.clone();
            devices.hdd_name = o.name.clone();
            let model_seek = fit::model_seek_curve(&spec, &seek, o.seed)?;
            (Some(spec), None, model_seek)
        }
        Kind::Ssd => {
            let spec = fit::fit_ssd(&tests, span, &base_ssd)?;
            devices.ssd = spec.clone();
            devices.ssd_name = o.name.clone();
            (None, Some(spec), Vec::new())
        }
    };
    progress("the fitted model on the same tests");
    let checks = fit::checks(&tests, span, kind, &devices)?;
    let describe = format!(
        "calibrated from {}{} ({} MiB, {}); not measured, from {}: power, price{}",
        path.display(),
        if target.scratch { " (a scratch file)" } else { "" },
        span >> 20,
        target.device.as_deref().unwrap_or("device unknown"),
        if kind == Kind::Hdd { &o.base_hdd } else { &o.base_ssd },
        if kind == Kind::Hdd { ", read-ahead, NCQ depth" } else { ", endurance" }
    );
    let (hdd, ssd) = (
        hdd.map(|mut h| {
            h.description = describe.clone();
            h
        }),
        ssd.map(|mut s| {
            s.description = describe.clone();
            s
        }),
    );
    Ok(Calibration {
        target: path.display().to_string(),
        device: target.device.clone(),
        rotational: target.rotational,
        span,
        scratch: target.scratch,
        memory: target.memory,
        tests,
        seek,
        write_cache_gain,
        kind,
        kind_reason,
        name: o.name.clone(),
        hdd,
        ssd,
        checks,
        model_seek,
    })
}
