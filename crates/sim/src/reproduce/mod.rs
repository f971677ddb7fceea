//! `tierwise reproduce`: each seed paper's experiment design run on the traces we have, printed
//! beside the paper's published numbers.
//!
//! A target builds a list of simulation jobs (workload × configuration), runs them on a few
//! threads, and turns the reports into tables, findings (the paper's claims, held or not) and
//! charts. Workloads are either bundled real traces or synthetic stand-ins
//! ([`standin`]) whose description says which figures are published and which are assumed.

mod files;
mod greendm;
mod hca;
mod hycache;
mod loris;
mod otf_ast;
pub mod standin;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde::{Deserialize, Serialize};

use crate::metrics::SimReport;
use crate::plot::{BarChart, ChartSpec, LineChart, Series, Stroke};
use crate::report::{CSV_HEADER, Table, csv_row};
use crate::sim::{NoProgress, SimConfig, SimError, simulate};
use crate::trace::{OpenOptions, Trace, TraceError, TraceReader, TraceRecord, open_trace};
use standin::StandIn;

/// The reproducible papers.
pub const TARGETS: &[(&str, &str)] = &[
    (
        "greendm",
        "GreenDM (TOS'15): tiering vs caching vs Mylinear; throughput, energy, SSD wear; ES, PT, MCML; SSD 1/4 and 1/8",
    ),
    (
        "otf-ast",
        "OTF-AST: on-the-fly sub-LUN tiering vs static tiering vs Flashcache; SSD access ratio; 24 sub-LUNs of SSD",
    ),
    (
        "hca",
        "HCA: ZFS L2ARC vs ARC-only (random read, OLTP) and HCA vs RAM-only; RAM/SSD size and cost ratios; TB size",
    ),
    (
        "loris",
        "Loris (file level): 7 DST/caching architectures and more x Postmark, fileserver, webserver(-zipf) x SSD \
         25/50/75 %; mixed workload with type-aware",
    ),
    ("hycache", "HyCache: Postmark through LRU and LFU HyCache vs HDD; 2-8 GB workloads on 4 GB SSD; SSD 1-8 GB"),
];

/// How to run a reproduction.
#[derive(Clone, Debug)]
pub struct ReproOptions {
    /// Fraction of the full experiment (request counts, run lengths, stand-in sizes where noted).
    pub scale: f64,
    /// Directory holding the bundled traces.
    pub traces_dir: PathBuf,
    /// Seed of the synthetic stand-ins.
    pub seed: u64,
    /// Simulations run at once.
    pub threads: usize,
}

/// Reproduction failures.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReproError {
    /// No such target.
    #[error("unknown reproduction target `{0}`: expected one of greendm, otf-ast, hca, loris, hycache")]
    UnknownTarget(String),
    /// A bundled trace is missing or unreadable.
    #[error("{0}")]
    Trace(Box<TraceError>),
    /// A simulation failed.
    #[error("{label}: {source}")]
    Sim {
        /// The job.
        label: String,
        /// The cause.
        #[source]
        source: Box<SimError>,
    },
    /// A bad option.
    #[error("{0}")]
    Options(String),
}

impl From<TraceError> for ReproError {
    fn from(e: TraceError) -> Self {
        ReproError::Trace(Box::new(e))
    }
}

/// A workload of a reproduction.
#[derive(Clone, Debug)]
pub enum Workload {
    /// A real trace from the bundled set.
    Bundled {
        /// Table name.
        name: String,
        /// The file.
        path: PathBuf,
        /// Where it comes from and how it differs from the paper's.
        detail: String,
        /// Start of each volume when the volumes are concatenated into one drive (empty: as is).
        volume_bases: Vec<u64>,
    },
    /// A generated stand-in.
    Synthetic(StandIn),
}

impl Workload {
    fn bundled(dir: &Path, file: &str, name: &str, detail: &str) -> Workload {
        Workload::Bundled { name: name.into(), path: dir.join(file), detail: detail.into(), volume_bases: Vec::new() }
    }

