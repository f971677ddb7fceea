//! Control, visibility and crash-safe state of a real mount: pins, flush, statistics that
//! survive a remount, the journal of moves after a crash, the dirty set against lying
//! modification times, rate-limited and cancelled moves, emulation labels, the Prometheus
//! endpoint, and readers and writers on files while they migrate.
//!
//! Skipped, with a message, where `/dev/fuse` cannot be opened.

#![expect(clippy::unwrap_used, reason = "a failing setup should stop the test loudly")]

mod common;

use std::fs;
use std::io::{Read, Write};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};

use common::{fuse_available, mount_with, stats, wait_until};
use tierwise_core::{Tier, WorkKind};
use tierwise_fs::control::{XATTR_CANCEL, XATTR_FLUSH, XATTR_MOVE_RATE, XATTR_PIN, XATTR_TIER};
use tierwise_fs::state::{MoveRecord, StateStore, epoch_ns};
use tierwise_fs::{DEFAULT_STATE_DIR, MountConfig};

fn tier(p: &Path) -> String {
    String::from_utf8(xattr::get(p, XATTR_TIER).unwrap().unwrap()).unwrap()
}

fn dirs() -> [tempfile::TempDir; 3] {
    [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()]
}

#[test]
fn pins_move_files_out_of_the_policy_fit_the_reserve_and_survive_a_remount() {
    if !fuse_available() {
        return;
    }
    let [ssd, hdd, mnt] = dirs();
    let cfg = MountConfig { pin_reserve: 64 << 10, ..MountConfig::new("on-demand-caching", 1 << 20) };
    let mut m = mount_with(ssd.path(), hdd.path(), mnt.path(), &cfg);
    let (a, big) = (m.mnt.join("a"), m.mnt.join("big"));
    fs::write(&a, vec![7u8; 40_000]).unwrap();
    fs::write(&big, vec![9u8; 100_000]).unwrap();
    xattr::set(&a, XATTR_PIN, b"ssd").unwrap();
    assert_eq!(tier(&a), "ssd");
    assert!(ssd.path().join("a").exists() && !hdd.path().join("a").exists(), "one copy, on the SSD");
    assert_eq!(xattr::get(&a, XATTR_PIN).unwrap().as_deref(), Some(&b"ssd"[..]));
    // The 64 KiB reserve holds `a` (40 KB); `big` does not fit next to it.
    let e = xattr::set(&big, XATTR_PIN, b"ssd").unwrap_err();
    assert_eq!(e.raw_os_error(), Some(nix::errno::Errno::ENOSPC as i32), "{e}");
    xattr::set(&big, XATTR_PIN, b"hdd").unwrap();
    assert_eq!(tier(&big), "hdd");
    // Reads of a pinned file never move it.
    for _ in 0..5 {
        assert_eq!(fs::read(&big).unwrap().len(), 100_000);
    }
    assert_eq!(tier(&big), "hdd");
    assert!(!ssd.path().join("big").exists());
    let s = stats(&m.mnt);
    assert_eq!((s.pinned_ssd_files, s.pinned_ssd_bytes, s.pinned_hdd_files), (1, 40_000, 1));
    // Writes to a pinned file land on its tier.
    fs::OpenOptions::new().append(true).open(&a).unwrap().write_all(b"tail").unwrap();
    assert_eq!(fs::metadata(ssd.path().join("a")).unwrap().len(), 40_004);
    // Renaming keeps the pin.
    fs::rename(&a, m.mnt.join("a2")).unwrap();
    m.unmount();
    let mut m = mount_with(ssd.path(), hdd.path(), mnt.path(), &cfg);
    let (a2, big) = (m.mnt.join("a2"), m.mnt.join("big"));
    assert_eq!(xattr::get(&a2, XATTR_PIN).unwrap().as_deref(), Some(&b"ssd"[..]), "the pin survived the remount");
    assert_eq!(xattr::get(&big, XATTR_PIN).unwrap().as_deref(), Some(&b"hdd"[..]));
    assert_eq!(fs::read(&a2).unwrap().len(), 40_004);
    // Unpinning gives the file back to the policy, which caches it on the next read.
    xattr::remove(&big, XATTR_PIN).unwrap();
    assert!(xattr::get(&big, XATTR_PIN).is_err() || xattr::get(&big, XATTR_PIN).unwrap().is_none());
    let _ = fs::read(&big).unwrap();
    wait_until("the unpinned file to be cached", || tier(&big) == "ssd+hdd");
    // Bad values and directories are refused.
    assert!(xattr::set(&a2, XATTR_PIN, b"tape").is_err());
    fs::create_dir(m.mnt.join("d")).unwrap();
    let e = xattr::set(m.mnt.join("d"), XATTR_PIN, b"ssd").unwrap_err();
    assert_eq!(e.raw_os_error(), Some(nix::errno::Errno::EISDIR as i32));
    m.unmount();
}

