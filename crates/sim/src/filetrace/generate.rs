//! Seeded file workloads mirroring the seeds' benchmarks (SPEC §3): Postmark, Filebench's
//! fileserver, webserver (uniform, or Zipf over two filesets whose locality shifts halfway),
//! a fileserver + webserver mix with a dummy fileset, random read and OLTP-like. Each emits
//! [`FileOp`]s in order, so the same operations can be written as a file trace and replayed by
//! the simulator and by a real mount.
//!
//! Every operation is valid when replayed in order from an empty root: files exist when read,
//! reads stay inside the file, directories are created before their files and are empty when
//! removed.

use serde::{Deserialize, Serialize};

use super::{FileOp, FileOpKind};
use crate::synth::{Rng, Zipf};

const KIB: u64 = 1024;
const MIB: u64 = 1024 * KIB;

/// A file workload and its parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum FileWorkload {
    /// Postmark: `files` files in `subdirs` directories, sizes uniform in `min..=max`, then
    /// `transactions` of (read whole file | append) + (create | delete), each 50/50, I/O in
    /// `block` units; everything deleted at the end.
    Postmark {
        /// Initial files.
        files: u64,
        /// Subdirectories.
        subdirs: u64,
        /// Smallest file.
        min: u64,
        /// Largest file.
        max: u64,
        /// Transactions.
        transactions: u64,
        /// Read and write unit.
        block: u64,
    },
    /// Filebench fileserver: per iteration create + write whole, append (mean 16 KiB), read
    /// whole, delete, stat, on files of median size `median` in directories of width 20.
    Fileserver {
        /// Files in the fileset.
        files: u64,
        /// Median file size.
        median: u64,
        /// Iterations of the flow.
        iterations: u64,
    },
    /// Filebench webserver: per iteration 10 whole-file reads, then a 16 KiB append to one log.
    /// With `zipf` > 0 files are drawn Zipf(zipf) from fileset A for the first half of the
    /// iterations and from fileset B for the second (shifting locality); else uniformly.
    Webserver {
        /// Files per fileset.
        files: u64,
        /// Median file size.
        median: u64,
        /// Iterations.
        iterations: u64,
        /// Zipf exponent (0 = uniform over one fileset).
        zipf: f64,
    },
    /// Fileserver under `/files` and webserver under `/web` interleaved, plus a dummy fileset
    /// under `/dummy` that takes space and is never touched again (Loris's mixed workload).
    Mixed {
        /// Files per fileset (the dummy has as many as the fileserver).
        files: u64,
        /// Iterations of each flow.
        iterations: u64,
    },
    /// Random reads of `io` bytes in one file of `size` bytes.
    RandomRead {
        /// File size.
        size: u64,
        /// Read size.
        io: u64,
        /// Reads.
        reads: u64,
    },
    /// OLTP-like: 10 data files of `size` / 10, random 8 KiB reads (80 %) and writes (15 %),
    /// and 5 % appends to a log file.
    Oltp {
        /// Bytes of data.
        size: u64,
        /// Operations after setup.
        ops: u64,
    },
}

/// Workload names for the CLI, with defaults from SPEC §3.
pub const FILE_WORKLOADS: &[&str] =
    &["postmark", "fileserver", "webserver", "webserver-zipf", "mixed", "randomread", "oltp"];

impl FileWorkload {
    /// The workload called `name` at `scale` (1 = the papers' sizes).
    pub fn by_name(name: &str, scale: f64) -> Option<FileWorkload> {
        let n = |x: u64| ((x as f64 * scale).round() as u64).max(1);
        Some(match name {
            "postmark" => FileWorkload::Postmark {
                files: n(40_000),
                subdirs: 10,
                min: 4 * KIB,
                max: 28 * KIB,
                transactions: n(80_000),
                block: 4 * KIB,
            },
            "fileserver" => FileWorkload::Fileserver { files: n(10_000), median: 128 * KIB, iterations: n(20_000) },
            "webserver" => {
                FileWorkload::Webserver { files: n(25_000), median: 32 * KIB, iterations: n(20_000), zipf: 0.0 }
            }
            "webserver-zipf" => {
                FileWorkload::Webserver { files: n(25_000), median: 32 * KIB, iterations: n(20_000), zipf: 0.9 }
            }
            "mixed" => FileWorkload::Mixed { files: n(10_000), iterations: n(20_000) },
            "randomread" => FileWorkload::RandomRead { size: n(1024) * MIB, io: 8 * KIB, reads: n(200_000) },
            "oltp" => FileWorkload::Oltp { size: n(1024) * MIB, ops: n(200_000) },
            _ => return None,
        })
    }