    /// A bundled trace whose volumes are concatenated (each starting at a 1 MiB boundary) into
    /// one drive, as a single block device would see them.
    fn bundled_one_drive(dir: &Path, file: &str, name: &str, detail: &str) -> Result<Workload, TraceError> {
        let w = Workload::bundled(dir, file, name, detail);
        let mut t = w.open()?;
        let mut ends: Vec<u64> = Vec::new();
        let mut r = TraceRecord::default();
        while t.next(&mut r)? {
            let v = r.volume as usize;
            if ends.len() <= v {
                ends.resize(v + 1, 0);
            }
            ends[v] = ends[v].max(r.offset.saturating_add(r.len));
        }
        let mut bases = Vec::with_capacity(ends.len());
        let mut at = 0u64;
        for e in ends {
            bases.push(at);
            at = at.saturating_add(e.div_ceil(1 << 20) << 20);
        }
        let Workload::Bundled { name, path, detail, .. } = w else { unreachable!("built as bundled") };
        Ok(Workload::Bundled { name, path, detail, volume_bases: bases })
    }

    /// Table name.
    pub fn name(&self) -> &str {
        match self {
            Workload::Bundled { name, .. } => name,
            Workload::Synthetic(s) => &s.name,
        }
    }

    fn open(&self) -> Result<Trace, TraceError> {
        match self {
            Workload::Bundled { path, volume_bases, .. } => {
                let t = open_trace(path, &OpenOptions::default())?;
                if volume_bases.len() <= 1 {
                    return Ok(t);
                }
                let (info, label) = (*t.info(), t.path().to_string());
                Ok(Trace::new(Box::new(OneDrive { inner: t, bases: volume_bases.clone() }), info, &label, false))
            }
            Workload::Synthetic(s) => Ok(s.trace()),
        }
    }

    fn note(&self) -> WorkloadNote {
        match self {
            Workload::Bundled { name, path, detail, .. } => WorkloadNote {
                name: name.clone(),
                kind: "real trace (bundled)".into(),
                detail: format!("{}: {detail}", path.display()),
            },
            Workload::Synthetic(s) => WorkloadNote {
                name: s.name.clone(),
                kind: "SYNTHETIC stand-in (the paper's trace is not available)".into(),
                detail: s.description.clone(),
            },
        }
    }

    /// The highest byte address the trace touches (its drive size), read in one pass.
    fn span(&self) -> Result<u64, TraceError> {
        let mut t = self.open()?;
        let mut end = 0u64;
        let mut r = TraceRecord::default();
        while t.next(&mut r)? {
            end = end.max(r.offset.saturating_add(r.len));
        }
        Ok(end)
    }
}

/// Concatenates a trace's volumes into one address space.
struct OneDrive {
    inner: Trace,
    bases: Vec<u64>,
}

impl TraceReader for OneDrive {
    fn read(&mut self, rec: &mut TraceRecord) -> Result<bool, TraceError> {
        if !self.inner.next(rec)? {
            return Ok(false);
        }
        rec.offset += self.bases.get(rec.volume as usize).copied().unwrap_or(0);
        rec.volume = 0;
        Ok(true)
    }
}

/// A workload in the output.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct WorkloadNote {
    /// Table name.
    pub name: String,
    /// Real or synthetic.
    pub kind: String,
    /// Provenance and assumptions.
    pub detail: String,
}

/// A table of ours with the paper's numbers beside it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ReproTable {
    /// Title.
    pub title: String,
    /// Column names.
    pub headers: Vec<String>,
    /// Rows.
    pub rows: Vec<Vec<String>>,
    /// What the paper reports for this table.
    pub paper: String,
}

impl ReproTable {
    fn new(title: &str, headers: &[&str], paper: &str) -> ReproTable {
        ReproTable {
            title: title.into(),
            headers: headers.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
            paper: paper.into(),
        }
    }
    fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }
}

/// One of the paper's claims checked against our numbers.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Finding {
    /// The claim.
    pub claim: String,
    /// The paper's figure.
    pub paper: String,
    /// Ours.
    pub ours: String,
    /// Whether our numbers show it: [`Verdict::Held`].
    pub held: bool,
    /// The effects compared, paper's and ours, as signed relative changes (+1.42 = +142 %),
    /// where the claim is a size of effect; one pair per end of a range.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub effects: Vec<(f64, f64)>,
    /// The verdict.
    #[serde(default)]
    pub verdict: Verdict,
}

