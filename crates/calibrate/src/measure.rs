//! The measurements, each for a fixed time: random 4 KiB reads and writes at a queue depth
//! (that many threads, each with one request outstanding, as fio's `psync` engine with
//! `numjobs`), sequential 1 MiB transfers, and the time of a read by its distance from the
//! previous one.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tierwise_sim::synth::Rng;

use crate::target::{ALIGN, AlignedBuf};

/// Read or write.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    /// Reads.
    Read,
    /// Writes.
    Write,
}

impl Op {
    /// `read` or `write`.
    pub fn label(self) -> &'static str {
        match self {
            Op::Read => "read",
            Op::Write => "write",
        }
    }
}

/// One measurement's result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Measured {
    /// Short name, e.g. `randread-qd32`.
    pub name: String,
    /// Read or write.
    pub op: Op,
    /// Random or sequential.
    pub random: bool,
    /// Bytes per request.
    pub block: u64,
    /// Requests outstanding.
    pub depth: u32,
    /// Each write reached stable media before the next (`O_DSYNC`).
    pub sync: bool,
    /// Requests completed.
    pub ops: u64,
    /// Seconds measured.
    pub seconds: f64,
    /// Requests per second.
    pub iops: f64,
    /// MB (10^6 bytes) per second.
    pub mb_s: f64,
    /// Mean response time, µs.
    pub mean_us: f64,
    /// Median response time, µs.
    pub p50_us: f64,
    /// 99th percentile, µs.
    pub p99_us: f64,
}

/// The median time of a read at a distance from the one before.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SeekPoint {
    /// How far before the first read the second starts: from this many bytes to 1.5 times
    /// as many.
    pub distance: u64,
    /// Pairs measured.
    pub pairs: u64,
    /// Median time of the second read, µs.
    pub p50_us: f64,
    /// Mean time of the second read, µs.
    pub mean_us: f64,
}

fn summary(mut lat_us: Vec<f64>) -> (f64, f64, f64) {
    if lat_us.is_empty() {
        return (0.0, 0.0, 0.0);
    }
    lat_us.sort_by(f64::total_cmp);
    let mean = lat_us.iter().sum::<f64>() / lat_us.len() as f64;
    let at = |q: f64| lat_us[((lat_us.len() - 1) as f64 * q).round() as usize];
    (mean, at(0.5), at(0.99))
}

/// One request of `block` bytes at `offset`.
fn io_at(file: &File, op: Op, buf: &mut AlignedBuf, offset: u64) -> io::Result<()> {
    match op {
        Op::Read => file.read_exact_at(buf.bytes_mut(), offset),
        Op::Write => file.write_all_at(buf.bytes(), offset),
    }
}

/// What one random test does.
#[derive(Clone, Copy, Debug)]
pub struct RandomTest {
    /// Read or write.
    pub op: Op,
    /// Requests outstanding (threads).
    pub depth: u32,
    /// Bytes per request.
    pub block: u64,
    /// Through the `O_DSYNC` handle.
    pub sync: bool,
    /// How long.
    pub duration: Duration,
    /// Seed of the offsets.
    pub seed: u64,
}

/// Uniformly random aligned requests over `[0, span)`, `t.depth` at a time, for `t.duration`.
pub fn random(file: &File, span: u64, t: RandomTest) -> io::Result<Measured> {
    let slots = (span / t.block).max(1);
    let started = Instant::now();
    let deadline = started + t.duration;
    let per_thread: Vec<io::Result<Vec<f64>>> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..t.depth)
            .map(|i| {
                s.spawn(move || -> io::Result<Vec<f64>> {
                    let mut rng = Rng::new(t.seed.wrapping_mul(1_000_003).wrapping_add(u64::from(i)));
                    let mut buf = AlignedBuf::new(t.block as usize, t.seed ^ u64::from(i));
                    let mut lat = Vec::with_capacity(4096);
                    while Instant::now() < deadline {
                        let offset = rng.below(slots) * t.block;
                        if t.op == Op::Write {
                            // New content in every write (as fio's scramble_buffers): a
                            // deduplicating or compressing device must not see one block again.
                            buf.bytes_mut()[..8].copy_from_slice(&rng.next_u64().to_le_bytes());
                        }
                        let t0 = Instant::now();
                        io_at(file, t.op, &mut buf, offset)?;
                        lat.push(t0.elapsed().as_secs_f64() * 1e6);
                    }
                    Ok(lat)
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap_or_else(|_| Err(io::Error::other("a worker panicked")))).collect()
    });
    let seconds = started.elapsed().as_secs_f64();
    let mut lat = Vec::new();
    for l in per_thread {
        lat.extend(l?);
    }
    let name = format!("rand{}{}-qd{}", t.op.label(), if t.sync { "-sync" } else { "" }, t.depth);
    Ok(finish(name, t.op, true, t.block, t.depth, t.sync, lat, seconds))
}

#[expect(clippy::too_many_arguments, reason = "one constructor of a plain record")]
fn finish(
    name: String,
    op: Op,
    random: bool,
    block: u64,
    depth: u32,
    sync: bool,
    lat: Vec<f64>,
    seconds: f64,
) -> Measured {
    let ops = lat.len() as u64;
    let (mean_us, p50_us, p99_us) = summary(lat);
    let seconds = seconds.max(1e-9);
    Measured {
        name,
        op,
        random,
        block,
        depth,
        sync,
        ops,
        seconds,
        iops: ops as f64 / seconds,
        mb_s: (ops * block) as f64 / seconds / 1e6,
        mean_us,
        p50_us,
        p99_us,
    }
}

