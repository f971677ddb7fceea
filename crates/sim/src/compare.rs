//! Side-by-side comparison: architectures × SSD sizes on one trace, run in parallel (each run
//! streams the trace itself), results as one table / JSON / CSV / PNG.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde::{Deserialize, Serialize};
use tierwise_core::Setup;
use tierwise_core::params::parse_size;

use crate::metrics::SimReport;
use crate::objects::ObjectMode;
use crate::sim::{Progress, SimConfig, SimError, footprint_and_layout, simulate};
use crate::trace::{OpenOptions, TraceError, open_trace};

/// An SSD size: absolute, or a fraction of the trace's footprint.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub enum SsdSize {
    /// Bytes.
    Bytes(u64),
    /// Fraction of the footprint (0 < f <= 1).
    Fraction(f64),
}

impl SsdSize {
    /// Parses `25%`, `0.25` (a fraction when below 1 and without a unit) or `64MiB`.
    pub fn parse(s: &str) -> Result<SsdSize, String> {
        let t = s.trim();
        if t.starts_with('-') {
            return Err(format!("SSD size `{s}`: must be positive"));
        }
        if let Some(p) = t.strip_suffix('%') {
            let v: f64 = p.trim().parse().map_err(|_| format!("SSD size `{s}`: expected a percentage like 25%"))?;
            return Self::fraction(v / 100.0, s);
        }
        if let Ok(v) = t.parse::<f64>()
            && v < 1.0
        {
            return Self::fraction(v, s);
        }
        let b = parse_size(t).map_err(|e| format!("SSD size `{s}`: {e}"))?;
        if b == 0 {
            return Err(format!("SSD size `{s}`: must be above zero"));
        }
        Ok(SsdSize::Bytes(b))
    }

    fn fraction(v: f64, s: &str) -> Result<SsdSize, String> {
        if v == 0.0 {
            return Err(format!("SSD size `{s}`: must be above zero"));
        }
        if !(v > 0.0 && v <= 1.0) {
            return Err(format!("SSD size `{s}`: a share of the footprint must be above 0% and at most 100%"));
        }
        Ok(SsdSize::Fraction(v))
    }

    /// Resolves against a footprint, rounding down to whole objects. A fraction gives at least
    /// one object; an explicit size below one object is returned as is, so that the
    /// architecture refuses it by name ("the SSD is smaller than one extent").
    pub fn resolve(&self, footprint: u64, object_size: u64) -> u64 {
        let unit = object_size.max(1);
        match *self {
            SsdSize::Bytes(b) if b < unit => b,
            SsdSize::Bytes(b) => b / unit * unit,
            SsdSize::Fraction(f) => ((footprint as f64 * f) as u64 / unit).max(1) * unit,
        }
    }

    /// Label for tables.
    pub fn label(&self) -> String {
        match *self {
            SsdSize::Bytes(b) => tierwise_core::Bytes(b).to_string(),
            SsdSize::Fraction(f) => format!("{}%", (f * 1000.0).round() / 10.0),
        }
    }
}

/// What to compare.
#[derive(Clone, Debug)]
pub struct CompareConfig {
    /// Architecture specs.
    pub archs: Vec<String>,
    /// SSD sizes.
    pub sizes: Vec<SsdSize>,
    /// Everything else (timing, objects, devices); `arch` and `ssd_bytes` are set per run.
    pub base: SimConfig,
    /// Worker threads.
    pub threads: usize,
    /// Allow an SSD at least as large as the footprint.
    pub allow_oversize: bool,
}

/// One row of a comparison.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CompareRow {
    /// The size as asked for.
    pub size_label: String,
    /// The size as a share of the footprint.
    pub size_fraction: f64,
    /// The run.
    pub report: SimReport,
}

