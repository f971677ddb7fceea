//! From measurements to a preset, and the preset's model run on the same tests: the checks
//! that were not used to fit it are the calibration's test of the model.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use tierwise_core::Nanos;
use tierwise_sim::device::{DevOp, DeviceSet, GcMode, Hdd, HddSpec, Model, QueueCurve, SsdSpec};
use tierwise_sim::sim::NoProgress;
use tierwise_sim::synth::Rng;
use tierwise_sim::trace::memory::memory_trace;
use tierwise_sim::trace::{IoOp, TraceRecord};
use tierwise_sim::{SimConfig, Timing, simulate};

use crate::measure::{Measured, Op, SeekPoint};
use crate::target::ALIGN;
use crate::{CalibrateError, Kind};

/// The measurement named `name`.
pub(crate) fn find<'a>(tests: &'a [Measured], name: &str) -> Option<&'a Measured> {
    tests.iter().find(|m| m.name == name)
}

/// The half-rotation, transfer and mean seek (seconds) a preset's QD1 random IOPS leave.
fn mean_seek(iops: f64, rpm: f64, mb_s: f64) -> f64 {
    1.0 / iops - 30.0 / rpm - ALIGN as f64 / (mb_s * 1e6)
}

/// An HDD preset from the measurements, over `base` (power, price, read-ahead, NCQ).
///
/// Sequential rates and QD1 random IOPS are taken as measured (the rates at the start of the
/// span are the outer zone's; `inner_rate_ratio` is the end's rate over them); write IOPS from the `O_DSYNC`
/// writes (media timings: the model's write cache serves the plain writes). The write cache is
/// on when plain QD1 random writes ran at least 1.5 times as fast as synchronous ones, else off
/// (a drive with `hdparm -W0`, or a file whose writes reach the media at once). The
/// track-to-track seek is solved from the shortest backward jump longer than a track, given
/// the model's seek law `t2t + k·sqrt(d / capacity)` with `k` from the random IOPS.
pub fn fit_hdd(
    tests: &[Measured],
    seek: &[SeekPoint],
    span: u64,
    base: &HddSpec,
    rpm: Option<f64>,
) -> Result<HddSpec, CalibrateError> {
    let mut spec = base.clone();
    spec.capacity = format!("{}MiB", span >> 20);
    spec.rpm = rpm.unwrap_or(base.rpm);
    if let Some(m) = find(tests, "seqread") {
        spec.read_mb_s = m.mb_s;
    }
    if let Some(m) = find(tests, "seqwrite").or_else(|| find(tests, "fill")) {
        spec.write_mb_s = m.mb_s;
    }
    if let (Some(outer), Some(inner)) = (find(tests, "seqread"), find(tests, "seqread-inner")) {
        // Zoned recording; a target whose end is no slower (a file, a flash device) is flat.
        spec.inner_rate_ratio =
            if outer.mb_s > 0.0 { ((inner.mb_s / outer.mb_s).clamp(0.05, 1.0) * 100.0).round() / 100.0 } else { 1.0 };
    }
    let qd1 = find(tests, "randread-qd1").ok_or_else(|| CalibrateError::Fit("no QD1 random reads measured".into()))?;
    spec.random_read_iops = qd1.iops;
    if let Some(m) = find(tests, "randwrite-sync-qd1") {
        spec.random_write_iops = m.iops;
        if let Some(plain) = find(tests, "randwrite-qd1") {
            spec.write_cache = plain.iops >= 1.5 * m.iops;
        }
    }
    round_hdd(&mut spec);
    let half_rot_us = 30.0 / spec.rpm * 1e6;
    for (what, iops, rate) in
        [("reads", spec.random_read_iops, spec.read_mb_s), ("writes", spec.random_write_iops, spec.write_mb_s)]
    {
        if mean_seek(iops, spec.rpm, rate) <= 0.0 {
            return Err(CalibrateError::Fit(format!(
                "random 4 KiB {what} take {:.0} µs on average, less than half a rotation at {} rpm ({half_rot_us:.0} µs): \
                 the target does not behave like a hard disk at that speed; calibrate it with --kind ssd, or give its --rpm",
                1e6 / iops,
                spec.rpm
            )));
        }
    }
    let m = mean_seek(spec.random_read_iops, spec.rpm, spec.read_mb_s);
    let track = spec.read_mb_s * 1e6 * 60.0 / spec.rpm;
    let t2t = seek
        .iter()
        .find(|p| p.distance as f64 > track && p.distance as f64 / (span as f64) < 0.2)
        .map(|p| {
            // The bin's jumps run from d to 1.5 d.
            let s = (1.25 * p.distance as f64 / span as f64).sqrt();
            let a = p.mean_us / 1e6 - 30.0 / spec.rpm - ALIGN as f64 / (spec.read_mb_s * 1e6);
            (a - 1.875 * m * s) / (1.0 - 1.875 * s)
        })
        .unwrap_or(base.track_to_track_ms / 1e3);
    let w = mean_seek(spec.random_write_iops, spec.rpm, spec.write_mb_s);
    spec.track_to_track_ms = (t2t.clamp(0.0, m.min(w)) * 1e6).floor() / 1e3;
    spec.validate().map_err(|e| CalibrateError::Fit(format!("the fitted HDD preset: {e}")))?;
    Ok(spec)
}

