//! Crash consistency by enumeration (the method of CrashMonkey and ACE, OSDI'18): run a bounded
//! workload on a real mount while recording the tiers after every call the daemon makes on
//! them, build every state a crash at each of those points leaves (`kill -9`, and power cuts
//! that keep any prefix of each tier file system's calls since its last sync), mount each one,
//! and check what users see against a model of POSIX guarantees ([`oracle`]).

#![allow(dead_code, reason = "the enumeration test and the full run use different parts")]

pub mod oracle;
pub mod recorder;
pub mod tree;
pub mod workload;

use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use tierwise_fs::{HybridFs, MountConfig, Tiers, mount_options};

use oracle::History;
use recorder::{CrashState, Recorder};
use tree::View;
use workload::{Op, Setup};

/// One configuration under test.
#[derive(Clone, Debug)]
pub struct Case {
    pub policy: &'static str,
    pub setup: Setup,
    pub passthrough: bool,
    pub ops: Vec<Op>,
}

/// What checking a case found.
#[derive(Debug, Default)]
pub struct Found {
    pub points: usize,
    pub states: usize,
    pub violations: Vec<String>,
}

/// An SSD quota that holds some of the setup's files and not all.
const QUOTA: u64 = 40_000;

fn config(case: &Case, move_rate: u64) -> MountConfig {
    MountConfig { debug_events: true, passthrough: case.passthrough, move_rate, ..MountConfig::new(case.policy, QUOTA) }
}

