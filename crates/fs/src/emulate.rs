//! Opt-in latency emulation of a tier (`--emulate-hdd PRESET`, `--emulate-ssd PRESET`): every
//! I/O on the tier's directory is held until the simulator's device model says it would have
//! completed (`tierwise_devices::realtime`), so tiering effects show on a machine whose two
//! directories are on one fast device. The HDD sits behind the simulator's request queue
//! (mq-deadline with NCQ by default, as a Linux host drives a SATA disk; `fifo`: one request at
//! a time in arrival order). A mount that emulates says so in `tierwise status`.

use tierwise_devices::realtime::Emulator as Device;
use tierwise_devices::{DevOp, QueueConfig};

/// Where a file's bytes start on the emulated device: each file gets its own 64 MiB region, so
/// requests to different files seek and sequential requests within one file do not.
const REGION: u64 = 64 << 20;

/// One emulated tier.
#[derive(Debug)]
pub struct Emulator {
    device: Device,
}

impl Emulator {
    /// An HDD from the simulator's presets, behind a request queue with `queue`.
    pub fn hdd(preset: &str, queue: QueueConfig) -> Result<Emulator, String> {
        Ok(Emulator { device: Device::hdd_queued(preset, queue)? })
    }

    /// An SSD from the simulator's presets.
    pub fn ssd(preset: &str) -> Result<Emulator, String> {
        Ok(Emulator { device: Device::ssd(preset)? })
    }

    /// What is emulated, for `status`.
    pub fn label(&self) -> &str {
        self.device.label()
    }

    /// Waits until a request of `len` bytes at `offset` of file `ino`, arriving now, would have
    /// completed on the emulated device.
    pub fn delay(&self, write: bool, ino: u64, offset: u64, len: u64) {
        let op = if write { DevOp::Write } else { DevOp::Read };
        self.device.wait(op, ino.wrapping_mul(REGION).wrapping_add(offset % REGION), len);
    }

    /// Holds the caller until a cache flush would have ended (an fsync's).
    pub fn flush(&self) {
        self.device.flush();
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;

    #[test]
    fn files_seek_on_an_emulated_hdd_and_an_unknown_preset_is_an_error() {
        let hdd = Emulator::hdd("wd5000aaks", QueueConfig::parse("fifo").unwrap_or_default())
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(hdd.label().contains("emulated"));
        let t = Instant::now();
        // Four random 4 KiB reads on a 7200 rpm disk take milliseconds each.
        for ino in [1, 1000, 20, 5000] {
            hdd.delay(false, ino, 0, 4096);
        }
        assert!(t.elapsed() >= Duration::from_millis(8), "{:?}", t.elapsed());
        let err = Emulator::hdd("nope", QueueConfig::default()).err().unwrap_or_default();
        assert!(err.contains("nope"), "{err}");
        assert!(Emulator::ssd("vertex3").is_ok());
    }
}
