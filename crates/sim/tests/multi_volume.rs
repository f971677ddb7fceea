//! A multi-tenant trace built from the bundled real traces, one volume each: the simulator's
//! results must not depend on what the volumes are numbered. Volume ids of 16 and up once
//! overflowed the stream position of the sequential-cutoff architectures (one endless stream),
//! GreenDM's HDD addresses, and the HDD model's layout (volumes 1 TiB apart wrapped modulo the
//! disk's capacity); renumbering the volumes changed the answer.

#![expect(clippy::unwrap_used, reason = "a failing setup should stop the test loudly")]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tierwise_sim::sim::{NoProgress, footprint_and_layout};
use tierwise_sim::trace::memory::memory_trace;
use tierwise_sim::trace::{OpenOptions, TraceRecord, open_trace};
use tierwise_sim::{SimConfig, Timing, simulate};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The first `n` records of a bundled trace, times from 0.
fn head(name: &str, n: u64) -> Vec<TraceRecord> {
    let mut t = open_trace(&root().join("data/traces").join(name), &OpenOptions::default()).unwrap();
    let mut out = Vec::new();
    t.for_each(n, |r| -> Result<(), tierwise_sim::trace::TraceError> {
        out.push(*r);
        Ok(())
    })
    .unwrap();
    let t0 = out.iter().map(|r| r.time_ns).min().unwrap_or(0);
    for r in &mut out {
        r.time_ns -= t0;
    }
    out
}

/// Four real traces as four volumes numbered `ids`, interleaved by time.
fn tenants(ids: [u32; 4]) -> Arc<Vec<TraceRecord>> {
    let sources = [
        ("cloudphysics_libcachesim.sample.vscsi.gz", 3000),
        ("msr_hm_0.excerpt1000.csv", 1000),
        ("systor17_vdi.sample1000.csv.gz", 1000),
        ("umass_websearch.mqsim_ascii.trace.gz", 3000),
    ];
    let mut all: Vec<TraceRecord> = Vec::new();
    for ((name, n), id) in sources.into_iter().zip(ids) {
        all.extend(head(name, n).into_iter().map(|r| TraceRecord { volume: id, ..r }));
    }
    all.sort_by_key(|r| (r.time_ns, r.volume));
    Arc::new(all)
}

fn run(arch: &str, recs: &Arc<Vec<TraceRecord>>) -> tierwise_sim::metrics::SimReport {
    let mut cfg = SimConfig::new(arch, 0);
    let (_, fp, volumes) = footprint_and_layout(&mut memory_trace(recs.clone(), "mem", true), cfg.objects).unwrap();
    assert_eq!(volumes.volumes(), 4);
    cfg.ssd_bytes = fp / 4;
    cfg.footprint_bytes = Some(fp);
    cfg.volumes = volumes;
    cfg.timing = Timing::Closed { depth: 8 };
    simulate(&mut memory_trace(recs.clone(), "mem", true), &cfg, &mut NoProgress).unwrap()
}

#[test]
fn renumbering_the_volumes_changes_nothing() {
    let small = tenants([0, 1, 2, 3]);
    let large = tenants([0, 17, 4000, 65_000]);
    for arch in [
        "hdd-only",
        "bcache-like",
        "open-cas-like",
        "cache:mode=write-back",
        "greendm-tiering:es=4KiB,reserved=64",
        "linear",
    ] {
        let (a, b) = (run(arch, &small), run(arch, &large));
        assert_eq!(a.requests, b.requests, "{arch}");
        assert_eq!(a.read_hit, b.read_hit, "{arch}: read shares");
        assert_eq!(a.arch_counters, b.arch_counters, "{arch}: counters");
        assert_eq!((a.hdd.reads, a.hdd.writes), (b.hdd.reads, b.hdd.writes), "{arch}: HDD operations");
        let ratio = a.iops / b.iops;
        assert!((ratio - 1.0).abs() < 1e-9, "{arch}: {} vs {} IOPS", a.iops, b.iops);
        assert!(b.notes.iter().any(|n| n.contains("4 volumes laid out")), "{arch}: {:?}", b.notes);
    }
}

/// dm-cache's hot-spot table is hashed and flashcache's sets are the block number modulo the
/// set count, so other ids share sets or slots differently: close, not equal.
#[test]
fn set_mapped_caches_of_renumbered_volumes_are_close() {
    for arch in ["dm-cache-smq-like", "flashcache-like"] {
        let (a, b) = (run(arch, &tenants([0, 1, 2, 3])), run(arch, &tenants([0, 17, 4000, 65_000])));
        assert!((a.read_hit.ssd - b.read_hit.ssd).abs() < 0.01, "{arch}: {:?} vs {:?}", a.read_hit, b.read_hit);
        assert!((a.iops / b.iops - 1.0).abs() < 0.05, "{arch}: {} vs {} IOPS", a.iops, b.iops);
    }
}

/// bcache-like caches the random reads of every tenant: with the volumes' streams confused the
/// whole trace once bypassed the cache.
#[test]
fn sequential_cutoff_sees_each_volume_on_its_own() {
    let r = run("bcache-like", &tenants([0, 17, 4000, 65_000]));
    let bypassed = r.arch_counters["accesses bypassed (sequential cutoff or mode none)"];
    assert!(bypassed * 4 < r.accesses, "{bypassed} of {} accesses bypassed", r.accesses);
}
