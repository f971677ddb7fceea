//! What an administrator of a tierwise mount relies on, end to end through the binary: the
//! policy is kept with the data (a write-back mount remounted without `--policy` stays
//! write-back; another policy needs `--force-policy`, which writes dirty files back first), a
//! mount whose daemon was killed comes back with the same command, a `--log` that cannot be
//! written is an error and no dead mount, fstab's `noexec` is honoured, `df` counts one file
//! system once, and the mount table names the tiers absolutely.

#![allow(clippy::unwrap_used, reason = "a failing setup should stop the test loudly")]

mod mount_common;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use mount_common::*;

#[test]
fn the_policy_is_kept_with_the_data_and_changed_only_on_purpose() {
    if !tierwise_testkit::fuse_and_root() {
        return;
    }
    let [root, mnt] = root_and_mountpoint();
    let (r, m) = (root.path().to_str().unwrap(), mnt.path().to_str().unwrap());
    {
        let _u = mount(&[r, m, "--policy", "file-write-back:dirty-high=90%"], mnt.path());
        for i in 0..4 {
            fs::write(mnt.path().join(format!("f{i}")), vec![i as u8 + 1; 64 << 10]).unwrap();
        }
        let o = tierwise(&["umount", m]);
        assert!(o.status.success(), "{}", stderr(&o));
    }
    assert!(!root.path().join("hdd/f0").exists(), "the new files are dirty on the SSD only");
    {
        // Without --policy: the recorded one, every knob.
        let _u = mount(&[r, m], mnt.path());
        let status = stdout(&tierwise(&["status", m]));
        assert!(status.contains("file-write-back:") && status.contains("dirty-high=90%"), "{status}");
        tierwise(&["umount", m]);
    }
    // Another policy: refused, naming the recorded one, nothing mounted.
    let o = tierwise(&["mount", r, m, "--policy", "on-demand-caching"]);
    let e = stderr(&o);
    assert!(!o.status.success() && e.contains("file-write-back") && e.contains("--force-policy"), "{e}");
    assert!(mounted(mnt.path()).is_none(), "a refused mount left a mount");
    // On purpose: the dirty files reach the HDD first.
    let _u = mount(&[r, m, "--policy", "on-demand-caching", "--force-policy"], mnt.path());
    for i in 0..4u8 {
        assert_eq!(fs::read(root.path().join(format!("hdd/f{i}"))).unwrap(), vec![i + 1; 64 << 10], "f{i} on the HDD");
        assert_eq!(fs::read(mnt.path().join(format!("f{i}"))).unwrap(), vec![i + 1; 64 << 10]);
    }
    assert!(stdout(&tierwise(&["status", m])).contains("on-demand-caching"));
}

#[test]
fn a_mount_whose_daemon_was_killed_mounts_again_with_the_same_command() {
    if !tierwise_testkit::fuse_and_root() {
        return;
    }
    let [root, mnt] = root_and_mountpoint();
    let (r, m) = (root.path().to_str().unwrap(), mnt.path().to_str().unwrap());
    let _u = mount(&[r, m, "--policy", "dynamic-hot-dst"], mnt.path());
    fs::write(mnt.path().join("kept"), b"still here").unwrap();
    fs::File::open(mnt.path().join("kept")).unwrap().sync_all().unwrap();
    let pid = daemon_pid(mnt.path());
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL).unwrap();
    wait_gone(pid);
    let stale = fs::read_dir(mnt.path()).err().and_then(|e| e.raw_os_error());
    assert!(
        matches!(stale, Some(nix::libc::ENOTCONN | nix::libc::ECONNABORTED)),
        "the killed mount answers ENOTCONN or ECONNABORTED: {stale:?}"
    );
    // The same command again: the stale endpoint is detached and the tiers mount again.
    let o = tierwise(&["mount", r, m, "--policy", "dynamic-hot-dst"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("detached"), "it says what it did: {}", stderr(&o));
    assert_eq!(fs::read(mnt.path().join("kept")).unwrap(), b"still here");
    // A stale mount of another file system is left alone.
    assert_eq!(mounted(mnt.path()).map(|(_, t)| t).as_deref(), Some("fuse.tierwise"));
}

