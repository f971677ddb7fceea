//! Presenting results: aligned text tables, CSV and JSON.

use std::fmt::Write as _;

use tierwise_core::{Bytes, WorkKind};

use crate::compare::Comparison;
use crate::metrics::SimReport;

/// A text table with right-aligned numeric columns.
#[derive(Clone, Debug, Default)]
pub struct Table {
    headers: Vec<String>,
    rows: Vec<Vec<String>>,
    separators: Vec<usize>,
}

impl Table {
    /// A table with these column headers.
    pub fn new(headers: &[&str]) -> Table {
        Table { headers: headers.iter().map(|s| s.to_string()).collect(), rows: Vec::new(), separators: Vec::new() }
    }

    /// Adds a row.
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// Draws a rule before the next row.
    pub fn separator(&mut self) {
        self.separators.push(self.rows.len());
    }

    /// Renders with two spaces between columns; the first two columns are left-aligned.
    pub fn render(&self) -> String {
        let n = self.headers.len();
        let mut w = vec![0usize; n];
        for r in std::iter::once(&self.headers).chain(&self.rows) {
            for (i, c) in r.iter().enumerate().take(n) {
                w[i] = w[i].max(c.chars().count());
            }
        }
        let line = |r: &[String], out: &mut String| {
            for (i, c) in r.iter().enumerate().take(n) {
                let pad = w[i] - c.chars().count();
                if i < 2 {
                    out.push_str(c);
                    out.push_str(&" ".repeat(pad));
                } else {
                    out.push_str(&" ".repeat(pad));
                    out.push_str(c);
                }
                if i + 1 < n {
                    out.push_str("  ");
                }
            }
            while out.ends_with(' ') {
                out.pop();
            }
            out.push('\n');
        };
        let total: usize = w.iter().sum::<usize>() + 2 * n.saturating_sub(1);
        let mut out = String::new();
        line(&self.headers, &mut out);
        out.push_str(&"-".repeat(total));
        out.push('\n');
        for (i, r) in self.rows.iter().enumerate() {
            if i > 0 && self.separators.contains(&i) {
                out.push('\n');
            }
            line(r, &mut out);
        }
        out
    }
}

fn pct(x: f64) -> String {
    format!("{:.1}", x * 100.0)
}

fn num(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0}")
    } else if x >= 1.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.3}")
    }
}

fn si(x: f64) -> String {
    if x >= 1e9 {
        format!("{:.2}G", x / 1e9)
    } else if x >= 1e6 {
        format!("{:.2}M", x / 1e6)
    } else if x >= 1e4 {
        format!("{:.1}k", x / 1e3)
    } else {
        num(x)
    }
}

fn timed(r: &SimReport) -> bool {
    r.timing != "none"
}