/// Sequential `block`-byte requests, one at a time, from offset 0 (wrapping at `span`), for
/// `duration`.
pub fn sequential(file: &File, span: u64, op: Op, block: u64, duration: Duration) -> io::Result<Measured> {
    sequential_in(file, 0..span, op, block, duration, format!("seq{}", op.label()))
}

/// Sequential reads in the last sixteenth of the span (at least 64 MiB): on a disk, the inner
/// zone, whose rate against `seqread`'s gives the preset's `inner_rate_ratio`.
pub fn sequential_inner(file: &File, span: u64, block: u64, duration: Duration) -> io::Result<Measured> {
    let from = span.saturating_sub((span / 16).max(64 << 20)) / block * block;
    sequential_in(file, from..span, Op::Read, block, duration, "seqread-inner".into())
}

/// Sequential `block`-byte requests, one at a time, over `range` (wrapping), for `duration`.
fn sequential_in(
    file: &File,
    range: std::ops::Range<u64>,
    op: Op,
    block: u64,
    duration: Duration,
    name: String,
) -> io::Result<Measured> {
    let mut buf = AlignedBuf::new(block as usize, 7);
    let started = Instant::now();
    let mut lat = Vec::new();
    let mut offset = range.start;
    while started.elapsed() < duration {
        let t0 = Instant::now();
        io_at(file, op, &mut buf, offset)?;
        lat.push(t0.elapsed().as_secs_f64() * 1e6);
        offset = if offset + 2 * block > range.end { range.start } else { offset + block };
    }
    Ok(finish(name, op, false, block, 1, false, lat, started.elapsed().as_secs_f64()))
}

/// Writes all of `[0, span)` in 1 MiB requests (a fresh file's blocks must hold data before
/// reads reach the device), then syncs; `progress` gets the fraction done.
pub fn fill(file: &File, span: u64, progress: &mut dyn FnMut(f64)) -> io::Result<Measured> {
    const BLOCK: u64 = 1 << 20;
    let mut buf = AlignedBuf::new(BLOCK as usize, 11);
    let started = Instant::now();
    let mut lat = Vec::with_capacity((span / BLOCK) as usize);
    let mut last = 0.0;
    for i in 0..span / BLOCK {
        // A different first word per block, so that no two blocks are equal.
        buf.bytes_mut()[..8].copy_from_slice(&i.to_le_bytes());
        let t0 = Instant::now();
        file.write_all_at(buf.bytes(), i * BLOCK)?;
        lat.push(t0.elapsed().as_secs_f64() * 1e6);
        let done = (i + 1) as f64 * BLOCK as f64 / span as f64;
        if done - last >= 0.1 {
            progress(done);
            last = done;
        }
    }
    file.sync_all()?;
    Ok(finish("fill".into(), Op::Write, false, BLOCK, 1, false, lat, started.elapsed().as_secs_f64()))
}

/// The distances of the seek curve: 64 KiB, then ×4 up to half the span.
pub fn seek_distances(span: u64) -> Vec<u64> {
    std::iter::successors(Some(64u64 << 10), |d| Some(d * 4)).take_while(|&d| d <= span / 2).collect()
}

/// The jump of one pair in the bin of distance `d`: uniform in `[d, 1.5 d)`, 4 KiB-aligned,
/// so that over a bin the jump spans several tracks and the rotational wait after it is
/// uniform (a fixed jump would land at one fixed angle).
pub fn jump(rng: &mut Rng, d: u64) -> u64 {
    d + rng.below((d / 2 / ALIGN).max(1)) * ALIGN
}

/// For each distance bin `d`, pairs of 4 KiB reads: one at `x + j`, then, timed, one at `x`
/// (a backward jump, so a drive's read-ahead cannot serve it; `j` from [`jump`]), sharing
/// `duration` between the bins.
pub fn seek_curve(file: &File, span: u64, duration: Duration, seed: u64) -> io::Result<Vec<SeekPoint>> {
    let distances = seek_distances(span);
    let each = duration / distances.len().max(1) as u32;
    let mut buf = AlignedBuf::new(ALIGN as usize, seed);
    let mut rng = Rng::new(seed);
    let mut out = Vec::new();
    for &d in &distances {
        let slots = (span.saturating_sub(d + d / 2 + ALIGN) / ALIGN).max(1);
        let started = Instant::now();
        let mut lat = Vec::new();
        while started.elapsed() < each || lat.len() < 3 {
            let x = rng.below(slots) * ALIGN;
            file.read_exact_at(buf.bytes_mut(), x + jump(&mut rng, d))?;
            let t0 = Instant::now();
            file.read_exact_at(buf.bytes_mut(), x)?;
            lat.push(t0.elapsed().as_secs_f64() * 1e6);
        }
        let pairs = lat.len() as u64;
        let (mean_us, p50_us, _) = summary(lat);
        out.push(SeekPoint { distance: d, pairs, p50_us, mean_us });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_is_mean_median_and_tail() {
        let (mean, p50, p99) = summary((1..=100).map(f64::from).collect());
        assert!((mean - 50.5).abs() < 1e-9);
        assert_eq!(p50, 51.0);
        assert_eq!(p99, 99.0);
        assert_eq!(summary(Vec::new()), (0.0, 0.0, 0.0));
    }

    #[test]
    fn seek_distances_grow_by_four_up_to_half_the_span() {
        assert_eq!(seek_distances(1 << 20), vec![64 << 10, 256 << 10]);
        let d = seek_distances(4 << 30);
        assert_eq!(d.first(), Some(&(64 << 10)));
        assert!(d.iter().all(|&x| x <= 2 << 30));
        assert_eq!(d.len(), 8);
    }
}
