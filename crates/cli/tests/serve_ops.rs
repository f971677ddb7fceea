//! `tierwise serve` operations end to end: `replay --nbd` beside its prediction, Prometheus
//! metrics and a config file, the foreground server and its systemd unit, OTF-AST moving
//! sub-LUNs under a client, and block status through nbdinfo and nbdcopy. Skipped (saying so)
//! where nbdkit or qemu-io is missing; `scripts/test-all.sh` installs them.

mod serve_common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serve_common::*;

/// `tierwise replay --nbd` runs a block trace against a served device on an emulated HDD and
/// reports the measurement beside the simulator's prediction (the numbers are figures for
/// docs/PERFORMANCE.md; here only that both are there, whole and consistent).
#[test]
fn replay_nbd_measures_and_predicts_the_same_requests() {
    if !can_serve() {
        return;
    }
    let s = Served::create_with("cache:mode=write-back", "4MiB", "64MiB", &["--emulate-hdd", "wd5000aaks"]);
    let trace = s.dir.path().join("zipf.mqsim");
    let out = tierwise(&[
        "trace",
        "gen",
        "-q",
        "-o",
        trace.to_str().unwrap(),
        "--requests",
        "600",
        "--objects",
        "4000",
        "--write-fraction",
        "0.2",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let json = s.dir.path().join("replay.json");
    let out = tierwise(&[
        "replay",
        "-q",
        "--nbd",
        &s.uri(),
        trace.to_str().unwrap(),
        "--workers",
        "2",
        "--json",
        json.to_str().unwrap(),
    ]);
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("EMULATED") && text.contains("predicted"), "{text}");
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(r["measured"]["requests"], 600, "{r}");
    assert_eq!(r["measured"]["errors"], 0, "{r}");
    assert_eq!(r["predicted"]["requests"], 600, "{r}");
    assert_eq!(r["policy"], "cache:mode=write-back");
    assert!(
        r["measured"]["iops"].as_f64().unwrap_or(0.0) > 0.0 && r["predicted"]["iops"].as_f64().unwrap_or(0.0) > 0.0
    );
    assert!(r["measured"]["ssd_read_share"].as_f64().is_some(), "{r}");
    // The emulated HDD says what it did, as the simulator's device does.
    let st = s.stats();
    let emulated = st["emulated_devices"].as_array().cloned().unwrap_or_default();
    assert_eq!(emulated.len(), 1, "{st}");
    // Behind mq-deadline with NCQ unless told otherwise, as a Linux host drives a SATA disk; the
    // prediction takes the same queue.
    assert!(
        emulated[0]["label"]
            .as_str()
            .is_some_and(|l| l.starts_with("hdd wd5000aaks") && l.ends_with("mq-deadline queue)")),
        "{st}"
    );
    assert_eq!(r["hdd_queue"], "mq-deadline", "{r}");
    assert!(emulated[0]["stats"]["reads"].as_u64().is_some_and(|n| n > 0), "{st}");
    assert!(emulated[0]["stats"]["busy_ns"].as_u64().is_some_and(|n| n > 0), "{st}");
    // The prediction adds the calibrated NBD front end to each request unless told otherwise.
    assert_eq!(r["front_end_us"], 30.0, "{r}");
    assert!(text.contains("30 µs per request outside the devices"), "{text}");
    // On this host's cores, shared by client and server.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get() as u64);
    assert_eq!(r["front_end_cores"].as_u64(), Some(cores), "{r}");
    let out = tierwise(&["replay", "--nbd", &s.uri(), trace.to_str().unwrap(), "--nbd-cores", "many"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("--nbd-cores many") && err.contains("auto"), "{err}");
    let out = tierwise(&["replay", "--nbd", &s.uri(), trace.to_str().unwrap(), "--nbd-request-cost", "fast"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("--nbd-request-cost fast") && err.contains("auto"), "{err}");
    // A queue for an HDD that is not emulated, or one that does not exist, is refused.
    let out = tierwise(&["serve", "--ssd", "a.img", "--hdd", "b.img", "--hdd-queue", "none"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("--emulate-hdd"), "{err}");
    let out =
        tierwise(&["serve", "--ssd", "a.img", "--hdd", "b.img", "--emulate-hdd", "wd5000aaks", "--hdd-queue", "cfq"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("mq-deadline") && err.contains("fifo"), "{err}");
    // A URI that is not NBD is refused with the forms allowed.
    let out = tierwise(&["replay", "--nbd", "http://x", trace.to_str().unwrap()]);
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("nbd+unix"));
}

/// `--metrics ADDR` serves the device's counters in Prometheus text format on loopback, and a
/// `--config` file gives the same settings as the flags.
#[test]
fn metrics_and_a_config_file() {
    if !can_serve() {
        return;
    }
    let s = Served { dir: tempfile::tempdir().unwrap(), policy: "cache:mode=write-back".into() };
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let config = s.dir.path().join("serve.toml");
    std::fs::write(
        &config,
        format!(
            "ssd = \"{}\"\nhdd = \"{}\"\npolicy = \"cache:mode=write-back\"\nmetrics = \"127.0.0.1:{port}\"\nmovers = 3\n",
            s.ssd().display(),
            s.hdd().display()
        ),
    )
    .unwrap();
    let out = tierwise(&[
        "serve",
        "--config",
        config.to_str().unwrap(),
        "--create",
        "--ssd-size",
        "1MiB",
        "--hdd-size",
        "8MiB",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    s.wait_served();
    s.qemu_io(&["write -P 7 0 256k".to_string(), "read -P 7 0 256k".to_string(), "flush".to_string()]);
    assert_eq!(s.stats()["movers"], 3);
    use std::io::{Read, Write};
    let mut conn = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    conn.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").unwrap();
    let mut body = String::new();
    conn.read_to_string(&mut body).unwrap();
    assert!(body.starts_with("HTTP/1.1 200"), "{body}");
    assert!(body.contains("tierwise_block_write_bytes_total 262144"), "{body}");
    assert!(body.contains("# TYPE tierwise_block_dirty_bytes gauge"), "{body}");
    // A key the file does not know is refused, naming it.
    std::fs::write(&config, "ssd = \"x\"\nhdd = \"y\"\ncolour = \"blue\"\n").unwrap();
    let out = tierwise(&["serve", "--config", config.to_str().unwrap()]);
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("colour"));
}

/// The shipped unit verifies, and a foreground server stopped by SIGTERM (what systemd sends)
/// exits cleanly with the data flushed before it readable after a restart.
#[test]
fn foreground_server_stops_cleanly_on_sigterm_and_its_unit_verifies() {
    if !can_serve() {
        return;
    }
    let unit =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../contrib/systemd/tierwise-serve@.service"))
            .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tierwise-serve@vol1.service");
    std::fs::write(&path, unit.replace("/usr/local/bin/tierwise", env!("CARGO_BIN_EXE_tierwise"))).unwrap();
    match Command::new("systemd-analyze").args(["verify", "--man=no"]).arg(&path).output() {
        Ok(o) => assert!(o.status.success(), "systemd-analyze verify: {}", String::from_utf8_lossy(&o.stderr)),
        Err(_) => eprintln!("systemd-analyze not installed: the unit is not verified here"),
    }
    let s = Served::create("cache:mode=write-back", "1MiB", "8MiB");
    s.signal("-TERM");
    let mut child = Command::new(env!("CARGO_BIN_EXE_tierwise"))
        .args(["serve", "--foreground", "--ssd", s.ssd().to_str().unwrap(), "--hdd", s.hdd().to_str().unwrap()])
        .args(["--policy", "cache:mode=write-back"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    s.wait_served();
    s.qemu_io(&["write -P 0x42 0 512k".to_string(), "flush".to_string(), "write -P 0x43 512k 64k".to_string()]);
    // The child is nbdkit itself now: SIGTERM stops the device cleanly.
    let _ = Command::new("kill").arg("-TERM").arg(child.id().to_string()).status();
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        assert!(Instant::now() < deadline, "the foreground server did not stop on SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "exit {status}");
    let _ = std::fs::remove_file(s.dir.path().join("ssd.img.sock.control.pid"));
    let out = s.start();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // Flushed, and the clean stop kept the unflushed write too.
    s.qemu_io(&["read -P 0x42 0 512k".to_string(), "read -P 0x43 512k 64k".to_string()]);
}

#[test]
fn otf_ast_moves_sub_luns_while_a_client_writes_to_them() {
    if !can_serve() {
        return;
    }
    // 64 KiB sub-LUNs moving at 256 KiB/s (a quarter second each), promoted after one
    // concentrated second: a client hammering two of them writes while they move.
    let spec = "otf-ast:t=1s,i=10,n=2,c=1,o=2,promote-time=0,demote-time=0";
    let s = Served::create_with(spec, "320KiB", "4MiB", &["--block-size", "64KiB", "--move-rate", "256KiB"]);
    let mut c = tierwise_nbd_client::NbdClient::connect(&s.uri()).unwrap();
    let mut reference = vec![0u8; c.size() as usize];
    let mut rng = Rng::new(0x000f_7a57);
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(5) {
        let len = 512 * (1 + rng.below(16));
        let off = rng.below(128 * 1024 - len) / 512 * 512;
        let (o, l) = (off as usize, len as usize);
        if rng.below(2) == 0 {
            let v = (rng.next_u64() & 0xff) as u8;
            c.write(&vec![v; l], off, false).unwrap();
            reference[o..o + l].fill(v);
        } else {
            let mut buf = vec![0u8; l];
            c.read(&mut buf, off).unwrap();
            assert!(buf == reference[o..o + l], "a read of {len} at {off} differs during the moves");
        }
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while s.stats()["device"]["queued"].as_u64().unwrap_or(1) > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut all = vec![0u8; reference.len()];
    c.read(&mut all, 0).unwrap();
    assert!(all == reference, "the device differs from the plain image after the moves");
    c.disconnect().unwrap();
    let st = s.stats();
    let d = &st["device"];
    assert!(d["moves_done"][0].as_u64().unwrap_or(0) >= 1, "no sub-LUN was promoted: {st}");
    assert!(d["buffered_writes"].as_u64().unwrap_or(0) > 0, "no write landed in a move's buffer: {st}");
    assert_eq!(d["anomalies"], 0, "{st}");
}

#[test]
fn block_status_reports_holes_that_a_sparse_copy_skips() {
    if !can_serve() {
        return;
    }
    let s = Served::create("cache:mode=write-back", "256KiB", "8MiB");
    let cmds = ["write -P 0xab 1M 64k", "write -P 0xcd 5M 4k", "write -P 0xef 6M 64k", "discard 6M 64k", "flush"];
    s.qemu_io(&cmds.map(String::from));
    let out = Command::new("nbdinfo").args(["--map", &s.uri()]).output().unwrap();
    let map = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{map}{}", String::from_utf8_lossy(&out.stderr));
    // "offset length type description", one line per extent.
    let extents: Vec<(u64, u64, bool)> = map
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            Some((f.first()?.parse().ok()?, f.get(1)?.parse().ok()?, l.contains("hole")))
        })
        .collect();
    let kind_at = |at: u64| extents.iter().find(|e| e.0 <= at && at < e.0 + e.1).map(|e| e.2);
    let mib = 1u64 << 20;
    assert_eq!(kind_at(0), Some(true), "never written: a hole\n{map}");
    assert_eq!(kind_at(mib), Some(false), "written: data\n{map}");
    assert_eq!(kind_at(5 * mib), Some(false), "written: data\n{map}");
    assert_eq!(kind_at(6 * mib), Some(true), "discarded: a hole again\n{map}");
    // nbdcopy skips what block status calls holes: the copy must still equal the device.
    let copy = s.dir.path().join("copy.img");
    let out = Command::new("nbdcopy").args([&s.uri(), copy.to_str().unwrap()]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let bytes = std::fs::read(&copy).unwrap();
    let mut want = vec![0u8; bytes.len()];
    want[mib as usize..(mib + 65536) as usize].fill(0xab);
    want[5 * mib as usize..(5 * mib + 4096) as usize].fill(0xcd);
    assert!(bytes == want, "the sparse copy differs from what was written");
}

/// `--direct`: the images open with O_DIRECT, and unaligned client writes (read-modify-write
/// of the 4 KiB blocks they touch) leave the device holding what a flat image given the same
/// writes holds — through the SSD (write-back) and after a restart without `--direct`.
#[test]
fn direct_io_serves_what_a_flat_image_holds() {
    if !can_serve() {
        return;
    }
    let s = Served::create_with("cache:mode=write-back", "1MiB", "16MiB", &["--direct"]);
    assert_eq!(s.stats()["direct_io"], true, "{}", s.stats());
    let mut seed = 0x5EED_u64;
    let mut next = |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let cmds: Vec<String> = (0..80)
        .map(|i| {
            let len = 1 + next(20_000);
            let off = next((16 << 20) - len);
            format!("write -P {} {off} {len}", 1 + i % 250)
        })
        .collect();
    s.qemu_io(&cmds);
    let flat = s.dir.path().join("flat.img");
    std::fs::File::create(&flat).unwrap().set_len(16 << 20).unwrap();
    let mut c = Command::new("qemu-io");
    c.args(["-f", "raw", flat.to_str().unwrap()]);
    for cmd in &cmds {
        c.arg("-c").arg(cmd);
    }
    assert!(c.output().unwrap().status.success());
    let copy = |name: &str| {
        let out = s.dir.path().join(name);
        let o = Command::new("nbdcopy").args([&s.uri(), out.to_str().unwrap()]).output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        std::fs::read(out).unwrap()
    };
    let want = std::fs::read(&flat).unwrap();
    assert!(copy("direct.img") == want, "the device under --direct differs from the flat image");
    // The prediction for a --direct device charges what direct I/O issues.
    let trace = s.dir.path().join("zipf.mqsim");
    let made =
        tierwise(&["trace", "gen", "-q", "-o", trace.to_str().unwrap(), "--requests", "200", "--objects", "500"]);
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let out = tierwise(&["replay", "-q", "--nbd", &s.uri(), trace.to_str().unwrap(), "--workers", "2"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("direct I/O in 4096-byte units"), "{text}");
    s.signal("-TERM");
    let out = s.start();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(s.stats()["direct_io"], false);
    assert!(copy("buffered.img") == want, "after a restart without --direct the device differs");
}