#[test]
fn flush_writes_back_everything_and_the_counters_survive_a_remount() {
    if !fuse_available() {
        return;
    }
    let [ssd, hdd, mnt] = dirs();
    let cfg = MountConfig::new("file-write-back", 1 << 20);
    let mut m = mount_with(ssd.path(), hdd.path(), mnt.path(), &cfg);
    for i in 0..10 {
        fs::write(m.mnt.join(format!("f{i}")), vec![i as u8; 10_000]).unwrap();
    }
    let s = stats(&m.mnt);
    assert_eq!(s.dirty_bytes, 100_000, "write-back: the SSD copies are dirty");
    assert!(s.session.writes_ssd >= 10);
    assert!(!hdd.path().join("f0").exists(), "not written back yet");
    xattr::set(&m.mnt, XATTR_FLUSH, b"1").unwrap();
    wait_until("the flush", || {
        let s = stats(&m.mnt);
        s.dirty_bytes == 0 && s.queue_depth == 0
    });
    for i in 0..10 {
        assert_eq!(fs::read(hdd.path().join(format!("f{i}"))).unwrap(), vec![i as u8; 10_000]);
    }
    let first = stats(&m.mnt);
    assert_eq!(first.session.writebacks, 10);
    assert_eq!(first.session.bytes_moved, 100_000);
    m.unmount();
    let m = mount_with(ssd.path(), hdd.path(), mnt.path(), &cfg);
    let s = stats(&m.mnt);
    assert_eq!(s.session.writebacks, 0, "a new mount starts its own counters");
    assert_eq!(s.total.writebacks, 10, "the volume's totals are kept in the store");
    assert_eq!(s.total.writes_ssd, first.session.writes_ssd);
    assert_eq!(s.dirty_bytes, 0);
    // Control attributes on a file, or the statistics written, are refused.
    assert!(xattr::set(m.mnt.join("f0"), XATTR_FLUSH, b"1").is_err());
    assert!(xattr::set(&m.mnt, tierwise_fs::control::XATTR_STATS, b"{}").is_err());
}

/// The dirty set, not modification times, says which copy is the file: `touch -d`, `rsync -t`
/// or `tar` can set the SSD copy's time back to the HDD copy's.
#[test]
fn the_dirty_set_beats_modification_times_that_lie() {
    if !fuse_available() {
        return;
    }
    let [ssd, hdd, mnt] = dirs();
    let cfg = MountConfig::new("file-write-back", 1 << 20);
    let mut m = mount_with(ssd.path(), hdd.path(), mnt.path(), &cfg);
    let p = m.mnt.join("f");
    fs::write(&p, vec![b'A'; 5000]).unwrap();
    xattr::set(&m.mnt, XATTR_FLUSH, b"1").unwrap();
    wait_until("the flush", || stats(&m.mnt).dirty_bytes == 0);
    // Same size, new bytes, dirty on the SSD; then both copies get the same old time.
    std::os::unix::fs::FileExt::write_all_at(&fs::File::options().write(true).open(&p).unwrap(), &[b'B'; 5000], 0)
        .unwrap();
    let old = SystemTime::UNIX_EPOCH + Duration::from_secs(946_684_800);
    fs::File::options().write(true).open(&p).unwrap().set_modified(old).unwrap();
    let meta = |t: &Path| fs::metadata(t.join("f")).unwrap();
    assert_eq!(meta(ssd.path()).modified().unwrap(), meta(hdd.path()).modified().unwrap());
    assert_eq!(meta(ssd.path()).len(), meta(hdd.path()).len());
    m.unmount();
    let m = mount_with(ssd.path(), hdd.path(), mnt.path(), &cfg);
    assert_eq!(stats(&m.mnt).dirty_bytes, 5000, "the SSD copy is still known dirty");
    xattr::set(&m.mnt, XATTR_FLUSH, b"1").unwrap();
    wait_until("the flush", || stats(&m.mnt).dirty_bytes == 0);
    assert_eq!(fs::read(hdd.path().join("f")).unwrap(), vec![b'B'; 5000], "the newer bytes reached the HDD");
}

