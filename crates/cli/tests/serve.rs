//! `tierwise serve` end to end with real NBD clients: qemu-io pattern tests for every servable
//! architecture (FUA, flush, discard, write zeroes, unaligned I/O, I/O across blocks and to
//! blocks mid-move), ext4 on nbdfuse + a loop device checked by fsck, kill -9 of the server
//! while blocks move, and bad images refused with nothing changed.
//! Skipped (saying so) where nbdkit or qemu-io is missing; `scripts/test-all.sh` installs them.

mod serve_common;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serve_common::*;

/// The qemu-io commands that write the test patterns, and those that read them back.
fn patterns() -> (Vec<String>, Vec<String>) {
    let w = [
        "write -P 0x11 0 64k",
        "write -P 0x22 4000 10000",  // unaligned, across three blocks
        "write -f -P 0x33 1M 8k",    // FUA
        "write -P 0x44 1000001 777", // odd offset and length inside one block
        "flush",
        "write -z 2M 64k",
        "discard 3M 64k",
    ];
    let r = [
        "read -P 0x11 0 4000",
        "read -P 0x22 4000 10000",
        "read -P 0x11 14000 51536",
        "read -P 0x33 1M 8k",
        "read -P 0x44 1000001 777",
        "read -P 0 2M 64k",
    ];
    (w.map(String::from).to_vec(), r.map(String::from).to_vec())
}

/// 32 regions of 64 KiB, each its own pattern: far more than the SSD holds, so blocks are
/// copied, evicted and written back while they are read and written.
fn churn(round: u32) -> (Vec<String>, Vec<String>) {
    let mut w = Vec::new();
    let mut r = Vec::new();
    for i in 0..32u32 {
        let p = (i * 7 + round * 13) % 250 + 1;
        w.push(format!("write -P {p} {} 64k", 4 * 1024 * 1024 + i * 65536));
        // Re-read the first regions while later ones are written: hits, fills mid-move.
        w.push(format!("read -P {} {} 64k", (round * 13) % 250 + 1, 4 * 1024 * 1024));
        r.push(format!("read -P {p} {} 64k", 4 * 1024 * 1024 + i * 65536));
    }
    (w, r)
}

