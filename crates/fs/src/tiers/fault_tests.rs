//! The move protocol under injected faults: every failure leaves the file whole, on exactly the
//! tier it started from; every crash point leaves what the scan at the next mount resolves.

use std::fs;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::sync::Arc;

use tierwise_core::Tier;

use super::backend::{Crashed, Fault, Faulty, Step};
use super::{COPY_CHUNK, Tiers};

const REL: &str = "d/e/f";
const EIO: i32 = nix::libc::EIO;

/// 2.5 copy chunks of a pattern, so a copy takes several writes.
fn data() -> Vec<u8> {
    (0..COPY_CHUNK * 5 / 2).map(|i| (i * 7 + i / 4093) as u8).collect()
}

/// An SSD, an HDD holding `d/e/f`, and a mountpoint.
fn setup() -> [tempfile::TempDir; 3] {
    let dirs: [tempfile::TempDir; 3] = std::array::from_fn(|_| tempfile::tempdir().unwrap());
    fs::create_dir_all(dirs[1].path().join("d/e")).unwrap();
    fs::write(dirs[1].path().join(REL), data()).unwrap();
    dirs
}

fn tiers(dirs: &[tempfile::TempDir; 3], faults: impl IntoIterator<Item = Fault>) -> (Tiers, Arc<Faulty>) {
    let faulty = Arc::new(Faulty::new(faults));
    let t = Tiers::open(dirs[0].path(), dirs[1].path(), dirs[2].path()).unwrap().with_backend(faulty.clone());
    (t, faulty)
}

/// Which tiers hold `d/e/f`, after checking each holds exactly the original bytes and that no
/// temporary file is left.
fn holders(dirs: &[tempfile::TempDir; 3]) -> Vec<Tier> {
    let mut on = Vec::new();
    for (tier, root) in [(Tier::Fast, dirs[0].path()), (Tier::Slow, dirs[1].path())] {
        if let Ok(bytes) = fs::read(root.join(REL)) {
            assert!(bytes == data(), "the {tier:?} copy is not the file's bytes");
            on.push(tier);
        }
        let left: Vec<_> =
            fs::read_dir(root.join("d/e")).map(|d| d.flatten().map(|e| e.file_name()).collect()).unwrap_or_default();
        assert!(left.iter().all(|n| !n.to_string_lossy().starts_with(".tierwise")), "left behind: {left:?}");
    }
    on
}

fn move_to_ssd(t: &Tiers) -> std::io::Result<u64> {
    t.plan_copy(Path::new(REL), Tier::Slow, 7)?.run_move(&mut |_, _, _| Ok(()))
}

#[test]
fn a_failed_step_leaves_the_one_copy_the_move_started_from() {
    for step in Step::ALL {
        for errno in [EIO, nix::libc::ENOSPC] {
            let dirs = setup();
            let (t, f) = tiers(&dirs, [Fault::Fail { step, nth: 1, errno }]);
            let r = move_to_ssd(&t);
            assert!(f.runs(step) >= 1, "{step:?} never ran");
            assert_eq!(r.unwrap_err().raw_os_error(), Some(errno), "{step:?}");
            assert_eq!(holders(&dirs), [Tier::Slow], "a failed {step:?} must leave the source alone");
        }
    }
    // The source's directory sync after its removal failing (the third: the source's before
    // the copy, the destination's after the rename): the move stands.
    let dirs = setup();
    let (t, _) = tiers(&dirs, [Fault::Fail { step: Step::SyncDir, nth: 3, errno: EIO }]);
    assert_eq!(move_to_ssd(&t).unwrap(), data().len() as u64);
    assert_eq!(holders(&dirs), [Tier::Fast]);
}

#[test]
fn a_full_destination_fails_the_move_and_frees_what_it_wrote() {
    let dirs = setup();
    let (t, _) = tiers(&dirs, [Fault::NoSpaceAfter(COPY_CHUNK as u64 * 3 / 2)]);
    let e = move_to_ssd(&t).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(nix::libc::ENOSPC), "{e}");
    assert_eq!(holders(&dirs), [Tier::Slow]);
}

#[test]
fn short_writes_are_continued_not_taken_for_the_whole() {
    let dirs = setup();
    let (t, f) = tiers(&dirs, [Fault::ShortWrites(4097)]);
    assert_eq!(move_to_ssd(&t).unwrap(), data().len() as u64);
    assert_eq!(holders(&dirs), [Tier::Fast]);
    assert!(f.runs(Step::Write) > 600, "{} writes: the short writes were not injected", f.runs(Step::Write));
}

#[test]
fn a_crash_at_any_step_leaves_what_the_next_scan_resolves() {
    // (step, which run of it, the tiers holding the file after the scan's tidy-up).
    let cases = [
        // The source's directory synced first (its name durable before the copy's).
        (Step::SyncDir, 1, &[Tier::Slow][..]),
        (Step::CreateTemp, 1, &[Tier::Slow]),
        (Step::Write, 2, &[Tier::Slow]),
        (Step::SyncFile, 1, &[Tier::Slow]),
        (Step::Rename, 1, &[Tier::Slow]),
        // Renamed into place, not yet durable, or durable and the source not yet removed: two
        // identical copies, which adoption resolves (the journal, else the dirty set and
        // modification times).
        (Step::SyncDir, 2, &[Tier::Fast, Tier::Slow]),
        (Step::Unlink, 1, &[Tier::Fast, Tier::Slow]),
        (Step::SyncDir, 3, &[Tier::Fast]),
    ];
    for (step, nth, want) in cases {
        let dirs = setup();
        let (t, _) = tiers(&dirs, [Fault::CrashBefore { step, nth }]);
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {}));
        let crash = catch_unwind(AssertUnwindSafe(|| move_to_ssd(&t)));
        std::panic::set_hook(prev);
        let payload = crash.expect_err("the crash point was not reached");
        assert_eq!(payload.downcast_ref::<Crashed>(), Some(&Crashed(step)));
        // The next mount: the scan deletes the interrupted copy's temporary file.
        let found = t.scan(true).unwrap();
        let f = found.iter().find(|f| f.rel == Path::new(REL)).unwrap();
        let listed: Vec<Tier> = Tier::ALL.into_iter().filter(|t| f.copies[t.index()].is_some()).collect();
        assert_eq!(holders(&dirs), want, "crash before {step:?} #{nth}");
        assert_eq!(listed, want, "crash before {step:?} #{nth}: the scan lists other copies");
    }
}

#[test]
fn a_failed_move_over_a_cached_copy_keeps_both_copies() {
    // A cached file: the same bytes on both tiers. A move (a pin) replaces the SSD copy, then
    // removing the HDD source fails: the new SSD copy is the file's SSD copy now and stays.
    for (step, nth) in [(Step::SyncDir, 2), (Step::Unlink, 1)] {
        let dirs = setup();
        fs::create_dir_all(dirs[0].path().join("d/e")).unwrap();
        fs::write(dirs[0].path().join(REL), data()).unwrap();
        let (t, _) = tiers(&dirs, [Fault::Fail { step, nth, errno: EIO }]);
        assert!(move_to_ssd(&t).is_err(), "{step:?}");
        assert_eq!(holders(&dirs), [Tier::Fast, Tier::Slow], "a failed {step:?} lost a copy");
    }
}