/// The comparison as a table: one block of rows per SSD size.
pub fn comparison_table(c: &Comparison) -> String {
    let is_timed = c.rows.first().is_some_and(|r| timed(&r.report));
    let mut t = if is_timed {
        Table::new(&[
            "SSD",
            "architecture",
            "read SSD%",
            "HDD%",
            "mean ms",
            "p50 ms",
            "p99 ms",
            if c.rows.first().is_some_and(|r| r.report.timing.starts_with("open")) { "offered IOPS" } else { "IOPS" },
            "MB/s",
            "up",
            "down",
            "moved",
            "energy J",
            "W",
            "SSD eu",
            "HDD eu",
            "$/IOPS",
        ])
    } else {
        Table::new(&[
            "SSD",
            "architecture",
            "read SSD%",
            "access SSD%",
            "miss ratio",
            "fills/promos",
            "writebacks/demos",
            "moved",
        ])
    };
    let mut last = String::new();
    for row in &c.rows {
        let r = &row.report;
        if row.size_label != last && !last.is_empty() {
            t.separator();
        }
        last.clone_from(&row.size_label);
        let size = format!("{} ({})", row.size_label, Bytes(r.ssd_bytes));
        let moved = Bytes(r.engine.total_bytes_moved()).to_string();
        if is_timed {
            t.row(vec![
                size,
                r.arch.clone(),
                pct(r.read_hit.ssd + r.read_hit.ram),
                pct(r.access_hit.hdd),
                num(r.latency.mean_us / 1e3),
                num(r.latency.p50_us / 1e3),
                num(r.latency.p99_us / 1e3),
                si(r.iops),
                num(r.mb_s),
                si(r.moves_up() as f64),
                si(r.moves_down() as f64),
                moved,
                si(r.energy_j),
                num(r.mean_power_w),
                num(r.endurance.ssd_eu),
                num(r.endurance.hdd_eu),
                per_iops(r),
            ]);
        } else {
            t.row(vec![
                size,
                r.arch.clone(),
                pct(r.read_hit.ssd + r.read_hit.ram),
                pct(r.access_hit.ssd + r.access_hit.ram),
                format!("{:.4}", r.miss_ratio()),
                si(r.moves_up() as f64),
                si(r.moves_down() as f64),
                moved,
            ]);
        }
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "trace {} — {} objects, footprint {}; {} timing, {} objects",
        c.trace,
        c.objects,
        Bytes(c.footprint_bytes),
        c.rows.first().map_or("", |r| r.report.timing.as_str()),
        c.rows.first().map_or("", |r| r.report.objects.as_str()),
    );
    out.push_str(&t.render());
    let notes: Vec<&String> = c.notes.iter().chain(c.rows.iter().flat_map(|r| &r.report.notes)).collect();
    let mut seen = Vec::new();
    for n in notes {
        if !seen.contains(&n) {
            let _ = writeln!(out, "note: {n}");
            seen.push(n);
        }
    }
    out
}