/// How far our numbers show a claim.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// The same direction and, for a size of effect, within a factor of 2 of the paper's.
    #[default]
    Held,
    /// The same direction, but an effect more than a factor of 2 from the paper's.
    DirectionOnly,
    /// Not the same direction (or order).
    NotHeld,
}

impl Verdict {
    /// The label printed beside a finding.
    pub fn label(self) -> &'static str {
        match self {
            Verdict::Held => "held",
            Verdict::DirectionOnly => "direction only",
            Verdict::NotHeld => "NOT HELD",
        }
    }

    /// The verdict on one effect: ours against the paper's.
    pub fn of_effect(paper: f64, ours: f64) -> Verdict {
        if !(paper.is_finite() && ours.is_finite()) || paper.signum() != ours.signum() || ours == 0.0 {
            return Verdict::NotHeld;
        }
        let ratio = ours / paper;
        if (0.5..=2.0).contains(&ratio) { Verdict::Held } else { Verdict::DirectionOnly }
    }
}

impl Finding {
    /// A claim of direction or order only (no size of effect to compare).
    pub fn order(claim: impl Into<String>, paper: impl Into<String>, ours: impl Into<String>, held: bool) -> Finding {
        let verdict = if held { Verdict::Held } else { Verdict::NotHeld };
        Finding { claim: claim.into(), paper: paper.into(), ours: ours.into(), held, effects: Vec::new(), verdict }
    }

    /// A claim about the size of an effect: held when every (paper, ours) pair has the same
    /// sign and ours is within a factor of 2 of the paper's; "direction only" when only the
    /// signs agree. `ours` text gets the ratios appended.
    pub fn effect(claim: &str, paper: &str, ours: String, effects: &[(f64, f64)]) -> Finding {
        let verdict = effects.iter().map(|&(p, o)| Verdict::of_effect(p, o)).max().unwrap_or(Verdict::NotHeld);
        let ratios: Vec<String> = effects
            .iter()
            .map(|&(p, o)| if p != 0.0 && o.is_finite() { format!("{:.2}", o / p) } else { "n/a".into() })
            .collect();
        let ours = format!("{ours} (ours / paper: {})", ratios.join(", "));
        Finding {
            claim: claim.into(),
            paper: paper.into(),
            ours,
            held: verdict == Verdict::Held,
            effects: effects.to_vec(),
            verdict,
        }
    }
}

/// A line chart.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Chart {
    /// File name (PNG) in the output directory.
    pub file: String,
    /// Title.
    pub title: String,
    /// X axis.
    pub x_label: String,
    /// Y axis.
    pub y_label: String,
    /// Logarithmic x axis.
    pub log_x: bool,
    /// Lines: label and points.
    pub series: Vec<(String, Vec<(f64, f64)>)>,
    /// The paper's published values at our x values, label and points: drawn as outlined bars
    /// or bare markers beside ours (empty: the paper prints no number this figure can place).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paper: Vec<(String, Vec<(f64, f64)>)>,
}

