//! `calibrate` on real files under direct I/O: a scratch file is filled, measured and removed;
//! an existing file is only read unless asked; file systems without O_DIRECT and missing
//! paths are refused with a message that says why. (Numbers are not asserted: they are the
//! machine's; `scripts/calibrate-vs-fio.sh` compares them with fio's.)

#![expect(clippy::unwrap_used, reason = "a failing setup should stop the test loudly")]

use std::io::Write;
use std::path::Path;

use tierwise_calibrate::{CalibrateError, Kind, Op, Options, calibrate};
use tierwise_sim::device::Presets;

fn quick() -> Options {
    Options { size: Some(32 << 20), seconds: 0.2, depths: vec![1, 2], ..Options::default() }
}

/// A directory on the disk the build runs on (ext4 or xfs here; /tmp may be tmpfs elsewhere).
fn disk_dir() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

#[test]
fn a_scratch_file_is_filled_measured_fitted_and_removed() {
    let dir = disk_dir();
    let mut heard = Vec::new();
    let cal = calibrate(dir.path(), &Options { kind: Some(Kind::Ssd), ..quick() }, &mut |s| heard.push(s.to_string()))
        .unwrap();
    let names: Vec<&str> = cal.tests.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "fill",
            "seqread",
            "seqwrite",
            "seqread-inner",
            "randread-qd1",
            "randread-qd2",
            "randwrite-qd1",
            "randwrite-qd2",
            "randwrite-sync-qd1"
        ]
    );
    assert!(cal.tests.iter().all(|m| m.ops > 0 && m.iops > 0.0 && m.p99_us >= m.p50_us), "{:#?}", cal.tests);
    assert_eq!(cal.tests[0].ops, 32, "the fill writes every MiB once");
    assert!(cal.scratch && cal.span == 32 << 20);
    assert!(cal.write_cache_gain.is_some_and(|g| g > 0.0));
    assert!(!cal.seek.is_empty() && cal.seek.iter().all(|p| p.pairs >= 3));
    assert_eq!(cal.checks.len(), 5, "every random test has the model beside it");
    assert!(heard.iter().any(|s| s.contains("filled")), "{heard:?}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "the scratch file is removed");
    // The preset is a --devices file that loads as the kind it says.
    let toml = cal.preset_toml().unwrap();
    let p = Presets::with_overrides(&toml, "calibrated.toml").unwrap();
    let ssd = p.ssd("calibrated").unwrap();
    assert_eq!(ssd.capacity, "32MiB");
    assert!(ssd.description.contains("scratch file"), "{}", ssd.description);
    assert!(toml.contains("--ssd-model calibrated") && !toml.contains("[hdd"), "{toml}");
}

fn digest(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap()
}

#[test]
fn an_existing_file_is_only_read_unless_overwrite() {
    let dir = disk_dir();
    let path = dir.path().join("data.img");
    let mut f = std::fs::File::create(&path).unwrap();
    let block: Vec<u8> = (0..1u32 << 20).map(|i| (i % 251) as u8).collect();
    for _ in 0..20 {
        f.write_all(&block).unwrap();
    }
    f.sync_all().unwrap();
    let before = digest(&path);
    let cal = calibrate(&path, &Options { kind: Some(Kind::Ssd), ..quick() }, &mut |_| {}).unwrap();
    assert!(cal.tests.iter().all(|m| m.op == Op::Read), "{:?}", cal.tests);
    assert_eq!(cal.span, 20 << 20, "the whole file, not the 32 MiB asked");
    assert!(digest(&path) == before, "a read-only calibration changed the file");
    assert!(path.exists());
    let cal = calibrate(&path, &Options { kind: Some(Kind::Ssd), overwrite: true, ..quick() }, &mut |_| {}).unwrap();
    assert!(cal.tests.iter().any(|m| m.op == Op::Write));
    assert!(path.exists(), "an existing file is never removed");
}

#[test]
fn memory_is_measured_as_memory() {
    // Linux 6.6 and later take O_DIRECT on tmpfs (older kernels refuse it: NoDirectIo, which
    // is as good). Either way a result must not pass for a device's.
    let shm = tierwise_testkit::shm_dir("tierwise-calibrate").unwrap();
    match calibrate(shm.path(), &quick(), &mut |_| {}) {
        Ok(cal) => {
            assert!(cal.memory && cal.kind == Kind::Ssd, "{cal:?}");
            assert!(cal.kind_reason.contains("tmpfs"), "{}", cal.kind_reason);
        }
        Err(e) => assert!(matches!(e, CalibrateError::NoDirectIo(_)), "{e}"),
    }
    assert_eq!(std::fs::read_dir(shm.path()).unwrap().count(), 0, "nothing left behind");
}

#[test]
fn refusals_say_why() {
    let e = calibrate(Path::new("/nonexistent/disk"), &quick(), &mut |_| {}).unwrap_err().to_string();
    assert!(e.contains("/nonexistent/disk") && e.contains("give a directory"), "{e}");
    let dir = disk_dir();
    let e = calibrate(dir.path(), &Options { size: Some(1 << 20), ..quick() }, &mut |_| {}).unwrap_err().to_string();
    assert!(e.contains("at least 16 MiB"), "{e}");
    let e = calibrate(dir.path(), &Options { depths: vec![0], ..quick() }, &mut |_| {}).unwrap_err().to_string();
    assert!(e.contains("--depths"), "{e}");
    let e = calibrate(dir.path(), &Options { size: Some(1 << 50), ..quick() }, &mut |_| {}).unwrap_err().to_string();
    assert!(e.contains("free") && e.contains("--size"), "{e}");
}
