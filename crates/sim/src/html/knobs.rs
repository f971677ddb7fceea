//! Knob-response curves: for every knob a sweep varies over three or more numeric values, the
//! run's key metric against the knob's value, one line per architecture (the spec without that
//! knob) and SSD size, one chart per trace.

use std::collections::BTreeMap;

use super::sections::{figure, trace_name};
use super::{MODEL_AXIS, SweepRow, SweepSummary, esc, model_variant, table, with_variant};
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

/// The number of each of `vals`, and the axis' wording: plain numbers, or `P:N` values with
/// one prefix `P` (a model axis such as `timing = ["closed:1", "closed:8", "closed:32"]`).
fn numeric_axis(knob: &str, vals: &[&str]) -> Option<(String, Vec<f64>)> {
    if let Some(xs) = vals.iter().map(|v| numeric(v)).collect::<Option<Vec<f64>>>() {
        return Some((knob.to_string(), xs));
    }
    let prefix = vals.first()?.split_once(':')?.0;
    let xs = vals
        .iter()
        .map(|v| v.split_once(':').filter(|(p, _)| *p == prefix).and_then(|(_, n)| numeric(n)))
        .collect::<Option<Vec<f64>>>()?;
    let name = knob.strip_prefix(MODEL_AXIS).unwrap_or(knob);
    let label = if name == "timing" && prefix == "closed" {
        "queue depth (timing closed:N)".to_string()
    } else {
        format!("{name} ({prefix}:N)")
    };
    Some((label, xs))
}

/// The x value of a run on `knob`'s axis.
fn x_of(r: &SweepRow, knob: &str) -> Option<f64> {
    let v = r.knobs.get(knob)?;
    numeric(v).or_else(|| v.split_once(':').and_then(|(_, n)| numeric(n)))
}

/// What a line of a knob's curve is of: the spec without the knob, the other model axes, the
/// SSD size.
fn line_of(r: &SweepRow, knob: &str) -> String {
    with_variant(&without(&r.spec, knob), &model_variant(&r.knobs, knob))
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
        let Some((axis, _)) = numeric_axis(knob, &vals).filter(|_| vals.len() >= 3) else { continue };
        let mut traces: Vec<&str> = Vec::new();
        for r in s.rows.iter().filter(|r| r.knobs.contains_key(knob)) {
            if !traces.contains(&r.trace.as_str()) {
                traces.push(&r.trace);
            }
        }
        for t in traces {
            let rows: Vec<&SweepRow> = s.rows.iter().filter(|r| r.trace == t && r.knobs.contains_key(knob)).collect();
            out.push((format!("Sweep — {knob} on {}", trace_name(t)), curve(knob, &axis, t, &rows)));
        }
    }
    out
}

fn curve(knob: &str, axis: &str, trace: &str, rows: &[&SweepRow]) -> String {
    let timing = rows.first().map(|r| r.report.timing.clone()).unwrap_or_default();
    let (what, unit, value) = key_metric(&timing);
    // On the timing axis the first run's timing names one point, not the chart.
    let timing = if knob == format!("{MODEL_AXIS}timing") { "timing on the x axis".to_string() } else { timing };
    let mut lines: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for r in rows {
        let Some(x) = x_of(r, knob) else { continue };
        let label = format!("{} @ {}", line_of(r, knob), r.size_label);
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
        title: format!("{what} against {axis} — {} ({timing})", trace_name(trace)),
        x_label: format!("{axis}{}", if log_x { " (log)" } else { "" }),
        y_label: unit.to_string(),
        series,
        log_x,
        log_y: None,
    });
    let mut ordered: Vec<&&SweepRow> = rows.iter().collect();
    let x = |r: &SweepRow| x_of(r, knob).unwrap_or(f64::NAN);
    ordered.sort_by(|a, b| {
        (line_of(a, knob), a.size_fraction.to_bits(), 0)
            .cmp(&(line_of(b, knob), b.size_fraction.to_bits(), 0))
            .then(x(a).total_cmp(&x(b)))
    });
    let rows_html: Vec<Vec<String>> = ordered
        .iter()
        .map(|r| {
            vec![
                esc(&line_of(r, knob)),
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
        // A model axis of one prefix is numeric by its numbers; mixed prefixes are not.
        let (label, xs) = numeric_axis("model.timing", &["closed:1", "closed:8", "closed:32"]).unwrap_or_default();
        assert_eq!((label.as_str(), xs), ("queue depth (timing closed:N)", vec![1.0, 8.0, 32.0]));
        assert!(numeric_axis("model.timing", &["closed:1", "open:2", "closed:4"]).is_none());
        assert!(numeric_axis("model.hdd", &["wd5000aaks", "st"]).is_none());
    }
}