impl Chart {
    /// How to draw it: grouped bars when every series has the same few x values (SSD sizes or
    /// knob settings, as the papers draw them), else lines with markers.
    pub fn spec(&self) -> ChartSpec {
        let xs = |pts: &Vec<(f64, f64)>| pts.iter().map(|p| p.0).collect::<Vec<f64>>();
        let first = self.series.first().map(|s| xs(&s.1)).unwrap_or_default();
        let shared = !first.is_empty() && first.len() <= 8 && self.series.iter().all(|s| xs(&s.1) == first);
        if shared {
            // Categories are evenly spaced: a log scale's wording no longer applies.
            let at = |pts: &Vec<(f64, f64)>| -> Vec<Option<f64>> {
                first
                    .iter()
                    .map(|x| pts.iter().find(|p| (p.0 - x).abs() <= 1e-9 * x.abs().max(1.0)).map(|p| p.1))
                    .collect()
            };
            let mut series: Vec<(String, Vec<Option<f64>>)> =
                self.series.iter().map(|(l, pts)| (l.clone(), at(pts))).collect();
            series.extend(self.paper.iter().map(|(l, pts)| (l.clone(), at(pts))));
            let published = (0..series.len()).map(|i| i >= self.series.len()).collect();
            return ChartSpec::Bars(BarChart {
                title: self.title.clone(),
                x_label: self.x_label.replace(", log scale", ""),
                y_label: self.y_label.clone(),
                groups: first.iter().map(|x| crate::plot::short(*x)).collect(),
                series,
                intervals: Vec::new(),
                published,
                log_y: None,
            });
        }
        let ours = self.series.iter().map(|(l, pts)| Series::new(l.clone(), pts.clone()));
        let paper = self.paper.iter().map(|(l, pts)| Series::new(l.clone(), pts.clone()).drawn(Stroke::Markers));
        ChartSpec::Line(LineChart {
            title: self.title.clone(),
            x_label: self.x_label.clone(),
            y_label: self.y_label.clone(),
            series: ours.chain(paper).collect(),
            log_x: self.log_x,
            log_y: None,
        })
    }
}

/// One simulation of the reproduction.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunRecord {
    /// Workload name.
    pub workload: String,
    /// Configuration label.
    pub label: String,
    /// SSD size as a fraction of the workload's drive or footprint (0 when not applicable).
    pub ssd_fraction: f64,
    /// The report.
    pub report: SimReport,
}

/// Everything a reproduction produced.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Reproduction {
    /// The build that computed it (see [`crate::stamp`]); empty in files written before builds
    /// were recorded.
    #[serde(default)]
    pub build: String,
    /// Target name.
    pub target: String,
    /// The paper.
    pub paper: String,
    /// Scale the experiment ran at.
    pub scale: f64,
    /// Seed of the synthetic stand-ins.
    pub seed: u64,
    /// Workloads used.
    pub workloads: Vec<WorkloadNote>,
    /// Tables.
    pub tables: Vec<ReproTable>,
    /// Claims checked.
    pub findings: Vec<Finding>,
    /// Charts.
    pub charts: Vec<Chart>,
    /// Every simulation.
    pub runs: Vec<RunRecord>,
    /// What we could not do and why.
    pub notes: Vec<String>,
}

/// A simulation to run.
#[derive(Clone, Debug)]
pub(crate) struct Job {
    workload: usize,
    label: String,
    cfg: SimConfig,
    ssd_fraction: f64,
}

/// Runs `target`. `progress(label, done, total)` is called after each simulation.
pub fn reproduce(
    target: &str,
    opts: &ReproOptions,
    progress: &(dyn Fn(&str, usize, usize) + Sync),
) -> Result<Reproduction, ReproError> {
    if !(opts.scale > 0.0 && opts.scale <= 1.0) {
        return Err(ReproError::Options(format!("--scale {}: expected a fraction in (0, 1]", opts.scale)));
    }
    let mut r = match target {
        "greendm" => greendm::run(opts, progress),
        "otf-ast" => otf_ast::run(opts, progress),
        "hca" => hca::run(opts, progress),
        "loris" => loris::run(opts, progress),
        "hycache" => hycache::run(opts, progress),
        other => Err(ReproError::UnknownTarget(other.to_string())),
    }?;
    r.seed = opts.seed;
    Ok(r)
}

/// Runs the jobs on `threads` threads; reports come back in job order.
fn run_jobs(
    workloads: &[Workload],
    jobs: &[Job],
    threads: usize,
    progress: &(dyn Fn(&str, usize, usize) + Sync),
) -> Result<Vec<RunRecord>, ReproError> {
    run_parallel(
        jobs,
        threads,
        |job| (workloads[job.workload].name().to_string(), job.label.clone(), job.ssd_fraction),
        |job, label| {
            let mut t = workloads[job.workload].open()?;
            simulate(&mut t, &job.cfg, &mut NoProgress).map_err(|e| ReproError::Sim { label, source: Box::new(e) })
        },
        progress,
    )
}

