//! Charts as PNG files and as inline SVG (plotters; the DejaVu Sans font is embedded, so no
//! system font is needed). Comparisons are grouped bars per SSD size, as the seed papers draw
//! them; curves are line charts with a marker per point.

mod draw;

use std::path::Path;
use std::sync::Once;

use plotters::prelude::*;
use plotters::style::FontStyle;

use crate::compare::Comparison;
use crate::mrc::Mrc;

pub use draw::{axis_format, colour, short, wants_log, wrap};

static FONT: Once = Once::new();

fn ensure_font() {
    FONT.call_once(|| {
        let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, dejavu::sans::regular());
    });
}

/// How a series is drawn.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Stroke {
    /// A solid line with a marker per point: a result of ours.
    #[default]
    Solid,
    /// A dashed line: a reference such as Belady's optimum.
    Dashed,
    /// Markers without a line: published values (a paper's points).
    Markers,
}

/// One line of a chart.
#[derive(Clone, Debug)]
pub struct Series {
    /// Legend label.
    pub label: String,
    /// Points (x, y).
    pub points: Vec<(f64, f64)>,
    /// How it is drawn.
    pub stroke: Stroke,
}

impl Series {
    /// A solid line.
    pub fn new(label: impl Into<String>, points: Vec<(f64, f64)>) -> Series {
        Series { label: label.into(), points, stroke: Stroke::Solid }
    }
    /// The same drawn as `stroke`.
    pub fn drawn(mut self, stroke: Stroke) -> Series {
        self.stroke = stroke;
        self
    }
}

/// A line chart.
#[derive(Clone, Debug)]
pub struct LineChart {
    /// Title.
    pub title: String,
    /// X axis title, with its unit.
    pub x_label: String,
    /// Y axis title, with its unit.
    pub y_label: String,
    /// Lines.
    pub series: Vec<Series>,
    /// Logarithmic x axis.
    pub log_x: bool,
    /// Logarithmic y axis; `None`: when the values span orders of magnitude.
    pub log_y: Option<bool>,
}

/// Grouped bars: one group per category (an SSD size), one bar per series in each.
#[derive(Clone, Debug)]
pub struct BarChart {
    /// Title.
    pub title: String,
    /// X axis title (what the groups are).
    pub x_label: String,
    /// Y axis title, with its unit.
    pub y_label: String,
    /// Group names, left to right.
    pub groups: Vec<String>,
    /// Series: label and one value per group (`None`: no bar).
    pub series: Vec<(String, Vec<Option<f64>>)>,
    /// Error bars, parallel to `series` (low, high per group); empty: none.
    pub intervals: Vec<Vec<Option<(f64, f64)>>>,
    /// Parallel to `series`: published values (a paper's), drawn as outlined bars; empty: none.
    pub published: Vec<bool>,
    /// Logarithmic y axis; `None`: when the values span orders of magnitude.
    pub log_y: Option<bool>,
}

/// Any chart.
#[derive(Clone, Debug)]
pub enum ChartSpec {
    /// Lines.
    Line(LineChart),
    /// Grouped bars.
    Bars(BarChart),
}

/// PNG size.
const PNG_SIZE: (u32, u32) = (1200, 650);
/// SVG size (scaled to the page by its viewBox).
const SVG_SIZE: (u32, u32) = (960, 520);

/// Draws `spec` into a PNG file.
pub fn png(spec: &ChartSpec, path: &Path) -> Result<(), String> {
    ensure_font();
    let root = BitMapBackend::new(path, PNG_SIZE).into_drawing_area();
    draw::draw(&root, spec).map_err(|e| format!("{}: {e}", path.display()))?;
    root.present().map_err(|e| format!("{}: {e}", path.display()))
}

/// Draws `spec` as an SVG document that scales with the page.
pub fn svg(spec: &ChartSpec) -> Result<String, String> {
    ensure_font();
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, SVG_SIZE).into_drawing_area();
        draw::draw(&root, spec)?;
        root.present().map_err(|e| e.to_string())?;
    }
    // Fixed pixel sizes would overflow a phone's screen: keep the viewBox, let CSS size it.
    let (w, h) = SVG_SIZE;
    let fixed = format!("width=\"{w}\" height=\"{h}\"");
    Ok(out.replacen(&fixed, "class=\"chart\" preserveAspectRatio=\"xMidYMid meet\"", 1))
}

