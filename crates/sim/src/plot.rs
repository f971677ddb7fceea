//! PNG line charts (plotters, bitmap backend, with the DejaVu Sans font embedded so that no
//! system font is needed).

use std::path::Path;
use std::sync::Once;

use plotters::prelude::*;
use plotters::style::FontStyle;

use crate::compare::Comparison;
use crate::mrc::Mrc;

static FONT: Once = Once::new();

fn ensure_font() {
    FONT.call_once(|| {
        let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, dejavu::sans::regular());
    });
}

/// One line of a chart.
#[derive(Clone, Debug)]
pub struct Series {
    /// Legend label.
    pub label: String,
    /// Points (x, y).
    pub points: Vec<(f64, f64)>,
}

/// Draws a line chart into a PNG file.
pub fn line_chart(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
    log_x: bool,
) -> Result<(), String> {
    ensure_font();
    let all = series.iter().flat_map(|s| s.points.iter());
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for &(x, y) in all {
        if x.is_finite() && y.is_finite() {
            x0 = x0.min(x);
            x1 = x1.max(x);
            y0 = y0.min(y);
            y1 = y1.max(y);
        }
    }
    if x0 > x1 {
        return Err("nothing to plot".into());
    }
    if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    y0 = y0.min(0.0);
    if y1 <= y0 {
        y1 = y0 + 1.0;
    }
    y1 *= 1.05;
    let root = BitMapBackend::new(path, (1100, 650)).into_drawing_area();
    let e = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let colors = [
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
    ];
    macro_rules! draw {
        ($chart:expr) => {{
            let mut chart = $chart;
            chart
                .configure_mesh()
                .x_desc(x_label)
                .y_desc(y_label)
                .label_style(("sans-serif", 16))
                .draw()
                .map_err(|x| e(&x))?;
            for (i, s) in series.iter().enumerate() {
                let c = colors[i % colors.len()];
                chart
                    .draw_series(LineSeries::new(s.points.iter().copied(), c.stroke_width(2)))
                    .map_err(|x| e(&x))?
                    .label(s.label.clone())
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
                chart.draw_series(s.points.iter().map(|&p| Circle::new(p, 3, c.filled()))).map_err(|x| e(&x))?;
            }
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .label_font(("sans-serif", 15))
                .draw()
                .map_err(|x| e(&x))?;
        }};
    }
    let mut builder = ChartBuilder::on(&root);
    builder.caption(title, ("sans-serif", 22)).margin(15).x_label_area_size(45).y_label_area_size(70);
    if log_x {
        draw!(builder.build_cartesian_2d((x0.max(1e-12)..x1).log_scale(), y0..y1).map_err(|x| e(&x))?);
    } else {
        draw!(builder.build_cartesian_2d(x0..x1, y0..y1).map_err(|x| e(&x))?);
    }
    root.present().map_err(|x| e(&x))?;
    Ok(())
}

/// The comparison's key metric per SSD size, one line per architecture: mean response time for
/// timed runs, the share of reads served without the HDD otherwise.
pub fn comparison_chart(c: &Comparison, path: &Path) -> Result<(), String> {
    let timed = c.rows.first().is_some_and(|r| r.report.timing != "none");
    let mut series: Vec<Series> = Vec::new();
    for row in &c.rows {
        let r = &row.report;
        let y = if timed { r.latency.mean_us / 1e3 } else { (r.read_hit.ssd + r.read_hit.ram) * 100.0 };
        let x = row.size_fraction * 100.0;
        match series.iter_mut().find(|s| s.label == r.arch) {
            Some(s) => s.points.push((x, y)),
            None => series.push(Series { label: r.arch.clone(), points: vec![(x, y)] }),
        }
    }
    for s in &mut series {
        s.points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    let name = Path::new(&c.trace).file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
    let (title, y) = if timed {
        (format!("Mean response time by SSD size — {name}"), "mean response time (ms)")
    } else {
        (format!("Reads served without the HDD by SSD size — {name}"), "reads served by SSD or RAM (%)")
    };
    line_chart(path, &title, "SSD size (% of footprint)", y, &series, false)
}

/// An MRC as a chart.
pub fn mrc_chart(m: &Mrc, label: &str, path: &Path) -> Result<(), String> {
    let pts = m.points.iter().map(|p| (p.size_bytes as f64 / (1u64 << 20) as f64, p.miss_ratio)).collect();
    line_chart(
        path,
        &format!("LRU miss-ratio curve — {label}"),
        "cache size (MiB, log scale)",
        "miss ratio",
        &[Series { label: "LRU".into(), points: pts }],
        true,
    )
}
