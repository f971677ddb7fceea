//! Kill -9 of the `tierwise mount` daemon while files are written and migrate; after a remount
//! every file holds exactly what was acknowledged (written and fsync'd) before the kill. The one
//! rewrite in progress at the kill (open with O_TRUNC, write, fsync) may hold its old content,
//! nothing, or a prefix of its new content, as on any file system.
//!
//! 20 trials rotating over four policies and three data paths (regular FUSE I/O, the kernel's
//! writeback cache, passthrough), each with a tiny SSD quota so that moves are in flight when
//! the kill lands; files are pinned and unpinned along the way (a pin moves the file at once),
//! and every other trial rate-limits moves so that kills land inside journalled moves.
//! `TIERWISE_CRASH_TRIALS` runs more. Skipped where `/dev/fuse` cannot be opened.

#![allow(clippy::unwrap_used, reason = "a failing setup should stop the test loudly")]

mod mount_common;

use std::collections::BTreeMap;
use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use mount_common::{root_and_mountpoint, start_foreground};

fn start(root: &Path, mnt: &Path, policy: &str, extra: &[&str], move_rate: &str) -> Child {
    let args =
        [&["--ssd-quota", "128KiB", "--pin-reserve", "32KiB", "--policy", policy, "--move-rate", move_rate], extra];
    start_foreground(&args.concat(), root, mnt)
}

/// Detaches a mount whose daemon is gone (or unmounts a live one).
fn detach(mnt: &Path) {
    let _ = nix::mount::umount2(mnt, nix::mount::MntFlags::MNT_DETACH);
}

fn content(trial: u64, file: u64, version: u64) -> Vec<u8> {
    let len = 1000 + ((trial * 7919 + file * 104_729 + version * 31) % 30_000) as usize;
    (0..len).map(|i| (i as u64 ^ (version * 131 + file)) as u8).collect()
}

