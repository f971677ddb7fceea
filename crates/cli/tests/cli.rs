//! The `tierwise` binary end to end: the main commands on bundled real traces, and every kind
//! of bad input getting a clear message (never a panic): unknown policy or knob, SSD sizes that
//! are zero, negative or larger than the footprint, malformed trace lines, unknown flags.

#![expect(clippy::unwrap_used, reason = "a failing setup should stop the test loudly")]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn trace(name: &str) -> String {
    repo().join("data/traces").join(name).display().to_string()
}

fn tierwise(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tierwise")).args(["--quiet"]).args(args).output().unwrap()
}

fn ok(args: &[&str]) -> String {
    let o = tierwise(args);
    assert!(o.status.success(), "{args:?} failed: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).to_string()
}

fn fails(args: &[&str], want: &[&str]) {
    let o = tierwise(args);
    assert!(!o.status.success(), "{args:?} should fail");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("panicked"), "{args:?} panicked: {err}");
    for w in want {
        assert!(err.contains(w), "{args:?}: `{err}` lacks `{w}`");
    }
}

#[test]
fn compare_writes_table_json_csv_and_png() {
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().display().to_string();
    let s = ok(&["compare", &trace("msr_hm_0.excerpt1000.csv"), "--ssd", "10%,50%", "--out", &dir]);
    for arch in ["hdd-only", "linear", "cache:mode=write-back", "ssd-only"] {
        assert!(s.contains(arch), "{s}");
    }
    assert!(s.contains("10% (") && s.contains("50% ("), "{s}");
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.path().join("compare.json")).unwrap()).unwrap();
    assert_eq!(json["rows"].as_array().unwrap().len(), 2 * 10);
    let csv = std::fs::read_to_string(out.path().join("compare.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 20);
    let png = std::fs::read(out.path().join("compare.png")).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    // The main job: a closed-loop throughput table, an open-loop latency table at a stated
    // speed with the offered load labelled, and a verdict per size.
    for want in ["THROUGHPUT: closed loop, 32", "LATENCY: open loop", "offered IOPS", "VERDICT", "SSD 10%:", "SSD 50%:"]
    {
        assert!(s.contains(want), "{want}: {s}");
    }
    assert!(out.path().join("compare-latency.json").exists());
    // An explicit timing gives one table.
    let one = ok(&["compare", &trace("msr_hm_0.excerpt1000.csv"), "--ssd", "10%", "--timing", "none", "--out", &dir]);
    assert!(!one.contains("LATENCY") && !one.contains("VERDICT"), "{one}");
}

/// On the bundled CloudPhysics trace, every SSD size has a hybrid ahead of HDD-only.
#[test]
fn the_main_job_finds_hybrids_ahead_on_cloudphysics() {
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().display().to_string();
    let s = ok(&["compare", &trace("cloudphysics_libcachesim.sample.vscsi.gz"), "--out", &dir]);
    let verdicts: Vec<&str> = s.lines().filter(|l| l.starts_with("  SSD ")).collect();
    assert_eq!(verdicts.len(), 4, "{s}");
    assert!(verdicts.iter().all(|l| l.contains("x HDD-only") && !l.contains("no hybrid")), "{s}");
}

#[test]
fn sim_reports_metrics_and_writes_json() {
    let out = tempfile::tempdir().unwrap();
    let json = out.path().join("r.json").display().to_string();
    let s = ok(&[
        "sim",
        &trace("umass_websearch.mqsim_ascii.trace.gz"),
        "--arch",
        "cache:mode=write-back,collector=arc",
        "--ssd",
        "25%",
        "--timing",
        "closed:8",
        "--json",
        &json,
        "--spin-down",
    ]);
    for w in ["reads served", "response", "energy", "endurance", "HCA metrics", "requests       24783"] {
        assert!(s.contains(w), "{w}: {s}");
    }
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(v["requests"], 24783);
    assert!(v["latency"]["mean_us"].as_f64().unwrap() > 0.0);
}

#[test]
fn trace_stat_matches_provenance() {
    let s = ok(&["trace", "stat", &trace("msr_hm_0.excerpt1000.csv")]);
    assert!(s.contains("requests       1000 (508 reads = 50.8%, 492 writes)"), "{s}");
    assert!(s.contains("1917 objects"), "4 KiB pages touched, per PROVENANCE.md: {s}");
    assert!(s.contains("duration       127.2"), "{s}");
    assert!(s.contains("request offsets mod 4KiB") && s.contains("92.9%"), "aligned to LBA 0: {s}");
    assert!(!s.contains("anchored"), "{s}");
    // The analysis: popularity, reuse time, stack distance, op × size; `--brief` leaves it out.
    for part in ["popularity", "Zipf exponent", "reuse time", "stack distance", "op x size", "accessed once"] {
        assert!(s.contains(part), "{part}: {s}");
    }
    let brief = ok(&["trace", "stat", "--brief", &trace("msr_hm_0.excerpt1000.csv")]);
    assert!(brief.contains("1917 objects") && !brief.contains("stack distance"), "{brief}");
}

/// A merged multi-tenant trace: `trace stat --json` breaks it down per volume.
#[test]
fn trace_stat_breaks_a_multi_volume_trace_down() {
    let out = tempfile::tempdir().unwrap();
    let merged = out.path().join("m.spc").display().to_string();
    ok(&[
        "trace",
        "merge",
        &trace("msr_hm_0.excerpt1000.csv"),
        &trace("systor17_vdi.sample1000.csv.gz"),
        "-o",
        &merged,
    ]);
    let v: serde_json::Value = serde_json::from_str(&ok(&["trace", "stat", "--json", &merged])).unwrap();
    let vols = v["analysis"]["per_volume"].as_array().unwrap();
    assert_eq!(vols.len(), 2);
    assert_eq!(vols[0]["requests"], 1000);
    assert_eq!(vols[0]["objects"], 1917, "the MSR excerpt's pages, as on its own");
    let total: u64 = vols.iter().map(|x| x["objects"].as_u64().unwrap()).sum();
    assert_eq!(total, v["objects"].as_u64().unwrap());
    let s = ok(&["trace", "stat", &merged]);
    assert!(s.contains("volumes        2 (busiest 16)"), "{s}");
}

/// The CloudPhysics sample has 80 % of its requests at byte 3584 mod 4096 (a partition at
/// sector 63): `trace stat` shows it, and runs anchor blocks there and say so.
#[test]
fn misaligned_traces_are_shown_and_anchored() {
    let cp = trace("cloudphysics_libcachesim.sample.vscsi.gz");
    let s = ok(&["trace", "stat", &cp]);
    assert!(s.contains("3584       90572   79.5%"), "{s}");
    assert!(s.contains("note: objects anchored at byte 3584 mod 4096"), "{s}");
    let r = ok(&["sim", &cp, "--arch", "cache", "--ssd", "10%"]);
    assert!(r.contains("blocks:4KiB@3584"), "{r}");
    let r = ok(&["sim", &cp, "--arch", "cache", "--ssd", "10%", "--objects", "blocks:4KiB@0"]);
    assert!(!r.contains("anchored") && !r.contains("@3584"), "{r}");
    // `trace convert` anchors blocks as runs do and names the anchor it used.
    let out = tempfile::tempdir().unwrap();
    let og = out.path().join("cp.og").display().to_string();
    let c = ok(&["trace", "convert", &cp, "-o", &og, "--objects", "blocks:4KiB"]);
    assert!(c.contains("(blocks:4KiB@3584)") && c.contains("note: objects anchored at byte 3584"), "{c}");
}

#[test]
fn convert_round_trips_in_libcachesim_mode() {
    let out = tempfile::tempdir().unwrap();
    let og = out.path().join("cp.oracleGeneral").display().to_string();
    ok(&["trace", "convert", &trace("cloudphysics_libcachesim.sample.vscsi.gz"), "-o", &og]);
    let a = ok(&[
        "sim",
        &trace("cloudphysics_libcachesim.sample.vscsi.gz"),
        "--arch",
        "cache:mode=read-only",
        "--ssd",
        "1000",
        "--objects",
        "lcs:ignore-size",
        "--timing",
        "none",
    ]);
    let b = ok(&[
        "sim",
        &og,
        "--arch",
        "cache:mode=read-only",
        "--ssd",
        "1000",
        "--objects",
        "lcs:ignore-size",
        "--timing",
        "none",
    ]);
    let misses = |s: &str| s.lines().find(|l| l.starts_with("request misses")).unwrap().to_string();
    assert_eq!(misses(&a), misses(&b));
    assert!(misses(&a).contains("94823"), "libCacheSim's LRU count: {}", misses(&a));
}

#[test]
fn mrc_writes_curve() {
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().display().to_string();
    let s = ok(&["mrc", &trace("msr_hm_0.excerpt1000.csv"), "--points", "8", "--out", &dir]);
    assert!(s.contains("one pass"), "{s}");
    assert_eq!(std::fs::read_to_string(out.path().join("mrc.csv")).unwrap().lines().count(), 1 + 8);
    assert!(out.path().join("mrc.png").exists());
    // --belady: MIN at the same sizes, never above the curve, in the table, CSV, JSON and report.
    let s = ok(&["mrc", &trace("msr_hm_0.excerpt1000.csv"), "--points", "8", "--belady", "--out", &dir]);
    assert!(s.contains("Belady miss ratio"), "{s}");
    let csv = std::fs::read_to_string(out.path().join("mrc.csv")).unwrap();
    assert!(csv.starts_with("size_bytes,miss_ratio,misses,belady_miss_ratio,belady_misses\n"), "{csv}");
    for line in csv.lines().skip(1) {
        let f: Vec<u64> = [2usize, 4].iter().map(|&i| line.split(',').nth(i).unwrap().parse().unwrap()).collect();
        assert!(f[1] <= f[0], "Belady above LRU: {line}");
    }
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(out.path().join("mrc.json")).unwrap()).unwrap();
    assert_eq!(v["belady"].as_array().unwrap().len(), 8);
    let html = out.path().join("r.html").display().to_string();
    ok(&["report", &out.path().join("mrc.json").display().to_string(), "-o", &html]);
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("Belady MIN, offline optimum") && page.contains("Belady miss ratio"));
}