/// `v` to a multiple of `step` (presets are read by people).
fn round_to(v: f64, step: f64) -> f64 {
    ((v / step).round() * step * 1e3).round() / 1e3
}

/// Rounds an HDD preset's rates to what a measurement can tell apart; IOPS keep a decimal
/// (an HDD's hundred-odd IOPS set the seek slope).
fn round_hdd(spec: &mut HddSpec) {
    for v in [&mut spec.read_mb_s, &mut spec.write_mb_s, &mut spec.random_read_iops, &mut spec.random_write_iops] {
        *v = round_to(*v, 0.1);
    }
}

/// An SSD preset from the measurements, over `base` (power, price, endurance).
///
/// Sequential rates as measured (garbage collection included: `gc = "measured"`); the access
/// latencies from QD1 less the 4 KiB transfer (the model adds it back); the queue curve and the
/// IOPS ceilings from QD1 and the deepest random test (see [`queue_curve`]). The tests in
/// between are the check.
pub fn fit_ssd(tests: &[Measured], span: u64, base: &SsdSpec) -> Result<SsdSpec, CalibrateError> {
    let mut spec = base.clone();
    spec.capacity = format!("{}MiB", span >> 20);
    if let Some(m) = find(tests, "seqread") {
        spec.read_mb_s = m.mb_s;
    }
    if let Some(m) = find(tests, "seqwrite").or_else(|| find(tests, "fill")) {
        spec.write_mb_s = m.mb_s;
    }
    let deep_read = deepest(tests, Op::Read).ok_or_else(|| CalibrateError::Fit("no random reads measured".into()))?;
    let qd1_read = find(tests, "randread-qd1");
    spec.queue_curve = queue_curve(qd1_read, deep_read);
    // The rates were measured on the drive as it is: its garbage collection is in them.
    spec.gc = GcMode::Measured;
    spec.read_iops = ceiling(spec.queue_curve, qd1_read, deep_read);
    if let Some(w) = deepest(tests, Op::Write) {
        spec.write_iops = ceiling(spec.queue_curve, find(tests, "randwrite-qd1"), w);
    }
    let latency = |name: &str, rate: f64| {
        find(tests, name).map(|m| (m.mean_us - ALIGN as f64 / rate).max(0.0)) // µs: bytes / (MB/s)
    };
    if let Some(l) = latency("randread-qd1", spec.read_mb_s) {
        spec.read_latency_us = (l * 10.0).round() / 10.0;
    }
    if let Some(l) = latency("randwrite-qd1", spec.write_mb_s) {
        spec.write_latency_us = (l * 10.0).round() / 10.0;
    }
    for v in [&mut spec.read_mb_s, &mut spec.write_mb_s] {
        *v = round_to(*v, 0.1);
    }
    for v in [&mut spec.read_iops, &mut spec.write_iops] {
        *v = round_to(*v, 1.0);
    }
    spec.validate().map_err(|e| CalibrateError::Fit(format!("the fitted SSD preset: {e}")))?;
    Ok(spec)
}

/// The deepest random `op` test without `O_DSYNC`.
pub(crate) fn deepest(tests: &[Measured], op: Op) -> Option<&Measured> {
    tests.iter().filter(|m| m.random && m.op == op && !m.sync).max_by_key(|m| m.depth)
}

/// The share of linear scaling from QD1 the deepest test reached: its IOPS ÷ (depth × QD1's).
pub fn scaling(qd1: &Measured, deep: &Measured) -> f64 {
    deep.iops * qd1.mean_us / 1e6 / f64::from(deep.depth.max(1))
}

