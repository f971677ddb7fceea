//! The policy is kept with the data: the superblock records it with every knob, a restart
//! without a policy runs it, another one is refused unless changing it is asked for, and a
//! change writes every dirty block back to the HDD first (the new policy starts with an empty
//! SSD, as bcache does after a detach).

use std::sync::Arc;

use tierwise_block::backend::Dev;
use tierwise_block::{
    Backend, CreateOptions, DeviceError, MemBackend, ServeOptions, change_policy, choose_policy, create, open,
};

const HDD: u64 = 4 << 20;
const SSD: u64 = 1 << 20;

fn pattern(off: u64) -> u8 {
    (off.wrapping_mul(2_654_435_761) >> 11) as u8
}

#[test]
fn a_write_back_device_restarted_without_a_policy_stays_write_back_and_a_change_writes_back_first() {
    let mem = Arc::new(MemBackend::new(SSD + (1 << 20), HDD));
    let sb = create(
        &*mem,
        &CreateOptions { spec: "cache:mode=write-back".into(), block_size: None, ssd_size: SSD, hdd_size: Some(HDD) },
    )
    .unwrap_or_else(|e| panic!("create: {e}"));
    assert!(
        sb.spec.starts_with("cache:") && sb.spec.contains("mode=write-back") && sb.spec.contains("collector="),
        "every knob recorded: {}",
        sb.spec
    );
    // Restarted without a policy: the recorded one.
    let (spec, change) = choose_policy(&*mem, None, false).unwrap_or_else(|e| panic!("choose: {e}"));
    assert!(!change && tierwise_core::same_policy(&spec, "cache:mode=write-back"), "{spec}");
    let dev = open(mem.clone() as Arc<dyn Backend>, ServeOptions { spec: spec.clone(), ..ServeOptions::default() })
        .unwrap_or_else(|e| panic!("open: {e}"));
    let data: Vec<u8> = (0..256 << 10).map(pattern).collect();
    dev.write(&data, 0, false).unwrap_or_else(|e| panic!("write: {e}"));
    dev.flush().unwrap_or_else(|e| panic!("flush: {e}"));
    assert!(dev.stats().dirty_bytes > 0, "write-back keeps the writes dirty on the SSD");
    dev.shutdown().unwrap_or_else(|e| panic!("shutdown: {e}"));
    drop(dev);
    assert_ne!(&mem.image(Dev::Hdd)[..data.len()], &data[..], "dirty data is not on the HDD yet");
    // Another policy is refused, naming the recorded one, and changes nothing.
    let before = (mem.image(Dev::Ssd), mem.image(Dev::Hdd));
    match choose_policy(&*mem, Some("cache:mode=write-through"), false) {
        Err(DeviceError::PolicyMismatch { stored, .. }) => assert!(stored.contains("mode=write-back"), "{stored}"),
        other => panic!("a different policy must be refused: {other:?}"),
    }
    let refused = open(
        mem.clone() as Arc<dyn Backend>,
        ServeOptions { spec: "cache:mode=write-through".into(), ..ServeOptions::default() },
    );
    assert!(matches!(refused, Err(DeviceError::PolicyMismatch { .. })), "open refuses it too");
    assert!((mem.image(Dev::Ssd), mem.image(Dev::Hdd)) == before, "a refused start changed the images");
    // Changing it on purpose: the dirty blocks reach the HDD, then the new policy runs.
    let (spec, change) = choose_policy(&*mem, Some("cache:mode=write-through"), true).unwrap_or_else(|e| panic!("{e}"));
    assert!(change);
    change_policy(&*mem, &spec).unwrap_or_else(|e| panic!("change: {e}"));
    assert_eq!(&mem.image(Dev::Hdd)[..data.len()], &data[..], "the change wrote the dirty data back");
    let dev = open(mem.clone() as Arc<dyn Backend>, ServeOptions { spec: spec.clone(), ..ServeOptions::default() })
        .unwrap_or_else(|e| panic!("open after the change: {e}"));
    let mut back = vec![0u8; data.len()];
    dev.read(&mut back, 0).unwrap_or_else(|e| panic!("read: {e}"));
    assert_eq!(back, data);
    dev.shutdown().unwrap_or_else(|e| panic!("shutdown: {e}"));
    let (now, _) = choose_policy(&*mem, None, false).unwrap_or_else(|e| panic!("{e}"));
    assert!(now.contains("mode=write-through"), "the new policy is recorded: {now}");
    // A layout the device cannot take is refused before anything is written.
    let before = (mem.image(Dev::Ssd), mem.image(Dev::Hdd));
    assert!(change_policy(&*mem, "linear").is_err());
    assert!((mem.image(Dev::Ssd), mem.image(Dev::Hdd)) == before);
}