/// Moves a crash interrupted, as the journal records them: one that switched (both copies,
/// the destination complete) is finished; one that did not (a temporary file) is rolled back.
#[test]
fn journalled_moves_are_finished_or_rolled_back_after_a_crash() {
    if !fuse_available() {
        return;
    }
    let [ssd, hdd, mnt] = dirs();
    let data = vec![5u8; 3000];
    // `done`: demoted, the switch happened, the source not yet removed.
    fs::write(ssd.path().join("done"), &data).unwrap();
    let t = fs::metadata(ssd.path().join("done")).unwrap().modified().unwrap();
    fs::write(hdd.path().join("done"), &data).unwrap();
    fs::File::options().write(true).open(hdd.path().join("done")).unwrap().set_modified(t).unwrap();
    // `half`: promoted, crashed while copying (the temporary file is there).
    fs::write(hdd.path().join("half"), &data).unwrap();
    let th = fs::metadata(hdd.path().join("half")).unwrap().modified().unwrap();
    fs::write(ssd.path().join(".tierwise-tmp-99"), &data[..100]).unwrap();
    {
        let (store, _) = StateStore::open(&ssd.path().join(DEFAULT_STATE_DIR)).unwrap();
        let rec = |kind, from, rel: &str, mtime| MoveRecord {
            kind,
            from,
            size: 3000,
            mtime_ns: epoch_ns(mtime),
            rel: rel.into(),
        };
        store.begin_move(&rec(WorkKind::Demote, Tier::Fast, "done", t)).unwrap();
        store.begin_move(&rec(WorkKind::Promote, Tier::Slow, "half", th)).unwrap();
    }
    let m = mount_with(ssd.path(), hdd.path(), mnt.path(), &MountConfig::new("plain-cold-dst", 1 << 20));
    assert!(!ssd.path().join("done").exists() && hdd.path().join("done").exists(), "the demotion was finished");
    assert!(hdd.path().join("half").exists() && !ssd.path().join("half").exists(), "the promotion was rolled back");
    assert!(!ssd.path().join(".tierwise-tmp-99").exists());
    assert_eq!(fs::read(m.mnt.join("done")).unwrap(), data);
    assert_eq!(fs::read(m.mnt.join("half")).unwrap(), data);
    let mut names: Vec<_> = fs::read_dir(&m.mnt).unwrap().flatten().map(|e| e.file_name()).collect();
    names.sort();
    assert_eq!(names, ["done", "half"], "each file shows once");
}

#[test]
fn an_unreadable_store_is_kept_aside_and_rebuilt_from_the_trees() {
    if !fuse_available() {
        return;
    }
    let [ssd, hdd, mnt] = dirs();
    fs::write(hdd.path().join("x"), b"data").unwrap();
    let state = ssd.path().join(DEFAULT_STATE_DIR);
    fs::create_dir_all(&state).unwrap();
    fs::write(state.join("state.redb"), b"this is not a database").unwrap();
    let m = mount_with(ssd.path(), hdd.path(), mnt.path(), &MountConfig::new("on-demand-caching", 1 << 20));
    assert_eq!(fs::read(m.mnt.join("x")).unwrap(), b"data");
    let kept = fs::read_dir(&state).unwrap().flatten().any(|e| e.file_name().to_string_lossy().contains("unreadable"));
    assert!(kept, "the unreadable store is kept for inspection");
}

