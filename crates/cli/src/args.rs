//! The command line: every command's arguments (clap derive), and the options several commands share.

use std::path::{Path, PathBuf};

use anyhow::Result;
use clap::{Args, Parser, Subcommand};
use tierwise_sim::jobs::{ModelOptions, TraceOptions};
use tierwise_sim::trace::{Trace, open_trace};

/// Hybrid SSD/HDD storage: one policy engine; compare architectures on real traces.
#[derive(Parser)]
#[command(name = "tierwise", version = build_version(), about, long_about = None)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
    /// No progress bars.
    #[arg(long, short, global = true)]
    pub(crate) quiet: bool,
}

#[derive(Subcommand)]
pub(crate) enum Command {
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
    /// One self-contained HTML report (inline SVG charts, CSV downloads) from result files.
    Report(crate::cmd::workbench::ReportArgs),
    /// Run a sweep file (traces × architectures × sizes × knobs) on Dask or local processes;
    /// needs the Python package (pip install './python[dask]').
    Sweep(crate::cmd::workbench::SweepArgs),
    /// Measure the speed and memory targets (generates seeded workloads once, then reuses them).
    Bench(BenchArgs),
    /// Measure a disk or a file under direct I/O (random 4 KiB reads and writes at queue
    /// depths 1, 4 and 32, sequential rates, read time by seek distance, the write cache) and
    /// write a device preset fitted to it, with the fitted model beside every measurement.
    Calibrate(crate::cmd::calibrate::CalibrateArgs),
    /// Mount a hybrid file system (FUSE) over an SSD directory and an HDD directory.
    #[command(after_long_help = crate::mount::LONG_HELP)]
    Mount(crate::mount::MountArgs),
    /// Serve a hybrid block device over NBD (nbdkit) from an SSD image and an HDD image.
    Serve(crate::cmd::serve::ServeArgs),
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
        /// Seconds to wait for the daemon to exit after the unmount (it saves its state first).
        #[arg(long, default_value_t = 60.0)]
        wait: f64,
    },
    /// A tierwise mount's configuration, space, queue and move in progress.
    Status {
        /// The mountpoint.
        mountpoint: PathBuf,
        /// Seconds to wait for the mount or device to answer.
        #[arg(long, default_value_t = 5.0)]
        timeout: f64,
    },
    /// A tierwise mount's counters: hits and misses per tier, moves, bytes moved, dirty bytes.
    Stats {
        /// The mountpoint.
        mountpoint: PathBuf,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// Seconds to wait for the mount or device to answer.
        #[arg(long, default_value_t = 5.0)]
        timeout: f64,
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
    Replay(crate::cmd::replay::ReplayArgs),
    /// Cancel the move in progress on a tierwise mount (it is rolled back; the policy may retry it).
    Cancel {
        /// The mountpoint.
        mountpoint: PathBuf,
    },
    /// List architectures, collectors, trace formats and device presets with their knobs.
    List {
        /// architectures, collectors, formats or devices (all when omitted).
        what: Option<String>,
        /// Print JSON (the registries as data: names, aliases, knobs, libCacheSim references).
        #[arg(long, conflicts_with = "markdown")]
        json: bool,
        /// Print the collectors as the Markdown table of docs/COLLECTORS.md.
        #[arg(long)]
        markdown: bool,
    },
}

#[derive(Args, Clone)]
pub(crate) struct TraceOpts {
    /// Trace format (detected from the name or content when omitted); see `tierwise list formats`.
    #[arg(long)]
    pub(crate) format: Option<String>,
    /// Count and skip malformed lines instead of stopping at the first one.
    #[arg(long)]
    pub(crate) skip_bad_lines: bool,
}

impl TraceOpts {
    pub(crate) fn open(&self, path: &Path) -> Result<Trace> {
        Ok(open_trace(path, &self.job_options().open_options())?)
    }
}