/// Runs `simulate(job, label)` for every job on `threads` threads; `describe` gives a job's
/// workload name, label and SSD fraction. Records come back in job order;
/// `progress("workload / label", done, total)` is called after each.
fn run_parallel<J: Sync>(
    jobs: &[J],
    threads: usize,
    describe: impl Fn(&J) -> (String, String, f64) + Sync,
    simulate: impl Fn(&J, String) -> Result<SimReport, ReproError> + Sync,
    progress: &(dyn Fn(&str, usize, usize) + Sync),
) -> Result<Vec<RunRecord>, ReproError> {
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<SimReport, ReproError>>>> =
        Mutex::new(std::iter::repeat_with(|| None).take(jobs.len()).collect());
    std::thread::scope(|s| {
        for _ in 0..threads.clamp(1, jobs.len().max(1)) {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(job) = jobs.get(i) else { break };
                    let (workload, label, _) = describe(job);
                    let name = format!("{workload} / {label}");
                    let out = simulate(job, name.clone());
                    if let Ok(mut r) = results.lock() {
                        r[i] = Some(out);
                    }
                    progress(&name, done.fetch_add(1, Ordering::Relaxed) + 1, jobs.len());
                }
            });
        }
    });
    let results = results.into_inner().map_err(|_| ReproError::Options("a simulation thread panicked".into()))?;
    jobs.iter()
        .zip(results)
        .map(|(job, r)| {
            let report = r.ok_or_else(|| ReproError::Options("a simulation did not run".into()))??;
            let (workload, label, ssd_fraction) = describe(job);
            Ok(RunRecord { workload, label, ssd_fraction, report })
        })
        .collect()
}

/// Finds a run by workload and label.
fn find<'a>(runs: &'a [RunRecord], workload: &str, label: &str) -> Option<&'a SimReport> {
    runs.iter().find(|r| r.workload == workload && r.label == label).map(|r| &r.report)
}

/// `x` as a signed percentage change.
fn change(x: f64) -> String {
    if x.is_finite() { format!("{:+.0}%", x * 100.0) } else { "n/a".into() }
}

/// A ratio `a / b - 1`, or NaN.
fn gain(a: f64, b: f64) -> f64 {
    if b > 0.0 { a / b - 1.0 } else { f64::NAN }
}

fn pct(x: f64) -> String {
    format!("{:.2}", x * 100.0)
}

fn num(x: f64) -> String {
    if !x.is_finite() {
        "n/a".into()
    } else if x.abs() >= 100.0 {
        format!("{x:.0}")
    } else if x.abs() >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.3}")
    }
}

/// SSD wear in eu for read weight `r` (GreenDM's model), from the SSD's byte counters.
fn ssd_eu(rep: &SimReport, r: f64) -> f64 {
    let limit = if rep.endurance.ssd_limit_bytes > 0.0 {
        rep.endurance.ssd_limit_bytes
    } else {
        crate::sim::SSD_WRITE_LIMIT_BYTES
    };
    (rep.ssd.write_bytes as f64 + rep.ssd.read_bytes as f64 * r) / limit * 1e6
}

impl Chart {
    /// A line chart written to `file`, with a linear x axis.
    fn new(file: &str, title: &str, x_label: &str, y_label: &str, series: Vec<(String, Vec<(f64, f64)>)>) -> Chart {
        Chart {
            file: file.into(),
            title: title.into(),
            x_label: x_label.into(),
            y_label: y_label.into(),
            log_x: false,
            series,
            paper: Vec::new(),
        }
    }

    /// The same with the paper's values drawn beside ours.
    fn with_paper(mut self, paper: Vec<(String, Vec<(f64, f64)>)>) -> Chart {
        self.paper = paper;
        self
    }

    /// The same with a logarithmic x axis.
    fn log_x(mut self) -> Chart {
        self.log_x = true;
        self
    }
}

impl Reproduction {
    /// An empty reproduction of `target` over `workloads`, with `notes`.
    fn new(target: &str, paper: &str, scale: f64, workloads: &[Workload], notes: Vec<String>) -> Reproduction {
        Reproduction {
            build: crate::stamp::build(),
            target: target.into(),
            paper: paper.into(),
            scale,
            seed: 0,
            workloads: workloads.iter().map(Workload::note).collect(),
            tables: Vec::new(),
            findings: Vec::new(),
            charts: Vec::new(),
            runs: Vec::new(),
            notes,
        }
    }