#[test]
fn kill_9_during_migrations_and_writes_loses_no_acknowledged_data() {
    if !tierwise_testkit::fuse() {
        return;
    }
    let trials: u64 = tierwise_testkit::trials("TIERWISE_CRASH_TRIALS", 20, 200);
    // Policies and data paths: regular FUSE I/O, the kernel's writeback cache, passthrough.
    let configs: [(&str, &[&str]); 6] = [
        ("dynamic-hot-dst:sieve=24KiB", &[]),
        ("file-write-back:sieve=24KiB", &[]),
        ("on-demand-caching", &[]),
        ("hycache", &[]),
        ("file-write-back:sieve=24KiB", &["--kernel-cache"]),
        ("dynamic-hot-dst:sieve=24KiB", &["--passthrough"]),
    ];
    let mut interrupted_moves = 0;
    for trial in 0..trials {
        let (policy, extra) = configs[(trial % configs.len() as u64) as usize];
        let [root, mnt] = root_and_mountpoint();
        // On a failure half way: no daemon, no mount outlives the test.
        let _down = tierwise_testkit::teardown::Unmount(mnt.path().to_path_buf());
        // Every other trial moves at 2 MB/s, so a kill often lands inside a journalled move.
        let rate = if trial % 2 == 1 { "2" } else { "0" };
        let mut child = tierwise_testkit::teardown::KillOnDrop(start(root.path(), mnt.path(), policy, extra, rate));
        // Acknowledged content per file, and the write in progress (file, new content).
        let mut acked: BTreeMap<PathBuf, Vec<u8>> = BTreeMap::new();
        let killed = Arc::new(AtomicBool::new(false));
        let pid = child.id();
        let delay = Duration::from_millis(80 + (trial * 37) % 400);
        let k = Arc::clone(&killed);
        let killer = std::thread::spawn(move || {
            std::thread::sleep(delay);
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), nix::sys::signal::Signal::SIGKILL);
            k.store(true, Ordering::SeqCst);
        });
        let mut in_progress: Option<(PathBuf, Vec<u8>)> = None;
        let mut version = 0u64;
        'work: while !killed.load(Ordering::SeqCst) {
            for f in 0..12u64 {
                version += 1;
                let path = mnt.path().join(format!("f{f}"));
                let data = content(trial, f, version);
                in_progress = Some((path.clone(), data.clone()));
                let ok = OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(true)
                    .open(&path)
                    .and_then(|mut h| h.write_all(&data).and_then(|()| h.sync_all()));
                if ok.is_err() {
                    break 'work;
                }
                acked.insert(path.file_name().map(PathBuf::from).unwrap(), data);
                in_progress = None;
                // Reads make the policies promote, so moves are in flight; pins move files at once.
                let _ = fs::read(mnt.path().join(format!("f{}", (f * 5 + version) % 12)));
                if version.is_multiple_of(4) {
                    let pin = [&b"ssd"[..], b"hdd", b"none"][(version / 4 % 3) as usize];
                    let _ = xattr::set(mnt.path().join(format!("f{}", (f * 7 + 3) % 12)), "user.tierwise.pin", pin);
                }
            }
        }
        killer.join().unwrap();
        let _ = child.wait();
        detach(mnt.path());
        // How often the kill landed inside a journalled move (recovery then finishes or rolls it back).
        let state = root.path().join("ssd").join(tierwise_fs::DEFAULT_STATE_DIR);
        // What the kill left, for the message of a failure below.
        let mut left = String::new();
        if let Ok((store, _)) = tierwise_fs::state::StateStore::open(&state) {
            let moves = store.unfinished_moves().unwrap_or_default();
            interrupted_moves += moves.len();
            left = format!("journal {moves:?}, dirty {:?}", store.dirty().unwrap_or_default());
        }
        for name in acked.keys() {
            let size = |t: &str| fs::metadata(root.path().join(t).join(name)).map_or(-1, |m| m.len() as i64);
            left += &format!(", {}: {}/{}", name.display(), size("ssd"), size("hdd"));
        }
        let mut child = tierwise_testkit::teardown::KillOnDrop(start(root.path(), mnt.path(), policy, extra, rate));
        for (name, want) in &acked {
            let got = fs::read(mnt.path().join(name)).unwrap_or_default();
            // The rewrite in progress truncated the file first: it may be empty or hold a
            // prefix of its new content.
            let racing = in_progress.as_ref().is_some_and(|(p, new)| p.ends_with(name) && new.starts_with(&got));
            let on_tier = |t: &str| {
                fs::metadata(root.path().join(t).join(name)).map_or("absent".to_string(), |m| format!("{} B", m.len()))
            };
            assert!(
                &got == want || racing,
                "trial {trial} ({policy} {extra:?}): {} holds {} bytes, not the {} acknowledged (ssd: {}, hdd: {}; in progress: {:?}; the kill left {left})",
                name.display(),
                got.len(),
                want.len(),
                on_tier("ssd"),
                on_tier("hdd"),
                in_progress.as_ref().map(|(p, d)| (p.file_name().map(|n| n.to_owned()), d.len())),
            );
        }
        // No file shows twice and none vanishes: the listing is exactly the files written.
        let mut names: Vec<String> =
            fs::read_dir(mnt.path()).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        let mut want: Vec<String> = acked.keys().map(|p| p.to_string_lossy().into_owned()).collect();
        if let Some((p, _)) = &in_progress {
            let n = p.file_name().unwrap().to_string_lossy().into_owned();
            if !want.contains(&n) && names.contains(&n) {
                want.push(n);
            }
        }
        want.sort();
        assert_eq!(names, want, "trial {trial} ({policy} {extra:?}): the listing after the crash");
        detach(mnt.path());
        let _ = child.kill();
        let _ = child.wait();
    }
    eprintln!("{trials} trials: {interrupted_moves} journalled moves were interrupted by the kill");
    assert!(trials < 10 || interrupted_moves > 0, "no kill landed inside a move: recovery is not exercised");
}
