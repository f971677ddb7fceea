//! A read that misses part of a block the policy promotes feeds the promotion: the block is
//! read from the HDD once, whole, and the mover writes those bytes to the SSD instead of reading
//! the HDD again (`fills.rs`; the simulator models a miss the same way). The data stays right:
//! every byte read back after the promotions is the byte written.

use std::sync::Arc;
use std::time::Duration;

use tierwise_block::{Backend, CreateOptions, MemBackend, ServeOptions, create, open};

/// 32 extents of 64 KiB; the SSD holds 8.
const BLOCK: u64 = 64 << 10;
const HDD: u64 = 32 * BLOCK;
const SSD: u64 = 8 * BLOCK;
const SPEC: &str = "greendm-tiering:pt=1";

fn byte_at(off: u64) -> u8 {
    (off.wrapping_mul(2_654_435_761) >> 13) as u8
}

#[test]
fn a_partial_read_miss_feeds_the_promotion_it_causes_and_the_data_stays_right() {
    let mem = Arc::new(MemBackend::new(SSD + (4 << 20), HDD));
    create(&*mem, &CreateOptions { spec: SPEC.into(), block_size: Some(BLOCK), ssd_size: SSD, hdd_size: None })
        .unwrap_or_else(|e| panic!("create: {e}"));
    // The data, on the HDD image before the device is opened (an adopted volume).
    let image: Vec<u8> = (0..HDD).map(byte_at).collect();
    mem.write(tierwise_block::backend::Dev::Hdd, &image, 0).unwrap_or_else(|e| panic!("seed: {e}"));
    let dev =
        open(mem.clone() as Arc<dyn Backend>, ServeOptions { spec: SPEC.into(), movers: 2, ..ServeOptions::default() })
            .unwrap_or_else(|e| panic!("open: {e}"));
    dev.start();
    // 4 KiB reads in the middle of 6 extents: each misses and promotes its extent.
    for b in 0..6u64 {
        let off = b * BLOCK + 20_480;
        let mut buf = vec![0u8; 4096];
        dev.read(&mut buf, off).unwrap_or_else(|e| panic!("read: {e}"));
        assert_eq!(buf, image[off as usize..off as usize + 4096], "extent {b}: the miss read the wrong bytes");
    }
    assert!(dev.wait_idle(Duration::from_secs(30)).unwrap_or_else(|e| panic!("wait: {e}")), "moves did not finish");
    let stats = dev.stats();
    let (engine, _) = dev.engine_stats();
    let promoted = engine.done[tierwise_core::WorkKind::Promote as usize];
    assert!(promoted >= 4, "{promoted} promotions: the policy did not promote the extents read");
    assert_eq!(stats.fills_from_ram, promoted, "every promotion should take the bytes of the read that caused it");
    // Everything reads back as written, from wherever it is now.
    let mut all = vec![0u8; HDD as usize];
    dev.read(&mut all, 0).unwrap_or_else(|e| panic!("read back: {e}"));
    assert!(all == image, "the device's bytes differ from the image after the promotions");
    dev.shutdown().unwrap_or_else(|e| panic!("shutdown: {e}"));
}