    /// The same workload with its measured phase `n` long instead: Postmark transactions,
    /// FileBench flow iterations, random reads or OLTP operations. (FileBench runs for a
    /// duration, so how many iterations a run has is the experimenter's choice.)
    pub fn with_iterations(self, n: u64) -> FileWorkload {
        match self {
            FileWorkload::Postmark { files, subdirs, min, max, block, .. } => {
                FileWorkload::Postmark { files, subdirs, min, max, transactions: n, block }
            }
            FileWorkload::Fileserver { files, median, .. } => FileWorkload::Fileserver { files, median, iterations: n },
            FileWorkload::Webserver { files, median, zipf, .. } => {
                FileWorkload::Webserver { files, median, iterations: n, zipf }
            }
            FileWorkload::Mixed { files, .. } => FileWorkload::Mixed { files, iterations: n },
            FileWorkload::RandomRead { size, io, .. } => FileWorkload::RandomRead { size, io, reads: n },
            FileWorkload::Oltp { size, .. } => FileWorkload::Oltp { size, ops: n },
        }
    }

    /// Calls `f` with every operation, in order. Time advances 100 µs per operation.
    pub fn generate(&self, seed: u64, mut f: impl FnMut(&FileOp)) {
        let mut g = Gen { rng: Rng::new(seed), t: 0, out: &mut f };
        match *self {
            FileWorkload::Postmark { files, subdirs, min, max, transactions, block } => {
                postmark(&mut g, files, subdirs.max(1), min, max.max(min), transactions, block.max(1))
            }
            FileWorkload::Fileserver { files, median, iterations } => {
                let mut fs = Fileset::create(&mut g, "/fileserver", files, median);
                for _ in 0..iterations {
                    fileserver_step(&mut g, &mut fs);
                }
            }
            FileWorkload::Webserver { files, median, iterations, zipf } => {
                webserver(&mut g, "/web", files, median, iterations, zipf)
            }
            FileWorkload::Mixed { files, iterations } => {
                let _dummy = Fileset::create(&mut g, "/dummy", files, 128 * KIB);
                let mut fs = Fileset::create(&mut g, "/files", files, 128 * KIB);
                let mut web = Web::setup(&mut g, "/web", files, 32 * KIB, 0.0);
                for i in 0..iterations {
                    fileserver_step(&mut g, &mut fs);
                    web.step(&mut g, i, iterations);
                }
            }
            FileWorkload::RandomRead { size, io, reads } => {
                let io = io.clamp(1, size.max(1));
                g.op(FileOp::new(0, FileOpKind::Create, "/randomread.dat"));
                write_whole(&mut g, "/randomread.dat", size, MIB);
                for _ in 0..reads {
                    let off = g.rng.below(size / io) * io;
                    g.op(FileOp::new(0, FileOpKind::Read, "/randomread.dat").range(off, io));
                }
            }
            FileWorkload::Oltp { size, ops } => oltp(&mut g, size, ops),
        }
    }

    /// Every operation in a vector.
    pub fn collect(&self, seed: u64) -> Vec<FileOp> {
        let mut v = Vec::new();
        self.generate(seed, |op| v.push(op.clone()));
        v
    }
}

struct Gen<'a> {
    rng: Rng,
    t: u64,
    out: &'a mut dyn FnMut(&FileOp),
}

impl Gen<'_> {
    fn op(&mut self, mut op: FileOp) {
        op.time_ns = self.t;
        self.t += 100_000;
        (self.out)(&op);
    }

    /// A size with median `median` (log-normal, sigma 1), clamped to 1 KiB..=16 × median.
    fn size(&mut self, median: u64) -> u64 {
        let u1 = self.rng.next_f64().max(1e-12);
        let u2 = self.rng.next_f64();
        let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
        ((median as f64 * z.exp()) as u64).clamp(KIB, 16 * median.max(KIB))
    }
}

/// Writes `size` bytes from offset 0 in `chunk` units.
fn write_whole(g: &mut Gen<'_>, path: &str, size: u64, chunk: u64) {
    whole(g, FileOpKind::Write, path, size, chunk);
}

/// Reads `size` bytes from offset 0 in `chunk` units.
fn read_whole(g: &mut Gen<'_>, path: &str, size: u64, chunk: u64) {
    whole(g, FileOpKind::Read, path, size, chunk);
}

fn whole(g: &mut Gen<'_>, kind: FileOpKind, path: &str, size: u64, chunk: u64) {
    let mut off = 0;
    while off < size {
        let n = chunk.min(size - off);
        g.op(FileOp::new(0, kind, path).range(off, n));
        off += n;
    }
}