#[test]
fn slow_moves_show_progress_and_are_cancelled_by_command_or_by_an_access() {
    if !fuse_available() {
        return;
    }
    let [ssd, hdd, mnt] = dirs();
    let data: Vec<u8> = (0..6u32 << 20).map(|i| (i % 251) as u8).collect();
    fs::write(hdd.path().join("big"), &data).unwrap();
    // 1 MB/s: a 6 MiB promotion takes six seconds.
    // Regular FUSE I/O: reads reach the daemon one by one while the move runs.
    let cfg = MountConfig {
        move_rate: 1_000_000,
        passthrough: false,
        ..MountConfig::new("dynamic-hot-dst:sieve=0", 64 << 20)
    };
    let m = mount_with(ssd.path(), hdd.path(), mnt.path(), &cfg);
    let big = m.mnt.join("big");
    let mut buf = vec![0u8; 4096];
    let mut read_head = || {
        let _ = fs::File::open(&big).and_then(|mut f| f.read(&mut buf));
    };
    // Reads make the file hot; stop reading once it moves (a read would wait for the move).
    wait_until("the promotion to start", || {
        let moving = stats(&m.mnt).moving.is_some_and(|mv| mv.total > 0);
        if !moving {
            read_head();
        }
        moving
    });
    let mv = stats(&m.mnt).moving.unwrap();
    assert_eq!((mv.kind.as_str(), mv.path.as_str(), mv.total), ("promote", "big", 6 << 20));
    assert!(mv.done < mv.total);
    xattr::set(&m.mnt, XATTR_CANCEL, b"1").unwrap();
    wait_until("the cancellation", || stats(&m.mnt).session.moves_cancelled >= 1);
    assert!(!ssd.path().join("big").exists(), "a cancelled promotion leaves the file where it was");
    // The next read promotes again; reading the whole file meanwhile cancels the slow move
    // rather than waiting six seconds for it.
    wait_until("the second promotion", || {
        let moving = stats(&m.mnt).moving.is_some();
        if !moving {
            read_head();
        }
        moving
    });
    assert_eq!(fs::read(&big).unwrap(), data);
    wait_until("the access to cancel it", || stats(&m.mnt).session.moves_cancelled >= 2);
    // Unlimited again: the next promotion completes.
    xattr::set(&m.mnt, XATTR_MOVE_RATE, b"0").unwrap();
    assert!(xattr::set(&m.mnt, XATTR_MOVE_RATE, b"fast").is_err());
    wait_until("a promotion to complete", || {
        read_head();
        tier(&big) == "ssd"
    });
    assert_eq!(fs::read(&big).unwrap(), data);
    assert_eq!(stats(&m.mnt).move_rate, 0);
}

