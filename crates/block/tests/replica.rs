//! Commits forced by slot pressure write the SSD's checkpoint copy only, and the HDD's replica
//! of the table is trusted alone only when it records a clean stop.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tierwise_block::backend::Dev;
use tierwise_block::recovery::inspect;
use tierwise_block::{Backend, CreateOptions, DeviceError, MemBackend, ServeOptions, create, open};

const BS: u64 = 4096;
const HDD: u64 = 4 << 20;
/// The metadata and 16 slots.
const SSD: u64 = 256 << 10;

/// The images, counting syncs per image.
struct Counting {
    inner: MemBackend,
    syncs: [AtomicU64; 2],
}

impl Backend for Counting {
    fn read(&self, dev: Dev, buf: &mut [u8], off: u64) -> std::io::Result<()> {
        self.inner.read(dev, buf, off)
    }
    fn write(&self, dev: Dev, buf: &[u8], off: u64) -> std::io::Result<()> {
        self.inner.write(dev, buf, off)
    }
    fn sync(&self, dev: Dev) -> std::io::Result<()> {
        self.syncs[dev as usize].fetch_add(1, Ordering::Relaxed);
        self.inner.sync(dev)
    }
    fn discard(&self, dev: Dev, off: u64, len: u64) -> std::io::Result<()> {
        self.inner.discard(dev, off, len)
    }
    fn len(&self, dev: Dev) -> std::io::Result<u64> {
        self.inner.len(dev)
    }
    fn grow(&self, dev: Dev, len: u64) -> std::io::Result<()> {
        self.inner.grow(dev, len)
    }
}

fn device(spec: &str) -> (Arc<Counting>, tierwise_block::HybridDevice) {
    let images = Arc::new(Counting { inner: MemBackend::new(SSD + (1 << 20), HDD), syncs: Default::default() });
    create(&*images, &CreateOptions { spec: spec.into(), block_size: Some(BS), ssd_size: SSD, hdd_size: Some(HDD) })
        .unwrap_or_else(|e| panic!("create: {e}"));
    // A commit interval longer than the test: every commit in it is a flush's or a forced one.
    let opts =
        ServeOptions { spec: spec.into(), commit_interval: Duration::from_secs(3600), ..ServeOptions::default() };
    let dev = open(images.clone() as Arc<dyn Backend>, opts).unwrap_or_else(|e| panic!("open: {e}"));
    dev.start();
    (images, dev)
}

fn pattern(block: u64) -> Vec<u8> {
    (0..BS).map(|i| (block.wrapping_mul(31) ^ i) as u8).collect()
}

#[test]
fn slot_pressure_commits_of_a_read_cache_sync_and_write_the_ssd_only() {
    let (images, dev) = device("bcache-like");
    for b in 0..256 {
        dev.write(&pattern(b), b * BS, false).unwrap_or_else(|e| panic!("write: {e}"));
    }
    dev.flush().unwrap_or_else(|e| panic!("flush: {e}"));
    let _ = dev.wait_idle(Duration::from_secs(10));
    let before = (dev.stats(), images.syncs.each_ref().map(|s| s.load(Ordering::Relaxed)));
    // Reads of many more blocks than slots, twice each: the cache turns its slots over.
    let mut buf = vec![0u8; BS as usize];
    for round in 0..3 {
        for b in 0..256 {
            dev.read(&mut buf, b * BS).unwrap_or_else(|e| panic!("read: {e}"));
            assert!(buf == pattern(b), "block {b} round {round}");
        }
        let _ = dev.wait_idle(Duration::from_secs(10));
    }
    let after = (dev.stats(), images.syncs.each_ref().map(|s| s.load(Ordering::Relaxed)));
    let lean = after.0.ssd_only_commits - before.0.ssd_only_commits;
    let commits = after.0.commits - before.0.commits;
    let (ssd_syncs, hdd_syncs) = (after.1[0] - before.1[0], after.1[1] - before.1[1]);
    assert!(lean > 0 && lean == commits, "every forced commit of a read cache is SSD-only: {lean} of {commits}");
    // A commit syncs each image it touches twice (its slots, then its checkpoint).
    assert_eq!((ssd_syncs, hdd_syncs), (2 * commits, 0), "syncs of the SSD and the HDD");
    dev.shutdown().unwrap_or_else(|e| panic!("shutdown: {e}"));
}

/// Overwrites both of the SSD's checkpoint copies.
fn destroy_ssd_checkpoints(images: &MemBackend) {
    let sb = inspect(images).unwrap_or_else(|e| panic!("inspect: {e}"));
    for copy in 0..2 {
        images.write(Dev::Ssd, &vec![0x5a; sb.meta_len as usize], sb.meta_offset(copy)).expect("write");
    }
}

#[test]
fn the_hdd_replica_alone_opens_a_cleanly_stopped_device_and_is_refused_after_a_crash() {
    let spec = "cache:mode=write-back";
    let (images, dev) = device(spec);
    for b in 0..8 {
        dev.write(&pattern(b), b * BS, false).unwrap_or_else(|e| panic!("write: {e}"));
    }
    dev.flush().unwrap_or_else(|e| panic!("flush: {e}"));
    // A power cut now: the flushed table is on both images, the device was not stopped.
    let crashed = images.inner.power_cut(7);
    dev.shutdown().unwrap_or_else(|e| panic!("shutdown: {e}"));
    drop(dev);
    let opts = || ServeOptions { spec: spec.into(), ..ServeOptions::default() };

    destroy_ssd_checkpoints(&crashed);
    match open(Arc::new(crashed) as Arc<dyn Backend>, opts()) {
        Err(DeviceError::ReplicaOnly(why)) => assert!(why.contains("SSD copy 0"), "{why}"),
        Err(e) => panic!("another error: {e}"),
        Ok(_) => panic!("a replica that may be stale was trusted"),
    }

    destroy_ssd_checkpoints(&images.inner);
    let dev = open(images.clone() as Arc<dyn Backend>, opts()).unwrap_or_else(|e| panic!("open from the replica: {e}"));
    let mut buf = vec![0u8; BS as usize];
    for b in 0..8 {
        dev.read(&mut buf, b * BS).unwrap_or_else(|e| panic!("read: {e}"));
        assert!(buf == pattern(b), "block {b}");
    }
}
