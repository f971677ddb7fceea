//! Chart drawing on any plotters backend (PNG files and inline SVG share it): every series
//! has its own colour and marker, the legend sits beside the plot, an axis whose values span
//! orders of magnitude is logarithmic, and tick labels are short enough not to collide.

use plotters::coord::Shift;
use plotters::coord::ranged1d::ValueFormatter;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::{BarChart, ChartSpec, LineChart, Stroke};

/// Twenty colours that stay apart from each other (the tab10 set and ten darker or brighter
/// hues), so that up to twenty series never share one.
const PALETTE: [RGBColor; 20] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
    RGBColor(0, 0, 128),
    RGBColor(128, 0, 0),
    RGBColor(0, 128, 128),
    RGBColor(0, 0, 0),
    RGBColor(255, 0, 255),
    RGBColor(0, 90, 50),
    RGBColor(255, 200, 0),
    RGBColor(110, 110, 255),
    RGBColor(250, 128, 114),
    RGBColor(90, 60, 0),
];

/// The colour of series `i`.
pub fn colour(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

/// Marker shapes; with twenty colours, (colour, marker) pairs are distinct for forty series.
const MARKERS: usize = 8;

/// Draws marker `i % 8` of series `i` centred at pixel `(x, y)`.
fn marker<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    i: usize,
    (x, y): (i32, i32),
    c: RGBColor,
) -> Result<(), String> {
    let r = 5;
    let filled = c.filled();
    let line = c.stroke_width(2);
    let tri = |fill: ShapeStyle| Polygon::new(vec![(x, y - r - 1), (x - r - 1, y + r), (x + r + 1, y + r)], fill);
    let e = |x: DrawingAreaErrorKind<DB::ErrorType>| x.to_string();
    match i % MARKERS {
        0 => area.draw(&Circle::new((x, y), r, filled)).map_err(e),
        1 => area.draw(&Rectangle::new([(x - r, y - r), (x + r, y + r)], filled)).map_err(e),
        2 => area.draw(&tri(filled)).map_err(e),
        3 => area.draw(&Cross::new((x, y), r + 1, line)).map_err(e),
        4 => area.draw(&Circle::new((x, y), r, line)).map_err(e),
        5 => area.draw(&Rectangle::new([(x - r, y - r), (x + r, y + r)], line)).map_err(e),
        6 => area
            .draw(&PathElement::new(vec![(x, y - r - 1), (x - r - 1, y + r), (x + r + 1, y + r), (x, y - r - 1)], line))
            .map_err(e),
        _ => area
            .draw(&Polygon::new(vec![(x, y - r - 1), (x + r + 1, y), (x, y + r + 1), (x - r - 1, y)], filled))
            .map_err(e),
    }
}