/// One simulation as a labelled list.
pub fn report_text(r: &SimReport) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "architecture   {}", r.arch);
    let _ = writeln!(o, "trace          {} ({}, {} objects, {} timing)", r.trace, r.format, r.objects, r.timing);
    let _ = writeln!(o, "SSD            {}", Bytes(r.ssd_bytes));
    if let Some(fp) = r.footprint_bytes {
        let _ = writeln!(o, "footprint      {}", Bytes(fp));
    }
    let _ = writeln!(
        o,
        "requests       {} ({} reads, {} writes; {} read, {} written; {} dropped, {} bad lines skipped)",
        r.requests,
        r.reads,
        r.writes,
        Bytes(r.read_bytes),
        Bytes(r.write_bytes),
        r.dropped,
        r.skipped_lines
    );
    let _ = writeln!(o, "accesses       {}", r.accesses);
    let _ = writeln!(
        o,
        "reads served   RAM {}%  SSD {}%  HDD {}%",
        pct(r.read_hit.ram),
        pct(r.read_hit.ssd),
        pct(r.read_hit.hdd)
    );
    let _ = writeln!(
        o,
        "all accesses   RHR {}%  SHR {}%  DHR {}%",
        pct(r.access_hit.ram),
        pct(r.access_hit.ssd),
        pct(r.access_hit.hdd)
    );
    let _ = writeln!(
        o,
        "request misses {} of {} (miss ratio {:.4})",
        r.request_misses,
        r.request_hits + r.request_misses,
        r.miss_ratio()
    );
    let e = &r.engine;
    let _ = writeln!(
        o,
        "moves          promote {} / demote {} / copy {} / writeback {} / invalidate {}; {} moved; {} failed, {} cancelled",
        e.done(WorkKind::Promote),
        e.done(WorkKind::Demote),
        e.done(WorkKind::Copy),
        e.done(WorkKind::Writeback),
        e.done(WorkKind::Invalidate),
        Bytes(e.total_bytes_moved()),
        e.failed.iter().sum::<u64>(),
        e.cancelled.iter().sum::<u64>()
    );
    if timed(r) {
        let l = &r.latency;
        let _ = writeln!(
            o,
            "response       mean {} us, p50 {} us, p95 {} us, p99 {} us, max {} us",
            num(l.mean_us),
            num(l.p50_us),
            num(l.p95_us),
            num(l.p99_us),
            num(l.max_us)
        );
        let _ = writeln!(
            o,
            "throughput     {} IOPS, {} MB/s over {:.3} s simulated",
            si(r.iops),
            num(r.mb_s),
            r.duration_s
        );
        for (name, d) in [("HDD", &r.hdd), ("SSD", &r.ssd)] {
            let _ = writeln!(
                o,
                "{name}            {} reads, {} writes{}, util {}%, RTA {} us, {} J, {} W, {} spin-downs",
                d.reads,
                d.writes,
                if d.merged > 0 { format!(" ({} requests merged into these)", d.merged) } else { String::new() },
                pct(d.utilisation()),
                num(d.mean_response_ns() / 1e3),
                num(d.energy_j),
                num(d.mean_power_w()),
                d.spin_downs
            );
        }
        let _ = writeln!(o, "energy         {} J, mean power {} W", num(r.energy_j), num(r.mean_power_w));
        let _ = writeln!(
            o,
            "endurance      SSD -{} eu (reads weighted {}), HDD -{} eu",
            num(r.endurance.ssd_eu),
            r.endurance.read_weight,
            num(r.endurance.hdd_eu)
        );
        if r.endurance.ssd_write_amplification > 0.0 {
            let _ = writeln!(
                o,
                "flash wear     SSD -{} eu of its P/E life, write amplification {:.2}",
                num(r.endurance.ssd_flash_eu),
                r.endurance.ssd_write_amplification
            );
        }
        if r.cost.usd_per_iops > 0.0 {
            let _ = writeln!(o, "cost           ${} capex, ${} per IOPS", significant(r.cost.capex_usd), per_iops(r));
        } else {
            let _ = writeln!(
                o,
                "cost           ${} capex (no cost per IOPS in open loop: its IOPS is the offered load; run closed-loop)",
                significant(r.cost.capex_usd)
            );
        }
        let h = &r.hca;
        let _ = writeln!(
            o,
            "HCA metrics    XCRTA {} us, HCRTA {} us, XCIOPS {}, BDRTA {} us, HCDRTA {} us",
            num(h.xcrta_us),
            num(h.hcrta_us),
            num(h.xciops),
            num(h.bdrta_us),
            num(h.hcdrta_us)
        );
    }
    if !r.arch_counters.is_empty() {
        let _ = writeln!(o, "arch counters  {}", arch_counters_text(r, ", "));
    }
    let _ = writeln!(o, "engine         {} objects tracked, {} heap", r.objects_tracked, Bytes(r.engine_memory_bytes));
    let _ = writeln!(o, "simulated in   {:.3} s ({} requests/s)", r.wall_s, si(r.requests as f64 / r.wall_s.max(1e-9)));
    for n in &r.notes {
        let _ = writeln!(o, "note           {n}");
    }
    o
}

/// Column names of [`csv_row`].
pub const CSV_HEADER: &str = "trace,arch,ssd_label,ssd_bytes,ssd_fraction,timing,objects,requests,reads,writes,accesses,\
read_ram,read_ssd,read_hdd,rhr,shr,dhr,miss_ratio,mean_us,p50_us,p95_us,p99_us,max_us,duration_s,iops,mb_s,\
promotions,demotions,copies,writebacks,invalidations,bytes_moved,hdd_util,ssd_util,energy_j,mean_power_w,\
ssd_eu,hdd_eu,ssd_flash_eu,ssd_write_amp,hdd_start_stops,capex_usd,usd_per_iops,xcrta_us,hcrta_us,xciops,bdrta_us,hcdrta_us,engine_bytes,wall_s,arch_counters";

/// The architecture's own counters as `name=value` pairs joined by `sep`.
pub fn arch_counters_text(r: &SimReport, sep: &str) -> String {
    r.arch_counters.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(sep)
}

fn csv_escape(s: &str) -> String {
    if s.contains([',', '"', '\n']) { format!("\"{}\"", s.replace('"', "\"\"")) } else { s.to_string() }
}

