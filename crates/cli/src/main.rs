//! The `tierwise` command line. Argument parsing, progress bars and printing only; the work is
//! done by `tierwise-core` and `tierwise-sim`.

mod mount;
mod progress;
mod replay_cmd;

use std::fs;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::{Args, Parser, Subcommand};
use tierwise_core::Nanos;
use tierwise_core::arch::ARCHITECTURES;
use tierwise_core::collector::COLLECTORS;
use tierwise_core::params::parse_duration;
use tierwise_sim::compare::{CompareConfig, SsdSize, compare};
use tierwise_sim::device::{Presets, Scheduler};
use tierwise_sim::mrc::{log_sizes, lru_mrc};
use tierwise_sim::objects::{Mapper, ObjectMode};
use tierwise_sim::sim::footprint;
use tierwise_sim::synth::{ZipfWorkload, collect_objects, write_oracle_general};
use tierwise_sim::trace::{FORMATS, OpenOptions, Trace, open_trace};
use tierwise_sim::{SimConfig, Timing, plot, report, simulate};

use crate::progress::{Bars, Spinner};

/// Hybrid SSD/HDD storage: one policy engine; compare architectures on real traces.
#[derive(Parser)]
#[command(name = "tierwise", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// No progress bars.
    #[arg(long, short, global = true)]
    quiet: bool,
}

