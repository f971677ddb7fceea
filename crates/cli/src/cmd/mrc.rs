//! `tierwise mrc`: an LRU miss-ratio curve in one pass.

use std::fs;

use anyhow::{Context, Result};
use tierwise_sim::compare::SsdSize;
use tierwise_sim::mrc::{log_sizes, lru_mrc};
use tierwise_sim::objects::{Mapper, ObjectMode};
use tierwise_sim::sim::footprint;
use tierwise_sim::{plot, report};

use crate::args::*;
use crate::progress::{Bars, Spinner};
use crate::write_file;

pub(crate) fn cmd_mrc(a: MrcArgs, bars: &Bars) -> Result<()> {
    let mode = ObjectMode::parse(&a.objects).map_err(anyhow::Error::msg).context("--objects")?;
    let (mode, anchor_note) = tierwise_sim::alignment::resolve_anchor_of(&a.trace, &a.trace_opts.options(), mode)?;
    if let Some(note) = anchor_note {
        println!("note: {note}");
    }
    let mut t = a.trace_opts.open(&a.trace)?;
    let mode = Mapper::new(mode, t.info().object_trace).mode();
    let unit = mode.object_size().max(1);
    let needs_fp = a.sizes.is_empty() || a.sizes.iter().any(|s| s.contains('%'));
    let fp = if needs_fp { footprint(&mut t, mode)?.1 } else { 0 };
    let sizes: Vec<u64> = if a.sizes.is_empty() {
        log_sizes(unit, fp, a.points.max(2), unit)
    } else {
        a.sizes
            .iter()
            .map(|s| SsdSize::parse(s).map(|x| x.resolve(fp, unit)).map_err(anyhow::Error::msg))
            .collect::<Result<Vec<_>>>()
            .context("--sizes")?
    };
    let mut t = a.trace_opts.open(&a.trace)?;
    let mut spinner = Spinner::new(bars, "mrc");
    let wall = std::time::Instant::now();
    let m = lru_mrc(&mut t, mode, &sizes, &mut spinner)?;
    spinner.done();
    let secs = wall.elapsed().as_secs_f64();
    let mut table = report::Table::new(&["size", "bytes", "miss ratio", "misses"]);
    for p in &m.points {
        table.row(vec![
            tierwise_core::Bytes(p.size_bytes).to_string(),
            p.size_bytes.to_string(),
            format!("{:.4}", p.miss_ratio),
            p.misses.to_string(),
        ]);
    }
    println!(
        "LRU MRC of {} ({}): {} accesses, {} objects, footprint {}, {} cold misses; one pass in {:.2} s",
        a.trace.display(),
        mode.label(),
        m.accesses,
        m.objects,
        tierwise_core::Bytes(m.footprint_bytes),
        m.cold_misses,
        secs
    );
    print!("{}", table.render());
    fs::create_dir_all(&a.out)?;
    let mut csv = String::from("size_bytes,miss_ratio,misses\n");
    for p in &m.points {
        csv.push_str(&format!("{},{:.6},{}\n", p.size_bytes, p.miss_ratio, p.misses));
    }
    write_file(&a.out.join("mrc.csv"), csv.as_bytes())?;
    write_file(&a.out.join("mrc.json"), serde_json::to_string_pretty(&m)?.as_bytes())?;
    let label = a.trace.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
    plot::mrc_chart(&m, &label, &a.out.join("mrc.png")).map_err(anyhow::Error::msg)?;
    println!("wrote {}/mrc.csv, mrc.json, mrc.png", a.out.display());
    Ok(())
}
