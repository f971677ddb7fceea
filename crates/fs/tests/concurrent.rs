//! Readers against concurrent writers on a real mount, as on a local file system:
//! - readers that keep opening a file while others append to it (and its pin flips, which
//!   moves it) never read zeros for bytes already written. Before the daemon took over dropping
//!   cached pages, a reader's open could drop a page a concurrent append had copied into and
//!   not yet sent; a READ answered before the append landed then cached zeros past the old
//!   end, which later reads returned as the file's bytes (a few times a second here). Then a
//!   drop of the file's last page under a reader still copying from it did the same, rarely
//!   (under load), until drops kept that page;
//! - a file replaced by a rename (the editor's and package manager's way to save) can always
//!   be opened and read: an open that looked the name up just before the rename gets the
//!   replaced file, and a file open when it is replaced stays readable to its last close.
//!   Before, ~1 % of such opens or their reads failed with ENOENT;
//! - a file deleted and created again: an open racing the delete may fail (as on a local file
//!   system), but a file that opened is read to its end. Before, ~0.2 % of the files that
//!   opened failed their first read with ENOENT;
//! - a file rewritten in place (`open(O_TRUNC)` and one write) while others read it: a reader
//!   may see the old bytes, none or the new ones, and (almost) never zeros. Before the
//!   daemon held reads back around a size change (`truncation.rs`), ~4 % of such reads
//!   returned zeros; a residue is left (1 in 50,000 to 1 in 200 on this machine; DESIGN.md).
//!
//! Skipped, with a message, where `/dev/fuse` cannot be opened.

#![expect(clippy::unwrap_used, reason = "a failing setup should stop the test loudly")]

mod common;

use std::fs;
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::{fuse_available, mount_with, wait_until};
use tierwise_fs::MountConfig;
use tierwise_fs::control::XATTR_PIN;

const WRITERS: usize = 2;
const READERS: usize = 2;
/// Records per file before its writer starts the next file (small files reopen fast).
const RECORDS_PER_FILE: usize = 200;

/// Each test is a race sized to load this 2-core machine on its own; run in parallel they
/// starve each other, so they take turns. `TIERWISE_RACES_AT_ONCE=1` runs them at once, as a
/// stress run: that is how a reader copying a dropped last page was found (1 failed run in 4
/// or 5 before the page was kept; see `page_cache.rs`).
fn one_at_a_time() -> Option<std::sync::MutexGuard<'static, ()>> {
    static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());
    if std::env::var_os("TIERWISE_RACES_AT_ONCE").is_some() {
        return None;
    }
    Some(TURN.lock().unwrap_or_else(std::sync::PoisonError::into_inner))
}

fn record(i: usize) -> Vec<u8> {
    format!("{i:06}:{}\n", "x".repeat(100 + (i * 37) % 300)).into_bytes()
}

fn name(writer: usize, generation: usize) -> String {
    format!("w{writer}.{generation}")
}

