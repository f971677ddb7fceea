//! Differential tests of every collector against plain reference models, and the registry.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::test_utils::{NaiveArc, NaiveClockCache, NaiveFifoCache, NaiveLruCache, NaiveS3Fifo};
use super::*;
use crate::collector::inverse_bitmap::increment;

#[derive(Clone, Debug)]
enum RankOp {
    Insert(u64, bool),
    Touch(u64, u32),
    SetTier(u64, bool),
    Remove(u64),
}

fn rank_ops() -> impl Strategy<Value = Vec<RankOp>> {
    let op = prop_oneof![
        (0u64..24, any::<bool>()).prop_map(|(i, f)| RankOp::Insert(i, f)),
        (0u64..24, 1u32..80).prop_map(|(i, p)| RankOp::Touch(i, p)),
        (0u64..24, 1u32..80).prop_map(|(i, p)| RankOp::Touch(i, p)),
        (0u64..24, any::<bool>()).prop_map(|(i, f)| RankOp::SetTier(i, f)),
        (0u64..24).prop_map(RankOp::Remove),
    ];
    proptest::collection::vec(op, 1..300)
}

/// What the reference keeps per object.
#[derive(Clone, Copy, Debug)]
struct RefObj {
    fast: bool,
    last_event: u64,
    last_touch: u64,
    entered_tier: u64,
    freq: u64,
    counter: u32,
    /// Recency stamp as the collectors keep it: the access sequence of the last touch, or the
    /// latest sequence seen when the object changed tier.
    stamp: u64,
}

/// Which ordering a collector promises.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Order {
    Lru,
    Fifo,
    Lfu,
    InverseBitmap,
}

fn expected(objs: &BTreeMap<u64, RefObj>, order: Order) -> (Option<u64>, Option<u64>) {
    let fast = objs.iter().filter(|(_, o)| o.fast);
    let slow = objs.iter().filter(|(_, o)| !o.fast);
    match order {
        Order::Lru => (
            fast.min_by_key(|(_, o)| o.last_event).map(|(i, _)| *i),
            slow.max_by_key(|(_, o)| o.last_event).map(|(i, _)| *i),
        ),
        Order::Fifo => (
            fast.min_by_key(|(_, o)| o.entered_tier).map(|(i, _)| *i),
            slow.max_by_key(|(_, o)| o.last_event).map(|(i, _)| *i),
        ),
        Order::Lfu => (
            fast.min_by_key(|(_, o)| (o.freq, o.last_event)).map(|(i, _)| *i),
            slow.max_by_key(|(_, o)| (o.freq, o.last_event)).map(|(i, _)| *i),
        ),
        Order::InverseBitmap => (
            fast.min_by_key(|(_, o)| (o.counter, o.last_touch)).map(|(i, _)| *i),
            slow.max_by_key(|(_, o)| (o.counter, o.last_touch)).map(|(i, _)| *i),
        ),
    }
}

fn tier(fast: bool) -> Tier {
    if fast { Tier::Fast } else { Tier::Slow }
}

