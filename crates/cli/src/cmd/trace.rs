//! `tierwise trace`: inspect, convert and generate traces.

use std::fs;
use std::io::{BufWriter, Write};
use std::path::Path;

use anyhow::{Context, Result, bail};
use tierwise_sim::objects::{Mapper, ObjectMode};
use tierwise_sim::synth::{ZipfWorkload, collect_objects, write_oracle_general};

use crate::args::*;
use crate::cmd::sim::print_alignment;
use crate::progress::{Bars, Spinner};

pub(crate) fn cmd_trace(t: TraceCommand, bars: &Bars) -> Result<()> {
    match t {
        TraceCommand::GenFiles { workload, output, scale, seed, iterations } => {
            gen_files(&workload, scale, seed, iterations, &output)
        }
        TraceCommand::Stat { trace, trace_opts, objects, json, brief } => {
            let job = tierwise_sim::jobs::StatJob {
                trace: trace.clone(),
                trace_options: trace_opts.job_options(),
                objects,
                analysis: !brief,
            };
            let mut spinner = Spinner::new(bars, "reading");
            let (s, anchor_note) = tierwise_sim::jobs::run_stat(&job, &mut spinner)?;
            spinner.done();
            if json {
                println!("{}", serde_json::to_string_pretty(&s)?);
                return Ok(());
            }
            use tierwise_core::Bytes;
            println!("trace          {} ({})", s.trace, s.format);
            println!(
                "requests       {} ({} reads = {:.1}%, {} writes)",
                s.requests,
                s.reads,
                s.read_fraction() * 100.0,
                s.writes
            );
            println!("bytes          {} read, {} written", Bytes(s.read_bytes), Bytes(s.write_bytes));
            println!("footprint      {} in {} objects ({})", Bytes(s.footprint_bytes), s.objects, s.object_mode);
            println!(
                "duration       {:.3} s{}",
                s.duration_s,
                if s.out_of_order > 0 {
                    format!(" ({} records out of time order)", s.out_of_order)
                } else {
                    String::new()
                }
            );
            println!("volumes        {}", s.volumes);
            if s.zero_length > 0 || s.skipped > 0 {
                println!(
                    "oddities       {} zero-length requests, {} malformed lines skipped",
                    s.zero_length, s.skipped
                );
            }
            println!("request sizes");
            let max = s.size_histogram.iter().map(|x| x.1).max().unwrap_or(1);
            for (upper, count) in &s.size_histogram {
                let bar = "#".repeat(((*count as f64 / max as f64) * 40.0).ceil() as usize);
                println!("  <= {:>9}  {:>10}  {bar}", Bytes(*upper).to_string(), count);
            }
            if let Some(a) = &s.alignment {
                print_alignment(a);
            }
            if let Some(a) = &s.analysis {
                print_analysis(a);
            }
            if let Some(note) = anchor_note {
                println!("note: {note}");
            }
            Ok(())
        }
        TraceCommand::Merge { traces, output, volumes, head, trace_opts } => {
            merge(&traces, &output, &volumes, head, &trace_opts)
        }
        TraceCommand::Convert { trace, output, trace_opts, objects } => {
            let mode = ObjectMode::parse(&objects).map_err(anyhow::Error::msg).context("--objects")?;
            // `blocks:…@auto` is resolved as runs resolve it, and the output names the anchor used.
            let (mode, anchor_note) =
                tierwise_sim::alignment::resolve_anchor_of(&trace, &trace_opts.job_options().open_options(), mode)?;
            let mut tr = trace_opts.open(&trace)?;
            let mapper = Mapper::new(mode, tr.info().object_trace);
            let recs = collect_objects(&mut tr, &mapper)?;
            let f = fs::File::create(&output).with_context(|| format!("creating {}", output.display()))?;
            let mut w = BufWriter::new(f);
            write_oracle_general(&recs, &mut w)?;
            w.flush()?;
            println!("wrote {} oracleGeneral records ({}) to {}", recs.len(), mapper.mode().label(), output.display());
            if let Some(note) = anchor_note {
                println!("note: {note}");
            }
            Ok(())
        }
        TraceCommand::Gen { output, requests, objects, alpha, size, write_fraction, rate, seed, standin, scale } => {
            if let Some(name) = standin {
                return write_standin(&name, scale, seed, requests, &output);
            }
            let w = ZipfWorkload { requests, objects, alpha, size, write_fraction, rate, seed };
            if w.validate().is_err() {
                bail!("--objects and --size must be positive, --write-fraction within 0..=1, --alpha >= 0");
            }
            w.write(&output).with_context(|| format!("writing {}", output.display()))?;
            println!(
                "wrote {requests} requests over {objects} objects (Zipf {alpha}, seed {seed}) to {}",
                output.display()
            );
            Ok(())
        }
    }
}