/// A tick label short enough for the axis: 12k, 3.4M, 0.25, 1e-5.
pub fn short(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 1e9 {
        trim(format!("{:.1}G", v / 1e9))
    } else if a >= 1e6 {
        trim(format!("{:.1}M", v / 1e6))
    } else if a >= 1e4 {
        trim(format!("{:.1}k", v / 1e3))
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 1.0 {
        trim(format!("{v:.2}"))
    } else if a >= 0.001 {
        trim(format!("{v:.4}"))
    } else {
        format!("{v:.0e}")
    }
}

/// One tick format for a whole axis from `lo..hi`: every tick with the same unit suffix (k, M,
/// G) and decimals on a linear axis, exponents throughout on a log axis that reaches below
/// 0.001 — never `0.001` beside `8e-4`.
pub fn axis_format(lo: f64, hi: f64, log: bool) -> impl Fn(f64) -> String {
    let top = lo.abs().max(hi.abs());
    let decimals = |step: f64| -> usize {
        if step > 0.0 && step.is_finite() { (-step.log10()).ceil().clamp(0.0, 6.0) as usize } else { 0 }
    };
    #[derive(Clone, Copy)]
    enum F {
        Exp,
        Short,
        Scaled(f64, &'static str, usize),
    }
    // Finer than the ticks plotters picks for 8 labels, so that no two ticks print alike.
    let step = (hi - lo).abs() / 16.0;
    let f = if log {
        if lo > 0.0 && lo < 1e-3 { F::Exp } else { F::Short }
    } else if top > 0.0 && top < 1e-3 {
        F::Exp
    } else if top >= 1e9 {
        F::Scaled(1e9, "G", decimals(step / 1e9).min(2))
    } else if top >= 1e6 {
        F::Scaled(1e6, "M", decimals(step / 1e6).min(2))
    } else if top >= 1e4 {
        F::Scaled(1e3, "k", decimals(step / 1e3).min(2))
    } else {
        F::Scaled(1.0, "", decimals(step))
    };
    // A log axis of up to three decades gets ticks at every 1..9 × 10^k (`log_ticks`) and
    // labels at 1, 2 and 5 × 10^k: a reader can place a point between decades.
    let between = log && lo > 0.0 && hi > lo && (hi / lo).log10() <= 3.5;
    move |v: f64| match f {
        _ if between && !is_125(v) => String::new(),
        F::Exp if v == 0.0 => "0".into(),
        F::Exp => format!("{v:.0e}"),
        F::Short => short(v),
        F::Scaled(scale, unit, d) => format!("{:.d$}{unit}", v / scale),
    }
}

/// Whether `v` is 1, 2 or 5 times a power of ten.
fn is_125(v: f64) -> bool {
    if !(v > 0.0 && v.is_finite()) {
        return false;
    }
    let m = v / 10f64.powf(v.log10().floor());
    [1.0, 2.0, 5.0, 10.0].iter().any(|t| (m - t).abs() < 1e-6 * t)
}

/// How many key points to ask plotters for on an axis from `lo` to `hi`: on a log axis of up to
/// three decades, enough for a tick at every 1..9 × 10^k (plotters adds those only when asked
/// for ten per decade); otherwise `linear`.
pub fn log_ticks(lo: f64, hi: f64, log: bool, linear: usize) -> usize {
    if !(log && lo > 0.0 && hi > lo) {
        return linear;
    }
    let decades = (hi / lo).log10();
    if decades > 3.5 { linear } else { 10 * (decades.floor().max(1.0) as usize) + 1 }
}

fn trim(s: String) -> String {
    if !s.contains('.') {
        return s;
    }
    let (num, unit): (String, String) = s.chars().partition(|c| c.is_ascii_digit() || *c == '.' || *c == '-');
    let num = num.trim_end_matches('0').trim_end_matches('.').to_string();
    num + &unit
}

/// Whether values this far apart need a logarithmic axis.
pub fn wants_log(values: impl Iterator<Item = f64>) -> bool {
    let (mut lo, mut hi) = (f64::MAX, f64::MIN);
    for v in values.filter(|v| v.is_finite()) {
        if v <= 0.0 {
            return false;
        }
        lo = lo.min(v);
        hi = hi.max(v);
    }
    lo < hi && hi / lo >= 50.0
}

/// Width of the legend column: room for the longest label, within limits.
fn legend_width(labels: &[&str], width: u32) -> u32 {
    let longest = labels.iter().map(|l| l.chars().count()).max().unwrap_or(0) as u32;
    (longest * 8 + 52).clamp(120, width * 2 / 5)
}

/// A legend label over as many lines as it needs in `width` pixels, broken after a `,`, `:`
/// or space where it can (a spec's knobs stay whole), never cut: sweep series that differ only
/// in their last knob must stay apart.
pub fn wrap(label: &str, width: u32) -> Vec<String> {
    let max = ((width.saturating_sub(52)) / 8).max(8) as usize;
    let mut lines = Vec::new();
    let mut line = String::new();
    // Pieces end after a break character; a piece longer than a line is split hard.
    let mut pieces: Vec<String> = Vec::new();
    let mut piece = String::new();
    for c in label.chars() {
        piece.push(c);
        if matches!(c, ',' | ':' | ' ') {
            pieces.push(std::mem::take(&mut piece));
        }
    }
    pieces.push(piece);
    for p in pieces.into_iter().filter(|p| !p.is_empty()) {
        if line.chars().count() + p.chars().count() > max && !line.is_empty() {
            lines.push(std::mem::take(&mut line).trim_end().to_string());
        }
        let mut rest: Vec<char> = p.chars().collect();
        while rest.len() > max {
            lines.push(rest.drain(..max).collect());
        }
        line.extend(rest);
    }
    if !line.is_empty() || lines.is_empty() {
        lines.push(line.trim_end().to_string());
    }
    lines
}

/// The legend in its own column: a marker (and the series' line for line charts: `strokes`)
/// and the label.
fn legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    labels: &[&str],
    strokes: Option<&[Stroke]>,
    top: i32,
) -> Result<(), String> {
    let (w, _) = area.dim_in_pixel();
    let style = TextStyle::from(("sans-serif", 14).into_font()).pos(Pos::new(HPos::Left, VPos::Center));
    let mut y = top + 12;
    for (i, l) in labels.iter().enumerate() {
        let c = colour(i);
        match strokes.map(|s| s.get(i).copied().unwrap_or_default()) {
            Some(Stroke::Solid) => {
                area.draw(&PathElement::new(vec![(6, y), (34, y)], c.stroke_width(2))).map_err(|e| e.to_string())?
            }
            Some(Stroke::Dashed) => {
                for x in [4, 16, 28] {
                    area.draw(&PathElement::new(vec![(x, y), (x + 7, y)], c.stroke_width(2)))
                        .map_err(|e| e.to_string())?;
                }
            }
            Some(Stroke::Markers) | None => {}
        }
        marker(area, i, (20, y), c)?;
        let wrapped = wrap(l, w);
        for (k, text) in wrapped.iter().enumerate() {
            area.draw(&Text::new(text.clone(), (42, y + k as i32 * 17), style.clone())).map_err(|e| e.to_string())?;
        }
        y += 22 + (wrapped.len() as i32 - 1) * 17;
    }
    Ok(())
}

fn extent(values: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    let (mut lo, mut hi) = (f64::MAX, f64::MIN);
    for v in values.filter(|v| v.is_finite()) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    (lo <= hi).then_some((lo, hi))
}

/// Draws `spec` filling `root`.
pub fn draw<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, spec: &ChartSpec) -> Result<(), String> {
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    match spec {
        ChartSpec::Line(l) => line(root, l),
        ChartSpec::Bars(b) => bars(root, b),
    }
}