/// A finished comparison.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Comparison {
    /// The build that computed it (see [`crate::stamp`]); empty in files written before builds
    /// were recorded.
    #[serde(default)]
    pub build: String,
    /// Trace file.
    pub trace: String,
    /// Distinct objects in the chosen object mode.
    pub objects: u64,
    /// Their bytes.
    pub footprint_bytes: u64,
    /// Rows in (size, architecture) order.
    pub rows: Vec<CompareRow>,
    /// What the run decided for the user (the block anchor), printed before the table.
    #[serde(default)]
    pub notes: Vec<String>,
}

/// Comparison failures.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CompareError {
    /// Reading the trace failed.
    #[error(transparent)]
    Trace(#[from] TraceError),
    /// A run failed.
    #[error("{arch} at {size}: {source}")]
    Run {
        /// Architecture.
        arch: String,
        /// Size label.
        size: String,
        /// Cause.
        #[source]
        source: Box<SimError>,
    },
    /// A bad size or architecture list.
    #[error("{0}")]
    Input(String),
}

/// Makes a progress reporter per run.
pub trait ProgressFactory: Sync {
    /// A reporter for the run labelled `label`.
    fn make(&self, label: &str) -> Box<dyn Progress + Send>;
}

/// Checks every architecture spec before any run starts.
fn validate_archs(cfg: &CompareConfig, object_size: u64, ssd: u64) -> Result<(), CompareError> {
    if cfg.archs.is_empty() {
        return Err(CompareError::Input("no architectures to compare".into()));
    }
    for a in &cfg.archs {
        // Validated as `sim` runs it: an architecture with its own extent size (`es`,
        // `sub-lun`) has requests split at its extents.
        let setup = Setup { fast_capacity: ssd.max(object_size).max(1), slow_capacity: 0, object_size };
        tierwise_core::collector::belady::validating(a, || {
            tierwise_core::ArchSpec::parse(a).and_then(|spec| spec.build(&setup).map(drop))
        })
        .map_err(|e| CompareError::Input(format!("architecture `{a}`: {e}")))?;
    }
    Ok(())
}

