//! Device models. [`Device`] does what every device shares — a one-at-a-time service queue,
//! power states with energy integration, HDD spin-down after an idle timeout with spin-up
//! latency and energy, and statistics — and asks its [`Model`] only for the service time of one
//! request (the NVI pattern of CacheLib's navy `Device`). The same models drive the simulator and
//! the opt-in latency emulation of the real front ends.

pub mod hdd;
mod hdd_write_cache;
mod hdd_zones;
pub mod presets;
pub mod queue;
pub mod queued;
pub mod ram;
pub mod realtime;
pub mod realtime_queue;
pub mod ssd;
mod ssd_gc;
pub mod tiers;

use serde::{Deserialize, Serialize};
use tierwise_core::Nanos;

pub use hdd::{Hdd, HddSpec};
pub use presets::{DeviceSet, PresetError, Presets};
pub use queue::{Class, DiskQueue, Dispatch, QueueConfig, Scheduler};
pub use queued::{DiskEvent, QueuedDisk};
pub use ram::{Ram, RamSpec};
pub use ssd::{GcMode, QueueCurve, Ssd, SsdSpec};
pub use tiers::{Submitted, TierDevices};

/// Read or write, as seen by a device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DevOp {
    /// Read.
    Read,
    /// Write.
    Write,
}

/// The cost of one request on a device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Service {
    /// How long the device is busy (no other request can start meanwhile).
    pub occupancy: Nanos,
    /// How long until the request completes, from its start (at least `occupancy`).
    pub latency: Nanos,
}

/// Power draw of a device.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Power {
    /// Watts while servicing requests.
    pub active_w: f64,
    /// Watts while idle (spinning, for an HDD).
    pub idle_w: f64,
    /// Watts in standby (spun down).
    pub standby_w: f64,
    /// Time to spin up from standby.
    pub spin_up: Nanos,
    /// Average watts while spinning up.
    pub spin_up_w: f64,
}

/// A device's service-time model. Implementations only compute; [`Device`] does the rest.
pub trait Model: Send {
    /// The service of one request of `len` bytes at byte address `addr` that the device starts
    /// at `start`, updating internal state such as the head position.
    fn service(&mut self, start: Nanos, op: DevOp, addr: u64, len: u64) -> Service;
    /// How long the device would spend positioning before transferring this request if it
    /// started it at `start` (what a drive's reordering minimises); no state changes.
    fn positioning(&self, _start: Nanos, _op: DevOp, _addr: u64, _len: u64) -> Nanos {
        Nanos::ZERO
    }
    /// Commands the device accepts at once and may reorder (1: in order).
    fn queue_depth(&self) -> u32 {
        1
    }
    /// The index of the command in `queued` that the device would start first at `start`: the
    /// shortest positioning time, the earliest on ties. One call per dispatch, so that a model
    /// can prune (an HDD skips the rotational part of commands whose seek alone is too long).
    fn shortest_positioning(&self, start: Nanos, queued: &[(DevOp, u64, u64)]) -> usize {
        let mut best = (Nanos(u64::MAX), 0);
        for (i, &(op, addr, len)) in queued.iter().enumerate() {
            let t = self.positioning(start, op, addr, len);
            if t < best.0 {
                best = (t, i);
            }
        }
        best.1
    }
    /// A FLUSH CACHE the device starts at `start`: completes once everything it acknowledged
    /// is on stable media (a drive with its write cache off: at once).
    fn flush(&mut self, _start: Nanos) -> Service {
        Service { occupancy: Nanos::ZERO, latency: Nanos::ZERO }
    }
    /// Media time spent on the device's own background work (a drive writing its cache back)
    /// while the host saw it idle, since the last call.
    fn take_background_ns(&mut self) -> u64 {
        0
    }
    /// Bytes programmed to flash since the last call (host writes times the write
    /// amplification of garbage collection); `None` for a device without flash.
    fn take_flash_write_bytes(&mut self) -> Option<u64> {
        None
    }
    /// Power figures.
    fn power(&self) -> Power;
    /// Price in US dollars per (decimal) GB.
    fn usd_per_gb(&self) -> f64;
    /// Whether the device can spin down.
    fn can_spin_down(&self) -> bool {
        false
    }
}