#[derive(Args, Clone)]
pub(crate) struct ModelOpts {
    /// How requests become objects: blocks[:SIZE[@ANCHOR]] (default 4KiB@auto: anchored at the dominant request offset), requests, lcs, lcs:ignore-size.
    #[arg(long, default_value = "blocks:4KiB")]
    pub(crate) objects: String,
    /// none (hit counting), open[:SPEEDUP] (trace timestamps), closed[:DEPTH], or auto: open
    /// for sim; for compare, a closed-loop throughput table and an open-loop latency table.
    #[arg(long, default_value = "auto")]
    pub(crate) timing: String,
    /// HDD preset, fields changed after a colon: wd5000aaks:write_cache=off,inner_rate_ratio=1.
    #[arg(long, default_value = "wd5000aaks")]
    pub(crate) hdd: String,
    /// SSD preset, fields changed after a colon: vertex3:gc=fresh,nand_capacity=300GiB.
    #[arg(long, default_value = "vertex3")]
    pub(crate) ssd_model: String,
    /// RAM preset.
    #[arg(long, default_value = "ddr3")]
    pub(crate) ram: String,
    /// TOML file merged over the device presets.
    #[arg(long)]
    pub(crate) devices: Option<PathBuf>,
    /// The HDD's I/O scheduler: mq-deadline (a stock Linux host: sorted dispatch, merging,
    /// NCQ), none (merging, NCQ, arrival order) or fifo (the old model: one at a time), with
    /// the kernel's knobs after a colon: mq-deadline:fifo_batch=16,writes_starved=2,
    /// read_expire=500,write_expire=5000 (ms),max_sectors_kb=1280 (these are the defaults).
    #[arg(long, default_value = "mq-deadline")]
    pub(crate) hdd_queue: String,
    /// Spin the HDD down after this idle time (the preset's 5 s when given without a value).
    #[arg(long, num_args = 0..=1, default_missing_value = "preset")]
    pub(crate) spin_down: Option<String>,
    /// Endurance read weight r (GreenDM: 0.1 or 0.01).
    #[arg(long, default_value_t = 0.1)]
    pub(crate) read_weight: f64,
    /// Write back all dirty data at the end.
    #[arg(long)]
    pub(crate) flush: bool,
    /// Stop after this many requests.
    #[arg(long)]
    pub(crate) max_requests: Option<u64>,
    /// Timed runs: stop admitting requests after this much simulated time (e.g. 6h).
    #[arg(long)]
    pub(crate) max_time: Option<String>,
    /// Check the engine's invariants every N requests (slow; for debugging).
    #[arg(long, default_value_t = 0)]
    pub(crate) check_every: u64,
    /// Predict a direct-I/O stack (O_DIRECT on a 4 KiB-sector drive, `serve --direct`): both
    /// devices see each request rounded out to units of this size, and a write covering a unit
    /// only partly reads it first. 0: requests as given.
    #[arg(long, default_value = "0")]
    pub(crate) io_align: String,
}

impl ModelOpts {
    /// The same options as a job's.
    pub(crate) fn options(&self) -> ModelOptions {
        ModelOptions {
            objects: self.objects.clone(),
            timing: self.timing.clone(),
            hdd: self.hdd.clone(),
            ssd_model: self.ssd_model.clone(),
            ram: self.ram.clone(),
            devices: self.devices.clone(),
            hdd_queue: self.hdd_queue.clone(),
            spin_down: self.spin_down.clone(),
            read_weight: self.read_weight,
            flush: self.flush,
            max_requests: self.max_requests,
            max_time: self.max_time.clone(),
            check_every: self.check_every,
            io_align: self.io_align.clone(),
        }
    }
}

impl TraceOpts {
    /// The same options as a job's.
    pub(crate) fn job_options(&self) -> TraceOptions {
        TraceOptions { format: self.format.clone(), skip_bad_lines: self.skip_bad_lines }
    }
}

#[derive(Args)]
pub(crate) struct SimArgs {
    /// The trace file.
    pub(crate) trace: PathBuf,
    /// Architecture spec, e.g. cache:mode=write-back,collector=lfu (see `tierwise list`).
    #[arg(long, short)]
    pub(crate) arch: String,
    /// SSD size: bytes (64MiB) or a share of the footprint (10%).
    #[arg(long, allow_hyphen_values = true)]
    pub(crate) ssd: String,
    #[command(flatten)]
    pub(crate) trace_opts: TraceOpts,
    #[command(flatten)]
    pub(crate) model: ModelOpts,
    /// Write the report as JSON here.
    #[arg(long)]
    pub(crate) json: Option<PathBuf>,
    /// Write the report as one CSV row (with header) here.
    #[arg(long)]
    pub(crate) csv: Option<PathBuf>,
    /// File traces: the RAM buffer cache in front of the tiers (Loris ran 64 MB; 0 = none).
    #[arg(long, default_value = "64MiB")]
    pub(crate) ram_cache: String,
    /// File traces: directories are not objects (no lookups or entry updates reach the engine).
    #[arg(long)]
    pub(crate) no_dirs: bool,
    /// Where measuring starts; what comes before warms the cache up and is not counted. File
    /// traces: `auto` (after the setup phase of leading mkdir, create and write operations, as
    /// Filebench and Postmark report) or an operation index (0: everything); `tierwise replay`
    /// uses the same rule. Block traces: `auto` (everything), a request index or a share of the
    /// requests (`20%`).
    #[arg(long, default_value = "auto")]
    pub(crate) measure_from: String,
}

