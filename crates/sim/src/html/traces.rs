//! The report's trace sections: for every trace the results name and that is here, what a
//! paper shows of it — reuse distances, popularity, the op × size mix and the volumes
//! ([`crate::analysis`]).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::sections::{figure, trace_name};
use super::{ResultFile, csv_link, esc, table};
use crate::analysis::TraceAnalysis;
use crate::plot::{BarChart, ChartSpec, LineChart, Series};

/// Traces larger than this are not read again for the report.
const MAX_TRACE_BYTES: u64 = 512 << 20;

/// Every trace the results name, once, with the format a result recorded for it.
pub(super) fn named_traces(inputs: &[(PathBuf, ResultFile)]) -> Vec<(String, String)> {
    let mut traces: Vec<(String, String)> = Vec::new();
    let mut add = |t: &str, fmt: &str| {
        if !t.is_empty() && !traces.iter().any(|x| x.0 == t) {
            traces.push((t.to_string(), fmt.to_string()));
        }
    };
    for (_, r) in inputs {
        match r {
            ResultFile::Compare(c) => add(&c.trace, c.rows.first().map_or("", |r| r.report.format.as_str())),
            ResultFile::Mrc(m) => add(&m.trace, ""),
            ResultFile::Sim(s) => add(&s.trace, &s.format),
            ResultFile::Sweep(s) => s.rows.iter().for_each(|r| add(&r.trace, &r.report.format)),
            ResultFile::Reproduce(_) => {}
        }
    }
    traces
}

/// The traces to analyse: every trace named, but one replicate per synthetic workload of a
/// sweep (its replicates differ only in their seed).
fn analysed_traces(inputs: &[(PathBuf, ResultFile)]) -> Vec<String> {
    let mut replicates: Vec<&str> = Vec::new();
    for (_, r) in inputs {
        if let ResultFile::Sweep(s) = r {
            // (workload, its first replicate's trace)
            let mut first: Vec<(&str, &str)> = Vec::new();
            for row in s.rows.iter().filter(|r| !r.workload.is_empty() && r.workload != r.trace) {
                match first.iter().find(|f| f.0 == row.workload) {
                    Some(f) if f.1 != row.trace => replicates.push(&row.trace),
                    Some(_) => {}
                    None => first.push((&row.workload, &row.trace)),
                }
            }
        }
    }
    named_traces(inputs).into_iter().map(|t| t.0).filter(|t| !replicates.contains(&t.as_str())).collect()
}

/// One section per trace that is here and readable: (trace name, HTML).
pub(super) fn analyses(inputs: &[(PathBuf, ResultFile)]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for t in analysed_traces(inputs) {
        let p = Path::new(&t);
        if std::fs::metadata(p).map_or(true, |m| m.len() >= MAX_TRACE_BYTES) {
            continue;
        }
        let Some(mode) = resolved_blocks(p) else { continue };
        let open = || crate::trace::open_trace(p, &crate::trace::OpenOptions::default());
        if let Ok(a) = crate::analysis::analyse(open, mode, &mut crate::sim::NoProgress) {
            out.push((trace_name(&t), section(&t, &a)));
        }
    }
    out
}

/// 4 KiB blocks anchored where the trace's requests start, as runs anchor them: the object
/// mode the report names is the one used (`blocks:4KiB@3584`, not `@auto`).
pub(super) fn resolved_blocks(path: &Path) -> Option<crate::objects::ObjectMode> {
    let mode = crate::objects::ObjectMode::parse("blocks:4KiB").ok()?;
    crate::alignment::resolve_anchor_of(path, &crate::trace::OpenOptions::default(), mode).ok().map(|m| m.0)
}

fn pct(part: u64, whole: u64) -> String {
    if whole == 0 { "–".into() } else { format!("{:.1} %", part as f64 * 100.0 / whole as f64) }
}

/// Cumulative share of the reuses at each bucket's upper bound.
fn cdf(h: &[(u64, u64)]) -> Vec<(f64, f64)> {
    let total: u64 = h.iter().map(|b| b.1).sum();
    let mut acc = 0u64;
    h.iter()
        .map(|&(upper, c)| {
            acc += c;
            (upper as f64, if total == 0 { 0.0 } else { acc as f64 / total as f64 })
        })
        .collect()
}