fn bars(rows: &[(String, u64)]) {
    let max = rows.iter().map(|x| x.1).max().unwrap_or(1).max(1);
    for (label, count) in rows {
        let bar = "#".repeat(((*count as f64 / max as f64) * 40.0).ceil() as usize);
        println!("  {label:>12}  {count:>10}  {bar}");
    }
}

fn pct(part: u64, whole: u64) -> f64 {
    if whole == 0 { 0.0 } else { part as f64 * 100.0 / whole as f64 }
}

fn print_analysis(a: &tierwise_sim::analysis::TraceAnalysis) {
    use tierwise_core::Bytes;
    let p = &a.popularity;
    println!(
        "accesses       {} object accesses ({}), {} objects, {} accessed once ({:.1}%)",
        a.accesses,
        a.object_mode,
        a.first_accesses,
        p.one_hit_objects,
        pct(p.one_hit_objects, a.first_accesses)
    );
    let tops: Vec<String> =
        p.top_shares.iter().map(|(f, s)| format!("top {}%: {:.1}%", f * 100.0, s * 100.0)).collect();
    println!("popularity     share of accesses to the most popular objects: {}", tops.join(", "));
    if let Some(alpha) = p.zipf_alpha {
        println!("               Zipf exponent {alpha:.2} (log-log fit of accesses against rank)");
    }
    println!(
        "reuse time     accesses since the object's previous access ({} first accesses not shown)",
        a.first_accesses
    );
    bars(&a.reuse_time.iter().map(|(u, c)| (format!("<= {u}"), *c)).collect::<Vec<_>>());
    println!("stack distance distinct objects since the object's previous access (LRU hits at that size)");
    bars(&a.stack_distance.iter().map(|(u, c)| (format!("<= {u}"), *c)).collect::<Vec<_>>());
    println!("op x size      {:>12}  {:>10}  {:>10}", "size", "reads", "writes");
    for m in &a.op_size_mix {
        println!("               {:>12}  {:>10}  {:>10}", format!("<= {}", Bytes(m.upper_bytes)), m.reads, m.writes);
    }
    if a.per_volume.len() > 1 {
        let mut v = a.per_volume.clone();
        v.sort_by_key(|x| std::cmp::Reverse(x.requests));
        println!(
            "volumes        {} (busiest 16)  {:>10}  {:>7}  {:>10}  {:>10}  {:>10}",
            a.per_volume.len(),
            "requests",
            "reads %",
            "read",
            "written",
            "footprint"
        );
        for x in v.iter().take(16) {
            println!(
                "  volume {:>6}  {:>18}  {:>7.1}  {:>10}  {:>10}  {:>10}",
                x.volume,
                x.requests,
                pct(x.reads, x.requests),
                Bytes(x.read_bytes).to_string(),
                Bytes(x.write_bytes).to_string(),
                Bytes(x.footprint_bytes).to_string()
            );
        }
    }
}

/// Writes a file workload as a file trace and prints what it holds.
pub(crate) fn gen_files(name: &str, scale: f64, seed: u64, iterations: Option<u64>, output: &Path) -> Result<()> {
    use tierwise_sim::filetrace::generate::{FILE_WORKLOADS, FileWorkload};
    use tierwise_sim::filetrace::{FileOpKind, HEADER};
    if !(scale > 0.0 && scale <= 1.0) {
        bail!("--scale {scale}: expected a fraction in (0, 1]");
    }
    let Some(mut w) = FileWorkload::by_name(name, scale) else {
        bail!("unknown file workload `{name}`; expected one of: {}", FILE_WORKLOADS.join(", "));
    };
    if let Some(n) = iterations {
        if n == 0 {
            bail!("--iterations 0: expected at least 1");
        }
        w = w.with_iterations(n);
    }
    let f = fs::File::create(output).with_context(|| format!("creating {}", output.display()))?;
    let mut out = BufWriter::new(f);
    out.write_all(HEADER.as_bytes())?;
    let mut counts = [0u64; 10];
    let (mut read, mut written) = (0u64, 0u64);
    let mut err = None;
    w.generate(seed, |op| {
        if let Some(i) = FileOpKind::ALL.iter().position(|(k, _)| *k == op.kind) {
            counts[i] += 1;
        }
        match op.kind {
            FileOpKind::Read => read += op.length,
            FileOpKind::Write | FileOpKind::Append => written += op.length,
            _ => {}
        }
        if let Err(e) = op.write_line(&mut out) {
            err.get_or_insert(e);
        }
    });
    if let Some(e) = err {
        return Err(e.into());
    }
    out.flush()?;
    let total: u64 = counts.iter().sum();
    println!("wrote {total} operations of {name} (scale {scale}, seed {seed}) to {}", output.display());
    let by_kind: Vec<String> = FileOpKind::ALL
        .iter()
        .zip(counts)
        .filter(|(_, n)| *n > 0)
        .map(|((_, name), n)| format!("{name} {n}"))
        .collect();
    println!("  {}", by_kind.join(", "));
    println!("  {} read, {} written", tierwise_core::Bytes(read), tierwise_core::Bytes(written));
    Ok(())
}

