//! Knob-response curves: for every knob a sweep varies over three or more numeric values, the
//! run's key metric against the knob's value, one line per architecture (the spec without that
//! knob) and SSD size, one chart per trace.

use std::collections::BTreeMap;

use super::sections::{figure, trace_name};
use super::{SweepRow, SweepSummary, esc, table};
use crate::plot::{ChartSpec, LineChart, Series, key_metric};

/// A knob value as a number: plain, a percentage, a size (bytes) or a duration (seconds).
fn numeric(v: &str) -> Option<f64> {
    let v = v.trim();
    if let Ok(x) = v.parse::<f64>() {
        return Some(x);
    }
    if let Some(p) = v.strip_suffix('%') {
        return p.trim().parse::<f64>().ok();
    }
    if let Ok(b) = tierwise_core::params::parse_size(v) {
        return Some(b as f64);
    }
    tierwise_core::params::parse_duration(v).ok().map(|d| d.0 as f64 / 1e9)
}

/// The spec without `knob=…`: what a curve's line is of.
fn without(spec: &str, knob: &str) -> String {
    let Some((name, knobs)) = spec.split_once(':') else { return spec.to_string() };
    let kept: Vec<&str> = knobs.split(',').filter(|kv| kv.split_once('=').is_none_or(|(k, _)| k != knob)).collect();
    if kept.is_empty() { name.to_string() } else { format!("{name}:{}", kept.join(",")) }
}

/// (section title, HTML) per knob and trace.
pub fn sections(s: &SweepSummary) -> Vec<(String, String)> {
    let mut values: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for r in &s.rows {
        for (k, v) in &r.knobs {
            let e = values.entry(k).or_default();
            if !e.contains(&v.as_str()) {
                e.push(v);
            }
        }
    }
    let mut out = Vec::new();
    for (knob, vals) in values {
        if vals.len() < 3 || vals.iter().any(|v| numeric(v).is_none()) {
            continue;
        }
        let mut traces: Vec<&str> = Vec::new();
        for r in s.rows.iter().filter(|r| r.knobs.contains_key(knob)) {
            if !traces.contains(&r.trace.as_str()) {
                traces.push(&r.trace);
            }
        }
        for t in traces {
            let rows: Vec<&SweepRow> = s.rows.iter().filter(|r| r.trace == t && r.knobs.contains_key(knob)).collect();
            out.push((format!("Sweep — {knob} on {}", trace_name(t)), curve(knob, t, &rows)));
        }
    }
    out
}

fn curve(knob: &str, trace: &str, rows: &[&SweepRow]) -> String {
    let timing = rows.first().map(|r| r.report.timing.clone()).unwrap_or_default();
    let (what, unit, value) = key_metric(&timing);
    let mut lines: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for r in rows {
        let Some(x) = r.knobs.get(knob).and_then(|v| numeric(v)) else { continue };
        let label = format!("{} @ {}", without(&r.spec, knob), r.size_label);
        lines.entry(label).or_default().push((x, value(&r.report)));
    }
    let series: Vec<Series> = lines
        .into_iter()
        .map(|(label, mut points)| {
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            Series::new(label, points)
        })
        .collect();
    let xs: Vec<f64> = series.iter().flat_map(|s| s.points.iter().map(|p| p.0)).collect();
    let log_x = crate::plot::wants_log(xs.iter().copied());
    let spec = ChartSpec::Line(LineChart {
        title: format!("{what} against {knob} — {} ({timing})", trace_name(trace)),
        x_label: format!("{knob}{}", if log_x { " (log)" } else { "" }),
        y_label: unit.to_string(),
        series,
        log_x,
        log_y: None,
    });
    let mut ordered: Vec<&&SweepRow> = rows.iter().collect();
    let x_of = |r: &SweepRow| r.knobs.get(knob).and_then(|v| numeric(v)).unwrap_or(f64::NAN);
    ordered.sort_by(|a, b| {
        (without(&a.spec, knob), a.size_fraction.to_bits(), 0)
            .cmp(&(without(&b.spec, knob), b.size_fraction.to_bits(), 0))
            .then(x_of(a).total_cmp(&x_of(b)))
    });
    let rows_html: Vec<Vec<String>> = ordered
        .iter()
        .map(|r| {
            vec![
                esc(&without(&r.spec, knob)),
                esc(&r.size_label),
                esc(r.knobs.get(knob).map_or("", |v| v.as_str())),
                format!("{:.4}", value(&r.report)),
            ]
        })
        .collect();
    format!(
        "{}{}",
        figure(&spec, &format!("The key metric of each run against {knob}; the other knobs as in the legend.")),
        table(&["architecture", "SSD", knob, unit], &rows_html, "data")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn knob_values_become_numbers_and_specs_lose_the_knob() {
        assert_eq!(numeric("0.5"), Some(0.5));
        assert_eq!(numeric("20%"), Some(20.0));
        assert_eq!(numeric("4MiB"), Some(4.0 * 1048576.0));
        assert_eq!(numeric("5s"), Some(5.0));
        assert_eq!(numeric("lru"), None);
        assert_eq!(without("cache:mode=write-back,dirty-high=20%", "dirty-high"), "cache:mode=write-back");
        assert_eq!(without("cache:dirty-high=20%", "dirty-high"), "cache");
    }
}
