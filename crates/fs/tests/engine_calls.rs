//! The mount and the file simulator, fed the same operations, tell the engine the same things:
//! the same accesses, in the same order, with the same byte ranges. This is what makes the
//! simulator's prediction about the mount's decisions trustworthy. Operations are applied the
//! way the simulator models them: a session (a run of operations on one path) opens the file
//! once; I/O goes straight to the daemon (`direct_io`, no RAM cache in the simulator).

#![expect(clippy::unwrap_used, reason = "a failing setup should stop the test loudly")]

mod common;

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::Path;

use common::{fuse_available, mount_recording};
use tierwise_core::{Call, Op};
use tierwise_fs::MountConfig;
use tierwise_sim::filesim::{FileSim, FileSimConfig};
use tierwise_sim::filetrace::generate::FileWorkload;
use tierwise_sim::filetrace::{FileOp, FileOpKind};
use tierwise_sim::sim::Timing;

/// Applies `ops` under `root` with one open file per session.
fn apply(root: &Path, ops: &[FileOp]) {
    let mut session: Option<(String, File)> = None;
    // Page-aligned, so the kernel passes each I/O to the daemon whole (an unaligned buffer
    // spans one more page than the request needs, and FUSE splits at its page limit).
    let mut backing = vec![0x5au8; (4 << 20) + 4096];
    let skew = backing.as_ptr().align_offset(4096);
    let buf = &mut backing[skew..skew + (4 << 20)];
    for op in ops {
        let p = root.join(op.path.trim_start_matches('/'));
        // Any operation on another path ends the session (the simulator's model of open/close).
        let same = session.as_ref().is_some_and(|(s, _)| *s == op.path);
        if !same {
            session = None;
        }
        match op.kind {
            FileOpKind::Mkdir => {
                let _ = fs::create_dir(&p);
            }
            FileOpKind::Create => {
                session = Some((
                    op.path.clone(),
                    File::options().read(true).write(true).create(true).truncate(true).open(&p).unwrap(),
                ));
            }
            FileOpKind::Read | FileOpKind::Write | FileOpKind::Append | FileOpKind::Truncate => {
                if !same {
                    let f = OpenOptions::new().read(true).write(true).open(&p).unwrap();
                    session = Some((op.path.clone(), f));
                }
                let f = &session.as_ref().unwrap().1;
                match op.kind {
                    FileOpKind::Read => {
                        let _ = f.read_at(&mut buf[..op.length as usize], op.offset).unwrap();
                    }
                    FileOpKind::Write => f.write_all_at(&buf[..op.length as usize], op.offset).unwrap(),
                    FileOpKind::Append => {
                        let end = f.metadata().unwrap().len();
                        f.write_all_at(&buf[..op.length as usize], end).unwrap();
                    }
                    _ => f.set_len(op.length).unwrap(),
                }
            }
            FileOpKind::Delete => {
                session = None;
                fs::remove_file(&p).unwrap();
            }
            FileOpKind::Rmdir => fs::remove_dir(&p).unwrap(),
            FileOpKind::Rename => {
                session = None;
                fs::rename(&p, root.join(op.path2.trim_start_matches('/'))).unwrap();
            }
            FileOpKind::Stat => {
                let _ = fs::metadata(&p).unwrap();
            }
        }
    }
}

/// The calls with objects renamed by first appearance (inode numbers and the simulator's ids
/// differ), as lines for a readable diff.
fn canonical(calls: &[Call]) -> Vec<String> {
    let mut ids: HashMap<u64, usize> = HashMap::new();
    calls
        .iter()
        .map(|c| {
            let n = ids.len();
            let id = *ids.entry(c.obj.0).or_insert(n);
            match c.op {
                Op::Read | Op::Write => format!("{:?} #{id} {}+{}", c.op, c.offset, c.len),
                Op::Truncate => format!("Truncate #{id} to {}", c.offset),
                other => format!("{other:?} #{id}"),
            }
        })
        .collect()
}

fn first_difference(a: &[String], b: &[String]) -> Option<String> {
    let i = a.iter().zip(b).position(|(x, y)| x != y).unwrap_or(a.len().min(b.len()));
    if i == a.len() && i == b.len() {
        return None;
    }
    let show = |v: &[String]| v[i.saturating_sub(3)..(i + 3).min(v.len())].join("\n    ");
    Some(format!(
        "at call {i} of {} (mount) / {} (simulator):\n  mount:\n    {}\n  simulator:\n    {}",
        a.len(),
        b.len(),
        show(a),
        show(b)
    ))
}

fn check(workload: &str, scale: f64, policy: &str, quota: u64) {
    let ops = FileWorkload::by_name(workload, scale).unwrap().collect(7);
    let t = tempfile::tempdir().unwrap();
    let (ssd, hdd, mnt) = (t.path().join("ssd"), t.path().join("hdd"), t.path().join("mnt"));
    for d in [&ssd, &hdd, &mnt] {
        fs::create_dir(d).unwrap();
    }
    // Regular FUSE I/O, as the file simulator models it: every read and write told.
    let cfg = MountConfig { direct_io: true, passthrough: false, ..MountConfig::new(policy, quota) };
    let (mut m, recorder) = mount_recording(&ssd, &hdd, &mnt, &cfg);
    apply(&mnt, &ops);
    let mount_calls = canonical(&recorder.calls());
    m.unmount();

    let sim_cfg =
        FileSimConfig { ram_bytes: 0, dirs: false, timing: Timing::None, ..FileSimConfig::new(policy, quota) };
    let mut sim = FileSim::new(&sim_cfg, workload).unwrap();
    sim.record_calls();
    for op in &ops {
        sim.op(op).unwrap();
    }
    let sim_calls = canonical(sim.engine().calls());
    if let Some(d) = first_difference(&mount_calls, &sim_calls) {
        panic!("{workload} under {policy}: the mount and the simulator differ {d}");
    }
    assert!(mount_calls.len() > 100, "{workload}: {} calls", mount_calls.len());
}

#[test]
fn postmark_under_dynamic_hot_dst() {
    if fuse_available() {
        check("postmark", 0.002, "dynamic-hot-dst", 8 << 20);
    }
}

#[test]
fn every_other_workload_including_a_policy_per_volume() {
    if fuse_available() {
        check("mixed", 0.002, "type-aware:volumes=/web=on-demand-caching;/files=dynamic-hot-dst", 1 << 20);
        for workload in ["oltp", "randomread", "webserver-zipf"] {
            check(workload, 0.002, "file-write-back", 1 << 20);
        }
    }
}

#[test]
fn every_policy_on_three_workloads_with_a_small_ssd() {
    if !fuse_available() {
        return;
    }
    for (workload, scale) in [("postmark", 0.002), ("fileserver", 0.003), ("webserver", 0.002)] {
        for policy in ["dynamic-cold-dst", "on-demand-caching", "file-write-back", "hycache"] {
            check(workload, scale, policy, 1 << 20);
        }
    }
}