/// A comparison's key metric as grouped bars per SSD size: throughput for closed-loop runs,
/// mean response time for open-loop runs, the share of reads served without the HDD for
/// untimed ones.
pub fn comparison_spec(c: &Comparison) -> ChartSpec {
    let timing = c.rows.first().map(|r| r.report.timing.clone()).unwrap_or_default();
    let name = Path::new(&c.trace).file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
    let (what, unit, value) = key_metric(&timing);
    bars_by_size(c, &format!("{what} by SSD size — {name} ({timing})"), unit, value)
}

/// A run's key metric for its timing: (title, axis label with unit, value).
pub type KeyMetric = (&'static str, &'static str, fn(&crate::metrics::SimReport) -> f64);

/// Throughput for closed-loop runs, mean response time for open-loop runs, the share of reads
/// served without the HDD for untimed ones.
pub fn key_metric(timing: &str) -> KeyMetric {
    if timing.starts_with("closed") {
        ("Throughput", "throughput (IOPS)", |r| r.iops)
    } else if timing == "none" {
        ("Reads served without the HDD", "reads served by SSD or RAM (%)", |r| {
            (r.read_hit.ssd + r.read_hit.ram) * 100.0
        })
    } else {
        ("Mean response time", "mean response time (ms)", |r| r.latency.mean_us / 1e3)
    }
}

/// Any per-run figure of a comparison as grouped bars per SSD size, one bar per architecture.
pub fn bars_by_size(
    c: &Comparison,
    title: &str,
    y_label: &str,
    value: impl Fn(&crate::metrics::SimReport) -> f64,
) -> ChartSpec {
    let mut groups: Vec<String> = Vec::new();
    let mut archs: Vec<String> = Vec::new();
    for r in &c.rows {
        if !groups.contains(&r.size_label) {
            groups.push(r.size_label.clone());
        }
        if !archs.contains(&r.report.arch) {
            archs.push(r.report.arch.clone());
        }
    }
    let series = archs
        .iter()
        .map(|a| {
            let vals = groups
                .iter()
                .map(|g| c.rows.iter().find(|r| &r.report.arch == a && &r.size_label == g).map(|r| value(&r.report)))
                .collect();
            (a.clone(), vals)
        })
        .collect();
    ChartSpec::Bars(BarChart {
        title: title.into(),
        x_label: "SSD size (share of the trace's footprint, or bytes)".into(),
        y_label: y_label.into(),
        groups,
        series,
        intervals: Vec::new(),
        published: Vec::new(),
        log_y: None,
    })
}

/// The comparison chart as a PNG file.
pub fn comparison_chart(c: &Comparison, path: &Path) -> Result<(), String> {
    png(&comparison_spec(c), path)
}

/// An MRC as a line chart (log-scale cache size).
pub fn mrc_spec(m: &Mrc, label: &str) -> ChartSpec {
    let mib = |p: &crate::mrc::MrcPoint| (p.size_bytes as f64 / (1u64 << 20) as f64, p.miss_ratio);
    let name = mrc_name(m);
    let mut series = vec![Series::new(name.clone(), m.points.iter().map(mib).collect())];
    if !m.belady.is_empty() {
        let on = if m.sampling.is_some() { " (same sample)" } else { "" };
        series.push(
            Series::new(format!("Belady MIN, offline optimum{on}"), m.belady.iter().map(mib).collect())
                .drawn(Stroke::Dashed),
        );
    }
    ChartSpec::Line(LineChart {
        title: format!("{name} miss-ratio curve — {label}"),
        x_label: "cache size (MiB, log scale)".into(),
        y_label: "miss ratio (fraction of accesses)".into(),
        series,
        log_x: true,
        log_y: Some(false),
    })
}

/// What a curve is of: `ARC` exact, `LRU (SHARDS 1 %, seed 1)` sampled.
pub fn mrc_name(m: &Mrc) -> String {
    let c = m.collector.to_uppercase();
    match &m.sampling {
        Some(s) => format!("{c} (SHARDS {} %, seed {})", short(s.rate * 100.0), s.seed),
        None => c,
    }
}

