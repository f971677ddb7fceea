//! The differential harness: a seeded random sequence of operations on a mount and on a plain
//! directory, whose every result, byte, mode and attribute must agree.

use std::collections::BTreeMap;
use std::fs::{self, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tierwise_fs::MountConfig;
use tierwise_fs::tiers::{Backend, Direct};

use super::{fuse_available, mount_with_backend};

/// The simulator's seeded generator: the same operations on every run.
pub use tierwise_sim::synth::Rng;

/// One operation's observable result: Ok with data, or the error kind.
/// `N` fresh temporary directories.
pub fn temp_dirs<const N: usize>() -> [tempfile::TempDir; N] {
    std::array::from_fn(|_| tempfile::tempdir().unwrap())
}

pub fn outcome<T: std::fmt::Debug>(r: std::io::Result<T>) -> String {
    match r {
        Ok(v) => format!("ok {v:?}"),
        Err(e) => format!("err {:?}", e.kind()),
    }
}

/// Where operation `op` writes and what (for a file of `size` bytes): writes and appends; nothing
/// for a truncate.
pub fn written_by(op: u64, a: u64, b: u64, c: u64, size: usize) -> (usize, Vec<u8>) {
    match op {
        2 | 3 => (
            (b % 20_000) as usize,
            (0..(c % 9000) as usize).map(|i| (i as u64 * 31).wrapping_add(a).wrapping_add(b) as u8).collect(),
        ),
        4 => (size, vec![b as u8; (c % 5000) as usize]),
        _ => (size, Vec::new()),
    }
}

/// The file operation `i` names: `dN/fM`, a quarter of them one level down in `dN/n/`.
pub fn file_rel(i: u64) -> String {
    if (i / 3).is_multiple_of(4) { format!("d{}/n/f{}", i % 3, i % 12) } else { format!("d{}/f{}", i % 3, i % 12) }
}

/// Applies operation `n` of the seeded sequence under `root`; returns what it observed.
pub fn apply(root: &Path, op: u64, a: u64, b: u64, c: u64) -> String {
    let file = |i: u64| root.join(file_rel(i));
    let dir = |i: u64| root.join(format!("d{}", i % 3));
    match op {
        // Directories renamed while the files in them migrate: a whole top-level directory
        // (replacing an empty one, or refused), or a nested one into another directory.
        18 if a.is_multiple_of(2) => outcome(fs::rename(dir(a), dir(b))),
        18 => outcome(fs::rename(dir(a).join("n"), dir(b).join("n"))),
        19 => outcome(fs::create_dir(dir(a).join("n"))),
        // Hard links: a second name for a file (it then stays on its tier).
        20 => outcome(fs::hard_link(file(a), file(b))),
        0 => outcome(fs::create_dir(dir(a))),
        1 if c.is_multiple_of(2) => outcome(fs::remove_dir(dir(a).join("n"))),
        1 => outcome(fs::remove_dir(dir(a))),
        2 | 3 => {
            // Write `c % 9000` bytes of a pattern at a random offset (creating the file).
            let (offset, data) = written_by(op, a, b, c, 0);
            outcome(
                OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(false)
                    .open(file(a))
                    .and_then(|f| f.write_all_at(&data, offset as u64)),
            )
        }
        4 => outcome(
            OpenOptions::new().append(true).open(file(a)).and_then(|mut f| f.write_all(&written_by(op, a, b, c, 0).1)),
        ),
        5..=7 => outcome(fs::read(file(a)).map(|v| (v.len(), v.iter().map(|&x| u64::from(x)).sum::<u64>()))),
        8 => outcome(OpenOptions::new().write(true).open(file(a)).and_then(|f| f.set_len(c % 12_000))),
        9 => outcome(fs::remove_file(file(a))),
        10 => outcome(fs::rename(file(a), file(b))),
        11 => outcome(fs::metadata(file(a)).map(|m| {
            use std::os::unix::fs::MetadataExt;
            (m.len(), m.is_file(), m.nlink())
        })),
        15 => {
            use std::os::unix::fs::PermissionsExt;
            let mode = [0o600, 0o640, 0o644, 0o755][(b % 4) as usize];
            outcome(fs::set_permissions(file(a), fs::Permissions::from_mode(mode)))
        }
        16 => outcome(xattr::set(file(a), "user.t", format!("v{}", b % 100).as_bytes())),
        17 => outcome(xattr::get(file(a), "user.t")),
        12 => {
            let mut names: Vec<String> = fs::read_dir(dir(a))
                .map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
                .unwrap_or_default();
            names.sort();
            format!("{names:?}")
        }
        _ => outcome(fs::File::create(file(a)).map(|_| ())),
    }
}

/// Every file under `root` with its bytes.
pub fn tree(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            let rel = p.strip_prefix(root).unwrap().to_path_buf();
            if e.file_type().unwrap().is_dir() {
                out.insert(rel, b"<dir>".to_vec());
                stack.push(p);
            } else {
                out.insert(rel, fs::read(&p).unwrap());
            }
        }
    }
    out
}