/// Statistics of one device over a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DeviceStats {
    /// Read requests.
    pub reads: u64,
    /// Write requests.
    pub writes: u64,
    /// Bytes read.
    pub read_bytes: u64,
    /// Bytes written.
    pub write_bytes: u64,
    /// Nanoseconds busy.
    pub busy_ns: u64,
    /// Sum of request response times (queueing + service), nanoseconds.
    pub response_ns: u64,
    /// Spin-downs (each is one start/stop cycle).
    pub spin_downs: u64,
    /// Spin-ups.
    pub spin_ups: u64,
    /// Nanoseconds in standby.
    pub standby_ns: u64,
    /// Nanoseconds spinning up.
    pub spin_up_ns: u64,
    /// Energy in joules (set by [`Device::finish`]).
    pub energy_j: f64,
    /// Length of the run in nanoseconds (set by [`Device::finish`]).
    pub elapsed_ns: u64,
    /// Requests merged into others before they reached the device (iostat's rrqm + wrqm).
    #[serde(default)]
    pub merged: u64,
    /// Cache flushes (FLUSH CACHE commands).
    #[serde(default)]
    pub flushes: u64,
    /// Nanoseconds the drive spent writing its write cache back while no command was in
    /// service (active, though `busy_ns` and iostat's utilisation do not see it).
    #[serde(default)]
    pub background_ns: u64,
    /// Bytes programmed to flash, garbage collection's copies included (an SSD's NAND
    /// writes; 0 for a disk).
    #[serde(default)]
    pub flash_write_bytes: u64,
}

impl DeviceStats {
    /// Mean response time per request (RTA), nanoseconds.
    pub fn mean_response_ns(&self) -> f64 {
        let n = self.reads + self.writes;
        if n == 0 { 0.0 } else { self.response_ns as f64 / n as f64 }
    }
    /// Utilisation over the run (0..1).
    pub fn utilisation(&self) -> f64 {
        if self.elapsed_ns == 0 { 0.0 } else { self.busy_ns as f64 / self.elapsed_ns as f64 }
    }
    /// Mean power over the run in watts.
    pub fn mean_power_w(&self) -> f64 {
        if self.elapsed_ns == 0 { 0.0 } else { self.energy_j / (self.elapsed_ns as f64 / 1e9) }
    }
}

/// A device: a model behind a FIFO service queue, with power states.
pub struct Device {
    model: Box<dyn Model>,
    power: Power,
    spin_down_after: Option<Nanos>,
    busy_until: Nanos,
    start: Option<Nanos>,
    stats: DeviceStats,
    /// Requests are rounded out to this many bytes, and a write covering a unit only partly
    /// reads it first (0 or 1: as given).
    align: u64,
}

impl Device {
    /// A device around `model`. `spin_down_after`: spin down after this long idle (HDDs only).
    pub fn new(model: Box<dyn Model>, spin_down_after: Option<Nanos>) -> Device {
        let power = model.power();
        let spin_down_after = spin_down_after.filter(|_| model.can_spin_down());
        Device {
            model,
            power,
            spin_down_after,
            busy_until: Nanos::ZERO,
            start: None,
            stats: DeviceStats::default(),
            align: 0,
        }
    }

    /// The device issued as an `O_DIRECT` front end issues it on `align`-byte units (0: as
    /// given): each request rounded out to whole units, and a write that covers its first or
    /// last unit only partly preceded by a read of that unit (read-modify-write), the write
    /// issued once the reads are back — what `tierwise serve --direct` does.
    #[must_use]
    pub fn with_align(mut self, align: u64) -> Device {
        self.align = align;
        self
    }

