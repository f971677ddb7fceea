//! A device whose images fail: an HDD that refuses writes (full, read-only) pauses write-backs
//! with back-off instead of retrying them in a loop, reports "degraded" with the reason and
//! keeps serving reads; an SSD read error in write-through is served from the HDD and the slot
//! retired; an SSD that keeps failing is detached (write-through: everything served from the
//! HDD; write-back: the dirty blocks it held are lost until it is back, reads of them fail, and
//! a restart with the SSD back writes them back from the checkpoint kept on the HDD).

use std::sync::Arc;
use std::time::{Duration, Instant};

use tierwise_block::backend::Dev;
use tierwise_block::{Backend, CreateOptions, MemBackend, ServeOptions, create, open};

const BS: u64 = 4096;
const HDD: u64 = 4 << 20;
const SSD: u64 = 1 << 20;
const ENOSPC: i32 = 28;
const EIO: i32 = 5;

fn device(spec: &str) -> (Arc<MemBackend>, tierwise_block::HybridDevice) {
    let mem = Arc::new(MemBackend::new(SSD + (1 << 20), HDD));
    create(&*mem, &CreateOptions { spec: spec.into(), block_size: Some(BS), ssd_size: SSD, hdd_size: Some(HDD) })
        .unwrap_or_else(|e| panic!("create: {e}"));
    let dev =
        open(mem.clone() as Arc<dyn Backend>, ServeOptions { spec: spec.into(), movers: 2, ..ServeOptions::default() })
            .unwrap_or_else(|e| panic!("open: {e}"));
    dev.start();
    (mem, dev)
}

fn data(block: u64, version: u8) -> Vec<u8> {
    (0..BS).map(|i| (i as u8).wrapping_mul(31) ^ (block as u8) ^ version).collect()
}

#[test]
fn an_hdd_that_refuses_writes_pauses_write_backs_and_reads_go_on() {
    let (mem, dev) = device("cache:mode=write-back");
    for b in 0..64u64 {
        dev.write(&data(b, 1), b * BS, false).unwrap_or_else(|e| panic!("write: {e}"));
    }
    mem.fail(Dev::Hdd, false, true, ENOSPC);
    // Write-backs must now fail; make the engine want them all.
    let _ = dev.writeback_all(Duration::from_millis(10));
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs(3));
    let s = dev.stats();
    let h = dev.health();
    // Without back-off the movers retried a failing write-back hundreds of thousands of
    // times a second; with it, a few tens in three seconds.
    assert!(s.moves_failed < 200, "{} failed moves in {:?}: no back-off", s.moves_failed, t0.elapsed());
    assert!(h.backed_off > 0, "{h:?}");
    assert_eq!(h.state, "degraded", "{h:?}");
    let reason = h.reason.clone().unwrap_or_default();
    assert!(reason.contains("HDD image writes fail") && reason.contains("No space left"), "{reason}");
    assert!(h.errors.hdd[1] > 0, "{h:?}");
    // Reads are served, the dirty data too.
    for b in 0..64u64 {
        let mut buf = vec![0u8; BS as usize];
        dev.read(&mut buf, b * BS).unwrap_or_else(|e| panic!("read {b}: {e}"));
        assert_eq!(buf, data(b, 1), "block {b}");
    }
    // The HDD works again: the write-backs complete, and the state clears once errors age.
    mem.fail(Dev::Hdd, false, false, 0);
    assert!(dev.writeback_all(Duration::from_secs(30)).unwrap_or(false), "write-backs resume");
    assert_eq!(dev.stats().dirty_bytes, 0);
    assert_eq!(&mem.image(Dev::Hdd)[..(64 * BS) as usize], &(0..64).flat_map(|b| data(b, 1)).collect::<Vec<u8>>()[..]);
    dev.shutdown().unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn an_ssd_read_error_in_write_through_is_served_from_the_hdd_and_a_lost_ssd_is_detached() {
    let (mem, dev) = device("cache:mode=write-through");
    // Written through and read twice: cached on the SSD.
    for b in 0..32u64 {
        dev.write(&data(b, 2), b * BS, false).unwrap_or_else(|e| panic!("write: {e}"));
        let mut buf = vec![0u8; BS as usize];
        dev.read(&mut buf, b * BS).unwrap_or_else(|e| panic!("read: {e}"));
    }
    assert!(dev.wait_idle(Duration::from_secs(30)).unwrap_or(false));
    assert!(dev.stats().slots_used > 0, "blocks are cached");
    mem.fail(Dev::Ssd, true, true, EIO);
    for b in 0..32u64 {
        let mut buf = vec![0u8; BS as usize];
        dev.read(&mut buf, b * BS).unwrap_or_else(|e| panic!("read {b} with a failing SSD: {e}"));
        assert_eq!(buf, data(b, 2), "block {b}");
    }
    let h = dev.health();
    assert!(h.retired_slots > 0 || h.ssd_detached, "{h:?}");
    // Keeps failing: detached, writes and reads go on from the HDD.
    for b in 0..32u64 {
        dev.write(&data(b, 3), b * BS, false).unwrap_or_else(|e| panic!("write {b}: {e}"));
    }
    for b in 0..32u64 {
        let mut buf = vec![0u8; BS as usize];
        dev.read(&mut buf, b * BS).unwrap_or_else(|e| panic!("read {b}: {e}"));
        assert_eq!(buf, data(b, 3), "block {b}");
    }
    let h = dev.health();
    assert!(h.ssd_detached && h.state == "degraded" && h.lost_dirty_blocks == 0, "{h:?}");
    assert!(h.reason.unwrap_or_default().contains("detached"));
}

