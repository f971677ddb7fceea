//! The report's sections: provenance, comparisons (and sweeps), miss-ratio curves,
//! reproductions and single runs.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::{ResultFile, SweepSummary, csv_link, esc, table};
use crate::compare::Comparison;
use crate::metrics::SimReport;
use crate::mrc::Mrc;
use crate::plot::{ChartSpec, bars_by_size, mrc_spec, svg};
use crate::reproduce::Reproduction;

/// The file name of a trace path.
pub fn trace_name(path: &str) -> String {
    Path::new(path).file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_else(|| path.to_string())
}

pub(super) fn figure(spec: &ChartSpec, caption: &str) -> String {
    match svg(spec) {
        Ok(s) => format!("<figure>{s}<figcaption class=\"meta\">{}</figcaption></figure>", esc(caption)),
        Err(e) => format!("<p class=\"meta\">chart not drawn: {}</p>", esc(&e)),
    }
}

fn gib(b: u64) -> String {
    format!("{:.3}", b as f64 / (1u64 << 30) as f64)
}

fn f(v: f64, digits: usize) -> String {
    if v.is_finite() { format!("{v:.digits$}") } else { "–".into() }
}

/// Every trace the results name: its statistics when the file is here.
fn traces_table(inputs: &[(PathBuf, ResultFile)]) -> String {
    let mut rows = Vec::new();
    for (t, fmt) in &super::traces::named_traces(inputs) {
        let p = Path::new(t);
        let stats = std::fs::metadata(p).ok().filter(|m| m.len() < 512 << 20).and_then(|_| {
            let mode = super::traces::resolved_blocks(p)?;
            let mut tr = crate::trace::open_trace(p, &crate::trace::OpenOptions::default()).ok()?;
            crate::stat::trace_stats(&mut tr, mode, &mut crate::sim::NoProgress).ok()
        });
        match stats {
            Some(s) => rows.push(vec![
                format!("<code>{}</code>", esc(t)),
                esc(&s.format),
                s.requests.to_string(),
                f(s.read_fraction() * 100.0, 1),
                gib(s.read_bytes + s.write_bytes),
                format!("{} ({})", gib(s.footprint_bytes), esc(&s.object_mode)),
                f(s.duration_s, 1),
            ]),
            None => rows.push(vec![
                format!("<code>{}</code>", esc(t)),
                esc(fmt),
                "<span class=\"meta\">file not here: statistics omitted</span>".into(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
            ]),
        }
    }
    if rows.is_empty() {
        return String::new();
    }
    let h = ["trace", "format", "requests", "reads (%)", "bytes moved (GiB)", "footprint (GiB)", "duration (s)"];
    format!("<h3>Traces</h3>{}", table(&h, &rows, "data"))
}

/// A spec's knobs: those given, then every other knob at its default.
fn knobs_of(spec: &str, catalogue: &[crate::jobs::CatalogueEntry]) -> String {
    let (name, given) = spec.split_once(':').unwrap_or((spec, ""));
    let given: Vec<(&str, &str)> = given.split(',').filter_map(|kv| kv.split_once('=')).collect();
    let mut parts: Vec<String> = given.iter().map(|(k, v)| format!("<b>{}={}</b>", esc(k), esc(v))).collect();
    if let Some(a) = catalogue.iter().find(|e| e.kind == "architecture" && e.name == name) {
        for k in &a.knobs {
            if !given.iter().any(|g| g.0 == k.name) {
                parts.push(format!("{}={}", esc(&k.name), esc(&k.default)));
            }
        }
    }
    parts.join(", ")
}

fn all_reports(inputs: &[(PathBuf, ResultFile)]) -> Vec<&SimReport> {
    let mut out = Vec::new();
    for (_, r) in inputs {
        match r {
            ResultFile::Compare(c) => out.extend(c.rows.iter().map(|r| &r.report)),
            ResultFile::Sim(s) => out.push(s.as_ref()),
            ResultFile::Sweep(s) => out.extend(s.rows.iter().map(|r| &r.report)),
            ResultFile::Reproduce(r) => out.extend(r.runs.iter().map(|r| &r.report)),
            ResultFile::Mrc(_) => {}
        }
    }
    out
}

/// The build that computed a result file (version, sources hash, commit).
fn build_of(r: &ResultFile) -> String {
    let build = match r {
        ResultFile::Compare(c) => c.build.clone(),
        ResultFile::Mrc(m) => m.build.clone(),
        ResultFile::Reproduce(r) => r.build.clone(),
        ResultFile::Sim(r) => r.build.clone(),
        ResultFile::Sweep(s) if s.build.is_empty() => format!("{} (build not recorded)", s.tierwise),
        ResultFile::Sweep(s) => s.build.clone(),
    };
    if build.is_empty() { "(not recorded)".into() } else { build }
}

/// Where the numbers come from: files, traces, specs with every knob, model, seeds, version.
pub fn provenance(inputs: &[(PathBuf, ResultFile)]) -> String {
    let mut o = String::new();
    let files: Vec<Vec<String>> = inputs
        .iter()
        .map(|(p, r)| {
            let kind = match r {
                ResultFile::Compare(_) => "comparison",
                ResultFile::Mrc(_) => "miss-ratio curve",
                ResultFile::Reproduce(_) => "reproduction",
                ResultFile::Sim(_) => "simulation",
                ResultFile::Sweep(_) => "sweep",
            };
            vec![format!("<code>{}</code>", esc(&p.display().to_string())), kind.into(), esc(&build_of(r))]
        })
        .collect();
    let _ = write!(o, "<h3>Result files</h3>{}", table(&["file", "kind", "build"], &files, "data"));
    o.push_str(&traces_table(inputs));
    let reports = all_reports(inputs);
    let catalogue = crate::jobs::catalogue();
    let mut specs: BTreeMap<&str, ()> = BTreeMap::new();
    let mut model: BTreeMap<(String, String, String), u64> = BTreeMap::new();
    for r in &reports {
        specs.insert(&r.arch, ());
        *model.entry((r.devices.clone(), r.timing.clone(), r.objects.clone())).or_default() += 1;
    }
    if !specs.is_empty() {
        let rows: Vec<Vec<String>> = specs
            .keys()
            .map(|s| {
                vec![
                    format!("<code>{}</code>", esc(s)),
                    format!("<span class=\"l\">{}</span>", knobs_of(s, &catalogue)),
                ]
            })
            .collect();
        let t = table(&["spec", "knobs"], &rows, "kv");
        // A reproduction runs dozens of specs: fold them away past a screenful.
        let t =
            if rows.len() > 12 { format!("<details><summary>{} specs</summary>{t}</details>", rows.len()) } else { t };
        let _ = write!(
            o,
            "<h3>Architectures and knobs</h3><p class=\"meta\">Knobs in bold were given; the rest ran at their defaults.</p>{t}"
        );
        let rows: Vec<Vec<String>> = model
            .iter()
            .map(|((d, t, ob), n)| {
                let d = if d.is_empty() { "(not recorded)".to_string() } else { d.clone() };
                vec![esc(&d), esc(t), esc(ob), n.to_string()]
            })
            .collect();
        let _ = write!(o, "<h3>Model</h3>{}", table(&["device presets", "timing", "objects", "runs"], &rows, "kv"));
    }
    for (_, r) in inputs {
        match r {
            ResultFile::Reproduce(r) => {
                let _ = write!(
                    o,
                    "<p>Reproduction <b>{}</b>: scale {}, seed {} for the synthetic stand-ins.</p>",
                    esc(&r.target),
                    r.scale,
                    r.seed
                );
            }
            ResultFile::Sweep(s) => {
                let cfg = serde_json::to_string_pretty(&s.sweep).unwrap_or_default();
                let _ = write!(
                    o,
                    "<details><summary>Sweep configuration ({} jobs, tierwise {})</summary><pre>{}</pre></details>",
                    s.jobs,
                    esc(&s.tierwise),
                    esc(&cfg)
                );
            }
            _ => {}
        }
    }
    o
}

/// The per-size table of a comparison.
/// One table per SSD size, as the CLI prints them.
fn comparison_tables(c: &Comparison) -> String {
    let mut sizes: Vec<&str> = Vec::new();
    for r in &c.rows {
        if !sizes.contains(&r.size_label.as_str()) {
            sizes.push(&r.size_label);
        }
    }
    let mut o = String::new();
    for size in sizes {
        let rows: Vec<&crate::compare::CompareRow> = c.rows.iter().filter(|r| r.size_label == size).collect();
        let bytes = rows.first().map_or(0, |r| r.report.ssd_bytes);
        let _ = write!(o, "<h4>SSD {} ({})</h4>{}", esc(size), tierwise_core::Bytes(bytes), comparison_table(&rows));
    }
    o
}

/// Three significant digits whatever the magnitude: `$/IOPS` of a cheap fast configuration
/// printed `0.0000` with fixed decimals.
fn significant(v: f64) -> String {
    if !v.is_finite() {
        return "–".into();
    }
    if v == 0.0 {
        // Only open-loop runs give no cost per IOPS (their IOPS is the offered load).
        return "–".into();
    }
    if v.abs() < 1e-4 { format!("{v:.2e}") } else { crate::report::significant(v) }
}

fn comparison_table(rows: &[&crate::compare::CompareRow]) -> String {
    let timed = rows.first().is_some_and(|r| r.report.timing != "none");
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|row| {
            let r = &row.report;
            let mut v = vec![format!("<code>{}</code>", esc(&r.arch))];
            if timed {
                v.extend([
                    f(r.iops, 0),
                    f(r.mb_s, 2),
                    f(r.latency.mean_us / 1e3, 3),
                    f(r.latency.p50_us / 1e3, 3),
                    f(r.latency.p95_us / 1e3, 3),
                    f(r.latency.p99_us / 1e3, 3),
                ]);
            }
            v.extend([
                f(r.read_hit.ram * 100.0, 1),
                f(r.read_hit.ssd * 100.0, 1),
                f(r.read_hit.hdd * 100.0, 1),
                gib(r.ssd.write_bytes),
                format!("{:.3e}", r.endurance.ssd_eu),
                f(r.energy_j, 0),
                significant(r.cost.usd_per_iops),
            ]);
            v
        })
        .collect();
    let mut h = vec!["architecture"];
    if timed {
        h.extend(["IOPS", "MB/s", "mean (ms)", "p50 (ms)", "p95 (ms)", "p99 (ms)"]);
    }
    h.extend([
        "reads from RAM (%)",
        "reads from SSD (%)",
        "reads from HDD (%)",
        "SSD writes (GiB)",
        "SSD EU (ppm of life)",
        "energy (J)",
        "$/IOPS",
    ]);
    table(&h, &rows, "data")
}