#[test]
fn gen_writes_a_readable_trace() {
    let out = tempfile::tempdir().unwrap();
    let p = out.path().join("z.mqsim").display().to_string();
    ok(&["trace", "gen", "-o", &p, "--requests", "1000", "--objects", "100", "--write-fraction", "0.3"]);
    let s = ok(&["trace", "stat", &p]);
    assert!(s.contains("requests       1000"), "{s}");
}

/// docs/COLLECTORS.md holds the table `tierwise list collectors --markdown` prints, and the
/// JSON listing names every collector with its reference.
#[test]
fn the_collectors_doc_is_the_registry() {
    let table = ok(&["list", "collectors", "--markdown"]);
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/COLLECTORS.md")).unwrap();
    let inside = doc
        .split("<!-- collectors:begin -->\n")
        .nth(1)
        .and_then(|rest| rest.split("<!-- collectors:end -->").next())
        .expect("markers in docs/COLLECTORS.md");
    assert_eq!(inside, table, "regenerate the table: tierwise list collectors --markdown");
    let json: serde_json::Value = serde_json::from_str(&ok(&["list", "collectors", "--json"])).unwrap();
    let names: Vec<&str> = json["collectors"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    for c in tierwise_core::collector::COLLECTORS {
        assert!(names.contains(&c.name), "{}", c.name);
        assert!(table.contains(&format!("| `{}` |", c.name)), "{}", c.name);
    }
}

#[test]
fn list_shows_every_registry() {
    let s = ok(&["list"]);
    for w in [
        "cache",
        "linear",
        "hdd-only",
        "ssd-only",
        "mode",
        "dirty-high",
        "inverse-bitmap",
        "wsclock",
        "window",
        "vscsi",
        "oracle-general",
        "wd5000aaks",
        "vertex3",
    ] {
        assert!(s.contains(w), "{w}");
    }
    fails(&["list", "gadgets"], &["architectures, collectors, formats, devices"]);
    // Each policy lists its own knobs only, with its real default collector.
    let a = ok(&["list", "architectures"]);
    // An architecture's line and its knob lines (indented further) under it.
    let section = |name: &str| {
        let mut lines = a.lines().skip_while(|l| !l.starts_with(&format!("  {name} ")));
        let head = lines.next().unwrap_or_else(|| panic!("{name} listed"));
        let knobs: Vec<&str> = lines.take_while(|l| l.starts_with("      ")).collect();
        format!("{head}\n{}", knobs.join("\n"))
    };
    let knobs = |section: &str| -> Vec<String> {
        section
            .lines()
            .skip(1)
            .filter_map(|l| l.split_whitespace().next())
            .filter(|w| *w != "capabilities")
            .map(String::from)
            .collect()
    };
    let hot = section("dynamic-hot-dst");
    assert_eq!(knobs(&hot), ["sieve", "collector"], "{hot}");
    assert!(hot.contains("inverse-bitmap"), "{hot}");
    let hy = section("hycache");
    assert!(hy.contains("threshold") && !hy.contains("dirty-high") && hy.contains("default lru"), "{hy}");
    assert!(section("file-write-back").contains("dirty-high") && section("interval-caching").contains("interval"));
    // Capabilities come from the registry.
    assert!(section("cache").contains("block, SSD holds copies, sees every I/O, passthrough no"));
    assert!(section("hycache").contains("file, one copy, told at open/close, passthrough allowed"));
    assert!(section("on-demand-caching").contains("file, SSD holds copies"));
    assert!(section("hdd-only").contains("block or file") && section("hdd-only").contains("buys HDDs only"));
}

#[test]
fn a_report_piped_into_head_ends_quietly() {
    use std::io::Read;
    let mut child = Command::new(env!("CARGO_BIN_EXE_tierwise"))
        .args(["list"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Read one byte, then hang up, as `head -c1` would.
    let mut out = child.stdout.take().unwrap();
    let mut byte = [0u8; 1];
    out.read_exact(&mut byte).unwrap();
    drop(out);
    let mut err = String::new();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    child.wait().unwrap();
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn bad_policies_and_knobs_list_the_valid_ones() {
    let t = trace("msr_hm_0.excerpt1000.csv");
    fails(&["sim", &t, "--arch", "cachez", "--ssd", "10%"], &["unknown architecture `cachez`", "hdd-only", "cache"]);
    fails(&["sim", &t, "--arch", "cache:collector=lruu", "--ssd", "10%"], &["unknown collector `lruu`", "lfu", "arc"]);
    fails(&["sim", &t, "--arch", "cache:colour=red", "--ssd", "10%"], &["no parameter `colour`", "mode", "dirty-high"]);
    fails(&["sim", &t, "--arch", "cache:mode=sideways", "--ssd", "10%"], &["mode", "write-back"]);
    fails(&["sim", &t, "--arch", "cache:dirty-high=10,dirty-low=20", "--ssd", "10%"], &["dirty-low", "dirty-high"]);
    fails(&["compare", &t, "--arch", "hdd-only", "--arch", "cache:collector=nope", "--ssd", "10%"], &["nope", "lru"]);
    fails(
        &["sim", &t, "--arch", "cache", "--ssd", "10%", "--timing", "sideways"],
        &["none, open[:SPEEDUP] or closed[:DEPTH]"],
    );
    fails(
        &["sim", &t, "--arch", "cache", "--ssd", "10%", "--objects", "bricks"],
        &["blocks[:SIZE[@ANCHOR]], requests, lcs"],
    );
    fails(
        &["sim", &t, "--arch", "cache", "--ssd", "10%", "--hdd", "floppy"],
        &["unknown hdd preset `floppy`", "wd5000aaks"],
    );
    fails(&["sim", &t, "--arch", "cache", "--ssd", "10%", "--read-weight", "7"], &["--read-weight"]);
    fails(&["sim", &t, "--frobnicate"], &["--frobnicate"]);
}

#[test]
fn bad_ssd_sizes_are_refused_clearly() {
    let t = trace("msr_hm_0.excerpt1000.csv");
    fails(&["sim", &t, "--arch", "cache", "--ssd", "0"], &["must be above zero"]);
    fails(&["sim", &t, "--arch", "cache", "--ssd", "-5%"], &["must be positive"]);
    fails(&["sim", &t, "--arch", "cache", "--ssd", "150%"], &["at most 100%"]);
    fails(&["sim", &t, "--arch", "cache", "--ssd", "lots"], &["SSD size `lots`"]);
    fails(&["compare", &t, "--ssd", "1TiB"], &["not smaller than the trace's footprint", "--allow-oversize"]);
    ok(&[
        "compare",
        &t,
        "--arch",
        "hdd-only",
        "--ssd",
        "1TiB",
        "--allow-oversize",
        "--timing",
        "none",
        "--out",
        &tempfile::tempdir().unwrap().path().display().to_string(),
    ]);
}

#[test]
fn malformed_trace_lines_name_file_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("bad.csv");
    std::fs::write(&p, "128166385295514663,hm,0,Write,9056014336,2048,2833\n128166385295514878,hm,0,Wrong,11855351808,512,2617\n128166385295515175,hm,0,Read,5548077056,4096,2320\n").unwrap();
    let ps = p.display().to_string();
    fails(
        &["sim", &ps, "--format", "msr", "--arch", "hdd-only", "--ssd", "50%"],
        &["bad.csv:2", "`Type`", "Read or Write"],
    );
    let s = ok(&["sim", &ps, "--format", "msr", "--arch", "hdd-only", "--ssd", "50%", "--skip-bad-lines"]);
    assert!(s.contains("1 bad lines skipped"), "{s}");
    fails(
        &["sim", "/nonexistent/x.csv", "--arch", "hdd-only", "--ssd", "10%"],
        &["/nonexistent/x.csv", "No such file"],
    );
}

#[test]
fn block_architecture_knob_combinations_are_refused_by_name() {
    let t = trace("msr_hm_0.excerpt1000.csv");
    fails(
        &["sim", &t, "--arch", "greendm-tiering:lt=200,ht=100", "--ssd", "64MiB"],
        &["lt (200) must be below ht (100)"],
    );
    fails(&["sim", &t, "--arch", "greendm-tiering:es=6KiB", "--ssd", "64MiB"], &["es = 6144", "multiple of 4 KiB"]);
    fails(&["sim", &t, "--arch", "greendm-caching:mcml=0", "--ssd", "64MiB"], &["mcml", "1..=4096"]);
    fails(&["sim", &t, "--arch", "greendm-tiering:es=1GiB", "--ssd", "64MiB"], &["smaller than one extent"]);
    fails(&["sim", &t, "--arch", "otf-ast:sub-lun=1GiB", "--ssd", "64MiB"], &["smaller than one sub-LUN"]);
    fails(
        &["sim", &t, "--arch", "zfs-l2arc-like:collector=lfu", "--ssd", "64MiB"],
        &["cannot be walked", "arc, lru or fifo"],
    );
}

#[test]
fn es_knob_sets_the_split_size_and_counters_are_reported() {
    let t = trace("msr_hm_0.excerpt1000.csv");
    let s = ok(&["sim", &t, "--arch", "greendm-tiering:es=64KiB", "--ssd", "25%", "--timing", "none"]);
    assert!(s.contains("blocks:64KiB objects"), "{s}");
    assert!(s.contains("requests split into 64KiB extents"), "{s}");
    assert!(s.contains("arch counters  "), "{s}");
}

#[test]
fn standins_are_written_and_reproduce_refuses_unknown_targets() {
    let out = tempfile::tempdir().unwrap();
    let p = out.path().join("fiu.mqsim").display().to_string();
    let s = ok(&["trace", "gen", "--standin", "fiu-online", "--scale", "0.001", "-o", &p]);
    assert!(s.contains("wrote 4868 requests") && s.contains("655,526 reads"), "{s}");
    let st = ok(&["trace", "stat", &p]);
    assert!(st.contains("requests       4868 (656 reads"), "{st}");
    fails(&["trace", "gen", "--standin", "fiu", "-o", &p], &["unknown stand-in `fiu`", "fiu-online, src1_0"]);
    fails(
        &["reproduce", "nfs"],
        &["unknown reproduction target `nfs`", "greendm", "otf-ast", "hca", "loris", "hycache"],
    );
    fails(&["reproduce", "hca", "--scale", "2"], &["--scale 2"]);
}

#[test]
fn gen_files_writes_a_readable_file_trace() {
    let out = tempfile::tempdir().unwrap();
    let p = out.path().join("pm.csv");
    let s = ok(&["trace", "gen-files", "postmark", "--scale", "0.005", "-o", &p.display().to_string()]);
    assert!(s.contains("wrote ") && s.contains("create ") && s.contains("rmdir 11"), "{s}");
    let ops: Vec<_> = tierwise_sim::filetrace::FileTraceReader::open(&p).unwrap().collect::<Result<_, _>>().unwrap();
    assert!(ops.len() > 1000);
    fails(&["trace", "gen-files", "tpcc", "-o", "/tmp/x.csv"], &["unknown file workload `tpcc`", "postmark"]);
    fails(&["trace", "gen-files", "postmark", "--scale", "0", "-o", "/tmp/x.csv"], &["--scale 0"]);
    // --iterations sets the measured phase's length and keeps the fileset.
    let q = out.path().join("web.csv");
    let s = ok(&[
        "trace",
        "gen-files",
        "webserver",
        "--scale",
        "0.004",
        "--iterations",
        "7",
        "-o",
        &q.display().to_string(),
    ]);
    assert!(s.contains("read 70,") && s.contains("append 7"), "7 iterations of 10 reads and 1 append: {s}");
    fails(&["trace", "gen-files", "webserver", "--iterations", "0", "-o", "/tmp/x.csv"], &["--iterations 0"]);
}

/// `tierwise sim` on a file trace measures after the setup phase by default, as `replay` does;
/// `--measure-from 0` measures everything.
#[test]
fn file_simulations_measure_after_the_setup_phase() {
    let out = tempfile::tempdir().unwrap();
    let t = out.path().join("web.csv").display().to_string();
    ok(&["trace", "gen-files", "webserver", "--scale", "0.004", "--iterations", "20", "-o", &t]);
    let requests = |extra: &[&str]| {
        let j = out.path().join("r.json").display().to_string();
        let mut args = vec!["sim", &t, "--arch", "dynamic-hot-dst", "--ssd", "25%", "--no-dirs", "--json", &j];
        args.extend_from_slice(extra);
        ok(&args);
        let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&j).unwrap()).unwrap();
        r["requests"].as_u64().unwrap()
    };
    assert_eq!(requests(&[]), 220, "20 iterations of 10 reads and an append");
    assert!(requests(&["--measure-from", "0"]) > 220, "the setup phase too");
    fails(
        &["sim", &t, "--arch", "dynamic-hot-dst", "--ssd", "25%", "--measure-from", "soon"],
        &["--measure-from soon"],
    );
}

#[test]
fn sim_runs_a_generated_file_trace_through_a_file_architecture() {
    let out = tempfile::tempdir().unwrap();
    let t = out.path().join("web.csv").display().to_string();
    ok(&["trace", "gen-files", "webserver-zipf", "--scale", "0.01", "-o", &t]);
    let json = out.path().join("r.json").display().to_string();
    let s = ok(&[
        "sim",
        &t,
        "--arch",
        "type-aware:volumes=/web=on-demand-caching",
        "--ssd",
        "25%",
        "--timing",
        "closed:4",
        "--ram-cache",
        "256KiB",
        "--json",
        &json,
    ]);
    assert!(s.contains("file, files objects") && s.contains("IOPS"), "{s}");
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert!(r["engine"]["done"][2].as_u64().unwrap() > 0, "on-demand caching copied files: {r}");
    // Block and file levels are kept apart, each with a message naming the way out.
    fails(&["sim", &t, "--arch", "greendm-tiering", "--ssd", "25%"], &["block-level", "dynamic-hot-dst"]);
    fails(
        &[
            "sim",
            &trace("msr_hm_0.excerpt1000.csv"),
            "--arch",
            "dynamic-hot-dst",
            "--ssd",
            "10%",
            "--objects",
            "requests",
        ],
        &["file-level architecture", "gen-files"],
    );
    fails(&["sim", &t, "--arch", "plain-cold-dst", "--ssd", "25%", "--ram-cache", "lots"], &["--ram-cache"]);
}

#[test]
fn a_malformed_file_trace_line_is_named() {
    let out = tempfile::tempdir().unwrap();
    let t = out.path().join("bad.csv");
    std::fs::write(&t, "# tierwise file trace v1\n0,create,/a,0,0,\n1,write,/a,zero,10,\n").unwrap();
    fails(&["sim", &t.display().to_string(), "--arch", "dynamic-hot-dst", "--ssd", "1MiB"], &["bad.csv:3", "offset"]);
}

#[test]
fn report_writes_one_self_contained_page_and_names_a_bad_input() {
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().display().to_string();
    ok(&[
        "compare",
        &trace("msr_hm_0.excerpt1000.csv"),
        "--arch",
        "cache",
        "--ssd",
        "10%",
        "--timing",
        "none",
        "--out",
        &dir,
    ]);
    ok(&["mrc", &trace("systor17_vdi.sample1000.csv.gz"), "--points", "8", "--out", &dir]);
    let html = out.path().join("r.html");
    let s = ok(&["report", &dir, "-o", &html.display().to_string(), "--title", "A <test>"]);
    assert!(s.contains("from 2 result file(s)"), "{s}");
    let page = std::fs::read_to_string(&html).unwrap();
    // Every result file and the page name the build: `tierwise --version`'s, with its sources hash.
    let version = ok(&["--version"]);
    let build = version.trim().strip_prefix("tierwise ").unwrap();
    assert!(build.contains("+src.") && build.len() > 20, "{version}");
    for f in ["compare.json", "mrc.json"] {
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(out.path().join(f)).unwrap()).unwrap();
        assert_eq!(v["build"], build, "{f}");
    }
    assert_eq!(page.matches(&format!("<td>{}</td>", build)).count(), 2, "one per result file");
    assert!(page.contains(&format!("written by tierwise {build}")));
    assert!(page.contains("<title>A &lt;test&gt;</title>") && !page.contains("<script"));
    assert!(page.contains("Comparison — msr_hm_0.excerpt1000.csv") && page.contains("Miss-ratio curve — systor17"));
    assert!(page.matches("<svg").count() >= 3 && page.contains("data:text/csv;base64,"));
    // Each trace the results name gets its analysis: reuse distances, popularity, op × size.
    for t in ["Trace — msr_hm_0.excerpt1000.csv", "Trace — systor17_vdi.sample1000.csv.gz"] {
        assert!(page.contains(t), "{t}");
    }
    assert_eq!(page.matches("Reuse distance").count(), 2);
    assert!(!page.contains("@auto"), "the report names the anchor used, not `auto`");
    assert!(page.contains("Rank-frequency plot") && page.contains("Requests by operation and size"));
    // A file that is not a tierwise result is named, and nothing is written.
    let other = out.path().join("other.json");
    std::fs::write(&other, "{\"x\": 1}").unwrap();
    let html2 = out.path().join("r2.html");
    fails(
        &["report", &other.display().to_string(), "-o", &html2.display().to_string()],
        &["other.json", "not a tierwise result"],
    );
    fails(&["report", "/nonexistent/compare.json"], &["/nonexistent/compare.json"]);
    assert!(!html2.exists());
}

