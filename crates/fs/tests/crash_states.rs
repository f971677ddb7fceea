//! Crash consistency of the mount, by enumeration: bounded workloads (every operation alone,
//! the save patterns, and with `TIERWISE_CRASH_SCOPE=full` every pair) under each policy family
//! and setup, a crash after every call the daemon makes on the tiers (`kill -9`, and power cuts
//! that keep any prefix of each tier's calls since its last sync), each state remounted and
//! checked against POSIX guarantees. See `crash/mod.rs`; `scripts/crash-enumerate.sh` runs the
//! full enumeration.

#![allow(clippy::unwrap_used, reason = "a failing setup should stop the test loudly")]

mod common;
mod crash;

use crash::workload::{self, Setup};
use crash::{Case, run};

/// One policy of each family the mount runs.
const POLICIES: [&str; 4] = ["on-demand-caching", "dynamic-hot-dst:sieve=0", "file-write-back", "hycache"];

fn cases(full: bool) -> Vec<Case> {
    let mut out = Vec::new();
    let workloads = workload::workloads(full);
    for (w, ops) in workloads.iter().enumerate() {
        for (p, policy) in POLICIES.iter().enumerate() {
            for (s, &setup) in Setup::ALL.iter().enumerate() {
                // The bounded sample: each workload under every policy, in one setup chosen in
                // turn; the save patterns in every setup.
                let save = ops.len() > 2;
                if !full && !save && (w + p) % Setup::ALL.len() != s {
                    continue;
                }
                out.push(Case { policy, setup, passthrough: false, ops: ops.clone() });
            }
        }
    }
    out
}

/// The cases split four ways, one test each: each runs in well under the test runner's 120 s
/// deadline, and the runner runs them side by side.
const PARTS: usize = 4;

#[test]
fn every_crash_state_of_bounded_workloads_keeps_posix_guarantees_part_1_of_4() {
    enumerate(0);
}

#[test]
fn every_crash_state_of_bounded_workloads_keeps_posix_guarantees_part_2_of_4() {
    enumerate(1);
}

#[test]
fn every_crash_state_of_bounded_workloads_keeps_posix_guarantees_part_3_of_4() {
    enumerate(2);
}

#[test]
fn every_crash_state_of_bounded_workloads_keeps_posix_guarantees_part_4_of_4() {
    enumerate(3);
}

/// Every `PARTS`-th case from the `part`-th. The recorder observes the whole process, so
/// parts in one process (`cargo test`) take turns; the test runner gives each its own process.
fn enumerate(part: usize) {
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if !common::fuse_available() {
        return;
    }
    let full = std::env::var("TIERWISE_CRASH_SCOPE").is_ok_and(|v| v == "full");
    let only: Option<String> = std::env::var("TIERWISE_CRASH_ONLY").ok();
    // TIERWISE_CRASH_SHARD=i/n: every n-th case from the i-th (a long run split across machines).
    let (shard, shards) = std::env::var("TIERWISE_CRASH_SHARD")
        .ok()
        .and_then(|v| v.split_once('/').and_then(|(i, n)| Some((i.parse::<usize>().ok()?, n.parse::<usize>().ok()?))))
        .unwrap_or((0, 1));
    let cases: Vec<Case> = cases(full)
        .into_iter()
        .enumerate()
        .filter(|(i, _)| i % PARTS == part)
        .filter(|(i, _)| (i / PARTS) % shards.max(1) == shard)
        .map(|(_, c)| c)
        .filter(|c| only.as_ref().is_none_or(|o| format!("{c:?}").contains(o.as_str())))
        .collect();
    let started = std::time::Instant::now();
    let (mut states, mut points, mut violations) = (0usize, 0usize, Vec::new());
    for (i, case) in cases.iter().enumerate() {
        let f = run(case, full, 2);
        states += f.states;
        points += f.points;
        for v in &f.violations {
            eprintln!("VIOLATION {v}");
        }
        violations.extend(f.violations);
        if (i + 1) % 20 == 0 || i + 1 == cases.len() {
            eprintln!(
                "[{}/{}] {states} crash states from {points} calls, {} violations, {:.0} s",
                i + 1,
                cases.len(),
                violations.len(),
                started.elapsed().as_secs_f64()
            );
        }
    }
    eprintln!("mount: {} workloads, {states} crash states, {} violations", cases.len(), violations.len());
    assert!(
        violations.is_empty(),
        "{} crash states break a POSIX guarantee (first: {})",
        violations.len(),
        violations[0]
    );
    if only.is_none() && shards == 1 {
        assert!(states >= 1000 / PARTS, "only {states} crash states were tried");
    }
}
