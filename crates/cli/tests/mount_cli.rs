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
    let fuse = OpenOptions::new().read(true).write(true).open("/dev/fuse").is_ok();
    let root = nix::unistd::Uid::effective().is_root();
    if !(fuse && root) {
        eprintln!("SKIPPED: needs /dev/fuse and root (to mount a small tmpfs as the SSD)");
    }
    fuse && root
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

fn mount(ssd: &Path, hdd: &Path, mnt: &Path, extra: &[&str]) {
    let mut args = vec!["mount", "--ssd", ssd.to_str().unwrap(), "--hdd", hdd.to_str().unwrap(), mnt.to_str().unwrap()];
    args.extend_from_slice(extra);
    let o = tierwise(&args);
    assert!(o.status.success(), "mount: {}", String::from_utf8_lossy(&o.stderr));
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
    let ssd = Tmpfs::new("512k");
    let (hdd, mnt) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    mount(ssd.0.path(), hdd.path(), mnt.path(), &["--policy", "plain-cold-dst:sieve=0", "--ssd-quota", "8MiB"]);
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
    umount(mnt.path());
    // Moves up into a full SSD fail and roll back: every file stays readable on the HDD.
    let ssd = Tmpfs::new("256k");
    let (hdd, mnt) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    for i in 0..30 {
        fs::write(hdd.path().join(format!("g{i}")), vec![i as u8; 48 * 1024]).unwrap();
    }
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
    mount(ssd.path(), hdd.path(), mnt.path(), &["--policy", "on-demand-caching", "--allow-other"]);
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

#[test]
fn mount_refuses_bad_setups_with_clear_messages() {
    let (a, b, mnt) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let s = |o: Output| String::from_utf8_lossy(&o.stderr).to_string();
    let (a_, b_, m_) = (a.path().to_str().unwrap(), b.path().to_str().unwrap(), mnt.path().to_str().unwrap());
    assert!(s(tierwise(&["mount", "--ssd", a_, "--hdd", a_, m_])).contains("separate directories"));
    assert!(s(tierwise(&["mount", "--ssd", a_, "--hdd", b_, m_, "--policy", "linear"])).contains("block-level"));
    assert!(s(tierwise(&["mount", "--ssd", a_, "--hdd", b_, m_, "--policy", "nope"])).contains("unknown architecture"));
    assert!(s(tierwise(&["mount", "--ssd", a_, "--hdd", b_, m_, "--ssd-quota", "lots"])).contains("--ssd-quota"));
    assert!(s(tierwise(&["mount", a_, m_])).contains("ssd tier"));
    assert!(s(tierwise(&["mount", "--ssd", a_, "--hdd", b_, a_])).contains("inside a tier"));
    assert!(s(tierwise(&["umount", m_])).contains("not a tierwise mount"));
    assert!(s(tierwise(&["which-tier", m_])).contains("not on a tierwise mount"));
}
