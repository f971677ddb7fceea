//! Loris (hybrid framework, §V): every file-level architecture × {Postmark, FileBench fileserver,
//! webserver, webserver with Zipf and shifting locality} × SSD = 25/50/75 % of the working set,
//! plus the mixed fileserver + webserver workload with the type-aware policy (figures 2–14).
//!
//! As in the paper: a RAM data cache in front (64 MB at full scale, scaled with the workload so
//! the working set stays an order of magnitude larger), directories are objects, the working set
//! is the disk-only footprint, Postmark reports the transaction time without its preallocation
//! and FileBench the operations per second of its flows without fileset creation. The interval
//! architectures' periods (5 s and 80 s) are scaled with the workload, so that they fire as
//! often relative to the run as in the paper's half-hour runs.

use super::files::{FileJob, FileLoad, run_file_jobs};
use super::{Chart, Finding, ReproError, ReproOptions, ReproTable, Reproduction, RunRecord, find, num};
use crate::filesim::FileSimConfig;
use crate::filetrace::generate::FileWorkload;
use crate::metrics::SimReport;
use crate::sim::Timing;

const SIZES: [f64; 3] = [0.25, 0.50, 0.75];
const HDD: &str = "HDD-only";
const SSD: &str = "SSD-only";
const DYN_HOT: &str = "Dynamic Hot-DST";
const INT5: &str = "Interval Hot-DST (5 s)";
const INT80: &str = "Interval Hot-DST (80 s)";
const PLAIN_COLD: &str = "Plain Cold-DST";
const DYN_COLD: &str = "Dynamic Cold-DST";
const ON_DEMAND: &str = "On-demand Caching";
const INT_CACHE: &str = "Interval Caching (80 s)";
const TYPE_AWARE: &str = "Type-aware (web: on-demand caching, files: Dynamic Hot-DST)";

/// The four single workloads and the mixed one.
const POSTMARK: &str = "Postmark (mail server)";
const FILESERVER: &str = "FileBench fileserver";
const WEBSERVER: &str = "FileBench webserver";
const WEBZIPF: &str = "FileBench webserver, Zipf + shifting locality";
const MIXED: &str = "Mixed fileserver + webserver + dummy fileset";

/// Architectures run on every single workload: label and spec (intervals in ms at `scale`).
fn architectures(scale: f64) -> Vec<(&'static str, String)> {
    let ms = |s: f64| format!("{}ms", (s * 1000.0 * scale).round().max(1.0));
    vec![
        (DYN_HOT, "dynamic-hot-dst".into()),
        (INT5, format!("interval-hot-dst:interval={}", ms(5.0))),
        (INT80, format!("interval-hot-dst:interval={}", ms(80.0))),
        (PLAIN_COLD, "plain-cold-dst".into()),
        (DYN_COLD, "dynamic-cold-dst".into()),
        ("Dynamic Cold-DST + cleaner", "dynamic-cold-dst-cleaner".into()),
        (ON_DEMAND, "on-demand-caching".into()),
        (INT_CACHE, format!("interval-caching:interval={}", ms(80.0))),
        ("Read-only caching (beyond Loris)", "file-read-only-cache".into()),
        ("Write-through-all caching (beyond Loris)", "file-write-through-all".into()),
        ("Write-back caching (beyond Loris)", "file-write-back".into()),
        ("HyCache (LRU, 90 %)", "hycache".into()),
    ]
}

fn mixed_architectures() -> Vec<(&'static str, String)> {
    vec![
        (TYPE_AWARE, "type-aware:volumes=/web=on-demand-caching;/files=dynamic-hot-dst,default=dynamic-hot-dst".into()),
        (ON_DEMAND, "on-demand-caching".into()),
        (DYN_HOT, "dynamic-hot-dst".into()),
        (DYN_COLD, "dynamic-cold-dst".into()),
    ]
}

fn size_label(label: &str, f: f64) -> String {
    format!("{label} @ {:.0}%", f * 100.0)
}

/// Higher is better: operations per second, or for Postmark the inverse transaction time.
fn speed(load: &str, r: &SimReport) -> f64 {
    if load == POSTMARK { if r.duration_s > 0.0 { 1.0 / r.duration_s } else { 0.0 } } else { r.iops }
}

/// The figure a table shows: transaction time (s) for Postmark, IOPS otherwise.
fn metric(load: &str, r: &SimReport) -> f64 {
    if load == POSTMARK { r.duration_s } else { r.iops }
}

