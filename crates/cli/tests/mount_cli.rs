//! `tierwise mount`, `which-tier` and `umount` end to end: a full SSD tier (a small tmpfs), a
//! user who may not read another user's file, and symlinks that point outside the tiers.
//! Skipped where `/dev/fuse` cannot be opened or tmpfs cannot be mounted (not root).

#![expect(clippy::unwrap_used, reason = "a failing setup should stop the test loudly")]

use std::fs::{self, OpenOptions};
use std::path::Path;
use std::process::{Command, Output};

fn tierwise(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tierwise")).args(args).output().unwrap()
}

fn can_mount() -> bool {
    tierwise_testkit::fuse_and_root()
}

/// `N` fresh temporary directories.
fn temp_dirs<const N: usize>() -> [tempfile::TempDir; N] {
    std::array::from_fn(|_| tempfile::tempdir().unwrap())
}

struct Tmpfs(tempfile::TempDir);
impl Tmpfs {
    fn new(size: &str) -> Tmpfs {
        let d = tempfile::tempdir().unwrap();
        nix::mount::mount(
            Some("tmpfs"),
            d.path(),
            Some("tmpfs"),
            nix::mount::MsFlags::empty(),
            Some(format!("size={size}").as_str()),
        )
        .unwrap();
        Tmpfs(d)
    }
}
impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = nix::mount::umount2(self.0.path(), nix::mount::MntFlags::MNT_DETACH);
    }
}

/// Tears a mountpoint down when a test ends, also when it fails half way (no daemon outlives it).
use tierwise_testkit::teardown::Unmount;

#[must_use]
fn mount(ssd: &Path, hdd: &Path, mnt: &Path, extra: &[&str]) -> Unmount {
    let mut args = vec!["mount", "--ssd", ssd.to_str().unwrap(), "--hdd", hdd.to_str().unwrap(), mnt.to_str().unwrap()];
    args.extend_from_slice(extra);
    let o = tierwise(&args);
    assert!(o.status.success(), "mount: {}", String::from_utf8_lossy(&o.stderr));
    Unmount(mnt.to_path_buf())
}