/// A comparison (or one trace of a sweep): table, charts, CSV.
pub fn comparison(c: &Comparison, file: &str) -> String {
    let mut o = String::new();
    let timing = c.rows.first().map(|r| r.report.timing.clone()).unwrap_or_default();
    let _ = write!(
        o,
        "<p class=\"meta\">Trace <code>{}</code>, footprint {:.3} GiB, timing {}, {} runs.</p>",
        esc(&c.trace),
        c.footprint_bytes as f64 / (1u64 << 30) as f64,
        esc(&timing),
        c.rows.len()
    );
    for n in &c.notes {
        let _ = write!(o, "<p class=\"meta\">note: {}</p>", esc(n));
    }
    o.push_str(&comparison_tables(c));
    o.push_str(&csv_link(&file.replace(".json", ".csv"), &crate::report::comparison_csv(c)));
    let name = trace_name(&c.trace);
    let chart = |title: &str, unit: &str, v: fn(&SimReport) -> f64| {
        figure(&bars_by_size(c, &format!("{title} — {name} ({timing})"), unit, v), title)
    };
    if timing.starts_with("closed") {
        o.push_str(&chart("Throughput by SSD size", "throughput (IOPS)", |r| r.iops));
    }
    if timing != "none" {
        o.push_str(&chart("Median response time (p50)", "p50 response time (ms)", |r| r.latency.p50_us / 1e3));
        o.push_str(&chart("p95 response time", "p95 response time (ms)", |r| r.latency.p95_us / 1e3));
        o.push_str(&chart("p99 response time", "p99 response time (ms)", |r| r.latency.p99_us / 1e3));
    }
    o.push_str(&chart("Reads served without the HDD", "reads served by SSD or RAM (%)", |r| {
        (r.read_hit.ssd + r.read_hit.ram) * 100.0
    }));
    o.push_str(&chart("SSD writes (wear)", "bytes written to the SSD (GiB)", |r| {
        r.ssd.write_bytes as f64 / (1u64 << 30) as f64
    }));
    if timing != "none" {
        o.push_str(&chart("Energy", "energy of both devices (J)", |r| r.energy_j));
        if !timing.starts_with("open") {
            // Open loop serves the offered load: no cost per IOPS.
            o.push_str(&chart("Cost per IOPS", "capital cost per IOPS (USD)", |r| r.cost.usd_per_iops));
        }
    }
    o
}