/// Writes a stand-in as MQSim ascii (time ns, device, LBA sectors, sectors, 1 = read).
pub(crate) fn write_standin(name: &str, scale: f64, seed: u64, limit: u64, output: &Path) -> Result<()> {
    use tierwise_sim::reproduce::standin::{STANDINS, StandIn};
    if !(scale > 0.0 && scale <= 1.0) {
        bail!("--scale {scale}: expected a fraction in (0, 1]");
    }
    let Some(s) = StandIn::by_name(name, scale, seed) else {
        bail!("unknown stand-in `{name}`; expected one of: {}", STANDINS.join(", "));
    };
    let mut t = s.trace();
    let f = fs::File::create(output).with_context(|| format!("creating {}", output.display()))?;
    let mut out = BufWriter::new(f);
    let mut r = tierwise_sim::trace::TraceRecord::default();
    let (mut n, unbounded) = (0u64, !s.has_time());
    while (!unbounded || n < limit) && t.next(&mut r)? {
        let ty = u8::from(r.op == tierwise_sim::trace::IoOp::Read);
        writeln!(out, "{} 0 {} {} {}", r.time_ns, r.offset / 512, r.len.div_ceil(512), ty)?;
        n += 1;
    }
    out.flush()?;
    println!("wrote {n} requests of {} to {}\n{}", s.name, output.display(), s.description);
    Ok(())
}

fn merge(
    traces: &[std::path::PathBuf],
    output: &Path,
    volumes: &[u32],
    head: Option<u64>,
    opts: &TraceOpts,
) -> Result<()> {
    let volumes: Vec<u32> = if volumes.is_empty() { (0..traces.len() as u32).collect() } else { volumes.to_vec() };
    if volumes.len() != traces.len() {
        bail!("--volumes names {} volumes for {} traces: give one per trace", volumes.len(), traces.len());
    }
    if let Some(v) = volumes.iter().find(|&&v| v >= 0xFFFF) {
        bail!("--volumes {v}: volume numbers go from 0 to 65534 (65535 is the simulator's spare volume)");
    }
    let mut distinct = volumes.clone();
    distinct.sort_unstable();
    distinct.dedup();
    if distinct.len() != volumes.len() {
        bail!("--volumes repeats a number: each trace needs its own volume");
    }
    let mut sources = traces.iter().map(|t| opts.open(t)).collect::<Result<Vec<_>>>()?;
    let f = fs::File::create(output).with_context(|| format!("creating {}", output.display()))?;
    let mut w = BufWriter::new(f);
    let s = tierwise_sim::trace::merge::merge_to_spc(&mut sources, &volumes, head.unwrap_or(u64::MAX), &mut w)?;
    w.flush().with_context(|| format!("writing {}", output.display()))?;
    for ((t, v), n) in traces.iter().zip(&volumes).zip(&s.per_source) {
        println!("volume {v:>5}  {n:>9} requests  {}", t.display());
    }
    println!("wrote {} requests over {:.3} s to {}", s.per_source.iter().sum::<u64>(), s.duration_s, output.display());
    if s.spaced {
        println!(
            "note: the trace has no timestamps: its requests are 1 ms apart in the output (for closed-loop replays)"
        );
    }
    if s.unaligned > 0 {
        println!(
            "note: {} requests started inside a 512-byte sector; SPC counts sectors, so they start at the sector",
            s.unaligned
        );
    }
    Ok(())
}
