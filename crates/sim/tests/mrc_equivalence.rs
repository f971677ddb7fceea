//! The one-pass MRC must equal separate single-size LRU runs at every size: the same trace
//! through `tierwise mrc` and through the simulator's LRU cache, one run per size.

#![expect(clippy::unwrap_used, reason = "a failing setup should stop the test loudly")]

use std::path::{Path, PathBuf};

use tierwise_sim::mrc::{log_sizes, lru_mrc};
use tierwise_sim::objects::{Anchor, ObjectMode};
use tierwise_sim::sim::NoProgress;
use tierwise_sim::trace::{OpenOptions, open_trace};
use tierwise_sim::{SimConfig, simulate};

fn trace(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/traces").join(name)
}

fn single_run_misses(path: &Path, mode: ObjectMode, size: u64) -> u64 {
    let mut t = open_trace(path, &OpenOptions::default()).unwrap();
    let mut cfg = SimConfig::new("cache:mode=read-only,collector=lru", size);
    cfg.objects = mode;
    let r = simulate(&mut t, &cfg, &mut NoProgress).unwrap();
    // Per access (a request of several blocks is several accesses).
    r.engine.reads_by_level[2] + r.engine.writes_by_level[2]
}

fn check(path: &Path, mode: ObjectMode, sizes: &[u64]) {
    let mut t = open_trace(path, &OpenOptions::default()).unwrap();
    let mrc = lru_mrc(&mut t, mode, sizes, &mut NoProgress).unwrap();
    assert_eq!(mrc.points.len(), sizes.len());
    for p in &mrc.points {
        let want = single_run_misses(path, mode, p.size_bytes);
        assert_eq!(p.misses, want, "{} {:?} at {} bytes", path.display(), mode, p.size_bytes);
    }
}

#[test]
fn cloudphysics_object_mode_every_size() {
    let sizes = log_sizes(1, 60_000, 12, 1);
    check(&trace("cloudphysics_libcachesim.sample.vscsi.gz"), ObjectMode::LibCacheSim { ignore_size: true }, &sizes);
}

#[test]
fn arc_oltp_blocks_every_size() {
    // Reads only, so the read-only cache is a plain LRU over 4 KiB blocks.
    let sizes = log_sizes(4096, 100 << 20, 8, 4096);
    check(&trace("arc_OLTP.lis.zst"), ObjectMode::Blocks { size: 4096, anchor: Anchor::At(0) }, &sizes);
}

#[test]
fn byte_mode_matches_libcachesim_numbers() {
    // Variable sizes: libCacheSim's own LRU misses at 16/64/256 MiB on this trace.
    let mut t = open_trace(&trace("cloudphysics_libcachesim.sample.vscsi.gz"), &OpenOptions::default()).unwrap();
    let mrc = lru_mrc(
        &mut t,
        ObjectMode::LibCacheSim { ignore_size: false },
        &[16 << 20, 64 << 20, 256 << 20],
        &mut NoProgress,
    )
    .unwrap();
    let got: Vec<u64> = mrc.points.iter().map(|p| p.misses).collect();
    let want = [95_032u64, 93_994, 87_793];
    for (g, w) in got.iter().zip(want) {
        // Exact unless an object's size changes between requests; report the difference.
        let rel = (*g as f64 - w as f64).abs() / w as f64;
        assert!(rel < 0.001, "byte-mode MRC {got:?} vs libCacheSim {want:?}");
        eprintln!("byte-mode MRC {g} vs libCacheSim {w}");
    }
}