/// Waits until the mount has no work queued or in flight.
fn settle(mnt: &Path) {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut quiet = 0;
    while quiet < 3 {
        let s = super::common::stats(mnt);
        quiet = if s.queue_depth == 0 && s.moving.is_none() { quiet + 1 } else { 0 };
        assert!(Instant::now() < deadline, "the mount did not settle");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Mounts `ssd` + `hdd` on `mnt` (errors returned: a recovery that fails is a finding).
fn try_mount(ssd: &Path, hdd: &Path, mnt: &Path, cfg: &MountConfig) -> Result<super::common::Mounted, String> {
    let tiers = Tiers::open(ssd, hdd, mnt).map_err(|e| e.to_string())?;
    let cfg = MountConfig { mountpoint: Some(mnt.to_path_buf()), ..cfg.clone() };
    let fs = HybridFs::new(tiers, &cfg).map_err(|e| format!("the remount failed: {e}"))?;
    let mut fcfg = fuser::Config::default();
    fcfg.mount_options = mount_options("tierwise");
    fcfg.n_threads = Some(2);
    let session = tierwise_fs::session::mount_session(fs, mnt, &fcfg)
        .and_then(|s| s.spawn())
        .map_err(|e| format!("mounting: {e}"))?;
    Ok(super::common::Mounted::from_session(session, mnt))
}

/// Runs `case` once, recording; returns the points and the model.
fn record(case: &Case) -> (Vec<recorder::Point>, History, Vec<String>) {
    let dirs: [tempfile::TempDir; 3] = std::array::from_fn(|_| tempfile::tempdir().expect("tempdir"));
    let (ssd, hdd) = (dirs[0].path().join("ssd"), dirs[0].path().join("hdd"));
    fs::create_dir(&ssd).expect("ssd");
    fs::create_dir(&hdd).expect("hdd");
    let (mnt, reference) = (dirs[1].path(), dirs[2].path());
    let rate = if case.setup == Setup::Moving { 1_000_000 } else { 0 };
    let mut m = try_mount(&ssd, &hdd, mnt, &config(case, rate)).expect("the first mount");
    workload::populate(mnt);
    workload::populate(reference);
    if case.setup == Setup::Read {
        for f in ["d0/A", "d1/C"] {
            let _ = fs::read(mnt.join(f));
        }
    }
    settle(mnt);
    let rec = Recorder::start(&ssd, &hdd);
    if case.setup == Setup::Moving {
        let _ = fs::read(mnt.join("d0/A"));
    }
    let mut problems = Vec::new();
    let mut states = vec![View::read(reference).expect("the reference")];
    for (i, &op) in case.ops.iter().enumerate() {
        rec.begin(i);
        let got = workload::apply(mnt, op, i as u64);
        rec.end(i);
        let want = workload::apply(reference, op, i as u64);
        if got != want {
            problems.push(format!("op {i} {op:?}: the mount answered {got}, a directory {want}"));
        }
        states.push(View::read(reference).expect("the reference"));
    }
    settle(mnt);
    m.unmount();
    let points = rec.stop();
    (points, History { ops: case.ops.clone(), states }, problems)
}

/// Mounts one crash state and checks what it shows.
fn check(state: &CrashState, points: &[recorder::Point], hist: &History, case: &Case) -> Result<(), String> {
    let dirs: [tempfile::TempDir; 2] = std::array::from_fn(|_| tempfile::tempdir().expect("tempdir"));
    let (ssd, hdd) = (dirs[0].path().join("ssd"), dirs[0].path().join("hdd"));
    fs::create_dir(&ssd).expect("ssd");
    fs::create_dir(&hdd).expect("hdd");
    let mut ids = state.ssd.restore(&ssd);
    ids.extend(state.hdd.restore(&hdd));
    // A crash keeps inode numbers; the restore made new ones: the journal learns them.
    if let Ok((store, _)) = tierwise_fs::state::StateStore::open(&ssd.join(tierwise_fs::DEFAULT_STATE_DIR)) {
        store.remap_ids(&|dev, ino| ids.get(&(dev, ino)).copied()).map_err(|e| e.to_string())?;
    }
    let mnt = dirs[1].path();
    let mut m = try_mount(&ssd, &hdd, mnt, &config(case, 0))?;
    let view = View::read(mnt);
    m.unmount();
    let view = view?;
    // Two copies that differ must be a dirty file's (the SSD copy is the file): otherwise a
    // later eviction would serve the stale one.
    let dirty: Vec<std::path::PathBuf> =
        tierwise_fs::state::StateStore::open(&ssd.join(tierwise_fs::DEFAULT_STATE_DIR))
            .map(|(s, _)| s.dirty().unwrap_or_default())
            .unwrap_or_default();
    for (p, c) in view.contents() {
        if let (Ok(a), Ok(b)) = (fs::read(ssd.join(p)), fs::read(hdd.join(p)))
            && a != b
            && (!dirty.contains(p) || a != *c)
        {
            return Err(format!("{}: the two copies differ and the SSD one is not recorded as the file", p.display()));
        }
    }
    let p = &points[state.at];
    let r = if state.kill {
        oracle::check_kill(&view, hist, p.done, p.in_flight)
    } else {
        oracle::check_power(&view, hist, p.done, p.in_flight)
    };
    r.map_err(|e| format!("{e}{}", describe(state)))
}

/// The tiers of a crash state in a line each (with `TIERWISE_CRASH_VERBOSE`), for a finding.
fn describe(state: &CrashState) -> String {
    if std::env::var_os("TIERWISE_CRASH_VERBOSE").is_none() {
        return String::new();
    }
    let mut out = String::new();
    for (name, t) in [("ssd", &state.ssd), ("hdd", &state.hdd)] {
        let files: Vec<String> =
            t.0.iter()
                .filter_map(|(p, e)| match e {
                    tree::Entry::File { content, mtime, .. } => {
                        Some(format!("{}={}B@{}.{:09}", p.display(), content.len(), mtime.0, mtime.1))
                    }
                    _ => None,
                })
                .collect();
        out.push_str(&format!("\n    {name}: {}", files.join(" ")));
    }
    out
}

/// Records `case`, then checks each of its crash states (`all`: every prefix pair of a power
/// cut, not only the extremes), on `threads` threads.
pub fn run(case: &Case, all: bool, threads: usize) -> Found {
    let (points, hist, mut violations) = record(case);
    let states = recorder::crash_states(&points, all);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let found = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..threads.max(1) {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(st) = states.get(i) else { break };
                    if let Err(e) = check(st, &points, &hist, case) {
                        let how = if st.kill { "kill -9" } else { "power cut" };
                        let call = points[st.at].call.map_or("start".to_string(), |(c, f)| format!("{c:?} on {f:?}"));
                        found.lock().expect("found").push(format!(
                            "{} {:?}{} {:?}: {how} after call {} ({call}): {e}",
                            case.policy,
                            case.setup,
                            if case.passthrough { " passthrough" } else { "" },
                            case.ops,
                            st.at
                        ));
                    }
                }
            });
        }
    });
    let found = found.into_inner().expect("found");
    if !found.is_empty() && std::env::var_os("TIERWISE_CRASH_VERBOSE").is_some() {
        // The calls of the recording, to read a finding against.
        for (k, p) in points.iter().enumerate() {
            eprintln!(
                "  call {k}: {:?} (ops done {}{})",
                p.call,
                p.done,
                if p.in_flight { ", one in flight" } else { "" }
            );
        }
    }
    violations.extend(found);
    Found { points: points.len(), states: states.len(), violations }
}