#[test]
fn a_lost_ssd_with_dirty_blocks_fails_their_reads_and_a_restart_with_it_back_recovers_them() {
    let (mem, dev) = device("cache:mode=write-back");
    for b in 0..16u64 {
        dev.write(&data(b, 4), b * BS, false).unwrap_or_else(|e| panic!("write: {e}"));
    }
    dev.flush().unwrap_or_else(|e| panic!("flush: {e}"));
    assert!(dev.stats().dirty_bytes > 0);
    mem.fail(Dev::Ssd, true, true, EIO);
    // Reads of dirty blocks fail (their only current copy is on the SSD), clearly.
    let mut failures = 0;
    for _ in 0..3 {
        for b in 0..16u64 {
            let mut buf = vec![0u8; BS as usize];
            if let Err(e) = dev.read(&mut buf, b * BS) {
                failures += 1;
                assert!(e.errno() == EIO, "{e}");
            }
        }
    }
    assert!(failures > 0);
    let h = dev.health();
    assert!(h.ssd_detached && h.state == "failed" && h.lost_dirty_blocks == 16, "{h:?}");
    assert!(h.reason.unwrap_or_default().contains("dirty"));
    // A block never written stays readable (zeroes, from the HDD); a whole-block write heals one.
    let mut buf = vec![1u8; BS as usize];
    dev.read(&mut buf, 100 * BS).unwrap_or_else(|e| panic!("{e}"));
    assert!(buf.iter().all(|&x| x == 0));
    dev.write(&data(0, 9), 0, false).unwrap_or_else(|e| panic!("healing write: {e}"));
    assert_eq!(dev.health().lost_dirty_blocks, 15);
    assert!(dev.write(&[7u8; 512], BS, false).is_err(), "a partial write to a lost block is refused");
    dev.shutdown().unwrap_or_else(|e| panic!("{e}"));
    drop(dev);
    // The SSD comes back (a cable, a passing fault): a restart writes the 15 lost blocks back
    // from it, and keeps block 0's newer bytes written while it was away.
    mem.fail(Dev::Ssd, false, false, 0);
    let dev = open(
        mem.clone() as Arc<dyn Backend>,
        ServeOptions { spec: "cache:mode=write-back".into(), ..ServeOptions::default() },
    )
    .unwrap_or_else(|e| panic!("reopen: {e}"));
    for b in 0..16u64 {
        let mut buf = vec![0u8; BS as usize];
        dev.read(&mut buf, b * BS).unwrap_or_else(|e| panic!("read {b}: {e}"));
        let want = if b == 0 { data(0, 9) } else { data(b, 4) };
        assert!(buf == want, "block {b} after the SSD came back: not the bytes written last");
    }
}
