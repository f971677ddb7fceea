//! Opt-in latency emulation (`tierwise serve --emulate-hdd PRESET`, `--emulate-ssd PRESET`):
//! each I/O on an image is held until the simulator's device model says it would have
//! completed, at the image's own addresses, so tiering effects show on a machine whose two
//! images sit on one fast device. The HDD sits behind the simulator's request queue
//! (`--hdd-queue`: mq-deadline with NCQ by default, as a Linux host drives a SATA disk; `fifo`
//! serves one request at a time in arrival order); the SSD serves in arrival order. A device
//! that emulates says so in its stats.

use std::io;

use tierwise_devices::realtime::Emulator;
use tierwise_devices::{DevOp, QueueConfig};

use crate::backend::{Backend, Dev};

/// A backend whose images answer at an emulated device's speed.
pub struct Emulated {
    inner: Box<dyn Backend>,
    /// Indexed by `Dev`.
    devices: [Option<Emulator>; 2],
    labels: Vec<String>,
}

impl std::fmt::Debug for Emulated {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Emulated").field("labels", &self.labels).finish()
    }
}

impl Emulated {
    /// Wraps `inner`, emulating the HDD and/or SSD presets given (`tierwise list devices`),
    /// the HDD behind a request queue with `hdd_queue`.
    pub fn new(
        inner: Box<dyn Backend>,
        hdd: Option<&str>,
        ssd: Option<&str>,
        hdd_queue: QueueConfig,
    ) -> Result<Emulated, String> {
        let hdd = hdd.map(|p| Emulator::hdd_queued(p, hdd_queue)).transpose()?;
        let ssd = ssd.map(Emulator::ssd).transpose()?;
        let labels = [&hdd, &ssd].into_iter().flatten().map(|e| e.label().to_string()).collect();
        Ok(Emulated { inner, devices: [ssd, hdd], labels })
    }

    /// What is emulated, for stats.
    pub fn labels(&self) -> &[String] {
        &self.labels
    }

    /// Each emulated device's label and what it has done so far.
    pub fn device_stats(&self) -> Vec<(String, tierwise_devices::DeviceStats)> {
        self.devices.iter().flatten().map(|e| (e.label().to_string(), e.stats())).collect()
    }

    fn delay(&self, dev: Dev, op: DevOp, addr: u64, len: u64) {
        if let Some(d) = &self.devices[dev as usize] {
            d.wait(op, addr, len);
        }
    }
}

impl Backend for Emulated {
    fn read(&self, dev: Dev, buf: &mut [u8], off: u64) -> io::Result<()> {
        self.inner.read(dev, buf, off)?;
        self.delay(dev, DevOp::Read, off, buf.len() as u64);
        Ok(())
    }
    fn write(&self, dev: Dev, buf: &[u8], off: u64) -> io::Result<()> {
        self.inner.write(dev, buf, off)?;
        self.delay(dev, DevOp::Write, off, buf.len() as u64);
        Ok(())
    }
    fn sync(&self, dev: Dev) -> io::Result<()> {
        self.inner.sync(dev)?;
        // A sync is a cache flush on the emulated drive: its write cache written back.
        if let Some(d) = &self.devices[dev as usize] {
            d.flush();
        }
        Ok(())
    }
    fn discard(&self, dev: Dev, off: u64, len: u64) -> io::Result<()> {
        self.inner.discard(dev, off, len)
    }
    fn len(&self, dev: Dev) -> io::Result<u64> {
        self.inner.len(dev)
    }
    fn grow(&self, dev: Dev, len: u64) -> io::Result<()> {
        self.inner.grow(dev, len)
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;
    use crate::backend::MemBackend;

    #[test]
    fn an_emulated_hdd_takes_milliseconds_for_a_random_read_and_the_ssd_stays_fast() {
        let e = Emulated::new(
            Box::new(MemBackend::new(1 << 20, 64 << 20)),
            Some("wd5000aaks"),
            None,
            QueueConfig::parse("fifo").unwrap_or_default(),
        )
        .unwrap_or_else(|err| panic!("{err}"));
        assert_eq!(e.labels().len(), 1);
        let mut buf = vec![0u8; 4096];
        let t = Instant::now();
        for i in 0..5u64 {
            e.read(Dev::Hdd, &mut buf, (i * 7_919 % 13) * (4 << 20)).unwrap_or_else(|err| panic!("{err}"));
        }
        let hdd = t.elapsed();
        let t = Instant::now();
        for i in 0..5u64 {
            e.read(Dev::Ssd, &mut buf, i * 4096).unwrap_or_else(|err| panic!("{err}"));
        }
        assert!(hdd > Duration::from_millis(10), "five random HDD reads took {hdd:?}");
        let stats = e.device_stats();
        assert_eq!(stats.len(), 1, "only the HDD is emulated");
        assert_eq!((stats[0].1.reads, stats[0].1.read_bytes), (5, 5 * 4096));
        assert!(stats[0].1.busy_ns > 10_000_000, "{:?}", stats[0].1);
        assert!(t.elapsed() < hdd / 10, "the SSD is not emulated: {:?}", t.elapsed());
        assert!(
            Emulated::new(
                Box::new(MemBackend::new(1, 1)),
                Some("no-such-disk"),
                None,
                QueueConfig::parse("fifo").unwrap_or_default()
            )
            .is_err()
        );
    }
}
