//! What the `tierwise serve` tests share: a served device in a temporary directory, the
//! tools it needs, and a seeded random source.

#![allow(dead_code, unused_imports, reason = "each test file uses a part")]
#![expect(clippy::unwrap_used, reason = "a failing setup should stop the test loudly")]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

pub fn have(tool: &str) -> bool {
    Command::new("sh").arg("-c").arg(format!("command -v {tool}")).output().is_ok_and(|o| o.status.success())
}

pub fn can_serve() -> bool {
    tierwise_testkit::serve()
}

pub fn tierwise(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tierwise")).args(args).output().unwrap()
}

/// A served device in a temporary directory; the server is killed when this is dropped.
pub struct Served {
    pub dir: tempfile::TempDir,
    pub policy: String,
}

impl Served {
    pub fn create(policy: &str, ssd: &str, hdd: &str) -> Served {
        Served::create_with(policy, ssd, hdd, &[])
    }
    /// Creates and serves a device, with `extra` flags for `serve`.
    pub fn create_with(policy: &str, ssd: &str, hdd: &str, extra: &[&str]) -> Served {
        Served::create_in(tempfile::tempdir().unwrap(), policy, ssd, hdd, extra)
    }
    /// [`Served::create_with`] in `dir` (e.g. one in /dev/shm, for images in memory).
    pub fn create_in(dir: tempfile::TempDir, policy: &str, ssd: &str, hdd: &str, extra: &[&str]) -> Served {
        let s = Served { dir, policy: policy.to_string() };
        let (ssd_img, hdd_img) = (s.ssd(), s.hdd());
        let args = ["serve", "--create", "--ssd", ssd_img.to_str().unwrap(), "--hdd", hdd_img.to_str().unwrap()];
        let out = tierwise(&[&args[..], &["--ssd-size", ssd, "--hdd-size", hdd, "--policy", policy], extra].concat());
        assert!(out.status.success(), "{policy}: {}", String::from_utf8_lossy(&out.stderr));
        s.wait_served();
        s
    }
    pub fn ssd(&self) -> PathBuf {
        self.dir.path().join("ssd.img")
    }
    pub fn hdd(&self) -> PathBuf {
        self.dir.path().join("hdd.img")
    }
    pub fn socket(&self) -> PathBuf {
        self.dir.path().join("ssd.img.sock")
    }
    pub fn control(&self) -> PathBuf {
        self.dir.path().join("ssd.img.sock.control")
    }
    pub fn pid(&self) -> Option<i32> {
        std::fs::read_to_string(self.dir.path().join("ssd.img.sock.control.pid")).ok()?.trim().parse().ok()
    }
    pub fn uri(&self) -> String {
        format!("nbd+unix:///?socket={}", self.socket().display())
    }
    pub fn start(&self) -> Output {
        let out = tierwise(&[
            "serve",
            "--ssd",
            self.ssd().to_str().unwrap(),
            "--hdd",
            self.hdd().to_str().unwrap(),
            "--policy",
            &self.policy,
            "--movers",
            "2",
        ]);
        if out.status.success() {
            self.wait_served();
        }
        out
    }
    pub fn wait_served(&self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.pid().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(self.pid().is_some(), "{}: the server did not start", self.policy);
    }
    /// Runs qemu-io commands on the device; every one must succeed and every pattern match.
    pub fn qemu_io(&self, cmds: &[String]) {
        let out = self.try_qemu_io(cmds);
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(
            out.status.success() && !text.contains("failed") && !text.contains("rror"),
            "{}: qemu-io {cmds:?}:\n{text}",
            self.policy
        );
    }
    pub fn try_qemu_io(&self, cmds: &[String]) -> Output {
        let mut c = Command::new("timeout");
        c.args(["120", "qemu-io", "-f", "raw", &self.uri()]);
        for cmd in cmds {
            c.arg("-c").arg(cmd);
        }
        c.output().unwrap()
    }
    pub fn signal(&self, sig: &str) {
        if let Some(pid) = self.pid() {
            stop_server(pid, sig, &self.policy);
        }
        let _ = std::fs::remove_file(self.dir.path().join("ssd.img.sock.control.pid"));
    }
    pub fn stats(&self) -> serde_json::Value {
        let out = tierwise(&["stats", "--json", self.control().to_str().unwrap()]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    }
}

/// Signals a server and waits until it has exited (`tierwise_testkit::exited`: every thread gone,
/// so its files and image locks are closed). Its final checkpoint can take a while on a loaded CI machine.
pub fn stop_server(pid: i32, sig: &str, what: &str) {
    let _ = Command::new("kill").arg(sig).arg(pid.to_string()).status();
    let gone = || tierwise_testkit::exited(pid);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !gone() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(gone(), "{what}: the server did not stop within 60 s of {sig}");
}

impl Drop for Served {
    /// The shared teardown of everything the device's directory holds: the server (nbdkit and
    /// the plugin), a client left on its socket, mounts and loop devices in it.
    fn drop(&mut self) {
        let pids = self.pid().into_iter().collect();
        tierwise_testkit::teardown::release(&tierwise_testkit::teardown::Targets {
            dirs: vec![self.dir.path().to_path_buf()],
            pids,
            ..Default::default()
        });
    }
}

/// The simulator's seeded generator: the same operations on every run.
pub use tierwise_sim::synth::Rng;