fn appends_are_never_read_as_zeros(passthrough: bool) {
    if !fuse_available() {
        return;
    }
    let _turn = one_at_a_time();
    let [ssd, hdd, mnt] = [(); 3].map(|()| tempfile::tempdir().unwrap());
    let cfg = MountConfig {
        pin_reserve: 64 << 20,
        passthrough,
        ..MountConfig::new("dynamic-hot-dst:sieve=64KiB", 256 << 20)
    };
    let m = mount_with(ssd.path(), hdd.path(), mnt.path(), &cfg);
    let root = m.mnt.clone();
    let stop = Arc::new(AtomicBool::new(false));
    let generations: Arc<[AtomicUsize; WRITERS]> = Arc::new(std::array::from_fn(|_| AtomicUsize::new(0)));
    let mut threads = Vec::new();
    for w in 0..WRITERS {
        let (root, stop, generations) = (root.clone(), Arc::clone(&stop), Arc::clone(&generations));
        fs::write(root.join(name(w, 0)), b"").unwrap();
        threads.push(std::thread::spawn(move || {
            let mut i = 0;
            while !stop.load(Ordering::SeqCst) {
                let generation = i / RECORDS_PER_FILE;
                if i > 0 && i % RECORDS_PER_FILE == 0 {
                    fs::write(root.join(name(w, generation)), b"").unwrap();
                    generations[w].store(generation, Ordering::SeqCst);
                    fs::remove_file(root.join(name(w, generation - 1))).unwrap();
                }
                // One open per record, as a logger that reopens its file does.
                let mut f = fs::OpenOptions::new().append(true).open(root.join(name(w, generation))).unwrap();
                f.write_all(&record(i % RECORDS_PER_FILE)).unwrap();
                i += 1;
            }
            i
        }));
    }
    let bad = Arc::new(AtomicUsize::new(0));
    let mut readers = Vec::new();
    for r in 0..READERS {
        let (root, stop, generations, bad) =
            (root.clone(), Arc::clone(&stop), Arc::clone(&generations), Arc::clone(&bad));
        readers.push(std::thread::spawn(move || {
            let mut reads = 0;
            while !stop.load(Ordering::SeqCst) {
                let w = (reads + r) % WRITERS;
                // The file may have just been replaced by its successor.
                let file = name(w, generations[w].load(Ordering::SeqCst));
                let Ok(data) = fs::read(root.join(&file)) else {
                    continue;
                };
                // Whole records in order; only the last may be cut by an append under way.
                let mut at = 0;
                for (i, line) in data.split_inclusive(|&b| b == b'\n').enumerate() {
                    let want = record(i);
                    let whole = line.ends_with(b"\n");
                    if (whole && line != want) || (!whole && !want.starts_with(line)) {
                        let zeros = line.iter().filter(|&&b| b == 0).count();
                        // The inode and device name the file in a kernel trace (`mm_filemap_*`).
                        let (ino, dev) = fs::metadata(root.join(&file)).map(|m| (m.ino(), m.dev())).unwrap_or_default();
                        eprintln!(
                            "{file}: record {i} at {at} wrong ({zeros} zero bytes of {}; {} bytes read; inode {ino:#x}, device {dev:#x})",
                            line.len(),
                            data.len()
                        );
                        bad.fetch_add(1, Ordering::SeqCst);
                        break;
                    }
                    at += line.len();
                }
                reads += 1;
            }
            reads
        }));
    }
    let pinner = {
        let (root, stop, generations) = (root.clone(), Arc::clone(&stop), Arc::clone(&generations));
        std::thread::spawn(move || {
            let mut pins = 0;
            for k in 0.. {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                let w = k % WRITERS;
                let want = [&b"ssd"[..], b"hdd", b"none"][(k / WRITERS) % 3];
                let path = root.join(name(w, generations[w].load(Ordering::SeqCst)));
                if xattr::set(path, XATTR_PIN, want).is_ok() {
                    pins += 1;
                }
            }
            pins
        })
    };
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(5) && bad.load(Ordering::SeqCst) == 0 {
        std::thread::sleep(Duration::from_millis(50));
    }
    stop.store(true, Ordering::SeqCst);
    let appends: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
    let reads: usize = readers.into_iter().map(|t| t.join().unwrap()).sum();
    let pins = pinner.join().unwrap();
    assert_eq!(
        bad.load(Ordering::SeqCst),
        0,
        "readers saw wrong bytes ({reads} reads, {appends} appends, {pins} pin changes)"
    );
    assert!(reads > 100 && appends > 100 && pins > 10, "{reads} reads, {appends} appends, {pins} pin changes");
}

#[test]
fn appends_are_never_read_as_zeros_through_the_page_cache() {
    appends_are_never_read_as_zeros(false);
}

#[test]
fn appends_are_never_read_as_zeros_with_passthrough() {
    appends_are_never_read_as_zeros(true);
}

/// One writer putting successive versions of file `f` in place with `write(path, version)` for 3 s while `READERS` readers
/// run `read(path)` in a loop, on a regular-I/O hdd-only mount; returns the writer's count and
/// each reader's result. `hdd` is the HDD tier's directory, for checks after the race.
fn race<R: Send + 'static>(
    write: fn(&std::path::Path, &[u8]),
    read: fn(&std::path::Path, &AtomicBool) -> R,
    after: impl FnOnce(&std::path::Path),
) -> Option<(usize, Vec<R>)> {
    if !fuse_available() {
        return None;
    }
    let _turn = one_at_a_time();
    let [ssd, hdd, mnt] = [(); 3].map(|()| tempfile::tempdir().unwrap());
    let cfg = MountConfig { passthrough: false, ..MountConfig::new("hdd-only", 256 << 20) };
    let m = mount_with(ssd.path(), hdd.path(), mnt.path(), &cfg);
    let path = m.mnt.join("f");
    fs::write(&path, content(0)).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (path, stop) = (path.clone(), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut i = 0;
            while !stop.load(Ordering::SeqCst) {
                i += 1;
                write(&path, &content(i));
            }
            i
        })
    };
    let readers: Vec<_> = (0..READERS)
        .map(|_| {
            let (path, stop) = (path.clone(), Arc::clone(&stop));
            std::thread::spawn(move || read(&path, &stop))
        })
        .collect();
    std::thread::sleep(Duration::from_secs(3));
    stop.store(true, Ordering::SeqCst);
    let writes = writer.join().unwrap();
    let results = readers.into_iter().map(|r| r.join().unwrap()).collect();
    after(hdd.path());
    drop(m);
    Some((writes, results))
}