/// Splits off the title and the legend column; returns (plot area, legend area).
#[expect(clippy::type_complexity, reason = "two drawing areas of one backend")]
fn layout<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    labels: &[&str],
) -> Result<(DrawingArea<DB, Shift>, DrawingArea<DB, Shift>), String> {
    let (w, _) = root.dim_in_pixel();
    let titled = root.titled(title, ("sans-serif", 20)).map_err(|e| e.to_string())?;
    let lw = legend_width(labels, w);
    Ok(titled.split_horizontally(w.saturating_sub(lw)))
}

/// Grid, tick labels and axis titles; `x_labels == 0` (grouped bars) draws no x ticks and no
/// vertical grid lines: the group names are written under the groups instead.
fn mesh_style<'a, X, Y, DB>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
    x_label: &str,
    y_label: &str,
    (x_labels, y_labels): (usize, usize),
    formats: (&dyn Fn(f64) -> String, &dyn Fn(f64) -> String),
) -> Result<(), String>
where
    DB: DrawingBackend + 'a,
    X: Ranged<ValueType = f64> + ValueFormatter<f64>,
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let mut mesh = chart.configure_mesh();
    if x_labels == 0 {
        mesh.disable_x_mesh();
    }
    // An axis ticked at every 1..9 × 10^k (`log_ticks`) has its grid already; plotters' light
    // lines between those would crowd into a band.
    if x_labels > 10 {
        mesh.x_max_light_lines(0);
    }
    if y_labels > 10 {
        mesh.y_max_light_lines(0);
    }
    mesh.x_desc(x_label)
        .y_desc(y_label)
        .x_labels(x_labels)
        .y_labels(y_labels)
        .x_label_formatter(&|v| formats.0(*v))
        .y_label_formatter(&|v| formats.1(*v))
        .label_style(("sans-serif", 14))
        .axis_desc_style(("sans-serif", 15))
        .light_line_style(RGBColor(235, 235, 235))
        .bold_line_style(RGBColor(210, 210, 210))
        .draw()
        .map_err(|e| e.to_string())
}

