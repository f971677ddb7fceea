//! OTF-AST served for real: sub-LUNs move chunk by chunk while clients keep writing to them,
//! the writes made during a move go to its temporary buffer and are merged into the new home,
//! and a power cut at any moment loses no flushed byte.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tierwise_block::{Backend, CreateOptions, HybridDevice, MemBackend, ServeOptions, create, open};
use tierwise_core::WorkKind;

/// 64 sub-LUNs of 64 KiB; the SSD holds 4.
const BLOCK: u64 = 64 << 10;
const HDD: u64 = 64 * BLOCK;
const SSD: u64 = 4 * BLOCK;
/// A sub-LUN moves in about 0.25 s (16 chunks): long enough for writes to land mid-move.
const MOVE_RATE: u64 = 256 << 10;
/// Promote the top 2 sub-LUNs of every concentrated 1 s interval; demote after 2 intervals out.
const SPEC: &str = "otf-ast:t=1s,i=10,n=2,c=1,o=2,max-moves=2,promote-time=0,demote-time=0";

mod common;
use common::Rng;

fn device(mem: &Arc<MemBackend>, create_it: bool) -> HybridDevice {
    if create_it {
        create(&**mem, &CreateOptions { spec: SPEC.into(), block_size: Some(BLOCK), ssd_size: SSD, hdd_size: None })
            .unwrap_or_else(|e| panic!("create: {e}"));
    }
    let dev = open(
        mem.clone() as Arc<dyn Backend>,
        ServeOptions {
            spec: SPEC.into(),
            movers: 2,
            move_rate: MOVE_RATE,
            commit_interval: Duration::from_millis(50),
            ..ServeOptions::default()
        },
    )
    .unwrap_or_else(|e| panic!("open: {e}"));
    dev.start();
    dev
}

/// A range in the hot first eighth (8 sub-LUNs, 2 of them hotter) most of the time.
fn range(rng: &mut Rng) -> (u64, u64) {
    let span = match rng.below(8) {
        0..=3 => 2 * BLOCK,
        4..=6 => 8 * BLOCK,
        _ => HDD,
    };
    let len = match rng.below(3) {
        0 => 1 + rng.below(700),
        1 => 4096,
        _ => 512 * (1 + rng.below(40)),
    };
    let off = rng.below(span - len);
    let off = if rng.below(2) == 0 { off / 512 * 512 } else { off };
    (off, len)
}

#[test]
fn writes_during_sub_lun_moves_are_merged_into_the_new_home() {
    let mem = Arc::new(MemBackend::new(0, HDD));
    let dev = device(&mem, true);
    let mut reference = vec![0u8; HDD as usize];
    let mut rng = Rng(0x5eed);
    let started = Instant::now();
    let mut ops = 0u64;
    while started.elapsed() < Duration::from_secs(7) {
        let (off, len) = range(&mut rng);
        let (o, l) = (off as usize, len as usize);
        if rng.below(2) == 0 {
            let tag = rng.next();
            let data: Vec<u8> = (0..l).map(|j| (tag >> (j % 8 * 8)) as u8 ^ j as u8).collect();
            dev.write(&data, off, rng.below(50) == 0).unwrap_or_else(|e| panic!("write: {e}"));
            reference[o..o + l].copy_from_slice(&data);
        } else {
            let mut buf = vec![0u8; l];
            dev.read(&mut buf, off).unwrap_or_else(|e| panic!("read: {e}"));
            if let Some(j) = buf.iter().zip(&reference[o..o + l]).position(|(a, b)| a != b) {
                let at = off + j as u64;
                panic!("op {ops}: byte {at} differs; {}", dev.describe_block(at / BLOCK));
            }
        }
        ops += 1;
        if ops.is_multiple_of(200) {
            // Room for the movers between bursts, as a real client's think time.
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    assert!(dev.wait_idle(Duration::from_secs(20)).unwrap_or(false), "moves never finished");
    let mut all = vec![0u8; HDD as usize];
    dev.read(&mut all, 0).unwrap_or_else(|e| panic!("{e}"));
    assert!(all == reference, "the device differs from the reference after {ops} operations");
    dev.check().unwrap_or_else(|e| panic!("{e}"));
    let st = dev.stats();
    let (es, counters) = dev.engine_stats();
    let counter = |name: &str| counters.iter().find(|c| c.0 == name).map_or(0, |c| c.1);
    assert!(es.done(WorkKind::Promote) >= 2, "no sub-LUN was promoted: {es:?}");
    assert!(st.buffered_writes > 0 && st.buffer_merges >= 2, "no write landed mid-move: {st:?}");
    assert!(counter("writes buffered during migration") > 0, "{counters:?}");
    assert_eq!(st.anomalies, 0, "{st:?}");
    assert_eq!(st.buffered_sectors, 0, "a buffer outlived its move");
    // Sub-LUNs were served from the SSD afterwards.
    assert!(st.reads_by_level[1] > 0, "{st:?}");
    dev.shutdown().unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn a_power_cut_during_sub_lun_moves_loses_no_flushed_byte() {
    let trials = tierwise_testkit::trials("TIERWISE_POWER_CUTS", 4, 40);
    for trial in 0..trials {
        let mem = Arc::new(MemBackend::new(0, HDD));
        let dev = device(&mem, true);
        let mut rng = Rng(77 + trial * 1001);
        let mut flushed = vec![0u8; HDD as usize];
        let mut current = vec![0u8; HDD as usize];
        let mut unsettled = vec![false; HDD as usize];
        // Long enough for intervals to end and moves to start; the cut falls at a random point.
        let run = Duration::from_millis(1500 + rng.below(2500));
        let started = Instant::now();
        while started.elapsed() < run {
            let (off, len) = range(&mut rng);
            let (o, l) = (off as usize, len as usize);
            match rng.below(12) {
                0 => {
                    dev.flush().unwrap_or_else(|e| panic!("{e}"));
                    flushed.copy_from_slice(&current);
                    unsettled.fill(false);
                }
                1..=6 => {
                    let v = (rng.next() & 0xff) as u8 | 1;
                    dev.write(&vec![v; l], off, false).unwrap_or_else(|e| panic!("{e}"));
                    current[o..o + l].fill(v);
                    unsettled[o..o + l].fill(true);
                }
                _ => {
                    let mut buf = vec![0u8; l];
                    dev.read(&mut buf, off).unwrap_or_else(|e| panic!("{e}"));
                    assert!(buf == current[o..o + l], "trial {trial}: a read differs before the cut");
                }
            }
        }
        let moved = dev.engine_stats().0.done(WorkKind::Promote);
        let after = Arc::new(mem.power_cut(trial * 31 + 5));
        drop(dev);
        let dev =
            open(after.clone() as Arc<dyn Backend>, ServeOptions { spec: SPEC.into(), ..ServeOptions::default() })
                .unwrap_or_else(|e| panic!("trial {trial}: reopening after the cut: {e}"));
        let mut all = vec![0u8; HDD as usize];
        dev.read(&mut all, 0).unwrap_or_else(|e| panic!("{e}"));
        for i in 0..HDD as usize {
            assert!(
                all[i] == flushed[i] || unsettled[i],
                "trial {trial} ({moved} promotions before the cut): flushed byte {i} (sub-LUN {}) reads {}, flushed {}; {}",
                i as u64 / BLOCK,
                all[i],
                flushed[i],
                dev.describe_block(i as u64 / BLOCK)
            );
        }
        dev.check().unwrap_or_else(|e| panic!("trial {trial}: {e}"));
        dev.shutdown().unwrap_or_else(|e| panic!("{e}"));
    }
}