/// Which curve the reads follow: `knee` when the deepest test scaled almost linearly from QD1
/// (90 % or more; the saturating ceiling would be ten times the measured IOPS or more),
/// otherwise `saturating`. Both pass through QD1 and the deepest test; they differ in between,
/// where the checks measure which was right.
pub fn queue_curve(qd1: Option<&Measured>, deep: &Measured) -> QueueCurve {
    match qd1 {
        Some(q) if deep.depth > 1 && scaling(q, deep) < 0.9 => QueueCurve::Saturating,
        _ => QueueCurve::Knee,
    }
}

/// The IOPS ceiling `P` that puts `curve` through the deepest test: its IOPS under `knee`;
/// under `saturating`, `IOPS(D) = P·D / (D + P·L − 1)` solved for `P` (`L` the QD1 latency).
fn ceiling(curve: QueueCurve, qd1: Option<&Measured>, deep: &Measured) -> f64 {
    match (curve, qd1) {
        (QueueCurve::Saturating, Some(q)) if deep.depth > 1 => {
            let d = f64::from(deep.depth);
            deep.iops * (d - 1.0) / (d * (1.0 - scaling(q, deep)).max(0.1))
        }
        _ => deep.iops,
    }
}

/// A measured test beside the fitted model's result for the same requests.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Check {
    /// The measurement's name.
    pub test: String,
    /// Measured IOPS.
    pub measured_iops: f64,
    /// The model's IOPS.
    pub model_iops: f64,
    /// Model ÷ measured.
    pub ratio: f64,
    /// The preset was fitted to this test (agreement is by construction).
    pub fitted: bool,
    /// Why the two may differ, where the model leaves something out.
    pub note: String,
}

/// The requests of a random test, for the simulator.
fn random_records(m: &Measured, span: u64, n: usize, seed: u64) -> Arc<Vec<TraceRecord>> {
    let mut rng = Rng::new(seed);
    let slots = (span / m.block).max(1);
    let op = if m.op == Op::Read { IoOp::Read } else { IoOp::Write };
    Arc::new(
        (0..n)
            .map(|_| {
                let offset = rng.below(slots) * m.block;
                TraceRecord { op, offset, len: m.block, key: offset / 512, ..Default::default() }
            })
            .collect(),
    )
}

/// The simulator's IOPS for the requests of `m` on `devices` (HDD-only or SSD-only, closed
/// loop at the test's depth).
fn model_iops(m: &Measured, span: u64, kind: Kind, devices: &DeviceSet) -> Result<f64, CalibrateError> {
    let n = (m.ops as usize).clamp(2_000, 20_000);
    let arch = if kind == Kind::Hdd { "hdd-only" } else { "ssd-only" };
    let mut cfg = SimConfig::new(arch, span);
    cfg.devices = devices.clone();
    // A synchronous write ends on the media: the drive's write cache does not serve it.
    cfg.devices.hdd.write_cache &= !m.sync;
    cfg.timing = Timing::Closed { depth: m.depth };
    cfg.footprint_bytes = Some(span);
    let mut trace = memory_trace(random_records(m, span, n, 0xCA1), &m.name, false);
    Ok(simulate(&mut trace, &cfg, &mut NoProgress)?.iops)
}

/// Which tests a preset of `kind` was fitted to.
fn fitted(kind: Kind, m: &Measured, deepest: u32) -> bool {
    match kind {
        Kind::Hdd => m.depth == 1 && (m.op == Op::Read || m.sync),
        Kind::Ssd => !m.sync && (m.depth == 1 || m.depth == deepest),
    }
}

/// Every random test beside the fitted model's result for the same kind of requests.
pub fn checks(tests: &[Measured], span: u64, kind: Kind, devices: &DeviceSet) -> Result<Vec<Check>, CalibrateError> {
    let deepest = tests.iter().filter(|m| m.random).map(|m| m.depth).max().unwrap_or(1);
    let mut out = Vec::new();
    for m in tests.iter().filter(|m| m.random) {
        let model = model_iops(m, span, kind, devices)?;
        let note = match (kind, m.op, m.sync) {
            (Kind::Hdd, Op::Write, false) if devices.hdd.write_cache => {
                "write cache on: the model writes back in sweeps, a drive's firmware as it chooses"
            }
            (Kind::Ssd, Op::Write, true) => "the SSD model does not tell synchronous writes apart",
            (Kind::Hdd, _, _) if m.depth > 1 => "NCQ reorders; the model serves one command at a time",
            _ => "",
        };
        out.push(Check {
            test: m.name.clone(),
            measured_iops: m.iops,
            model_iops: model,
            ratio: if m.iops > 0.0 { model / m.iops } else { 0.0 },
            fitted: fitted(kind, m, deepest),
            note: note.into(),
        });
    }
    Ok(out)
}