    /// The tables, findings and notes as text.
    pub fn to_text(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(o, "== tierwise reproduce {} — {} (scale {}) ==\n", self.target, self.paper, self.scale);
        let _ = writeln!(o, "Workloads:");
        for w in &self.workloads {
            let _ = writeln!(o, "  * {} [{}]\n      {}", w.name, w.kind, w.detail);
        }
        for t in &self.tables {
            let _ = writeln!(o, "\n-- {} --", t.title);
            let headers: Vec<&str> = t.headers.iter().map(String::as_str).collect();
            let mut table = Table::new(&headers);
            for r in &t.rows {
                table.row(r.clone());
            }
            o.push_str(&table.render());
            if !t.paper.is_empty() {
                let _ = writeln!(o, "paper: {}", t.paper);
            }
        }
        if !self.findings.is_empty() {
            let _ = writeln!(o, "\n-- The paper's findings on our runs --");
            for f in &self.findings {
                let _ = writeln!(
                    o,
                    "[{:<14}] {}\n         paper: {}\n         ours:  {}",
                    f.verdict.label(),
                    f.claim,
                    f.paper,
                    f.ours
                );
            }
        }
        for n in &self.notes {
            let _ = writeln!(o, "note: {n}");
        }
        o
    }

    /// Writes `reproduce-TARGET.json`, `reproduce-TARGET.csv` (one row per simulation) and the
    /// charts into `dir`; returns the files written.
    pub fn write(&self, dir: &Path) -> Result<Vec<PathBuf>, String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let mut files = Vec::new();
        let json = dir.join(format!("reproduce-{}.json", self.target));
        let text = serde_json::to_string_pretty(self).map_err(|e| e.to_string())?;
        std::fs::write(&json, text).map_err(|e| format!("{}: {e}", json.display()))?;
        files.push(json);
        let csv = dir.join(format!("reproduce-{}.csv", self.target));
        let mut s = format!("workload,label,{CSV_HEADER}\n");
        for r in &self.runs {
            let _ = writeln!(
                s,
                "\"{}\",\"{}\",{}",
                r.workload.replace('"', "\"\""),
                r.label.replace('"', "\"\""),
                csv_row(&r.report, &r.label, r.ssd_fraction)
            );
        }
        std::fs::write(&csv, s).map_err(|e| format!("{}: {e}", csv.display()))?;
        files.push(csv);
        for c in &self.charts {
            let path = dir.join(&c.file);
            crate::plot::png(&c.spec(), &path)?;
            files.push(path);
        }
        Ok(files)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_papers_points_are_drawn_beside_ours() {
        let ours = vec![("ours".to_string(), vec![(1.0, 10.0), (4.0, 20.0), (16.0, 30.0)])];
        let paper = vec![("paper: x".to_string(), vec![(4.0, 25.0)])];
        // Few shared x values: grouped bars, the paper's an outlined bar in its group only.
        let ChartSpec::Bars(b) = Chart::new("f.png", "t", "x", "y", ours.clone()).with_paper(paper.clone()).spec()
        else {
            panic!("bars")
        };
        assert_eq!(b.series[1], ("paper: x".to_string(), vec![None, Some(25.0), None]));
        assert_eq!(b.published, [false, true]);
        // Many x values: lines, the paper's as bare markers.
        let many = vec![("ours".to_string(), (1..=12).map(|i| (f64::from(i), 1.0)).collect())];
        let ChartSpec::Line(l) = Chart::new("f.png", "t", "x", "y", many).with_paper(paper).spec() else {
            panic!("lines")
        };
        assert_eq!((l.series[0].stroke, l.series[1].stroke), (Stroke::Solid, Stroke::Markers));
        // Without the paper's values, nothing is added.
        let ChartSpec::Bars(b) = Chart::new("f.png", "t", "x", "y", ours).spec() else { panic!("bars") };
        assert_eq!((b.series.len(), b.published), (1, vec![false]));
    }
}
