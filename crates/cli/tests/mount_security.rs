//! The mount under attack and under races: an unprivileged user racing renames and symlinks
//! against moves must never make the root daemon read, write or delete anything outside its
//! tiers; directory renames racing moves leave exactly the namespace a plain directory would;
//! one daemon per tier pair; pins by other users need the mount's permission.
//!
//! Skipped where `/dev/fuse` cannot be opened or the test is not root (it mounts with
//! `--allow-other` and acts as `nobody` through setpriv).

#![expect(clippy::unwrap_used, reason = "a failing setup should stop the test loudly")]

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn tierwise(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tierwise")).args(args).output().unwrap()
}

fn can_mount_as_root() -> bool {
    use tierwise_testkit::Need;
    tierwise_testkit::require(&[Need::Fuse, Need::Root, Need::Tool("setpriv", "util-linux")])
}

/// Tears a mountpoint down when the test ends, also when it fails half way (no daemon outlives it).
use tierwise_testkit::teardown::Unmount;

#[must_use]
fn mount(ssd: &Path, hdd: &Path, mnt: &Path, extra: &[&str]) -> Unmount {
    let mut args = vec!["mount", "--ssd", ssd.to_str().unwrap(), "--hdd", hdd.to_str().unwrap(), mnt.to_str().unwrap()];
    args.extend_from_slice(extra);
    let o = tierwise(&args);
    assert!(o.status.success(), "mount: {}", String::from_utf8_lossy(&o.stderr));
    Unmount(mnt.to_path_buf())
}

/// Runs a shell script as `nobody`.
fn as_nobody(script: &str) -> Output {
    Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "bash", "-c", script])
        .output()
        .unwrap()
}

/// Every entry under `root` (not following symlinks) with its type, mode, owner and content.
fn fingerprint(root: &Path) -> BTreeMap<PathBuf, (u32, u32, Vec<u8>)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            let m = fs::symlink_metadata(&p).unwrap();
            let content = if m.is_file() {
                fs::read(&p).unwrap()
            } else if m.file_type().is_symlink() {
                fs::read_link(&p).unwrap().into_os_string().into_encoded_bytes()
            } else {
                stack.push(p.clone());
                Vec::new()
            };
            out.insert(p.strip_prefix(root).unwrap().to_path_buf(), (m.mode(), m.uid(), content));
        }
    }
    out
}

/// Directories under `root` (relative), not following symlinks.
fn dirs(root: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fingerprint(root)
        .into_iter()
        .filter(|(_, (mode, _, _))| mode & nix::libc::S_IFMT == nix::libc::S_IFDIR)
        .map(|(p, _)| p)
        .filter(|p| !p.to_string_lossy().starts_with(".tierwise-"))
        .collect();
    v.sort();
    v
}