fn umount(mnt: &Path) {
    let o = tierwise(&["umount", mnt.to_str().unwrap()]);
    assert!(o.status.success(), "umount: {}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn a_full_ssd_gives_a_clear_error_and_loses_nothing() {
    if !can_mount() {
        return;
    }
    // The quota says 8 MiB, the SSD's file system holds 512 KiB: writes and moves hit ENOSPC.
    // Passthrough (the kernel writes the tier file) and regular FUSE I/O (the daemon does).
    for data_path in ["--passthrough", "--no-passthrough"] {
        let ssd = Tmpfs::new("512k");
        let (hdd, mnt) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let _unmount = mount(
            ssd.0.path(),
            hdd.path(),
            mnt.path(),
            &["--policy", "plain-cold-dst:sieve=0", "--ssd-quota", "8MiB", data_path],
        );
        let mut written = Vec::new();
        let mut full = None;
        for i in 0..40 {
            let data = vec![i as u8; 64 * 1024];
            let p = mnt.path().join(format!("f{i}"));
            match fs::write(&p, &data) {
                Ok(()) => written.push((p, data)),
                Err(e) => {
                    full = Some(e);
                    let _ = fs::remove_file(&p);
                    break;
                }
            }
        }
        let e = full.expect("the 512 KiB SSD fills up");
        assert_eq!(e.raw_os_error(), Some(28), "a full SSD answers ENOSPC, not something vaguer: {e}");
        for (p, data) in &written {
            assert_eq!(&fs::read(p).unwrap(), data, "{} survived the full SSD", p.display());
        }
        // The admin sees why: degraded, the SSD tier's writes failing, counted (passthrough writes
        // are the kernel's: the daemon never sees them fail).
        if data_path == "--no-passthrough" {
            let status =
                String::from_utf8_lossy(&tierwise(&["status", mnt.path().to_str().unwrap()]).stdout).into_owned();
            assert!(status.contains("health        DEGRADED: SSD tier writes fail"), "{status}");
            let stats: serde_json::Value =
                serde_json::from_slice(&tierwise(&["stats", "--json", mnt.path().to_str().unwrap()]).stdout).unwrap();
            assert!(
                stats["io_errors"][0][1].as_u64().unwrap_or(0) > 0,
                "SSD write errors counted: {}",
                stats["io_errors"]
            );
        }
        umount(mnt.path());
    }
    // Moves up into a full SSD fail and roll back: every file stays readable on the HDD.
    let ssd = Tmpfs::new("256k");
    let (hdd, mnt) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    for i in 0..30 {
        fs::write(hdd.path().join(format!("g{i}")), vec![i as u8; 48 * 1024]).unwrap();
    }
    let _unmount =
        mount(ssd.0.path(), hdd.path(), mnt.path(), &["--policy", "dynamic-hot-dst:sieve=0", "--ssd-quota", "8MiB"]);
    for round in 0..3 {
        for i in 0..30 {
            assert_eq!(fs::read(mnt.path().join(format!("g{i}"))).unwrap(), vec![i as u8; 48 * 1024], "round {round}");
        }
    }
    let tiers = tierwise(&["which-tier", mnt.path().join("g0").to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&tiers.stdout).contains("g0: "), "{tiers:?}");
    umount(mnt.path());
}

#[test]
fn permissions_are_enforced_and_symlinks_never_lead_the_daemon_outside() {
    if !can_mount() || Command::new("setpriv").arg("--version").output().is_err() {
        return;
    }
    let (ssd, hdd, mnt) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(mnt.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let _unmount = mount(ssd.path(), hdd.path(), mnt.path(), &["--policy", "on-demand-caching", "--allow-other"]);
    fs::set_permissions(mnt.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let secret = mnt.path().join("secret");
    fs::write(&secret, b"root only").unwrap();
    fs::set_permissions(&secret, fs::Permissions::from_mode(0o600)).unwrap();
    let open = mnt.path().join("open");
    fs::write(&open, b"everyone").unwrap();
    fs::set_permissions(&open, fs::Permissions::from_mode(0o644)).unwrap();
    let as_nobody = |p: &Path| {
        Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", "cat"])
            .arg(p)
            .output()
            .unwrap()
    };
    let o = as_nobody(&secret);
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("Permission denied"), "{o:?}");
    let o = as_nobody(&open);
    assert!(o.status.success() && o.stdout == b"everyone", "{o:?}");
    // A symlink to a file outside the tiers: changing the link's owner or times through the
    // mount must not touch the target.
    let outside = tempfile::NamedTempFile::new().unwrap();
    let before = fs::metadata(outside.path()).unwrap();
    std::os::unix::fs::symlink(outside.path(), mnt.path().join("escape")).unwrap();
    std::os::unix::fs::lchown(mnt.path().join("escape"), Some(65534), Some(65534)).unwrap();
    let after = fs::metadata(outside.path()).unwrap();
    use std::os::unix::fs::MetadataExt;
    assert_eq!((before.uid(), before.gid()), (after.uid(), after.gid()), "the symlink's target kept its owner");
    assert_eq!(fs::symlink_metadata(hdd.path().join("escape")).unwrap().uid(), 65534, "the link itself changed");
    umount(mnt.path());
}

/// The daemon writes as root, which keeps set-id bits; with FUSE_HANDLE_KILLPRIV_V2 clearing
/// them is its job. A write or truncate by another user clears set-user-ID (and set-group-ID on
/// a group-executable file) as on a local file system, with regular I/O and with passthrough
/// (which refuses files that have them, so their writes take the regular path).
#[test]
fn writes_by_other_users_clear_set_id_bits() {
    if !can_mount() || Command::new("setpriv").arg("--version").output().is_err() {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o7777;
    let as_nobody = |script: &str| {
        let o = Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", "sh", "-c", script])
            .output()
            .unwrap();
        assert!(o.status.success(), "{script}: {o:?}");
    };
    for extra in [&[][..], &["--passthrough"][..], &["--kernel-cache"][..]] {
        let (ssd, hdd, mnt) =
            (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        fs::set_permissions(mnt.path(), fs::Permissions::from_mode(0o755)).unwrap();
        let mut args = vec!["--policy", "dynamic-hot-dst", "--allow-other"];
        args.extend_from_slice(extra);
        let _unmount = mount(ssd.path(), hdd.path(), mnt.path(), &args);
        fs::set_permissions(mnt.path(), fs::Permissions::from_mode(0o777)).unwrap();
        let (a, b) = (mnt.path().join("a"), mnt.path().join("b"));
        for p in [&a, &b] {
            fs::write(p, b"binary").unwrap();
            fs::set_permissions(p, fs::Permissions::from_mode(0o6777)).unwrap();
        }
        // Root may write and keep them (CAP_FSETID).
        OpenOptions::new().append(true).open(&a).and_then(|mut f| std::io::Write::write_all(&mut f, b"+")).unwrap();
        assert_eq!(mode(&a), 0o6777, "{extra:?}: root's write keeps set-id bits");
        as_nobody(&format!("printf x >> {}", a.display()));
        assert_eq!(mode(&a), 0o0777, "{extra:?}: another user's write clears both (the group may execute)");
        as_nobody(&format!("truncate -s 1 {}", b.display()));
        assert_eq!(mode(&b), 0o0777, "{extra:?}: another user's truncate clears them");
        assert_eq!(fs::read(&a).unwrap(), b"binary+x");
        umount(mnt.path());
    }
}

/// The SSD tier's file system goes away under a live mount (here a bind mount, detached): its
/// path now names the empty directory underneath. Its files answer EIO (not ENOENT, never a
/// hang), the HDD's files stay readable, nothing is created in the directory underneath,
/// status says LOST, and when the file system is back everything is as it was.
#[test]
fn a_tier_that_disappears_answers_eio_and_comes_back_intact() {
    if !can_mount() {
        return;
    }
    use nix::mount::{MntFlags, MsFlags};
    let [real_ssd, ssd, hdd, mnt] = temp_dirs();
    let bind =
        || nix::mount::mount(Some(real_ssd.path()), ssd.path(), None::<&str>, MsFlags::MS_BIND, None::<&str>).unwrap();
    bind();
    let _unbind = Unmount(ssd.path().to_path_buf());
    fs::write(hdd.path().join("cold"), b"on the hdd").unwrap();
    let _unmount = mount(ssd.path(), hdd.path(), mnt.path(), &["--policy", "plain-cold-dst:sieve=0"]);
    let (hot, cold) = (mnt.path().join("hot"), mnt.path().join("cold"));
    fs::write(&hot, b"on the ssd").unwrap();
    assert_eq!(fs::read_to_string(real_ssd.path().join("hot")).unwrap(), "on the ssd");
    // A handle still open on the tier (as a write's may be, its release not in yet) does not
    // let a new open through.
    let writer = fs::OpenOptions::new().append(true).open(&hot).unwrap();
    nix::mount::umount2(ssd.path(), MntFlags::MNT_DETACH).unwrap();
    assert!(fs::read_dir(ssd.path()).unwrap().next().is_none(), "the directory underneath is empty");
    let e = fs::read(&hot).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(5), "a file on the lost tier answers EIO: {e}");
    assert_eq!(fs::read(&cold).unwrap(), b"on the hdd", "the HDD's files stay readable");
    let e = fs::write(mnt.path().join("new"), b"x").unwrap_err();
    assert_eq!(e.raw_os_error(), Some(5), "creating waits for both tiers: {e}");
    assert_eq!(fs::remove_file(&cold).unwrap_err().raw_os_error(), Some(5), "so does unlinking");
    assert_eq!(fs::read_dir(mnt.path()).map(|_| ()).unwrap_err().raw_os_error(), Some(5), "and listing");
    assert!(fs::read_dir(ssd.path()).unwrap().next().is_none(), "nothing was created underneath the lost tier");
    let mut lost = String::new();
    for _ in 0..30 {
        lost = String::from_utf8_lossy(&tierwise(&["status", mnt.path().to_str().unwrap()]).stdout).to_string();
        if lost.contains("LOST") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(lost.contains("LOST") && lost.contains("ssd tier"), "status says so:\n{lost}");
    drop(writer);
    bind();
    assert_eq!(fs::read(&hot).unwrap(), b"on the ssd", "back: the SSD's files read again");
    fs::write(mnt.path().join("new"), b"x").unwrap();
    let mut names: Vec<String> =
        fs::read_dir(mnt.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    assert_eq!(names, ["cold", "hot", "new"]);
    umount(mnt.path());
}

/// A policy per directory from the config file: reads under /web leave a cached copy on both
/// tiers (on-demand caching), reads under /files move the file up (Dynamic Hot-DST), and other
/// paths follow the default policy.
#[test]
fn volumes_in_the_config_file_give_each_directory_its_policy() {
    if !can_mount() {
        return;
    }
    let [ssd, hdd, mnt, etc] = temp_dirs();
    let cfg = etc.path().join("tierwise.toml");
    fs::write(
        &cfg,
        format!(
            "ssd = {:?}\nhdd = {:?}\npolicy = \"dynamic-hot-dst:sieve=0\"\n[volumes]\n\"/web\" = \"on-demand-caching\"\n\"/files\" = \"dynamic-hot-dst\"\n",
            ssd.path(),
            hdd.path()
        ),
    )
    .unwrap();
    let m = mnt.path().to_str().unwrap();
    // A queue for an HDD that is not emulated is refused before anything is mounted.
    let (s_dir, h_dir) = (ssd.path().to_str().unwrap(), hdd.path().to_str().unwrap());
    let o = tierwise(&["mount", "--ssd", s_dir, "--hdd", h_dir, "--hdd-queue", "none", m]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("--hdd-queue none") && err.contains("--emulate-hdd"), "{err}");
    let _unmount = Unmount(mnt.path().to_path_buf());
    let o = tierwise(&["mount", "--config", cfg.to_str().unwrap(), m]);
    assert!(o.status.success(), "mount: {}", String::from_utf8_lossy(&o.stderr));
    for d in ["web", "files", "other"] {
        fs::create_dir(mnt.path().join(d)).unwrap();
        fs::write(mnt.path().join(d).join("page"), vec![7u8; 10_000]).unwrap();
    }
    let tier = |d: &str| {
        let p = mnt.path().join(d).join("page");
        let o = tierwise(&["which-tier", p.to_str().unwrap()]);
        String::from_utf8_lossy(&o.stdout).rsplit(": ").next().unwrap_or("").trim().to_string()
    };
    for d in ["web", "files", "other"] {
        assert_eq!(tier(d), "hdd", "{d}: every policy here allocates on the HDD");
    }
    let want = [("web", "ssd+hdd"), ("files", "ssd"), ("other", "ssd")];
    for (d, placed) in want {
        let mut now = String::new();
        for _ in 0..100 {
            assert_eq!(fs::read(mnt.path().join(d).join("page")).unwrap(), vec![7u8; 10_000]);
            now = tier(d);
            if now == placed {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert_eq!(now, placed, "{d}: read, then placed by its own policy");
    }
    let status = String::from_utf8_lossy(&tierwise(&["status", m]).stdout).to_string();
    assert!(
        status.contains("type-aware:default=dynamic-hot-dst,volumes=/files=dynamic-hot-dst;/web=on-demand-caching"),
        "{status}"
    );
    umount(mnt.path());
}

/// Write-backs of dirty data fail while the SSD's file system is gone: `flush` says why instead
/// of waiting forever, the daemon stays idle, and `tierwise umount` returns at once and leaves no
/// daemon behind. (An earlier version drained its queue at unmount; a daemon whose tiers were
/// removed under it then retried failing demotions at 90 % CPU for as long as it lived. The
/// mover now backs off from failures, up to 1 s between attempts.)
#[test]
fn failing_work_backs_off_and_unmount_leaves_no_daemon() {
    if !can_mount() {
        return;
    }
    use nix::mount::{MntFlags, MsFlags};
    let [real_ssd, ssd, hdd, mnt] = temp_dirs();
    nix::mount::mount(Some(real_ssd.path()), ssd.path(), None::<&str>, MsFlags::MS_BIND, None::<&str>).unwrap();
    let _unbind = Unmount(ssd.path().to_path_buf());
    let _unmount = mount(ssd.path(), hdd.path(), mnt.path(), &["--policy", "file-write-back"]);
    for i in 0..8 {
        fs::write(mnt.path().join(format!("f{i}")), vec![i as u8; 50_000]).unwrap();
    }
    let m = mnt.path().to_str().unwrap();
    let snap: serde_json::Value = serde_json::from_slice(&tierwise(&["stats", m, "--json"]).stdout).unwrap();
    let pid = snap["pid"].as_u64().unwrap();
    assert!(snap["dirty_bytes"].as_u64().unwrap() > 0, "{snap}");
    nix::mount::umount2(ssd.path(), MntFlags::MNT_DETACH).unwrap();
    let o = tierwise(&["-q", "flush", m]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("ssd tier is gone") && err.contains("nothing is lost"), "{o:?}");
    let cpu = || {
        let st = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let f: Vec<u64> =
            st.rsplit_once(") ").unwrap().1.split(' ').skip(11).take(2).map(|v| v.parse().unwrap()).collect();
        f[0] + f[1]
    };
    let before = cpu();
    std::thread::sleep(std::time::Duration::from_secs(2));
    let ticks = cpu() - before;
    assert!(ticks < 60, "the daemon used {ticks} ticks of CPU in 2 s retrying failing work: it must back off");
    let start = std::time::Instant::now();
    umount(mnt.path());
    assert!(start.elapsed() < std::time::Duration::from_secs(10), "unmount waited {:?}", start.elapsed());
    assert!(tierwise_testkit::exited(i32::try_from(pid).unwrap()), "the daemon exited");
    // The dirty data is still on the (real) SSD and known dirty: nothing was lost.
    assert_eq!(fs::read(real_ssd.path().join("f3")).unwrap(), vec![3u8; 50_000]);
}

#[test]
fn mount_refuses_bad_setups_with_clear_messages() {
    let (a, b, mnt) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let s = |o: Output| String::from_utf8_lossy(&o.stderr).to_string();
    let (a_, b_, m_) = (a.path().to_str().unwrap(), b.path().to_str().unwrap(), mnt.path().to_str().unwrap());
    assert!(s(tierwise(&["mount", "--ssd", a_, "--hdd", a_, m_])).contains("separate directories"));
    let e = s(tierwise(&["mount", "--ssd", a_, "--hdd", b_, m_, "--policy", "linear"]));
    assert!(e.contains("block-level") && e.contains("dynamic-hot-dst"), "{e}");
    // An unknown policy lists the file-level ones only.
    let e = s(tierwise(&["mount", "--ssd", a_, "--hdd", b_, m_, "--policy", "nope"]));
    assert!(
        e.contains("unknown file-level architecture `nope`") && e.contains("hycache") && !e.contains("greendm"),
        "{e}"
    );
    assert!(s(tierwise(&["mount", "--ssd", a_, "--hdd", b_, m_, "--ssd-quota", "lots"])).contains("--ssd-quota"));
    // A knob of another policy is refused, with the policy's own.
    let e = s(tierwise(&["mount", "--ssd", a_, "--hdd", b_, m_, "--policy", "dynamic-hot-dst:threshold=50%"]));
    assert!(e.contains("no parameter `threshold`") && e.contains("sieve") && !e.contains("dirty-high"), "{e}");
    assert!(s(tierwise(&["mount", a_, m_])).contains("ssd tier"));
    let e = s(tierwise(&["mount", "--ssd", a_, "--hdd", b_, a_]));
    assert!(e.contains("is inside the tier"), "{e}");
    // `tierwise mount ov ov`: the tiers are inside the mountpoint, not the other way round.
    for t in ["ssd", "hdd"] {
        fs::create_dir(a.path().join(t)).unwrap();
    }
    let e = s(tierwise(&["mount", a_, a_]));
    assert!(e.contains("is inside the mountpoint"), "{e}");
    let e = s(tierwise(&["mount", "--ssd", a_, "--hdd", b_, "/nonexistent/mnt"]));
    assert!(e.contains("does not exist"), "{e}");
    // A bad setting in the config file is named by its key.
    let cfg = b.path().join("t.toml");
    fs::write(&cfg, format!("ssd = \"{}/ssd\"\nhdd = \"{}/hdd\"\nssd_quota = \"lots\"\n", a_, a_)).unwrap();
    let e = s(tierwise(&["mount", "--config", cfg.to_str().unwrap(), m_]));
    assert!(e.contains("config file") && e.contains("ssd_quota") && e.contains("lots"), "{e}");
    assert!(s(tierwise(&["umount", m_])).contains("not a tierwise mount"));
    assert!(s(tierwise(&["which-tier", m_])).contains("not on a tierwise mount"));
    // pin outside a tierwise mount: refused, and nothing is written onto the file.
    let outside = a.path().join("plain");
    fs::write(&outside, b"x").unwrap();
    let o = tierwise(&["pin", "ssd", outside.to_str().unwrap()]);
    assert!(!o.status.success() && s(o).contains("not on a tierwise mount"));
    assert!(xattr::list(&outside).unwrap().next().is_none(), "no attribute was written");
    let o = tierwise(&["unpin", outside.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(xattr::list(&outside).unwrap().next().is_none(), "no attribute was written");
}

/// The control commands against a live daemon started from a config file: stats, status (with
/// the emulation label), flush with progress, pin and unpin, cancel, the metrics endpoint.
#[test]
fn control_commands_work_against_a_live_mount_configured_by_file() {
    if !can_mount() {
        return;
    }
    let [ssd, hdd, mnt, etc] = temp_dirs();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let cfg = etc.path().join("tierwise.toml");
    fs::write(
        &cfg,
        format!(
            "ssd = {:?}\nhdd = {:?}\npolicy = \"file-write-back\"\nssd_quota = \"4MiB\"\npin_reserve = \"1MiB\"\n\
             emulate_hdd = \"wd5000aaks\"\nhdd_queue = \"none\"\nmetrics = \"127.0.0.1:{port}\"\nthreads = 2\n",
            ssd.path(),
            hdd.path()
        ),
    )
    .unwrap();
    let m = mnt.path().to_str().unwrap();
    // A queue for an HDD that is not emulated is refused before anything is mounted.
    let (s_dir, h_dir) = (ssd.path().to_str().unwrap(), hdd.path().to_str().unwrap());
    let o = tierwise(&["mount", "--ssd", s_dir, "--hdd", h_dir, "--hdd-queue", "none", m]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("--hdd-queue none") && err.contains("--emulate-hdd"), "{err}");
    let _unmount = Unmount(mnt.path().to_path_buf());
    let o = tierwise(&["mount", "--config", cfg.to_str().unwrap(), m]);
    assert!(o.status.success(), "mount: {}", String::from_utf8_lossy(&o.stderr));
    for i in 0..5 {
        fs::write(mnt.path().join(format!("f{i}")), vec![i as u8; 100_000]).unwrap();
    }
    let text = |o: Output| {
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stdout).unwrap()
    };
    let stats: serde_json::Value = serde_json::from_str(&text(tierwise(&["stats", m, "--json"]))).unwrap();
    assert_eq!(stats["dirty_bytes"], 500_000, "{stats}");
    assert_eq!(stats["policy"], "file-write-back");
    let status = text(tierwise(&["status", m]));
    assert!(status.contains("EMULATION") && status.contains("wd5000aaks"), "{status}");
    assert!(status.contains("none queue"), "the config file's hdd_queue: {status}");
    assert!(status.contains("pin reserve"), "{status}");
    let table = text(tierwise(&["stats", m]));
    assert!(table.contains("reads from SSD (hits)") && table.contains("volume total"), "{table}");
    let flushed = text(tierwise(&["-q", "flush", m]));
    assert!(flushed.contains("no dirty data left"), "{flushed}");
    for i in 0..5 {
        assert_eq!(fs::read(hdd.path().join(format!("f{i}"))).unwrap(), vec![i as u8; 100_000]);
    }
    let f0 = mnt.path().join("f0");
    assert!(text(tierwise(&["pin", "hdd", f0.to_str().unwrap()])).contains("pinned to hdd"));
    assert!(text(tierwise(&["which-tier", f0.to_str().unwrap()])).contains(": hdd"));
    assert!(!ssd.path().join("f0").exists());
    assert!(text(tierwise(&["unpin", f0.to_str().unwrap()])).contains("unpinned"));
    fs::write(mnt.path().join("big"), vec![1u8; 2 << 20]).unwrap();
    let o = tierwise(&["pin", "ssd", mnt.path().join("big").to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("pin reserve"), "{}", String::from_utf8_lossy(&o.stderr));
    // A file pinned to the SSD grows only within the reserve (1 MiB), and its accesses count.
    let f1 = mnt.path().join("f1");
    assert!(text(tierwise(&["pin", "ssd", f1.to_str().unwrap()])).contains("pinned to ssd"));
    let reads_ssd = |v: &serde_json::Value| v["session"]["reads_ssd"].as_u64().unwrap();
    let before: serde_json::Value = serde_json::from_str(&text(tierwise(&["stats", m, "--json"]))).unwrap();
    let mut h = fs::OpenOptions::new().append(true).open(&f1).unwrap();
    // The kernel splits a large write: what fits is written (a short write), then ENOSPC.
    let written = match std::io::Write::write(&mut h, &vec![2u8; 2 << 20]) {
        Ok(n) => n,
        Err(e) => {
            assert_eq!(e.raw_os_error(), Some(nix::libc::ENOSPC), "{e}");
            0
        }
    };
    assert!(100_000 + written <= 1 << 20, "{written} bytes written past the reserve");
    let e = std::io::Write::write_all(&mut h, &vec![2u8; 2 << 20]).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(nix::libc::ENOSPC), "{e}");
    assert_eq!(h.set_len(4 << 20).unwrap_err().raw_os_error(), Some(nix::libc::ENOSPC));
    let fits = ((1 << 20) - 100_000 - written).min(10_000);
    std::io::Write::write_all(&mut h, &vec![3u8; fits]).unwrap();
    drop(h);
    let got = fs::read(&f1).unwrap();
    assert_eq!(got.len(), 100_000 + written + fits);
    assert!(got[..100_000].iter().all(|&b| b == 1) && got[100_000..100_000 + written].iter().all(|&b| b == 2));
    assert!(got[100_000 + written..].iter().all(|&b| b == 3), "nothing refused reached the file");
    let after: serde_json::Value = serde_json::from_str(&text(tierwise(&["stats", m, "--json"]))).unwrap();
    assert!(reads_ssd(&after) > reads_ssd(&before), "pinned reads count: {after}");
    assert!(text(tierwise(&["unpin", f1.to_str().unwrap()])).contains("unpinned"));
    assert!(text(tierwise(&["cancel", m])).contains("no move in progress"));
    // Prometheus scrapes the same counters.
    let mut conn = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    std::io::Write::write_all(&mut conn, b"GET /metrics HTTP/1.0\r\n\r\n").unwrap();
    let mut body = String::new();
    std::io::Read::read_to_string(&mut conn, &mut body).unwrap();
    let writebacks: u64 = body
        .lines()
        .find(|l| l.starts_with("tierwise_moves_total{") && l.contains("kind=\"writeback\""))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no write-back counter in {body}"));
    assert!(writebacks >= 5, "{body}");
    assert!(body.contains(&format!("mountpoint=\"{}\"", fs::canonicalize(mnt.path()).unwrap().display())), "{body}");
    // Commands on something that is not a tierwise mount say so.
    let o = tierwise(&["stats", etc.path().to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("not a tierwise mount"));
    let _ = text(tierwise(&["-q", "flush", m]));
    let before: serde_json::Value = serde_json::from_str(&text(tierwise(&["stats", m, "--json"]))).unwrap();
    umount(mnt.path());
    // The store kept the totals: a remount reports the write-backs so far.
    let o = tierwise(&["mount", "--config", cfg.to_str().unwrap(), m]);
    assert!(o.status.success(), "remount: {}", String::from_utf8_lossy(&o.stderr));
    let stats: serde_json::Value = serde_json::from_str(&text(tierwise(&["stats", m, "--json"]))).unwrap();
    assert_eq!(stats["total"]["writebacks"], before["total"]["writebacks"], "{stats}");
    umount(mnt.path());
    // A config file with a typo is refused by name.
    fs::write(&cfg, "polcy = \"hycache\"\n").unwrap();
    let o = tierwise(&["mount", "--config", cfg.to_str().unwrap(), m]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("polcy") && err.contains("allowed keys"), "{err}");
}

/// `mount -t tierwise` runs `mount.tierwise SOURCE DIR -o OPTIONS`: the helper is this binary
/// under that name.
#[test]
fn the_mount_helper_takes_fstab_style_options() {
    if !can_mount() {
        return;
    }
    let [ssd, hdd, mnt, bin] = temp_dirs();
    let helper = bin.path().join("mount.tierwise");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_tierwise"), &helper).unwrap();
    let source = format!("{}:{}", ssd.path().display(), hdd.path().display());
    let _unmount = Unmount(mnt.path().to_path_buf());
    let o = Command::new(&helper)
        .args([&source, mnt.path().to_str().unwrap(), "-o", "rw,noauto,policy=hycache,ssd_quota=1MiB,threads=2"])
        .output()
        .unwrap();
    assert!(o.status.success(), "mount.tierwise: {}", String::from_utf8_lossy(&o.stderr));
    fs::write(mnt.path().join("x"), b"via fstab").unwrap();
    let status = String::from_utf8(tierwise(&["status", mnt.path().to_str().unwrap()]).stdout).unwrap();
    assert!(status.contains("hycache") && status.contains("ssd quota     1MiB"), "{status}");
    umount(mnt.path());
    assert_eq!(fs::read(ssd.path().join("x")).unwrap(), b"via fstab", "hycache creates on the SSD");
    let o = Command::new(&helper).args([&source, mnt.path().to_str().unwrap(), "-o", "colour=blue"]).output().unwrap();
    assert_eq!(o.status.code(), Some(32), "mount(8)'s failure code");
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown setting `colour`"));
}

/// `tierwise replay --fs`: the same generated trace on a plain directory and on a mount leaves
/// the same tree, and the mount's run is reported beside the simulator's prediction.
#[test]
fn replay_measures_a_mount_beside_the_simulator_and_matches_a_plain_directory() {
    if !can_mount() {
        return;
    }
    let [ssd, hdd, mnt, plain, work] = temp_dirs();
    let trace = work.path().join("fs.csv");
    let o = tierwise(&["trace", "gen-files", "fileserver", "--scale", "0.01", "-o", trace.to_str().unwrap(), "-q"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let t = trace.to_str().unwrap();
    let o = tierwise(&["replay", "-q", "--fs", plain.path().to_str().unwrap(), t, "--workers", "3", "--no-sim"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let _unmount = mount(ssd.path(), hdd.path(), mnt.path(), &["--policy", "hycache", "--ssd-quota", "2MiB"]);
    let json = work.path().join("r.json");
    let o = tierwise(&[
        "replay",
        "-q",
        "--fs",
        mnt.path().to_str().unwrap(),
        t,
        "--workers",
        "3",
        "--json",
        json.to_str().unwrap(),
    ]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(out.contains("measured (hycache)") && out.contains("simulated (hycache)"), "{out}");
    assert!(out.contains("measured / simulated ops/s"), "{out}");
    assert!(out.contains("setup: the first") && out.contains("not measured"), "the fileset is prepared first: {out}");
    let r: serde_json::Value = serde_json::from_str(&fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(r["measured"]["all"]["errors"], 0, "{r}");
    assert_eq!(r["measured"]["ops"], r["simulated"]["requests"], "both measure the same window");
    let total = fs::read_to_string(&trace)
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with("time_ns"))
        .count();
    assert!(r["measured"]["ops"].as_u64().unwrap() < total as u64, "the setup phase is not measured");
    assert!(r["mount"]["counters"]["reads_ssd"].as_u64().unwrap() > 0, "{r}");
    let listing = |d: &Path| {
        let mut v: Vec<(String, u64)> = Vec::new();
        let mut stack = vec![d.to_path_buf()];
        while let Some(p) = stack.pop() {
            for e in fs::read_dir(&p).unwrap().flatten() {
                let m = e.metadata().unwrap();
                if m.is_dir() {
                    stack.push(e.path());
                }
                v.push((e.path().strip_prefix(d).unwrap().display().to_string(), if m.is_dir() { 0 } else { m.len() }));
            }
        }
        v.sort();
        v
    };
    let files = listing(plain.path());
    assert!(files.iter().filter(|(_, len)| *len > 0).count() > 50, "the trace leaves files behind");
    assert_eq!(listing(mnt.path()), files, "the mount and the plain directory differ after the replay");
    umount(mnt.path());
    // A directory outside any mount needs --ssd for the simulation, and says so.
    let o = tierwise(&["replay", "-q", "--fs", plain.path().to_str().unwrap(), t, "--sim", "hycache"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("--ssd SIZE"));
    // --measure-from 0 measures everything; a bad value is named.
    let again = tempfile::tempdir().unwrap();
    let (d, j) = (again.path().to_str().unwrap(), work.path().join("all.json"));
    let o = tierwise(&["replay", "-q", "--fs", d, t, "--no-sim", "--measure-from", "0", "--json", j.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: serde_json::Value = serde_json::from_str(&fs::read_to_string(&j).unwrap()).unwrap();
    assert_eq!(r["measured"]["ops"], total as u64);
    let o = tierwise(&["replay", "-q", "--fs", d, t, "--measure-from", "x"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("--measure-from x"), "{o:?}");
}