#[test]
fn sweep_without_the_python_package_says_how_to_install_it() {
    let o = Command::new(env!("CARGO_BIN_EXE_tierwise"))
        .args(["sweep", "x.toml"])
        .env("TIERWISE_PYTHON", "/bin/false")
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("pip install './python[dask]'"), "{err}");
}

#[test]
fn calibrate_writes_a_preset_that_sim_uses() {
    let out = tempfile::tempdir().unwrap();
    // A directory on the build's disk: /tmp may be in memory.
    let disk = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let preset = out.path().join("mine.toml");
    let json = out.path().join("cal.json");
    let (d, p, j) = (disk.path().display().to_string(), preset.display().to_string(), json.display().to_string());
    let report = ok(&[
        "calibrate",
        &d,
        "--size",
        "32MiB",
        "--seconds",
        "0.2",
        "--depths",
        "1,8",
        "--kind",
        "ssd",
        "--name",
        "mine",
        "-o",
        &p,
        "--json",
        &j,
    ]);
    for want in [
        "randread-qd8",
        "randwrite-sync-qd1",
        "model ÷ measured",
        "no: a check",
        "preset written to",
        "(32 MiB, direct I/O, device",
    ] {
        assert!(report.contains(want), "{want} missing from\n{report}");
    }
    let cal: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(cal["kind"], "ssd");
    assert_eq!(cal["checks"].as_array().unwrap().len(), 5);
    let sim_json = out.path().join("sim.json");
    let sj = sim_json.display().to_string();
    ok(&[
        "sim",
        &trace("msr_hm_0.excerpt1000.csv"),
        "--arch",
        "ssd-only",
        "--ssd",
        "100%",
        "--devices",
        &p,
        "--ssd-model",
        "mine",
        "--timing",
        "closed:4",
        "--json",
        &sj,
    ]);
    let sim: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&sim_json).unwrap()).unwrap();
    assert!(sim["devices"].as_str().unwrap().contains("ssd mine"), "{}", sim["devices"]);
    assert!(sim["iops"].as_f64().unwrap() > 0.0);
    fails(&["calibrate", &d, "--kind", "tape"], &["expected hdd or ssd"]);
    fails(&["calibrate", &d, "--base", "nosuch"], &["--base nosuch", "tierwise list devices"]);
    assert_eq!(std::fs::read_dir(disk.path()).unwrap().count(), 0, "scratch files are removed");
}