/// Runs `ops` through `c` and the reference, checking both ranking queries after every step.
fn check_rankings(mut c: AnyCollector, order: Order, ops: &[RankOp]) -> Result<(), TestCaseError> {
    let mut objs: BTreeMap<u64, RefObj> = BTreeMap::new();
    let mut latest = 0;
    for (n, op) in ops.iter().enumerate() {
        let ev = n as u64 + 1;
        match *op {
            RankOp::Insert(i, f) => {
                if objs.contains_key(&i) {
                    continue;
                }
                c.insert(Slot(i as u32), ObjectId(i), tier(f), 1, &Touch::at(ev));
                latest = ev;
                objs.insert(
                    i,
                    RefObj {
                        fast: f,
                        last_event: ev,
                        last_touch: ev,
                        entered_tier: ev,
                        freq: 1,
                        counter: increment(1),
                        stamp: ev,
                    },
                );
            }
            RankOp::Touch(i, pages) => {
                let Some(o) = objs.get_mut(&i) else { continue };
                c.touch(Slot(i as u32), &Touch { pages, ..Touch::at(ev) });
                latest = ev;
                o.last_event = ev;
                o.last_touch = ev;
                o.stamp = ev;
                o.freq += 1;
                o.counter = o.counter.saturating_add(increment(pages));
            }
            RankOp::SetTier(i, f) => {
                let Some(o) = objs.get_mut(&i) else { continue };
                c.set_tier(Slot(i as u32), tier(f));
                if o.fast != f {
                    o.fast = f;
                    o.last_event = ev;
                    o.entered_tier = ev;
                    o.stamp = latest;
                }
            }
            RankOp::Remove(i) => {
                if objs.remove(&i).is_none() {
                    continue;
                }
                c.remove(Slot(i as u32), Removal::Deleted);
            }
        }
        let (cold, hot) = expected(&objs, order);
        prop_assert_eq!(c.coldest_fast(Nanos(ev)).map(|s| s.0 as u64), cold, "coldest after op {} {:?}", n, op);
        prop_assert_eq!(c.hottest_slow().map(|s| s.0 as u64), hot, "hottest after op {} {:?}", n, op);
        prop_assert_eq!(c.len(Tier::Fast), objs.values().filter(|o| o.fast).count());
        prop_assert_eq!(c.len(Tier::Slow), objs.values().filter(|o| !o.fast).count());
        if let (Some(a), Some(b)) = (hot, cold) {
            let (oa, ob) = (objs[&a], objs[&b]);
            let ref_hotter = match order {
                Order::Lru | Order::Fifo => oa.stamp > ob.stamp,
                Order::Lfu => (oa.freq, oa.stamp) > (ob.freq, ob.stamp),
                Order::InverseBitmap => (oa.counter, oa.last_touch) > (ob.counter, ob.last_touch),
            };
            prop_assert_eq!(c.hotter(Slot(a as u32), Slot(b as u32)), ref_hotter, "hotter({}, {})", a, b);
        }
    }
    Ok(())
}

