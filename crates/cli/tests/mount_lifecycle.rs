//! The lifecycle an admin expects: fstab and `mount -a` (twice: one daemon), `-o ro`, the type
//! `fuse.tierwise`, SIGTERM unmounting cleanly during a move, systemd (the shipped unit verifies,
//! readiness is notified), logs where asked and no file per mount in /tmp, `df` by policy, and
//! passthrough that a policy cannot use said at mount time.
//!
//! Skipped where `/dev/fuse` cannot be opened or the test is not root.

#![expect(clippy::unwrap_used, reason = "a failing setup should stop the test loudly")]

use std::fs;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn tierwise(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tierwise")).args(args).output().unwrap()
}

fn can_mount() -> bool {
    tierwise_testkit::fuse_and_root()
}

fn temp_dirs<const N: usize>() -> [tempfile::TempDir; N] {
    std::array::from_fn(|_| tempfile::tempdir().unwrap())
}

/// The mount table's entry for `mnt`: (source, type, options).
fn mounted(mnt: &Path) -> Option<(String, String, String)> {
    let canon = fs::canonicalize(mnt).ok()?;
    fs::read_to_string("/proc/self/mountinfo").ok()?.lines().rev().find_map(|l| {
        let (head, tail) = l.split_once(" - ")?;
        let f: Vec<&str> = head.split(' ').collect();
        (Path::new(f.get(4)?) == canon).then(|| {
            let t: Vec<&str> = tail.split(' ').collect();
            (t.get(1).unwrap_or(&"").to_string(), t[0].to_string(), f.get(5).unwrap_or(&"").to_string())
        })
    })
}

fn daemons_on(mnt: &Path) -> usize {
    let needle = mnt.to_string_lossy().into_owned();
    fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| fs::read(e.path().join("cmdline")).ok())
        .filter(|c| {
            let args: Vec<String> = c.split(|&b| b == 0).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
            args.iter().any(|a| a == "--foreground") && args.iter().any(|a| a == &needle)
        })
        .count()
}

/// Tears a mountpoint down when the test ends (the shared teardown).
use tierwise_testkit::teardown::Unmount;

/// `/sbin/mount.tierwise`, the one install step for `mount -t tierwise` and fstab; removed
/// again if the test made it.
struct Helper(bool);
impl Helper {
    fn install() -> Option<Helper> {
        let link = Path::new("/sbin/mount.tierwise");
        match fs::read_link(link) {
            Ok(t) if t == Path::new(env!("CARGO_BIN_EXE_tierwise")) => Some(Helper(false)),
            Ok(_) => None,
            Err(_) if link.exists() => None,
            Err(_) => std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_tierwise"), link).ok().map(|()| Helper(true)),
        }
    }
}
impl Drop for Helper {
    fn drop(&mut self) {
        if self.0 {
            let _ = fs::remove_file("/sbin/mount.tierwise");
        }
    }
}

/// An fstab line mounts with `mount -a`; `mount -a` again leaves one daemon; the type is
/// `fuse.tierwise`; `-o ro` is read-only and moves nothing.
#[test]
fn fstab_lines_mount_once_and_ro_is_read_only() {
    if !can_mount() {
        return;
    }
    let Some(_helper) = Helper::install() else {
        tierwise_testkit::unmet(
            "/sbin/mount.tierwise belongs to another tierwise install; the fstab test needs it to be this one",
        );
        return;
    };
    let [root, mnt, etc] = temp_dirs();
    for t in ["ssd", "hdd"] {
        fs::create_dir(root.path().join(t)).unwrap();
    }
    // The README's fstab syntax.
    let fstab = etc.path().join("fstab");
    let line = |opts: &str| format!("{} {} tierwise {opts} 0 0\n", root.path().display(), mnt.path().display());
    fs::write(&fstab, line("policy=dynamic-hot-dst:sieve=0,ssd_quota=64KiB,pin_reserve=0,nofail")).unwrap();
    let _u = Unmount(mnt.path().to_path_buf());
    for round in 0..2 {
        let o = Command::new("mount").args(["-a", "-T", fstab.to_str().unwrap()]).output().unwrap();
        assert!(o.status.success(), "mount -a, round {round}: {o:?}");
    }
    let (source, fstype, _) = mounted(mnt.path()).unwrap();
    assert_eq!((source.as_str(), fstype.as_str()), (root.path().to_str().unwrap(), "fuse.tierwise"));
    assert_eq!(daemons_on(mnt.path()), 1, "mount -a twice left one daemon");
    for i in 0..8 {
        fs::write(mnt.path().join(format!("f{i}")), vec![i as u8; 30_000]).unwrap();
    }
    for i in 0..8 {
        fs::read(mnt.path().join(format!("f{i}"))).unwrap();
    }
    let o = tierwise(&["umount", mnt.path().to_str().unwrap()]);
    assert!(o.status.success(), "{o:?}");
    let layout = || {
        let mut v: Vec<(String, bool, bool)> = (0..8)
            .map(|i| {
                let n = format!("f{i}");
                let on = |t: &str| root.path().join(t).join(&n).exists();
                (n.clone(), on("ssd"), on("hdd"))
            })
            .collect();
        v.sort();
        v
    };
    let before = layout();
    fs::write(&fstab, line("ro,policy=dynamic-hot-dst:sieve=0,ssd_quota=64KiB,pin_reserve=0")).unwrap();
    let o = Command::new("mount").args(["-a", "-T", fstab.to_str().unwrap()]).output().unwrap();
    assert!(o.status.success(), "{o:?}");
    let (_, _, opts) = mounted(mnt.path()).unwrap();
    assert!(opts.split(',').any(|o| o == "ro"), "{opts}");
    for _ in 0..3 {
        for i in 0..8 {
            assert_eq!(fs::read(mnt.path().join(format!("f{i}"))).unwrap(), vec![i as u8; 30_000]);
        }
    }
    let e = fs::write(mnt.path().join("new"), b"x").unwrap_err();
    assert_eq!(e.raw_os_error(), Some(nix::libc::EROFS));
    assert!(String::from_utf8_lossy(&tierwise(&["status", mnt.path().to_str().unwrap()]).stdout).contains("read-only"));
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(layout(), before, "a read-only mount moved files");
}

