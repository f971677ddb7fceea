//! A write-back cache whose blocks are larger than the writes keeps a partly written block as a
//! partial dirty block (bcache, Open CAS). A read of it fills the rest: without that, such a
//! block stayed partial for as long as it stayed cached and every read of it went to the HDD
//! too, so the SSD's share of reads *fell* as the SSD grew (CloudPhysics, 64 KiB blocks:
//! 49 % at 1 % of the footprint, 19 % at 100 %; with `partial-writes=around`, 50 % to 81 %).

#![expect(clippy::unwrap_used, reason = "a failing setup should stop the test loudly")]

use std::path::Path;

use tierwise_sim::objects::{Anchor, ObjectMode};
use tierwise_sim::sim::{NoProgress, footprint_and_layout};
use tierwise_sim::trace::{OpenOptions, open_trace};
use tierwise_sim::{SimConfig, Timing, simulate};

const TRACE: &str = "../../data/traces/cloudphysics_libcachesim.sample.vscsi.gz";

/// The SSD's share of reads at each SSD size (a share of the footprint, in percent).
fn ssd_shares(arch: &str, sizes: &[u64]) -> Vec<f64> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(TRACE);
    let mut cfg = SimConfig::new(arch, 0);
    cfg.objects = ObjectMode::Blocks { size: 64 << 10, anchor: Anchor::At(0) };
    cfg.timing = Timing::None;
    let mut t = open_trace(&path, &OpenOptions::default()).unwrap();
    let (_, footprint, volumes) = footprint_and_layout(&mut t, cfg.objects).unwrap();
    cfg.footprint_bytes = Some(footprint);
    cfg.volumes = volumes;
    sizes
        .iter()
        .map(|pct| {
            cfg.ssd_bytes = footprint * pct / 100;
            let mut t = open_trace(&path, &OpenOptions::default()).unwrap();
            simulate(&mut t, &cfg, &mut NoProgress).unwrap().read_hit.ssd
        })
        .collect()
}

#[test]
fn a_larger_ssd_serves_no_fewer_reads_of_partly_written_blocks() {
    let sizes = [1, 5, 25, 100];
    let absorb = ssd_shares("cache:mode=write-back", &sizes);
    let around = ssd_shares("cache:mode=write-back,partial-writes=around", &sizes);
    for w in absorb.windows(2) {
        assert!(w[1] >= w[0] - 0.005, "SSD share falls as the SSD grows: {absorb:?}");
    }
    for (a, b) in absorb.iter().zip(&around) {
        // Absorbing costs a block's first read its SSD hit (assembled), nothing more.
        assert!((a - b).abs() < 0.05, "absorb {absorb:?} vs around {around:?}");
    }
    assert!(absorb[3] > 0.7, "{absorb:?}");
}