fn line<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, spec: &LineChart) -> Result<(), String> {
    let labels: Vec<&str> = spec.series.iter().map(|s| s.label.as_str()).collect();
    let (plot, side) = layout(root, &spec.title, &labels)?;
    let xs = || spec.series.iter().flat_map(|s| s.points.iter().map(|p| p.0));
    let ys = || spec.series.iter().flat_map(|s| s.points.iter().map(|p| p.1));
    let (Some((mut x0, mut x1)), Some((y_lo, y_hi))) = (extent(xs()), extent(ys())) else {
        return Err("nothing to plot".into());
    };
    let log_x = spec.log_x && xs().all(|x| x > 0.0);
    let log_y = spec.log_y.unwrap_or_else(|| wants_log(ys()));
    if x1 <= x0 {
        (x0, x1) = (x0 * 0.9 - 1.0, x1 * 1.1 + 1.0);
    }
    let (y0, y1) = if log_y {
        (y_lo / 1.5, y_hi * 1.5)
    } else {
        let lo = y_lo.min(0.0);
        let hi = if y_hi > lo { y_hi + (y_hi - lo) * 0.05 } else { lo + 1.0 };
        (lo, hi)
    };
    let mut b = ChartBuilder::on(&plot);
    b.margin(12).x_label_area_size(60).y_label_area_size(84);
    macro_rules! body {
        ($chart:expr) => {{
            let mut chart = $chart.map_err(|e| e.to_string())?;
            let (xf, yf) = (axis_format(x0, x1, log_x), axis_format(y0, y1, log_y));
            let ticks = (log_ticks(x0, x1, log_x, if log_x { 5 } else { 10 }), log_ticks(y0, y1, log_y, 8));
            mesh_style(&mut chart, &spec.x_label, &spec.y_label, ticks, (&xf, &yf))?;
            for (i, s) in spec.series.iter().enumerate() {
                let c = colour(i);
                let pts: Vec<(f64, f64)> =
                    s.points.iter().copied().filter(|p| p.0.is_finite() && p.1.is_finite()).collect();
                match s.stroke {
                    Stroke::Solid => chart
                        .draw_series(LineSeries::new(pts.iter().copied(), c.stroke_width(2)))
                        .map(|_| ())
                        .map_err(|e| e.to_string())?,
                    Stroke::Dashed => chart
                        .draw_series(DashedLineSeries::new(pts.iter().copied(), 8, 6, c.stroke_width(2)))
                        .map(|_| ())
                        .map_err(|e| e.to_string())?,
                    Stroke::Markers => {}
                }
                for p in &pts {
                    let px = chart.backend_coord(p);
                    marker(root, i, px, c)?;
                }
            }
        }};
    }
    match (log_x, log_y) {
        (true, true) => body!(b.build_cartesian_2d((x0..x1).log_scale(), (y0..y1).log_scale())),
        (true, false) => body!(b.build_cartesian_2d((x0..x1).log_scale(), y0..y1)),
        (false, true) => body!(b.build_cartesian_2d(x0..x1, (y0..y1).log_scale())),
        (false, false) => body!(b.build_cartesian_2d(x0..x1, y0..y1)),
    }
    let strokes: Vec<Stroke> = spec.series.iter().map(|s| s.stroke).collect();
    legend(&side, &labels, Some(&strokes), 40)
}

