//! `tierwise replay --fs`: a file-level trace (the generators' output) replayed against a real
//! directory — a tierwise mount, a plain directory, any file system — by N workers, measuring
//! operations per second and latency percentiles.
//!
//! Workers take operations in trace order; an operation waits until no operation still running
//! touches the same path, an ancestor or a descendant of it (a `create /d/f` waits for its
//! `mkdir /d`, a `rename` for both its paths), so every worker count replays the same file
//! system history, with independent files in parallel.

use std::collections::BTreeMap;
use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Instant;

use serde::{Deserialize, Serialize};
use tierwise_sim::filetrace::{FileOp, FileOpKind};

/// Latency percentiles of one kind of operation, in microseconds.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OpLatency {
    /// Operations.
    pub count: u64,
    /// Of which failed (the error is counted, the replay goes on).
    pub errors: u64,
    /// Mean, µs.
    pub mean_us: f64,
    /// Median, µs.
    pub p50_us: f64,
    /// 95th percentile, µs.
    pub p95_us: f64,
    /// 99th percentile, µs.
    pub p99_us: f64,
    /// Maximum, µs.
    pub max_us: f64,
}

impl OpLatency {
    fn of(mut ns: Vec<u64>, errors: u64) -> OpLatency {
        if ns.is_empty() {
            return OpLatency { errors, ..OpLatency::default() };
        }
        ns.sort_unstable();
        let pct = |p: f64| ns[((ns.len() - 1) as f64 * p).round() as usize] as f64 / 1e3;
        OpLatency {
            count: ns.len() as u64,
            errors,
            mean_us: ns.iter().map(|&v| v as f64).sum::<f64>() / ns.len() as f64 / 1e3,
            p50_us: pct(0.5),
            p95_us: pct(0.95),
            p99_us: pct(0.99),
            max_us: ns.last().map_or(0.0, |&v| v as f64 / 1e3),
        }
    }
}

/// What a replay measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReplayReport {
    /// The directory replayed against.
    pub dir: String,
    /// Workers.
    pub workers: usize,
    /// Operations replayed.
    pub ops: u64,
    /// Wall-clock seconds.
    pub wall_s: f64,
    /// Operations per second.
    pub ops_per_s: f64,
    /// Latency over all operations.
    pub all: OpLatency,
    /// Latency per operation kind.
    pub by_kind: BTreeMap<String, OpLatency>,
    /// The first few errors, with the operation.
    pub first_errors: Vec<String>,
}

/// Replays `ops` against `dir` with `workers` workers. `progress(done)` is called now and then.
pub fn replay_dir(dir: &Path, ops: &[FileOp], workers: usize, progress: &(dyn Fn(u64) + Sync)) -> ReplayReport {
    let workers = workers.max(1);
    let sched = Scheduler { state: Mutex::new(SchedState { next: 0, running: Vec::new() }), cv: Condvar::new() };
    let done = AtomicU64::new(0);
    let errors_seen: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let buf: Vec<u8> = (0..1u32 << 20).map(|i| (i % 251) as u8).collect();
    let start = Instant::now();
    let per_worker: Vec<BTreeMap<FileOpKind, (Vec<u64>, u64)>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                s.spawn(|| {
                    let mut lat: BTreeMap<FileOpKind, (Vec<u64>, u64)> = BTreeMap::new();
                    while let Some(i) = sched.take(ops) {
                        let op = &ops[i];
                        let t = Instant::now();
                        let r = apply(dir, op, &buf);
                        let ns = t.elapsed().as_nanos().min(u128::from(u64::MAX)) as u64;
                        sched.finish(i);
                        let e = lat.entry(op.kind).or_default();
                        e.0.push(ns);
                        if let Err(err) = r {
                            e.1 += 1;
                            let mut seen = errors_seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                            if seen.len() < 5 {
                                seen.push(format!("{} {}: {err}", op.kind.name(), op.path));
                            }
                        }
                        let n = done.fetch_add(1, Ordering::Relaxed) + 1;
                        if n.is_multiple_of(512) {
                            progress(n);
                        }
                    }
                    lat
                })
            })
            .collect();
        handles.into_iter().filter_map(|h| h.join().ok()).collect()
    });
    let wall_s = start.elapsed().as_secs_f64();
    let mut merged: BTreeMap<FileOpKind, (Vec<u64>, u64)> = BTreeMap::new();
    for w in per_worker {
        for (k, (ns, errs)) in w {
            let e = merged.entry(k).or_default();
            e.0.extend(ns);
            e.1 += errs;
        }
    }
    let all_ns: Vec<u64> = merged.values().flat_map(|(ns, _)| ns.iter().copied()).collect();
    let all_errors = merged.values().map(|(_, e)| e).sum();
    let n = all_ns.len() as u64;
    ReplayReport {
        dir: dir.display().to_string(),
        workers,
        ops: n,
        wall_s,
        ops_per_s: if wall_s > 0.0 { n as f64 / wall_s } else { 0.0 },
        all: OpLatency::of(all_ns, all_errors),
        by_kind: merged.into_iter().map(|(k, (ns, e))| (k.name().to_string(), OpLatency::of(ns, e))).collect(),
        first_errors: errors_seen.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner),
    }
}

