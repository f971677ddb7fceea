//! Seeded, reproducible synthetic block workloads (the same seed gives the same trace on every
//! machine and crate version: the generator and its PRNG are ours), and writing traces as
//! libCacheSim oracleGeneral binaries.

use std::io::Write;

use serde::{Deserialize, Serialize};

use crate::objects::Mapper;
use crate::sim::FoldHash;
use crate::trace::oracle_general::write_record;
use crate::trace::{IoOp, Trace, TraceError, TraceRecord};

/// SplitMix64: small, fast, well-distributed; used to seed and to draw.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x5DEE_CE66_D1CE_4E5B)
    }
    /// The next 64 random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    #[inline]
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Uniform in [0, n).
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }
}

/// Zipf over ranks 1..=n with exponent `alpha` (by inverse CDF: exact, O(log n) per draw).
#[derive(Clone, Debug)]
pub struct Zipf {
    cdf: Vec<f64>,
}

impl Zipf {
    /// The distribution; `n >= 1`, `alpha >= 0`.
    pub fn new(n: u64, alpha: f64) -> Zipf {
        let mut cdf = Vec::with_capacity(n as usize);
        let mut sum = 0.0;
        for r in 1..=n.max(1) {
            sum += (r as f64).powf(-alpha);
            cdf.push(sum);
        }
        for c in &mut cdf {
            *c /= sum;
        }
        Zipf { cdf }
    }
    /// A rank in 1..=n.
    #[inline]
    pub fn sample(&self, rng: &mut Rng) -> u64 {
        let u = rng.next_f64();
        self.cdf.partition_point(|&c| c < u) as u64 + 1
    }
}

/// A synthetic block workload.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ZipfWorkload {
    /// Requests.
    pub requests: u64,
    /// Distinct objects (ranks).
    pub objects: u64,
    /// Zipf exponent.
    pub alpha: f64,
    /// Bytes per request / object.
    pub size: u64,
    /// Share of writes (0..=1).
    pub write_fraction: f64,
    /// Mean requests per second of simulated time.
    pub rate: f64,
    /// Seed.
    pub seed: u64,
}

impl ZipfWorkload {
    /// Calls `f` with each record. Ranks are scattered over the address space (rank `r` lives
    /// at block `hash(r) % objects`) so hot objects are not adjacent on the disk.
    pub fn generate(&self, mut f: impl FnMut(&TraceRecord)) {
        let zipf = Zipf::new(self.objects, self.alpha);
        let mut rng = Rng::new(self.seed);
        let mut t = 0.0f64;
        let gap = if self.rate > 0.0 { 1e9 / self.rate } else { 0.0 };
        for _ in 0..self.requests {
            let rank = zipf.sample(&mut rng);
            let block = scatter(rank, self.objects);
            let op = if rng.next_f64() < self.write_fraction { IoOp::Write } else { IoOp::Read };
            // Poisson arrivals.
            t += -gap * (1.0 - rng.next_f64()).ln();
            let rec =
                TraceRecord { time_ns: t as u64, op, volume: 0, offset: block * self.size, len: self.size, key: block };
            f(&rec);
        }
    }
}

impl ZipfWorkload {
    /// Refuses parameters that generate nothing sensible, naming them.
    pub fn validate(&self) -> Result<(), String> {
        if self.objects == 0
            || self.size == 0
            || !(0.0..=1.0).contains(&self.write_fraction)
            || self.alpha.is_nan()
            || self.alpha < 0.0
        {
            return Err("objects and size must be positive, write_fraction within 0..=1, alpha >= 0".into());
        }
        Ok(())
    }

    /// Writes the workload to `path`: as MQSim ASCII (nanosecond times, reads and writes, 512-byte
    /// sectors) when the name contains `mqsim`, else as a libCacheSim oracleGeneral binary
    /// (whole seconds, object ids and sizes; every request a read).
    pub fn write(&self, path: &std::path::Path) -> std::io::Result<()> {
        let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
        let name = path.to_string_lossy().to_lowercase();
        if name.contains("mqsim") {
            let mut err = None;
            self.generate(|r| {
                let ty = u8::from(r.op == IoOp::Read);
                if let Err(e) = writeln!(out, "{} 0 {} {} {}", r.time_ns, r.offset / 512, r.len.div_ceil(512), ty) {
                    err.get_or_insert(e);
                }
            });
            if let Some(e) = err {
                return Err(e);
            }
        } else {
            let mut recs = Vec::with_capacity(self.requests as usize);
            let size = self.size.min(u64::from(u32::MAX)) as u32;
            self.generate(|r| recs.push(((r.time_ns / 1_000_000_000) as u32, r.key, size)));
            write_oracle_general(&recs, &mut out)?;
        }
        out.flush()
    }
}