    /// Queues one request arriving at `now`; returns its completion time.
    #[inline]
    pub fn submit(&mut self, now: Nanos, op: DevOp, addr: u64, len: u64) -> Nanos {
        if self.align <= 1 || len == 0 {
            return self.submit_command(now, op, addr, len).1;
        }
        let a = self.align;
        let (start, end) = (addr / a * a, addr.saturating_add(len).div_ceil(a).saturating_mul(a));
        let mut read_done = None;
        if op == DevOp::Write {
            let (head, tail) = (start != addr, end != addr.saturating_add(len));
            if head {
                read_done = Some(self.submit_command(now, DevOp::Read, start, a).1);
            }
            if tail && (end - start > a || !head) {
                let done = self.submit_command(now, DevOp::Read, end - a, a).1;
                read_done = read_done.max(Some(done));
            }
        }
        // The write is issued once its reads are back. A disk is busy until then anyway (its
        // reads' occupancy is their latency); flash serves other commands meanwhile, so the
        // write takes its device time after the reads' and its latency after their answers.
        let (write_start, write_done) = self.submit_command(now, op, start, end - start);
        let Some(r) = read_done else { return write_done };
        let done = write_done.max(r.saturating_add(write_done.saturating_sub(write_start)));
        // The write's response time runs from its issue, when the reads are back.
        self.stats.response_ns =
            self.stats.response_ns.saturating_sub(write_done.0.saturating_sub(now.0)) + done.0.saturating_sub(r.0);
        done
    }

    /// One command to the model, arriving at `now`; returns when it starts and completes.
    #[inline]
    fn submit_command(&mut self, now: Nanos, op: DevOp, addr: u64, len: u64) -> (Nanos, Nanos) {
        if self.start.is_none() {
            self.start = Some(now);
            self.busy_until = now;
        }
        let mut start = now.max(self.busy_until);
        if let Some(timeout) = self.spin_down_after {
            let idle = start.saturating_sub(self.busy_until);
            if idle > timeout {
                // Spun down at busy_until + timeout; this request wakes it up.
                self.stats.spin_downs += 1;
                self.stats.spin_ups += 1;
                self.stats.standby_ns += idle.0 - timeout.0;
                self.stats.spin_up_ns += self.power.spin_up.0;
                start = start.saturating_add(self.power.spin_up);
            }
        }
        let s = self.model.service(start, op, addr, len);
        self.stats.background_ns += self.model.take_background_ns();
        if let Some(flash) = self.model.take_flash_write_bytes() {
            self.stats.flash_write_bytes += flash;
        }
        let done = start.saturating_add(s.latency);
        self.busy_until = start.saturating_add(s.occupancy);
        self.stats.busy_ns += s.occupancy.0;
        self.stats.response_ns += done.0.saturating_sub(now.0);
        match op {
            DevOp::Read => {
                self.stats.reads += 1;
                self.stats.read_bytes += len;
            }
            DevOp::Write => {
                self.stats.writes += 1;
                self.stats.write_bytes += len;
            }
        }
        (start, done)
    }

    /// A cache flush arriving at `now`, after the commands already started; returns when every
    /// write acknowledged before it is on stable media.
    pub fn flush(&mut self, now: Nanos) -> Nanos {
        if self.start.is_none() {
            self.start = Some(now);
            self.busy_until = now;
        }
        let start = now.max(self.busy_until);
        let s = self.model.flush(start);
        self.stats.background_ns += self.model.take_background_ns();
        self.busy_until = start.saturating_add(s.occupancy);
        self.stats.busy_ns += s.occupancy.0;
        self.stats.flushes += 1;
        start.saturating_add(s.latency)
    }

    /// Adds time requests spent queued before this device saw them (a scheduler's queue).
    pub fn add_queueing(&mut self, ns: u64) {
        self.stats.response_ns += ns;
    }

    /// How long the model would position before transferring this request at `start`.
    pub fn positioning(&self, start: Nanos, op: DevOp, addr: u64, len: u64) -> Nanos {
        self.model.positioning(start, op, addr, len)
    }

