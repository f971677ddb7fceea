//! The hybrid file system mounted for real (FUSE), against a plain directory.
//!
//! Skipped, with a message, where `/dev/fuse` cannot be opened. Every policy runs a seeded
//! random sequence of operations on the mount and on a plain directory, with a tiny SSD quota so
//! that files migrate all the time; every result, every byte read and the final trees must agree.
//! After unmounting, the two tiers hold the files exactly once per DST policy, and a remount
//! adopts them and shows the same tree.

use std::fs::{self, OpenOptions};
use std::io::{ErrorKind, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;

mod common;

use common::differential::{differential, differential_with, temp_dirs};
use common::{fuse_available, mount, mount_with};
use tierwise_fs::{HybridFs, MountConfig, Tiers};

#[test]
fn dynamic_hot_dst_behaves_like_a_plain_directory() {
    differential("dynamic-hot-dst:sieve=16KiB", 20_000, 1);
}

#[test]
fn on_demand_caching_behaves_like_a_plain_directory() {
    differential("on-demand-caching:sieve=16KiB", 20_000, 2);
}

#[test]
fn write_back_behaves_like_a_plain_directory() {
    differential("file-write-back:sieve=16KiB", 20_000, 3);
}

#[test]
fn hycache_behaves_like_a_plain_directory() {
    differential("hycache:threshold=60%", 20_000, 4);
}

// The tests above run with the default data path: passthrough where the policy allows it
// (files whose placement is settled are read and written by the kernel on the tier file,
// cached files read-only from their SSD copy). The same operations on regular FUSE I/O, where
// the policy sees every read and write:

#[test]
fn dynamic_hot_dst_on_regular_io_behaves_like_a_plain_directory() {
    differential_with("dynamic-hot-dst:sieve=16KiB", 20_000, 6, |c| c.passthrough = false);
}

#[test]
fn on_demand_caching_on_regular_io_behaves_like_a_plain_directory() {
    differential_with("on-demand-caching:sieve=16KiB", 20_000, 7, |c| c.passthrough = false);
}

/// With the kernel's page cache above the policy (writeback cache, pages kept across opens),
/// the daemon sees writes late and cached reads never: the results must not change, and an
/// unmount must leave every byte in the tiers.
#[test]
fn write_back_with_the_kernel_cache_behaves_like_a_plain_directory() {
    differential_with("file-write-back:sieve=16KiB", 20_000, 8, |c| c.kernel_cache = true);
}

/// Both copies of cached files open by passthrough (read-only to the SSD copy) while writable
/// opens join them: the HDD copy is brought in step at the last close.
#[test]
fn cached_files_open_by_passthrough_stay_in_step_when_written() {
    if !fuse_available() {
        return;
    }
    let [ssd, hdd, mnt] = temp_dirs();
    let cfg = MountConfig { debug_events: true, ..MountConfig::new("on-demand-caching", 1 << 20) };
    let m = mount_with(ssd.path(), hdd.path(), mnt.path(), &cfg);
    let p = m.mnt.join("f");
    fs::write(&p, vec![1u8; 10_000]).unwrap();
    // Read until the policy has copied it to the SSD: two copies.
    common::wait_until("the copy to the SSD", || {
        fs::read(&p).unwrap();
        ssd.path().join("f").exists()
    });
    let reader = fs::File::open(&p).unwrap(); // passthrough, read-only, to the SSD copy
    let writer = OpenOptions::new().write(true).open(&p).unwrap(); // joins it
    writer.write_all_at(b"written", 100).unwrap();
    let mut got = [0u8; 7];
    reader.read_exact_at(&mut got, 100).unwrap();
    assert_eq!(&got, b"written", "the reader sees the write");
    drop((reader, writer));
    common::wait_until("the HDD copy in step", || {
        fs::read(hdd.path().join("f")).is_ok_and(|d| &d[100..107] == b"written")
    });
    let ssd_copy = fs::read(ssd.path().join("f"));
    assert!(ssd_copy.as_ref().map_or(true, |d| &d[100..107] == b"written"), "a stale SSD copy stayed");
    assert_eq!(&fs::read(&p).unwrap()[100..107], b"written");
}

/// Direct I/O: no page cache, every read and write reaches the policy as the program made it.
#[test]
fn on_demand_caching_with_direct_io_behaves_like_a_plain_directory() {
    differential_with("on-demand-caching:sieve=16KiB", 20_000, 10, |c| {
        c.direct_io = true;
        c.passthrough = false;
    });
}

/// mmap works on a direct-I/O mount (through the page cache, FUSE_DIRECT_IO_ALLOW_MMAP), and
/// what it wrote is what reads and a remount see.
#[test]
fn mmap_works_with_direct_io() {
    if !fuse_available() {
        return;
    }
    let [ssd, hdd, mnt] = temp_dirs();
    let cfg = MountConfig { direct_io: true, ..MountConfig::new("dynamic-hot-dst", 1 << 20) };
    let mut m = mount_with(ssd.path(), hdd.path(), mnt.path(), &cfg);
    let p = m.mnt.join("mapped");
    fs::write(&p, vec![0u8; 8192]).unwrap();
    // A shared writable mapping, written and synced (Python's mmap: no unsafe code here).
    let script = "import mmap,sys\nf=open(sys.argv[1],'r+b')\nm=mmap.mmap(f.fileno(),8192)\nm[100:105]=b'mmap!'\nm.flush()\nm.close()\nprint(open(sys.argv[1],'rb').read()[100:105].decode())";
    if !tierwise_testkit::require(&[tierwise_testkit::Need::Tool("python3", "python3")]) {
        return;
    }
    let o = std::process::Command::new("python3").args(["-c", script]).arg(&p).output().unwrap();
    assert!(o.status.success(), "mmap on a direct-I/O mount: {}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "mmap!", "read back while mapped");
    assert_eq!(&fs::read(&p).unwrap()[100..105], b"mmap!");
    m.unmount();
    let m = mount_with(ssd.path(), hdd.path(), mnt.path(), &cfg);
    assert_eq!(&fs::read(m.mnt.join("mapped")).unwrap()[100..105], b"mmap!");
}

#[test]
fn dynamic_hot_dst_with_the_kernel_cache_behaves_like_a_plain_directory() {
    differential_with("dynamic-hot-dst:sieve=16KiB", 20_000, 9, |c| {
        c.kernel_cache = true;
        c.passthrough = false;
    });
}

#[test]
fn passthrough_is_offered_to_every_policy_but_write_back() {
    assert!(tierwise_fs::passthrough_allowed("dynamic-hot-dst:sieve=0"));
    assert!(tierwise_fs::passthrough_allowed("hycache"));
    assert!(tierwise_fs::passthrough_allowed("on-demand-caching"));
    assert!(tierwise_fs::passthrough_allowed("hdd-only"));
    assert!(!tierwise_fs::passthrough_allowed("file-write-back"));
}

#[test]
fn plain_cold_dst_behaves_like_a_plain_directory() {
    differential("plain-cold-dst:sieve=16KiB", 20_000, 5);
}

#[test]
fn posix_basics_and_the_tier_xattr() {
    if !fuse_available() {
        return;
    }
    let [ssd, hdd, mnt] = temp_dirs();
    let m = mount(ssd.path(), hdd.path(), mnt.path(), "dynamic-hot-dst", 1 << 20);
    let p = m.mnt.join("a.txt");
    fs::write(&p, b"hello").unwrap();
    // Checked before any read: a read served by the HDD promotes it.
    assert_eq!(xattr::get(&p, "user.tierwise.tier").unwrap().as_deref(), Some(&b"hdd"[..]), "allocated on the HDD");
    assert_eq!(fs::read(&p).unwrap(), b"hello");
    // Dynamic Hot-DST promotes on an HDD read; the next read finds it on the SSD.
    for _ in 0..50 {
        let _ = fs::read(&p).unwrap();
        if xattr::get(&p, "user.tierwise.tier").unwrap().as_deref() == Some(&b"ssd"[..]) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(xattr::get(&p, "user.tierwise.tier").unwrap().as_deref(), Some(&b"ssd"[..]));
    assert!(ssd.path().join("a.txt").exists() && !hdd.path().join("a.txt").exists(), "one copy, on the SSD");
    // Symlinks, chmod, times, statfs, a hard link, rename over an existing file.
    std::os::unix::fs::symlink("a.txt", m.mnt.join("link")).unwrap();
    assert_eq!(fs::read_link(m.mnt.join("link")).unwrap(), Path::new("a.txt"));
    assert_eq!(fs::read(m.mnt.join("link")).unwrap(), b"hello");
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&p, fs::Permissions::from_mode(0o600)).unwrap();
    assert_eq!(fs::metadata(&p).unwrap().permissions().mode() & 0o777, 0o600);
    fs::hard_link(&p, m.mnt.join("hard")).unwrap();
    assert_eq!(fs::read(m.mnt.join("hard")).unwrap(), b"hello", "a hard link names the same file");
    fs::remove_file(m.mnt.join("hard")).unwrap();
    fs::write(m.mnt.join("b.txt"), b"other").unwrap();
    fs::rename(m.mnt.join("b.txt"), &p).unwrap();
    assert_eq!(fs::read(&p).unwrap(), b"other");
    let st = nix::sys::statvfs::statvfs(&m.mnt).unwrap();
    assert!(st.blocks() > 0);
    // Directories, a big listing, rmdir of a non-empty directory.
    fs::create_dir(m.mnt.join("many")).unwrap();
    for i in 0..10_000 {
        fs::write(m.mnt.join("many").join(format!("f{i}")), b"x").unwrap();
    }
    assert_eq!(fs::read_dir(m.mnt.join("many")).unwrap().count(), 10_000);
    assert_eq!(fs::remove_dir(m.mnt.join("many")).unwrap_err().kind(), ErrorKind::DirectoryNotEmpty);
    // A renamed directory carries its files.
    fs::rename(m.mnt.join("many"), m.mnt.join("moved")).unwrap();
    assert_eq!(fs::read(m.mnt.join("moved/f9999")).unwrap(), b"x");
    // Names tierwise reserves cannot be created through the mount.
    assert!(fs::write(m.mnt.join(".tierwise-tmp-1"), b"x").is_err());
}

/// What a file carries besides its bytes survives moves between tiers (pins move at once):
/// holes, owner, mode, times and extended attributes; and O_TRUNC, chown, utimens, xattrs and
/// fsync work through the mount.
#[test]
fn holes_owner_mode_times_and_xattrs_survive_moves() {
    if !fuse_available() {
        return;
    }
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let [ssd, hdd, mnt] = temp_dirs();
    let cfg = MountConfig { pin_reserve: 128 << 20, ..MountConfig::new("dynamic-hot-dst", 256 << 20) };
    let m = mount_with(ssd.path(), hdd.path(), mnt.path(), &cfg);
    let p = m.mnt.join("sparse");
    {
        let f = OpenOptions::new().write(true).create(true).truncate(true).open(&p).unwrap();
        f.write_all_at(b"head", 0).unwrap();
        f.write_all_at(b"tail", 64 << 20).unwrap();
        f.sync_all().unwrap();
    }
    fs::set_permissions(&p, fs::Permissions::from_mode(0o640)).unwrap();
    std::os::unix::fs::chown(&p, Some(65534), Some(65534)).unwrap();
    let when = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000_000);
    fs::File::open(&p).unwrap().set_modified(when).unwrap();
    xattr::set(&p, "user.colour", b"blue").unwrap();
    xattr::set(&p, "user.gone", b"soon").unwrap();
    xattr::remove(&p, "user.gone").unwrap();
    let check = |at: &str| {
        let md = fs::metadata(&p).unwrap();
        assert_eq!(md.len(), (64 << 20) + 4, "{at}: size");
        assert_eq!(md.permissions().mode() & 0o7777, 0o640, "{at}: mode");
        assert_eq!((md.uid(), md.gid()), (65534, 65534), "{at}: owner");
        assert_eq!(md.modified().unwrap(), when, "{at}: mtime");
        assert_eq!(xattr::get(&p, "user.colour").unwrap().as_deref(), Some(&b"blue"[..]), "{at}: xattr");
        assert_eq!(xattr::get(&p, "user.gone").unwrap(), None, "{at}: removed xattr");
        let names: Vec<_> = xattr::list(&p).unwrap().collect();
        assert!(names.iter().any(|n| n == "user.colour"), "{at}: listed {names:?}");
        let mut buf = vec![1u8; 8];
        fs::File::open(&p).unwrap().read_exact_at(&mut buf, 32 << 20).unwrap();
        assert_eq!(buf, [0; 8], "{at}: a hole reads zeros");
        let data = fs::read(&p).unwrap();
        assert_eq!((&data[..4], &data[64 << 20..]), (&b"head"[..], &b"tail"[..]), "{at}: data");
    };
    check("on the HDD");
    let tier_blocks = |root: &Path| fs::metadata(root.join("sparse")).unwrap().blocks();
    for (tier, root) in [("ssd", ssd.path()), ("hdd", hdd.path())] {
        xattr::set(&p, "user.tierwise.pin", tier.as_bytes()).unwrap();
        assert_eq!(xattr::get(&p, "user.tierwise.tier").unwrap().as_deref(), Some(tier.as_bytes()));
        check(&format!("after a move to the {tier}"));
        assert!(tier_blocks(root) < 1024, "{tier}: the 64 MiB hole stayed a hole ({} blocks)", tier_blocks(root));
    }
    // O_TRUNC empties the file; the next open sees it empty.
    drop(OpenOptions::new().write(true).truncate(true).open(&p).unwrap());
    assert_eq!(fs::metadata(&p).unwrap().len(), 0);
}

#[test]
fn bad_tiers_are_refused_by_name() {
    let [a, mnt] = temp_dirs();
    let e = Tiers::open(a.path(), a.path(), mnt.path()).unwrap_err().to_string();
    assert!(e.contains("separate directories"), "{e}");
    let e = Tiers::open(&a.path().join("missing"), a.path(), mnt.path()).unwrap_err().to_string();
    assert!(e.contains("ssd tier") && e.contains("missing"), "{e}");
    let b = tempfile::tempdir().unwrap();
    let inside = a.path().join("mnt");
    fs::create_dir(&inside).unwrap();
    let e = Tiers::open(a.path(), b.path(), &inside).unwrap_err().to_string();
    assert!(e.contains("is inside the tier"), "{e}");
    let tiers = Tiers::open(a.path(), b.path(), mnt.path()).unwrap();
    let e = HybridFs::new(tiers, &MountConfig::new("greendm-tiering", 1 << 20)).err().unwrap();
    assert!(e.to_string().contains("block-level") && e.to_string().contains("on-demand-caching"), "{e}");
    // An unknown policy lists the file-level ones only.
    let tiers = Tiers::open(a.path(), b.path(), mnt.path()).unwrap();
    let e = HybridFs::new(tiers, &MountConfig::new("nonesuch", 1 << 20)).err().unwrap().to_string();
    assert!(e.contains("nonesuch") && e.contains("hycache") && !e.contains("greendm"), "{e}");
}

/// An open file outlives its name (unlink, or a rename over it): reads and writes through the
/// open descriptor work, the name is gone at once, and the data goes at the last close.
#[test]
fn unlinked_and_replaced_files_live_on_while_open() {
    if !fuse_available() {
        return;
    }
    use std::io::{Read, Seek, SeekFrom};
    for policy in ["on-demand-caching", "file-write-back", "hycache"] {
        // Tiers of their own: a volume keeps its policy.
        let [ssd, hdd, mnt] = temp_dirs();
        let m = mount(ssd.path(), hdd.path(), mnt.path(), policy, 1 << 20);
        let p = m.mnt.join("f");
        fs::write(&p, b"first").unwrap();
        let _ = fs::read(&p).unwrap(); // a cached copy, for the caching policies
        let mut f = OpenOptions::new().read(true).write(true).open(&p).unwrap();
        fs::remove_file(&p).unwrap();
        assert!(!p.exists(), "{policy}: the name is gone");
        assert!(fs::read_dir(&m.mnt).unwrap().next().is_none(), "{policy}: nothing listed");
        let mut got = String::new();
        f.read_to_string(&mut got).unwrap();
        assert_eq!(got, "first", "{policy}");
        f.write_all(b"+more").unwrap();
        f.seek(SeekFrom::Start(0)).unwrap();
        got.clear();
        f.read_to_string(&mut got).unwrap();
        assert_eq!(got, "first+more", "{policy}");
        assert_eq!(f.metadata().unwrap().len(), 10);
        // A new file under the old name is another file.
        fs::write(&p, b"second").unwrap();
        // Renaming over a file that is open: the open one lives on too.
        let mut g = fs::File::open(&p).unwrap();
        fs::write(m.mnt.join("g"), b"third").unwrap();
        fs::rename(m.mnt.join("g"), &p).unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"third", "{policy}");
        got.clear();
        g.read_to_string(&mut got).unwrap();
        assert_eq!(got, "second", "{policy}: the replaced file, still open");
        drop((f, g));
        // At the last close the hidden copies go.
        let leftovers = |root: &Path| {
            fs::read_dir(root)
                .unwrap()
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().contains("unlinked"))
                .count()
        };
        let mut left = 1;
        for _ in 0..100 {
            left = leftovers(ssd.path()) + leftovers(hdd.path());
            if left == 0 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(left, 0, "{policy}: unlinked files removed at the last close");
        fs::remove_file(&p).unwrap();
        drop(m);
    }
}