#[test]
fn emulated_tiers_are_labelled_and_metrics_are_served() {
    if !fuse_available() {
        return;
    }
    let [ssd, hdd, mnt] = dirs();
    // Regular FUSE I/O: every read and write is timed by the daemon.
    let cfg = MountConfig {
        emulate_hdd: Some("wd5000aaks".into()),
        passthrough: false,
        ..MountConfig::new("on-demand-caching", 1 << 20)
    };
    let m = mount_with(ssd.path(), hdd.path(), mnt.path(), &cfg);
    fs::write(m.mnt.join("f"), b"x").unwrap();
    assert_eq!(fs::read(m.mnt.join("f")).unwrap(), b"x");
    let s = stats(&m.mnt);
    assert_eq!(s.emulation.len(), 1);
    assert!(s.emulation[0].contains("wd5000aaks") && s.emulation[0].contains("emulated"), "{:?}", s.emulation);
    // Behind mq-deadline with NCQ by default, as the simulator's HDD.
    assert!(s.emulation[0].ends_with("mq-deadline queue)"), "{:?}", s.emulation);
    // The Prometheus text format, from the same snapshot.
    let body = s.prometheus();
    let mp = format!("mountpoint=\"{}\"", m.mnt.display());
    assert!(body.contains(&format!("tierwise_reads_total{{{mp},tier=\"hdd\"}}")), "{body}");
    assert!(body.contains("# TYPE tierwise_dirty_bytes gauge"));
    assert!(body.contains("tierwise_tier_free_bytes{") && body.contains("tierwise_tier_size_bytes{"), "{body}");
    assert!(
        body.contains(&format!("tierwise_request_duration_seconds_bucket{{{mp},op=\"read\",le=\"+Inf\"}}"))
            && body.contains("tierwise_request_duration_seconds_count"),
        "{body}"
    );
    assert!(s.latency.iter().any(|h| h.op == "write" && h.count >= 1), "{:?}", s.latency);
    assert!(s.hdd_space.size > 0 && s.ssd_space.free > 0);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let snap = s.clone();
    std::thread::spawn(move || tierwise_fs::metrics::serve_metrics(listener, Arc::new(move || snap.clone())));
    let mut conn = std::net::TcpStream::connect(addr).unwrap();
    conn.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut reply = String::new();
    conn.read_to_string(&mut reply).unwrap();
    assert!(reply.starts_with("HTTP/1.1 200 OK") && reply.contains("tierwise_hit_ratio"), "{reply}");
    // Only /metrics answers.
    let mut conn = std::net::TcpStream::connect(addr).unwrap();
    conn.write_all(b"GET /secret HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut reply = String::new();
    conn.read_to_string(&mut reply).unwrap();
    assert!(reply.starts_with("HTTP/1.1 404"), "{reply}");
    let bad = MountConfig { emulate_hdd: Some("floppy".into()), ..MountConfig::new("on-demand-caching", 1 << 20) };
    let [s2, h2, m2] = dirs();
    let tiers = tierwise_fs::Tiers::open(s2.path(), h2.path(), m2.path()).unwrap();
    let e = tierwise_fs::HybridFs::new(tiers, &bad).err().unwrap().to_string();
    assert!(e.contains("emulate-hdd") && e.contains("floppy"), "{e}");
}

/// Writers append self-checking records and readers read whole files while another thread
/// keeps moving the files between tiers (pins force a move at once): every read sees whole
/// records in order, and the final contents are exactly what was written.
#[test]
fn readers_and_writers_see_consistent_files_while_they_migrate() {
    if !fuse_available() {
        return;
    }
    let [ssd, hdd, mnt] = dirs();
    let cfg = MountConfig { pin_reserve: 4 << 20, ..MountConfig::new("dynamic-hot-dst:sieve=64KiB", 8 << 20) };
    let m = mount_with(ssd.path(), hdd.path(), mnt.path(), &cfg);
    let root = m.mnt.clone();
    const FILES: usize = 4;
    const RECORDS: usize = 400;
    const MIN_PINS: usize = 12;
    let record = |f: usize, i: usize| format!("{f:02}:{i:06}:{}\n", "x".repeat(100 + (i * 37) % 300)).into_bytes();
    for f in 0..FILES {
        fs::write(root.join(format!("f{f}")), b"").unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    // The writers go on past RECORDS until enough pin changes ran alongside them (a loaded
    // machine may schedule the pinner late), up to a bound.
    let pins_seen = Arc::new(AtomicUsize::new(0));
    let mut threads = Vec::new();
    for f in 0..FILES {
        let (root, pins_seen) = (root.clone(), Arc::clone(&pins_seen));
        threads.push(std::thread::spawn(move || {
            let mut i = 0;
            while i < RECORDS || (pins_seen.load(Ordering::SeqCst) < MIN_PINS && i < 50 * RECORDS) {
                let mut h = fs::OpenOptions::new().append(true).open(root.join(format!("f{f}"))).unwrap();
                h.write_all(&record(f, i)).unwrap();
                i += 1;
            }
            i
        }));
    }
    let mut readers = Vec::new();
    for r in 0..2 {
        let (root, stop) = (root.clone(), Arc::clone(&stop));
        readers.push(std::thread::spawn(move || {
            let mut reads = 0;
            while !stop.load(Ordering::SeqCst) {
                let f = (reads + r) % FILES;
                let text = String::from_utf8(fs::read(root.join(format!("f{f}"))).unwrap()).unwrap();
                // Whole records, in order; only the last may be cut by a concurrent append.
                let lines: Vec<&str> = text.split_inclusive('\n').collect();
                for (i, line) in lines.iter().enumerate() {
                    if !line.ends_with('\n') {
                        assert_eq!(i, lines.len() - 1, "a torn record in the middle of f{f}");
                        continue;
                    }
                    assert_eq!(line.as_bytes(), &record(f, i)[..], "f{f} record {i}");
                }
                reads += 1;
            }
            reads
        }));
    }
    let (root2, stop2) = (root.clone(), Arc::clone(&stop));
    let mover = std::thread::spawn(move || {
        let mut moves = 0;
        while !stop2.load(Ordering::SeqCst) {
            let f = moves % FILES;
            let want = [&b"ssd"[..], b"hdd", b"none"][(moves / FILES) % 3];
            if xattr::set(root2.join(format!("f{f}")), XATTR_PIN, want).is_ok() {
                moves += 1;
                pins_seen.store(moves, Ordering::SeqCst);
            }
        }
        moves
    });
    let written: Vec<usize> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    stop.store(true, Ordering::SeqCst);
    let reads: usize = readers.into_iter().map(|r| r.join().unwrap()).sum();
    let moves = mover.join().unwrap();
    for (f, &n) in written.iter().enumerate() {
        let want: Vec<u8> = (0..n).flat_map(|i| record(f, i)).collect();
        assert_eq!(fs::read(root.join(format!("f{f}"))).unwrap(), want, "f{f}");
    }
    assert!(reads > 10 && moves >= MIN_PINS, "{reads} reads and {moves} pin changes ran alongside the writers");
}

/// Access statistics survive a remount. A file read many times holds the one-file SSD; after a
/// remount, a single read of another file does not displace it (the inverse bitmap remembers
/// the counts). With the statistics lost (a new store), the same read does.
#[test]
fn access_statistics_survive_a_remount() {
    if !fuse_available() {
        return;
    }
    let [ssd, hdd, mnt] = dirs();
    let spare = tempfile::tempdir().unwrap();
    // Regular FUSE I/O: the policy counts every read.
    let cfg = MountConfig { passthrough: false, ..MountConfig::new("dynamic-hot-dst:sieve=0", 100 << 10) };
    let mut m = mount_with(ssd.path(), hdd.path(), mnt.path(), &cfg);
    let (a, b) = (mnt.path().join("a"), mnt.path().join("b"));
    fs::write(&a, vec![1u8; 64 << 10]).unwrap();
    fs::write(&b, vec![2u8; 64 << 10]).unwrap();
    for _ in 0..20 {
        assert_eq!(fs::read(&a).unwrap().len(), 64 << 10);
    }
    wait_until("a is on the SSD", || tier(&a) == "ssd");
    m.unmount();
    // Remounted with its store: a stays, b is not hot enough to take its place.
    let mut m = mount_with(ssd.path(), hdd.path(), mnt.path(), &cfg);
    assert_eq!(fs::read(&b).unwrap(), vec![2u8; 64 << 10]);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!((tier(&a), tier(&b)), ("ssd".into(), "hdd".into()), "the counts came back with the store");
    m.unmount();
    // Without the statistics (a new store elsewhere), both start equal and b's read wins.
    let fresh = MountConfig { state_dir: Some(spare.path().to_path_buf()), ..cfg };
    let _m = mount_with(ssd.path(), hdd.path(), mnt.path(), &fresh);
    assert_eq!(fs::read(&b).unwrap(), vec![2u8; 64 << 10]);
    wait_until("b displaces a when nothing was remembered", || tier(&b) == "ssd");
    assert_eq!(tier(&a), "hdd");
}