/// One CSV row.
pub fn csv_row(r: &SimReport, size_label: &str, fraction: f64) -> String {
    let e = &r.engine;
    let f = [
        csv_escape(&r.trace),
        csv_escape(&r.arch),
        csv_escape(size_label),
        r.ssd_bytes.to_string(),
        format!("{fraction:.6}"),
        csv_escape(&r.timing),
        csv_escape(&r.objects),
        r.requests.to_string(),
        r.reads.to_string(),
        r.writes.to_string(),
        r.accesses.to_string(),
        format!("{:.6}", r.read_hit.ram),
        format!("{:.6}", r.read_hit.ssd),
        format!("{:.6}", r.read_hit.hdd),
        format!("{:.6}", r.access_hit.ram),
        format!("{:.6}", r.access_hit.ssd),
        format!("{:.6}", r.access_hit.hdd),
        format!("{:.6}", r.miss_ratio()),
        format!("{:.3}", r.latency.mean_us),
        format!("{:.3}", r.latency.p50_us),
        format!("{:.3}", r.latency.p95_us),
        format!("{:.3}", r.latency.p99_us),
        format!("{:.3}", r.latency.max_us),
        format!("{:.6}", r.duration_s),
        format!("{:.3}", r.iops),
        format!("{:.3}", r.mb_s),
        e.done(WorkKind::Promote).to_string(),
        e.done(WorkKind::Demote).to_string(),
        e.done(WorkKind::Copy).to_string(),
        e.done(WorkKind::Writeback).to_string(),
        e.done(WorkKind::Invalidate).to_string(),
        e.total_bytes_moved().to_string(),
        format!("{:.6}", r.hdd.utilisation()),
        format!("{:.6}", r.ssd.utilisation()),
        format!("{:.3}", r.energy_j),
        format!("{:.4}", r.mean_power_w),
        format!("{:.6}", r.endurance.ssd_eu),
        format!("{:.6}", r.endurance.hdd_eu),
        format!("{:.6}", r.endurance.ssd_flash_eu),
        format!("{:.4}", r.endurance.ssd_write_amplification),
        r.hdd.spin_downs.to_string(),
        format!("{:.4}", r.cost.capex_usd),
        format!("{:.8}", r.cost.usd_per_iops),
        format!("{:.3}", r.hca.xcrta_us),
        format!("{:.3}", r.hca.hcrta_us),
        format!("{:.3}", r.hca.xciops),
        format!("{:.3}", r.hca.bdrta_us),
        format!("{:.3}", r.hca.hcdrta_us),
        r.engine_memory_bytes.to_string(),
        format!("{:.4}", r.wall_s),
        csv_escape(&arch_counters_text(r, ";")),
    ];
    f.join(",")
}

/// The comparison as CSV.
pub fn comparison_csv(c: &Comparison) -> String {
    let mut s = String::from(CSV_HEADER);
    s.push('\n');
    for row in &c.rows {
        s.push_str(&csv_row(&row.report, &row.size_label, row.size_fraction));
        s.push('\n');
    }
    s
}

/// Cost per IOPS with three significant digits, or "–" when the run gives none (open loop).
fn per_iops(r: &SimReport) -> String {
    if r.cost.usd_per_iops > 0.0 { significant(r.cost.usd_per_iops) } else { "–".into() }
}

/// Three significant digits, never a run of zeros for a small amount (the report's tables
/// format with the same rule, `html::sections`).
pub(crate) fn significant(v: f64) -> String {
    if !(v.is_finite() && v != 0.0) {
        return if v == 0.0 { "0".into() } else { "–".into() };
    }
    let digits = (2 - v.abs().log10().floor() as i32).clamp(0, 12) as usize;
    format!("{v:.digits$}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_aligns_and_csv_has_every_column() {
        let mut t = Table::new(&["a", "b", "n"]);
        t.row(vec!["x".into(), "long name".into(), "1".into()]);
        t.row(vec!["yy".into(), "z".into(), "100".into()]);
        let s = t.render();
        assert!(s.contains("x   long name    1\n"), "{s}");
        assert!(s.contains("yy  z          100\n"), "{s}");
        let r = SimReport::default();
        assert_eq!(csv_row(&r, "10%", 0.1).split(',').count(), CSV_HEADER.split(',').count());
        assert_eq!(csv_escape("a,b"), "\"a,b\"");
    }
}