struct SchedState {
    next: usize,
    /// Indices of the operations running now.
    running: Vec<usize>,
}

struct Scheduler {
    state: Mutex<SchedState>,
    cv: Condvar,
}

impl Scheduler {
    /// The next operation in trace order, once nothing running conflicts with it.
    fn take(&self, ops: &[FileOp]) -> Option<usize> {
        let mut st = self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        loop {
            let i = st.next;
            let op = ops.get(i)?;
            if !st.running.iter().any(|&r| ops[r].conflicts_with(op)) {
                st.next += 1;
                st.running.push(i);
                return Some(i);
            }
            st = self.cv.wait(st).unwrap_or_else(std::sync::PoisonError::into_inner);
        }
    }

    fn finish(&self, i: usize) {
        let mut st = self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        st.running.retain(|&r| r != i);
        self.cv.notify_all();
    }
}

fn target(dir: &Path, p: &str) -> PathBuf {
    dir.join(p.trim_start_matches('/'))
}

/// Writes `len` bytes of the pattern at `offset` (or appends when `offset` is `None`).
fn write_pattern(f: &fs::File, offset: Option<u64>, len: u64, buf: &[u8]) -> io::Result<()> {
    let mut left = len;
    let mut off = offset;
    let mut out = f;
    while left > 0 {
        let n = left.min(buf.len() as u64) as usize;
        match off {
            Some(o) => {
                f.write_all_at(&buf[..n], o)?;
                off = Some(o + n as u64);
            }
            None => out.write_all(&buf[..n])?,
        }
        left -= n as u64;
    }
    Ok(())
}

/// Runs one operation against `dir`.
pub fn apply(dir: &Path, op: &FileOp, buf: &[u8]) -> io::Result<()> {
    let p = target(dir, &op.path);
    match op.kind {
        FileOpKind::Create => fs::File::create(&p).map(|_| ()),
        FileOpKind::Mkdir => match fs::create_dir(&p) {
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && p.is_dir() => Ok(()),
            r => r,
        },
        FileOpKind::Read => {
            let f = fs::File::open(&p)?;
            let mut rbuf = vec![0u8; op.length.min(1 << 20) as usize];
            let (mut off, mut left) = (op.offset, op.length);
            while left > 0 {
                let want = left.min(rbuf.len() as u64) as usize;
                let got = f.read_at(&mut rbuf[..want], off)?;
                if got == 0 {
                    break; // end of file
                }
                off += got as u64;
                left -= got as u64;
            }
            Ok(())
        }
        FileOpKind::Write => {
            let f = OpenOptions::new().write(true).create(true).truncate(false).open(&p)?;
            write_pattern(&f, Some(op.offset), op.length, buf)
        }
        FileOpKind::Append => {
            let f = OpenOptions::new().append(true).create(true).open(&p)?;
            write_pattern(&f, None, op.length, buf)
        }
        FileOpKind::Truncate => OpenOptions::new().write(true).open(&p)?.set_len(op.length),
        FileOpKind::Delete => fs::remove_file(&p),
        FileOpKind::Rmdir => fs::remove_dir(&p),
        FileOpKind::Rename => fs::rename(&p, target(dir, &op.path2)),
        FileOpKind::Stat => fs::metadata(&p).map(|_| ()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tierwise_sim::filetrace::generate::FileWorkload;

    fn tree(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
        let mut out = BTreeMap::new();
        let mut stack = vec![root.to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in fs::read_dir(&d).into_iter().flatten().flatten() {
                let p = e.path();
                let rel = p.strip_prefix(root).map(Path::to_path_buf).unwrap_or_default();
                if p.is_dir() {
                    stack.push(p);
                    out.insert(rel, Vec::new());
                } else {
                    out.insert(rel, fs::read(&p).unwrap_or_default());
                }
            }
        }
        out
    }

    #[test]
    fn any_worker_count_replays_the_same_history() {
        let ops = FileWorkload::by_name("postmark", 0.005).map(|w| w.collect(3)).unwrap_or_default();
        assert!(ops.len() > 500);
        let (one, four) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let r1 = replay_dir(one.path(), &ops, 1, &|_| {});
        let r4 = replay_dir(four.path(), &ops, 4, &|_| {});
        assert_eq!(r1.ops, ops.len() as u64);
        assert_eq!((r1.all.errors, r4.all.errors), (0, 0), "{:?} {:?}", r1.first_errors, r4.first_errors);
        assert_eq!(tree(one.path()), tree(four.path()));
        assert!(r4.by_kind.contains_key("read") && r4.all.p99_us >= r4.all.p50_us);
    }
}