#[derive(Args)]
pub(crate) struct CompareArgs {
    /// The trace file.
    pub(crate) trace: PathBuf,
    /// An architecture spec; repeat for several (default: baselines and the caching modes).
    #[arg(long = "arch", short)]
    pub(crate) archs: Vec<String>,
    /// SSD sizes, comma-separated: shares of the footprint (10%) or bytes (64MiB).
    #[arg(long, default_value = "5%,10%,25%,50%", value_delimiter = ',', allow_hyphen_values = true)]
    pub(crate) ssd: Vec<String>,
    #[command(flatten)]
    pub(crate) trace_opts: TraceOpts,
    #[command(flatten)]
    pub(crate) model: ModelOpts,
    /// Directory for compare.json, compare.csv and compare.png.
    #[arg(long, default_value = "out")]
    pub(crate) out: PathBuf,
    /// Worker threads (default: available cores).
    #[arg(long)]
    pub(crate) threads: Option<usize>,
    /// Allow SSD sizes at least as large as the footprint.
    #[arg(long)]
    pub(crate) allow_oversize: bool,
}

#[derive(Args)]
pub(crate) struct ReproduceArgs {
    /// greendm, otf-ast, hca, loris or hycache.
    pub(crate) target: String,
    /// Fraction of the full experiment to run (request counts, run lengths; see docs/REPRODUCTION.md).
    #[arg(long, default_value_t = 1.0)]
    pub(crate) scale: f64,
    /// Directory for reproduce-TARGET.json, reproduce-TARGET.csv and the PNG charts.
    #[arg(long, default_value = "out")]
    pub(crate) out: PathBuf,
    /// Directory of the bundled traces (default: data/traces of this checkout).
    #[arg(long)]
    pub(crate) traces: Option<PathBuf>,
    /// Seed of the synthetic stand-ins.
    #[arg(long, default_value_t = 42)]
    pub(crate) seed: u64,
    /// Simulations at once (default: available cores).
    #[arg(long)]
    pub(crate) threads: Option<usize>,
}

#[derive(Args)]
pub(crate) struct MrcArgs {
    /// The trace file.
    pub(crate) trace: PathBuf,
    #[command(flatten)]
    pub(crate) trace_opts: TraceOpts,
    /// How requests become objects (see `sim --objects`).
    #[arg(long, default_value = "blocks:4KiB")]
    pub(crate) objects: String,
    /// Cache sizes, comma-separated (bytes or % of the footprint); default: --points sizes on a
    /// log scale from one object to the footprint.
    #[arg(long, value_delimiter = ',', allow_hyphen_values = true)]
    pub(crate) sizes: Vec<String>,
    /// Number of log-spaced sizes when --sizes is not given.
    #[arg(long, default_value_t = 64)]
    pub(crate) points: usize,
    /// The collector whose curve it is (`tierwise list collectors`; knobs as in specs, e.g.
    /// `arc`, `lfu`, `clock`): LRU in one pass, the others one simulation per size.
    #[arg(long, default_value = "lru")]
    pub(crate) collector: String,
    /// SHARDS spatial sampling: the share of objects kept (0.01 = 1 %); 1 = exact.
    #[arg(long, default_value_t = 1.0)]
    pub(crate) sample: f64,
    /// Seed of the sample.
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    /// With --sample: also compute the exact curve and print the sample's error against it.
    #[arg(long)]
    pub(crate) exact_error: bool,
    /// Threads for the per-size simulations (0: every core).
    #[arg(long, default_value_t = 0)]
    pub(crate) threads: usize,
    /// Also compute Belady's MIN (the offline optimum for objects of one size) at the same
    /// sizes on the same accesses, and draw it under the curve.
    #[arg(long)]
    pub(crate) belady: bool,
    /// Directory for mrc.csv, mrc.json and mrc.png.
    #[arg(long, default_value = "out")]
    pub(crate) out: PathBuf,
}

