//! Real tools on a real mount: fio jobs that verify every block they wrote (`--verify=crc32c`)
//! and postmark, on small SSD quotas so that files migrate while the tools run. Skipped, with a
//! message, where `/dev/fuse` cannot be opened or the tools are missing (`scripts/test-all.sh`
//! installs them).

#![expect(clippy::unwrap_used, reason = "a failing setup should stop the test loudly")]

use std::path::Path;
use std::process::{Command, Stdio};

fn ready(tool: &str) -> bool {
    // The tool names its Debian package here (fio, postmark).
    let tool: &'static str = Box::leak(tool.to_string().into_boxed_str());
    tierwise_testkit::require(&[tierwise_testkit::Need::Fuse, tierwise_testkit::Need::Tool(tool, tool)])
}

/// A daemon mounted for the test; detached when the test ends, also when it fails.
struct Mount(std::path::PathBuf);
impl Mount {
    fn new(ssd: &Path, hdd: &Path, mnt: &Path, policy: &str, quota: &str) -> Mount {
        let o = Command::new(env!("CARGO_BIN_EXE_tierwise"))
            .args(["mount", "--ssd", ssd.to_str().unwrap(), "--hdd", hdd.to_str().unwrap()])
            .arg(mnt)
            .args(["--policy", policy, "--ssd-quota", quota, "--pin-reserve", "0"])
            .output()
            .unwrap();
        assert!(o.status.success(), "mount: {}", String::from_utf8_lossy(&o.stderr));
        Mount(mnt.to_path_buf())
    }
}
impl Drop for Mount {
    fn drop(&mut self) {
        tierwise_testkit::teardown::release(&tierwise_testkit::teardown::Targets::mount(&self.0, None));
    }
}

const POLICIES: [&str; 3] = ["dynamic-hot-dst:sieve=0", "file-write-back:sieve=0", "hycache"];

#[test]
fn fio_verifies_every_block_it_wrote_while_files_migrate() {
    if !ready("fio") {
        return;
    }
    for policy in POLICIES {
        let (ssd, hdd, mnt) =
            (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        // Four 3 MiB files, 4 MiB of SSD: files move in and out as the jobs run.
        let _m = Mount::new(ssd.path(), hdd.path(), mnt.path(), policy, "4MiB");
        for (rw, bs) in [("randwrite", "4k"), ("write", "1m"), ("randrw", "16k")] {
            let o = Command::new("fio")
                .args(["--name=verify", "--ioengine=psync", "--numjobs=4", "--size=3m", "--verify=crc32c"])
                .args(["--do_verify=1", "--verify_fatal=1", "--group_reporting", "--minimal"])
                .arg(format!("--rw={rw}"))
                .arg(format!("--bs={bs}"))
                .arg(format!("--directory={}", mnt.path().display()))
                // fio leaves its verify state files in the working directory.
                .current_dir(hdd.path())
                .output()
                .unwrap();
            assert!(
                o.status.success(),
                "{policy}: fio {rw} {bs} failed verification:\n{}\n{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            );
        }
    }
}

#[test]
fn postmark_runs_to_completion_on_the_mount() {
    if !ready("postmark") {
        return;
    }
    for policy in POLICIES {
        let (ssd, hdd, mnt) =
            (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let _m = Mount::new(ssd.path(), hdd.path(), mnt.path(), policy, "2MiB");
        let script = format!(
            "set location {}\nset number 400\nset transactions 3000\nset size 500 20000\nset subdirectories 4\nrun\nquit\n",
            mnt.path().display()
        );
        let mut child = Command::new("postmark")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        std::io::Write::write_all(child.stdin.as_mut().unwrap(), script.as_bytes()).unwrap();
        let o = child.wait_with_output().unwrap();
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success(), "{policy}: postmark failed: {out}\n{}", String::from_utf8_lossy(&o.stderr));
        assert!(out.contains("Deleting subdirectories...Done") && out.contains("of transactions"), "{policy}: {out}");
        assert!(!out.to_lowercase().contains("error"), "{policy}: {out}");
        // Postmark deletes what it created: nothing is left on the mount or on the tiers.
        assert_eq!(std::fs::read_dir(mnt.path()).unwrap().count(), 0, "{policy}: left on the mount");
    }
}
