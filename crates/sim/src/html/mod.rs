//! `tierwise report`: one self-contained HTML file from result files (compare, sweep, mrc, sim,
//! reproduce). No network and no scripts: charts are inline SVG, the data is embedded as CSV
//! behind download links, and the page reads on a laptop, a phone and on paper.
//!
//! What is a library's and what is ours: the charts are drawn by plotters' SVG backend
//! (`crate::plot`; we add only what plotters lacks: wrapped legends, error bars, group labels
//! under bars, one tick format per axis); the embedded CSV is encoded by the `base64` crate. The
//! page's markup is written here with `format!` and one escaper ([`esc`], every interpolated
//! text goes through it): a templating crate (maud, askama) would add a proc-macro dependency
//! for a page of a dozen element kinds, and the Python package builds the same report through
//! these functions, so one place renders it.

mod knobs;
mod replicates;
mod sections;
mod traces;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::compare::{CompareRow, Comparison};
use crate::metrics::SimReport;
use crate::mrc::Mrc;
use crate::reproduce::Reproduction;

/// Report failures: a file that cannot be read or is not a tierwise result.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReportError {
    /// Reading or writing a file failed.
    #[error("{path}: {message}")]
    Io {
        /// The file.
        path: String,
        /// What went wrong.
        message: String,
    },
    /// A file is not a result tierwise writes.
    #[error("{path}: {message}")]
    NotAResult {
        /// The file.
        path: String,
        /// What it holds instead, and what is expected.
        message: String,
    },
    /// Nothing to report.
    #[error("no results to report: give compare.json, mrc.json, sim JSON, reproduce-*.json files or a sweep directory")]
    Empty,
}

/// A sweep's summary (`sweep.json`, written by the Python package).
#[derive(Clone, Debug, Deserialize)]
pub struct SweepSummary {
    /// The sweep's configuration (traces, archs, sizes, knobs, model).
    pub sweep: serde_json::Value,
    /// The tierwise version that ran it.
    pub tierwise: String,
    /// The build that ran it (see [`crate::stamp`]); empty in sweeps written before builds
    /// were recorded.
    #[serde(default)]
    pub build: String,
    /// Jobs in the sweep.
    pub jobs: u64,
    /// Failed jobs with their errors.
    #[serde(default)]
    pub failed: Vec<serde_json::Value>,
    /// One row per finished job.
    pub rows: Vec<SweepRow>,
    /// Replicated runs summarised (mean and confidence interval per metric); empty when the
    /// sweep ran one replicate.
    #[serde(default)]
    pub aggregates: Vec<SweepAggregate>,
}

/// One (workload, spec, size, knobs) over its replicates.
#[derive(Clone, Debug, Deserialize)]
pub struct SweepAggregate {
    /// The workload (a synthetic spec such as `zipf:alpha=0.9`, or a trace file).
    pub workload: String,
    /// The spec run.
    pub spec: String,
    /// The size as asked for.
    pub size_label: String,
    /// The swept knobs' values, model axes (`model.timing`, …) included.
    #[serde(default)]
    pub knobs: std::collections::BTreeMap<String, String>,
    /// Replicates.
    pub n: u32,
    /// Confidence of the intervals (0.95).
    pub confidence: f64,
    /// Per metric (`iops`, `miss_ratio`, `read_hit.ssd`, …): mean, std, ci_low, ci_high.
    pub metrics: std::collections::BTreeMap<String, Estimate>,
}

/// A metric over replicates; the interval is absent with one replicate.
#[derive(Clone, Copy, Debug, Deserialize)]
pub struct Estimate {
    /// Mean over the replicates.
    pub mean: Option<f64>,
    /// Sample standard deviation.
    pub std: Option<f64>,
    /// Lower end of the confidence interval of the mean.
    pub ci_low: Option<f64>,
    /// Upper end.
    pub ci_high: Option<f64>,
}

/// One finished sweep job.
#[derive(Clone, Debug, Deserialize)]
pub struct SweepRow {
    /// The workload the trace is a replicate of (empty in sweeps written before replicates).
    #[serde(default)]
    pub workload: String,
    /// The trace file.
    pub trace: String,
    /// The spec run.
    pub spec: String,
    /// The size as asked for.
    pub size_label: String,
    /// The size as a share of the footprint.
    pub size_fraction: f64,
    /// The swept knobs' values in this job (empty without knob axes).
    #[serde(default)]
    pub knobs: std::collections::BTreeMap<String, String>,
    /// The report.
    pub report: SimReport,
}