/// Failed sweep jobs with their errors.
pub fn sweep_failures(s: &SweepSummary) -> String {
    let rows: Vec<Vec<String>> = s
        .failed
        .iter()
        .map(|f| {
            let g = |k: &str| esc(f.get(k).and_then(|v| v.as_str()).unwrap_or(""));
            vec![
                g("trace"),
                format!("<code>{}</code>", g("spec")),
                g("ssd"),
                format!("<span class=\"not\">{}</span>", g("error")),
            ]
        })
        .collect();
    table(&["trace", "spec", "SSD", "error"], &rows, "kv")
}

/// A miss-ratio curve: chart, points, CSV.
pub fn mrc(m: &Mrc, file: &str) -> String {
    let mut o = format!(
        "<p class=\"meta\">{} accesses, {} objects, footprint {:.3} GiB, {} cold misses (the floor at every size).</p>",
        m.accesses,
        m.objects,
        m.footprint_bytes as f64 / (1u64 << 30) as f64,
        m.cold_misses
    );
    if let Some(s) = &m.sampling {
        let _ = write!(
            o,
            "<p class=\"meta\">Computed on a SHARDS spatial sample: {} % of the objects (seed {}; {} accesses of {} \
             objects), each size simulated at {} % of its bytes; {} smaller sizes left out (their scaled cache would hold \
             less than one object).</p>",
            crate::plot::short(s.rate * 100.0),
            s.seed,
            s.sampled_accesses,
            s.sampled_objects,
            crate::plot::short(s.rate * 100.0),
            s.sizes_left_out
        );
    }
    if let Some(e) = &m.error {
        let _ = write!(
            o,
            "<p class=\"meta\">Error against the exact curve: max |Δ miss ratio| {:.4}, mean {:.4}.</p>",
            e.max_abs, e.mean_abs
        );
    }
    if !m.belady.is_empty() {
        o.push_str(
            "<p class=\"meta\">Dashed: Belady's MIN on the same accesses at the same sizes, the offline optimum for \
             objects of one size (evict the object whose next access is furthest away; libCacheSim's Belady gives \
             the same counts). No policy that caches every miss can go below it.</p>",
        );
    }
    let caption = format!("{} miss ratio by cache size", crate::plot::mrc_name(m));
    o.push_str(&figure(&mrc_spec(m, &trace_name(&m.trace)), &caption));
    let belady = !m.belady.is_empty();
    let rows: Vec<Vec<String>> = m
        .points
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let mut row =
                vec![tierwise_core::Bytes(p.size_bytes).to_string(), f(p.miss_ratio, 4), p.misses.to_string()];
            if let Some(b) = m.belady.get(i).filter(|_| belady) {
                row.extend([f(b.miss_ratio, 4), b.misses.to_string()]);
            }
            row
        })
        .collect();
    let headers: &[&str] = if belady {
        &["cache size", "miss ratio", "misses", "Belady miss ratio", "Belady misses"]
    } else {
        &["cache size", "miss ratio", "misses"]
    };
    let csv = m.to_csv();
    let _ = write!(
        o,
        "<details><summary>{} points</summary>{}</details>{}",
        rows.len(),
        table(headers, &rows, "data"),
        csv_link(&file.replace(".json", ".csv"), &csv)
    );
    o
}