#[test]
fn qemu_io_patterns_hold_for_every_servable_architecture_and_survive_a_restart() {
    if !can_serve() {
        return;
    }
    // RAM cache levels smaller than the SSD, so pages go down to it and come back.
    let mut specs: Vec<String> = tierwise_block::servable_names()
        .iter()
        .map(|s| match *s {
            "hca" => "hca:l1=64KiB,tb=32KiB".to_string(),
            "zfs-l2arc-like" => "zfs-l2arc-like:l1=64KiB,feed=10ms,write-max=128KiB,write-boost=128KiB".to_string(),
            other => other.to_string(),
        })
        .collect();
    specs.extend(["cache:mode=write-back".to_string(), "cache:mode=read-only".to_string()]);
    for spec in specs {
        let s = Served::create(&spec, "256KiB", "8MiB");
        let (w, r) = patterns();
        s.qemu_io(&w);
        s.qemu_io(&r);
        for round in 0..3 {
            let (w, r) = churn(round);
            s.qemu_io(&w);
            s.qemu_io(&r);
        }
        let st = s.stats();
        assert_eq!(st["device"]["anomalies"], 0, "{spec}: {st}");
        if spec.starts_with("cache") || spec.contains("-like") || spec.starts_with("greendm") || spec.starts_with("hca")
        {
            let moved = st["device"]["moved_bytes"].as_u64().unwrap_or(0);
            assert!(moved > 0, "{spec}: nothing moved: {st}");
        }
        // A clean stop, a restart: everything reads back.
        s.signal("-TERM");
        let out = s.start();
        assert!(out.status.success(), "{spec}: restart: {}", String::from_utf8_lossy(&out.stderr));
        s.qemu_io(&r);
        let (_, churned) = churn(2);
        s.qemu_io(&churned);
        // Write-back: flush writes every dirty block back, then the HDD alone holds the data.
        let out = tierwise(&["flush", s.control().to_str().unwrap()]);
        assert!(out.status.success(), "{spec}: {}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(s.stats()["device"]["dirty_bytes"], 0, "{spec}");
    }
}

#[test]
fn kill_9_while_blocks_move_loses_no_flushed_byte() {
    if !can_serve() {
        return;
    }
    // TIERWISE_SERVE_CRASH_TRIALS=100 for the long run (scripts/serve-crash.sh).
    let trials: u64 = tierwise_testkit::trials("TIERWISE_SERVE_CRASH_TRIALS", 10, 100);
    for (trial, policy) in
        (0..trials).zip(["cache:mode=write-back", "dm-cache-smq-like", "open-cas-like:cache-mode=wb"].iter().cycle())
    {
        let s = Served::create(policy, "512KiB", "8MiB");
        const REGIONS: u64 = 64;
        let mut flushed = vec![0u32; REGIONS as usize];
        let mut rng = 0x2545_f491_4f6c_dd1du64 ^ (trial * 7919);
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let kill_after = Duration::from_millis(300 + next() % 900);
        let started = Instant::now();
        let mut killed = false;
        let mut round = 0u32;
        while !killed {
            round += 1;
            // Each round writes a few regions, reads others (copies into the SSD) and flushes.
            let mut cmds = Vec::new();
            let mut written = Vec::new();
            for _ in 0..6 {
                let region = next() % REGIONS;
                let p = (round * 31 + region as u32) % 254 + 1;
                cmds.push(format!("write -P {p} {} 64k", region * 65536));
                cmds.push(format!("read {} 64k", (next() % REGIONS) * 65536));
                written.push((region, p));
            }
            cmds.push("flush".to_string());
            let child = Command::new("qemu-io")
                .args(["-f", "raw", &s.uri()])
                .args(cmds.iter().flat_map(|c| ["-c", c.as_str()]))
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            if started.elapsed() >= kill_after {
                // Kill while this round's writes and the movers are in flight.
                std::thread::sleep(Duration::from_millis(next() % 20));
                let pid = s.pid().unwrap();
                let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
                killed = true;
            }
            let out = child.wait_with_output().unwrap();
            let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
            let ok = out.status.success() && !text.contains("rror") && !text.contains("failed");
            if ok && !killed {
                for (region, p) in written {
                    flushed[region as usize] = p;
                }
            } else {
                assert!(killed, "trial {trial}: qemu-io failed before the kill:\n{text}");
                // The interrupted round's regions may hold their old or new bytes.
                for (region, _) in written {
                    flushed[region as usize] = u32::MAX;
                }
            }
        }
        // Wait for the killed server to be gone, then restart and check.
        s.signal("-KILL");
        let out = s.start();
        assert!(out.status.success(), "trial {trial}: restart after kill -9: {}", String::from_utf8_lossy(&out.stderr));
        let checks: Vec<String> = flushed
            .iter()
            .enumerate()
            .filter(|(_, p)| **p != u32::MAX)
            .map(|(r, p)| format!("read -P {p} {} 64k", r as u64 * 65536))
            .collect();
        s.qemu_io(&checks);
        assert_eq!(s.stats()["device"]["anomalies"], 0, "trial {trial}");
    }
}

#[test]
fn bad_images_are_refused_and_left_unchanged() {
    if !can_serve() {
        return;
    }
    let s = Served::create("cache:mode=write-back", "256KiB", "4MiB");
    s.qemu_io(&["write -P 0x5a 0 256k".to_string(), "flush".to_string()]);
    s.signal("-TERM");
    let ssd = s.ssd();
    let hdd = s.hdd();
    let sum = |p: &Path| std::fs::read(p).unwrap();
    let serve_with = |ssd: &Path, hdd: &Path, extra: &[&str]| {
        tierwise(&[&["serve", "--ssd", ssd.to_str().unwrap(), "--hdd", hdd.to_str().unwrap()], extra].concat())
    };
    let serve = |ssd: &Path, hdd: &Path| serve_with(ssd, hdd, &["--policy", "cache:mode=write-back"]);
    let refused = |out: Output, want: &str| {
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(!out.status.success() && err.contains(want), "expected a refusal naming {want:?}, got: {err}");
    };
    let (before_ssd, before_hdd) = (sum(&ssd), sum(&hdd));
    refused(serve(&hdd, &ssd), "swapped");
    refused(serve(&ssd, &s.dir.path().join("missing.img")), "missing.img");
    // Another device's HDD image.
    let other = Served::create("cache", "256KiB", "4MiB");
    other.signal("-TERM");
    refused(serve(&ssd, &other.hdd()), "different devices");
    // A resized HDD image.
    let grown = s.dir.path().join("grown.img");
    std::fs::copy(&hdd, &grown).unwrap();
    std::fs::OpenOptions::new().write(true).open(&grown).unwrap().set_len(before_hdd.len() as u64 + 4096).unwrap();
    refused(serve(&ssd, &grown), "resized");
    assert!(sum(&ssd) == before_ssd && sum(&hdd) == before_hdd, "a refused start changed an image");
    // Damaged checkpoints: one copy is survivable, all four are not.
    let copy = s.dir.path().join("ssd-copy.img");
    std::fs::copy(&ssd, &copy).unwrap();
    let mut img = std::fs::read(&copy).unwrap();
    let meta_len = {
        // The superblock's checkpoint length (offset 48, little-endian).
        u64::from_le_bytes(img[48..56].try_into().unwrap()) as usize
    };
    img[4096 + 100] ^= 0xff;
    std::fs::write(&copy, &img).unwrap();
    let out = serve(&copy, &hdd);
    assert!(out.status.success(), "one damaged checkpoint copy: {}", String::from_utf8_lossy(&out.stderr));
    let pid = std::fs::read_to_string(s.dir.path().join("ssd-copy.img.sock.control.pid")).unwrap();
    // The next start needs this server's image lock released, so it must really be gone.
    stop_server(pid.trim().parse().unwrap(), "-TERM", "the server on one damaged checkpoint copy");
    let mut img = std::fs::read(&copy).unwrap();
    for c in 0..2 {
        img[4096 + c * meta_len + 20] ^= 0xff;
    }
    std::fs::write(&copy, &img).unwrap();
    let mut h = std::fs::read(&hdd).unwrap();
    let hdd_data = 4 * 1024 * 1024;
    for c in 0..2 {
        h[hdd_data + c * meta_len + 20] ^= 0xff;
    }
    let damaged_hdd = s.dir.path().join("hdd-damaged.img");
    std::fs::write(&damaged_hdd, &h).unwrap();
    let (b1, b2) = (sum(&copy), sum(&damaged_hdd));
    refused(serve(&copy, &damaged_hdd), "no valid metadata checkpoint");
    assert!(sum(&copy) == b1 && sum(&damaged_hdd) == b2, "a refused start changed an image");
    // In use by another server: its pid file names it; started on another socket (so another
    // pid file), the images' lock refuses it.
    let out = s.start();
    assert!(out.status.success());
    refused(serve(&ssd, &hdd), "already running");
    let other_socket = s.dir.path().join("other.sock");
    refused(serve_with(&ssd, &hdd, &["--socket", other_socket.to_str().unwrap()]), "in use");
}

#[test]
fn ext4_on_nbdfuse_and_a_loop_device_passes_fsck_after_a_workload() {
    use tierwise_testkit::Need;
    if !can_serve()
        || !tierwise_testkit::require(&[
            Need::Fuse,
            Need::Root,
            Need::Tool("nbdfuse", "libnbd-bin"),
            Need::Tool("mkfs.ext4", "e2fsprogs"),
            Need::Tool("losetup", "mount"),
        ])
    {
        return;
    }
    let s = Served::create("cache:mode=write-back", "8MiB", "256MiB");
    let fuse_dir = s.dir.path().join("fuse");
    std::fs::create_dir(&fuse_dir).unwrap();
    let mut nbdfuse = Command::new("nbdfuse")
        .arg(&fuse_dir)
        .arg("--unix")
        .arg(s.socket())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Whatever happens, everything is taken down before asserting: the ext4 mount, the loop
    // device on nbdfuse's file, nbdfuse itself (the shared teardown, also on a panic).
    let down = tierwise_testkit::teardown::Guard(tierwise_testkit::teardown::Targets {
        dirs: vec![fuse_dir.clone()],
        mounts: vec![s.dir.path().join("mnt")],
        pids: vec![nbdfuse.id() as i32],
    });
    let file = fuse_dir.join("nbd");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !file.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let sh = |script: &str| {
        let out = Command::new("timeout").args(["180", "sh", "-ec", script]).output().unwrap();
        (
            out.status.success(),
            format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)),
        )
    };
    let mnt = s.dir.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let script = format!(
        "loop=$(losetup -f --show {file})
         echo $loop > {dir}/loop
         mkfs.ext4 -q -F $loop
         mount $loop {mnt}
         mkdir -p {mnt}/a/b
         for i in $(seq 1 40); do head -c $((i * 37 * 1024)) /dev/urandom > {mnt}/a/f$i; done
         cp -r {mnt}/a {mnt}/copy
         for i in $(seq 1 40); do cat {mnt}/a/f$i >> {mnt}/a/b/all; done
         rm {mnt}/a/f1 {mnt}/a/f2
         {tw} trace gen-files postmark -q --scale 0.02 -o {dir}/postmark.csv
         mkdir {mnt}/pm
         {tw} replay -q --fs {mnt}/pm {dir}/postmark.csv --no-sim --workers 2
         (cd {mnt} && find . -type f ! -name sums -exec sha256sum {{}} + | sort -k2 > {dir}/sums)
         umount {mnt}
         fsck.ext4 -fn $loop
         mount $loop {mnt}
         (cd {mnt} && find . -type f -exec sha256sum {{}} + | sort -k2 > {dir}/sums2)
         umount {mnt}
         losetup -d $loop
         cmp {dir}/sums {dir}/sums2",
        file = file.display(),
        tw = env!("CARGO_BIN_EXE_tierwise"),
        dir = s.dir.path().display(),
        mnt = mnt.display()
    );
    let (ok, text) = sh(&script);
    drop(down);
    let _ = nbdfuse.wait();
    assert!(ok, "ext4 on the served device:\n{text}");
    assert!(text.contains("clean") || text.contains("files"), "fsck said:\n{text}");
    let st = s.stats();
    assert_eq!(st["device"]["anomalies"], 0, "{st}");
    assert!(st["device"]["moved_bytes"].as_u64().unwrap_or(0) > 0, "nothing moved: {st}");
}