/// SIGTERM while a slow move runs: the daemon unmounts, the move rolls back, the state is saved,
/// nothing is left mounted; the next mount has every byte.
#[test]
fn sigterm_unmounts_cleanly_during_a_move() {
    if !can_mount() {
        return;
    }
    let [ssd, hdd, mnt] = temp_dirs();
    fs::write(hdd.path().join("big"), vec![7u8; 4 << 20]).unwrap();
    let m = mnt.path().to_str().unwrap();
    let args = ["mount", "--ssd", ssd.path().to_str().unwrap(), "--hdd", hdd.path().to_str().unwrap(), m];
    let o = tierwise(&[&args[..], &["--policy", "dynamic-hot-dst:sieve=0", "--move-rate", "1"]].concat());
    assert!(o.status.success(), "{o:?}");
    let _u = Unmount(mnt.path().to_path_buf());
    let snap: serde_json::Value = serde_json::from_slice(&tierwise(&["stats", m, "--json"]).stdout).unwrap();
    let pid = snap["pid"].as_u64().unwrap() as i32;
    // One read queues a promotion at 1 MB/s (4 s); no other access asks it to yield.
    std::io::Read::read(&mut fs::File::open(mnt.path().join("big")).unwrap(), &mut [0u8; 4096]).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !String::from_utf8_lossy(&tierwise(&["status", m]).stdout).contains("moving        promote") {
        assert!(Instant::now() < deadline, "the move never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGTERM).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !tierwise_testkit::exited(pid) {
        assert!(Instant::now() < deadline, "the daemon did not exit on SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(mounted(mnt.path()).is_none(), "a stale mount was left behind");
    assert!(fs::read_dir(mnt.path()).is_ok(), "the mountpoint is usable (no 'transport endpoint is not connected')");
    let tmp_left =
        fs::read_dir(ssd.path()).unwrap().flatten().any(|e| e.file_name().to_string_lossy().contains("tmp-"));
    assert!(!tmp_left || hdd.path().join("big").exists(), "a half-copied file is only a leftover temporary");
    let o = tierwise(&[&args[..], &["--policy", "dynamic-hot-dst:sieve=0"]].concat());
    assert!(o.status.success(), "{o:?}");
    assert_eq!(fs::read(mnt.path().join("big")).unwrap(), vec![7u8; 4 << 20]);
}

/// The shipped systemd unit verifies; a foreground daemon tells systemd it is ready
/// (`NOTIFY_SOCKET`), logs to `--log FILE` and leaves no file of its own in /tmp.
#[test]
fn systemd_unit_verifies_and_readiness_and_logs_work() {
    if !can_mount() {
        return;
    }
    let [unit_dir, ssd, hdd, mnt, logs] = temp_dirs();
    let unit =
        fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../contrib/systemd/tierwise@.service")).unwrap();
    let path = unit_dir.path().join("tierwise@srv-data.service");
    fs::write(&path, unit.replace("/usr/local/bin/tierwise", env!("CARGO_BIN_EXE_tierwise"))).unwrap();
    match Command::new("systemd-analyze").args(["verify", "--man=no"]).arg(&path).output() {
        Ok(o) => assert!(o.status.success(), "systemd-analyze verify: {}", String::from_utf8_lossy(&o.stderr)),
        Err(_) => eprintln!("systemd-analyze not installed: the unit is not verified here"),
    }
    let tmp_before: Vec<_> = fs::read_dir(std::env::temp_dir()).unwrap().flatten().map(|e| e.file_name()).collect();
    let sock_path = unit_dir.path().join("notify");
    let sock = UnixDatagram::bind(&sock_path).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let log = logs.path().join("tw.log");
    let mut child = Command::new(env!("CARGO_BIN_EXE_tierwise"))
        .args(["mount", "--foreground", "--ssd", ssd.path().to_str().unwrap(), "--hdd", hdd.path().to_str().unwrap()])
        .arg(mnt.path())
        .args(["--log", log.to_str().unwrap(), "--log-level", "debug"])
        .env("NOTIFY_SOCKET", &sock_path)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _u = Unmount(mnt.path().to_path_buf());
    let mut buf = [0u8; 256];
    let n = sock.recv(&mut buf).unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).contains("READY=1"), "{}", String::from_utf8_lossy(&buf[..n]));
    assert!(mounted(mnt.path()).is_some(), "ready means mounted");
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), nix::sys::signal::Signal::SIGINT).unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}");
    let n = sock.recv(&mut buf).unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).contains("STOPPING=1"));
    let text = fs::read_to_string(&log).unwrap();
    assert!(text.contains("mounted on") && text.contains("SIGINT") && text.contains("unmounted"), "{text}");
    let tmp_after: Vec<_> = fs::read_dir(std::env::temp_dir()).unwrap().flatten().map(|e| e.file_name()).collect();
    let new: Vec<_> =
        tmp_after.iter().filter(|n| !tmp_before.contains(n) && n.to_string_lossy().contains("tierwise")).collect();
    assert!(new.is_empty(), "files left in /tmp: {new:?}");
}