fn postmark(g: &mut Gen<'_>, files: u64, subdirs: u64, min: u64, max: u64, transactions: u64, block: u64) {
    g.op(FileOp::new(0, FileOpKind::Mkdir, "/postmark"));
    for d in 0..subdirs {
        g.op(FileOp::new(0, FileOpKind::Mkdir, format!("/postmark/s{d}")));
    }
    // Live files: (name, size); removal swaps with the last.
    let mut live: Vec<(String, u64)> = Vec::with_capacity(files as usize);
    let mut next = 0u64;
    let mut create = |g: &mut Gen<'_>, live: &mut Vec<(String, u64)>| {
        let path = format!("/postmark/s{}/f{next}", g.rng.below(subdirs));
        next += 1;
        let size = min + g.rng.below(max - min + 1);
        g.op(FileOp::new(0, FileOpKind::Create, path.as_str()));
        write_whole(g, &path, size, block);
        live.push((path, size));
    };
    for _ in 0..files {
        create(g, &mut live);
    }
    for _ in 0..transactions {
        if !live.is_empty() {
            let i = g.rng.below(live.len() as u64) as usize;
            if g.rng.next_f64() < 0.5 {
                let (p, s) = live[i].clone();
                read_whole(g, &p, s, block);
            } else {
                let n = min + g.rng.below(max - min + 1);
                let mut left = n;
                while left > 0 {
                    let k = block.min(left);
                    g.op(FileOp::new(0, FileOpKind::Append, live[i].0.as_str()).range(0, k));
                    left -= k;
                }
                live[i].1 += n;
            }
        }
        if g.rng.next_f64() < 0.5 || live.is_empty() {
            create(g, &mut live);
        } else {
            let i = g.rng.below(live.len() as u64) as usize;
            let (p, _) = live.swap_remove(i);
            g.op(FileOp::new(0, FileOpKind::Delete, p));
        }
    }
    for (p, _) in live.drain(..) {
        g.op(FileOp::new(0, FileOpKind::Delete, p));
    }
    for d in 0..subdirs {
        g.op(FileOp::new(0, FileOpKind::Rmdir, format!("/postmark/s{d}")));
    }
    g.op(FileOp::new(0, FileOpKind::Rmdir, "/postmark"));
}

/// Files in directories of width 20 (two levels), with their sizes; `None` = deleted.
struct Fileset {
    root: String,
    sizes: Vec<Option<u64>>,
    median: u64,
}

impl Fileset {
    const WIDTH: u64 = 20;

    fn path(&self, i: usize) -> String {
        let d = i as u64 / Self::WIDTH;
        format!("{}/d{}/d{}/f{i}", self.root, d / Self::WIDTH, d % Self::WIDTH)
    }

    /// Creates the directories and the files (Filebench preallocates the fileset).
    fn create(g: &mut Gen<'_>, root: &str, files: u64, median: u64) -> Fileset {
        g.op(FileOp::new(0, FileOpKind::Mkdir, root));
        let dirs = files.div_ceil(Self::WIDTH).max(1);
        for top in 0..dirs.div_ceil(Self::WIDTH) {
            g.op(FileOp::new(0, FileOpKind::Mkdir, format!("{root}/d{top}")));
            for sub in 0..Self::WIDTH.min(dirs - top * Self::WIDTH) {
                g.op(FileOp::new(0, FileOpKind::Mkdir, format!("{root}/d{top}/d{sub}")));
            }
        }
        let mut fs = Fileset { root: root.to_string(), sizes: Vec::with_capacity(files as usize), median };
        for i in 0..files as usize {
            let size = g.size(median);
            let p = fs.path(i);
            g.op(FileOp::new(0, FileOpKind::Create, p.as_str()));
            write_whole(g, &p, size, MIB);
            fs.sizes.push(Some(size));
        }
        fs
    }
}