/// Runs the comparison.
pub fn compare(
    path: &Path,
    open: &OpenOptions,
    cfg: &CompareConfig,
    progress: &dyn ProgressFactory,
) -> Result<Comparison, CompareError> {
    if cfg.sizes.is_empty() {
        return Err(CompareError::Input("no SSD sizes given".into()));
    }
    let (anchored, anchor_note) = crate::alignment::resolve_anchor_of(path, open, cfg.base.objects)?;
    let mut base = cfg.base.clone();
    base.objects = anchored;
    let mut t = open_trace(path, open)?;
    let object_trace = t.info().object_trace;
    let mode = crate::objects::Mapper::new(base.objects, object_trace).mode();
    let (objects, fp, volumes) = footprint_and_layout(&mut t, mode)?;
    base.volumes = volumes;
    if fp == 0 {
        return Err(CompareError::Input(format!("{}: the trace has no requests with data", path.display())));
    }
    // With `lcs:ignore-size` every object has size 1, so the footprint is the object count and
    // sizes are in objects.
    let object_size = mode.object_size();
    let unit = object_size.max(1);
    let fp_units = fp;
    let mut jobs: Vec<(SsdSize, u64, String)> = Vec::new();
    for s in &cfg.sizes {
        let bytes = s.resolve(fp_units, unit);
        if bytes >= fp_units && !cfg.allow_oversize && matches!(s, SsdSize::Bytes(_)) {
            return Err(CompareError::Input(format!(
                "SSD size {} is not smaller than the trace's footprint ({}): every hybrid would hold all data; \
                 give a smaller size, a percentage, or --allow-oversize",
                s.label(),
                if matches!(mode, ObjectMode::LibCacheSim { ignore_size: true }) {
                    format!("{objects} objects")
                } else {
                    tierwise_core::Bytes(fp).to_string()
                }
            )));
        }
        for a in &cfg.archs {
            jobs.push((*s, bytes, a.clone()));
        }
    }
    validate_archs(cfg, object_size, jobs.first().map_or(1, |j| j.1))?;
    let results: Mutex<Vec<Option<Result<SimReport, CompareError>>>> =
        Mutex::new((0..jobs.len()).map(|_| None).collect());
    let next = AtomicUsize::new(0);
    let path_buf: PathBuf = path.to_path_buf();
    std::thread::scope(|scope| {
        for _ in 0..cfg.threads.max(1).min(jobs.len()) {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some((size, bytes, arch)) = jobs.get(i) else {
                        break;
                    };
                    let label = format!("{arch} @ {}", size.label());
                    let mut p = progress.make(&label);
                    let mut run = || -> Result<SimReport, CompareError> {
                        let mut trace = open_trace(&path_buf, open)?;
                        let mut sc = base.clone();
                        sc.arch = arch.clone();
                        sc.ssd_bytes = *bytes;
                        sc.footprint_bytes = Some(fp);
                        simulate(&mut trace, &sc, p.as_mut()).map_err(|source| CompareError::Run {
                            arch: arch.clone(),
                            size: size.label(),
                            source: Box::new(source),
                        })
                    };
                    let r = run();
                    if let Ok(mut guard) = results.lock() {
                        guard[i] = Some(r);
                    }
                }
            });
        }
    });
    let results = results.into_inner().map_err(|_| CompareError::Input("a worker panicked".into()))?;
    let mut rows = Vec::with_capacity(jobs.len());
    for ((size, bytes, _), r) in jobs.iter().zip(results) {
        let report = r.ok_or_else(|| CompareError::Input("a run did not finish".into()))??;
        rows.push(CompareRow { size_label: size.label(), size_fraction: *bytes as f64 / fp_units as f64, report });
    }
    Ok(Comparison {
        build: crate::stamp::build(),
        trace: path.display().to_string(),
        objects,
        footprint_bytes: fp,
        rows,
        notes: anchor_note.into_iter().collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_and_refuse_nonsense() {
        assert_eq!(SsdSize::parse("25%").unwrap(), SsdSize::Fraction(0.25));
        assert_eq!(SsdSize::parse("0.125").unwrap(), SsdSize::Fraction(0.125));
        assert_eq!(SsdSize::parse("64MiB").unwrap(), SsdSize::Bytes(64 << 20));
        for bad in ["0", "0%", "-5%", "-1GiB", "150%", "lots", "0B"] {
            assert!(SsdSize::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(SsdSize::Fraction(0.5).resolve(10_000, 4096), 4096);
        assert_eq!(SsdSize::Fraction(0.0001).resolve(10_000, 4096), 4096, "at least one object");
        assert_eq!(
            SsdSize::Bytes(64 << 20).resolve(0, 1 << 30),
            64 << 20,
            "below one extent: kept, refused by the architecture"
        );
        assert_eq!(SsdSize::Bytes(5000).resolve(0, 4096), 4096);
    }

    /// `compare` accepts every spec `sim` accepts: an architecture with its own extent size
    /// is validated with requests split at it (it was validated with 4 KiB objects and refused).
    #[test]
    fn specs_with_their_own_extent_size_are_accepted() {
        let mut base = SimConfig::new("hdd-only", 0);
        base.timing = crate::Timing::Closed { depth: 4 };
        let cfg = CompareConfig {
            archs: vec!["greendm-tiering:es=16KiB".into(), "otf-ast:sub-lun=1MiB".into(), "static-tiering".into()],
            sizes: vec![SsdSize::Fraction(0.25)],
            base,
            threads: 1,
            allow_oversize: false,
        };
        assert!(validate_archs(&cfg, 4096, 64 << 20).is_ok());
        let bad = CompareConfig { archs: vec!["greendm-tiering:es=5000".into()], ..cfg };
        let e = validate_archs(&bad, 4096, 64 << 20).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains("multiple of 4 KiB"), "{e}");
    }
}