/// A reproduction: the paper's numbers beside ours, held or not, tables, charts, CSV.
pub fn reproduction(r: &Reproduction) -> String {
    use crate::reproduce::Verdict;
    let count = |v: Verdict| r.findings.iter().filter(|f| f.verdict == v).count();
    let mut o = format!(
        "<p>{} of {} claims held (same direction, effect within a factor of 2 of the paper's), {} in direction \
         only, {} not held, at scale {} (seed {}).</p>",
        count(Verdict::Held),
        r.findings.len(),
        count(Verdict::DirectionOnly),
        count(Verdict::NotHeld),
        r.scale,
        r.seed
    );
    let rows: Vec<Vec<String>> = r
        .findings
        .iter()
        .map(|f| {
            let verdict = match f.verdict {
                Verdict::Held => "<span class=\"held\">held</span>",
                Verdict::DirectionOnly => "<span class=\"dir\">direction only</span>",
                Verdict::NotHeld => "<span class=\"not\">not held</span>",
            };
            vec![format!("<span class=\"l\">{}</span>", esc(&f.claim)), esc(&f.paper), esc(&f.ours), verdict.into()]
        })
        .collect();
    let _ =
        write!(o, "<h3>The paper's claims against ours</h3>{}", table(&["claim", "paper", "ours", ""], &rows, "kv"));
    let w: Vec<Vec<String>> = r
        .workloads
        .iter()
        .map(|w| vec![esc(&w.name), esc(&w.kind), format!("<span class=\"l\">{}</span>", esc(&w.detail))])
        .collect();
    let _ = write!(o, "<h3>Workloads</h3>{}", table(&["workload", "kind", "provenance"], &w, "kv"));
    for t in &r.tables {
        let headers: Vec<&str> = t.headers.iter().map(String::as_str).collect();
        let rows: Vec<Vec<String>> = t.rows.iter().map(|row| row.iter().map(|c| esc(c)).collect()).collect();
        let _ = write!(
            o,
            "<h3>{}</h3><p class=\"meta\">Paper: {}</p>{}",
            esc(&t.title),
            esc(&t.paper),
            table(&headers, &rows, "data")
        );
    }
    for c in &r.charts {
        let caption = if c.paper.is_empty() {
            c.title.clone()
        } else {
            format!("{} — outlined bars and bare markers (\"paper: …\") are the paper's published values", c.title)
        };
        o.push_str(&figure(&c.spec(), &caption));
    }
    for n in &r.notes {
        let _ = write!(o, "<p class=\"meta\">note: {}</p>", esc(n));
    }
    let mut csv = format!("workload,label,{}\n", crate::report::CSV_HEADER);
    for run in &r.runs {
        let _ = writeln!(
            csv,
            "\"{}\",\"{}\",{}",
            run.workload.replace('"', "\"\""),
            run.label.replace('"', "\"\""),
            crate::report::csv_row(&run.report, &run.label, run.ssd_fraction)
        );
    }
    o.push_str(&csv_link(&format!("reproduce-{}.csv", r.target), &csv));
    o
}