/// One pass of Filebench's fileserver flow: create + write a missing file, append to one, read
/// one whole, delete one, stat one.
fn fileserver_step(g: &mut Gen<'_>, fs: &mut Fileset) {
    let n = fs.sizes.len() as u64;
    if n == 0 {
        return;
    }
    let pick = |g: &mut Gen<'_>, fs: &Fileset, present: bool| -> Option<usize> {
        // A few probes, as Filebench picks a random file in the wanted state.
        (0..16).map(|_| g.rng.below(n) as usize).find(|&i| fs.sizes[i].is_some() == present)
    };
    if let Some(i) = pick(g, fs, false) {
        let size = g.size(fs.median);
        let p = fs.path(i);
        g.op(FileOp::new(0, FileOpKind::Create, p.as_str()));
        write_whole(g, &p, size, MIB);
        fs.sizes[i] = Some(size);
    }
    if let Some(i) = pick(g, fs, true) {
        let k = (g.rng.next_f64() * 32.0 * KIB as f64) as u64 + 1;
        g.op(FileOp::new(0, FileOpKind::Append, fs.path(i)).range(0, k));
        fs.sizes[i] = fs.sizes[i].map(|s| s + k);
    }
    if let Some(i) = pick(g, fs, true) {
        let s = fs.sizes[i].unwrap_or(0);
        read_whole(g, &fs.path(i), s, MIB);
    }
    if let Some(i) = pick(g, fs, true) {
        g.op(FileOp::new(0, FileOpKind::Delete, fs.path(i)));
        fs.sizes[i] = None;
    }
    if let Some(i) = pick(g, fs, true) {
        g.op(FileOp::new(0, FileOpKind::Stat, fs.path(i)));
    }
}

struct Web {
    sets: Vec<Fileset>,
    zipf: Option<Zipf>,
    log: String,
}

impl Web {
    fn setup(g: &mut Gen<'_>, root: &str, files: u64, median: u64, zipf: f64) -> Web {
        let two = zipf > 0.0;
        g.op(FileOp::new(0, FileOpKind::Mkdir, root));
        let mut sets = vec![Fileset::create(g, &format!("{root}/a"), files, median)];
        if two {
            sets.push(Fileset::create(g, &format!("{root}/b"), files, median));
        }
        let log = format!("{root}/log");
        g.op(FileOp::new(0, FileOpKind::Create, log.as_str()));
        Web { sets, zipf: two.then(|| Zipf::new(files.max(1), zipf)), log }
    }

    fn step(&mut self, g: &mut Gen<'_>, i: u64, iterations: u64) {
        let set = &self.sets[if self.sets.len() > 1 && i >= iterations / 2 { 1 } else { 0 }];
        let n = set.sizes.len() as u64;
        for _ in 0..10 {
            let f = match &self.zipf {
                Some(z) => z.sample(&mut g.rng) - 1,
                None => g.rng.below(n.max(1)),
            } as usize;
            if let Some(Some(s)) = set.sizes.get(f) {
                read_whole(g, &set.path(f), *s, MIB);
            }
        }
        g.op(FileOp::new(0, FileOpKind::Append, self.log.as_str()).range(0, 16 * KIB));
    }
}

fn webserver(g: &mut Gen<'_>, root: &str, files: u64, median: u64, iterations: u64, zipf: f64) {
    let mut w = Web::setup(g, root, files, median, zipf);
    for i in 0..iterations {
        w.step(g, i, iterations);
    }
}

