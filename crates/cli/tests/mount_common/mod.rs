//! What the mount CLI tests share: running the binary, temporary directories, the mount table,
//! and a guard that detaches a mountpoint when a test ends (also when it fails half way).

#![allow(dead_code, reason = "each test file uses a part")]
#![expect(clippy::unwrap_used, reason = "a failing setup should stop the test loudly")]

use std::fs;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub fn tierwise(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tierwise")).args(args).output().unwrap()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// `N` fresh temporary directories.
pub fn temp_dirs<const N: usize>() -> [tempfile::TempDir; N] {
    std::array::from_fn(|_| tempfile::tempdir().unwrap())
}

/// A tier root holding `ssd/` and `hdd/`, and a mountpoint.
pub fn root_and_mountpoint() -> [tempfile::TempDir; 2] {
    let [root, mnt] = temp_dirs();
    for tier in ["ssd", "hdd"] {
        fs::create_dir(root.path().join(tier)).unwrap();
    }
    [root, mnt]
}

/// Starts `tierwise mount --foreground ARGS ROOT MNT` and waits until the mount is up.
/// `TIERWISE_BIN` runs another build instead (a baseline measured in the same run).
pub fn start_foreground(args: &[&str], root: &Path, mnt: &Path) -> Child {
    let bin = std::env::var_os("TIERWISE_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_tierwise").into());
    let child = Command::new(bin)
        .args(["mount", "--foreground"])
        .args(args)
        .arg(root)
        .arg(mnt)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while mounted(mnt).is_none_or(|(_, t)| t != "fuse.tierwise") || fs::read_dir(mnt).is_err() {
        assert!(Instant::now() < deadline, "the mount did not come up");
        std::thread::sleep(Duration::from_millis(10));
    }
    child
}

/// The mount table's entry for `mnt` (resolved without touching it: it may be a dead mount):
/// (source, type).
pub fn mounted(mnt: &Path) -> Option<(String, String)> {
    let parent = fs::canonicalize(mnt.parent()?).ok()?;
    let canon = parent.join(mnt.file_name()?);
    fs::read_to_string("/proc/self/mountinfo").ok()?.lines().rev().find_map(|l| {
        let (head, tail) = l.split_once(" - ")?;
        let f: Vec<&str> = head.split(' ').collect();
        (Path::new(f.get(4)?) == canon).then(|| {
            let t: Vec<&str> = tail.split(' ').collect();
            (t.get(1).unwrap_or(&"").to_string(), t[0].to_string())
        })
    })
}

/// Tears a mountpoint down when dropped (the shared teardown: abort, kill -9, lazy unmount).
pub use tierwise_testkit::teardown::Unmount;

/// Mounts with `args` (after `mount`), asserting success.
#[must_use]
pub fn mount(args: &[&str], mnt: &Path) -> Unmount {
    let o = tierwise(&[&["mount"][..], args].concat());
    assert!(o.status.success(), "mount {args:?}: {}", stderr(&o));
    Unmount(mnt.to_path_buf())
}

/// The pid of the daemon serving `mnt` (from `stats --json`).
pub fn daemon_pid(mnt: &Path) -> i32 {
    let o = tierwise(&["stats", "--json", mnt.to_str().unwrap()]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    v["pid"].as_i64().unwrap() as i32
}

/// Waits until process `pid` has exited (`tierwise_testkit::exited`).
pub fn wait_gone(pid: i32) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let gone = || tierwise_testkit::exited(pid);
    while !gone() {
        assert!(std::time::Instant::now() < deadline, "process {pid} did not exit");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}
