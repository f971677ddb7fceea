//! `tierwise sim`: one architecture on a block or file trace.

use anyhow::Result;
use tierwise_sim::jobs::{SimJob, run_sim};
use tierwise_sim::report;

use crate::args::*;
use crate::progress::{Bars, Spinner};
use crate::write_file;

pub(crate) fn cmd_sim(a: SimArgs, bars: &Bars) -> Result<()> {
    let job = SimJob {
        trace: a.trace.clone(),
        arch: a.arch.clone(),
        ssd: a.ssd.clone(),
        trace_options: a.trace_opts.job_options(),
        model: a.model.options(),
        ram_cache: a.ram_cache.clone(),
        no_dirs: a.no_dirs,
        measure_from: a.measure_from.clone(),
    };
    let mut spinner = Spinner::new(bars, &format!("{} @ {}", a.arch, a.ssd));
    let out = run_sim(&job, &mut spinner)?;
    spinner.done();
    print!("{}", report::report_text(&out.report));
    if let Some(p) = a.json {
        write_file(&p, serde_json::to_string_pretty(&out.report)?.as_bytes())?;
    }
    if let Some(p) = a.csv {
        let row = report::csv_row(&out.report, &out.size_label, out.size_fraction);
        write_file(&p, format!("{}\n{row}\n", report::CSV_HEADER).as_bytes())?;
    }
    Ok(())
}

/// The request-offset histogram of `trace stat`: the most frequent offsets modulo the block
/// size, with their share.
pub(crate) fn print_alignment(a: &tierwise_sim::alignment::Alignment) {
    if a.requests == 0 {
        return;
    }
    println!("request offsets mod {} (sector = 512 B)", tierwise_core::Bytes(a.block_size));
    let shown = a.residues.iter().take(4);
    for &(residue, count) in shown {
        let share = count as f64 / a.requests as f64;
        let bar = "#".repeat((share * 40.0).ceil() as usize);
        println!("  {:>9}  {:>10}  {:>5.1}%  {bar}", residue, count, share * 100.0);
    }
    let rest: u64 = a.residues.iter().skip(4).map(|r| r.1).sum();
    if rest > 0 {
        println!("  {:>9}  {:>10}  {:>5.1}%", "other", rest, rest as f64 / a.requests as f64 * 100.0);
    }
}