/// The HDD model's median time for the seek curve's backward jumps (the same pairs as
/// measured, up to 200 per distance).
pub fn model_seek_curve(spec: &HddSpec, measured: &[SeekPoint], seed: u64) -> Result<Vec<SeekPoint>, CalibrateError> {
    let mut hdd = Hdd::new(spec).map_err(CalibrateError::Fit)?;
    let span = hdd.capacity();
    let mut rng = Rng::new(seed);
    let mut now = Nanos::ZERO;
    let mut out = Vec::new();
    for p in measured {
        let slots = (span.saturating_sub(p.distance + p.distance / 2 + ALIGN) / ALIGN).max(1);
        let mut lat = Vec::new();
        for _ in 0..p.pairs.clamp(3, 200) {
            let x = rng.below(slots) * ALIGN;
            let first = x + crate::measure::jump(&mut rng, p.distance);
            now = now.saturating_add(hdd.service(now, DevOp::Read, first, ALIGN).latency);
            let second = hdd.service(now, DevOp::Read, x, ALIGN).latency;
            now = now.saturating_add(second).saturating_add(Nanos(20_000));
            lat.push(second.0 as f64 / 1e3);
        }
        lat.sort_by(f64::total_cmp);
        let mean_us = lat.iter().sum::<f64>() / lat.len() as f64;
        out.push(SeekPoint { distance: p.distance, pairs: lat.len() as u64, p50_us: lat[lat.len() / 2], mean_us });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use tierwise_sim::device::Presets;

    use super::*;

    fn measured(name: &str, op: Op, depth: u32, sync: bool, iops: f64, mean_us: f64, block: u64) -> Measured {
        Measured {
            name: name.into(),
            op,
            random: name.starts_with("rand"),
            block,
            depth,
            sync,
            ops: 5_000,
            seconds: 1.0,
            iops,
            mb_s: iops * block as f64 / 1e6,
            mean_us,
            p50_us: mean_us,
            p99_us: mean_us,
        }
    }

    fn sequential(name: &str, op: Op, mb_s: f64) -> Measured {
        Measured { mb_s, ..measured(name, op, 1, false, mb_s / 1.048_576, 1e4, 1 << 20) }
    }

    const SPAN: u64 = 4 << 30;

    /// A 7200 rpm disk of 4 GiB with the WD5000AAKS's rates, known track-to-track seek.
    fn disk() -> HddSpec {
        let mut d = Presets::builtin().hdd("wd5000aaks").unwrap().clone();
        d.capacity = "4096MiB".into();
        d.random_read_iops = 140.0;
        d.random_write_iops = 120.0;
        d.track_to_track_ms = 1.5;
        d.inner_rate_ratio = 0.6;
        d
    }

    /// Measurements as the model of `d` itself would give them.
    fn measurements_of(d: &HddSpec) -> (Vec<Measured>, Vec<SeekPoint>) {
        let devices = DeviceSet { hdd: d.clone(), ..DeviceSet::default() };
        let probe = |name: &str, op, depth, sync| {
            let m = measured(name, op, depth, sync, 1.0, 1.0, 4096);
            let iops = model_iops(&m, SPAN, Kind::Hdd, &devices).unwrap();
            measured(name, op, depth, sync, iops, 1e6 / iops, 4096)
        };
        let tests = vec![
            sequential("seqread", Op::Read, d.read_mb_s),
            sequential("seqread-inner", Op::Read, d.read_mb_s * d.inner_rate_ratio),
            sequential("seqwrite", Op::Write, d.write_mb_s),
            probe("randread-qd1", Op::Read, 1, false),
            probe("randread-qd32", Op::Read, 32, false),
            probe("randwrite-sync-qd1", Op::Write, 1, true),
        ];
        let points: Vec<SeekPoint> = crate::measure::seek_distances(SPAN)
            .into_iter()
            .map(|distance| SeekPoint { distance, pairs: 200, p50_us: 0.0, mean_us: 0.0 })
            .collect();
        (tests, model_seek_curve(d, &points, 3).unwrap())
    }

    #[test]
    fn a_disk_measured_through_its_own_model_fits_back_to_it() {
        let d = disk();
        let (tests, seek) = measurements_of(&d);
        let base = Presets::builtin().hdd("wd5000aaks").unwrap().clone();
        let fit = fit_hdd(&tests, &seek, SPAN, &base, None).unwrap();
        // The seek law makes QD1 random IOPS over the whole span what the preset says.
        assert!((fit.random_read_iops / d.random_read_iops - 1.0).abs() < 0.05, "{fit:?}");
        assert!((fit.random_write_iops / d.random_write_iops - 1.0).abs() < 0.05, "{fit:?}");
        // 200 pairs of uniformly random rotational waits (8.3 ms) leave ~0.2 ms of noise
        // (1.26 ms fitted for 1.5 with this seed).
        assert!((fit.track_to_track_ms - d.track_to_track_ms).abs() < 0.4, "t2t {}", fit.track_to_track_ms);
        assert_eq!(fit.capacity, "4096MiB");
        assert_eq!(fit.inner_rate_ratio, 0.6, "zoned rate from the span's end");
        assert_eq!(fit.active_w, base.active_w, "power comes from the base preset");
        // NCQ at QD32 is not fitted: the checks run it, and the model agrees with itself.
        let devices = DeviceSet { hdd: fit, ..DeviceSet::default() };
        let checks = checks(&tests, SPAN, Kind::Hdd, &devices).unwrap();
        let qd32 = checks.iter().find(|c| c.test == "randread-qd32").unwrap();
        assert!(!qd32.fitted && (qd32.ratio - 1.0).abs() < 0.1, "{qd32:?}");
        assert!(checks.iter().find(|c| c.test == "randread-qd1").unwrap().fitted);
    }

    #[test]
    fn a_target_faster_than_half_a_rotation_is_no_disk() {
        let d = disk();
        let (mut tests, seek) = measurements_of(&d);
        for t in &mut tests {
            if t.name == "randread-qd1" {
                t.iops = 8_000.0;
            }
        }
        let e = fit_hdd(&tests, &seek, SPAN, &d, None).unwrap_err().to_string();
        assert!(e.contains("125 µs") && e.contains("--kind ssd") && e.contains("--rpm"), "{e}");
    }

    #[test]
    fn an_ssd_fits_its_latencies_and_ceilings() {
        let base = Presets::builtin().ssd("vertex3").unwrap().clone();
        let mut tests = vec![
            sequential("seqread", Op::Read, 2048.0),
            sequential("seqwrite", Op::Write, 4096.0),
            measured("randread-qd1", Op::Read, 1, false, 1e6 / 82.0, 82.0, 4096),
            measured("randread-qd32", Op::Read, 32, false, 370_000.0, 86.5, 4096),
            measured("randwrite-qd1", Op::Write, 1, false, 1e6 / 41.0, 41.0, 4096),
            measured("randwrite-qd32", Op::Write, 32, false, 740_000.0, 43.2, 4096),
        ];
        // QD32 reads reach 95 % of 32 × QD1: parallel flash, the knee.
        let fit = fit_ssd(&tests, SPAN, &base).unwrap();
        assert_eq!(fit.queue_curve, QueueCurve::Knee);
        assert_eq!(fit.gc, GcMode::Measured, "measured rates hold the drive's garbage collection");
        assert_eq!((fit.read_mb_s, fit.write_mb_s), (2048.0, 4096.0));
        assert_eq!((fit.read_iops, fit.write_iops), (370_000.0, 740_000.0));
        // 4096 bytes at 2048 MB/s is 2 µs of transfer, which the model adds back.
        assert_eq!((fit.read_latency_us, fit.write_latency_us), (80.0, 40.0));
        let devices = DeviceSet { ssd: fit, ..DeviceSet::default() };
        for c in checks(&tests, SPAN, Kind::Ssd, &devices).unwrap() {
            assert!(c.fitted && (c.ratio - 1.0).abs() < 0.02, "{c:?}");
        }
        // QD32 reads at 8 % of linear scaling: the saturating curve, through both points.
        tests[3] = measured("randread-qd32", Op::Read, 32, false, 30_000.0, 1000.0, 4096);
        tests[5] = measured("randwrite-qd32", Op::Write, 32, false, 60_000.0, 500.0, 4096);
        let fit = fit_ssd(&tests, SPAN, &base).unwrap();
        assert_eq!(fit.queue_curve, QueueCurve::Saturating);
        // P = 30,000 · 31 / (32 − 30,000 · 82 µs)
        assert_eq!(fit.read_iops, 31_483.0);
        let devices = DeviceSet { ssd: fit, ..DeviceSet::default() };
        for c in checks(&tests, SPAN, Kind::Ssd, &devices).unwrap() {
            assert!(c.fitted && (c.ratio - 1.0).abs() < 0.03, "{c:?}");
        }
    }
}
