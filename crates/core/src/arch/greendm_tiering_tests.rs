//! GreenDM tiering against the conformance harness: its start, promotions, demotions and
//! adoption of extents a front end's SSD holds.

use super::super::tests::{Harness, OBJ, Step};
use crate::{Level, ObjectId, Request, Setup, WorkKind, build_arch};

/// By default the drive starts empty: promotions take free SSD extents without demoting
/// anything, and a demoted extent goes back to its own home on the HDD.
#[test]
fn an_empty_drive_promotes_without_demoting_and_demotes_home() {
    let mut h = Harness::new("greendm-tiering:pt=1,lt=0,ht=1,mcml=4,md-flush=0", 2, false);
    assert!(!h.engine.placement(ObjectId(0)).on_fast, "nothing starts on the SSD");
    h.step(&Step::Read(5, true)).unwrap();
    let w: Vec<_> = h.queued.iter().map(|w| (w.kind, w.slow_addr)).collect();
    assert_eq!(w, [(WorkKind::Promote, 5 * OBJ)], "no demotion first; read from its home");
    h.settle().unwrap();
    h.clock_advance_secs(100);
    h.step(&Step::Read(7, true)).unwrap();
    h.step(&Step::Execute(0)).unwrap();
    h.step(&Step::Complete(0, 9)).unwrap();
    // The SSD is full (2 extents), at LT = 0 free: demotion makes room, by WSClock.
    let demote = h.queued.iter().find(|w| w.kind == WorkKind::Demote).expect("a demotion");
    assert_eq!(demote.slow_addr, demote.obj.0 * OBJ, "demoted to its own home");
    h.settle().unwrap();
}

/// GreenDM tiering moves hot extents up: after the scanned start (SSD full of the first
/// extents), background demotion makes room from LT to HT, and an extent missed PT times within
/// TW is promoted; cancellations are counted by reason.
#[test]
fn greendm_promotes_hot_extents_after_demoting_cold_ones() {
    let mut h = Harness::new("greendm-tiering:pt=2,lt=1,ht=2,mcml=4,md-flush=0,scanned=true", 4, false);
    // Extents 0..4 start on the SSD; 10 is on the HDD.
    assert!(h.engine.placement(ObjectId(1)).on_fast);
    assert!(!h.engine.placement(ObjectId(10)).on_fast);
    h.step(&Step::Read(10, true)).unwrap();
    // Free SSD extents (0) are at or below LT: demotion started, victims by WSClock.
    let demotes = h.queued.iter().filter(|w| w.kind == WorkKind::Demote).count();
    assert_eq!(demotes, 2, "demote until HT = 2 extents are free");
    while !h.queued.is_empty() {
        h.step(&Step::Execute(0)).unwrap();
        h.step(&Step::Complete(0, 9)).unwrap();
    }
    assert_eq!(h.engine.usage().fast_objects, 2);
    h.step(&Step::Read(10, true)).unwrap(); // second miss within TW: promote
    let w = h.queued.iter().find(|w| w.kind == WorkKind::Promote).copied().expect("promotion issued");
    assert_eq!(w.obj, ObjectId(10));
    // While it is promoted, I/O to it is served from RAM.
    assert_eq!(h.engine.access(&Request::read(ObjectId(10), 0, OBJ)).level, Level::Ram);
    h.drain();
    h.settle().unwrap();
    assert!(h.engine.placement(ObjectId(10)).on_fast);
    let c: std::collections::BTreeMap<_, _> = h.engine.arch_counters().into_iter().collect();
    assert_eq!(c["I/Os served from RAM during promotion"], 1);
}

/// LT/HT hysteresis: demotion starts only when free SSD extents fall to LT, stops once HT
/// are free (counting demotions in flight), and does not restart until LT again.
#[test]
fn demotion_runs_between_lt_and_ht_only() {
    let mut h = Harness::new("greendm-tiering:pt=1,lt=2,ht=5,mcml=8,md-flush=0,reserved=16,scanned=true", 8, false);
    let demotes = |h: &Harness| h.queued.iter().filter(|w| w.kind == WorkKind::Demote).count();
    let free = |h: &Harness| {
        let u = h.engine.usage();
        (u.fast_capacity - u.fast_used) / OBJ
    };
    // Scanned start: the SSD is full (0 free <= LT), so the first access starts an episode
    // that demotes until HT = 5 are free.
    h.step(&Step::Read(100, true)).unwrap();
    assert_eq!(demotes(&h), 5);
    h.drain();
    h.settle().unwrap();
    assert_eq!(free(&h), 5);
    // Promotions use free extents; nothing is demoted while more than LT = 2 stay free.
    for (i, obj) in [101u64, 102].into_iter().enumerate() {
        h.step(&Step::Read(obj, true)).unwrap();
        assert_eq!(demotes(&h), 0, "free {} > LT: no demotion", free(&h));
        h.drain();
        h.settle().unwrap();
        assert_eq!(free(&h), 4 - i as u64);
    }
    // The third promotion brings free to LT: a new episode refills to HT.
    h.step(&Step::Read(103, true)).unwrap();
    h.drain();
    h.settle().unwrap();
    assert_eq!(free(&h), 5, "demoted back up to HT");
}