    /// The index of the command in `queued` the model would start first at `start`.
    pub fn shortest_positioning(&self, start: Nanos, queued: &[(DevOp, u64, u64)]) -> usize {
        self.model.shortest_positioning(start, queued)
    }

    /// Commands the model accepts at once and may reorder.
    pub fn queue_depth(&self) -> u32 {
        self.model.queue_depth()
    }

    /// When the queue drains.
    pub fn busy_until(&self) -> Nanos {
        self.busy_until
    }

    /// Closes the run at `end`: accounts a final idle period (and spin-down) and the energy.
    pub fn finish(&mut self, end: Nanos) -> DeviceStats {
        let start = self.start.unwrap_or(end);
        let end = end.max(self.busy_until);
        let mut st = self.stats;
        st.elapsed_ns = end.0.saturating_sub(start.0);
        if let Some(timeout) = self.spin_down_after {
            let tail = end.saturating_sub(self.busy_until);
            if tail > timeout {
                st.spin_downs += 1;
                st.standby_ns += tail.0 - timeout.0;
            }
        }
        st.energy_j = self.energy_j(&st);
        st
    }

    /// The energy of a stretch with these counters: busy, standby and spin-up time as counted,
    /// the rest of `elapsed_ns` idle.
    pub fn energy_j(&self, st: &DeviceStats) -> f64 {
        let secs = |ns: u64| ns as f64 / 1e9;
        let active_ns = st.busy_ns + st.background_ns;
        let idle_ns = st.elapsed_ns.saturating_sub(active_ns + st.standby_ns + st.spin_up_ns);
        secs(active_ns) * self.power.active_w
            + secs(idle_ns) * self.power.idle_w
            + secs(st.standby_ns) * self.power.standby_w
            + secs(st.spin_up_ns) * self.power.spin_up_w
    }

    /// Statistics so far (energy not yet computed).
    pub fn stats(&self) -> &DeviceStats {
        &self.stats
    }

    /// Price per GB of the model.
    pub fn usd_per_gb(&self) -> f64 {
        self.model.usd_per_gb()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn aligned_ssd(align: u64) -> Device {
        let spec = Presets::builtin().ssd("vertex3").unwrap();
        Device::new(Box::new(Ssd::new(&spec).unwrap()), None).with_align(align)
    }

    #[test]
    fn direct_io_rounds_requests_out_and_reads_partial_blocks_before_writing_them() {
        let mut d = aligned_ssd(4096);
        // A 512-byte read is a 4 KiB read of its block.
        d.submit(Nanos::ZERO, DevOp::Read, 4096 + 512, 512);
        assert_eq!((d.stats().reads, d.stats().read_bytes), (1, 4096));
        // A write over parts of two blocks reads both, then writes both.
        let at = Nanos::from_millis(1);
        let done = d.submit(at, DevOp::Write, 8192 + 4000, 200);
        assert_eq!((d.stats().reads, d.stats().read_bytes), (3, 3 * 4096));
        assert_eq!((d.stats().writes, d.stats().write_bytes), (1, 8192));
        // The write waits for its reads: later than the write alone.
        let mut plain = aligned_ssd(0);
        assert!(done > plain.submit(at, DevOp::Write, 8192, 8192));
        // Flash serves others meanwhile: a read sent at the same instant is back first.
        assert!(d.submit(at, DevOp::Read, 1 << 30, 4096) < done);
        // Within one block: one read; whole blocks: none.
        d.submit(Nanos::from_millis(2), DevOp::Write, 100, 100);
        d.submit(Nanos::from_millis(3), DevOp::Write, 1 << 20, 16384);
        assert_eq!((d.stats().reads, d.stats().writes, d.stats().write_bytes), (5, 3, 8192 + 4096 + 16384));
        // Unaligned device: as given.
        plain.submit(Nanos::from_millis(4), DevOp::Read, 100, 512);
        assert_eq!(plain.stats().read_bytes, 512);
    }
}
