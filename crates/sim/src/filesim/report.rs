//! The end of a file simulation: background work drains, a final sync when asked, and the
//! report of the measured window.

use tierwise_core::{Clock, EngineStats};

use super::FileSim;
use crate::device::DeviceStats;
use crate::metrics::{HitRatios, SimReport};
use crate::sim::SimError;

impl FileSim {
    /// Ends the run: background work drains, a final sync when asked, and the report.
    pub fn finish(mut self) -> Result<SimReport, SimError> {
        self.drain()?;
        let end_ops = self.last_completion;
        if self.cfg.flush_at_end {
            self.now = self.clock.now().max(end_ops);
            self.runs = self.cache.take_all_dirty();
            self.runs.reverse();
            self.write_back_runs();
            self.engine.flush();
            self.work_buf.extend(self.engine.drain_work());
            self.start_works(self.now);
            self.drain()?;
        }
        let mut r = SimReport {
            build: crate::stamp::build(),
            arch: self.cfg.arch.clone(),
            trace: self.label.clone(),
            format: "file".into(),
            objects: "files".into(),
            timing: self.cfg.timing.label(),
            devices: self.cfg.devices.label(),
            ssd_bytes: self.cfg.ssd_bytes,
            footprint_bytes: self.cfg.footprint_bytes,
            ..SimReport::default()
        };
        let t = &self.tally;
        r.requests = t.ops;
        r.reads = t.reads;
        r.writes = t.writes;
        r.read_bytes = t.read_bytes;
        r.write_bytes = t.write_bytes;
        r.accesses = t.accesses;
        r.request_hits = t.fast_ops;
        r.request_misses = t.ops - t.fast_ops;
        r.read_hit = HitRatios::of(t.read_levels);
        let mut all = t.read_levels;
        for (a, w) in all.iter_mut().zip(t.write_levels) {
            *a += w;
        }
        r.access_hit = HitRatios::of(all);
        r.engine = stats_since(self.engine.stats(), &self.base_engine);
        r.arch_counters = self.engine.arch_counters().into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        r.arch_counters.insert("buffer-cache read hits".into(), t.ram_read_hits);
        r.arch_counters.insert("operations on unknown paths".into(), self.unknown_paths);
        if self.unknown_paths > 0 {
            r.notes.push(format!(
                "{} operations named paths that did not exist: reads and truncates adopted them as files \
                 already on the HDD, writes created them, deletes and renames were skipped",
                self.unknown_paths
            ));
        }
        if let Some(mut timed) = self.timed.take() {
            let end = self.clock.now().max(self.last_completion);
            let hdd = timed.dev.hdd.finish(end);
            let ssd = timed.dev.ssd.finish(end);
            r.latency = timed.hist.summary();
            r.duration_s = end_ops.saturating_sub(self.measure_start).as_secs_f64();
            if r.duration_s > 0.0 {
                r.iops = t.ops as f64 / r.duration_s;
                r.mb_s = (t.read_bytes + t.write_bytes) as f64 / 1e6 / r.duration_s;
            }
            r.energy_j = hdd.energy_j + ssd.energy_j;
            let elapsed = hdd.elapsed_ns.max(ssd.elapsed_ns) as f64 / 1e9;
            r.mean_power_w = if elapsed > 0.0 { r.energy_j / elapsed } else { 0.0 };
            r.hdd = device_since(&hdd, &self.base_hdd);
            r.ssd = device_since(&ssd, &self.base_ssd);
            r.endurance = crate::sim::endurance(self.cfg.read_weight, &self.cfg.devices, &hdd, &ssd);
            // Open loop: no cost per IOPS (see `timed`).
            let served_iops = if matches!(self.cfg.timing, crate::Timing::Open { .. }) { 0.0 } else { r.iops };
            r.cost = crate::sim::cost(
                &self.cfg.arch,
                self.cfg.ssd_bytes,
                self.cfg.footprint_bytes,
                served_iops,
                timed.dev.ssd.usd_per_gb(),
                timed.dev.hdd.device.usd_per_gb(),
            );
        }
        let usage = self.engine.usage();
        r.objects_tracked = usage.objects as u64;
        r.engine_memory_bytes = self.engine.memory_bytes() as u64;
        r.wall_s = self.wall.elapsed().as_secs_f64();
        Ok(r)
    }
}

/// Engine counters accumulated since `base`.
pub(crate) fn stats_since(now: &EngineStats, base: &EngineStats) -> EngineStats {
    let sub3 = |a: [u64; 3], b: [u64; 3]| std::array::from_fn(|i| a[i].saturating_sub(b[i]));
    let sub5 = |a: [u64; 5], b: [u64; 5]| std::array::from_fn(|i| a[i].saturating_sub(b[i]));
    EngineStats {
        reads: now.reads - base.reads,
        writes: now.writes - base.writes,
        metadata_ops: now.metadata_ops - base.metadata_ops,
        reads_by_level: sub3(now.reads_by_level, base.reads_by_level),
        writes_by_level: sub3(now.writes_by_level, base.writes_by_level),
        read_bytes_by_level: sub3(now.read_bytes_by_level, base.read_bytes_by_level),
        write_bytes_by_level: sub3(now.write_bytes_by_level, base.write_bytes_by_level),
        issued: sub5(now.issued, base.issued),
        done: sub5(now.done, base.done),
        failed: sub5(now.failed, base.failed),
        cancelled: sub5(now.cancelled, base.cancelled),
        bytes_moved: sub5(now.bytes_moved, base.bytes_moved),
    }
}

/// Device counters accumulated since `base` (energy and elapsed time stay whole-run).
pub(crate) fn device_since(now: &DeviceStats, base: &DeviceStats) -> DeviceStats {
    DeviceStats {
        reads: now.reads - base.reads,
        writes: now.writes - base.writes,
        read_bytes: now.read_bytes - base.read_bytes,
        write_bytes: now.write_bytes - base.write_bytes,
        busy_ns: now.busy_ns - base.busy_ns,
        response_ns: now.response_ns - base.response_ns,
        flushes: now.flushes - base.flushes,
        background_ns: now.background_ns - base.background_ns,
        ..*now
    }
}
