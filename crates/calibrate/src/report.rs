//! A calibration as text: what was measured, the preset, and the model beside each test.

use std::fmt::Write as _;

use tierwise_sim::report::Table;

use tierwise_sim::device::QueueCurve;

use crate::measure::Op;
use crate::{Calibration, Kind};

fn bytes(b: u64) -> String {
    match b {
        b if b >= 1 << 30 => format!("{} GiB", b >> 30),
        b if b >= 1 << 20 => format!("{} MiB", b >> 20),
        b => format!("{} KiB", b >> 10),
    }
}

/// The report printed by `tierwise calibrate`.
pub fn render(c: &Calibration) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "target    {}{} ({}, direct I/O{}{})",
        c.target,
        if c.scratch { " (scratch file, removed)" } else { "" },
        bytes(c.span),
        if c.memory { ", IN MEMORY (tmpfs): no device measured" } else { "" },
        c.device.as_deref().map(|d| format!(", device {d}")).unwrap_or_default()
    );
    let _ = writeln!(out, "kind      {}: {}", c.kind.label(), c.kind_reason);
    if c.scratch && !c.memory {
        let _ = writeln!(
            out,
            "note      measured right after writing the scratch file: a virtual disk's host (or a drive's own\n          \
             cache) may answer from its cache what older data would not; to measure data at rest,\n          \
             calibrate an existing image (read-only, or --overwrite if its data may go)"
        );
    }
    out.push('\n');
    let mut t = Table::new(&["test", "pattern", "IOPS", "MB/s", "mean µs", "p50 µs", "p99 µs", "requests"]);
    for m in &c.tests {
        let pattern = format!(
            "{} {}{}, QD{}",
            if m.random { "random" } else { "sequential" },
            bytes(m.block),
            if m.sync { " O_DSYNC" } else { "" },
            m.depth
        );
        t.row(vec![
            m.name.clone(),
            pattern,
            format!("{:.0}", m.iops),
            format!("{:.1}", m.mb_s),
            format!("{:.1}", m.mean_us),
            format!("{:.1}", m.p50_us),
            format!("{:.1}", m.p99_us),
            m.ops.to_string(),
        ]);
    }
    out.push_str(&t.render());
    if let Some(g) = c.write_cache_gain {
        let _ = writeln!(out, "\nwrite cache: QD1 random writes are {g:.2}x as fast without O_DSYNC as with it");
    }
    let mut t =
        Table::new(&["backward jump", "pairs", "measured p50 µs", "model p50 µs", "measured mean µs", "model mean µs"]);
    for (i, p) in c.seek.iter().enumerate() {
        let model = c.model_seek.get(i);
        let cell = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.0}"));
        t.row(vec![
            bytes(p.distance),
            p.pairs.to_string(),
            format!("{:.0}", p.p50_us),
            cell(model.map(|m| m.p50_us)),
            format!("{:.0}", p.mean_us),
            cell(model.map(|m| m.mean_us)),
        ]);
    }
    let _ = writeln!(out, "\nread time by seek distance (4 KiB reads, the second before the first):");
    out.push_str(&t.render());
    let _ = writeln!(
        out,
        "\nthe fitted {} model on the same requests (simulator, {}, closed loop at each depth):",
        c.kind.label(),
        if c.kind == Kind::Hdd { "hdd-only behind mq-deadline" } else { "ssd-only" }
    );
    let mut t = Table::new(&["test", "fitted to it", "measured IOPS", "model IOPS", "model ÷ measured", "note"]);
    for k in &c.checks {
        t.row(vec![
            k.test.clone(),
            if k.fitted { "yes" } else { "no: a check" }.into(),
            format!("{:.0}", k.measured_iops),
            format!("{:.0}", k.model_iops),
            format!("{:.2}", k.ratio),
            k.note.clone(),
        ]);
    }
    out.push_str(&t.render());
    if let Some(ssd) = &c.ssd {
        let _ = writeln!(out, "\nqueue curve: {}", queue_curve_reason(c, ssd.queue_curve));
    }
    out
}

/// Why the SSD preset has its queue curve, from the reads it was fitted to.
fn queue_curve_reason(c: &Calibration, curve: QueueCurve) -> String {
    let qd1 = crate::fit::find(&c.tests, "randread-qd1");
    let deep = crate::fit::deepest(&c.tests, Op::Read);
    let (name, ceiling) = match curve {
        QueueCurve::Knee => ("knee", "IOPS = min(QD / latency, ceiling)"),
        QueueCurve::Saturating => ("saturating", "IOPS = ceiling · QD / (QD + ceiling · latency − 1)"),
    };
    match (qd1, deep) {
        (Some(q), Some(d)) if d.depth > 1 => format!(
            "{name} ({ceiling}): random reads at QD{} reached {:.0} % of linear scaling from QD1 \
             (knee from 90 %); the depths in between are its check",
            d.depth,
            100.0 * crate::fit::scaling(q, d)
        ),
        _ => format!("{name} ({ceiling}): no QD1 and deeper random reads to choose from"),
    }
}