/// The served device against a plain image in memory: 100,000 seeded operations (reads,
/// writes of any alignment, FUA, flushes, trims, zeroes) through NBD on an SSD of 16 blocks,
/// so copies, evictions and write-backs run all the time; then four clients at once
/// (multi-conn) on disjoint quarters. In two halves of 50,000 operations from two seeds (the
/// first half is the first 50,000 of the old single run), each a test of its own so that they
/// run side by side, each well under the test runner's deadline; the extended run does 100,000
/// in each (`TIERWISE_NBD_OPS`).
#[test]
fn a_hundred_thousand_nbd_operations_match_a_plain_image_first_half() {
    nbd_operations_match_a_plain_image(0xfeed_beef);
}

#[test]
fn a_hundred_thousand_nbd_operations_match_a_plain_image_second_half() {
    nbd_operations_match_a_plain_image(0x5eed_0002);
}

#[expect(clippy::unwrap_used, reason = "a failing setup or I/O should stop the test loudly")]
fn nbd_operations_match_a_plain_image(seed: u64) {
    if !can_serve() {
        return;
    }
    let ops = tierwise_testkit::trials("TIERWISE_NBD_OPS", 50_000, 100_000);
    let s = Served::create("cache:mode=write-back", "96KiB", "2MiB");
    let mut c = tierwise_nbd_client::NbdClient::connect(&s.uri()).unwrap();
    let size = c.size();
    let mut reference = vec![0u8; size as usize];
    let mut rng = Rng::new(seed);
    for i in 0..ops {
        let hot = rng.below(4) != 0;
        let span = if hot { size / 8 } else { size };
        let len = match rng.below(4) {
            0 => 1 + rng.below(700),
            1 => 4096,
            2 => 512 * (1 + rng.below(24)),
            _ => 1 + rng.below(3 * 4096),
        };
        let off = rng.below(span - len);
        let (o, l) = (off as usize, len as usize);
        match rng.below(20) {
            0..=8 => {
                let mut buf = vec![0u8; l];
                c.read(&mut buf, off).unwrap();
                assert!(buf == reference[o..o + l], "op {i}: read of {len} at {off} differs from the plain image");
            }
            9..=16 => {
                let v = rng.next_u64();
                let data: Vec<u8> = (0..l).map(|j| (v >> (j % 8 * 8)) as u8 ^ j as u8).collect();
                c.write(&data, off, rng.below(30) == 0).unwrap();
                reference[o..o + l].copy_from_slice(&data);
            }
            17 => c.flush().unwrap(),
            18 => {
                c.write_zeroes(off, len as u32, false).unwrap();
                reference[o..o + l].fill(0);
            }
            _ => {
                c.trim(off, len as u32).unwrap();
                // A discarded block reads as zeroes or as before; it stays what it reads now.
                let (first, end) = (off.div_ceil(4096) * 4096, (off + len) / 4096 * 4096);
                if first < end {
                    let mut now = vec![0u8; (end - first) as usize];
                    c.read(&mut now, first).unwrap();
                    for (got, was) in now.chunks(4096).zip(reference[first as usize..end as usize].chunks(4096)) {
                        assert!(got == was || got.iter().all(|&x| x == 0), "op {i}: a discarded block reads neither");
                    }
                    reference[first as usize..end as usize].copy_from_slice(&now);
                }
            }
        }
    }
    let mut all = vec![0u8; size as usize];
    c.read(&mut all, 0).unwrap();
    assert!(all == reference, "the whole device differs from the plain image after {ops} operations");
    c.disconnect().unwrap();
    // Four connections at once, each on its own quarter.
    let quarter = size / 4;
    let uri = s.uri();
    let handles: Vec<_> = (0..4u64)
        .map(|t| {
            let uri = uri.clone();
            std::thread::spawn(move || {
                let mut c = tierwise_nbd_client::NbdClient::connect(&uri).unwrap();
                let mut rng = Rng::new(77 + t);
                let mut mine = vec![0u8; quarter as usize];
                c.read(&mut mine, t * quarter).unwrap();
                for _ in 0..5000 {
                    let len = 1 + rng.below(9000);
                    let off = rng.below(quarter - len);
                    let (o, l) = (off as usize, len as usize);
                    if rng.below(2) == 0 {
                        let v = (rng.next_u64() & 0xff) as u8;
                        c.write(&vec![v; l], t * quarter + off, false).unwrap();
                        mine[o..o + l].fill(v);
                    } else {
                        let mut buf = vec![0u8; l];
                        c.read(&mut buf, t * quarter + off).unwrap();
                        assert!(buf == mine[o..o + l], "client {t}: a read differs");
                    }
                }
                c.flush().unwrap();
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let st = s.stats();
    assert_eq!(st["device"]["anomalies"], 0, "{st}");
    assert!(st["device"]["moves_done"][3].as_u64().unwrap_or(0) > 100, "too few write-backs: {st}");
}