fn section(path: &str, a: &TraceAnalysis) -> String {
    let p = &a.popularity;
    let mut o = String::new();
    let top = |f: f64| {
        p.top_shares.iter().find(|s| (s.0 - f).abs() < 1e-9).map_or("–".into(), |s| format!("{:.1} %", s.1 * 100.0))
    };
    let rows = vec![
        vec!["file".into(), format!("<code>{}</code>", esc(path))],
        vec!["objects".into(), format!("{} ({})", a.first_accesses, esc(&a.object_mode))],
        vec!["object accesses".into(), a.accesses.to_string()],
        vec!["objects accessed once".into(), pct(p.one_hit_objects, a.first_accesses)],
        vec!["accesses to the top 1 % / 10 % of objects".into(), format!("{} / {}", top(0.01), top(0.1))],
        vec!["Zipf exponent (log-log fit)".into(), p.zipf_alpha.map_or("–".into(), |x| format!("{x:.2}"))],
        vec!["volumes".into(), a.per_volume.len().to_string()],
    ];
    o.push_str(&table(&["", ""], &rows, "kv"));
    let reuse = ChartSpec::Line(LineChart {
        title: "Reuse distance".into(),
        x_label: "distance since the object's previous access (log)".into(),
        y_label: "share of reuses at or below".into(),
        series: vec![
            Series::new("reuse time (accesses)", cdf(&a.reuse_time)),
            Series::new("stack distance (distinct objects = LRU cache size)", cdf(&a.stack_distance)),
        ],
        log_x: true,
        log_y: Some(false),
    });
    o.push_str(&figure(
        &reuse,
        "Cumulative distribution of reuse distances; first accesses left out. The stack distance curve is LRU's hit \
         ratio among reuses at that cache size.",
    ));
    let popularity = ChartSpec::Line(LineChart {
        title: "Popularity".into(),
        x_label: "object rank (log)".into(),
        y_label: "accesses (log)".into(),
        series: vec![Series::new(
            "accesses of the object of that rank",
            p.rank_frequency.iter().map(|&(r, c)| (r as f64, c as f64)).collect(),
        )],
        log_x: true,
        log_y: Some(true),
    });
    o.push_str(&figure(&popularity, "Rank-frequency plot: a straight line is a Zipf distribution."));
    let mix = ChartSpec::Bars(BarChart {
        title: "Requests by operation and size".into(),
        x_label: "request size (up to)".into(),
        y_label: "requests".into(),
        groups: a.op_size_mix.iter().map(|m| tierwise_core::Bytes(m.upper_bytes).to_string()).collect(),
        series: vec![
            ("reads".into(), a.op_size_mix.iter().map(|m| Some(m.reads as f64)).collect()),
            ("writes".into(), a.op_size_mix.iter().map(|m| Some(m.writes as f64)).collect()),
        ],
        intervals: Vec::new(),
        published: Vec::new(),
        log_y: None,
    });
    o.push_str(&figure(&mix, "Request sizes in power-of-two buckets, reads and writes."));
    if a.per_volume.len() > 1 {
        let mut v = a.per_volume.clone();
        v.sort_by_key(|x| std::cmp::Reverse(x.requests));
        let mut csv = String::from("volume,requests,reads,read_bytes,write_bytes,objects,footprint_bytes\n");
        let mut rows = Vec::new();
        for x in &v {
            let _ = writeln!(
                csv,
                "{},{},{},{},{},{},{}",
                x.volume, x.requests, x.reads, x.read_bytes, x.write_bytes, x.objects, x.footprint_bytes
            );
            if rows.len() < 32 {
                rows.push(vec![
                    x.volume.to_string(),
                    x.requests.to_string(),
                    pct(x.reads, x.requests),
                    tierwise_core::Bytes(x.read_bytes).to_string(),
                    tierwise_core::Bytes(x.write_bytes).to_string(),
                    tierwise_core::Bytes(x.footprint_bytes).to_string(),
                ]);
            }
        }
        let _ = write!(
            o,
            "<h3>Volumes ({} shown of {}, busiest first)</h3>{}{}",
            rows.len(),
            v.len(),
            table(&["volume", "requests", "reads", "read", "written", "footprint"], &rows, "data"),
            csv_link(&format!("{}-volumes.csv", trace_name(path)), &csv)
        );
    }
    o
}