/// One simulation's figures.
pub fn single(r: &SimReport) -> String {
    let kv = |k: &str, v: String| vec![esc(k), v];
    let rows = vec![
        kv("architecture", format!("<code>{}</code>", esc(&r.arch))),
        kv("trace", format!("<code>{}</code> ({})", esc(&r.trace), esc(&r.format))),
        kv("SSD", format!("{}", tierwise_core::Bytes(r.ssd_bytes))),
        kv("timing", esc(&r.timing)),
        kv("devices", esc(&r.devices)),
        kv("requests", format!("{} ({} reads, {} writes)", r.requests, r.reads, r.writes)),
        kv("throughput", format!("{} IOPS, {} MB/s", f(r.iops, 0), f(r.mb_s, 2))),
        kv(
            "response time (ms)",
            format!(
                "mean {}, p50 {}, p95 {}, p99 {}",
                f(r.latency.mean_us / 1e3, 3),
                f(r.latency.p50_us / 1e3, 3),
                f(r.latency.p95_us / 1e3, 3),
                f(r.latency.p99_us / 1e3, 3)
            ),
        ),
        kv(
            "reads from SSD / RAM / HDD (%)",
            format!(
                "{} / {} / {}",
                f(r.read_hit.ssd * 100.0, 1),
                f(r.read_hit.ram * 100.0, 1),
                f(r.read_hit.hdd * 100.0, 1)
            ),
        ),
        kv("SSD writes", format!("{} GiB (EU {:.3e})", gib(r.ssd.write_bytes), r.endurance.ssd_eu)),
        kv("energy", format!("{} J, mean {} W", f(r.energy_j, 0), f(r.mean_power_w, 2))),
        kv("cost", format!("${} capex, ${} per IOPS", f(r.cost.capex_usd, 0), significant(r.cost.usd_per_iops))),
    ];
    let mut o = table(&["", ""], &rows, "kv");
    let csv = format!("{}\n{}\n", crate::report::CSV_HEADER, crate::report::csv_row(r, "", 0.0));
    o.push_str(&csv_link("sim.csv", &csv));
    o
}

#[cfg(test)]
mod tests {
    use super::significant;

    #[test]
    fn cost_per_iops_keeps_three_significant_digits() {
        assert_eq!(significant(0.000_123_4), "0.000123");
        assert_eq!(significant(0.000_012_34), "1.23e-5");
        assert_eq!(significant(0.001_234), "0.00123");
        assert_eq!(significant(12.345), "12.3");
        assert_eq!(significant(1234.6), "1235");
        assert_eq!(significant(0.0), "–", "open loop: no cost per IOPS");
    }
}