#[test]
fn a_log_that_cannot_be_written_is_an_error_and_leaves_no_mount() {
    if !tierwise_testkit::fuse_and_root() {
        return;
    }
    let [root, mnt] = root_and_mountpoint();
    let (r, m) = (root.path().to_str().unwrap(), mnt.path().to_str().unwrap());
    let bad = root.path().join("no/such/dir/tierwise.log");
    let o = tierwise(&["mount", r, m, "--log", bad.to_str().unwrap()]);
    let e = stderr(&o);
    assert!(!o.status.success(), "exit status: {o:?}");
    assert!(e.contains("--log") && !stdout(&o).contains("mounted"), "{e}");
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert!(mounted(mnt.path()).is_none(), "a dead mount was left: {:?}", mounted(mnt.path()));
}

#[test]
fn noexec_is_honoured_df_counts_one_file_system_once_and_the_source_is_absolute() {
    if !tierwise_testkit::fuse_and_root() {
        return;
    }
    let [root, mnt] = root_and_mountpoint();
    let m = mnt.path().to_str().unwrap();
    // Relative tier paths, as a user types them.
    let o = Command::new(env!("CARGO_BIN_EXE_tierwise"))
        .args([
            "mount",
            "--ssd",
            "ssd",
            "--hdd",
            "hdd",
            m,
            "--policy",
            "dynamic-hot-dst",
            "--ssd-quota",
            "1GiB",
            "--noexec",
        ])
        .current_dir(root.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let _u = Unmount(mnt.path().to_path_buf());
    let (source, _) = mounted(mnt.path()).unwrap();
    let root_abs = fs::canonicalize(root.path()).unwrap();
    assert!(source.starts_with(root_abs.to_str().unwrap()) && source.contains(":/"), "source {source}");
    let script = mnt.path().join("s.sh");
    fs::write(&script, "#!/bin/sh\necho ran\n").unwrap();
    fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).unwrap();
    let run = Command::new(&script).output();
    assert!(
        run.as_ref().is_err_and(|e| e.kind() == std::io::ErrorKind::PermissionDenied),
        "a script ran on a noexec mount: {run:?}"
    );
    // Both tiers on one file system: df shows its size once (a tiering policy adds the SSD's
    // quota only when the SSD is another file system).
    let fs_size = {
        let st = nix::sys::statvfs::statvfs(root.path()).unwrap();
        st.blocks() * st.fragment_size()
    };
    let st = nix::sys::statvfs::statvfs(mnt.path()).unwrap();
    let shown = st.blocks() * st.fragment_size();
    assert!(shown <= fs_size, "df shows {shown} bytes on a file system of {fs_size}");
    let files = nix::sys::statvfs::statvfs(root.path()).unwrap().files();
    assert_eq!(st.files(), files, "inodes of one file system counted once");
}

/// `file-write-back` writes back the files created through the mount: 120 new files of 512 KiB
/// under `dirty-high=10%,dirty-low=5%` fall below the low watermark within 45 s, without a
/// flush. Before, a created file was never queued: all 60 MiB stayed dirty on the SSD, its only
/// copy, with no write-back at all.
#[test]
fn file_write_back_writes_back_new_files_below_the_low_watermark() {
    if !tierwise_testkit::fuse_and_root() {
        return;
    }
    let [root, mnt] = root_and_mountpoint();
    let (r, m) = (root.path().to_str().unwrap(), mnt.path().to_str().unwrap());
    let quota: u64 = 256 << 20;
    let _u = mount(
        &[
            r,
            m,
            "--policy",
            "file-write-back:dirty-high=10%,dirty-low=5%",
            "--ssd-quota",
            "256MiB",
            "--pin-reserve",
            "0",
        ],
        mnt.path(),
    );
    let data = vec![0x5au8; 512 << 10];
    let started = std::time::Instant::now();
    for i in 0..120 {
        fs::write(mnt.path().join(format!("n{i}")), &data).unwrap();
    }
    let low = quota / 20;
    let stats = || -> serde_json::Value { serde_json::from_slice(&tierwise(&["stats", "--json", m]).stdout).unwrap() };
    let mut dirty = u64::MAX;
    while started.elapsed() < std::time::Duration::from_secs(45) {
        dirty = stats()["dirty_bytes"].as_u64().unwrap();
        if dirty <= low {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let s = stats();
    eprintln!(
        "120 new files of 512 KiB: {dirty} dirty bytes (low watermark {low}) after {:.1} s, {} write-backs",
        started.elapsed().as_secs_f64(),
        s["session"]["writebacks"]
    );
    assert!(dirty <= low, "{dirty} dirty bytes after 45 s, above dirty-low ({low}): {s}");
    assert!(s["session"]["writebacks"].as_u64().unwrap() > 0);
    assert!(root.path().join("hdd/n0").exists(), "the first files reached the HDD");
}
