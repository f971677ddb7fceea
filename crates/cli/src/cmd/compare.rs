//! `tierwise compare`: architectures × SSD sizes on one trace.

use std::fs;
use std::path::Path;

use anyhow::{Context, Result};
use tierwise_sim::compare::{CompareConfig, SsdSize, compare};
use tierwise_sim::objects::Mapper;
use tierwise_sim::{Timing, plot, report};

use crate::args::*;
use crate::progress::Bars;
use crate::write_file;

/// The architectures `compare` runs when none are named: the baselines, the generic cache in
/// each mode, and the real systems' stand-ins.
const DEFAULT_ARCHS: &[&str] = &[
    "hdd-only",
    "linear",
    "cache:mode=read-only",
    "cache:mode=write-through",
    "cache:mode=write-back",
    "cache:mode=write-back,collector=arc",
    "bcache-like:cache-mode=writeback",
    "dm-cache-smq-like",
    "greendm-tiering",
    "ssd-only",
];

/// Outstanding requests of the main job's throughput table (a SATA disk's NCQ depth).
const CLOSED_DEPTH: u32 = 32;

pub(crate) fn cmd_compare(a: CompareArgs, bars: &Bars) -> Result<()> {
    let base = a.model.base()?;
    let sizes = a
        .ssd
        .iter()
        .map(|s| SsdSize::parse(s).map_err(anyhow::Error::msg))
        .collect::<Result<Vec<_>>>()
        .context("--ssd")?;
    let archs: Vec<String> = if a.archs.is_empty() {
        let probe = a.trace_opts.open(&a.trace)?;
        let fixed = Mapper::new(base.objects, probe.info().object_trace).mode().object_size() != 0;
        // Linear and GreenDM map fixed-size extents: not for object traces.
        DEFAULT_ARCHS
            .iter()
            .filter(|s| fixed || !matches!(**s, "linear" | "greendm-tiering"))
            .map(|s| s.to_string())
            .collect()
    } else {
        a.archs.clone()
    };
    let threads = a.threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
    let auto = a.model.timing == "auto";
    let mut cfg = CompareConfig { archs, sizes, base, threads, allow_oversize: a.allow_oversize };
    fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    if !auto {
        let c = compare(&a.trace, &a.trace_opts.options(), &cfg, bars)?;
        bars.clear();
        print!("{}", report::comparison_table(&c));
        return write_comparison(&c, &a.out, "compare");
    }
    // The main job: throughput with the disk kept busy, then latency at a load HDD-only can
    // carry, then a verdict per size.
    let hdd_missing = !cfg.archs.iter().any(|s| s.split(':').next() == Some("hdd-only"));
    if hdd_missing {
        cfg.archs.insert(0, "hdd-only".into());
    }
    cfg.base.timing = Timing::Closed { depth: CLOSED_DEPTH };
    let closed = compare(&a.trace, &a.trace_opts.options(), &cfg, bars)?;
    bars.clear();
    println!("THROUGHPUT: closed loop, {CLOSED_DEPTH} requests outstanding (as fast as the devices allow)");
    print!("{}", report::comparison_table(&closed));
    write_comparison(&closed, &a.out, "compare")?;
    let mut probe = a.trace_opts.open(&a.trace)?;
    let burst = tierwise_sim::verdict::busiest(&mut probe, cfg.base.objects)?;
    let hdd_iops = closed
        .rows
        .iter()
        .filter(|r| r.report.arch.split(':').next() == Some("hdd-only"))
        .map(|r| r.report.iops)
        .fold(0.0, f64::max);
    if burst.timed {
        let speedup = tierwise_sim::verdict::unsaturated_speedup(&burst, hdd_iops);
        cfg.base.timing = Timing::Open { speedup };
        let open = compare(&a.trace, &a.trace_opts.options(), &cfg, bars)?;
        bars.clear();
        println!();
        println!(
            "LATENCY: open loop, the trace's timestamps at x{speedup} speed: its busiest 10 s offer {:.0} requests/s, \
             {:.0} at this speed, {:.0}% of what HDD-only sustains closed-loop ({hdd_iops:.0} IOPS), so the disk is not \
             saturated; IOPS here is the offered load",
            burst.peak_iops,
            burst.peak_iops * speedup,
            burst.peak_iops * speedup / hdd_iops.max(1e-9) * 100.0
        );
        print!("{}", report::comparison_table(&open));
        write_comparison(&open, &a.out, "compare-latency")?;
    }
    println!();
    println!("VERDICT (closed loop)");
    for line in tierwise_sim::verdict::verdicts(&closed, &burst) {
        println!("  {line}");
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
