//! The save pattern of editors, git and databases under kill -9: three writers each write a
//! temporary file, fsync it, rename it over their target and fsync the directory, again and
//! again, while files migrate; the daemon is killed -9 at a random moment and the tiers are
//! mounted again. Every target must be there, holding the last version saved or the one being
//! saved: a rename is atomic, and what was synced stays. Each policy family (caching, DST,
//! write-back, HyCache), passthrough on and off.
//!
//! CI runs `TIERWISE_RENAME_TRIALS` (default 3) trials per configuration;
//! `scripts/rename-crash.sh` runs 200.

#![expect(clippy::unwrap_used, reason = "a failing setup should stop the test loudly")]

mod mount_common;

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::process::Child;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mount_common::{root_and_mountpoint, start_foreground};

/// One writer's saves: the last version acknowledged and the one being saved.
type Saves = (u64, Option<u64>);

fn start(root: &Path, mnt: &Path, policy: &str, passthrough: bool) -> Child {
    let data_path = if passthrough { "--passthrough" } else { "--no-passthrough" };
    start_foreground(&["--ssd-quota", "96KiB", "--pin-reserve", "16KiB", "--policy", policy, data_path], root, mnt)
}

fn version(writer: usize, n: u64) -> Vec<u8> {
    let len = 2000 + ((writer as u64 * 7919 + n * 104_729) % 20_000) as usize;
    let mut v: Vec<u8> = format!("writer {writer} version {n}\n").into_bytes();
    v.extend((0..len).map(|i| (i as u64 ^ (n * 131 + writer as u64)) as u8));
    v
}

fn save(dir: &Path, writer: usize, data: &[u8]) -> std::io::Result<()> {
    let tmp = dir.join(format!("t{writer}.tmp"));
    let mut f = OpenOptions::new().write(true).create(true).truncate(true).open(&tmp)?;
    f.write_all(data)?;
    f.sync_all()?;
    drop(f);
    fs::rename(&tmp, dir.join(format!("t{writer}")))?;
    fs::File::open(dir)?.sync_all()
}

/// One trial: returns the targets lost and the targets holding a version neither saved nor
/// being saved.
fn trial(policy: &str, passthrough: bool, seed: u64) -> (usize, Vec<String>) {
    let [root, mnt] = root_and_mountpoint();
    let mut child = start(root.path(), mnt.path(), policy, passthrough);
    let dir = mnt.path().join("d");
    fs::create_dir(&dir).unwrap();
    for w in 0..3 {
        save(&dir, w, &version(w, 0)).unwrap();
    }
    // Per writer: the last version saved (acknowledged) and the one being saved.
    let state: Arc<Mutex<Vec<Saves>>> = Arc::new(Mutex::new(vec![(0, None); 3]));
    let killed = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..3)
        .map(|w| {
            let (dir, state, killed) = (dir.clone(), Arc::clone(&state), Arc::clone(&killed));
            std::thread::spawn(move || {
                let mut n = 0;
                while !killed.load(Ordering::SeqCst) {
                    n += 1;
                    state.lock().unwrap()[w].1 = Some(n);
                    if save(&dir, w, &version(w, n)).is_err() {
                        return;
                    }
                    state.lock().unwrap()[w] = (n, None);
                    // Reads make the policies move files meanwhile.
                    let _ = fs::read(dir.join(format!("t{}", (w + 1) % 3)));
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(30 + seed * 7919 % 400));
    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), nix::sys::signal::Signal::SIGKILL);
    killed.store(true, Ordering::SeqCst);
    let _ = child.wait();
    for w in writers {
        let _ = w.join();
    }
    // The dead mount detached (the mount command does it too; a build from before that did
    // not, and this test measures it as well), and the same mount command again.
    let _ = nix::mount::umount2(mnt.path(), nix::mount::MntFlags::MNT_DETACH);
    let mut child = start(root.path(), mnt.path(), policy, passthrough);
    let state = state.lock().unwrap().clone();
    let (mut lost, mut wrong) = (0, Vec::new());
    for (w, &(acked, in_flight)) in state.iter().enumerate() {
        match fs::read(dir.join(format!("t{w}"))) {
            Err(_) => lost += 1,
            Ok(got) => {
                let ok = got == version(w, acked) || in_flight.is_some_and(|n| got == version(w, n));
                if !ok {
                    let head =
                        String::from_utf8_lossy(&got[..got.len().min(40)]).lines().next().unwrap_or("").to_string();
                    wrong.push(format!("t{w}: {head:?}, saved {acked}, saving {in_flight:?}"));
                }
            }
        }
    }
    let _ = nix::mount::umount2(mnt.path(), nix::mount::MntFlags::MNT_DETACH);
    let _ = child.kill();
    let _ = child.wait();
    (lost, wrong)
}

#[test]
fn kill_9_during_save_by_rename_loses_no_target() {
    if !tierwise_testkit::fuse_and_root() {
        return;
    }
    let trials: u64 = tierwise_testkit::trials("TIERWISE_RENAME_TRIALS", 3, 200);
    let families = [
        ("caching", "on-demand-caching"),
        ("DST", "dynamic-hot-dst:sieve=0"),
        ("write-back", "file-write-back:sieve=0"),
        ("HyCache", "hycache"),
    ];
    let mut failures: Vec<String> = Vec::new();
    let started = Instant::now();
    for (family, policy) in families {
        for passthrough in [true, false] {
            let (mut lost, mut wrong) = (0, 0);
            for t in 0..trials {
                let (l, w) = trial(policy, passthrough, t + 1);
                lost += l;
                wrong += w.len();
                for x in w {
                    failures.push(format!("{family} ({policy}, passthrough {passthrough}) trial {t}: {x}"));
                }
                if l > 0 {
                    failures
                        .push(format!("{family} ({policy}, passthrough {passthrough}) trial {t}: {l} target(s) lost"));
                }
            }
            eprintln!(
                "{family:10} passthrough {:5}: {trials} trials, {lost} targets lost, {wrong} wrong versions ({:.0} s)",
                passthrough,
                started.elapsed().as_secs_f64()
            );
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