pub(super) fn run(
    opts: &ReproOptions,
    progress: &(dyn Fn(&str, usize, usize) + Sync),
) -> Result<Reproduction, ReproError> {
    let scale = opts.scale;
    let by = |name: &str| {
        FileWorkload::by_name(name, scale).ok_or_else(|| ReproError::Options(format!("no workload {name}")))
    };
    let loads = vec![
        FileLoad::new(
            POSTMARK,
            &by("postmark")?,
            opts.seed,
            format!(
                "Postmark as the paper configured it (40,000 files in 10 subdirectories, 4-28 KB, 80,000 \
                 transactions, 4 KB I/O) x {scale}"
            ),
        ),
        FileLoad::new(
            FILESERVER,
            &by("fileserver")?,
            opts.seed,
            format!("10,000 files, width 20, median 128 KB, 1 MB I/O, create/write/append/read/delete/stat x {scale}"),
        ),
        FileLoad::new(
            WEBSERVER,
            &by("webserver")?,
            opts.seed,
            format!("25,000 files, median 32 KB, 10 whole-file reads + a 16 KB log append x {scale}"),
        ),
        FileLoad::new(
            WEBZIPF,
            &by("webserver-zipf")?,
            opts.seed,
            format!("two filesets of 25,000 files, Zipf(0.9) reads over the first, then the second x {scale}"),
        ),
        FileLoad::new(
            MIXED,
            &by("mixed")?,
            opts.seed,
            format!("fileserver under /files + webserver under /web interleaved, dummy fileset under /dummy x {scale}"),
        ),
    ];
    let ram = ((64u64 << 20) as f64 * scale) as u64;
    let ram = ram.max(256 << 10);
    let mut jobs = Vec::new();
    for (li, load) in loads.iter().enumerate() {
        let depth = if load.name == POSTMARK { 1 } else { 8 };
        let cfg = |spec: &str, ssd: u64| FileSimConfig {
            ram_bytes: ram,
            timing: Timing::Closed { depth },
            measure_from: load.measure_from,
            footprint_bytes: Some(load.working_set),
            ..FileSimConfig::new(spec, ssd.max(64 << 10))
        };
        for (label, spec) in [(HDD, "hdd-only"), (SSD, "ssd-only")] {
            jobs.push(FileJob { load: li, label: label.into(), cfg: cfg(spec, load.working_set), ssd_fraction: 0.0 });
        }
        let archs = if load.name == MIXED { mixed_architectures() } else { architectures(scale) };
        for (label, spec) in archs {
            for f in SIZES {
                let ssd = (load.working_set as f64 * f) as u64;
                jobs.push(FileJob { load: li, label: size_label(label, f), cfg: cfg(&spec, ssd), ssd_fraction: f });
            }
        }
    }
    let runs = run_file_jobs(&loads, &jobs, opts.threads, progress)?;
    let mut out = Reproduction::new(
        "loris",
        "Loris hybrid framework (file-level DST and caching, §V figures 2-14)",
        scale,
        &[],
        vec![
            format!(
                "a {} RAM data cache sits in front of every configuration (the paper's 64 MB, scaled with the \
                 workload); directories are objects",
                tierwise_core::Bytes(ram)
            ),
            format!(
                "interval periods are scaled with the workload: {} and {} stand for the paper's 5 s and 80 s",
                architectures(scale)[1].1,
                architectures(scale)[2].1
            ),
            "closed loop: Postmark with one operation outstanding (one process), FileBench flows with 8".into(),
            "the paper's figures are bar charts without printed values: the findings are compared, not numbers".into(),
        ],
    );
    out.workloads = loads.iter().map(|l| l.note.clone()).collect();
    tables(&mut out, &loads, &runs, scale);
    findings(&mut out, &runs, scale);
    out.runs = runs;
    Ok(out)
}

fn get<'a>(runs: &'a [RunRecord], load: &str, label: &str, f: Option<f64>) -> Option<&'a SimReport> {
    match f {
        Some(f) => find(runs, load, &size_label(label, f)),
        None => find(runs, load, label),
    }
}