/// Every file under `root` with its mode, link count and `user.t` attribute: what a move must
/// carry, and which names are one file.
pub fn metadata_tree(root: &Path) -> BTreeMap<PathBuf, (u32, u64, Option<Vec<u8>>)> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    tree(root)
        .into_iter()
        .filter(|(_, data)| data != b"<dir>")
        .map(|(rel, _)| {
            let p = root.join(&rel);
            let m = fs::metadata(&p).unwrap();
            (rel, (m.permissions().mode() & 0o7777, m.nlink(), xattr::get(&p, "user.t").unwrap()))
        })
        .collect()
}

pub fn differential(policy: &str, ops: u64, seed: u64) {
    differential_with(policy, ops, seed, |_| {});
}

/// The seeded operations on a mount (`setup` adjusts its configuration) and on a plain
/// directory: every result and byte must agree, then the trees, modes and attributes, also
/// after a remount.
pub fn differential_with(policy: &str, ops: u64, seed: u64, setup: impl Fn(&mut MountConfig)) {
    differential_through(policy, ops, seed, setup, Arc::new(Direct), ops / 100);
}

/// [`differential_with`], the mount's moves done through `backend` (the remount at the end
/// uses the tiers directly), and at least `min_pins` pins taking effect (a pin is a move, which
/// injected faults may fail).
pub fn differential_through(
    policy: &str,
    ops: u64,
    seed: u64,
    setup: impl Fn(&mut MountConfig),
    backend: Arc<dyn Backend>,
    min_pins: u64,
) {
    if !fuse_available() {
        return;
    }
    let [ssd, hdd, mnt, plain] = temp_dirs();
    // 16 KiB of the quota is the pin reserve: the policy manages 48 KiB.
    let mut cfg = MountConfig { debug_events: true, pin_reserve: 16 * 1024, ..MountConfig::new(policy, 64 * 1024) };
    setup(&mut cfg);
    let mut m = mount_with_backend(ssd.path(), hdd.path(), mnt.path(), &cfg, backend);
    // TIERWISE_FS_OPS and TIERWISE_FS_SEED let a soak run longer or elsewhere.
    let ops = std::env::var("TIERWISE_FS_OPS").ok().and_then(|v| v.parse().ok()).unwrap_or(ops);
    let seed = seed + std::env::var("TIERWISE_FS_SEED").ok().and_then(|v| v.parse::<u64>().ok()).unwrap_or(0) * 1000;
    let mut rng = Rng::new(seed);
    let mut last_tier: BTreeMap<PathBuf, Vec<u8>> = BTreeMap::new();
    let mut tier_changes = 0;
    let mut pins = 0;
    let mut pin_refusals = 0;
    let mut dir_renames = 0;
    let mut links = 0;
    let mut linked_pins = 0;
    for i in 0..ops {
        let (op, a, b, c) = (rng.below(21), rng.next_u64(), rng.next_u64(), rng.next_u64());
        if op == 14 {
            // Pin, re-pin or unpin a file on the mount only: a pin moves the file at once, and a
            // pinned file is served outside the policy. Its outcome (ENOSPC when the reserve is
            // full, ENOENT) is not compared; what every later operation sees is.
            let rel = file_rel(a);
            let want = [&b"ssd"[..], b"hdd", b"none"][(b % 3) as usize];
            match xattr::set(m.mnt.join(&rel), "user.tierwise.pin", want) {
                Ok(()) if want != b"none" => pins += 1,
                // A hard-linked file stays on its tier.
                Err(e) if e.raw_os_error() == Some(nix::libc::EMLINK) => linked_pins += 1,
                _ => {}
            }
            continue;
        }
        let got = apply(&m.mnt, op, a, b, c);
        let pinned_to_ssd =
            || xattr::get(m.mnt.join(file_rel(a)), "user.tierwise.pin").ok().flatten().is_some_and(|v| v == b"ssd");
        if matches!(op, 2..=4 | 8) && got == "err StorageFull" && pinned_to_ssd() {
            // Growth of a file pinned to the SSD is held to the pin reserve. The kernel may have
            // sent the write in pieces, of which the first fitted (a short write, as on a full
            // disk): the mount must hold the old bytes with a prefix of the write applied, and
            // the plain directory takes the same bytes.
            let rel = file_rel(a);
            let before = fs::read(plain.path().join(&rel)).unwrap();
            let after = fs::read(m.mnt.join(&rel)).unwrap();
            let (offset, data) = written_by(op, a, b, c, before.len());
            // The pieces end at page boundaries (or where the file now ends).
            let prefix_applied = |k: usize| {
                let mut expect = before.clone();
                if k > 0 {
                    expect.resize(expect.len().max(offset + k), 0);
                    expect[offset..offset + k].copy_from_slice(&data[..k]);
                }
                after == expect
            };
            let ends = |k: &usize| *k == 0 || (offset + k).is_multiple_of(4096) || offset + k == after.len();
            assert!(
                (0..=data.len()).filter(ends).any(prefix_applied),
                "{policy}: operation {i} ({op} on {rel}) refused by the pin reserve left other bytes"
            );
            fs::write(plain.path().join(&rel), &after).unwrap();
            if std::env::var_os("TIERWISE_FS_TRACE").is_some() {
                eprintln!(
                    "{i} op{op} {rel}: refused by the pin reserve, {} of {} bytes now",
                    after.len(),
                    before.len()
                );
            }
            pin_refusals += 1;
            continue;
        }
        let want = apply(plain.path(), op, a, b, c);
        if op == 18 && want.starts_with("ok") {
            dir_renames += 1;
        }
        if op == 20 && want.starts_with("ok") {
            links += 1;
        }
        if std::env::var_os("TIERWISE_FS_TRACE_EVENTS").is_some() {
            let debug = xattr::get(m.mnt.join(file_rel(a)), "user.tierwise.debug").ok().flatten().unwrap_or_default();
            eprintln!("events of {}:\n{}", file_rel(a), String::from_utf8_lossy(&debug));
        }
        if std::env::var_os("TIERWISE_FS_TRACE").is_some() {
            let tier = xattr::get(m.mnt.join(file_rel(a)), "user.tierwise.tier").ok().flatten().unwrap_or_default();
            let rel = file_rel(a);
            let size = |d: &Path| fs::metadata(d.join(&rel)).map_or(-1, |m| m.len() as i64);
            eprintln!(
                "{i} op{op} {} -> {} off {} len {}: {got} [{}] ssd {} hdd {}",
                file_rel(a),
                file_rel(b),
                b % 20_000,
                c,
                String::from_utf8_lossy(&tier),
                size(ssd.path()),
                size(hdd.path())
            );
        }
        if got != want {
            let rel = file_rel(a);
            let size = |d: &Path| fs::metadata(d.join(&rel)).map_or(-1, |m| m.len() as i64);
            let tier = xattr::get(m.mnt.join(&rel), "user.tierwise.tier").ok().flatten().unwrap_or_default();
            let debug = xattr::get(m.mnt.join(&rel), "user.tierwise.debug").ok().flatten().unwrap_or_default();
            eprintln!("recent events of {rel}:\n{}", String::from_utf8_lossy(&debug));
            panic!(
                "{policy}: operation {i} ({op} on {rel}) differs from a plain directory: got {got}, want {want}; \
                 now: ssd {} B, hdd {} B, mount {} B, tier {}",
                size(ssd.path()),
                size(hdd.path()),
                size(&m.mnt),
                String::from_utf8_lossy(&tier)
            );
        }
        if i % 97 == 0 {
            // Watch placements through the tier xattr: files must really move.
            for (rel, data) in tree(&m.mnt) {
                if data != b"<dir>" {
                    let t = xattr::get(m.mnt.join(&rel), "user.tierwise.tier").unwrap().unwrap_or_default();
                    if last_tier.insert(rel, t.clone()).is_some_and(|old| old != t) {
                        tier_changes += 1;
                    }
                }
            }
        }
    }
    assert!(tier_changes >= 3, "{policy}: only {tier_changes} placement changes seen; migrations are not exercised");
    assert!(pins + linked_pins >= min_pins, "{policy}: only {pins} pins took effect ({linked_pins} hard-linked)");
    assert!(dir_renames >= ops / 200, "{policy}: only {dir_renames} directory renames: not exercised");
    assert!(links >= ops / 200, "{policy}: only {links} hard links: not exercised");
    eprintln!(
        "{policy}: {ops} operations, {tier_changes} placement changes seen, {dir_renames} directory renames, {links} hard links, {pins} pins, {pin_refusals} writes refused by the pin reserve"
    );
    assert_eq!(tree(&m.mnt), tree(plain.path()), "{policy}: the trees differ");
    assert_eq!(metadata_tree(&m.mnt), metadata_tree(plain.path()), "{policy}: modes or attributes differ");
    m.unmount();
    // A remount adopts what the tiers hold and shows the same tree.
    let m2 = mount_with_backend(ssd.path(), hdd.path(), mnt.path(), &cfg, Arc::new(Direct));
    assert_eq!(tree(&m2.mnt), tree(plain.path()), "{policy}: the remounted tree differs");
    assert_eq!(
        metadata_tree(&m2.mnt),
        metadata_tree(plain.path()),
        "{policy}: modes or attributes differ after a remount"
    );
    drop(m2);
    // Every file is at its own relative path on a tier (no temporaries left behind), and DST
    // policies keep one copy.
    let (s, h) = (tree(ssd.path()), tree(hdd.path()));
    for (rel, data) in tree(plain.path()) {
        if data == b"<dir>" {
            continue;
        }
        let on = (s.get(&rel) == Some(&data), h.get(&rel) == Some(&data));
        assert!(on.0 || on.1, "{policy}: {} is on no tier with its latest bytes", rel.display());
        if policy.contains("dst") || policy.starts_with("hycache") {
            assert!(
                !(s.contains_key(&rel) && h.contains_key(&rel)),
                "{policy}: DST file {} on both tiers",
                rel.display()
            );
        }
    }
    for rel in s.keys().chain(h.keys()) {
        assert!(!rel.to_string_lossy().contains(".tierwise-tmp"), "{policy}: temporary {} left", rel.display());
    }
}