/// `df` shows what a user can store: a caching policy the HDD's space, a tiering policy the
/// HDD's plus the SSD quota; `status` shows the data path, and asking for passthrough with a
/// policy that cannot use it is said at mount time.
#[test]
fn df_follows_the_policy_and_declined_passthrough_is_said() {
    if !can_mount() {
        return;
    }
    let [ssd_fs, hdd_fs, mnt] = temp_dirs();
    let tmpfs = |d: &Path, size: &str| {
        nix::mount::mount(Some("tmpfs"), d, Some("tmpfs"), nix::mount::MsFlags::empty(), Some(size)).unwrap();
    };
    tmpfs(ssd_fs.path(), "size=8m");
    tmpfs(hdd_fs.path(), "size=64m");
    struct Detach(PathBuf);
    impl Drop for Detach {
        fn drop(&mut self) {
            let _ = nix::mount::umount2(&self.0, nix::mount::MntFlags::MNT_DETACH);
        }
    }
    let _d = (Detach(ssd_fs.path().into()), Detach(hdd_fs.path().into()));
    let (s, h, m) = (ssd_fs.path().to_str().unwrap(), hdd_fs.path().to_str().unwrap(), mnt.path().to_str().unwrap());
    let size_of = || {
        let st = nix::sys::statvfs::statvfs(mnt.path()).unwrap();
        st.blocks() * st.fragment_size()
    };
    let mib = 1 << 20;
    for (policy, extra, want_mib) in
        [("file-write-back", "--passthrough", 64), ("dynamic-hot-dst", "", 64 + 4), ("hdd-only", "", 64)]
    {
        // One pair of tiers under three policies: each remount changes it on purpose.
        let mut args =
            vec!["mount", "--ssd", s, "--hdd", h, m, "--policy", policy, "--force-policy", "--ssd-quota", "4MiB"];
        if !extra.is_empty() {
            args.push(extra);
        }
        let o = tierwise(&args);
        assert!(o.status.success(), "{o:?}");
        let _u = Unmount(mnt.path().to_path_buf());
        assert_eq!(size_of() / mib, want_mib, "{policy}: df size");
        let status = String::from_utf8_lossy(&tierwise(&["status", m]).stdout).into_owned();
        let warned = String::from_utf8_lossy(&o.stderr).into_owned();
        match policy {
            "file-write-back" => {
                assert!(warned.contains("--passthrough") && warned.contains("must see every write"), "{warned}");
                assert!(
                    status.contains("data path     regular FUSE I/O") && status.contains("passthrough   declined"),
                    "{status}"
                );
            }
            // The default, without a word.
            "dynamic-hot-dst" => assert!(status.contains("data path     passthrough") && warned.is_empty(), "{status}"),
            _ => {}
        }
        drop(_u);
    }
    // The default quota is a share of what tierwise can have (free space plus its own files),
    // not of the file system: with 2 MiB of other data and 1 MiB of tierwise's on the 8 MiB SSD,
    // 90 % of about 6 MiB.
    let tier = ssd_fs.path().join("tier");
    fs::create_dir(&tier).unwrap();
    fs::write(ssd_fs.path().join("other"), vec![1u8; 2 << 20]).unwrap();
    fs::write(tier.join("ours"), vec![2u8; 1 << 20]).unwrap();
    let o = tierwise(&["mount", "--ssd", tier.to_str().unwrap(), "--hdd", h, m, "--policy", "dynamic-hot-dst"]);
    assert!(o.status.success(), "{o:?}");
    let _u = Unmount(mnt.path().to_path_buf());
    let s: serde_json::Value = serde_json::from_slice(&tierwise(&["stats", m, "--json"]).stdout).unwrap();
    let quota = s["ssd_quota"].as_u64().unwrap() as f64 / mib as f64;
    assert!((5.0..5.8).contains(&quota), "default quota {quota:.2} MiB: 90 % of free space plus tierwise's own");
}