fn bars<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, spec: &BarChart) -> Result<(), String> {
    let labels: Vec<&str> = spec.series.iter().map(|s| s.0.as_str()).collect();
    let (plot, side) = layout(root, &spec.title, &labels)?;
    let ends = || spec.intervals.iter().flatten().flatten().flat_map(|&(l, h)| [l, h]);
    let values = || spec.series.iter().flat_map(|s| s.1.iter().flatten().copied()).chain(ends());
    let Some((lo, hi)) = extent(values()) else {
        return Err("nothing to plot".into());
    };
    let log_y = spec.log_y.unwrap_or_else(|| wants_log(values()));
    let (y0, y1) = if log_y { (lo / 2.0, hi * 1.6) } else { (lo.min(0.0), hi.max(lo + 1e-9) * 1.08) };
    let groups = spec.groups.len().max(1) as f64;
    let n = spec.series.len().max(1) as f64;
    let mut b = ChartBuilder::on(&plot);
    b.margin(12).x_label_area_size(60).y_label_area_size(84);
    macro_rules! body {
        ($chart:expr) => {{
            let mut chart = $chart.map_err(|e| e.to_string())?;
            let yf = axis_format(y0, y1, log_y);
            mesh_style(&mut chart, &spec.x_label, &spec.y_label, (0, log_ticks(y0, y1, log_y, 8)), (&short, &yf))?;
            let width = 0.8 / n;
            for (i, (_, vals)) in spec.series.iter().enumerate() {
                let c = colour(i);
                for (g, v) in vals.iter().enumerate() {
                    let Some(v) = v.filter(|v| v.is_finite()) else { continue };
                    let left = g as f64 + 0.1 + i as f64 * width;
                    let top = if log_y { v.max(y0) } else { v };
                    // A published value (a paper's) is an outlined bar beside our filled ones.
                    let published = spec.published.get(i).copied().unwrap_or(false);
                    let style = if published { c.stroke_width(2) } else { c.filled() };
                    chart
                        .draw_series(std::iter::once(Rectangle::new([(left, y0), (left + width * 0.92, top)], style)))
                        .map_err(|e| e.to_string())?;
                    let interval = spec.intervals.get(i).and_then(|v| v.get(g).copied().flatten());
                    if n <= 12.0 {
                        // The series' marker on top of its bar (above its error bar): colour
                        // alone is not enough in print.
                        let above = interval.map_or(top, |(_, h)| h.max(top));
                        let (px, py) = chart.backend_coord(&(left + width * 0.46, above));
                        marker(root, i, (px, py - 8), c)?;
                    }
                    if let Some((l, h)) = interval.filter(|(l, h)| l.is_finite() && h.is_finite()) {
                        let clamp = |v: f64| if log_y { v.max(y0) } else { v };
                        let (mid, cap) = (left + width * 0.46, width * 0.18);
                        let style = BLACK.stroke_width(2);
                        let lines = [
                            vec![(mid, clamp(l)), (mid, clamp(h))],
                            vec![(mid - cap, clamp(l)), (mid + cap, clamp(l))],
                            vec![(mid - cap, clamp(h)), (mid + cap, clamp(h))],
                        ];
                        chart
                            .draw_series(lines.into_iter().map(|pts| PathElement::new(pts, style)))
                            .map_err(|e| e.to_string())?;
                    }
                }
            }
            let style = TextStyle::from(("sans-serif", 14).into_font()).pos(Pos::new(HPos::Center, VPos::Top));
            for (g, name) in spec.groups.iter().enumerate() {
                let (px, py) = chart.backend_coord(&(g as f64 + 0.5, y0));
                root.draw(&Text::new(name.clone(), (px, py + 6), style.clone())).map_err(|e| e.to_string())?;
            }
        }};
    }
    if log_y {
        body!(b.build_cartesian_2d(0.0..groups, (y0..y1).log_scale()));
    } else {
        body!(b.build_cartesian_2d(0.0..groups, y0..y1));
    }
    legend(&side, &labels, None, 40)
}
