//! HyCache (§IV-B, figures 11 and 12): Postmark on HyCache with LRU and with LFU against ext4 on
//! the HDD. Workloads of 2, 4, 6 and 8 GB on a 4 GB SSD (the speed-up falls once the workload
//! outgrows the SSD), then the SSD swept from 1 to 8 GB.
//!
//! The paper gives neither Postmark's file sizes nor its block size for these runs; we use files
//! of 64 KiB-1 MiB and 64 KiB I/O so that a few thousand files make gigabytes, and as many
//! transactions as files (Postmark's default ratio). HyCache ran on FUSE over ext4 with the
//! kernel's page cache; we model no RAM cache here, so that the runs measure the tiers (the
//! paper's 16 GB of RAM would otherwise hold every workload). The paper's comparison with a
//! Momentus XT hybrid drive (HHD) has no model here: we compare with the HDD, as its ext4 line.

use super::files::{FileJob, FileLoad, run_file_jobs};
use super::{Chart, Finding, ReproError, ReproOptions, ReproTable, Reproduction, RunRecord, find, num};
use crate::filesim::FileSimConfig;
use crate::filetrace::generate::FileWorkload;
use crate::metrics::SimReport;
use crate::sim::Timing;

const GIB: u64 = 1 << 30;
const KIB: u64 = 1 << 10;
const WORKLOADS_GB: [u64; 4] = [2, 4, 6, 8];
const SWEEP_GB: [u64; 5] = [1, 2, 4, 6, 8];
/// The workload the SSD sweep runs on.
const SWEEP_WORKLOAD_GB: u64 = 8;

fn postmark(bytes: u64) -> FileWorkload {
    let (min, max) = (64 * KIB, 1024 * KIB);
    let files = (bytes / ((min + max) / 2)).max(10);
    FileWorkload::Postmark { files, subdirs: 10, min, max, transactions: files, block: 64 * KIB }
}

fn name(gb: u64) -> String {
    format!("Postmark {gb} GB")
}

