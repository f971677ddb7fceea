//! `tierwise compare`: architectures × SSD sizes on one trace.

use std::fs;
use std::path::Path;

use anyhow::{Context, Result};
use tierwise_sim::jobs::{CLOSED_DEPTH, CompareJob, run_compare};
use tierwise_sim::{plot, report};

use crate::args::*;
use crate::progress::Bars;
use crate::write_file;

pub(crate) fn cmd_compare(a: CompareArgs, bars: &Bars) -> Result<()> {
    let job = CompareJob {
        trace: a.trace.clone(),
        archs: a.archs.clone(),
        ssd: a.ssd.clone(),
        trace_options: a.trace_opts.job_options(),
        model: a.model.options(),
        threads: a.threads.unwrap_or(0),
        allow_oversize: a.allow_oversize,
    };
    fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    let out = run_compare(&job, bars)?;
    bars.clear();
    let auto = a.model.timing == "auto";
    if auto {
        println!("THROUGHPUT: closed loop, {CLOSED_DEPTH} requests outstanding (as fast as the devices allow)");
    }
    print!("{}", report::comparison_table(&out.throughput));
    write_comparison(&out.throughput, &a.out, "compare")?;
    if let (Some(open), Some(note)) = (&out.latency, &out.latency_note) {
        println!();
        println!("LATENCY: {note}");
        print!("{}", report::comparison_table(open));
        write_comparison(open, &a.out, "compare-latency")?;
    }
    if auto {
        println!();
        println!("VERDICT (closed loop)");
        for line in &out.verdicts {
            println!("  {line}");
        }
    }
    Ok(())
}

pub(crate) fn write_comparison(c: &tierwise_sim::compare::Comparison, out: &Path, stem: &str) -> Result<()> {
    let (json, csv, png) =
        (out.join(format!("{stem}.json")), out.join(format!("{stem}.csv")), out.join(format!("{stem}.png")));
    write_file(&json, serde_json::to_string_pretty(c)?.as_bytes())?;
    write_file(&csv, report::comparison_csv(c).as_bytes())?;
    plot::comparison_chart(c, &png).map_err(anyhow::Error::msg)?;
    println!("wrote {}, {}, {}", json.display(), csv.display(), png.display());
    Ok(())
}
