//! A flash device in the HDD's place (`--hdd ssd:NAME`): the slow level timed by the SSD
//! model behind the HDD's queue must serve random reads as that SSD does in the fast level
//! (`ssd-only`), at queue depth 1 (latency) and 32 (the IOPS ceiling), and never spin down.

#![expect(clippy::unwrap_used, reason = "a failing setup should stop the test loudly")]

use std::sync::Arc;

use tierwise_core::Nanos;
use tierwise_sim::device::{Presets, QueueConfig, Scheduler};
use tierwise_sim::sim::NoProgress;
use tierwise_sim::synth::Rng;
use tierwise_sim::trace::memory::memory_trace;
use tierwise_sim::trace::{IoOp, TraceRecord};
use tierwise_sim::{SimConfig, Timing, simulate};

fn random_reads(n: usize, span: u64) -> Arc<Vec<TraceRecord>> {
    let mut rng = Rng::new(3);
    Arc::new(
        (0..n)
            .map(|_| {
                let offset = rng.below(span / 4096) * 4096;
                TraceRecord { op: IoOp::Read, offset, len: 4096, key: offset / 512, ..Default::default() }
            })
            .collect(),
    )
}

fn iops(arch: &str, hdd: &str, depth: u32, scheduler: Scheduler) -> (f64, u64) {
    let span = 1 << 30;
    let mut cfg = SimConfig::new(arch, span);
    cfg.devices = Presets::builtin().set(hdd, "vertex3", "ddr3").unwrap();
    cfg.timing = Timing::Closed { depth };
    cfg.hdd_queue = QueueConfig { scheduler, ..QueueConfig::default() };
    cfg.spin_down = Some(Nanos::from_millis(1));
    let mut t = memory_trace(random_reads(20_000, span), "reads", false);
    let r = simulate(&mut t, &cfg, &mut NoProgress).unwrap();
    (r.iops, r.hdd.spin_downs)
}

#[test]
fn flash_in_the_hdds_place_serves_as_the_same_ssd_does() {
    for depth in [1, 4, 32] {
        let (fast, _) = iops("ssd-only", "wd5000aaks", depth, Scheduler::MqDeadline);
        for scheduler in [Scheduler::MqDeadline, Scheduler::None, Scheduler::Fifo] {
            let (slow, spin_downs) = iops("hdd-only", "ssd:vertex3", depth, scheduler);
            assert!((slow / fast - 1.0).abs() < 0.03, "QD{depth} {scheduler:?}: {slow:.0} vs ssd-only {fast:.0}");
            assert_eq!(spin_downs, 0, "flash does not spin down");
        }
    }
    // The disk it replaces is some fifty times slower here: the preset really took over.
    let (disk, _) = iops("hdd-only", "wd5000aaks", 32, Scheduler::MqDeadline);
    let (flash, _) = iops("hdd-only", "ssd:vertex3", 32, Scheduler::MqDeadline);
    assert!(flash > 30.0 * disk, "{flash:.0} vs {disk:.0}");
    // An unknown SSD preset is an error naming the presets that exist.
    let e = Presets::builtin().set("ssd:nosuch", "vertex3", "ddr3").unwrap_err().to_string();
    assert!(e.contains("nosuch") && e.contains("vertex3"), "{e}");
}
