//! `tierwise sim`: one architecture on a block or file trace.

use anyhow::{Context, Result, bail};
use tierwise_sim::compare::SsdSize;
use tierwise_sim::objects::Mapper;
use tierwise_sim::sim::footprint;
use tierwise_sim::{Timing, report, simulate};

use crate::args::*;
use crate::progress::{Bars, Spinner};
use crate::write_file;

pub(crate) fn cmd_sim(a: SimArgs, bars: &Bars) -> Result<()> {
    if a.trace_opts.format.as_deref() == Some("file")
        || (a.trace_opts.format.is_none() && tierwise_sim::filetrace::is_file_trace(&a.trace)?)
    {
        return cmd_sim_files(a, bars);
    }
    let mut cfg = a.model.base()?;
    cfg.arch = a.arch.clone();
    let (anchored, anchor_note) =
        tierwise_sim::alignment::resolve_anchor_of(&a.trace, &a.trace_opts.options(), cfg.objects)?;
    cfg.objects = anchored;
    let (split, split_note) = cfg.split_at_arch_extents();
    cfg = split;
    let size = SsdSize::parse(&a.ssd).map_err(anyhow::Error::msg).context("--ssd")?;
    let mut t = a.trace_opts.open(&a.trace)?;
    let mode = Mapper::new(cfg.objects, t.info().object_trace).mode();
    // The footprint costs a pass over the trace: needed for a relative size and for the cost
    // figures of timed runs.
    let fp = if matches!(size, SsdSize::Fraction(_)) || cfg.timing != Timing::None {
        let (_, fp) = footprint(&mut t, mode)?;
        cfg.footprint_bytes = Some(fp);
        fp
    } else {
        0
    };
    cfg.ssd_bytes = size.resolve(fp, mode.object_size().max(1));
    let mut t = a.trace_opts.open(&a.trace)?;
    let mut spinner = Spinner::new(bars, &format!("{} @ {}", cfg.arch, size.label()));
    let mut r = simulate(&mut t, &cfg, &mut spinner)?;
    spinner.done();
    r.notes.extend(anchor_note);
    r.notes.extend(split_note);
    print!("{}", report::report_text(&r));
    if let Some(p) = a.json {
        write_file(&p, serde_json::to_string_pretty(&r)?.as_bytes())?;
    }
    if let Some(p) = a.csv {
        let frac = if fp > 0 { cfg.ssd_bytes as f64 / fp as f64 } else { 0.0 };
        write_file(&p, format!("{}\n{}\n", report::CSV_HEADER, report::csv_row(&r, &size.label(), frac)).as_bytes())?;
    }
    Ok(())
}

/// `tierwise sim` on a file trace: the file-level simulator.
pub(crate) fn cmd_sim_files(a: SimArgs, bars: &Bars) -> Result<()> {
    use tierwise_sim::filesim::{FileSim, FileSimConfig, WorkingSet, file_arch_allowed};
    use tierwise_sim::filetrace::FileTraceReader;
    file_arch_allowed(&a.arch)?;
    let base = a.model.base()?;
    if a.model.objects != "blocks:4KiB" {
        bail!("--objects does not apply to a file trace: its objects are the files and directories it names");
    }
    let size = SsdSize::parse(&a.ssd).map_err(anyhow::Error::msg).context("--ssd")?;
    let ram = tierwise_core::params::parse_size(&a.ram_cache)
        .map_err(|e| anyhow::anyhow!("--ram-cache {}: {e}", a.ram_cache))?;
    // One pass for the working set (a relative SSD size and the cost figures need it) and the
    // setup phase.
    let mut ws = WorkingSet::default();
    let (mut ops, mut setup) = (0u64, None);
    for op in FileTraceReader::open(&a.trace)? {
        let op = op?;
        ws.op(&op);
        if setup.is_none() && !tierwise_sim::filetrace::is_setup_op(&op) {
            setup = Some(ops);
        }
        ops += 1;
    }
    let measure_from = match a.measure_from.as_str() {
        "auto" => setup.unwrap_or(0),
        n => n
            .parse::<u64>()
            .ok()
            .filter(|&n| n < ops.max(1))
            .with_context(|| format!("--measure-from {n}: `auto` or an operation index below {ops}"))?,
    };
    let cfg = FileSimConfig {
        arch: a.arch.clone(),
        ssd_bytes: size.resolve(ws.peak_bytes, 1),
        ram_bytes: ram,
        timing: base.timing,
        devices: base.devices.clone(),
        hdd_queue: base.hdd_queue,
        region_bytes: 0,
        movers: 0,
        dirs: !a.no_dirs,
        spin_down: base.spin_down,
        read_weight: base.read_weight,
        measure_from,
        flush_at_end: base.flush_at_end,
        max_ops: base.max_requests,
        check_every: base.check_every,
        footprint_bytes: Some(ws.peak_bytes),
    };
    let mut spinner = Spinner::new(bars, &format!("{} @ {}", cfg.arch, size.label()));
    let mut sim = FileSim::new(&cfg, &a.trace.display().to_string())?;
    for op in FileTraceReader::open(&a.trace)? {
        if sim.done() {
            break;
        }
        sim.op(&op?)?;
        if sim.ops() & 0xffff == 0 {
            tierwise_sim::sim::Progress::update(&mut spinner, sim.ops());
        }
    }
    let r = sim.finish()?;
    spinner.done();
    print!("{}", report::report_text(&r));
    if let Some(p) = a.json {
        write_file(&p, serde_json::to_string_pretty(&r)?.as_bytes())?;
    }
    if let Some(p) = a.csv {
        let frac = if ws.peak_bytes > 0 { cfg.ssd_bytes as f64 / ws.peak_bytes as f64 } else { 0.0 };
        write_file(&p, format!("{}\n{}\n", report::CSV_HEADER, report::csv_row(&r, &size.label(), frac)).as_bytes())?;
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
