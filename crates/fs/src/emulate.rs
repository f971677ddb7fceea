//! Opt-in latency emulation of a tier (`--emulate-hdd PRESET`, `--emulate-ssd PRESET`): every
//! I/O on the tier's directory is held until the simulator's device model says it would have
//! completed — one device, a FIFO queue, seeks that depend on the distance from the last
//! request — so tiering effects show on a machine whose two directories are on one fast device.
//! A mount that emulates says so in `tierwise status`.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use tierwise_core::Nanos;
use tierwise_devices::{DevOp, Device, Hdd, Presets, Ssd};

/// Where a file's bytes start on the emulated device: each file gets its own 64 MiB region, so
/// requests to different files seek and sequential requests within one file do not.
const REGION: u64 = 64 << 20;

/// One emulated device.
pub struct Emulator {
    label: String,
    device: Mutex<Device>,
    start: Instant,
}

impl Emulator {
    /// An HDD from the simulator's presets.
    pub fn hdd(preset: &str) -> Result<Emulator, String> {
        let presets = Presets::builtin();
        let spec = presets.hdd(preset).map_err(|e| e.to_string())?;
        let model = Hdd::new(spec)?;
        Ok(Emulator::new(format!("hdd {preset} (emulated: {})", spec.description), Box::new(model)))
    }

    /// An SSD from the simulator's presets.
    pub fn ssd(preset: &str) -> Result<Emulator, String> {
        let presets = Presets::builtin();
        let spec = presets.ssd(preset).map_err(|e| e.to_string())?;
        let model = Ssd::new(spec)?;
        Ok(Emulator::new(format!("ssd {preset} (emulated: {})", spec.description), Box::new(model)))
    }

    fn new(label: String, model: Box<dyn tierwise_devices::Model>) -> Emulator {
        // No spin-down: a mounted volume's disk stays spinning.
        Emulator { label, device: Mutex::new(Device::new(model, None)), start: Instant::now() }
    }

    /// What is emulated, for `status`.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// Waits until a request of `len` bytes at `offset` of file `ino`, arriving now, would have
    /// completed on the emulated device.
    pub fn delay(&self, write: bool, ino: u64, offset: u64, len: u64) {
        let op = if write { DevOp::Write } else { DevOp::Read };
        let now = Nanos(self.start.elapsed().as_nanos().min(u128::from(u64::MAX)) as u64);
        let addr = ino.wrapping_mul(REGION).wrapping_add(offset % REGION);
        let done = self.device.lock().unwrap_or_else(std::sync::PoisonError::into_inner).submit(now, op, addr, len);
        let wait = done.0.saturating_sub(now.0);
        if wait > 0 {
            std::thread::sleep(Duration::from_nanos(wait));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_emulated_hdd_is_slow_and_an_unknown_preset_is_an_error() {
        let hdd = Emulator::hdd("wd5000aaks").unwrap();
        assert!(hdd.label().contains("emulated"));
        let t = Instant::now();
        // Four random 4 KiB reads on a 7200 rpm disk take milliseconds each.
        for ino in [1, 1000, 20, 5000] {
            hdd.delay(false, ino, 0, 4096);
        }
        assert!(t.elapsed() >= Duration::from_millis(8), "{:?}", t.elapsed());
        let err = Emulator::hdd("nope").err().unwrap_or_default();
        assert!(err.contains("nope"), "{err}");
        assert!(Emulator::ssd("vertex3").is_ok());
    }
}
