//! The three levels an event loop times I/O on (RAM, SSD, the HDD behind its queue), built from
//! one [`DeviceSet`] and dispatched one way, for the block and the file simulators alike.

use tierwise_core::{Level, Nanos};

use super::{Class, DevOp, Device, DeviceSet, DiskEvent, Hdd, QueueConfig, QueuedDisk, Ram, Ssd};

/// When an I/O submitted to a level is done, as the event loop must schedule it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Submitted {
    /// The SSD and RAM serve in arrival order: done at this time.
    At(Nanos),
    /// The HDD queues it: schedule this disk event (if any); the I/O's token comes back from
    /// [`QueuedDisk::complete`].
    Disk(Option<DiskEvent>),
}

/// RAM, SSD and the queued HDD.
pub struct TierDevices {
    /// The HDD and its queue.
    pub hdd: QueuedDisk,
    /// The SSD.
    pub ssd: Device,
    /// RAM.
    pub ram: Ram,
}

impl TierDevices {
    /// The devices of `set`; the HDD spins down after `spin_down` idle, behind a `queue`.
    pub fn new(set: &DeviceSet, spin_down: Option<Nanos>, queue: QueueConfig) -> Result<TierDevices, String> {
        let slow: Box<dyn super::Model> = match &set.hdd_flash {
            Some(f) => Box::new(Ssd::new(f).map_err(|e| format!("hdd {}: {e}", set.hdd_name))?),
            None => Box::new(Hdd::new(&set.hdd).map_err(|e| format!("hdd {}: {e}", set.hdd_name))?),
        };
        let ssd = Ssd::new(&set.ssd).map_err(|e| format!("ssd {}: {e}", set.ssd_name))?;
        let ram = Ram::new(&set.ram).map_err(|e| format!("ram {}: {e}", set.ram_name))?;
        Ok(TierDevices {
            hdd: QueuedDisk::new(Device::new(slow, spin_down).with_align(set.io_align), queue),
            ssd: Device::new(Box::new(ssd), None).with_align(set.io_align),
            ram,
        })
    }

    /// Submits one I/O at `now` to `level`; `token` identifies it when the HDD completes it.
    pub fn submit(&mut self, now: Nanos, level: Level, io: (DevOp, u64, u64), class: Class, token: u64) -> Submitted {
        let (op, addr, len) = io;
        match level {
            Level::Fast => Submitted::At(self.ssd.submit(now, op, addr, len)),
            Level::Ram => Submitted::At(now.saturating_add(self.ram.latency(len))),
            Level::Slow => Submitted::Disk(self.hdd.submit(now, io, class, token)),
        }
    }
}
