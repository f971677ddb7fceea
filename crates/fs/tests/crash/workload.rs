//! The bounded workloads (ACE's seq-1 and seq-2, OSDI'18): every operation of the list alone
//! and every pair, after a setup that puts the files on either tier, cached on both, dirty, or
//! in the middle of a move, plus the save patterns editors, git and databases use.

use std::fs::{self, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;

/// One operation, on names relative to the root.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// Create an empty file (`O_CREAT | O_EXCL`).
    Create(&'static str),
    /// Overwrite 3,000 bytes in the middle.
    Overwrite(&'static str),
    /// Append 2,000 bytes.
    Append(&'static str),
    /// Write 100 bytes 20,000 bytes past the end.
    Sparse(&'static str),
    /// Truncate to a size.
    Truncate(&'static str, u64),
    Fsync(&'static str),
    Fdatasync(&'static str),
    Rename(&'static str, &'static str),
    Link(&'static str, &'static str),
    Unlink(&'static str),
    Mkdir(&'static str),
    Rmdir(&'static str),
    Symlink(&'static str, &'static str),
    Setxattr(&'static str),
    /// fsync of a directory.
    Fsyncdir(&'static str),
    /// Read the whole file (a policy may move it).
    Read(&'static str),
}

/// Every operation the enumeration combines (seq-1 is each alone).
pub const OPS: &[Op] = &[
    Op::Create("d0/N"),
    Op::Overwrite("d0/A"),
    Op::Append("d0/A"),
    Op::Sparse("d0/A"),
    Op::Truncate("d0/A", 100),
    Op::Truncate("d0/A", 30_000),
    Op::Fsync("d0/A"),
    Op::Fdatasync("d0/A"),
    Op::Rename("d0/A", "d0/N"),
    Op::Rename("d0/A", "d0/B"),
    Op::Rename("d0/A", "d1/A"),
    Op::Rename("d0/A", "d1/C"),
    Op::Rename("d0", "d2"),
    Op::Link("d0/A", "d1/L"),
    Op::Unlink("d0/A"),
    Op::Mkdir("d0/M"),
    Op::Rmdir("d0/E"),
    Op::Symlink("d0/S", "A"),
    Op::Setxattr("d0/A"),
    Op::Fsyncdir("d0"),
    Op::Read("d0/A"),
    Op::Overwrite("d0/B"),
];

/// The patterns that replace a file atomically: write a temporary, fsync it, rename it over the
/// file, fsync the directory (editors, `git` for its index and refs, databases' config files).
pub const SAVES: &[&[Op]] = &[
    &[Op::Create("d0/T"), Op::Overwrite("d0/T"), Op::Fsync("d0/T"), Op::Rename("d0/T", "d0/A"), Op::Fsyncdir("d0")],
    &[Op::Create("d1/T"), Op::Append("d1/T"), Op::Fsync("d1/T"), Op::Rename("d1/T", "d1/C"), Op::Fsyncdir("d1")],
    // No fsync: after a crash the target holds the old content or the new, never nothing.
    &[Op::Create("d0/T"), Op::Append("d0/T"), Op::Rename("d0/T", "d0/B")],
    // A cached or promoted file renamed over one whose last write was not synced: a power cut
    // takes that write back, and the journal must still replace it (found by the full run).
    &[Op::Overwrite("d0/B"), Op::Rename("d0/A", "d0/B"), Op::Fsyncdir("d0")],
];

/// Where the files are when the recorded operations start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Setup {
    /// As created (write-back: dirty on the SSD; caching: on the HDD).
    Fresh,
    /// `d0/A` and `d1/C` read and every move finished (cached, promoted).
    Read,
    /// `d0/A` read just before, its move in flight (slowed to 1 MB/s) while the operations run.
    Moving,
}

impl Setup {
    pub const ALL: [Setup; 3] = [Setup::Fresh, Setup::Read, Setup::Moving];
}

/// The setup's files: `d0/A`, `d0/B`, `d1/C` (distinct contents), an empty `d0/E`, all durable.
pub fn populate(root: &Path) {
    for d in ["d0", "d1", "d0/E"] {
        fs::create_dir(root.join(d)).expect("setup mkdir");
    }
    for (name, len, v) in [("d0/A", 12_000, 1), ("d0/B", 9_000, 2), ("d1/C", 5_000, 3)] {
        let mut f = fs::File::create(root.join(name)).expect("setup create");
        f.write_all(&pattern(v, len)).expect("setup write");
        f.sync_all().expect("setup fsync");
    }
    for d in ["", "d0", "d1"] {
        fs::File::open(root.join(d)).and_then(|f| f.sync_all()).expect("setup fsyncdir");
    }
}

/// Distinct bytes for each version.
pub fn pattern(version: u64, len: usize) -> Vec<u8> {
    (0..len).map(|i| (i as u64).wrapping_mul(7).wrapping_add(version.wrapping_mul(131)) as u8 ^ 0x5a).collect()
}

fn outcome<T>(r: std::io::Result<T>) -> String {
    match r {
        Ok(_) => "ok".into(),
        Err(e) => format!("err {:?}", e.kind()),
    }
}

/// Applies `op` (the `n`-th of its workload: its data version) under `root`; returns what the
/// caller saw (for the differential check between the mount and a plain directory).
pub fn apply(root: &Path, op: Op, n: u64) -> String {
    let p = |rel: &str| root.join(rel);
    let version = 100 + n;
    match op {
        Op::Create(f) => outcome(OpenOptions::new().write(true).create_new(true).open(p(f))),
        Op::Overwrite(f) => outcome(
            OpenOptions::new().write(true).open(p(f)).and_then(|h| h.write_all_at(&pattern(version, 3000), 1000)),
        ),
        Op::Append(f) => {
            outcome(OpenOptions::new().append(true).open(p(f)).and_then(|mut h| h.write_all(&pattern(version, 2000))))
        }
        Op::Sparse(f) => outcome(OpenOptions::new().write(true).open(p(f)).and_then(|h| {
            let end = h.metadata()?.len();
            h.write_all_at(&pattern(version, 100), end + 20_000)
        })),
        Op::Truncate(f, size) => outcome(OpenOptions::new().write(true).open(p(f)).and_then(|h| h.set_len(size))),
        Op::Fsync(f) => outcome(OpenOptions::new().write(true).open(p(f)).and_then(|h| h.sync_all())),
        Op::Fdatasync(f) => outcome(OpenOptions::new().write(true).open(p(f)).and_then(|h| h.sync_data())),
        Op::Rename(a, b) => outcome(fs::rename(p(a), p(b))),
        Op::Link(a, b) => outcome(fs::hard_link(p(a), p(b))),
        Op::Unlink(f) => outcome(fs::remove_file(p(f))),
        Op::Mkdir(d) => outcome(fs::create_dir(p(d))),
        Op::Rmdir(d) => outcome(fs::remove_dir(p(d))),
        Op::Symlink(s, target) => outcome(std::os::unix::fs::symlink(target, p(s))),
        Op::Setxattr(f) => outcome(xattr::set(p(f), "user.k", format!("v{version}").as_bytes())),
        Op::Fsyncdir(d) => outcome(fs::File::open(p(d)).and_then(|h| h.sync_all())),
        Op::Read(f) => outcome(fs::File::open(p(f)).and_then(|mut h| {
            let mut v = Vec::new();
            h.read_to_end(&mut v).map(|_| v.len())
        })),
    }
}

/// Whether `op` makes something durable (for the model: which names and contents must survive
/// a power cut).
pub fn syncs(op: Op) -> bool {
    matches!(op, Op::Fsync(_) | Op::Fdatasync(_) | Op::Fsyncdir(_))
}

/// The workloads of a run: seq-1 (every operation alone) and the save patterns, then seq-2
/// (every ordered pair) when `pairs`; each with every setup.
pub fn workloads(pairs: bool) -> Vec<Vec<Op>> {
    let mut out: Vec<Vec<Op>> = OPS.iter().map(|&o| vec![o]).collect();
    out.extend(SAVES.iter().map(|s| s.to_vec()));
    if pairs {
        for &a in OPS {
            for &b in OPS {
                out.push(vec![a, b]);
            }
        }
    }
    out
}