fn tables(out: &mut Reproduction, loads: &[FileLoad], runs: &[RunRecord], scale: f64) {
    let figures = [
        (POSTMARK, "postmark", "Figures 2, 6, 10", "transaction time, s (lower is better)"),
        (FILESERVER, "fileserver", "Figures 3, 7, 11", "operations/s (higher is better)"),
        (WEBSERVER, "webserver", "Figures 4, 8, 12", "operations/s"),
        (WEBZIPF, "webserver-zipf", "Figures 5, 9, 13", "operations/s"),
        (MIXED, "mixed", "Figure 14", "operations/s"),
    ];
    for (load, slug, figs, what) in figures {
        if !loads.iter().any(|l| l.name == load) {
            continue;
        }
        let mut t = ReproTable::new(
            &format!("{load}: {what} ({figs})"),
            &["architecture", "SSD 25%", "SSD 50%", "SSD 75%", "SSD share of data ops @50%", "moved up/down @50%"],
            match load {
                POSTMARK => {
                    "Fig. 2/10: Dynamic Hot-DST well ahead of interval Hot-DST (append-reads); interval 80 s only 12 % \
                     faster than HDD-only at 75 %; caching slower than DST (write-through of appends)"
                }
                FILESERVER => "Fig. 3/11: DST beats caching (appends); 80 s interval beats 5 s",
                WEBSERVER => {
                    "Fig. 4/8/12: 5 s interval below HDD-only; caching beats DST at low SSD sizes; Dynamic Cold-DST \
                     far behind Plain Cold-DST"
                }
                WEBZIPF => "Fig. 5/9/13: every hybrid well above HDD-only even at 25 %; Dynamic beats Plain Cold-DST",
                _ => "Fig. 14: type-aware beats on-demand caching and Dynamic Hot-DST at every size",
            },
        );
        let mut chart = Vec::new();
        for base in [HDD, SSD] {
            if let Some(r) = get(runs, load, base, None) {
                let v = num(metric(load, r));
                t.row(vec![base.into(), v.clone(), v.clone(), v, "-".into(), "-".into()]);
                chart.push((base.to_string(), SIZES.iter().map(|f| (f * 100.0, metric(load, r))).collect()));
            }
        }
        let archs = if load == MIXED { mixed_architectures() } else { architectures(scale) };
        for (label, _) in archs {
            let rs: Vec<Option<&SimReport>> = SIZES.iter().map(|&f| get(runs, load, label, Some(f))).collect();
            let mut row = vec![label.to_string()];
            row.extend(rs.iter().map(|r| r.map_or("-".into(), |r| num(metric(load, r)))));
            match rs[1] {
                Some(r) => {
                    row.push(format!("{:.1}%", 100.0 * r.access_hit.ssd));
                    row.push(format!("{}/{}", r.moves_up(), r.moves_down()));
                }
                None => row.extend(["-".into(), "-".into()]),
            }
            t.row(row);
            chart.push((
                label.to_string(),
                SIZES.iter().zip(&rs).filter_map(|(f, r)| r.map(|r| (f * 100.0, metric(load, r)))).collect(),
            ));
        }
        let file = format!("reproduce-loris-{slug}.png");
        out.charts.push(Chart::new(&file, &format!("Loris: {load}"), "SSD size (% of working set)", what, chart));
        out.tables.push(t);
    }
}

/// Whether `a` is faster than `b` on `load` at every SSD size; the ratios as text.
fn faster_everywhere(runs: &[RunRecord], load: &str, a: &str, b: &str) -> (bool, String) {
    let mut all = true;
    let mut parts = Vec::new();
    for f in SIZES {
        let (Some(x), Some(y)) = (get(runs, load, a, Some(f)), get(runs, load, b, Some(f))) else {
            return (false, "missing runs".into());
        };
        let ratio = speed(load, x) / speed(load, y).max(f64::MIN_POSITIVE);
        all &= ratio > 1.0;
        parts.push(format!("{:.0}%: {:.2}x", f * 100.0, ratio));
    }
    (all, format!("{a} / {b} speed: {}", parts.join(", ")))
}