/// An MRC as a PNG file.
pub fn mrc_chart(m: &Mrc, label: &str, path: &Path) -> Result<(), String> {
    png(&mrc_spec(m, label), path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_labels_stay_short() {
        assert_eq!(short(60_000.0), "60k");
        assert_eq!(short(1_250_000.0), "1.2M");
        assert_eq!(short(0.3), "0.3");
        assert_eq!(short(250.0), "250");
        assert_eq!(short(0.0), "0");
        assert_eq!(short(2.5), "2.5");
    }

    #[test]
    fn a_wide_span_gets_a_log_axis() {
        assert!(wants_log([0.3, 60_000.0].into_iter()));
        assert!(!wants_log([10.0, 90.0].into_iter()));
        assert!(!wants_log([0.0, 60_000.0].into_iter()));
    }

    #[test]
    fn belady_is_a_dashed_second_line() {
        let pt = |s, m| crate::mrc::MrcPoint { size_bytes: s, misses: m, miss_ratio: m as f64 / 10.0 };
        let mut m = Mrc { points: vec![pt(4096, 9), pt(8192, 7)], collector: "lru".into(), ..Mrc::default() };
        let ChartSpec::Line(one) = mrc_spec(&m, "t") else { panic!("a line chart") };
        assert_eq!(one.series.len(), 1);
        m.belady = vec![pt(4096, 8), pt(8192, 5)];
        let ChartSpec::Line(two) = mrc_spec(&m, "t") else { panic!("a line chart") };
        assert_eq!(two.series.len(), 2);
        assert_eq!((two.series[0].stroke, two.series[1].stroke), (Stroke::Solid, Stroke::Dashed));
        assert!(two.series[1].label.starts_with("Belady MIN"));
        // Drawn, the dashes are many short segments: more line elements than the solid chart.
        let lines = |c: &LineChart| svg(&ChartSpec::Line(c.clone())).map(|s| s.matches("<polyline").count());
        let (one, two) = (lines(&one).expect("svg"), lines(&two).expect("svg"));
        assert!(two > one + 2, "{two} vs {one}");
    }

    #[test]
    fn twenty_series_get_twenty_colours() {
        let mut seen: Vec<(u8, u8, u8)> = (0..20).map(|i| (colour(i).0, colour(i).1, colour(i).2)).collect();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), 20);
    }

    #[test]
    fn every_tick_of_an_axis_has_one_format() {
        let f = axis_format(0.0, 0.0012, false);
        assert_eq!([f(0.0008), f(0.001)], ["0.00080", "0.00100"], "not 0.001 beside 8e-4");
        let f = axis_format(0.0, 0.0009, false);
        assert_eq!([f(0.0), f(0.0008)], ["0", "8e-4"]);
        let f = axis_format(1e-5, 1.0, true);
        assert_eq!([f(1e-4), f(0.01), f(1.0)], ["1e-4", "1e-2", "1e0"]);
        let f = axis_format(0.0, 120_000.0, false);
        assert_eq!([f(0.0), f(20_000.0), f(120_000.0)], ["0k", "20k", "120k"]);
        let f = axis_format(0.0, 1.0, false);
        assert_eq!([f(0.0), f(0.25), f(1.0)], ["0.00", "0.25", "1.00"]);
        let f = axis_format(600.0, 1900.0, false);
        assert_eq!([f(600.0), f(1900.0)], ["600", "1900"]);
    }

    /// A log axis of a few decades is labelled at 1, 2 and 5 × 10^k and ticked at every
    /// 1..9 × 10^k (in the SVG); a wide one at its decades only.
    #[test]
    fn short_log_axes_are_labelled_between_decades() {
        let f = axis_format(0.5, 80.0, true);
        assert_eq!([f(1.0), f(2.0), f(3.0), f(5.0), f(7.0), f(20.0), f(50.0)], ["1", "2", "", "5", "", "20", "50"]);
        assert_eq!(draw::log_ticks(0.5, 80.0, true, 8), 21);
        assert_eq!(draw::log_ticks(1.0, 1e6, true, 8), 8, "six decades: decades only");
        assert_eq!(draw::log_ticks(0.0, 80.0, false, 8), 8);
        let spec = ChartSpec::Line(LineChart {
            title: "t".into(),
            x_label: "x".into(),
            y_label: "y".into(),
            series: vec![Series::new("s", vec![(1.0, 1.0), (10.0, 40.0), (40.0, 3.0)])],
            log_x: true,
            log_y: Some(true),
        });
        let svg = svg(&spec).unwrap();
        let texts: Vec<&str> =
            svg.split("<text").skip(1).filter_map(|t| t.split_once('>')?.1.split('<').next()).map(str::trim).collect();
        for label in ["1", "2", "5", "10", "20"] {
            assert!(texts.contains(&label), "no tick label {label}: {texts:?}");
        }
        assert!(!texts.contains(&"3") && !texts.contains(&"30"), "only 1, 2 and 5 are labelled: {texts:?}");
    }

    #[test]
    fn legend_labels_wrap_and_are_never_cut() {
        let spec = "cache:mode=write-back,collector=arc,dirty-high=20%,max-writebacks=64";
        let lines = wrap(spec, 300);
        assert!(lines.len() > 1 && lines.iter().all(|l| l.chars().count() <= 31), "{lines:?}");
        assert_eq!(lines.concat().replace(' ', ""), spec.replace(' ', ""), "every character kept");
        assert!(lines.iter().any(|l| l.ends_with("max-writebacks=64")), "knobs stay whole: {lines:?}");
        assert_eq!(wrap("hdd-only", 300), ["hdd-only"]);
        // Two sweep series that differ only in their last knob stay apart on the chart.
        let a = wrap(&format!("{spec},es=4KiB"), 300);
        let b = wrap(&format!("{spec},es=64KiB"), 300);
        assert_ne!(a, b);
    }

    #[test]
    fn error_bars_are_drawn_where_given_and_widen_the_axis() {
        let chart = |intervals: Vec<Vec<Option<(f64, f64)>>>| {
            svg(&ChartSpec::Bars(BarChart {
                title: "t".into(),
                x_label: "SSD size".into(),
                y_label: "IOPS".into(),
                groups: vec!["10%".into(), "25%".into()],
                series: vec![("a".into(), vec![Some(100.0), Some(110.0)]), ("b".into(), vec![Some(90.0), None])],
                intervals,
                published: Vec::new(),
                log_y: Some(false),
            }))
            .expect("svg")
        };
        let plain = chart(Vec::new());
        let with = chart(vec![vec![Some((95.0, 105.0)), Some((100.0, 400.0))], vec![None, None]]);
        // Three black strokes (stem and two caps) per interval given.
        let black = |s: &str| {
            s.lines().filter(|l| l.contains("<polyline") && l.contains("stroke=\"#000000\" stroke-width=\"2\"")).count()
        };
        assert_eq!(black(&with), black(&plain) + 6, "{with}");
        assert!(with.lines().any(|l| l.trim() == "400" || l.trim() == "350"), "the axis reaches the top end: {with}");
    }

    #[test]
    fn svg_scales_and_holds_every_label() {
        let spec = ChartSpec::Bars(BarChart {
            title: "t".into(),
            x_label: "SSD size".into(),
            y_label: "throughput (IOPS)".into(),
            groups: vec!["10%".into(), "25%".into()],
            series: vec![
                ("hdd-only".into(), vec![Some(100.0), Some(110.0)]),
                ("ssd-only".into(), vec![Some(2e4), None]),
            ],
            intervals: Vec::new(),
            published: Vec::new(),
            log_y: None,
        });
        let s = svg(&spec).expect("svg");
        assert!(s.contains("viewBox"), "{}", &s[..200]);
        let tag = &s[s.find("<svg").expect("svg tag")..];
        let tag = &tag[..tag.find('>').expect("tag end")];
        assert!(!tag.contains("width="), "{tag}");
        for text in ["hdd-only", "ssd-only", "10%", "25%", "throughput (IOPS)"] {
            assert!(s.contains(text), "missing {text}");
        }
    }
}