/// The prefix of a model option swept as an axis among a row's knobs (`model.timing`).
pub const MODEL_AXIS: &str = "model.";

/// The model axes' values of a run, `timing=closed:8, hdd_queue=fifo` (empty: none swept),
/// leaving out `except`.
pub fn model_variant(knobs: &std::collections::BTreeMap<String, String>, except: &str) -> String {
    knobs
        .iter()
        .filter(|(k, _)| k.as_str() != except)
        .filter_map(|(k, v)| k.strip_prefix(MODEL_AXIS).map(|name| format!("{name}={v}")))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A spec with the model variant it ran under: `cache [timing=closed:8]`.
pub fn with_variant(spec: &str, variant: &str) -> String {
    if variant.is_empty() { spec.to_string() } else { format!("{spec} [{variant}]") }
}

impl SweepAggregate {
    /// The spec with its model variant: what a series of the replicate charts is.
    pub fn label(&self) -> String {
        with_variant(&self.spec, &model_variant(&self.knobs, ""))
    }
}

/// One input of the report.
#[derive(Clone, Debug)]
pub enum ResultFile {
    /// `compare.json` or `compare-latency.json`.
    Compare(Comparison),
    /// `mrc.json`.
    Mrc(Mrc),
    /// `reproduce-TARGET.json`.
    Reproduce(Box<Reproduction>),
    /// `tierwise sim --json`.
    Sim(Box<SimReport>),
    /// A sweep directory's `sweep.json`.
    Sweep(SweepSummary),
}

fn io(path: &Path, e: impl std::fmt::Display) -> ReportError {
    ReportError::Io { path: path.display().to_string(), message: e.to_string() }
}

/// Reads one result file, recognising its kind by its fields.
pub fn load(path: &Path) -> Result<ResultFile, ReportError> {
    let text = std::fs::read_to_string(path).map_err(|e| io(path, e))?;
    let not = |m: String| ReportError::NotAResult { path: path.display().to_string(), message: m };
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| not(format!("not JSON ({e})")))?;
    let has = |k: &str| v.get(k).is_some();
    let parsed = if has("findings") {
        serde_json::from_value(v.clone()).map(|r| ResultFile::Reproduce(Box::new(r)))
    } else if has("rows") && has("sweep") {
        serde_json::from_value(v.clone()).map(ResultFile::Sweep)
    } else if has("rows") && has("footprint_bytes") {
        serde_json::from_value(v.clone()).map(ResultFile::Compare)
    } else if has("points") && has("cold_misses") {
        serde_json::from_value(v.clone()).map(ResultFile::Mrc)
    } else if has("arch") && has("latency") {
        serde_json::from_value(v.clone()).map(|r| ResultFile::Sim(Box::new(r)))
    } else {
        return Err(not("not a tierwise result: expected compare, mrc, sim --json, reproduce or sweep output".into()));
    };
    parsed.map_err(|e| not(format!("looks like a tierwise result but does not parse: {e}")))
}

/// The result files named: files as given, directories by their `*.json` files (a sweep
/// directory by its `sweep.json`), skipping JSON that is not a result.
pub fn collect(inputs: &[PathBuf]) -> Result<Vec<(PathBuf, ResultFile)>, ReportError> {
    let mut out = Vec::new();
    for p in inputs {
        if p.is_dir() {
            let sweep = p.join("sweep.json");
            if sweep.is_file() {
                out.push((sweep.clone(), load(&sweep)?));
                continue;
            }
            let mut files: Vec<PathBuf> = std::fs::read_dir(p)
                .map_err(|e| io(p, e))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|f| f.extension().is_some_and(|x| x == "json"))
                .collect();
            files.sort();
            for f in files {
                if let Ok(r) = load(&f) {
                    out.push((f, r));
                }
            }
        } else {
            out.push((p.clone(), load(p)?));
        }
    }
    if out.is_empty() {
        return Err(ReportError::Empty);
    }
    Ok(out)
}

