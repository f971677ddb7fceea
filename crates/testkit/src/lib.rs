//! What the integration tests need from the machine, checked one way everywhere. A test whose
//! prerequisite is missing **fails**, naming it and the package `scripts/test-all.sh` installs
//! it from: a mount test that cannot mount must never pass. A developer on a machine that
//! cannot run them (no `/dev/fuse` in a container, not root) may set `TIERWISE_ALLOW_SKIP=1`;
//! the tests then print `SKIPPED: ...` and return. The README's test command never sets it.

pub mod teardown;

use std::fs::OpenOptions;
use std::process::{Command, Stdio};

/// One prerequisite.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Need {
    /// `/dev/fuse` opens read-write (FUSE mounts).
    Fuse,
    /// The tests run as root (tmpfs and loop mounts, other users' files).
    Root,
    /// A program on `PATH`, and the Debian package that provides it.
    Tool(&'static str, &'static str),
}

impl Need {
    /// Why this need is not met on this machine, or `None` when it is.
    fn missing(self) -> Option<String> {
        match self {
            Need::Fuse => OpenOptions::new()
                .read(true)
                .write(true)
                .open("/dev/fuse")
                .err()
                .map(|e| format!("/dev/fuse cannot be opened ({e}); package fuse3, and a machine that allows FUSE")),
            Need::Root => (!nix::unistd::Uid::effective().is_root())
                .then(|| "root (to mount tmpfs, loop devices, act as other users)".to_string()),
            Need::Tool(tool, package) => {
                let found = Command::new("sh")
                    .args(["-c", &format!("command -v {tool}")])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status()
                    .is_ok_and(|s| s.success());
                (!found).then(|| format!("{tool} (apt-get install {package})"))
            }
        }
    }
}

/// Whether every need is met. When one is not: panics (the test fails, naming what is missing),
/// or, with `TIERWISE_ALLOW_SKIP=1`, prints `SKIPPED` and returns `false`.
pub fn require(needs: &[Need]) -> bool {
    let missing: Vec<String> = needs.iter().filter_map(|n| n.missing()).collect();
    if missing.is_empty() {
        return true;
    }
    let what = missing.join("; ");
    if std::env::var_os("TIERWISE_ALLOW_SKIP").is_some_and(|v| v == "1") {
        eprintln!("SKIPPED (TIERWISE_ALLOW_SKIP=1): this test needs {what}");
        return false;
    }
    panic!(
        "this test needs {what}. scripts/test-all.sh installs the packages; set TIERWISE_ALLOW_SKIP=1 to skip such tests on a machine that cannot run them"
    );
}

/// A prerequisite that is not of the kinds above (a conflicting install, a missing compiler
/// output): fails the test with `why`, or, with `TIERWISE_ALLOW_SKIP=1`, prints SKIPPED and
/// returns `false`.
pub fn unmet(why: &str) -> bool {
    if std::env::var_os("TIERWISE_ALLOW_SKIP").is_some_and(|v| v == "1") {
        eprintln!("SKIPPED (TIERWISE_ALLOW_SKIP=1): {why}");
        return false;
    }
    panic!("{why} (set TIERWISE_ALLOW_SKIP=1 to skip such tests on a machine that cannot run them)");
}

/// How many trials (operations, iterations) a long test runs: `var` from the environment when
/// set; otherwise `readme` in the README's suite and `extended` under `TIERWISE_EXTENDED=1`
/// (`scripts/test-extended.sh`). docs/TESTING.md lists which tests scale this way.
pub fn trials(var: &str, readme: u64, extended: u64) -> u64 {
    if let Some(n) = std::env::var(var).ok().and_then(|v| v.parse().ok()) {
        return n;
    }
    if extended_run() { extended } else { readme }
}

/// Whether this is the extended run (`TIERWISE_EXTENDED=1`).
pub fn extended_run() -> bool {
    std::env::var_os("TIERWISE_EXTENDED").is_some_and(|v| v == "1")
}

/// A temporary directory in memory for a test's images: in the runner's per-test directory
/// (`TIERWISE_TEST_SHM`, which its teardown sweeps) when set, else in `/dev/shm`.
pub fn shm_dir(prefix: &str) -> std::io::Result<tempfile::TempDir> {
    let base = std::env::var_os("TIERWISE_TEST_SHM").map_or_else(|| "/dev/shm".into(), std::path::PathBuf::from);
    tempfile::Builder::new().prefix(prefix).tempdir_in(base)
}

/// `require(&[Need::Fuse])`.
pub fn fuse() -> bool {
    require(&[Need::Fuse])
}

/// `require(&[Need::Fuse, Need::Root])`.
pub fn fuse_and_root() -> bool {
    require(&[Need::Fuse, Need::Root])
}

/// nbdkit and qemu-io, for a served device.
pub fn serve() -> bool {
    require(&[Need::Tool("nbdkit", "nbdkit"), Need::Tool("qemu-io", "qemu-utils")])
}

/// Whether process `pid` has exited: gone, or a zombie none of whose threads still runs. A
/// thread group leader shows as a zombie as soon as it exits, while the process's other threads
/// may still be tearing down, holding its files (and so its locks): a server restarted at
/// that moment found its images still locked on a loaded machine.
pub fn exited(pid: i32) -> bool {
    let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| s.contains(") Z"));
    let threads = std::fs::read_dir(format!("/proc/{pid}/task")).map_or(0, |d| d.count());
    !std::path::Path::new(&format!("/proc/{pid}")).exists() || (zombie && threads <= 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hangs, with a helper process running in its directory: `scripts/test-all.sh` runs it
    /// (`run-tests.py --ignored --deadline 10`) to check that a hung test fails at its deadline,
    /// naming itself, and that what it started is torn down.
    #[test]
    #[ignore = "hangs on purpose: the check of the test runner's deadline"]
    fn hangs_on_purpose() {
        let dir = std::env::temp_dir();
        let _helper = std::process::Command::new("sleep").arg("100000").current_dir(&dir).spawn();
        loop {
            std::thread::sleep(std::time::Duration::from_secs(3600));
        }
    }

    #[test]
    fn a_missing_tool_fails_unless_skipping_is_allowed() {
        let need = [Need::Tool("no-such-tool-tierwise", "none")];
        assert!(Need::Tool("sh", "dash").missing().is_none());
        // SAFETY of the environment: this test alone sets the variable, and only for its check.
        let r = std::panic::catch_unwind(|| require(&need));
        if std::env::var_os("TIERWISE_ALLOW_SKIP").is_some_and(|v| v == "1") {
            assert_eq!(r.ok(), Some(false));
        } else {
            let msg = r.err().and_then(|p| p.downcast_ref::<String>().cloned()).unwrap_or_default();
            assert!(msg.contains("no-such-tool-tierwise") && msg.contains("TIERWISE_ALLOW_SKIP"), "{msg}");
        }
    }
}