/// The attack from the field report, as `nobody` runs it (`tests/data/race_attacker.c`): with
/// `--allow-other`, a 1777 directory and a policy that promotes on read, it loops mkdir dK;
/// write and read dK/victim; wait 0–3 ms; mv dK eK; then renames a prepared symlink (to a
/// root-owned directory elsewhere) to dK. The daemon of before the fix followed the symlink:
/// it copied `victim` from the outside directory into the SSD tier and deleted it there (within
/// the first 1,000 iterations, every time). Nothing outside the tiers may change (a checksummed
/// canary tree), nothing of it may reach a tier, and no directory may exist on a tier that the
/// mount does not show. `TIERWISE_RACE_ITERATIONS` runs longer.
#[test]
fn a_racing_user_cannot_make_the_daemon_touch_anything_outside_the_tiers() {
    if !can_mount_as_root() {
        return;
    }
    let iterations: u32 = tierwise_testkit::trials("TIERWISE_RACE_ITERATIONS", 1000, 20_000) as u32;
    let [ssd, hdd, mnt, canary, bin] = std::array::from_fn(|_| tempfile::tempdir().unwrap());
    let attacker = bin.path().join("race_attacker");
    let cc = Command::new("cc")
        .args(["-O2", "-o"])
        .arg(&attacker)
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/race_attacker.c"))
        .output();
    match cc {
        Ok(o) if o.status.success() => {}
        other => {
            tierwise_testkit::unmet(&format!(
                "a C compiler builds the attacker (apt-get install build-essential): {other:?}"
            ));
            return;
        }
    }
    fs::set_permissions(bin.path(), fs::Permissions::from_mode(0o755)).unwrap();
    // The canary: root's, 0700 directories and 0600 files named as the attacker's.
    let secret = b"root's secret, never to be read by the daemon for anyone".to_vec();
    fs::write(canary.path().join("victim"), &secret).unwrap();
    fs::create_dir(canary.path().join("sub")).unwrap();
    fs::write(canary.path().join("sub/victim"), &secret).unwrap();
    for p in ["victim", "sub/victim"] {
        fs::set_permissions(canary.path().join(p), fs::Permissions::from_mode(0o600)).unwrap();
    }
    fs::set_permissions(canary.path().join("sub"), fs::Permissions::from_mode(0o700)).unwrap();
    let before = fingerprint(canary.path());
    fs::set_permissions(mnt.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let _m = mount(
        ssd.path(),
        hdd.path(),
        mnt.path(),
        &["--allow-other", "--policy", "dynamic-hot-dst:collector=lru", "--ssd-quota", "256KiB", "--pin-reserve", "0"],
    );
    let public = mnt.path().join("pub");
    fs::create_dir(&public).unwrap();
    fs::set_permissions(&public, fs::Permissions::from_mode(0o1777)).unwrap();
    let o = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(&attacker)
        .arg(&public)
        .arg(canary.path())
        .arg(iterations.to_string())
        .arg("7")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success() && said.starts_with("done"), "the attack ran: {o:?}");
    let swaps: u32 = said.split(' ').nth(1).and_then(|n| n.parse().ok()).unwrap_or(0);
    assert!(swaps >= iterations / 2, "the symlink was swapped in {swaps} of {iterations} iterations");
    // Let queued moves finish before comparing.
    let _ = tierwise(&["-q", "flush", mnt.path().to_str().unwrap()]);
    let s: serde_json::Value = serde_json::from_str(&String::from_utf8_lossy(
        &tierwise(&["stats", mnt.path().to_str().unwrap(), "--json"]).stdout,
    ))
    .unwrap();
    let moves = s["session"]["promotions"].as_u64().unwrap() + s["session"]["demotions"].as_u64().unwrap();
    eprintln!("{iterations} iterations: {swaps} swaps, {moves} moves");
    assert!(moves >= u64::from(iterations) / 2, "files must really move during the attack: {moves} moves");
    assert_eq!(fingerprint(canary.path()), before, "something outside the tiers changed");
    for tier in [ssd.path(), hdd.path()] {
        for (p, (_, _, content)) in fingerprint(tier) {
            assert!(content != secret, "the canary's content reached the tier: {}", p.display());
        }
    }
    // No ghost directories: every directory on a tier is one the mount shows.
    let shown = dirs(mnt.path());
    for tier in [ssd.path(), hdd.path()] {
        for d in dirs(tier) {
            assert!(shown.contains(&d), "{} exists on a tier but not in the mount", d.display());
        }
    }
    eprintln!("{iterations} iterations, {swaps} symlink swaps, {moves} moves: nothing outside the tiers changed");
}

/// `mkdir d; echo > d/f; cat d/f; mv d e` in a loop while files migrate: a renamed-away
/// directory never comes back (as a root-owned empty directory) and the tiers hold exactly the
/// directories the mount shows.
#[test]
fn renames_racing_moves_leave_no_ghost_directories() {
    if !can_mount_as_root() {
        return;
    }
    let (ssd, hdd, mnt) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let _m = mount(
        ssd.path(),
        hdd.path(),
        mnt.path(),
        &["--policy", "dynamic-hot-dst:collector=lru", "--ssd-quota", "64KiB", "--pin-reserve", "0"],
    );
    for i in 0..300 {
        let (d, e) = (mnt.path().join(format!("d{}", i % 5)), mnt.path().join(format!("e{i}")));
        fs::create_dir(&d).unwrap();
        fs::write(d.join("f"), vec![i as u8; 8192 + i * 37]).unwrap();
        fs::read(d.join("f")).unwrap();
        fs::rename(&d, &e).unwrap();
        assert!(!d.exists(), "iteration {i}: the renamed-away directory came back");
        if i % 3 == 0 {
            fs::read(e.join("f")).unwrap();
        }
    }
    let _ = tierwise(&["-q", "flush", mnt.path().to_str().unwrap()]);
    let shown = dirs(mnt.path());
    assert_eq!(shown.len(), 300);
    for tier in [ssd.path(), hdd.path()] {
        assert_eq!(dirs(tier), shown, "the tier's directories are the mount's");
    }
}

