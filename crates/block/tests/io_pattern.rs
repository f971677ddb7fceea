//! The device issues I/O as a real stack does (issue 35): a client's multi-block write reaches
//! the HDD as one request, whatever SSD slots its blocks got, and a multi-block read that
//! misses and feeds fills reads the HDD once. Counted at the backend, below the device.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tierwise_block::backend::Dev;
use tierwise_block::{Backend, CreateOptions, MemBackend, ServeOptions, create, open};

mod hooked;

const HDD: u64 = 64 << 20;

/// HDD data reads and writes (the metadata at the image's end excluded), counted below the
/// device.
#[derive(Default)]
struct Counts {
    reads: AtomicU64,
    writes: AtomicU64,
}

fn device(spec: &str, block: u64) -> (Arc<hooked::Hooked>, Arc<Counts>, tierwise_block::HybridDevice) {
    let counts = Arc::new(Counts::default());
    let c = Arc::clone(&counts);
    let be = hooked::Hooked::new(MemBackend::new(16 << 20, HDD), move |a| {
        if a.dev == Dev::Hdd && a.off < HDD {
            let n = if a.write { &c.writes } else { &c.reads };
            n.fetch_add(1, Ordering::Relaxed);
        }
    });
    create(&*be, &CreateOptions { spec: spec.into(), block_size: Some(block), ssd_size: 8 << 20, hdd_size: Some(HDD) })
        .unwrap_or_else(|e| panic!("create: {e}"));
    let dev =
        open(be.clone() as Arc<dyn Backend>, ServeOptions { spec: spec.into(), movers: 2, ..ServeOptions::default() })
            .unwrap_or_else(|e| panic!("open: {e}"));
    dev.start();
    (be, counts, dev)
}

fn counts(c: &Counts) -> (u64, u64) {
    (c.reads.load(Ordering::Relaxed), c.writes.load(Ordering::Relaxed))
}

/// Write-through: a 64 KiB write of 16 blocks, cached in slots that are not in a row, is one
/// HDD write (it was 16).
#[test]
fn a_multi_block_write_through_write_is_one_hdd_write() {
    let (_be, c, dev) = device("cache:mode=write-through", 4096);
    // Scatter the slots: cache every other block first, then write the range over them.
    for b in (0..32u64).step_by(2) {
        dev.write(&[1u8; 4096], (1 << 20) + b * 4096, false).unwrap_or_else(|e| panic!("write: {e}"));
    }
    let before = counts(&c);
    let data: Vec<u8> = (0..65_536u32).map(|i| (i % 251) as u8).collect();
    dev.write(&data, 1 << 20, false).unwrap_or_else(|e| panic!("write: {e}"));
    let after = counts(&c);
    assert_eq!(after.1 - before.1, 1, "HDD writes for one 64 KiB write");
    let mut back = vec![0u8; data.len()];
    dev.read(&mut back, 1 << 20).unwrap_or_else(|e| panic!("read: {e}"));
    assert!(back == data);
    dev.shutdown().unwrap_or_else(|e| panic!("shutdown: {e}"));
}

/// A misaligned 3-block read that misses and promotes the 3 blocks it touches reads the
/// HDD once (widened to the edge blocks' edges), and the promotions take those bytes.
#[test]
fn a_multi_block_read_miss_feeding_fills_is_one_hdd_read() {
    let block = 64 << 10;
    let (be, c, dev) = device("greendm-tiering:pt=1", block);
    let image: Vec<u8> = (0..4 * block).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    be.inner.write(Dev::Hdd, &image, 0).unwrap_or_else(|e| panic!("seed: {e}"));
    let before = counts(&c);
    let (off, len) = (block / 2, 2 * block);
    let mut buf = vec![0u8; len as usize];
    dev.read(&mut buf, off).unwrap_or_else(|e| panic!("read: {e}"));
    assert!(buf == image[off as usize..(off + len) as usize]);
    assert!(dev.wait_idle(Duration::from_secs(30)).unwrap_or_else(|e| panic!("wait: {e}")));
    let after = counts(&c);
    assert_eq!(after.0 - before.0, 1, "HDD reads for the miss and its fills");
    assert_eq!(dev.stats().fills_from_ram, 3, "every block promoted took its bytes from the read");
    let mut all = vec![0u8; image.len()];
    dev.read(&mut all, 0).unwrap_or_else(|e| panic!("read back: {e}"));
    assert!(all == image);
    dev.shutdown().unwrap_or_else(|e| panic!("shutdown: {e}"));
}