pub(super) fn run(
    opts: &ReproOptions,
    progress: &(dyn Fn(&str, usize, usize) + Sync),
) -> Result<Reproduction, ReproError> {
    let scale = opts.scale;
    let gb = |x: u64| (x as f64 * GIB as f64 * scale) as u64;
    let loads: Vec<FileLoad> = WORKLOADS_GB
        .iter()
        .map(|&w| {
            FileLoad::new(
                &name(w),
                &postmark(gb(w)),
                opts.seed,
                format!(
                    "Postmark, files 64 KiB-1 MiB in 10 subdirectories, 64 KiB I/O, as many transactions as files, \
                     {w} GB x {scale}"
                ),
            )
        })
        .collect();
    let mut jobs = Vec::new();
    for (li, load) in loads.iter().enumerate() {
        let w = WORKLOADS_GB[li];
        let cfg = |spec: &str, ssd: u64| FileSimConfig {
            ram_bytes: 0,
            timing: Timing::Closed { depth: 1 },
            measure_from: load.measure_from,
            footprint_bytes: Some(load.working_set),
            ..FileSimConfig::new(spec, ssd.max(64 * KIB))
        };
        jobs.push(FileJob { load: li, label: "ext4 on HDD".into(), cfg: cfg("hdd-only", gb(4)), ssd_fraction: 0.0 });
        let sizes: Vec<u64> = if w == SWEEP_WORKLOAD_GB { SWEEP_GB.to_vec() } else { vec![4] };
        for ssd in sizes {
            for coll in ["lru", "lfu"] {
                jobs.push(FileJob {
                    load: li,
                    label: format!("HyCache {} @ {ssd} GB SSD", coll.to_uppercase()),
                    cfg: cfg(&format!("hycache:collector={coll}"), gb(ssd)),
                    ssd_fraction: gb(ssd) as f64 / load.working_set.max(1) as f64,
                });
            }
        }
    }
    let runs = run_file_jobs(&loads, &jobs, opts.threads, progress)?;
    let mut out = Reproduction::new(
        "hycache",
        "HyCache (user-level SSD caching over FUSE, §IV-B figures 11-12)",
        scale,
        &[],
        vec![
            "sizes are scaled: a '4 GB' SSD is 4 GiB x scale, as are the workloads".into(),
            "no RAM page cache is modelled; HyCache's FUSE overhead is not modelled (the real mount, issue 5, \
             measures it)"
                .into(),
            "the paper's HHD (Momentus XT) baseline has no model; speed-ups are over the HDD".into(),
        ],
    );
    out.workloads = loads.iter().map(|l| l.note.clone()).collect();
    let time = |load: &str, label: &str| find(&runs, load, label).map(|r: &SimReport| r.duration_s);
    let speedup = |load: &str, label: &str| match (time(load, "ext4 on HDD"), time(load, label)) {
        (Some(h), Some(t)) if t > 0.0 => h / t,
        _ => f64::NAN,
    };
    let mut t = ReproTable::new(
        "Postmark on a 4 GB SSD: transaction time (s) and speed-up over ext4 on the HDD (Figure 11)",
        &["workload", "HDD (s)", "HyCache LRU (s)", "HyCache LFU (s)", "LRU speed-up", "LFU speed-up", "LRU/LFU"],
        "speed-up over ext4/HDD rises to about 4 GB then falls at 6-8 GB (the data outgrows the 4 GB SSD); LRU and \
         LFU within 2 %",
    );
    let mut lru_pts = Vec::new();
    let mut lfu_pts = Vec::new();
    let mut max_gap: f64 = 0.0;
    for &w in &WORKLOADS_GB {
        let load = name(w);
        let (lru, lfu) = ("HyCache LRU @ 4 GB SSD", "HyCache LFU @ 4 GB SSD");
        let (su_lru, su_lfu) = (speedup(&load, lru), speedup(&load, lfu));
        let gap = (time(&load, lru).unwrap_or(0.0) / time(&load, lfu).unwrap_or(1.0) - 1.0).abs();
        max_gap = max_gap.max(gap);
        t.row(vec![
            load.clone(),
            num(time(&load, "ext4 on HDD").unwrap_or(f64::NAN)),
            num(time(&load, lru).unwrap_or(f64::NAN)),
            num(time(&load, lfu).unwrap_or(f64::NAN)),
            format!("{su_lru:.2}x"),
            format!("{su_lfu:.2}x"),
            format!("{:.2}%", gap * 100.0),
        ]);
        lru_pts.push((w as f64, su_lru));
        lfu_pts.push((w as f64, su_lfu));
    }
    out.tables.push(t);
    let mut s = ReproTable::new(
        &format!(
            "Postmark {SWEEP_WORKLOAD_GB} GB with the SSD from 1 to 8 GB: speed-up over ext4 on the HDD (Figure 12)"
        ),
        &["SSD", "LRU speed-up", "LFU speed-up", "LRU SSD share of data ops"],
        "a larger SSD gives more speed-up (up to 18 % over the HHD with 8 GB)",
    );
    let sweep_load = name(SWEEP_WORKLOAD_GB);
    let mut sweep_pts = Vec::new();
    for &ssd in &SWEEP_GB {
        let (lru, lfu) = (format!("HyCache LRU @ {ssd} GB SSD"), format!("HyCache LFU @ {ssd} GB SSD"));
        let share = find(&runs, &sweep_load, &lru).map_or(f64::NAN, |r| r.access_hit.ssd);
        let su = speedup(&sweep_load, &lru);
        s.row(vec![
            format!("{ssd} GB"),
            format!("{su:.2}x"),
            format!("{:.2}x", speedup(&sweep_load, &lfu)),
            format!("{:.1}%", share * 100.0),
        ]);
        sweep_pts.push((ssd as f64, su));
    }
    out.tables.push(s);
    out.charts.push(Chart::new(
        "reproduce-hycache-workloads.png",
        "HyCache: Postmark speed-up over the HDD, 4 GB SSD",
        "workload (GB)",
        "speed-up over HDD-only (×)",
        vec![("LRU".into(), lru_pts.clone()), ("LFU".into(), lfu_pts)],
    ));
    out.charts.push(Chart::new(
        "reproduce-hycache-ssd-sweep.png",
        &format!("HyCache LRU: Postmark {SWEEP_WORKLOAD_GB} GB, speed-up by SSD size"),
        "SSD (GB)",
        "speed-up over HDD-only (×)",
        vec![("LRU".into(), sweep_pts.clone())],
    ));
    out.findings.push(Finding::order(
        "LRU and LFU perform almost the same on Postmark",
        "difference < 2 %",
        format!("largest difference in transaction time {:.2}%", max_gap * 100.0),
        max_gap < 0.02,
    ));
    let peak = lru_pts.iter().map(|p| p.1).fold(f64::MIN, f64::max);
    let at = |w: f64| lru_pts.iter().find(|p| p.0 == w).map_or(f64::NAN, |p| p.1);
    out.findings.push(Finding::order(
        "The speed-up falls once the workload outgrows the 4 GB SSD",
        "the ratio starts to go down at 6 GB",
        format!("LRU speed-up 2/4/6/8 GB: {:.2}/{:.2}/{:.2}/{:.2}x", at(2.0), at(4.0), at(6.0), at(8.0)),
        at(6.0) < peak && at(8.0) < at(4.0),
    ));
    let first = sweep_pts.first().map_or(f64::NAN, |p| p.1);
    let last = sweep_pts.last().map_or(f64::NAN, |p| p.1);
    out.findings.push(Finding::order(
        "A larger SSD cache gives a larger speed-up",
        "1 GB to 8 GB: better, up to 18 % over the HHD",
        format!("LRU speed-up {first:.2}x with 1 GB, {last:.2}x with 8 GB"),
        last > first,
    ));
    let _: &[RunRecord] = &runs;
    out.runs = runs;
    Ok(out)
}
