//! A replicated sweep's workloads: each metric's mean over the replicates with its confidence
//! interval, in a table (mean ± half-width) and as bars with error bars. The intervals come
//! from the Python package (`tierwise.stats.summarize`, Student's t), which wrote them into
//! `sweep.json`; the report draws what it was given.

use std::fmt::Write as _;

use super::{SweepAggregate, SweepSummary, csv_link, esc, table};
use crate::plot::{BarChart, ChartSpec, svg};

/// What the table and charts show: label, metric, scale (to the unit in the label), digits.
const METRICS: [(&str, &str, f64, usize); 7] = [
    ("throughput (IOPS)", "iops", 1.0, 0),
    ("miss ratio", "miss_ratio", 1.0, 4),
    ("reads from RAM (%)", "read_hit.ram", 100.0, 2),
    ("reads from SSD (%)", "read_hit.ssd", 100.0, 2),
    ("reads from HDD (%)", "read_hit.hdd", 100.0, 2),
    ("mean response time (ms)", "latency.mean_us", 1e-3, 3),
    ("p99 response time (ms)", "latency.p99_us", 1e-3, 3),
];

/// Metrics some run measured (untimed runs have no throughput or response times).
fn measured<'a>(
    rows: &[&SweepAggregate],
    metrics: &'a [(&'a str, &'a str, f64, usize)],
) -> Vec<&'a (&'a str, &'a str, f64, usize)> {
    metrics
        .iter()
        .filter(|(_, key, _, _)| {
            rows.iter().any(|a| a.metrics.get(*key).and_then(|e| e.mean).is_some_and(|m| m != 0.0))
        })
        .collect()
}

fn cell(a: &SweepAggregate, key: &str, scale: f64, digits: usize) -> String {
    let Some(e) = a.metrics.get(key) else { return "–".into() };
    match (e.mean, e.ci_low, e.ci_high) {
        (Some(m), Some(l), Some(h)) => {
            format!("{:.digits$} ± {:.digits$}", m * scale, (h - l) / 2.0 * scale)
        }
        (Some(m), _, _) => format!("{:.digits$}", m * scale),
        _ => "–".into(),
    }
}

/// One section per replicated workload: (workload, HTML).
pub fn sections(s: &SweepSummary) -> Vec<(String, String)> {
    let mut workloads: Vec<&str> = Vec::new();
    for a in &s.aggregates {
        if !workloads.contains(&a.workload.as_str()) {
            workloads.push(&a.workload);
        }
    }
    workloads.into_iter().map(|w| (w.to_string(), workload(s, w))).collect()
}

fn workload(s: &SweepSummary, w: &str) -> String {
    let rows: Vec<&SweepAggregate> = s.aggregates.iter().filter(|a| a.workload == w).collect();
    let n = rows.iter().map(|a| a.n).max().unwrap_or(0);
    let confidence = rows.first().map_or(0.95, |a| a.confidence) * 100.0;
    let shown = measured(&rows, &METRICS);
    let mut o = String::new();
    let _ = write!(
        o,
        "<p class=\"meta\">Workload <code>{}</code>: {n} replicates (seeds in <code>results.parquet</code>); each cell is \
         the mean over the replicates ± the half-width of its {confidence:.0} % confidence interval (Student's t, n − 1 \
         degrees of freedom).</p>",
        esc(w)
    );
    let mut headers = vec!["architecture", "SSD size", "n"];
    headers.extend(shown.iter().map(|m| m.0));
    let body: Vec<Vec<String>> = rows
        .iter()
        .map(|a| {
            let mut r = vec![format!("<code>{}</code>", esc(&a.label())), esc(&a.size_label), a.n.to_string()];
            r.extend(shown.iter().map(|(_, key, scale, digits)| cell(a, key, *scale, *digits)));
            r
        })
        .collect();
    o.push_str(&table(&headers, &body, "data"));
    let mut csv = String::from("workload,spec,size,n,metric,mean,std,ci_low,ci_high\n");
    for a in &rows {
        for (key, e) in &a.metrics {
            let v = |x: Option<f64>| x.map(|x| x.to_string()).unwrap_or_default();
            let _ = writeln!(
                csv,
                "\"{}\",\"{}\",{},{},{key},{},{},{},{}",
                a.workload.replace('"', "\"\""),
                a.label().replace('"', "\"\""),
                a.size_label,
                a.n,
                v(e.mean),
                v(e.std),
                v(e.ci_low),
                v(e.ci_high)
            );
        }
    }
    o.push_str(&csv_link("sweep-replicates.csv", &csv));
    for (label, key, scale, _) in shown.iter().filter(|m| matches!(m.1, "iops" | "miss_ratio" | "read_hit.ssd")) {
        let chart = bars(&rows, &format!("{label} — {w} (mean, {confidence:.0} % CI)"), label, key, *scale);
        match svg(&chart) {
            Ok(svg) => {
                let _ = write!(
                    o,
                    "<figure>{svg}<figcaption class=\"meta\">{}: bars are means over {n} replicates, error bars \
                     the {confidence:.0} % confidence interval of the mean.</figcaption></figure>",
                    esc(label)
                );
            }
            Err(e) => {
                let _ = write!(o, "<p class=\"meta\">chart not drawn: {}</p>", esc(&e));
            }
        }
    }
    o
}

/// Grouped bars per SSD size, one per spec, with error bars.
fn bars(rows: &[&SweepAggregate], title: &str, y_label: &str, key: &str, scale: f64) -> ChartSpec {
    let mut groups: Vec<String> = Vec::new();
    let mut specs: Vec<String> = Vec::new();
    for a in rows {
        if !groups.contains(&a.size_label) {
            groups.push(a.size_label.clone());
        }
        if !specs.contains(&a.label()) {
            specs.push(a.label());
        }
    }
    let find = |spec: &str, g: &str| {
        rows.iter().find(|a| a.label() == spec && a.size_label == g).and_then(|a| a.metrics.get(key))
    };
    let series = specs
        .iter()
        .map(|s| (s.to_string(), groups.iter().map(|g| find(s, g).and_then(|e| e.mean).map(|m| m * scale)).collect()))
        .collect();
    let intervals = specs
        .iter()
        .map(|s| {
            groups.iter().map(|g| find(s, g).and_then(|e| Some((e.ci_low? * scale, e.ci_high? * scale)))).collect()
        })
        .collect();
    ChartSpec::Bars(BarChart {
        title: title.into(),
        x_label: "SSD size (share of the trace's footprint, or bytes)".into(),
        y_label: y_label.into(),
        groups,
        series,
        intervals,
        published: Vec::new(),
        log_y: Some(false),
    })
}