/// `tierwise sim ARGS` and its JSON report.
fn sim_report(args: &[&str]) -> serde_json::Value {
    let out = tempfile::tempdir().unwrap();
    let j = out.path().join("r.json");
    let mut all = vec!["sim"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--json", j.to_str().unwrap()]);
    ok(&all);
    serde_json::from_str(&std::fs::read_to_string(j).unwrap()).unwrap()
}

#[test]
fn hdd_queue_takes_the_kernels_knobs() {
    let t = trace("msr_hm_0.excerpt1000.csv");
    let run = |queue: &str| {
        let r = sim_report(&[
            &t,
            "--arch",
            "cache:mode=write-back",
            "--ssd",
            "25%",
            "--timing",
            "closed:16",
            "--hdd-queue",
            queue,
            // Media timings: with the drive's write cache on, writes take 0.1 ms and nothing
            // waits long enough for the batches to matter on this excerpt.
            "--hdd",
            "wd5000aaks:write_cache=off",
        ]);
        r["latency"]["p99_us"].as_f64().unwrap()
    };
    // One request per batch and reads always first against the default batches of 16: the
    // knob reaches the model (the tail of the mixed closed loop moves).
    assert_ne!(run("mq-deadline"), run("mq-deadline:fifo_batch=1,writes_starved=64"));
    fails(
        &["sim", &t, "--arch", "hdd-only", "--ssd", "1%", "--hdd-queue", "mq-deadline:quantum=4"],
        &["quantum=4", "fifo_batch"],
    );
}

#[test]
fn io_align_charges_what_direct_io_issues() {
    let t = trace("cloudphysics_libcachesim.sample.vscsi.gz");
    let run = |align: &str| {
        sim_report(&[
            &t,
            "--arch",
            "hdd-only",
            "--ssd",
            "25%",
            "--timing",
            "closed:4",
            "--max-requests",
            "3000",
            "--io-align",
            align,
        ])
    };
    let (plain, direct) = (run("0"), run("4KiB"));
    let hdd = |r: &serde_json::Value, k: &str| r["hdd"][k].as_u64().unwrap();
    // The sample's writes are not 4 KiB-aligned: each reads its partial units first.
    assert_eq!(hdd(&direct, "writes"), hdd(&plain, "writes"));
    assert!(hdd(&direct, "reads") > hdd(&plain, "reads") + hdd(&plain, "writes") / 2, "{direct}");
    assert!(hdd(&direct, "read_bytes") % 4096 == 0 && hdd(&direct, "write_bytes") % 4096 == 0);
    assert!(direct["iops"].as_f64().unwrap() < plain["iops"].as_f64().unwrap());
    assert!(direct["devices"].as_str().unwrap().contains("direct I/O in 4096-byte units"));
    fails(&["sim", &t, "--arch", "hdd-only", "--ssd", "1%", "--io-align", "3000"], &["--io-align", "power of two"]);
}

/// A socket path longer than a Unix socket can take is refused before anything is made (the
/// control socket's bind used to fail silently in the daemon, and `stats` then said the path
/// was no mount).
#[test]
fn serve_refuses_socket_paths_too_long_to_bind() {
    let dir = tempfile::tempdir().unwrap();
    let long = dir.path().join("d".repeat(120));
    let (ssd, hdd) = (dir.path().join("ssd.img"), dir.path().join("hdd.img"));
    let args = |flag: &str| {
        let o = tierwise(&[
            "serve",
            "--create",
            "--ssd",
            ssd.to_str().unwrap(),
            "--hdd",
            hdd.to_str().unwrap(),
            "--ssd-size",
            "8MiB",
            "--hdd-size",
            "64MiB",
            flag,
            long.to_str().unwrap(),
        ]);
        assert!(!o.status.success());
        String::from_utf8_lossy(&o.stderr).to_string()
    };
    for (flag, what) in [("--control", "control socket"), ("--socket", "NBD socket")] {
        let e = args(flag);
        assert!(e.contains(what) && e.contains("at most 107") && e.contains(flag), "{e}");
    }
    assert!(!ssd.exists() && !hdd.exists(), "nothing is made");
}