fn findings(out: &mut Reproduction, runs: &[RunRecord], scale: f64) {
    let mut push = |claim: &str, paper: &str, (held, ours): (bool, String)| {
        out.findings.push(Finding::order(claim, paper, ours, held));
    };
    // 1. Locality: every hybrid beats HDD-only on the Zipf web server, even at 25 %.
    let hdd = get(runs, WEBZIPF, HDD, None).map_or(0.0, |r| speed(WEBZIPF, r));
    let mut worst: Option<(f64, &str)> = None;
    for (label, _) in architectures(scale) {
        if let Some(r) = get(runs, WEBZIPF, label, Some(0.25)) {
            let ratio = speed(WEBZIPF, r) / hdd.max(f64::MIN_POSITIVE);
            if worst.is_none_or(|(w, _)| ratio < w) {
                worst = Some((ratio, label));
            }
        }
    }
    let (ratio, label) = worst.unwrap_or((0.0, "none"));
    push(
        "With locality (Zipf web server) every hybrid beats HDD-only, even with the SSD at 25 % of the working set",
        "Fig. 5/9/13: all configurations significantly above DiskOnly at every size",
        (ratio > 1.0, format!("slowest hybrid at 25 %: {label}, {ratio:.2}x HDD-only")),
    );
    // 2. Reads dominate: caching beats DST at low SSD sizes.
    let at = |load: &str, label: &str, f: f64| get(runs, load, label, Some(f)).map_or(0.0, |r| speed(load, r));
    let (c, d) = (at(WEBSERVER, ON_DEMAND, 0.25), at(WEBSERVER, DYN_HOT, 0.25));
    push(
        "Caching beats DST when reads dominate (web server, low SSD sizes)",
        "Fig. 12: On-demand Caching above Dynamic Hot-DST at low SSD sizes (cleaning a copy is a delete)",
        (c > d, format!("web server @25 %: on-demand caching {} vs Dynamic Hot-DST {} ops/s", num(c), num(d))),
    );
    // 3. Writes/appends frequent: DST beats caching.
    let (p_held, p_text) = faster_everywhere(runs, POSTMARK, DYN_HOT, ON_DEMAND);
    let (f_held, f_text) = faster_everywhere(runs, FILESERVER, DYN_HOT, ON_DEMAND);
    push(
        "DST beats caching when appends are frequent (Postmark, file server)",
        "Fig. 10/11: caching architectures consistently worse than their DST counterparts",
        (p_held && f_held, format!("Postmark: {p_text}; file server: {f_text}")),
    );
    // 4. Interval migration thrashes without locality.
    let (w_held, w_text) = faster_everywhere(runs, WEBSERVER, INT80, INT5);
    let (fs_held, fs_text) = faster_everywhere(runs, FILESERVER, INT80, INT5);
    push(
        "Interval migration thrashes without locality: a 5 s interval is worse than 80 s",
        "Fig. 3/4: files shuttle between tiers, more so with shorter intervals",
        (w_held && fs_held, format!("web server: {w_text}; file server: {fs_text}")),
    );
    let hdd_web = get(runs, WEBSERVER, HDD, None).map_or(0.0, |r| speed(WEBSERVER, r));
    let int5: Vec<f64> = SIZES.iter().map(|&f| at(WEBSERVER, INT5, f)).collect();
    push(
        "On the web server the 5 s interval Hot-DST delivers less than HDD-only",
        "Fig. 4: five-second Interval Hot-DST below the HDD-only case",
        (
            int5.iter().any(|&x| x < hdd_web),
            format!(
                "5 s interval: {} ops/s at 25/50/75 % vs HDD-only {}",
                int5.iter().map(|&x| num(x)).collect::<Vec<_>>().join("/"),
                num(hdd_web)
            ),
        ),
    );
    // 5. Postmark's append-reads favour Dynamic Hot-DST.
    push(
        "Under Postmark, Dynamic Hot-DST beats interval Hot-DST (append-reads migrate files on demand)",
        "Fig. 2: Dynamic Hot-DST significantly faster; interval 80 s barely beats HDD-only",
        faster_everywhere(runs, POSTMARK, DYN_HOT, INT80),
    );
    // 6. On-demand caching beats interval caching everywhere.
    let mut all = true;
    let mut parts = Vec::new();
    for load in [POSTMARK, FILESERVER, WEBSERVER, WEBZIPF] {
        let (h, _) = faster_everywhere(runs, load, ON_DEMAND, INT_CACHE);
        all &= h;
        parts.push(format!("{}: {}", load.split(',').next().unwrap_or(load), if h { "yes" } else { "no" }));
    }
    push(
        "On-demand Caching outperforms Interval Caching under all workloads",
        "§V-D3: consistently, for the same reason as Dynamic vs Interval Hot-DST",
        (all, format!("on-demand faster at every size: {}", parts.join("; "))),
    );
    // 7. Shifting locality: Dynamic Cold-DST beats Plain Cold-DST.
    push(
        "With shifting locality (Zipf web server) Dynamic Cold-DST beats Plain Cold-DST",
        "Fig. 9: the adversarial case for Plain Cold-DST",
        faster_everywhere(runs, WEBZIPF, DYN_COLD, PLAIN_COLD),
    );
    // 8. Without locality, dynamic migration costs Cold-DST on the web server.
    push(
        "Without locality (web server) Dynamic Cold-DST lags Plain Cold-DST",
        "Fig. 8: Dynamic Cold-DST behind by a huge margin",
        faster_everywhere(runs, WEBSERVER, PLAIN_COLD, DYN_COLD),
    );
    // 9. Type-aware beats both single architectures on the mixed workload.
    let (a, at_) = faster_everywhere(runs, MIXED, TYPE_AWARE, ON_DEMAND);
    let (b, bt) = faster_everywhere(runs, MIXED, TYPE_AWARE, DYN_HOT);
    push(
        "Type-aware (caching for /web, Dynamic Hot-DST for /files) beats both single architectures on the mixed workload",
        "Fig. 14: type-aware outperforms both at all SSD sizes",
        (a && b, format!("{at_}; {bt}")),
    );
}