#[test]
fn greendm_knobs_are_validated() {
    let setup = Setup { fast_capacity: 64 * OBJ, slow_capacity: 0, object_size: OBJ };
    let err = |spec: &str| build_arch(spec, &setup).unwrap_err().to_string();
    assert!(err("greendm-tiering:lt=10,ht=5").contains("lt (10) must be below ht (5)"));
    assert!(err("greendm-tiering:mcml=0").contains("mcml"));
    assert!(err("greendm-tiering:es=6000").contains("multiple of 4 KiB"));
    assert!(err("greendm-tiering:es=8192").contains("--objects blocks:8192"));
    let tiny = Setup { fast_capacity: 100, ..setup };
    assert!(build_arch("greendm-tiering", &tiny).unwrap_err().to_string().contains("smaller than one extent"));
    let variable = Setup { object_size: 0, ..setup };
    assert!(build_arch("greendm-tiering", &variable).unwrap_err().to_string().contains("blocks:ES"));
}

#[test]
fn adopted_extents_are_on_the_ssd_and_demote_as_promoted_ones() {
    let mut h = Harness::new("greendm-tiering:pt=1,lt=1,ht=2,mcml=4,md-flush=0,reserved=16", 6, false);
    for v in [3u64, 9, 40] {
        h.engine.adopt(ObjectId(v), Level::Fast, OBJ, true);
        let p = h.engine.placement(ObjectId(v));
        assert!(p.on_fast && !p.on_slow, "{v}: {p:?}");
    }
    h.engine.adopt(ObjectId(9), Level::Fast, OBJ, true);
    assert_eq!(h.engine.usage().fast_objects, 3, "adopting twice places once");
    h.engine.check_invariants().unwrap_or_else(|e| panic!("{e}"));
    // Misses on other extents promote them; adopted ones are demoted to make room.
    for v in 100..130u64 {
        h.step(&Step::Read(v, true)).unwrap();
        for _ in 0..4 {
            h.step(&Step::Execute(0)).unwrap();
            h.step(&Step::Complete(0, 9)).unwrap();
        }
    }
    h.engine.check_invariants().unwrap_or_else(|e| panic!("{e}"));
    assert!(h.engine.stats().done(WorkKind::Demote) > 0);
}

/// Extent ids carry their volume: an extent of volume 20 is read from its own logical address
/// (`id × es` overflowed and wrapped), and spares are extents of the spare volume, past every
/// volume (they lay below volume 1's ids).
#[test]
fn hdd_addresses_keep_the_volume_and_spares_are_past_every_volume() {
    let high = ObjectId::block_of(20, 3);
    let mut h = Harness::new("greendm-tiering:pt=1,lt=2,ht=5,mcml=8,md-flush=0,reserved=16,scanned=true", 8, false);
    let served = h.engine.access(&Request::read(high, 0, OBJ));
    assert_eq!(served.slow_addr, (20 << 48) | (3 * OBJ));
    h.step(&Step::Tick).unwrap();
    let spares: Vec<u64> = h.queued.iter().filter(|w| w.kind == WorkKind::Demote).map(|w| w.slow_addr).collect();
    assert_eq!(spares.len(), 5, "the scanned extents have no free home: spares");
    for (i, a) in spares.iter().enumerate() {
        assert_eq!(*a, (ObjectId::SPARE_VOLUME << 48) | (i as u64 * OBJ));
    }
    h.drain();
    h.settle().unwrap();
    // A relocated extent is read from the spare it was demoted to.
    let moved = (0..8).find(|&v| !h.engine.placement(ObjectId(v)).on_fast).expect("a demoted extent");
    let served = h.engine.access(&Request::read(ObjectId(moved), 0, OBJ));
    assert_eq!(served.slow_addr >> 48, ObjectId::SPARE_VOLUME);
    h.settle().unwrap();
}
