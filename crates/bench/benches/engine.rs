//! Micro-benchmarks of the engine's hot path: a cache hit and a miss with eviction, per
//! collector. Run with `cargo bench -p tierwise-bench`.

#![expect(clippy::unwrap_used, reason = "a failing setup should stop the test loudly")]

use criterion::{Criterion, criterion_group, criterion_main};
use std::hint::black_box;
use tierwise_core::collector::COLLECTORS;
use tierwise_core::{Engine, ManualClock, ObjectId, Outcome, Request, Setup, WorkKind, build_arch};

fn engine(collector: &str, objects: u64) -> Engine<ManualClock> {
    let setup = Setup { fast_capacity: objects * 4096, slow_capacity: 0, object_size: 4096 };
    Engine::new(build_arch(&format!("cache:mode=read-only,collector={collector}"), &setup).unwrap(), ManualClock::new())
}

fn settle(e: &mut Engine<ManualClock>) {
    let work: Vec<_> = e.drain_work().collect();
    for w in work {
        if w.kind == WorkKind::Copy {
            e.complete(w.id, Outcome::Done).unwrap();
        }
    }
}

fn bench(c: &mut Criterion) {
    for info in COLLECTORS {
        let mut e = engine(info.name, 10_000);
        for i in 0..10_000u64 {
            e.access(&Request::read(ObjectId(i), 0, 4096));
            settle(&mut e);
        }
        let mut i = 0u64;
        c.bench_function(&format!("hit/{}", info.name), |b| {
            b.iter(|| {
                i = (i + 7919) % 10_000;
                black_box(e.access(&Request::read(ObjectId(i), 0, 4096)))
            })
        });
        let mut j = 1_000_000u64;
        c.bench_function(&format!("miss+evict/{}", info.name), |b| {
            b.iter(|| {
                j += 1;
                let s = e.access(&Request::read(ObjectId(j), 0, 4096));
                settle(&mut e);
                black_box(s)
            })
        });
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
