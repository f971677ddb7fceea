//! The served device against its prediction on a device the simulator shares no code with
//! (issue 35, section 4): the HDD image behind nbdkit's `noparallel`, `delay` and `rate`
//! filters, reached through nbdfuse and served with `--direct`. The prediction knows nothing of
//! the filters' settings: `tierwise calibrate` measures the throttled file through the same
//! path, and the prediction uses that preset. nbdkit's `stats` filter counts what reached it.
//! `scripts/validate-serve.sh` with `DEVICE=nbdkit` runs the same check on every bundled trace.

#![expect(clippy::unwrap_used, reason = "a failing setup should stop the test loudly")]

mod serve_common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serve_common::*;
use tierwise_testkit::Need;

/// The throttle: nbdkit serving `image` one request at a time, each after a fixed delay and
/// within a bandwidth, as the file `dir/mnt/nbd`. Taken down (and its counters written) on drop.
struct Throttle {
    dir: PathBuf,
    nbdfuse: Child,
    stopped: bool,
}

const FILTERS: [&str; 4] = ["delay-read=2ms", "delay-write=1ms", "rate=800M", "serialize=all-requests"];

impl Throttle {
    fn up(image: &Path, dir: &Path) -> Throttle {
        std::fs::create_dir_all(dir.join("mnt")).unwrap();
        let stats = format!("statsfile={}", dir.join("stats.txt").display());
        let status = Command::new("nbdkit")
            .arg("-U")
            .arg(dir.join("hdd.sock"))
            .arg("-P")
            .arg(dir.join("nbdkit.pid"))
            .args(["--filter=stats", "--filter=noparallel", "--filter=delay", "--filter=rate", "file"])
            .arg(image)
            .args(FILTERS)
            .arg(stats)
            .status()
            .unwrap();
        assert!(status.success(), "nbdkit did not start");
        let nbdfuse = Command::new("nbdfuse")
            .arg(dir.join("mnt/nbd"))
            .arg("--unix")
            .arg(dir.join("hdd.sock"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let t = Throttle { dir: dir.to_path_buf(), nbdfuse, stopped: false };
        let deadline = Instant::now() + Duration::from_secs(20);
        while !t.file().exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(t.file().exists(), "nbdfuse did not mount {}", t.dir.display());
        t
    }
    fn file(&self) -> PathBuf {
        self.dir.join("mnt/nbd")
    }
    /// Unmounts, stops nbdkit and returns its read and write commands (as it counted them).
    fn down(mut self) -> u64 {
        self.stop();
        let text = std::fs::read_to_string(self.dir.join("stats.txt")).unwrap();
        text.lines()
            .filter(|l| l.starts_with("read:") || l.starts_with("write:"))
            .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
            .sum()
    }
    fn stop(&mut self) {
        if std::mem::replace(&mut self.stopped, true) {
            return;
        }
        let _ = Command::new("fusermount3").args(["-u", "-z"]).arg(self.dir.join("mnt")).status();
        let _ = self.nbdfuse.kill();
        let _ = self.nbdfuse.wait();
        if let Some(pid) =
            std::fs::read_to_string(self.dir.join("nbdkit.pid")).ok().and_then(|p| p.trim().parse::<i32>().ok())
        {
            stop_server(pid, "-TERM", "nbdkit");
            let _ = std::fs::remove_file(self.dir.join("nbdkit.pid"));
        }
    }
}

impl Drop for Throttle {
    /// A test that did not stop it (it failed half way): the shared teardown, which asserts
    /// nothing (a panic inside a panic's unwinding would abort the test binary).
    fn drop(&mut self) {
        if !self.stopped {
            let _ = self.nbdfuse.kill();
            tierwise_testkit::teardown::release(&tierwise_testkit::teardown::Targets::under(&[&self.dir]));
            let _ = self.nbdfuse.wait();
        }
    }
}

fn run(args: &[&str]) -> String {
    let out = tierwise(args);
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "tierwise {args:?}:\n{text}");
    text
}

struct Measured {
    iops: f64,
    predicted_iops: f64,
    hdd_commands: u64,
    predicted_hdd_commands: u64,
}

/// One architecture: made on a plain image in memory, served again with the HDD image behind
/// the throttle, the trace replayed beside its prediction from the calibrated presets.
fn replay_throttled(policy: &str, trace: &Path, presets: &Path) -> Measured {
    let dir = tierwise_testkit::shm_dir("tierwise-throttled").unwrap();
    let s = Served::create_in(dir, policy, "4MiB", "256MiB", &[]);
    s.signal("-TERM");
    let throttle = Throttle::up(&s.hdd(), &s.dir.path().join("throttle"));
    run(&["serve", "--ssd", s.ssd().to_str().unwrap(), "--hdd", throttle.file().to_str().unwrap(), "--direct"]);
    s.wait_served();
    let json = s.dir.path().join("replay.json");
    let uri = s.uri();
    let replay = [
        "replay",
        "-q",
        "--nbd",
        &uri,
        trace.to_str().unwrap(),
        "--workers",
        "4",
        "--devices",
        presets.to_str().unwrap(),
        "--hdd",
        "ssd:throttled",
        "--ssd-model",
        "memory",
        "--hdd-queue",
        "fifo",
        "--json",
        json.to_str().unwrap(),
    ];
    run(&replay);
    s.signal("-TERM");
    let hdd_commands = throttle.down();
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(r["measured"]["errors"], 0, "{policy}: {r}");
    let p = &r["predicted"];
    Measured {
        iops: r["measured"]["iops"].as_f64().unwrap(),
        predicted_iops: p["iops"].as_f64().unwrap(),
        hdd_commands,
        predicted_hdd_commands: p["hdd"]["reads"].as_u64().unwrap() + p["hdd"]["writes"].as_u64().unwrap(),
    }
}

/// HDD-only and a write-back cache on the throttled device: the disk commands nbdkit counted
/// are the prediction's, and the ranking measured is the ranking predicted.
#[test]
fn a_device_model_the_simulator_shares_no_code_with_ranks_as_predicted() {
    if !can_serve() || !tierwise_testkit::require(&[Need::Fuse, Need::Tool("nbdfuse", "libnbd-bin")]) {
        return;
    }
    // The SSD image in memory, as the validation script has it.
    let root = tierwise_testkit::shm_dir("tierwise-throttled").unwrap();
    let root = root.path();
    // Calibrate the throttled file and the memory the SSD image lives in.
    let cal = root.join("calibration");
    std::fs::create_dir_all(cal.join("memory")).unwrap();
    let image = cal.join("image");
    std::fs::File::create(&image).unwrap().set_len(256 << 20).unwrap();
    let throttle = Throttle::up(&image, &cal.join("throttle"));
    let (throttled, memory) = (cal.join("throttled.toml"), cal.join("memory.toml"));
    let quick = ["-q", "--seconds", "1", "--depths", "1,8", "--kind", "ssd"];
    let report = run(&[
        &["calibrate", throttle.file().to_str().unwrap(), "--overwrite", "--name", "throttled", "-o"][..],
        &[throttled.to_str().unwrap()],
        &quick,
    ]
    .concat());
    drop(throttle);
    run(&[
        &["calibrate", cal.join("memory").to_str().unwrap(), "--size", "64MiB", "--name", "memory", "-o"][..],
        &[memory.to_str().unwrap()],
        &quick,
    ]
    .concat());
    let presets = root.join("presets.toml");
    let text = std::fs::read_to_string(&throttled).unwrap() + &std::fs::read_to_string(&memory).unwrap();
    std::fs::write(&presets, &text).unwrap();
    // One request at a time: the fit finds no scaling with depth (reads take about 2 ms).
    assert!(text.contains("queue_curve = \"saturating\""), "{report}\n{text}");
    // A Zipf workload whose hot set fits the SSD, with a fifth of it writes.
    let trace = root.join("zipf.mqsim");
    let trace_arg = trace.to_str().unwrap();
    run(&["trace", "gen", "-q", "-o", trace_arg, "--requests", "1500", "--objects", "4000", "--write-fraction", "0.2"]);
    let hdd_only = replay_throttled("hdd-only", &trace, &presets);
    let cache = replay_throttled("cache:mode=write-back", &trace, &presets);
    let figures = format!(
        "hdd-only {:.0} IOPS measured, {:.0} predicted, {} / {} disk commands; \
         write-back {:.0} measured, {:.0} predicted, {} / {} disk commands",
        hdd_only.iops,
        hdd_only.predicted_iops,
        hdd_only.hdd_commands,
        hdd_only.predicted_hdd_commands,
        cache.iops,
        cache.predicted_iops,
        cache.hdd_commands,
        cache.predicted_hdd_commands
    );
    eprintln!("{figures}");
    // Every request reaches the throttled disk as one command (besides the server's start-up
    // reads and final checkpoint, a few commands).
    let off = hdd_only.hdd_commands.abs_diff(hdd_only.predicted_hdd_commands) as f64;
    assert!(off <= 0.05 * hdd_only.predicted_hdd_commands as f64, "{figures}");
    // The ranking survives, and neither measurement is far from its prediction (the band is
    // wide: the figures for docs/PERFORMANCE.md come from the script, not from a unit test).
    assert!(cache.iops > hdd_only.iops && cache.predicted_iops > hdd_only.predicted_iops, "{figures}");
    for (m, p) in [(hdd_only.iops, hdd_only.predicted_iops), (cache.iops, cache.predicted_iops)] {
        assert!((0.5..2.0).contains(&(m / p)), "{figures}");
    }
}