/// A fixed permutation of 1..=n onto 0..n (a bijection for any n).
fn scatter(rank: u64, n: u64) -> u64 {
    // Feistel-free: multiply by an odd constant modulo the next power of two, cycle-walk into
    // range (a bijection on [0, 2^k) restricted to [0, n)).
    let bits = 64 - (n.max(2) - 1).leading_zeros();
    let mask = (1u64 << bits) - 1;
    let mut x = rank - 1;
    loop {
        x = (x.wrapping_mul(0x9E37_79B9_7F4A_7C15 | 1).wrapping_add(0x632B_E59B_D9B4_E019)) & mask;
        if x < n {
            return x;
        }
    }
}

/// Writes records as oracleGeneral. `next_access` of each record is the index of the next
/// request to the same object, or -1 (libCacheSim's convention), computed in a backward pass.
pub fn write_oracle_general(records: &[(u32, u64, u32)], out: &mut impl Write) -> std::io::Result<()> {
    let mut next = vec![-1i64; records.len()];
    let mut seen: hashbrown::HashMap<u64, i64, FoldHash> = hashbrown::HashMap::with_hasher(FoldHash);
    for (i, &(_, id, _)) in records.iter().enumerate().rev() {
        if let Some(&n) = seen.get(&id) {
            next[i] = n;
        }
        seen.insert(id, i as i64);
    }
    for (&(t, id, size), &n) in records.iter().zip(&next) {
        write_record(out, t, id, size, n)?;
    }
    Ok(())
}

/// Collects a trace as oracleGeneral records under `mapper` (one per object access), times in
/// seconds from the first request.
pub fn collect_objects(trace: &mut Trace, mapper: &Mapper) -> Result<Vec<(u32, u64, u32)>, TraceError> {
    let mut out = Vec::new();
    let mut t0 = None;
    let fixed = mapper.mode().object_size();
    trace.for_each(u64::MAX, |rec| -> Result<(), TraceError> {
        let start = *t0.get_or_insert(rec.time_ns);
        let t = (rec.time_ns.saturating_sub(start) / 1_000_000_000).min(u64::from(u32::MAX)) as u32;
        mapper.split(rec, |p| {
            let size = if fixed != 0 { fixed } else { p.req.len };
            out.push((t, p.req.obj.0, size.min(u64::from(u32::MAX)) as u32));
        });
        Ok(())
    })?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zipf_is_skewed_and_seeded() {
        let z = Zipf::new(1000, 1.0);
        let mut rng = Rng::new(1);
        let mut counts = vec![0u32; 1001];
        for _ in 0..100_000 {
            counts[z.sample(&mut rng) as usize] += 1;
        }
        // P(rank 1) = 1 / H(1000) ~ 0.1336.
        assert!((counts[1] as f64 / 1e5 - 0.1336).abs() < 0.01, "{}", counts[1]);
        assert!(counts[1] > counts[2] && counts[2] > counts[10]);
        let a: Vec<u64> = (0..5).map(|_| Rng::new(7).next_u64()).collect();
        assert!(a.windows(2).all(|w| w[0] == w[1]));
    }

    #[test]
    fn scatter_is_a_permutation() {
        for n in [1u64, 2, 7, 1000, 4096] {
            let mut seen = vec![false; n as usize];
            for r in 1..=n {
                let x = scatter(r, n);
                assert!(!seen[x as usize]);
                seen[x as usize] = true;
            }
        }
    }

    #[test]
    fn next_access_is_computed() {
        let mut buf = Vec::new();
        write_oracle_general(&[(0, 1, 4), (0, 2, 4), (1, 1, 4)], &mut buf).unwrap();
        let next = |i: usize| i64::from_le_bytes(buf[i * 24 + 16..i * 24 + 24].try_into().unwrap());
        assert_eq!((next(0), next(1), next(2)), (2, -1, -1));
    }
}