/// Version `i` of the raced file: one letter, a length of its own.
fn content(i: usize) -> Vec<u8> {
    vec![b'a' + (i % 26) as u8; 20_000 + (i % 50) * 10]
}

#[test]
fn a_file_replaced_by_rename_stays_readable_by_opens_racing_the_rename() {
    let replace = |path: &std::path::Path, data: &[u8]| {
        let tmp = path.with_extension("tmp");
        fs::write(&tmp, data).unwrap();
        fs::rename(&tmp, path).unwrap();
    };
    let read = |path: &std::path::Path, stop: &AtomicBool| {
        let (mut reads, mut failures) = (0, Vec::new());
        while !stop.load(Ordering::SeqCst) {
            match fs::read(path) {
                // Some whole version: one letter, a length the writer wrote.
                Ok(data) => {
                    let whole = !data.is_empty() && data.iter().all(|&b| b == data[0]);
                    assert!(whole, "a read mixed versions or saw zeros ({} bytes)", data.len());
                    reads += 1;
                }
                Err(e) => failures.push(e.to_string()),
            }
        }
        (reads, failures)
    };
    // The replaced files kept for late opens go soon after, with nothing else happening.
    let hidden_go = |hdd: &std::path::Path| {
        let hidden = || {
            fs::read_dir(hdd)
                .unwrap()
                .filter(|e| e.as_ref().is_ok_and(|e| e.file_name().to_string_lossy().contains("unlinked-")))
                .count()
        };
        wait_until("the replaced files are removed", || hidden() == 0);
    };
    let Some((renames, results)) = race(replace, read, hidden_go) else { return };
    let mut reads = 0;
    for (n, failures) in results {
        assert!(failures.is_empty(), "{} of {} reads failed, e.g. {}", failures.len(), n + failures.len(), failures[0]);
        reads += n;
    }
    assert!(reads > 100 && renames > 100, "{reads} reads, {renames} renames");
}

#[test]
fn a_file_that_opened_is_readable_while_its_name_is_deleted_and_created_again() {
    let recreate = |path: &std::path::Path, data: &[u8]| {
        fs::remove_file(path).unwrap();
        fs::write(path, data).unwrap();
    };
    let read = |path: &std::path::Path, stop: &AtomicBool| {
        let (mut opened, mut read_failures) = (0, Vec::new());
        while !stop.load(Ordering::SeqCst) {
            // Not opening is allowed: the name may be gone at that moment.
            let Ok(mut f) = fs::File::open(path) else { continue };
            opened += 1;
            let mut data = Vec::new();
            match std::io::Read::read_to_end(&mut f, &mut data) {
                // A prefix of one version (it may still be being written).
                Ok(_) => assert!(data.iter().all(|&b| b == data[0]), "a read saw two versions or zeros"),
                Err(e) => read_failures.push(e.to_string()),
            }
        }
        (opened, read_failures)
    };
    let Some((recreated, results)) = race(recreate, read, |_| ()) else { return };
    let mut opened = 0;
    for (n, failures) in results {
        assert!(failures.is_empty(), "{} of {n} opened files failed a read, e.g. {}", failures.len(), failures[0]);
        opened += n;
    }
    assert!(opened > 100 && recreated > 100, "{opened} opened, {recreated} recreated");
}

#[test]
fn a_file_rewritten_in_place_is_almost_never_read_as_zeros() {
    let rewrite = |path: &std::path::Path, data: &[u8]| fs::write(path, data).unwrap();
    let read = |path: &std::path::Path, stop: &AtomicBool| {
        let (mut reads, mut zeros) = (0usize, 0usize);
        while !stop.load(Ordering::SeqCst) {
            zeros += usize::from(fs::read(path).unwrap().contains(&0));
            reads += 1;
        }
        (reads, zeros)
    };
    let Some((rewrites, results)) = race(rewrite, read, |_| ()) else { return };
    let (reads, zeros) = results.into_iter().fold((0, 0), |(r, z), (n, k)| (r + n, z + k));
    assert!(reads > 1000 && rewrites > 100, "{reads} reads, {rewrites} rewrites");
    eprintln!("{zeros} of {reads} reads saw zeros ({rewrites} rewrites)");
    // Without the fence ~4 % (thousands here); with it, a residue that depends on how soon
    // the kernel's SETATTR caller runs: 0.002 % once, 0.01-0.56 % on 2026-11-27 with the same
    // code (DESIGN.md, "Rewriting a file in place"). The bound catches a fence that is gone.
    assert!(zeros * 100 < reads, "{zeros} of {reads} reads saw zeros");
}