/// Hard links, as `cp -al` makes them: both names are one file (one inode number, two links),
/// a write through one shows through the other, the file stays on its tier (a pin is refused:
/// a move would split the names), with one name left it goes back to the policy, and a remount
/// finds the names still one file.
#[test]
fn hard_links_are_one_file_on_one_tier_and_survive_a_remount() {
    use std::os::unix::fs::MetadataExt;
    if !fuse_available() {
        return;
    }
    let [ssd, hdd, mnt] = temp_dirs();
    let cfg = MountConfig::new("dynamic-hot-dst:sieve=0,collector=lru", 64 * 1024);
    let mut m = mount_with(ssd.path(), hdd.path(), mnt.path(), &cfg);
    fs::create_dir_all(m.mnt.join("src/sub")).unwrap();
    for (n, len) in [("src/a", 10_000), ("src/sub/b", 20_000), ("src/c", 5_000)] {
        fs::write(m.mnt.join(n), vec![n.len() as u8; len]).unwrap();
        fs::read(m.mnt.join(n)).unwrap();
    }
    let cp = std::process::Command::new("cp").arg("-al").arg(m.mnt.join("src")).arg(m.mnt.join("dst")).output();
    let cp = cp.unwrap();
    assert!(cp.status.success(), "cp -al on the mount: {}", String::from_utf8_lossy(&cp.stderr));
    let meta = |n: &str| fs::metadata(m.mnt.join(n)).unwrap();
    for n in ["a", "sub/b", "c"] {
        let (s, d) = (meta(&format!("src/{n}")), meta(&format!("dst/{n}")));
        assert_eq!((s.ino(), s.nlink()), (d.ino(), 2), "{n}: one file, two names");
    }
    fs::write(m.mnt.join("dst/a"), b"written through dst").unwrap();
    assert_eq!(fs::read(m.mnt.join("src/a")).unwrap(), b"written through dst");
    let tier = |n: &str| xattr::get(m.mnt.join(n), "user.tierwise.tier").unwrap().unwrap();
    let placed = tier("src/a");
    // Reads of other files would move an ordinary file; this one stays put.
    for round in 0..5 {
        for n in ["src/sub/b", "src/c", "dst/a"] {
            fs::read(m.mnt.join(n)).unwrap();
        }
        assert_eq!(tier("src/a"), placed, "round {round}: a hard-linked file moved");
    }
    let e = xattr::set(m.mnt.join("src/a"), "user.tierwise.pin", b"hdd").unwrap_err();
    assert_eq!(e.raw_os_error(), Some(nix::libc::EMLINK), "pinning a hard-linked file: {e}");
    // One name left: an ordinary file again, which a pin may move.
    fs::remove_file(m.mnt.join("src/a")).unwrap();
    assert_eq!(meta("dst/a").nlink(), 1);
    xattr::set(m.mnt.join("dst/a"), "user.tierwise.pin", b"hdd").unwrap();
    assert_eq!(tier("dst/a"), b"hdd");
    assert_eq!(fs::read(m.mnt.join("dst/a")).unwrap(), b"written through dst");
    // A rename over one name of a linked pair leaves the other.
    fs::write(m.mnt.join("other"), b"replacement").unwrap();
    fs::rename(m.mnt.join("other"), m.mnt.join("src/c")).unwrap();
    assert_eq!((fs::read(m.mnt.join("dst/c")).unwrap().len(), meta("dst/c").nlink()), (5_000, 1));
    let b_ino = meta("src/sub/b").ino();
    m.unmount();
    let m = mount_with(ssd.path(), hdd.path(), mnt.path(), &cfg);
    let (s, d) = (fs::metadata(m.mnt.join("src/sub/b")).unwrap(), fs::metadata(m.mnt.join("dst/sub/b")).unwrap());
    assert_eq!((s.ino(), s.nlink()), (d.ino(), 2), "still one file after a remount");
    let _ = b_ino;
    assert_eq!(fs::read(m.mnt.join("dst/sub/b")).unwrap(), vec![9u8; 20_000]);
    // On the tiers: one inode, on one tier.
    let on = |t: &Path| t.join("src/sub/b").exists();
    assert!(on(ssd.path()) != on(hdd.path()), "one tier holds the linked file");
}