/// Write-through on a slow HDD: the HDD's write and the SSD's go out at once (bcache sends the
/// bio to both), not one after the other: while the HDD write is held, the SSD's arrives.
#[test]
fn a_write_through_write_reaches_the_hdd_and_the_ssd_at_once() {
    use std::sync::atomic::AtomicBool;
    let ssd_written = Arc::new(AtomicBool::new(false));
    let hold = Arc::new(AtomicBool::new(false));
    let seen_while_held = Arc::new(AtomicBool::new(false));
    let (s, h, seen) = (Arc::clone(&ssd_written), Arc::clone(&hold), Arc::clone(&seen_while_held));
    // Slots start after the SSD's metadata; the first 64 KiB hold the superblock and checkpoints.
    let be = hooked::Hooked::new(MemBackend::new(16 << 20, HDD), move |a| {
        if a.write && a.dev == Dev::Ssd && a.off >= 64 << 10 {
            s.store(true, Ordering::SeqCst);
        }
        if a.write && a.dev == Dev::Hdd && a.off < HDD && !h.load(Ordering::SeqCst) {
            // A disk's write time under load: the device overlaps the images only when the
            // HDD is slow (a mean above 1 ms).
            std::thread::sleep(Duration::from_millis(3));
        }
        if a.write && a.dev == Dev::Hdd && a.off < HDD && h.load(Ordering::SeqCst) {
            // The HDD write waits up to 2 s for the SSD's: only a concurrent one can arrive.
            let until = std::time::Instant::now() + Duration::from_secs(2);
            while std::time::Instant::now() < until && !s.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(1));
            }
            seen.store(s.load(Ordering::SeqCst), Ordering::SeqCst);
        }
    });
    let spec = "cache:mode=write-through";
    create(&*be, &CreateOptions { spec: spec.into(), block_size: Some(4096), ssd_size: 8 << 20, hdd_size: Some(HDD) })
        .unwrap_or_else(|e| panic!("create: {e}"));
    let dev = open(be.clone() as Arc<dyn Backend>, ServeOptions { spec: spec.into(), ..ServeOptions::default() })
        .unwrap_or_else(|e| panic!("open: {e}"));
    dev.start();
    // Cached first (write-through maps a slot on a write; the device learns the HDD's pace),
    // then written over while held.
    for _ in 0..24 {
        dev.write(&[1u8; 8192], 1 << 20, false).unwrap_or_else(|e| panic!("write: {e}"));
    }
    ssd_written.store(false, Ordering::SeqCst);
    hold.store(true, Ordering::SeqCst);
    dev.write(&[2u8; 8192], 1 << 20, false).unwrap_or_else(|e| panic!("write: {e}"));
    hold.store(false, Ordering::SeqCst);
    assert!(seen_while_held.load(Ordering::SeqCst), "the SSD write waited for the HDD write");
    let mut back = vec![0u8; 8192];
    dev.read(&mut back, 1 << 20).unwrap_or_else(|e| panic!("read: {e}"));
    assert!(back.iter().all(|&b| b == 2));
    dev.shutdown().unwrap_or_else(|e| panic!("shutdown: {e}"));
}

/// GreenDM serves an extent under promotion from RAM. A read of the extent after the miss
/// that started the promotion (the promotion not yet run) loads the RAM copy from the bytes
/// that miss read whole for the promotion, not from the HDD again (the simulator charges one
/// read): one HDD read for both.
/// Holds SSD writes made by a mover thread while armed, until opened.
#[derive(Default)]
struct MoverGate {
    /// (armed, writes held now, open)
    state: std::sync::Mutex<(bool, u32, bool)>,
    changed: std::sync::Condvar,
}

impl MoverGate {
    fn pass(&self) {
        let mover = std::thread::current().name().is_some_and(|n| n.starts_with("tierwise-mover"));
        let mut g = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if !mover || !g.0 {
            return;
        }
        g.1 += 1;
        self.changed.notify_all();
        while !g.2 {
            g = self.changed.wait(g).unwrap_or_else(|e| e.into_inner());
        }
        g.1 -= 1;
    }
    fn wait_until_held(&self) {
        let mut g = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while g.1 == 0 {
            assert!(std::time::Instant::now() < deadline, "the mover never wrote the SSD");
            g = self.changed.wait_timeout(g, Duration::from_millis(100)).unwrap_or_else(|e| e.into_inner()).0;
        }
    }
    fn set(&self, armed: bool, open: bool) {
        let mut g = self.state.lock().unwrap_or_else(|e| e.into_inner());
        (g.0, g.2) = (armed, open);
        self.changed.notify_all();
    }
}

