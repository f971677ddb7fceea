//! An SSD's garbage collection, as the write amplification it costs.
//!
//! Flash is programmed a page at a time but erased a block at a time, so a drive writes out of
//! place and reclaims blocks by copying their still-valid pages elsewhere first. Under uniform
//! random writes to `U` bytes of live data on `T` bytes of flash (`α = T / U`), cleaning the
//! least recently written block (LRW) finds a fraction `x` of it still valid where
//! `x = exp(−α (1 − x))`, and every host byte costs `A = 1 / (1 − x)` bytes of flash writes
//! (Desnoyers, "Analytic modeling of SSD write performance", SYSTOR 2012; greedy cleaning does
//! slightly better under uniform traffic, much better under skew, which this leaves out).
//! At the default ~7 % spare (α = 1.07) `A` is 7.8; at 28 % 2.5; a drive whose data fills a
//! quarter of it writes each byte 1.02 times.
//!
//! The live data is what the run has written: the highest address written (caches allocate
//! from the start of their share); the rest of the drive is taken as trimmed, as after the
//! `blkdiscard` that bcache's and lvmcache's setup guides run. A drive fresh out of the box has
//! all its flash erased and collects nothing until the host has written it once over.

use super::ssd::{GcMode, SsdSpec};

/// Garbage-collection state of one drive.
#[derive(Clone, Debug)]
pub(crate) struct Collector {
    /// Raw flash, bytes.
    nand: u64,
    /// The drive's capacity: the most live data it can hold.
    capacity: u64,
    /// Erased flash not yet programmed (fresh out of the box), bytes; 0 in steady state.
    erased: u64,
    /// Whether collection adds to the preset's rates at all.
    on: bool,
    /// The highest byte written so far: the live data.
    live: u64,
    /// The live data the amplification was last computed for, and that amplification.
    computed_for: u64,
    amplification: f64,
    /// Flash bytes written since the last [`Collector::take_flash_bytes`].
    flash_bytes: f64,
}

impl Collector {
    /// The collector of a drive of `capacity` bytes (its spec validated).
    pub(crate) fn new(spec: &SsdSpec, capacity: u64) -> Result<Collector, String> {
        let nand = spec.nand_bytes()?;
        Ok(Collector {
            nand,
            capacity,
            erased: if spec.gc == GcMode::Fresh { nand } else { 0 },
            on: spec.gc != GcMode::Measured,
            live: 0,
            computed_for: 0,
            amplification: 1.0,
            flash_bytes: 0.0,
        })
    }

    /// A host write of `[addr, addr + len)`: returns its write amplification.
    #[inline]
    pub(crate) fn write(&mut self, addr: u64, len: u64) -> f64 {
        let end = addr.saturating_add(len).min(self.capacity);
        if end > self.live {
            self.live = end;
            // Recomputed as the live data grows by 1/1024: the amplification changes slowly.
            if self.live - self.computed_for > self.computed_for / 1024 {
                self.computed_for = self.live;
                self.amplification = amplification(self.nand as f64 / self.live.max(1) as f64);
            }
        }
        let a = if !self.on {
            1.0
        } else if self.erased >= len {
            self.erased -= len;
            1.0
        } else {
            self.erased = 0;
            self.amplification
        };
        self.flash_bytes += len as f64 * a;
        a
    }

    /// Flash bytes written since the last call (host writes times their amplification).
    pub(crate) fn take_flash_bytes(&mut self) -> u64 {
        let whole = self.flash_bytes.floor();
        self.flash_bytes -= whole;
        whole as u64
    }
}

/// LRW cleaning's write amplification under uniform random writes with `alpha` = flash / live
/// data: `1 / (1 − x)` for the root `x < 1` of `x = exp(−α (1 − x))`.
pub(crate) fn amplification(alpha: f64) -> f64 {
    if alpha.is_nan() || alpha <= 1.0 {
        return f64::INFINITY;
    }
    let g = |x: f64| x - (-alpha * (1.0 - x)).exp();
    // g(0) < 0 and g is largest (and positive: x = 1 is the other root) at 1 − ln(α) / α.
    let (mut lo, mut hi) = (0.0, 1.0 - alpha.ln() / alpha);
    for _ in 0..60 {
        let mid = 0.5 * (lo + hi);
        if g(mid) < 0.0 { lo = mid } else { hi = mid }
    }
    1.0 / (1.0 - lo)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amplification_follows_the_spare_flash() {
        // Desnoyers' LRW curve: worse with less spare, 1 with plenty.
        let at = |spare: f64| amplification(1.0 + spare);
        assert!((at(0.07) - 7.82).abs() < 0.01, "{}", at(0.07));
        assert!((at(0.28) - 2.48).abs() < 0.01, "{}", at(0.28));
        assert!(at(3.0) < 1.03, "{}", at(3.0));
        let mut last = f64::INFINITY;
        for spare in [0.01, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0] {
            let a = at(spare);
            assert!(a < last && a >= 1.0, "{spare}: {a}");
            // The fixed point holds.
            let x = 1.0 - 1.0 / a;
            assert!((x - (-(1.0 + spare) * (1.0 - x)).exp()).abs() < 1e-9);
            last = a;
        }
        assert!(amplification(1.0).is_infinite());
    }

    fn spec(capacity: &str, nand: &str, gc: GcMode) -> SsdSpec {
        let mut s = crate::Presets::builtin().ssd("vertex3").unwrap().clone();
        s.capacity = capacity.into();
        s.nand_capacity = Some(nand.into());
        s.gc = gc;
        s
    }

    fn collector(spec: &SsdSpec) -> Result<Collector, String> {
        Collector::new(spec, spec.validate()?)
    }

    #[test]
    fn a_full_drive_amplifies_an_emptier_one_less_and_a_fresh_one_only_once_its_flash_is_used() {
        let gib = 1u64 << 30;
        let mut full = collector(&spec("1GiB", "1.25GiB", GcMode::Steady)).unwrap();
        let a_full = full.write(gib - 4096, 4096);
        assert!((a_full - amplification(1.25)).abs() < 1e-9 && a_full > 2.0, "{a_full}");
        let mut quarter = collector(&spec("1GiB", "1.25GiB", GcMode::Steady)).unwrap();
        assert!(quarter.write(gib / 4 - 4096, 4096) < 1.05);
        // Fresh: the first 1.25 GiB of writes program erased flash.
        let mut fresh = collector(&spec("1GiB", "1.25GiB", GcMode::Fresh)).unwrap();
        let mut flash = 0;
        for i in 0..(5 * gib / 4 / (1 << 20)) {
            assert_eq!(fresh.write((i << 20) % gib, 1 << 20), 1.0);
            flash += fresh.take_flash_bytes();
        }
        assert_eq!(flash, 5 * gib / 4);
        let a = fresh.write(0, 1 << 20);
        assert!((a / a_full - 1.0).abs() < 0.01, "{a} for {a_full}");
        assert_eq!(fresh.take_flash_bytes(), ((1u64 << 20) as f64 * a).floor() as u64);
        // Measured rates already hold the collection: flash bytes are host bytes.
        let mut measured = collector(&spec("1GiB", "1.25GiB", GcMode::Measured)).unwrap();
        assert_eq!(measured.write(gib - 4096, 4096), 1.0);
    }

    #[test]
    fn flash_no_larger_than_the_capacity_is_refused() {
        let e = collector(&spec("1GiB", "1GiB", GcMode::Steady)).unwrap_err();
        assert!(e.contains("nand_capacity"), "{e}");
    }
}