#[derive(Args)]
pub(crate) struct BenchArgs {
    /// Requests in the Zipf(1.0) oracleGeneral trace.
    #[arg(long, default_value_t = 10_000_000)]
    pub(crate) requests: u64,
    /// Distinct objects in it.
    #[arg(long, default_value_t = 1_000_000)]
    pub(crate) objects: u64,
    /// Lines of the generated MSR CSV.
    #[arg(long, default_value_t = 5_000_000)]
    pub(crate) csv_lines: u64,
    /// Directory for the generated workloads (kept for reuse).
    #[arg(long)]
    pub(crate) dir: Option<PathBuf>,
    /// A libCacheSim `cachesim` binary to time on the same trace.
    #[arg(long)]
    pub(crate) cachesim: Option<PathBuf>,
    /// Repetitions per measurement (the best is kept; compared pairs run alternately).
    #[arg(long, default_value_t = 5)]
    pub(crate) repeat: usize,
    /// Also write the results as JSON here.
    #[arg(long)]
    pub(crate) json: Option<PathBuf>,
    /// Run only one part: `files` (file operations through the file-level architectures).
    #[arg(long)]
    pub(crate) only: Option<String>,
}

#[derive(Subcommand)]
pub(crate) enum TraceCommand {
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
        /// Only the one-pass statistics: no popularity, reuse distances, op × size mix or
        /// per-volume breakdown (those read the trace twice more).
        #[arg(long)]
        brief: bool,
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
    /// Merge block traces into one multi-tenant trace (SPC format): each source one volume,
    /// requests interleaved by time, each source's clock starting at 0.
    Merge {
        /// The source traces (block traces with timestamps).
        #[arg(required = true, num_args = 1..)]
        traces: Vec<PathBuf>,
        /// Output file (SPC: `ASU,LBA,Size,Opcode,Timestamp`).
        #[arg(long, short)]
        output: PathBuf,
        /// Volume numbers of the sources, comma-separated (default 0, 1, 2, ...).
        #[arg(long, value_delimiter = ',')]
        volumes: Vec<u32>,
        /// Take the first N requests of each source (default: all).
        #[arg(long)]
        head: Option<u64>,
        #[command(flatten)]
        trace_opts: TraceOpts,
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

/// `tierwise --version`: the version and the build (sources hash, commit) results record.
fn build_version() -> &'static str {
    static VERSION: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    VERSION.get_or_init(tierwise_build_info::describe)
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use tierwise_sim::jobs::{CompareJob, ModelOptions, MrcJob, SimJob, TraceOptions};

    use super::*;

    fn parse(args: &[&str]) -> Command {
        match Cli::try_parse_from(args) {
            Ok(c) => c.command,
            Err(e) => panic!("{args:?}: {e}"),
        }
    }

    /// The flags' defaults are written twice (clap attributes here, serde defaults in
    /// `tierwise_sim::jobs` for Python and sweeps): they must agree.
    #[test]
    fn flag_defaults_are_the_jobs_defaults() {
        let Command::Sim(a) = parse(&["tierwise", "sim", "t.csv", "--arch", "cache", "--ssd", "10%"]) else {
            panic!("not sim")
        };
        assert_eq!(a.model.options(), ModelOptions::default());
        assert_eq!(a.trace_opts.job_options(), TraceOptions::default());
        let job: SimJob = serde_json::from_str(r#"{"trace": "t.csv", "arch": "cache", "ssd": "10%"}"#).expect("job");
        assert_eq!((a.ram_cache, a.measure_from, a.no_dirs), (job.ram_cache, job.measure_from, job.no_dirs));
        let Command::Compare(c) = parse(&["tierwise", "compare", "t.csv"]) else { panic!("not compare") };
        let job: CompareJob = serde_json::from_str(r#"{"trace": "t.csv"}"#).expect("job");
        assert_eq!((c.ssd, c.archs, c.allow_oversize), (job.ssd, job.archs, job.allow_oversize));
        let Command::Mrc(m) = parse(&["tierwise", "mrc", "t.csv"]) else { panic!("not mrc") };
        let job: MrcJob = serde_json::from_str(r#"{"trace": "t.csv"}"#).expect("job");
        assert_eq!((m.objects, m.points, m.sizes), (job.objects, job.points, job.sizes));
    }
}