/// A flush while a promotion writes its RAM copy to the SSD covers the writes that copy
/// absorbed: the flush waits until the move has settled (the copy is in a mapped slot that its
/// checkpoint names). Before stop 54 the flush found no copy (the move had taken it) and
/// returned at once, and a power cut then lost those writes (found by the power-cut
/// differential test, 1 run in about 2,000).
#[test]
fn a_flush_during_a_promotion_covers_the_writes_its_ram_copy_holds() {
    let gate = Arc::new(MoverGate::default());
    let g = Arc::clone(&gate);
    let be = hooked::Hooked::new(MemBackend::new(8 << 20, HDD), move |a| {
        if a.write && a.dev == Dev::Ssd {
            g.pass();
        }
    });
    let spec = "greendm-tiering:es=4KiB,pt=1,md-flush=0";
    create(&*be, &CreateOptions { spec: spec.into(), block_size: Some(4096), ssd_size: 8 << 20, hdd_size: Some(HDD) })
        .unwrap_or_else(|e| panic!("create: {e}"));
    let dev = Arc::new(
        open(be.clone() as Arc<dyn Backend>, ServeOptions { spec: spec.into(), ..ServeOptions::default() })
            .unwrap_or_else(|e| panic!("open: {e}")),
    );
    // A miss issues the promotion (movers not started: it waits); a write lands in its RAM copy.
    let mut buf = vec![0u8; 4096];
    dev.read(&mut buf, 0).unwrap_or_else(|e| panic!("miss: {e}"));
    dev.write(&[7u8; 1000], 100, false).unwrap_or_else(|e| panic!("write: {e}"));
    gate.set(true, false);
    dev.start();
    gate.wait_until_held();
    let (tx, rx) = std::sync::mpsc::channel();
    let d = Arc::clone(&dev);
    std::thread::spawn(move || {
        let _ = tx.send(d.flush());
    });
    let passed = rx.recv_timeout(Duration::from_millis(300)).is_ok();
    // Opened before any assertion: a failing test must not leave the mover held.
    gate.set(false, true);
    assert!(!passed, "the flush passed the promotion carrying the write");
    rx.recv_timeout(Duration::from_secs(10)).expect("the flush never ended").unwrap_or_else(|e| panic!("flush: {e}"));
    assert!(dev.wait_idle(Duration::from_secs(10)).unwrap_or(false));
    assert_eq!(dev.stats().moves_done[0], 1, "the extent was promoted");
    // Power cut now: the flushed write reads back.
    let after = Arc::new(be.inner.power_cut(11));
    let dev = open(after as Arc<dyn Backend>, ServeOptions { spec: spec.into(), ..ServeOptions::default() })
        .unwrap_or_else(|e| panic!("reopen: {e}"));
    dev.read(&mut buf, 0).unwrap_or_else(|e| panic!("read back: {e}"));
    assert!(buf[100..1100].iter().all(|&b| b == 7) && buf[..100].iter().all(|&b| b == 0), "{:?}", &buf[..8]);
    dev.shutdown().unwrap_or_else(|e| panic!("shutdown: {e}"));
}

#[test]
fn a_read_after_a_feeding_read_takes_its_bytes() {
    let block = 64 << 10;
    let reads = Arc::new(AtomicU64::new(0));
    let r = Arc::clone(&reads);
    let be = hooked::Hooked::new(MemBackend::new(16 << 20, HDD), move |a| {
        if !a.write && a.dev == Dev::Hdd && a.off < HDD {
            r.fetch_add(1, Ordering::SeqCst);
        }
    });
    let spec = "greendm-tiering:pt=1";
    create(&*be, &CreateOptions { spec: spec.into(), block_size: Some(block), ssd_size: 8 << 20, hdd_size: Some(HDD) })
        .unwrap_or_else(|e| panic!("create: {e}"));
    let image: Vec<u8> = (0..block).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    be.inner.write(Dev::Hdd, &image, 0).unwrap_or_else(|e| panic!("seed: {e}"));
    // Movers not started yet: the promotion waits, so the second read finds it under way.
    let dev = open(be.clone() as Arc<dyn Backend>, ServeOptions { spec: spec.into(), ..ServeOptions::default() })
        .unwrap_or_else(|e| panic!("open: {e}"));
    let before = reads.load(Ordering::SeqCst);
    let (mut first, mut second) = (vec![0u8; 4096], vec![0u8; 4096]);
    dev.read(&mut first, 0).unwrap_or_else(|e| panic!("miss: {e}"));
    // Served from the RAM copy; a write there too, which the promotion must carry.
    dev.read(&mut second, 8192).unwrap_or_else(|e| panic!("second read: {e}"));
    dev.write(&[7u8; 4096], 16_384, false).unwrap_or_else(|e| panic!("write: {e}"));
    assert!(first == image[..4096] && second == image[8192..8192 + 4096]);
    assert_eq!(reads.load(Ordering::SeqCst) - before, 1, "HDD reads for the miss and the accesses after it");
    dev.start();
    assert!(dev.wait_idle(Duration::from_secs(30)).unwrap_or_else(|e| panic!("wait: {e}")));
    assert_eq!(reads.load(Ordering::SeqCst) - before, 1, "the promotion took the RAM copy");
    assert_eq!(dev.stats().moves_done[0], 1, "the extent was promoted");
    let mut expect = image.clone();
    expect[16_384..16_384 + 4096].fill(7);
    let mut all = vec![0u8; block as usize];
    dev.read(&mut all, 0).unwrap_or_else(|e| panic!("read back: {e}"));
    assert!(all == expect);
    dev.shutdown().unwrap_or_else(|e| panic!("shutdown: {e}"));
}