/// A sweep's rows for one trace as a comparison (sizes × specs).
pub fn sweep_comparisons(s: &SweepSummary) -> Vec<(String, Comparison)> {
    // One comparison per trace and model variant (the model axes' values: another timing or
    // device is another experiment, not another series).
    let mut groups: Vec<(&str, String)> = Vec::new();
    // Replicates are shown summarised (mean and interval), not one comparison per replicate.
    let replicated = |r: &SweepRow| s.aggregates.iter().any(|a| a.workload == r.workload);
    for r in s.rows.iter().filter(|r| !replicated(r)) {
        let g = (r.trace.as_str(), model_variant(&r.knobs, ""));
        if !groups.contains(&g) {
            groups.push(g);
        }
    }
    groups
        .into_iter()
        .map(|(t, variant)| {
            let rows: Vec<CompareRow> = s
                .rows
                .iter()
                .filter(|r| r.trace == t && model_variant(&r.knobs, "") == variant)
                .map(|r| CompareRow {
                    size_label: r.size_label.clone(),
                    size_fraction: r.size_fraction,
                    report: r.report.clone(),
                })
                .collect();
            let footprint = rows.iter().find_map(|r| r.report.footprint_bytes).unwrap_or(0);
            let build = rows.first().map(|r| r.report.build.clone()).unwrap_or_default();
            let name = sections::trace_name(t);
            let title = if variant.is_empty() { name } else { format!("{name} ({variant})") };
            let c = Comparison {
                build,
                trace: t.to_string(),
                objects: 0,
                footprint_bytes: footprint,
                rows,
                notes: Vec::new(),
            };
            (title, c)
        })
        .collect()
}

/// Escapes text for HTML.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '&' => o.push_str("&amp;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

/// Standard base64 (for the embedded CSV downloads).
fn base64(data: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(data)
}

/// A download link carrying `csv` in the page itself.
pub fn csv_link(file: &str, csv: &str) -> String {
    format!(
        "<a class=\"dl\" download=\"{}\" href=\"data:text/csv;base64,{}\">Download {} ({} rows)</a>",
        esc(file),
        base64(csv.as_bytes()),
        esc(file),
        csv.lines().count().saturating_sub(1)
    )
}

/// An HTML table.
pub fn table(headers: &[&str], rows: &[Vec<String>], class: &str) -> String {
    let mut o = format!("<div class=\"scroll\"><table class=\"{class}\"><thead><tr>");
    for h in headers {
        let _ = write!(o, "<th>{}</th>", esc(h));
    }
    o.push_str("</tr></thead><tbody>");
    for r in rows {
        o.push_str("<tr>");
        for c in r {
            let _ = write!(o, "<td>{c}</td>");
        }
        o.push_str("</tr>");
    }
    o.push_str("</tbody></table></div>");
    o
}

