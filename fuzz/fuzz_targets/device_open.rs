//! Fuzzes opening a served device on damaged images: a valid pair whose bytes the input
//! overwrites in places (superblocks, checkpoints, slots). Opening must succeed or fail with an
//! error, never panic; a device that opens must read back whole and pass its own checks.
#![no_main]

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use tierwise_block::backend::Dev;
use tierwise_block::{Backend, CreateOptions, MemBackend, ServeOptions, create, open};

fuzz_target!(|data: &[u8]| {
    let mem = Arc::new(MemBackend::new(0, 64 << 10));
    let spec = if data.first().is_some_and(|b| b & 1 == 1) { "cache:mode=write-back" } else { "greendm-tiering:es=4KiB" };
    if create(&*mem, &CreateOptions { spec: spec.into(), block_size: Some(4096), ssd_size: 32 << 10, hdd_size: None }).is_err()
    {
        return;
    }
    // Each 7-byte record: image, offset (u32), byte, count.
    for rec in data.get(1..).unwrap_or_default().chunks_exact(7) {
        let dev = if rec[0] & 1 == 0 { Dev::Ssd } else { Dev::Hdd };
        let len = mem.len(dev).unwrap_or(0);
        if len == 0 {
            continue;
        }
        let off = u64::from(u32::from_le_bytes([rec[1], rec[2], rec[3], rec[4]])) % len;
        let n = (u64::from(rec[6]) + 1).min(len - off) as usize;
        let _ = mem.write(dev, &vec![rec[5]; n], off);
    }
    if let Ok(dev) = open(mem as Arc<dyn Backend>, ServeOptions { spec: spec.into(), movers: 1, ..ServeOptions::default() }) {
        let mut all = vec![0u8; dev.size() as usize];
        let _ = dev.read(&mut all, 0);
        let _ = dev.check();
    }
});
