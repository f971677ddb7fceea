//! The mount with faults injected under its moves (through the tier backend seam): failing
//! writes, renames and syncs, a full SSD, short writes, and the daemon dying between two steps
//! of a move. Nothing a user wrote may be lost or changed, and the next mount recovers.
//!
//! Skipped, with a message, where `/dev/fuse` cannot be opened.

use std::fs::{self, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod common;

use common::differential::{differential_through, temp_dirs};
use common::{fuse_available, mount_with, mount_with_backend};
use tierwise_fs::MountConfig;
use tierwise_fs::tiers::backend::{EXIT_CODE, Fault, Faulty, Step};

const EIO: i32 = nix::libc::EIO;
const ENOSPC: i32 = nix::libc::ENOSPC;

/// Faults that keep coming while the mount keeps working: every few writes, renames, syncs and
/// source removals fail, and every write is short.
fn steady_faults() -> Arc<Faulty> {
    Arc::new(Faulty::new([
        Fault::Every { step: Step::Write, period: 17, errno: ENOSPC },
        Fault::Every { step: Step::SyncFile, period: 7, errno: EIO },
        Fault::Every { step: Step::Rename, period: 5, errno: EIO },
        Fault::Every { step: Step::SyncDir, period: 11, errno: EIO },
        Fault::Every { step: Step::Unlink, period: 3, errno: EIO },
        Fault::ShortWrites(3000),
    ]))
}

fn with_faults(policy: &str, seed: u64) {
    let faulty = steady_faults();
    differential_through(policy, 2000, seed, |_| {}, faulty.clone(), 1);
    if fuse_available() {
        let runs = |step| faulty.runs(step);
        eprintln!(
            "{policy}: {} writes, {} syncs, {} renames, {} source removals",
            runs(Step::Write),
            runs(Step::SyncFile),
            runs(Step::Rename),
            runs(Step::Unlink)
        );
        assert!(runs(Step::Write) >= 17 && runs(Step::Rename) >= 10, "{policy}: the faults were hardly reached");
    }
}

#[test]
fn a_dst_policy_under_failing_moves_behaves_like_a_plain_directory() {
    with_faults("dynamic-hot-dst:sieve=16KiB", 41);
}

#[test]
fn on_demand_caching_under_failing_moves_behaves_like_a_plain_directory() {
    with_faults("on-demand-caching", 42);
}

#[test]
fn write_back_under_failing_write_backs_behaves_like_a_plain_directory() {
    with_faults("file-write-back", 43);
}

/// The steps a crash is injected before, by index in the child's environment.
const CRASH_POINTS: [(Step, u32); 6] = [
    (Step::CreateTemp, 1),
    (Step::Write, 1),
    (Step::SyncFile, 1),
    (Step::Rename, 1),
    (Step::SyncDir, 1),
    (Step::Unlink, 1),
];
const CHILD_ENV: &str = "TIERWISE_FAULTS_CHILD";

/// The mount as a daemon that dies mid-move: run by [`a_crash_between_the_steps_of_a_move_is_recovered_by_the_next_mount`]
/// in a child process (a no-op otherwise). It exits at the crash point with the journal record
/// of the move written and nothing cleaned up, as under `kill -9`.
#[test]
fn crash_child() {
    let Ok(spec) = std::env::var(CHILD_ENV) else { return };
    let parts: Vec<&str> = spec.split('|').collect();
    let (step, nth) = CRASH_POINTS[parts[0].parse::<usize>().unwrap()];
    let faulty = Arc::new(Faulty::new([Fault::ExitBefore { step, nth }]));
    let cfg = MountConfig::new("dynamic-hot-dst:sieve=16KiB", 1 << 20);
    let (ssd, hdd, mnt) = (Path::new(parts[1]), Path::new(parts[2]), Path::new(parts[3]));
    let _m = mount_with_backend(ssd, hdd, mnt, &cfg, faulty);
    std::thread::sleep(Duration::from_secs(60));
    panic!("the promotion never reached {step:?}");
}

/// The daemon dies just before each step of a promotion (a child process that exits there);
/// the next mount finishes or rolls back the journalled move: the file is whole, on one tier,
/// and no temporary file is left.
#[test]
fn a_crash_between_the_steps_of_a_move_is_recovered_by_the_next_mount() {
    if !fuse_available() || std::env::var_os(CHILD_ENV).is_some() {
        return;
    }
    // Under the policy's 16 KiB sieve, so it may go to the SSD.
    let data: Vec<u8> = (0..12_000u32).map(|i| (i * 13 % 251) as u8).collect();
    for (index, (step, _)) in CRASH_POINTS.iter().enumerate() {
        let [ssd, hdd, mnt] = temp_dirs();
        fs::create_dir(hdd.path().join("d")).unwrap();
        fs::write(hdd.path().join("d/f"), &data).unwrap();
        let spec = format!("{index}|{}|{}|{}", ssd.path().display(), hdd.path().display(), mnt.path().display());
        // Killed on a failure half way, and its mount torn down: nothing outlives the test.
        let _down = tierwise_testkit::teardown::Unmount(mnt.path().to_path_buf());
        let mut child = tierwise_testkit::teardown::KillOnDrop(
            Command::new(std::env::current_exe().unwrap())
                .args(["--exact", "crash_child", "--nocapture", "--test-threads=1"])
                .env(CHILD_ENV, spec)
                .stdout(Stdio::null())
                .spawn()
                .unwrap(),
        );
        // Reads make the file hot: the policy promotes it, and the child dies mid-move.
        let until = Instant::now() + Duration::from_secs(30);
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            assert!(Instant::now() < until, "crash before {step:?}: the child did not exit");
            if let Ok(got) = fs::read(mnt.path().join("d/f")) {
                assert!(got == data, "crash before {step:?}: a read before the crash differs");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        assert_eq!(status.code(), Some(EXIT_CODE), "crash before {step:?}: the child ended otherwise");
        // The dead daemon's mount is detached, as an administrator would.
        let _ = Command::new("umount").arg("-l").arg(mnt.path()).status();
        let m =
            mount_with(ssd.path(), hdd.path(), mnt.path(), &MountConfig::new("dynamic-hot-dst:sieve=16KiB", 1 << 20));
        assert_eq!(fs::read(mnt.path().join("d/f")).unwrap(), data, "crash before {step:?}: the file differs");
        drop(m);
        let on = [ssd.path(), hdd.path()].map(|t| fs::read(t.join("d/f")).ok());
        assert!(on.iter().flatten().all(|d| *d == data), "crash before {step:?}: a copy differs");
        assert_eq!(on.iter().flatten().count(), 1, "crash before {step:?}: the file is on both tiers");
        for t in [ssd.path(), hdd.path()] {
            let names: Vec<_> = fs::read_dir(t.join("d")).unwrap().flatten().map(|e| e.file_name()).collect();
            assert!(names.iter().all(|n| !n.to_string_lossy().starts_with(".tierwise")), "left: {names:?}");
        }
        eprintln!("crash before {step:?}: recovered");
    }
}

/// An unpin hands the file back to the policy, which may want it on the other tier: when that
/// move fails, the file stays pinned where it is (the unpin fails), and it reads and writes as
/// before. (The engine believed it moved, and a later write recreated it from nothing there.)
#[test]
fn an_unpin_whose_move_fails_keeps_the_file_pinned_and_whole() {
    if !fuse_available() {
        return;
    }
    let [ssd, hdd, mnt] = temp_dirs();
    // A policy share of 16 KiB: a 40 KB file back in the policy must leave the SSD.
    let cfg = MountConfig { pin_reserve: 1 << 20, ..MountConfig::new("file-write-back", (1 << 20) + (16 << 10)) };
    let faulty = Arc::new(Faulty::new([]));
    let m = mount_with_backend(ssd.path(), hdd.path(), mnt.path(), &cfg, faulty.clone());
    let p = m.mnt.join("f");
    let data: Vec<u8> = (0..40_000u32).map(|i| (i % 253) as u8).collect();
    fs::write(&p, &data).unwrap();
    xattr::set(&p, "user.tierwise.pin", b"ssd").unwrap();
    assert!(ssd.path().join("f").exists());
    faulty.set_faults([Fault::Every { step: Step::Rename, period: 1, errno: EIO }]);
    assert!(xattr::set(&p, "user.tierwise.pin", b"none").is_err(), "the unpin's move failed: it must say so");
    assert_eq!(xattr::get(&p, "user.tierwise.pin").unwrap().as_deref(), Some(&b"ssd"[..]), "still pinned");
    assert_eq!(fs::read(&p).unwrap(), data);
    OpenOptions::new().write(true).open(&p).unwrap().write_all_at(b"later", 39_000).unwrap();
    let mut want = data.clone();
    want[39_000..39_005].copy_from_slice(b"later");
    assert_eq!(fs::read(&p).unwrap(), want, "a later write lands in the file");
    faulty.set_faults([]);
    xattr::set(&p, "user.tierwise.pin", b"none").unwrap();
    assert_eq!(fs::read(&p).unwrap(), want, "unpinned once moves work again");
}
