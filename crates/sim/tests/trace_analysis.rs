//! `trace stat`'s analysis against naive computations: reuse times and stack distances by
//! brute force over a random multi-volume block trace with misaligned, multi-block requests;
//! popularity and per-volume sums; and the bundled traces' accesses all accounted for.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;

use tierwise_sim::analysis::analyse;
use tierwise_sim::objects::ObjectMode;
use tierwise_sim::sim::NoProgress;
use tierwise_sim::trace::memory::memory_trace;
use tierwise_sim::trace::{IoOp, OpenOptions, TraceRecord, open_trace};

fn bucket_upper(v: u64) -> u64 {
    if v <= 1 { 1 } else { 1u64 << (64 - (v - 1).leading_zeros()) }
}

fn random_trace(seed: u64, n: usize) -> Vec<TraceRecord> {
    let mut s = seed | 1;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    (0..n)
        .map(|i| {
            let r = next();
            let volume = (r % 3) as u32;
            // Half the requests to a hot 64 KiB, the rest over 4 MiB; sector-aligned, not block-aligned.
            let span = if r & 8 == 0 { 64 << 10 } else { 4 << 20 };
            let offset = (next() % span) & !511;
            let len = 512 * (1 + next() % 24);
            let op = if next() % 4 == 0 { IoOp::Write } else { IoOp::Read };
            TraceRecord { time_ns: i as u64 * 1000, op, volume, offset, len, key: offset / 512 }
        })
        .collect()
}

#[test]
fn analysis_matches_brute_force_on_a_multi_volume_trace() {
    let records = Arc::new(random_trace(42, 3000));
    let mode = ObjectMode::parse("blocks:4KiB@0").unwrap();
    let a = analyse(|| Ok(memory_trace(Arc::clone(&records), "random", true)), mode, &mut NoProgress).unwrap();

    // The object accesses, as the mapper splits requests: 4 KiB blocks per volume.
    let mut accesses: Vec<(u32, u64)> = Vec::new();
    for r in records.iter() {
        for b in r.offset / 4096..=(r.offset + r.len - 1) / 4096 {
            accesses.push((r.volume, b));
        }
    }
    assert_eq!(a.accesses, accesses.len() as u64);
    let mut reuse: BTreeMap<u64, u64> = BTreeMap::new();
    let mut stack: BTreeMap<u64, u64> = BTreeMap::new();
    let mut last: HashMap<(u32, u64), usize> = HashMap::new();
    let mut counts: HashMap<(u32, u64), u64> = HashMap::new();
    for (i, x) in accesses.iter().enumerate() {
        if let Some(&j) = last.get(x) {
            *reuse.entry(bucket_upper((i - j) as u64)).or_default() += 1;
            // Distinct objects in (j, i], the object itself included.
            let distinct: std::collections::HashSet<_> = accesses[j + 1..=i].iter().collect();
            *stack.entry(bucket_upper(distinct.len() as u64)).or_default() += 1;
        }
        last.insert(*x, i);
        *counts.entry(*x).or_default() += 1;
    }
    assert_eq!(a.first_accesses, counts.len() as u64);
    assert_eq!(a.reuse_time, reuse.into_iter().collect::<Vec<_>>());
    assert_eq!(a.stack_distance, stack.into_iter().collect::<Vec<_>>());

    // Popularity: the most popular object's count, one-hit objects.
    let mut c: Vec<u64> = counts.values().copied().collect();
    c.sort_unstable_by(|x, y| y.cmp(x));
    assert_eq!(a.popularity.rank_frequency[0], (1, c[0]));
    assert_eq!(a.popularity.one_hit_objects, c.iter().filter(|&&x| x == 1).count() as u64);
    assert!(a.popularity.zipf_alpha.is_some());

    // Per volume: requests, bytes and objects add up; three volumes.
    assert_eq!(a.per_volume.len(), 3);
    assert_eq!(a.per_volume.iter().map(|v| v.requests).sum::<u64>(), 3000);
    assert_eq!(a.per_volume.iter().map(|v| v.objects).sum::<u64>(), counts.len() as u64);
    for v in &a.per_volume {
        let objects = counts.keys().filter(|k| k.0 == v.volume).count() as u64;
        assert_eq!(v.objects, objects, "volume {}", v.volume);
        assert_eq!(v.footprint_bytes, objects * 4096);
        let bytes: u64 = records.iter().filter(|r| r.volume == v.volume).map(|r| r.len).sum();
        assert_eq!(v.read_bytes + v.write_bytes, bytes);
    }
    // Op × size: every request once.
    assert_eq!(a.op_size_mix.iter().map(|m| m.reads + m.writes).sum::<u64>(), 3000);
}

#[test]
fn every_bundled_trace_accounts_for_every_access() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/traces");
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            continue;
        }
        let mode = ObjectMode::parse("blocks:4KiB").unwrap();
        let a = analyse(|| open_trace(&path, &OpenOptions::default()), mode, &mut NoProgress).unwrap();
        let reused = a.accesses - a.first_accesses;
        let name = path.display();
        assert_eq!(a.reuse_time.iter().map(|b| b.1).sum::<u64>(), reused, "{name}");
        assert_eq!(a.stack_distance.iter().map(|b| b.1).sum::<u64>(), reused, "{name}");
        assert_eq!(a.popularity.frequency_histogram.iter().map(|b| b.1).sum::<u64>(), a.first_accesses, "{name}");
        // A stack distance never exceeds the reuse time.
        let cdf = |h: &[(u64, u64)], x: u64| h.iter().filter(|b| b.0 <= x).map(|b| b.1).sum::<u64>();
        for k in 0..30 {
            assert!(cdf(&a.stack_distance, 1 << k) >= cdf(&a.reuse_time, 1 << k), "{name} at 2^{k}");
        }
        let shares: Vec<f64> = a.popularity.top_shares.iter().map(|s| s.1).collect();
        assert!(shares.windows(2).all(|w| w[0] <= w[1]) && shares.iter().all(|&s| s <= 1.0), "{name}: {shares:?}");
    }
}
