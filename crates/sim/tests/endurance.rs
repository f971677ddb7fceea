//! SSD wear counts against the device preset's rated writes (`endurance_gb`), not one fixed
//! figure: a drive rated for a tenth of the writes wears ten times as fast.

#![expect(clippy::unwrap_used, reason = "a failing setup should stop the test loudly")]

use std::path::Path;

use tierwise_devices::presets::Presets;
use tierwise_sim::sim::{NoProgress, Timing};
use tierwise_sim::trace::{OpenOptions, open_trace};
use tierwise_sim::{SimConfig, simulate};

fn ssd_eu(overrides: &str) -> (f64, f64) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/traces/msr_hm_0.excerpt1000.csv");
    let mut t = open_trace(&path, &OpenOptions::default()).unwrap();
    let mut cfg = SimConfig::new("cache:mode=write-back", 2 << 20);
    cfg.timing = Timing::Closed { depth: 4 };
    cfg.devices =
        Presets::with_overrides(overrides, "test.toml").unwrap().set("wd5000aaks", "vertex3", "ddr3").unwrap();
    let r = simulate(&mut t, &cfg, &mut NoProgress).unwrap();
    (r.endurance.ssd_eu, r.endurance.ssd_limit_bytes)
}

#[test]
fn wear_counts_against_the_presets_rating() {
    let (eu, limit) = ssd_eu("");
    assert_eq!(limit, 36_500e9, "the bundled presets carry GreenDM's limit");
    let (eu_small, limit_small) = ssd_eu("[ssd.vertex3]\nendurance_gb = 3650\n");
    assert_eq!(limit_small, 3_650e9);
    assert!(eu > 0.0 && (eu_small / eu - 10.0).abs() < 1e-9, "{eu} vs {eu_small}");
    let e = Presets::with_overrides("[ssd.vertex3]\nendurance_gb = 0\n", "t.toml").unwrap_err().to_string();
    assert!(e.contains("endurance_gb") && e.contains("positive"), "{e}");
}