const STYLE: &str = "
:root{--fg:#1d2330;--muted:#5b6475;--line:#d9dde5;--bg:#fff;--accent:#1f77b4;--ok:#1a7f37;--bad:#b42318}
*{box-sizing:border-box}
body{margin:0;font:15px/1.5 'DejaVu Sans',system-ui,sans-serif;color:var(--fg);background:var(--bg)}
main{max-width:1120px;margin:0 auto;padding:16px}
h1{font-size:1.6em;margin:.2em 0}h2{font-size:1.3em;margin-top:1.6em;border-bottom:2px solid var(--line)}
h3{font-size:1.08em;margin-top:1.2em}h4{margin:.9em 0 .2em}
h2,h3,p{overflow-wrap:anywhere}
nav ul{padding-left:1.2em;columns:2;column-gap:2em}
.meta{color:var(--muted)}
.scroll{overflow-x:auto;margin:.5em 0}
table{border-collapse:collapse;font-size:.88em;white-space:nowrap}
th,td{border-bottom:1px solid var(--line);padding:3px 8px;text-align:right}
th{background:#f3f5f8;position:sticky;top:0}
td:first-child,th:first-child,td.l{text-align:left}
table.kv td{text-align:left;white-space:normal}
figure{margin:1em 0;overflow-x:auto}
svg.chart{width:100%;height:auto;display:block;border:1px solid var(--line);border-radius:4px}
.held{color:var(--ok);font-weight:bold}.dir{color:var(--warn,#b8860b);font-weight:bold}.not{color:var(--bad);font-weight:bold}
a.dl{display:inline-block;margin:.3em 0;padding:2px 10px;border:1px solid var(--accent);border-radius:4px;color:var(--accent);text-decoration:none}
details{margin:.5em 0}code{font-size:.92em;background:#f3f5f8;padding:0 3px;border-radius:3px}
@media (max-width:640px){body{font-size:14px}nav ul{columns:1}main{padding:8px}svg.chart{min-width:600px}}
@media print{a.dl{display:none}h2{break-before:page}figure,table{break-inside:avoid}th{position:static}}
";

/// The whole report for `inputs`.
pub fn render(inputs: &[(PathBuf, ResultFile)], title: &str) -> String {
    let mut body = String::new();
    let mut toc = Vec::new();
    let mut section = |id: String, heading: String, html: String| {
        toc.push(format!("<li><a href=\"#{id}\">{}</a></li>", esc(&heading)));
        let _ = write!(body, "<section id=\"{id}\"><h2>{}</h2>{html}</section>", esc(&heading));
    };
    let (prov_id, prov) = ("provenance".to_string(), sections::provenance(inputs));
    section(prov_id, "Provenance".into(), prov);
    for (j, (name, html)) in traces::analyses(inputs).into_iter().enumerate() {
        section(format!("trace{j}"), format!("Trace — {name}"), html);
    }
    for (i, (path, r)) in inputs.iter().enumerate() {
        let file = path.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
        match r {
            ResultFile::Compare(c) => section(
                format!("r{i}"),
                format!("Comparison — {}", sections::trace_name(&c.trace)),
                sections::comparison(c, &file),
            ),
            ResultFile::Sweep(s) => {
                for (j, (workload, html)) in replicates::sections(s).into_iter().enumerate() {
                    section(format!("r{i}-rep{j}"), format!("Sweep — {workload} (replicates)"), html);
                }
                for (j, (title, c)) in sweep_comparisons(s).iter().enumerate() {
                    section(
                        format!("r{i}-{j}"),
                        format!("Sweep — {title}"),
                        sections::comparison(c, &format!("sweep-{j}-{}.csv", sections::trace_name(&c.trace))),
                    );
                }
                for (j, (title, html)) in knobs::sections(s).into_iter().enumerate() {
                    section(format!("r{i}-knob{j}"), title, html);
                }
                if !s.failed.is_empty() {
                    section(format!("r{i}-failed"), "Sweep — failed jobs".into(), sections::sweep_failures(s));
                }
            }
            ResultFile::Mrc(m) => section(
                format!("r{i}"),
                format!("Miss-ratio curve — {}", sections::trace_name(&m.trace)),
                sections::mrc(m, &file),
            ),
            ResultFile::Reproduce(r) => {
                section(format!("r{i}"), format!("Reproduction — {}", r.paper), sections::reproduction(r))
            }
            ResultFile::Sim(s) => section(
                format!("r{i}"),
                format!("Simulation — {} on {}", s.arch, sections::trace_name(&s.trace)),
                sections::single(s),
            ),
        }
    }
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <meta name=\"generator\" content=\"tierwise {ver}\"><title>{t}</title><style>{STYLE}</style></head>\
         <body><main><header><h1>{t}</h1><p class=\"meta\">written by tierwise {ver} · {n} result file(s) · charts are inline SVG; \
         every table's data can be downloaded as CSV</p></header><nav><h2>Contents</h2><ul>{toc}</ul></nav>{body}</main></body></html>\n",
        t = esc(title),
        ver = esc(&crate::stamp::build()),
        n = inputs.len(),
        toc = toc.join(""),
    )
}

/// Reads `inputs` and writes the report to `out`.
pub fn write_report(inputs: &[PathBuf], out: &Path, title: Option<&str>) -> Result<usize, ReportError> {
    let files = collect(inputs)?;
    let html = render(&files, title.unwrap_or("tierwise report"));
    if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
    }
    std::fs::write(out, html).map_err(|e| io(out, e))?;
    Ok(files.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_the_rfc_examples() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
    }

    #[test]
    fn text_is_escaped() {
        assert_eq!(esc("<a href='x'>&</a>"), "&lt;a href=&#39;x&#39;&gt;&amp;&lt;/a&gt;");
    }

    #[test]
    fn an_unknown_json_file_is_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("other.json");
        std::fs::write(&p, "{\"hello\": 1}").expect("write");
        let e = load(&p).expect_err("refused");
        assert!(e.to_string().contains("other.json") && e.to_string().contains("not a tierwise result"), "{e}");
        std::fs::write(&p, "not json").expect("write");
        assert!(load(&p).expect_err("refused").to_string().contains("not JSON"));
    }
}