/// A second mount of the same tiers is refused with a message naming the first; the state
/// store is never set aside because another daemon holds it; the same mountpoint twice is
/// refused; after the first unmounts, the tiers mount again with their state.
#[test]
fn one_daemon_per_tier_pair() {
    if !can_mount_as_root() {
        return;
    }
    let (ssd, hdd, m1, m2) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let first = mount(ssd.path(), hdd.path(), m1.path(), &["--policy", "dynamic-hot-dst"]);
    fs::write(m1.path().join("f"), b"kept").unwrap();
    let args = |m: &Path| {
        ["mount", "--ssd", ssd.path().to_str().unwrap(), "--hdd", hdd.path().to_str().unwrap(), m.to_str().unwrap()]
            .map(String::from)
    };
    for attempt in 0..3 {
        let o = Command::new(env!("CARGO_BIN_EXE_tierwise")).args(args(m2.path())).output().unwrap();
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "attempt {attempt}: a second daemon on the same tiers was accepted");
        assert!(
            e.contains("already mounted") && e.contains(&m1.path().canonicalize().unwrap().display().to_string()),
            "{e}"
        );
        let o = Command::new(env!("CARGO_BIN_EXE_tierwise")).args(args(m1.path())).output().unwrap();
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && e.contains("already a tierwise mount"), "{e}");
    }
    let state = ssd.path().join(".tierwise-state");
    let names: Vec<String> =
        fs::read_dir(&state).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
    assert!(!names.iter().any(|n| n.contains("unreadable")), "the live store was set aside: {names:?}");
    assert_eq!(fs::read(m1.path().join("f")).unwrap(), b"kept");
    drop(first);
    let _again = mount(ssd.path(), hdd.path(), m2.path(), &["--policy", "dynamic-hot-dst"]);
    assert_eq!(fs::read(m2.path().join("f")).unwrap(), b"kept");
}

/// Pins are root's by default: another user gets EPERM, even on their own file; with
/// `--user-pin-quota` they may pin their own files within it (EDQUOT beyond), never others'.
#[test]
fn pins_by_other_users_need_a_quota() {
    if !can_mount_as_root() {
        return;
    }
    for quota in ["0", "20KiB"] {
        let (ssd, hdd, mnt) =
            (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        fs::set_permissions(mnt.path(), fs::Permissions::from_mode(0o755)).unwrap();
        let _m = mount(
            ssd.path(),
            hdd.path(),
            mnt.path(),
            &["--allow-other", "--policy", "dynamic-hot-dst", "--ssd-quota", "1MiB", "--user-pin-quota", quota],
        );
        fs::set_permissions(mnt.path(), fs::Permissions::from_mode(0o1777)).unwrap();
        fs::write(mnt.path().join("roots"), vec![1u8; 1000]).unwrap();
        fs::set_permissions(mnt.path().join("roots"), fs::Permissions::from_mode(0o666)).unwrap();
        let bin = env!("CARGO_BIN_EXE_tierwise");
        let m = mnt.path().display();
        let o = as_nobody(&format!(
            "head -c 8000 /dev/zero > {m}/mine && head -c 16000 /dev/zero > {m}/big && {bin} pin ssd {m}/mine; echo rc=$?; {bin} pin ssd {m}/big; echo rc=$?; {bin} pin ssd {m}/roots; echo rc=$?"
        ));
        let out = String::from_utf8_lossy(&o.stdout);
        let err = String::from_utf8_lossy(&o.stderr);
        let rcs: Vec<&str> = out.lines().filter(|l| l.starts_with("rc=")).collect();
        if quota == "0" {
            assert_eq!(rcs, ["rc=1", "rc=1", "rc=1"], "{out}{err}");
            assert!(err.contains("not allowed"), "{err}");
        } else {
            assert_eq!(rcs, ["rc=0", "rc=1", "rc=1"], "own file within the quota, beyond it, another's: {out}{err}");
            assert!(err.contains("your share") && err.contains("not allowed"), "{err}");
        }
        // Root pins anything.
        let o = tierwise(&["pin", "ssd", mnt.path().join("roots").to_str().unwrap()]);
        assert!(o.status.success(), "{o:?}");
    }
}

/// `which-tier` answers for a symlink itself and, given several paths, reports each and goes on.
#[test]
fn which_tier_answers_for_symlinks_and_goes_on_past_errors() {
    if !can_mount_as_root() {
        return;
    }
    let (ssd, hdd, mnt) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let _m = mount(ssd.path(), hdd.path(), mnt.path(), &["--policy", "plain-cold-dst"]);
    fs::write(mnt.path().join("f"), b"x").unwrap();
    std::os::unix::fs::symlink("f", mnt.path().join("link")).unwrap();
    let p = |n: &str| mnt.path().join(n).to_str().unwrap().to_string();
    let o = tierwise(&["which-tier", &p("link"), "/etc/hostname", &p("f")]);
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "one path failed");
    assert!(out.contains("link: hdd (a symlink"), "{out}");
    assert!(out.contains("/f: ssd"), "the path after the failure is answered too: {out}");
    assert!(err.contains("/etc/hostname: not on a tierwise mount"), "{err}");
}