fn build(name: &str) -> AnyCollector {
    // The offline collector gets an empty future: every object is never accessed again.
    belady::provide_future(std::sync::Arc::new(belady::Future::default()), || {
        build_collector(name, &mut Params::new(name), &CollectorContext { fast_capacity: 1 << 20 }).unwrap()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn lru_rankings_match_reference(ops in rank_ops()) {
        check_rankings(build("lru"), Order::Lru, &ops)?;
    }

    #[test]
    fn fifo_rankings_match_reference(ops in rank_ops()) {
        check_rankings(build("fifo"), Order::Fifo, &ops)?;
    }

    #[test]
    fn lfu_rankings_match_reference(ops in rank_ops()) {
        check_rankings(build("lfu"), Order::Lfu, &ops)?;
    }

    #[test]
    fn inverse_bitmap_rankings_match_reference(ops in rank_ops()) {
        check_rankings(build("inverse-bitmap"), Order::InverseBitmap, &ops)?;
    }

    /// Every collector, driven as a unit-size cache of `cap` objects by the architectures'
    /// contract (admission, victims, overflow victims), stays consistent and within capacity
    /// under random traces (the queries always name a tracked object of the right tier).
    #[test]
    fn every_collector_is_a_consistent_cache(trace in proptest::collection::vec(0u64..40, 1..400), cap in 1usize..16) {
        for info in COLLECTORS {
            // The offline collector knows this trace's future (access n has sequence n + 1).
            let ids: Vec<ObjectId> = trace.iter().map(|&x| ObjectId(x)).collect();
            let c = belady::provide_future(std::sync::Arc::new(belady::Future::new(&ids)), || {
                build_collector(info.name, &mut Params::new(info.name), &CollectorContext { fast_capacity: cap as u64 })
            })
            .unwrap();
            if let Err(e) = drive_as_cache(c, cap, &trace) {
                return Err(TestCaseError::fail(format!("{}: {e}", info.name)));
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// Every collector keeps both tiers straight under random inserts, touches, tier moves and
    /// removals, as tiering architectures drive them: the victim is a tracked fast-tier object,
    /// the promotion candidate a tracked slow-tier one, and the counts are right.
    #[test]
    fn every_collector_keeps_both_tiers(ops in rank_ops()) {
        for info in COLLECTORS {
            let mut c = build(info.name);
            let mut objs: BTreeMap<u64, (bool, u64)> = BTreeMap::new();
            for (n, op) in ops.iter().enumerate() {
                let ev = n as u64 + 1;
                match *op {
                    RankOp::Insert(i, f) if !objs.contains_key(&i) => {
                        c.insert(Slot(i as u32), ObjectId(i), tier(f), 1, &Touch::at(ev));
                        objs.insert(i, (f, ev));
                    }
                    RankOp::Touch(i, pages) if objs.contains_key(&i) => {
                        c.touch(Slot(i as u32), &Touch { pages, ..Touch::at(ev) });
                        objs.get_mut(&i).unwrap().1 = ev;
                    }
                    RankOp::SetTier(i, f) if objs.contains_key(&i) => {
                        c.set_tier(Slot(i as u32), tier(f));
                        let o = objs.get_mut(&i).unwrap();
                        if o.0 != f {
                            *o = (f, ev);
                        }
                    }
                    RankOp::Remove(i) if objs.remove(&i).is_some() => c.remove(Slot(i as u32), Removal::Deleted),
                    _ => continue,
                }
                let name = info.name;
                if let Some(v) = c.coldest_fast(Nanos(ev)) {
                    prop_assert!(objs.get(&(v.0 as u64)).is_some_and(|o| o.0), "{name}: victim {v:?} after {op:?}");
                } else {
                    prop_assert!(!objs.values().any(|o| o.0), "{name}: no victim with fast objects after {op:?}");
                }
                let hot = c.hottest_slow();
                prop_assert_eq!(hot.is_some(), objs.values().any(|o| !o.0), "{}: hottest after {:?}", name, op);
                if let Some(h) = hot {
                    prop_assert!(objs.get(&(h.0 as u64)).is_some_and(|o| !o.0), "{name}: hottest {h:?} after {op:?}");
                }
                prop_assert_eq!(c.len(Tier::Fast), objs.values().filter(|o| o.0).count(), "{}", name);
                prop_assert_eq!(c.len(Tier::Slow), objs.values().filter(|o| !o.0).count(), "{}", name);
            }
        }
    }
}

/// Drives a collector as a unit-size cache with `cap` objects, as the cache architecture
/// does: overflow victims before each access, admission on a miss, victims until the object
/// fits (none: the newcomer itself is the victim and is not inserted), overflow victims for the
/// newcomer. Returns the hit sequence, or what went wrong.
fn drive_as_cache(mut c: AnyCollector, cap: usize, trace: &[u64]) -> Result<Vec<bool>, String> {
    let mut cached = std::collections::BTreeSet::new();
    let mut hits = Vec::with_capacity(trace.len());
    let evict = |c: &mut AnyCollector, cached: &mut std::collections::BTreeSet<u64>, v: Slot| {
        if !cached.remove(&(v.0 as u64)) {
            return Err(format!("victim {v:?} is not cached"));
        }
        c.remove(v, Removal::Evicted);
        Ok(())
    };
    for (n, &x) in trace.iter().enumerate() {
        let t = Touch::at(n as u64 + 1);
        while let Some(v) = c.overflow_victim(None) {
            evict(&mut c, &mut cached, v)?;
        }
        if cached.contains(&x) {
            c.touch(Slot(x as u32), &t);
            hits.push(true);
            continue;
        }
        hits.push(false);
        c.on_miss(ObjectId(x), 1);
        if !c.admits_new(ObjectId(x), 1) {
            continue;
        }
        let mut fits = true;
        while cached.len() >= cap {
            match c.coldest_fast(t.now) {
                Some(v) => evict(&mut c, &mut cached, v)?,
                None if cached.is_empty() => return Err("no victim in a full cache".into()),
                None => {
                    fits = false;
                    break;
                }
            }
        }
        if !fits {
            continue;
        }
        while let Some(v) = c.overflow_victim(Some((ObjectId(x), 1))) {
            evict(&mut c, &mut cached, v)?;
        }
        c.insert(Slot(x as u32), ObjectId(x), Tier::Fast, 1, &t);
        cached.insert(x);
        if c.len(Tier::Fast) != cached.len() {
            return Err(format!("{} fast-tier objects tracked, {} cached", c.len(Tier::Fast), cached.len()));
        }
    }
    Ok(hits)
}

/// [`drive_as_cache`] for collectors that must not fail.
fn run_as_cache(c: AnyCollector, cap: usize, trace: &[u64]) -> Vec<bool> {
    drive_as_cache(c, cap, trace).unwrap()
}

fn skewed_trace(seed: u64, len: usize, universe: u64) -> Vec<u64> {
    // A small deterministic generator with locality: half the requests go to a hot tenth.
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            if s.is_multiple_of(2) { (s >> 8) % (universe / 10).max(1) } else { (s >> 8) % universe }
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn arc_matches_the_paper(seed in any::<u64>(), cap in 1usize..24, universe in 2u64..80) {
        let trace = skewed_trace(seed, 2000, universe);
        let ours = run_as_cache(
            AnyCollector::Arc(arc::Arc::new(cap as u64)),
            cap,
            &trace,
        );
        let mut reference = NaiveArc::new(cap);
        let theirs: Vec<bool> = trace.iter().map(|&x| reference.access(x)).collect();
        prop_assert_eq!(ours, theirs);
    }

    #[test]
    fn clock_matches_reference(seed in any::<u64>(), cap in 1usize..24, universe in 2u64..80) {
        let trace = skewed_trace(seed, 2000, universe);
        let ours = run_as_cache(build("clock"), cap, &trace);
        let mut reference = NaiveClockCache::new(cap);
        let theirs: Vec<bool> = trace.iter().map(|&x| reference.access(x)).collect();
        prop_assert_eq!(ours, theirs);
    }

    #[test]
    fn lru_and_fifo_match_plain_caches(seed in any::<u64>(), cap in 1usize..24, universe in 2u64..80) {
        let trace = skewed_trace(seed, 2000, universe);
        let mut lru = NaiveLruCache::new(cap as u64);
        let mut fifo = NaiveFifoCache::new(cap as u64);
        prop_assert_eq!(run_as_cache(build("lru"), cap, &trace), trace.iter().map(|&x| lru.access(x, 1)).collect::<Vec<_>>());
        prop_assert_eq!(run_as_cache(build("fifo"), cap, &trace), trace.iter().map(|&x| fifo.access(x, 1)).collect::<Vec<_>>());
    }

    /// S3-FIFO gives the hits of a plain model of the paper's algorithm (with libCacheSim's
    /// rules), at sizes whose small queue holds at least two objects.
    #[test]
    fn s3fifo_matches_reference(seed in any::<u64>(), cap in 20usize..60, universe in 2u64..200) {
        let trace = skewed_trace(seed, 3000, universe);
        let ours = run_as_cache(AnyCollector::S3Fifo(s3fifo::S3Fifo::new(cap as u64, 0.1, 0.9, 2)), cap, &trace);
        let mut reference = NaiveS3Fifo::new(cap);
        let theirs: Vec<bool> = trace.iter().map(|&x| reference.access(x)).collect();
        prop_assert_eq!(ours, theirs);
    }

    /// WSClock with a window of zero time behaves exactly like CLOCK (every unreferenced object
    /// is old enough).
    #[test]
    fn wsclock_with_tiny_window_is_clock(seed in any::<u64>(), cap in 1usize..24, universe in 2u64..80) {
        let trace = skewed_trace(seed, 1000, universe);
        let ws = AnyCollector::WsClock(wsclock::WsClock::new(Nanos(0)));
        prop_assert_eq!(run_as_cache(ws, cap, &trace), run_as_cache(build("clock"), cap, &trace));
    }
}

#[test]
fn wsclock_spares_the_working_set() {
    // Three objects, window 10: the two touched recently are spared even without reference
    // bits; the idle one is the victim.
    let mut c = wsclock::WsClock::new(Nanos(10));
    for (i, t) in [(0u64, 0u64), (1, 95), (2, 96)] {
        c.insert(Slot(i as u32), ObjectId(i), Tier::Fast, 1, &Touch { now: Nanos(t), ..Touch::at(t) });
    }
    assert_eq!(c.coldest_fast(Nanos(100)), Some(Slot(0)));
    c.remove(Slot(0), Removal::Evicted);
    // Nothing idle for longer than the window: the least recently used one goes.
    assert_eq!(c.coldest_fast(Nanos(100)), Some(Slot(1)));
}

#[test]
fn registry_lists_every_collector_once() {
    let names: Vec<_> = COLLECTORS.iter().map(|c| c.name).collect();
    for (i, name) in names.iter().enumerate() {
        assert!(!names[..i].contains(name), "{name} registered twice");
        let info = collector_info(name).unwrap();
        for alias in info.aliases {
            assert_eq!(collector_info(alias).unwrap().name, *name, "alias {alias}");
            assert!(!names.contains(alias), "alias {alias} is also a name");
        }
    }
    assert_eq!(collector_info("s3fifo").unwrap().name, "s3-fifo");
    let e = collector_info("lruu").err().unwrap().to_string();
    assert!(e.contains("lru") && e.contains("inverse-bitmap"), "{e}");
    let mut p = Params::new("wsclock");
    p.insert("window", "0s");
    assert!(build_collector("wsclock", &mut p, &CollectorContext { fast_capacity: 1 }).is_err());
}

#[test]
fn lfu_breaks_ties_by_recency() {
    let mut c = build("lfu");
    for i in 0..3u64 {
        c.insert(Slot(i as u32), ObjectId(i), Tier::Fast, 1, &Touch::at(i + 1));
    }
    c.touch(Slot(0), &Touch::at(10));
    // 1 and 2 have frequency 1; 1 is older.
    assert_eq!(c.coldest_fast(Nanos(0)), Some(Slot(1)));
}

#[test]
fn million_objects_stay_cheap() {
    // >= 1M objects with O(1)/O(log n) queries: inserting and querying a million objects per
    // collector must not blow up (this is a scale check, not a timing test).
    for info in COLLECTORS {
        let mut c = build(info.name);
        for i in 0..1_000_000u64 {
            c.insert(
                Slot(i as u32),
                ObjectId(i),
                if i % 2 == 0 { Tier::Fast } else { Tier::Slow },
                1,
                &Touch::at(i + 1),
            );
        }
        for i in 0..1000u64 {
            let v = c.coldest_fast(Nanos(2_000_000 + i)).unwrap();
            c.remove(v, Removal::Evicted);
            assert!(c.hottest_slow().is_some());
        }
        assert_eq!(c.len(Tier::Fast), 499_000, "{}", info.name);
        let per_object = c.memory_bytes() as f64 / 1_000_000.0;
        // ARC keeps the id and size per object for its ghosts; GDSF, LRU-K and Belady keep a
        // search tree of priorities beside the nodes, LRU-K also K access times per object
        // (docs/PERFORMANCE.md has the figures).
        let limit = match info.name {
            "arc" | "gdsf" | "lru-k" | "belady" => 80.0,
            _ => 40.0,
        };
        assert!(per_object < limit, "{} uses {per_object:.1} bytes per object", info.name);
    }
}

/// The cold walk visits the fast tier from the victim upwards: LRU in recency order, ARC its
/// frequent list (T2) and then its recent list (T1); collectors without list order say so.
#[test]
fn cold_walks_follow_eviction_order() {
    let walk = |c: &AnyCollector, list: usize| {
        let mut out = Vec::new();
        let mut cur = c.walk_cold(list, None);
        while let Some(s) = cur {
            out.push(s.0);
            cur = c.walk_cold(list, Some(s));
        }
        out
    };
    for name in ["lru", "arc"] {
        let mut c = build(name);
        for i in 0..4u32 {
            c.insert(Slot(i), ObjectId(u64::from(i)), Tier::Fast, 1, &Touch::at(u64::from(i)));
        }
        c.touch(Slot(1), &Touch::at(10));
        c.insert(Slot(9), ObjectId(9), Tier::Slow, 1, &Touch::at(11));
        if name == "lru" {
            assert_eq!(c.cold_lists(), 1);
            assert_eq!(walk(&c, 0), vec![0, 2, 3, 1]);
        } else {
            assert_eq!(c.cold_lists(), 2);
            assert_eq!(walk(&c, 0), vec![1], "T2: seen twice");
            assert_eq!(walk(&c, 1), vec![0, 2, 3], "T1");
        }
    }
    // S3-FIFO: the main queue (entered by objects hit twice in the small one), then the small.
    let mut c = build("s3fifo");
    for i in 0..4u32 {
        c.insert(Slot(i), ObjectId(u64::from(i)), Tier::Fast, 1, &Touch::at(u64::from(i)));
    }
    assert_eq!(c.cold_lists(), 2);
    assert_eq!(walk(&c, 1), vec![0, 1, 2, 3], "small queue, oldest first");
    assert_eq!(walk(&c, 0), Vec::<u32>::new());
    assert_eq!(build("lfu").cold_lists(), 0);
    assert_eq!(build("lfu").walk_cold(0, None), None);
}

/// Outside a simulator the offline collector is refused with the reason, and inside one it
/// evicts the object next accessed furthest ahead (never again first).
#[test]
fn belady_needs_the_future_and_evicts_the_furthest() {
    let setup = crate::Setup { fast_capacity: 1 << 20, slow_capacity: 0, object_size: 4096 };
    let e = crate::build_arch("cache:mode=read-only,collector=belady", &setup).err().unwrap().to_string();
    assert!(e.contains("offline") && e.contains("mount"), "{e}");
    // Accesses 1..=6 name objects 1 2 3 1 2 1: after the third, 3 is never used again, 2 is
    // next used at 5, 1 at 4.
    let ids: Vec<ObjectId> = [1u64, 2, 3, 1, 2, 1].into_iter().map(ObjectId).collect();
    let future = std::sync::Arc::new(belady::Future::new(&ids));
    assert_eq!(future.next_after(ObjectId(1), 1), 4);
    assert_eq!(future.next_after(ObjectId(1), 6), belady::NEVER);
    let mut c = belady::provide_future(future, || {
        build_collector("belady", &mut Params::new("belady"), &CollectorContext { fast_capacity: 3 })
    })
    .unwrap();
    for (i, id) in [1u64, 2, 3].into_iter().enumerate() {
        c.insert(Slot(id as u32), ObjectId(id), Tier::Fast, 1, &Touch::at(i as u64 + 1));
    }
    assert_eq!(c.coldest_fast(Nanos(3)), Some(Slot(3)));
    c.remove(Slot(3), Removal::Evicted);
    assert_eq!(c.coldest_fast(Nanos(3)), Some(Slot(2)));
    c.touch(Slot(1), &Touch::at(4));
    // Object 1's next access is now 6, after object 2's at 5.
    assert_eq!(c.coldest_fast(Nanos(4)), Some(Slot(1)));
}
