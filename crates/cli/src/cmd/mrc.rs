//! `tierwise mrc`: a miss-ratio curve: LRU in one pass, any collector by simulation, exact or
//! on a SHARDS sample.

use std::fs;

use anyhow::Result;
use tierwise_sim::jobs::{MrcJob, MrcOutcome, run_mrc};
use tierwise_sim::{plot, report};

use crate::args::*;
use crate::progress::{Bars, Spinner};
use crate::write_file;

pub(crate) fn cmd_mrc(a: MrcArgs, bars: &Bars) -> Result<()> {
    let job = MrcJob {
        trace: a.trace.clone(),
        trace_options: a.trace_opts.job_options(),
        objects: a.objects.clone(),
        sizes: a.sizes.clone(),
        points: a.points,
        collector: a.collector.clone(),
        sample: a.sample,
        seed: a.seed,
        exact_error: a.exact_error,
        threads: a.threads,
        belady: a.belady,
    };
    let mut spinner = Spinner::new(bars, "mrc");
    let wall = std::time::Instant::now();
    let MrcOutcome { mrc: m, mode, note } = run_mrc(&job, &mut spinner)?;
    spinner.done();
    if let Some(note) = note {
        println!("note: {note}");
    }
    let secs = wall.elapsed().as_secs_f64();
    let belady = !m.belady.is_empty();
    let headers: &[&str] = if belady {
        &["size", "bytes", "miss ratio", "misses", "Belady miss ratio", "Belady misses"]
    } else {
        &["size", "bytes", "miss ratio", "misses"]
    };
    let mut table = report::Table::new(headers);
    for (i, p) in m.points.iter().enumerate() {
        let mut row = vec![
            tierwise_core::Bytes(p.size_bytes).to_string(),
            p.size_bytes.to_string(),
            format!("{:.4}", p.miss_ratio),
            p.misses.to_string(),
        ];
        if let Some(b) = m.belady.get(i).filter(|_| belady) {
            row.extend([format!("{:.4}", b.miss_ratio), b.misses.to_string()]);
        }
        table.row(row);
    }
    let how = match &m.sampling {
        Some(s) => format!(
            "SHARDS sample of {:.2} % of the objects (seed {}: {} accesses of {} objects), one simulation per size",
            s.rate * 100.0,
            s.seed,
            s.sampled_accesses,
            s.sampled_objects
        ),
        None if m.collector == "lru" => "exact, one pass".into(),
        None => "exact, one simulation per size".into(),
    };
    println!(
        "{} MRC of {} ({}): {} accesses, {} objects, footprint {}, {} cold misses; {how}, {:.2} s",
        m.collector.to_uppercase(),
        a.trace.display(),
        mode.label(),
        m.accesses,
        m.objects,
        tierwise_core::Bytes(m.footprint_bytes),
        m.cold_misses,
        secs
    );
    print!("{}", table.render());
    if let Some(s) = m.sampling.as_ref().filter(|s| s.sizes_left_out > 0) {
        let least = tierwise_core::collector::collector_info(&m.collector).map_or(1, |c| c.min_objects);
        let what = if least > 1 {
            format!("fewer than the {least} objects {} needs", m.collector)
        } else {
            "less than one object".to_string()
        };
        println!(
            "note: {} smaller sizes left out: at a {:.2} % sample their cache would hold {what} (the curve starts at {})",
            s.sizes_left_out,
            s.rate * 100.0,
            tierwise_core::Bytes(s.smallest_bytes)
        );
    }
    if let Some(e) = &m.error {
        println!("error against the exact curve: max |Δ miss ratio| {:.4}, mean {:.4}", e.max_abs, e.mean_abs);
    }
    fs::create_dir_all(&a.out)?;
    write_file(&a.out.join("mrc.csv"), m.to_csv().as_bytes())?;
    write_file(&a.out.join("mrc.json"), serde_json::to_string_pretty(&m)?.as_bytes())?;
    let name = a.trace.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
    let label = if m.collector == "lru" && m.sampling.is_none() { name } else { format!("{name}, {}", m.collector) };
    plot::mrc_chart(&m, &label, &a.out.join("mrc.png")).map_err(anyhow::Error::msg)?;
    println!("wrote {}/mrc.csv, mrc.json, mrc.png", a.out.display());
    Ok(())
}