fn oltp(g: &mut Gen<'_>, size: u64, ops: u64) {
    const IO: u64 = 8 * KIB;
    let per = (size / 10 / IO).max(1) * IO;
    g.op(FileOp::new(0, FileOpKind::Mkdir, "/oltp"));
    for d in 0..10 {
        let p = format!("/oltp/data{d}");
        g.op(FileOp::new(0, FileOpKind::Create, p.as_str()));
        write_whole(g, &p, per, MIB);
    }
    g.op(FileOp::new(0, FileOpKind::Create, "/oltp/log"));
    for _ in 0..ops {
        let u = g.rng.next_f64();
        let d = g.rng.below(10);
        let off = g.rng.below(per / IO) * IO;
        let p = format!("/oltp/data{d}");
        if u < 0.80 {
            g.op(FileOp::new(0, FileOpKind::Read, p).range(off, IO));
        } else if u < 0.95 {
            g.op(FileOp::new(0, FileOpKind::Write, p).range(off, IO));
        } else {
            g.op(FileOp::new(0, FileOpKind::Append, "/oltp/log").range(0, IO));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use super::*;
    use crate::filetrace::{FileTraceReader, check_path, write_file_trace};

    /// Replays ops on a model of the namespace, failing on any op that a real file system
    /// would refuse (or that reads past the end of a file).
    fn replay(ops: &[FileOp]) -> Result<(), String> {
        let mut dirs: BTreeSet<String> = BTreeSet::from(["/".to_string()]);
        let mut files: BTreeMap<String, u64> = BTreeMap::new();
        let parent = |p: &str| match p.rfind('/') {
            Some(0) => "/".to_string(),
            Some(i) => p[..i].to_string(),
            None => String::new(),
        };
        for (n, op) in ops.iter().enumerate() {
            check_path(&op.path).map_err(|e| format!("op {n}: {e}"))?;
            let p = op.path.clone();
            let err = |why: &str| format!("op {n} {} {p}: {why}", op.kind.name());
            match op.kind {
                FileOpKind::Mkdir | FileOpKind::Create => {
                    if !dirs.contains(&parent(&p)) || dirs.contains(&p) || files.contains_key(&p) {
                        return Err(err("parent missing or name taken"));
                    }
                    if op.kind == FileOpKind::Mkdir {
                        dirs.insert(p);
                    } else {
                        files.insert(p, 0);
                    }
                }
                FileOpKind::Read => {
                    let s = *files.get(&p).ok_or_else(|| err("no such file"))?;
                    if op.offset + op.length > s {
                        return Err(err(&format!("reads past the end ({s})")));
                    }
                }
                FileOpKind::Write => {
                    let s = files.get_mut(&p).ok_or_else(|| err("no such file"))?;
                    *s = (*s).max(op.offset + op.length);
                }
                FileOpKind::Append => *files.get_mut(&p).ok_or_else(|| err("no such file"))? += op.length,
                FileOpKind::Truncate => *files.get_mut(&p).ok_or_else(|| err("no such file"))? = op.length,
                FileOpKind::Delete => {
                    files.remove(&p).ok_or_else(|| err("no such file"))?;
                }
                FileOpKind::Stat => {
                    if !files.contains_key(&p) && !dirs.contains(&p) {
                        return Err(err("no such file"));
                    }
                }
                FileOpKind::Rmdir => {
                    let prefix = format!("{p}/");
                    if files.keys().any(|f| f.starts_with(&prefix)) || dirs.iter().any(|d| d.starts_with(&prefix)) {
                        return Err(err("directory not empty"));
                    }
                    dirs.remove(&p).then_some(()).ok_or_else(|| err("no such directory"))?;
                }
                FileOpKind::Rename => {
                    let s = files.remove(&p).ok_or_else(|| err("no such file"))?;
                    files.insert(op.path2.clone(), s);
                }
            }
        }
        Ok(())
    }

    #[test]
    fn every_workload_replays_cleanly_and_is_seeded() {
        for name in FILE_WORKLOADS {
            let w = FileWorkload::by_name(name, 0.002).unwrap();
            let ops = w.collect(7);
            assert!(ops.len() > 20, "{name}: {} ops", ops.len());
            replay(&ops).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(ops, w.collect(7), "{name}: same seed, same ops");
            assert_ne!(ops, w.collect(8), "{name}: another seed, other ops");
            assert!(ops.windows(2).all(|p| p[0].time_ns < p[1].time_ns));
            // Written as a trace and read back: the same operations.
            let mut text = Vec::new();
            write_file_trace(&ops, &mut text).unwrap();
            let back: Vec<FileOp> = FileTraceReader::from_bytes(name, text).collect::<Result<_, _>>().unwrap();
            assert_eq!(back, ops, "{name}");
        }
    }

    #[test]
    fn postmark_follows_its_parameters() {
        let w = FileWorkload::Postmark {
            files: 200,
            subdirs: 10,
            min: 4 * KIB,
            max: 28 * KIB,
            transactions: 400,
            block: 4 * KIB,
        };
        let ops = w.collect(1);
        let count = |k: FileOpKind| ops.iter().filter(|o| o.kind == k).count();
        let creates = count(FileOpKind::Create);
        let deletes = count(FileOpKind::Delete);
        assert_eq!(creates, deletes, "everything is deleted at the end");
        // About half of the 400 transactions create.
        assert!((200 + 150..=200 + 250).contains(&creates), "{creates}");
        assert_eq!(count(FileOpKind::Mkdir), 11);
        assert!(ops.iter().filter(|o| o.kind == FileOpKind::Write).all(|o| o.length <= 4 * KIB));
        replay(&ops).unwrap();
    }

    #[test]
    fn zipf_webserver_shifts_to_the_second_fileset() {
        let w = FileWorkload::Webserver { files: 50, median: 8 * KIB, iterations: 200, zipf: 0.9 };
        let ops = w.collect(3);
        let reads: Vec<&FileOp> = ops.iter().filter(|o| o.kind == FileOpKind::Read).collect();
        // Setup writes come first; the reads of the first half hit /web/a, the second /web/b.
        let (a, b) = reads.split_at(reads.len() / 2);
        let share =
            |v: &[&FileOp], set: &str| v.iter().filter(|o| o.path.starts_with(set)).count() as f64 / v.len() as f64;
        assert!(share(a, "/web/a/") > 0.9 && share(b, "/web/b/") > 0.9);
    }
}