#[derive(Subcommand)]
enum Command {
    /// Simulate one architecture on a trace.
    Sim(SimArgs),
    /// Architectures × SSD sizes on one trace, side by side (table, JSON, CSV, PNG).
    Compare(CompareArgs),
    /// LRU miss-ratio curve for many cache sizes in one pass.
    Mrc(MrcArgs),
    /// Inspect, convert or generate traces.
    #[command(subcommand)]
    Trace(TraceCommand),
    /// Run a seed paper's experiments (greendm, otf-ast, hca, loris, hycache) and print ours beside the paper's numbers.
    Reproduce(ReproduceArgs),
    /// Measure the speed and memory targets (generates seeded workloads once, then reuses them).
    Bench(BenchArgs),
    /// Mount a hybrid file system (FUSE) over an SSD directory and an HDD directory.
    #[command(after_long_help = mount::LONG_HELP)]
    Mount(mount::MountArgs),
    /// Where files on a tierwise mount are: ssd, hdd or ssd+hdd (the user.tierwise.tier xattr).
    WhichTier {
        /// Files on a tierwise mount.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
    },
    /// Unmount a tierwise mount.
    Umount {
        /// The mountpoint.
        mountpoint: PathBuf,
    },
    /// A tierwise mount's configuration, space, queue and move in progress.
    Status {
        /// The mountpoint.
        mountpoint: PathBuf,
    },
    /// A tierwise mount's counters: hits and misses per tier, moves, bytes moved, dirty bytes.
    Stats {
        /// The mountpoint.
        mountpoint: PathBuf,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Pin files on a tierwise mount to a tier (out of the policy until unpinned).
    Pin {
        /// ssd or hdd.
        #[arg(value_parser = ["ssd", "hdd"])]
        tier: String,
        /// Files on a tierwise mount.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
    },
    /// Give pinned files back to the policy.
    Unpin {
        /// Files on a tierwise mount.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
    },
    /// Write back every dirty file of a tierwise mount, with progress, and wait until done.
    Flush {
        /// The mountpoint.
        mountpoint: PathBuf,
    },
    /// Replay a file trace against a directory (a tierwise mount or any other) with N workers;
    /// beside the measurement, the same trace through the simulator.
    Replay(replay_cmd::ReplayArgs),
    /// Cancel the move in progress on a tierwise mount (it is rolled back; the policy may retry it).
    Cancel {
        /// The mountpoint.
        mountpoint: PathBuf,
    },
    /// List architectures, collectors, trace formats and device presets with their knobs.
    List {
        /// architectures, collectors, formats or devices (all when omitted).
        what: Option<String>,
    },
}

#[derive(Args, Clone)]
struct TraceOpts {
    /// Trace format (detected from the name or content when omitted); see `tierwise list formats`.
    #[arg(long)]
    format: Option<String>,
    /// Count and skip malformed lines instead of stopping at the first one.
    #[arg(long)]
    skip_bad_lines: bool,
}

impl TraceOpts {
    fn open(&self, path: &Path) -> Result<Trace> {
        Ok(open_trace(path, &OpenOptions { format: self.format.clone(), skip_bad_lines: self.skip_bad_lines })?)
    }
    fn options(&self) -> OpenOptions {
        OpenOptions { format: self.format.clone(), skip_bad_lines: self.skip_bad_lines }
    }
}

#[derive(Args, Clone)]
struct ModelOpts {
    /// How requests become objects: blocks[:SIZE[@ANCHOR]] (default 4KiB@auto: anchored at the dominant request offset), requests, lcs, lcs:ignore-size.
    #[arg(long, default_value = "blocks:4KiB")]
    objects: String,
    /// none (hit counting), open[:SPEEDUP] (trace timestamps), closed[:DEPTH], or auto: open
    /// for sim; for compare, a closed-loop throughput table and an open-loop latency table.
    #[arg(long, default_value = "auto")]
    timing: String,
    /// HDD preset.
    #[arg(long, default_value = "wd5000aaks")]
    hdd: String,
    /// SSD preset.
    #[arg(long, default_value = "vertex3")]
    ssd_model: String,
    /// RAM preset.
    #[arg(long, default_value = "ddr3")]
    ram: String,
    /// TOML file merged over the device presets.
    #[arg(long)]
    devices: Option<PathBuf>,
    /// The HDD's I/O scheduler: mq-deadline (a stock Linux host: sorted dispatch, merging,
    /// NCQ), none (merging, NCQ, arrival order) or fifo (the old model: one at a time).
    #[arg(long, default_value = "mq-deadline")]
    hdd_queue: String,
    /// Spin the HDD down after this idle time (the preset's 5 s when given without a value).
    #[arg(long, num_args = 0..=1, default_missing_value = "preset")]
    spin_down: Option<String>,
    /// Endurance read weight r (GreenDM: 0.1 or 0.01).
    #[arg(long, default_value_t = 0.1)]
    read_weight: f64,
    /// Write back all dirty data at the end.
    #[arg(long)]
    flush: bool,
    /// Stop after this many requests.
    #[arg(long)]
    max_requests: Option<u64>,
    /// Timed runs: stop admitting requests after this much simulated time (e.g. 6h).
    #[arg(long)]
    max_time: Option<String>,
    /// Check the engine's invariants every N requests (slow; for debugging).
    #[arg(long, default_value_t = 0)]
    check_every: u64,
}

impl ModelOpts {
    fn base(&self) -> Result<SimConfig> {
        let objects = ObjectMode::parse(&self.objects).map_err(anyhow::Error::msg).context("--objects")?;
        let timing_text = if self.timing == "auto" { "open" } else { self.timing.as_str() };
        let timing = Timing::parse(timing_text).map_err(anyhow::Error::msg).context("--timing")?;
        let presets = match &self.devices {
            Some(p) => {
                let text = fs::read_to_string(p).with_context(|| format!("--devices {}", p.display()))?;
                Presets::with_overrides(&text, &p.display().to_string())?
            }
            None => Presets::builtin(),
        };
        let devices = presets.set(&self.hdd, &self.ssd_model, &self.ram)?;
        let spin_down = match self.spin_down.as_deref() {
            None => None,
            Some("preset") => Some(Nanos::from_secs_f64(devices.hdd.spin_down_after_s)),
            Some(d) => Some(parse_duration(d).map_err(anyhow::Error::msg).context("--spin-down")?),
        };
        if !(self.read_weight >= 0.0 && self.read_weight <= 1.0) {
            bail!("--read-weight {}: expected a number from 0 to 1 (GreenDM used 0.1 and 0.01)", self.read_weight);
        }
        let mut c = SimConfig::new("hdd-only", 1);
        c.objects = objects;
        c.timing = timing;
        c.devices = devices;
        c.spin_down = spin_down;
        c.read_weight = self.read_weight;
        c.flush_at_end = self.flush;
        c.max_requests = self.max_requests;
        c.max_time = match &self.max_time {
            Some(t) => Some(parse_duration(t).map_err(anyhow::Error::msg).context("--max-time")?),
            None => None,
        };
        c.check_every = self.check_every;
        c.hdd_queue.scheduler = Scheduler::parse(&self.hdd_queue).map_err(anyhow::Error::msg).context("--hdd-queue")?;
        Ok(c)
    }
}

#[derive(Args)]
struct SimArgs {
    /// The trace file.
    trace: PathBuf,
    /// Architecture spec, e.g. cache:mode=write-back,collector=lfu (see `tierwise list`).
    #[arg(long, short)]
    arch: String,
    /// SSD size: bytes (64MiB) or a share of the footprint (10%).
    #[arg(long, allow_hyphen_values = true)]
    ssd: String,
    #[command(flatten)]
    trace_opts: TraceOpts,
    #[command(flatten)]
    model: ModelOpts,
    /// Write the report as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write the report as one CSV row (with header) here.
    #[arg(long)]
    csv: Option<PathBuf>,
    /// File traces: the RAM buffer cache in front of the tiers (Loris ran 64 MB; 0 = none).
    #[arg(long, default_value = "64MiB")]
    ram_cache: String,
    /// File traces: directories are not objects (no lookups or entry updates reach the engine).
    #[arg(long)]
    no_dirs: bool,
    /// File traces: where measuring starts, `auto` (after the setup phase of leading mkdir,
    /// create and write operations, as Filebench and Postmark report) or an operation index
    /// (0: everything). `tierwise replay` uses the same rule.
    #[arg(long, default_value = "auto")]
    measure_from: String,
}

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

#[derive(Args)]
struct CompareArgs {
    /// The trace file.
    trace: PathBuf,
    /// An architecture spec; repeat for several (default: baselines and the caching modes).
    #[arg(long = "arch", short)]
    archs: Vec<String>,
    /// SSD sizes, comma-separated: shares of the footprint (10%) or bytes (64MiB).
    #[arg(long, default_value = "5%,10%,25%,50%", value_delimiter = ',', allow_hyphen_values = true)]
    ssd: Vec<String>,
    #[command(flatten)]
    trace_opts: TraceOpts,
    #[command(flatten)]
    model: ModelOpts,
    /// Directory for compare.json, compare.csv and compare.png.
    #[arg(long, default_value = "out")]
    out: PathBuf,
    /// Worker threads (default: available cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Allow SSD sizes at least as large as the footprint.
    #[arg(long)]
    allow_oversize: bool,
}

#[derive(Args)]
struct ReproduceArgs {
    /// greendm, otf-ast, hca, loris or hycache.
    target: String,
    /// Fraction of the full experiment to run (request counts, run lengths; see docs/REPRODUCTION.md).
    #[arg(long, default_value_t = 1.0)]
    scale: f64,
    /// Directory for reproduce-TARGET.json, reproduce-TARGET.csv and the PNG charts.
    #[arg(long, default_value = "out")]
    out: PathBuf,
    /// Directory of the bundled traces (default: data/traces of this checkout).
    #[arg(long)]
    traces: Option<PathBuf>,
    /// Seed of the synthetic stand-ins.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Simulations at once (default: available cores).
    #[arg(long)]
    threads: Option<usize>,
}

#[derive(Args)]
struct MrcArgs {
    /// The trace file.
    trace: PathBuf,
    #[command(flatten)]
    trace_opts: TraceOpts,
    /// How requests become objects (see `sim --objects`).
    #[arg(long, default_value = "blocks:4KiB")]
    objects: String,
    /// Cache sizes, comma-separated (bytes or % of the footprint); default: --points sizes on a
    /// log scale from one object to the footprint.
    #[arg(long, value_delimiter = ',', allow_hyphen_values = true)]
    sizes: Vec<String>,
    /// Number of log-spaced sizes when --sizes is not given.
    #[arg(long, default_value_t = 64)]
    points: usize,
    /// Directory for mrc.csv, mrc.json and mrc.png.
    #[arg(long, default_value = "out")]
    out: PathBuf,
}

#[derive(Args)]
struct BenchArgs {
    /// Requests in the Zipf(1.0) oracleGeneral trace.
    #[arg(long, default_value_t = 10_000_000)]
    requests: u64,
    /// Distinct objects in it.
    #[arg(long, default_value_t = 1_000_000)]
    objects: u64,
    /// Lines of the generated MSR CSV.
    #[arg(long, default_value_t = 5_000_000)]
    csv_lines: u64,
    /// Directory for the generated workloads (kept for reuse).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// A libCacheSim `cachesim` binary to time on the same trace.
    #[arg(long)]
    cachesim: Option<PathBuf>,
    /// Repetitions per measurement (the best is kept; compared pairs run alternately).
    #[arg(long, default_value_t = 5)]
    repeat: usize,
    /// Also write the results as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Run only one part: `files` (file operations through the file-level architectures).
    #[arg(long)]
    only: Option<String>,
}

#[derive(Subcommand)]
enum TraceCommand {
    /// Generate a file-level workload (postmark, fileserver, webserver, webserver-zipf, mixed,
    /// randomread, oltp) as a file trace (CSV, see docs/FILE_TRACES.md).
    GenFiles {
        /// The workload.
        workload: String,
        /// Output file.
        #[arg(long, short)]
        output: PathBuf,
        /// Fraction of the papers' sizes (files, transactions, iterations).
        #[arg(long, default_value_t = 1.0)]
        scale: f64,
        /// Seed.
        #[arg(long, default_value_t = 42)]
        seed: u64,
        /// Length of the measured phase instead of the scaled default: transactions
        /// (postmark), flow iterations (fileserver, webserver*, mixed) or operations
        /// (randomread, oltp). The fileset keeps its scaled size.
        #[arg(long)]
        iterations: Option<u64>,
    },
    /// Requests, read share, footprint, size histogram, duration.
    Stat {
        /// The trace file.
        trace: PathBuf,
        #[command(flatten)]
        trace_opts: TraceOpts,
        /// Object mode for the footprint.
        #[arg(long, default_value = "blocks:4KiB")]
        objects: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Write a trace as libCacheSim oracleGeneral binary (one record per object access).
    Convert {
        /// The trace file.
        trace: PathBuf,
        /// Output file.
        #[arg(long, short)]
        output: PathBuf,
        #[command(flatten)]
        trace_opts: TraceOpts,
        /// Object mode: blocks[:SIZE] splits requests into blocks; requests keeps them whole.
        #[arg(long, default_value = "requests")]
        objects: String,
    },
    /// Generate a seeded Zipf block workload (oracleGeneral, or MQSim ascii with timestamps).
    Gen {
        /// Output file (`.oracleGeneral` or `.mqsim`).
        #[arg(long, short)]
        output: PathBuf,
        /// Requests.
        #[arg(long, default_value_t = 1_000_000)]
        requests: u64,
        /// Distinct objects.
        #[arg(long, default_value_t = 100_000)]
        objects: u64,
        /// Zipf exponent.
        #[arg(long, default_value_t = 1.0)]
        alpha: f64,
        /// Bytes per request.
        #[arg(long, default_value_t = 4096)]
        size: u64,
        /// Share of writes.
        #[arg(long, default_value_t = 0.0)]
        write_fraction: f64,
        /// Mean requests per second.
        #[arg(long, default_value_t = 100.0)]
        rate: f64,
        /// Seed.
        #[arg(long, default_value_t = 42)]
        seed: u64,
        /// Write a paper's synthetic stand-in instead (MQSim ascii): fiu-online, src1_0, src1_1,
        /// spc-financial, filebench-randread, filebench-oltp (the Filebench ones stop at --requests).
        #[arg(long)]
        standin: Option<String>,
        /// Scale of the stand-in (see docs/REPRODUCTION.md).
        #[arg(long, default_value_t = 1.0)]
        scale: f64,
    },
}

fn main() {
    // Installed as /sbin/mount.tierwise (a link to this binary), mount(8) runs us as a helper.
    let argv0 = std::env::args_os().next().unwrap_or_default();
    if Path::new(&argv0).file_name().is_some_and(|n| n == "mount.tierwise") {
        if let Err(e) = mount::mount_helper(std::env::args_os().skip(1).collect()) {
            eprintln!("mount.tierwise: {e:#}");
            std::process::exit(32); // mount(8)'s "mount failure"
        }
        return;
    }
    let cli = Cli::parse();
    if !matches!(cli.command, Command::Mount(_) | Command::Replay(_)) {
        quiet_broken_pipe();
    }
    if let Err(e) = run(cli) {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}

/// A report piped into `head` ends quietly, as `cat` would, instead of panicking in `println!`.
/// Not for the daemons (`mount`, and `replay`, which runs its workers against a mount): a
/// client that hangs up on the control socket must not kill them.
fn quiet_broken_pipe() {
    use nix::sys::signal::{SigHandler, Signal, signal};
    #[expect(unsafe_code, reason = "restoring SIGPIPE's default action; no handler runs")]
    // SAFETY: SigDfl installs no Rust handler, so no code runs in signal context.
    let _ = unsafe { signal(Signal::SIGPIPE, SigHandler::SigDfl) };
}

fn run(cli: Cli) -> Result<()> {
    let bars = Bars::new(cli.quiet);
    match cli.command {
        Command::Sim(a) => cmd_sim(a, &bars),
        Command::Compare(a) => cmd_compare(a, &bars),
        Command::Mrc(a) => cmd_mrc(a, &bars),
        Command::Trace(t) => cmd_trace(t, &bars),
        Command::Reproduce(a) => cmd_reproduce(a, &bars),
        Command::Bench(a) => cmd_bench(a),
        Command::Mount(a) => mount::cmd_mount(a),
        Command::Umount { mountpoint } => mount::cmd_umount(&mountpoint),
        Command::WhichTier { paths } => mount::cmd_which_tier(&paths),
        Command::Status { mountpoint } => mount::cmd_status(&mountpoint),
        Command::Stats { mountpoint, json } => mount::cmd_stats(&mountpoint, json),
        Command::Pin { tier, paths } => mount::cmd_pin(&paths, &tier),
        Command::Unpin { paths } => mount::cmd_pin(&paths, "none"),
        Command::Flush { mountpoint } => mount::cmd_flush(&mountpoint, &bars),
        Command::Cancel { mountpoint } => mount::cmd_cancel(&mountpoint),
        Command::Replay(a) => replay_cmd::cmd_replay(a, &bars),
        Command::List { what } => cmd_list(what.as_deref()),
    }
}

fn write_file(path: &Path, content: &[u8]) -> Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    fs::write(path, content).with_context(|| format!("writing {}", path.display()))
}

fn cmd_sim(a: SimArgs, bars: &Bars) -> Result<()> {
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
fn cmd_sim_files(a: SimArgs, bars: &Bars) -> Result<()> {
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

fn cmd_compare(a: CompareArgs, bars: &Bars) -> Result<()> {
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

/// Outstanding requests of the main job's throughput table (a SATA disk's NCQ depth).
const CLOSED_DEPTH: u32 = 32;

fn write_comparison(c: &tierwise_sim::compare::Comparison, out: &Path, stem: &str) -> Result<()> {
    let (json, csv, png) =
        (out.join(format!("{stem}.json")), out.join(format!("{stem}.csv")), out.join(format!("{stem}.png")));
    write_file(&json, serde_json::to_string_pretty(c)?.as_bytes())?;
    write_file(&csv, report::comparison_csv(c).as_bytes())?;
    plot::comparison_chart(c, &png).map_err(anyhow::Error::msg)?;
    println!("wrote {}, {}, {}", json.display(), csv.display(), png.display());
    Ok(())
}

fn cmd_mrc(a: MrcArgs, bars: &Bars) -> Result<()> {
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

fn cmd_trace(t: TraceCommand, bars: &Bars) -> Result<()> {
    match t {
        TraceCommand::GenFiles { workload, output, scale, seed, iterations } => {
            gen_files(&workload, scale, seed, iterations, &output)
        }
        TraceCommand::Stat { trace, trace_opts, objects, json } => {
            let mode = ObjectMode::parse(&objects).map_err(anyhow::Error::msg).context("--objects")?;
            let (mode, anchor_note) = tierwise_sim::alignment::resolve_anchor_of(&trace, &trace_opts.options(), mode)?;
            let mut tr = trace_opts.open(&trace)?;
            let mut spinner = Spinner::new(bars, "reading");
            let s = tierwise_sim::stat::trace_stats(&mut tr, mode, &mut spinner)?;
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
            if let Some(note) = anchor_note {
                println!("note: {note}");
            }
            Ok(())
        }
        TraceCommand::Convert { trace, output, trace_opts, objects } => {
            let mode = ObjectMode::parse(&objects).map_err(anyhow::Error::msg).context("--objects")?;
            let mut tr = trace_opts.open(&trace)?;
            let mapper = Mapper::new(mode, tr.info().object_trace);
            let recs = collect_objects(&mut tr, &mapper)?;
            let f = fs::File::create(&output).with_context(|| format!("creating {}", output.display()))?;
            let mut w = BufWriter::new(f);
            write_oracle_general(&recs, &mut w)?;
            w.flush()?;
            println!("wrote {} oracleGeneral records ({}) to {}", recs.len(), mapper.mode().label(), output.display());
            Ok(())
        }
        TraceCommand::Gen { output, requests, objects, alpha, size, write_fraction, rate, seed, standin, scale } => {
            if let Some(name) = standin {
                return write_standin(&name, scale, seed, requests, &output);
            }
            if objects == 0 || size == 0 || !(0.0..=1.0).contains(&write_fraction) || alpha < 0.0 {
                bail!("--objects and --size must be positive, --write-fraction within 0..=1, --alpha >= 0");
            }
            let w = ZipfWorkload { requests, objects, alpha, size, write_fraction, rate, seed };
            let f = fs::File::create(&output).with_context(|| format!("creating {}", output.display()))?;
            let mut out = BufWriter::new(f);
            let name = output.to_string_lossy().to_lowercase();
            if name.contains("mqsim") {
                let mut err = None;
                w.generate(|r| {
                    let ty = u8::from(r.op == tierwise_sim::trace::IoOp::Read);
                    if let Err(e) = writeln!(out, "{} 0 {} {} {}", r.time_ns, r.offset / 512, r.len.div_ceil(512), ty) {
                        err.get_or_insert(e);
                    }
                });
                if let Some(e) = err {
                    return Err(e.into());
                }
            } else {
                let mut recs = Vec::with_capacity(requests as usize);
                w.generate(|r| {
                    recs.push(((r.time_ns / 1_000_000_000) as u32, r.key, size.min(u64::from(u32::MAX)) as u32))
                });
                write_oracle_general(&recs, &mut out)?;
            }
            out.flush()?;
            println!(
                "wrote {requests} requests over {objects} objects (Zipf {alpha}, seed {seed}) to {}",
                output.display()
            );
            Ok(())
        }
    }
}

/// Writes a file workload as a file trace and prints what it holds.
fn gen_files(name: &str, scale: f64, seed: u64, iterations: Option<u64>, output: &Path) -> Result<()> {
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
fn write_standin(name: &str, scale: f64, seed: u64, limit: u64, output: &Path) -> Result<()> {
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

fn cmd_bench(a: BenchArgs) -> Result<()> {
    let mut o = tierwise_bench::BenchOpts {
        requests: a.requests,
        objects: a.objects,
        csv_lines: a.csv_lines,
        cachesim: a.cachesim,
        repeat: a.repeat,
        only: a.only,
        ..Default::default()
    };
    if let Some(d) = a.dir {
        o.dir = d;
    }
    if o.objects == 0 || o.requests == 0 || o.csv_lines == 0 {
        bail!("--requests, --objects and --csv-lines must be positive");
    }
    let repo = repo_root();
    let results = tierwise_bench::run(&o, &repo, &mut |s| eprintln!("bench: {s}")).map_err(anyhow::Error::msg)?;
    print!("{}", tierwise_bench::render(&results));
    if let Some(p) = a.json {
        write_file(&p, serde_json::to_string_pretty(&results)?.as_bytes())?;
    }
    Ok(())
}

/// The repository root (for the bundled traces): the current directory if it has `data/traces`,
/// else the source tree this binary was built from.
fn cmd_reproduce(a: ReproduceArgs, bars: &Bars) -> Result<()> {
    use tierwise_sim::reproduce::{ReproOptions, TARGETS, reproduce};
    if !TARGETS.iter().any(|(t, _)| *t == a.target) {
        let known: Vec<String> = TARGETS.iter().map(|(t, h)| format!("  {t:<8} {h}")).collect();
        bail!("unknown reproduction target `{}`; expected one of:\n{}", a.target, known.join("\n"));
    }
    let traces_dir = a.traces.clone().unwrap_or_else(|| repo_root().join("data/traces"));
    let threads = a.threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
    let opts = ReproOptions { scale: a.scale, traces_dir, seed: a.seed, threads };
    let bar = bars.counter(&format!("reproduce {}", a.target));
    let progress = |label: &str, done: usize, total: usize| bar.step(label, done, total);
    let r = reproduce(&a.target, &opts, &progress)?;
    bar.done();
    print!("{}", r.to_text());
    let files = r.write(&a.out).map_err(anyhow::Error::msg)?;
    println!("\nwrote {}", files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>().join(", "));
    Ok(())
}

fn repo_root() -> PathBuf {
    let cwd = std::env::current_dir().unwrap_or_default();
    if cwd.join("data/traces").is_dir() {
        return cwd;
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn cmd_list(what: Option<&str>) -> Result<()> {
    let all = what.is_none();
    let w = what.unwrap_or("");
    let known = ["architectures", "collectors", "formats", "devices"];
    if !all && !known.iter().any(|k| k.starts_with(w)) {
        bail!("unknown list `{w}`: expected one of {}", known.join(", "));
    }
    if all || "architectures".starts_with(w) {
        println!("Architectures (--arch NAME[:knob=value,...]):");
        for a in ARCHITECTURES {
            println!("  {:<18} v{}  {}", a.name, a.version, a.help);
            println!("      {:<21} {}", "capabilities", a.caps.describe());
            for p in a.params.iter().chain(a.extra_params) {
                println!("      {:<21} default {:<14} {}", p.name, p.default, p.help);
            }
            if a.uses_collector && !a.params.iter().chain(a.extra_params).any(|p| p.name == "collector") {
                println!(
                    "      {:<21} default {:<14} any collector below, with its knobs",
                    "collector", a.default_collector
                );
            }
        }
        println!();
    }
    if all || "collectors".starts_with(w) {
        println!("Collectors (collector=NAME inside an architecture spec):");
        for c in COLLECTORS {
            println!("  {:<16} v{}  {}", c.name, c.version, c.help);
            for p in c.params {
                println!("      {:<21} default {:<14} {}", p.name, p.default, p.help);
            }
        }
        println!();
    }
    if all || "formats".starts_with(w) {
        println!("Trace formats (--format NAME; gzip and zstd are read transparently):");
        for f in FORMATS {
            println!("  {:<16} {}", f.name, f.help);
        }
        println!();
    }
    if all || "devices".starts_with(w) {
        let p = Presets::builtin();
        println!("Device presets (--hdd, --ssd-model, --ram; override with --devices FILE.toml):");
        for (n, d) in &p.hdd {
            println!("  hdd {:<12} {}", n, d.description);
        }
        for (n, d) in &p.ssd {
            println!("  ssd {:<12} {}", n, d.description);
        }
        for (n, d) in &p.ram {
            println!("  ram {:<12} {}", n, d.description);
        }
    }
    Ok(())
}

/// The request-offset histogram of `trace stat`: the most frequent offsets modulo the block
/// size, with their share.
fn print_alignment(a: &tierwise_sim::alignment::Alignment) {
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
