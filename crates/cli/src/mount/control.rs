//! The commands that talk to a running mount through its control attributes (`status`,
//! `stats`, `pin`, `unpin`, `flush`, `cancel`, `which-tier`, `umount`).

use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use tierwise_core::Bytes;
use tierwise_fs::control::{XATTR_CANCEL, XATTR_FLUSH, XATTR_PIN, XATTR_STATS, XATTR_TIER};
use tierwise_fs::{Counters, Snapshot};

use super::mountinfo::{is_tierwise_mount, mount_of};
use crate::progress::Bars;

/// The tierwise mount `path` is on, from the mount table: `path` resolved (symlinks
/// followed, `follow`) or only its directory (the path names a symlink itself).
fn tierwise_mount_of(path: &Path, follow: bool) -> Result<PathBuf> {
    let resolved = if follow {
        fs::canonicalize(path).with_context(|| format!("{}", path.display()))?
    } else {
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let name = path.file_name().with_context(|| format!("{}: not a file", path.display()))?;
        fs::canonicalize(dir).with_context(|| format!("{}", path.display()))?.join(name)
    };
    match mount_of(&resolved) {
        Some(m) if m.is_tierwise() && resolved != m.mountpoint => Ok(m.mountpoint),
        Some(m) if m.is_tierwise() => bail!("{}: the root of a tierwise mount, not a file on it", path.display()),
        Some(m) => bail!(
            "{}: not on a tierwise mount (it is on {}, {}); nothing was changed",
            path.display(),
            m.mountpoint.display(),
            m.fstype
        ),
        None => bail!("{}: not on a tierwise mount; nothing was changed", path.display()),
    }
}

/// Runs `each` on every path, reporting each failure and going on; fails at the end if any did.
fn for_each_path(paths: &[PathBuf], mut each: impl FnMut(&Path) -> Result<()>) -> Result<()> {
    let mut failed = 0;
    for p in paths {
        if let Err(e) = each(p) {
            eprintln!("error: {e:#}");
            failed += 1;
        }
    }
    if failed > 0 {
        bail!("{failed} of {} path(s) failed", paths.len());
    }
    Ok(())
}

/// `tierwise which-tier PATH...`: where each file is. A symlink is answered for the link
/// itself (links live on the HDD tier), not its target.
pub fn cmd_which_tier(paths: &[PathBuf]) -> Result<()> {
    for_each_path(paths, |p| {
        let meta = fs::symlink_metadata(p).with_context(|| format!("{}", p.display()))?;
        let link = meta.file_type().is_symlink();
        tierwise_mount_of(p, !link)?;
        if link {
            println!("{}: hdd (a symlink: links live on the HDD tier)", p.display());
            return Ok(());
        }
        match xattr::get(p, XATTR_TIER) {
            Ok(Some(v)) => {
                println!("{}: {}", p.display(), String::from_utf8_lossy(&v));
                Ok(())
            }
            Ok(None) => bail!("{}: the mount did not say where it is", p.display()),
            Err(e) => bail!("{}: {e}", p.display()),
        }
    })
}

/// `tierwise umount MNT`: unmounts, then waits up to `wait` for the daemon to save its state
/// and exit. The daemon is found without asking the mount (it may be stuck).
pub fn cmd_umount(mountpoint: &Path, wait: Duration) -> Result<()> {
    if !is_tierwise_mount(mountpoint) {
        bail!("{} is not a tierwise mount", mountpoint.display());
    }
    let daemon = daemon_of(mountpoint);
    nix::mount::umount(mountpoint).map_err(|e| match e {
        nix::errno::Errno::EBUSY => {
            anyhow::anyhow!("{} is busy: close the files open in it first", mountpoint.display())
        }
        e => anyhow::anyhow!("unmounting {}: {e}", mountpoint.display()),
    })?;
    if let Some(pid) = daemon
        && !wait_for_exit(pid, wait)
    {
        bail!(
            "unmounted {}, but its daemon (pid {pid}) has not exited {:.0} s later: it is still saving its state, or stuck (`kill -9 {pid}` is safe: the next mount recovers)",
            mountpoint.display(),
            wait.as_secs_f64()
        );
    }
    println!("unmounted {}", mountpoint.display());
    Ok(())
}

/// The process serving a mount, when it is a detached `tierwise mount` daemon (not, say, a
/// test that mounted in its own process): read from `/proc`, never from the mount, whose daemon
/// may not answer. A daemon's command line names its mountpoint.
fn daemon_of(mountpoint: &Path) -> Option<u32> {
    let want = super::mountinfo::mounted_on(mountpoint)?.mountpoint;
    fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: u32 = e.file_name().to_str()?.parse().ok()?;
        let cmdline = fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        let args: Vec<&[u8]> = cmdline.split(|&b| b == 0).filter(|a| !a.is_empty()).collect();
        let ours = args.iter().any(|a| *a == b"mount") && args.iter().any(|a| *a == b"--foreground");
        let cwd = fs::read_link(format!("/proc/{pid}/cwd")).unwrap_or_default();
        let names_it = args.iter().any(|a| {
            let a = Path::new(std::ffi::OsStr::from_bytes(a));
            (if a.is_absolute() { a.to_path_buf() } else { cwd.join(a) }) == want
        });
        (ours && pid != std::process::id() && names_it).then_some(pid)
    })
}

/// Waits up to `deadline` until process `pid` has exited: the daemon finishes (or rolls back)
/// the move in hand, saves its state and stops touching the tiers. Whether it did.
pub fn wait_for_exit(pid: u32, deadline: Duration) -> bool {
    let start = Instant::now();
    let mut said = false;
    // A zombie has exited too (its parent has not reaped it yet).
    let running = || {
        fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|st| st.rsplit_once(") ").is_some_and(|(_, rest)| !rest.starts_with('Z')))
    };
    while running() {
        if start.elapsed() > deadline {
            return false;
        }
        if !said && start.elapsed() > Duration::from_secs(2) {
            eprintln!(
                "waiting for the tierwise daemon (pid {pid}) to save its state and exit (up to {:.0} s)",
                deadline.as_secs_f64()
            );
            said = true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

fn check_mount(mountpoint: &Path) -> Result<()> {
    if !is_tierwise_mount(mountpoint) {
        bail!("{} is not a tierwise mount (give the mountpoint)", mountpoint.display());
    }
    Ok(())
}

/// How long a command waits for a mount to answer when none is given (`--timeout`).
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(5);

/// The mount's statistics, or an error when it does not answer within `timeout` (the read is
/// left on a thread of its own: a request to a stuck daemon cannot be taken back, and it dies
/// with this process).
pub fn snapshot_within(mountpoint: &Path, timeout: Duration) -> Result<Snapshot> {
    let (tx, rx) = std::sync::mpsc::channel();
    let m = mountpoint.to_path_buf();
    std::thread::spawn(move || {
        let _ = tx.send(xattr::get(&m, XATTR_STATS));
    });
    let raw = match rx.recv_timeout(timeout) {
        Ok(r) => r
            .with_context(|| format!("reading the statistics of {}", mountpoint.display()))?
            .with_context(|| format!("{} reports no statistics", mountpoint.display()))?,
        Err(_) => bail!(
            "{} did not answer within {:.1} s (--timeout): its daemon is busy or stuck; `tierwise umount {}` stops it, or `echo 1 > /sys/fs/fuse/connections/N/abort` (N: the mount's minor device number in /proc/self/mountinfo)",
            mountpoint.display(),
            timeout.as_secs_f64(),
            mountpoint.display()
        ),
    };
    Ok(serde_json::from_slice(&raw)?)
}

/// [`snapshot_within`] the default [`ANSWER_TIMEOUT`].
pub fn snapshot(mountpoint: &Path) -> Result<Snapshot> {
    snapshot_within(mountpoint, ANSWER_TIMEOUT)
}

fn set_control(mountpoint: &Path, name: &str, value: &str) -> Result<()> {
    xattr::set(mountpoint, name, value.as_bytes()).with_context(|| format!("{name} on {}", mountpoint.display()))
}

pub fn cmd_status(mountpoint: &Path, timeout: Duration) -> Result<()> {
    check_mount(mountpoint)?;
    let s = snapshot_within(mountpoint, timeout)?;
    println!("tierwise mount {}{}", mountpoint.display(), if s.read_only { " (read-only: nothing moves)" } else { "" });
    println!("  policy        {}", s.policy);
    println!("  data path     {}", s.data_path);
    if let Some(why) = &s.passthrough_declined {
        println!("  passthrough   declined: {why}");
    }
    println!("  ssd tier      {} ({} free of {})", s.ssd_dir, Bytes(s.ssd_space.free), Bytes(s.ssd_space.size));
    println!("  hdd tier      {} ({} free of {})", s.hdd_dir, Bytes(s.hdd_space.free), Bytes(s.hdd_space.size));
    println!("  state store   {}", s.state);
    for t in &s.lost_tiers {
        println!(
            "  LOST          the {t} tier's root is gone (unmounted or removed): its files answer EIO until it is back"
        );
    }
    match &s.health_reason {
        Some(why) => println!("  health        {}: {why}", s.health.to_uppercase()),
        None if !s.health.is_empty() => println!("  health        {}", s.health),
        None => {}
    }
    if s.io_errors.iter().flatten().any(|&n| n > 0) {
        println!("  io errors     ssd read/write/sync {:?}  hdd {:?}", s.io_errors[0], s.io_errors[1]);
    }
    if s.emulation.is_empty() {
        println!("  emulation     none (tiers run at the speed of their directories)");
    }
    for e in &s.emulation {
        println!("  EMULATION     {e}");
    }
    let pct = |a: u64, b: u64| if b == 0 { 0.0 } else { 100.0 * a as f64 / b as f64 };
    let policy_bytes = s.ssd_quota.saturating_sub(s.pin_reserve);
    println!(
        "  ssd quota     {}: the policy uses {} of its {} ({:.1}%); the pin reserve of {} holds {} in {} pinned file(s)",
        Bytes(s.ssd_quota),
        Bytes(s.ssd_used),
        Bytes(policy_bytes),
        pct(s.ssd_used, policy_bytes),
        Bytes(s.pin_reserve),
        Bytes(s.pinned_ssd_bytes),
        s.pinned_ssd_files
    );
    println!(
        "  files         {} tracked, {} with a copy on the SSD, {} pinned to the HDD",
        s.files, s.files_on_ssd, s.pinned_hdd_files
    );
    println!("  dirty         {}", Bytes(s.dirty_bytes));
    println!("  queue         {} background job(s)", s.queue_depth);
    let rate = if s.move_rate == 0 { "unlimited".to_string() } else { format!("{:.1} MB/s", s.move_rate as f64 / 1e6) };
    println!("  move rate     {rate}");
    match &s.moving {
        Some(m) => println!(
            "  moving        {} {} ({} of {}, {:.0}%)",
            m.kind,
            m.path,
            Bytes(m.done),
            Bytes(m.total),
            pct(m.done, m.total)
        ),
        None => println!("  moving        nothing"),
    }
    for h in s.latency.iter().filter(|h| h.count > 0) {
        let q = |p: f64| h.quantile(p).map_or_else(|| "-".into(), |v| format!("<= {:.3} ms", v * 1e3));
        println!("  latency       {:<9} {} requests, p50 {}, p99 {}", h.op, h.count, q(0.5), q(0.99));
    }
    println!("  up            {:.0} s (pid {})", s.uptime_s, s.pid);
    say_if_stale(&s);
    Ok(())
}

/// A snapshot whose engine figures are old says so (the engine's lock was held too long).
fn say_if_stale(s: &Snapshot) {
    if let Some(age) = s.engine_stale_s {
        println!(
            "  engine        BUSY: its lock is held (a long call or a deadlock); counters, usage and queue are {age:.1} s old"
        );
    }
}

pub fn cmd_stats(mountpoint: &Path, json: bool, timeout: Duration) -> Result<()> {
    check_mount(mountpoint)?;
    let s = snapshot_within(mountpoint, timeout)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&s)?);
        return Ok(());
    }
    type Row = (&'static str, fn(&Counters) -> String);
    let rows: Vec<Row> = vec![
        ("reads from SSD (hits)", |c| c.reads_ssd.to_string()),
        ("reads from HDD (misses)", |c| c.reads_hdd.to_string()),
        ("hit ratio", |c| format!("{:.3}", c.hit_ratio())),
        ("writes acknowledged by SSD", |c| c.writes_ssd.to_string()),
        ("writes reaching HDD", |c| c.writes_hdd.to_string()),
        ("bytes read SSD / HDD", |c| format!("{} / {}", Bytes(c.read_bytes_ssd), Bytes(c.read_bytes_hdd))),
        ("bytes written SSD / HDD", |c| format!("{} / {}", Bytes(c.write_bytes_ssd), Bytes(c.write_bytes_hdd))),
        ("promotions", |c| c.promotions.to_string()),
        ("demotions", |c| c.demotions.to_string()),
        ("copies into SSD", |c| c.copies.to_string()),
        ("write-backs", |c| c.writebacks.to_string()),
        ("bytes moved", |c| Bytes(c.bytes_moved).to_string()),
        ("moves failed", |c| c.moves_failed.to_string()),
        ("moves cancelled", |c| c.moves_cancelled.to_string()),
    ];
    println!("{:<28} {:>18} {:>18}", "", "this mount", "volume total");
    for (name, f) in rows {
        println!("{name:<28} {:>18} {:>18}", f(&s.session), f(&s.total));
    }
    println!("{:<28} {:>18}", "dirty bytes", Bytes(s.dirty_bytes).to_string());
    println!("{:<28} {:>18}", "queue depth", s.queue_depth);
    println!("{:<28} {:>18}", "data path", s.data_path);
    say_if_stale(&s);
    Ok(())
}

/// `tierwise pin ssd|hdd PATH...` and `tierwise unpin PATH...` (`tier` = `none`). A path not
/// on a tierwise mount is refused and nothing is written to it; a symlink pins its target.
pub fn cmd_pin(paths: &[PathBuf], tier: &str) -> Result<()> {
    for_each_path(paths, |p| {
        tierwise_mount_of(p, true)?;
        let target = fs::canonicalize(p).with_context(|| format!("{}", p.display()))?;
        match xattr::set(&target, XATTR_PIN, tier.as_bytes()) {
            Ok(()) if tier == "none" => println!("{}: unpinned", p.display()),
            Ok(()) => println!("{}: pinned to {tier}", p.display()),
            Err(e) => {
                let errno = e.raw_os_error();
                match errno {
                    Some(nix::libc::ENOSPC) => bail!(
                        "{}: does not fit the SSD pin reserve (see `tierwise status`; mount with a larger --pin-reserve)",
                        p.display()
                    ),
                    Some(nix::libc::EDQUOT) => bail!(
                        "{}: beyond your share of the SSD pin reserve (the mount's --user-pin-quota)",
                        p.display()
                    ),
                    Some(nix::libc::EPERM) => bail!(
                        "{}: not allowed: users other than root may pin only their own files, and to the SSD only where the mount sets --user-pin-quota",
                        p.display()
                    ),
                    Some(nix::libc::EISDIR) => bail!("{}: a directory; pin the files in it", p.display()),
                    Some(nix::libc::EBUSY) => {
                        bail!("{}: open by FUSE passthrough; close it and pin again", p.display())
                    }
                    Some(nix::libc::EROFS) => bail!("{}: the mount is read-only", p.display()),
                    _ => bail!("{}: {e}", p.display()),
                }
            }
        }
        Ok(())
    })
}

pub fn cmd_flush(mountpoint: &Path, bars: &Bars) -> Result<()> {
    check_mount(mountpoint)?;
    set_control(mountpoint, XATTR_FLUSH, "1")?;
    let first = snapshot(mountpoint)?;
    let bar = bars.counter("flush");
    let total = first.dirty_bytes.max(1);
    // Progress: dirty bytes going down. Write-backs that fail without any progress for a while
    // (a full HDD, a tier gone) end the wait with the reason instead of waiting forever.
    let (mut best, mut progress_at) = (first.dirty_bytes, Instant::now());
    loop {
        let s = snapshot(mountpoint)?;
        let done = total.saturating_sub(s.dirty_bytes);
        bar.step(&format!("{} dirty, {} queued", Bytes(s.dirty_bytes), s.queue_depth), done as usize, total as usize);
        if s.dirty_bytes == 0 && s.queue_depth == 0 {
            break;
        }
        if !s.lost_tiers.is_empty() {
            bar.done();
            bail!(
                "{}: the {} tier is gone, so {} of dirty data cannot be written back until it is back (nothing is lost: it stays on the SSD, marked dirty)",
                mountpoint.display(),
                s.lost_tiers.join(" and "),
                Bytes(s.dirty_bytes)
            );
        }
        if s.dirty_bytes < best {
            (best, progress_at) = (s.dirty_bytes, Instant::now());
        }
        let failing = s.session.moves_failed > first.session.moves_failed;
        if failing && progress_at.elapsed() > Duration::from_secs(30) {
            bar.done();
            bail!(
                "{}: write-backs keep failing ({} failed, {} still dirty, no progress for 30 s); see the daemon's log. The dirty data stays on the SSD",
                mountpoint.display(),
                s.session.moves_failed - first.session.moves_failed,
                Bytes(s.dirty_bytes)
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    bar.done();
    println!("{}: no dirty data left ({} written back)", mountpoint.display(), Bytes(first.dirty_bytes));
    Ok(())
}

pub fn cmd_cancel(mountpoint: &Path) -> Result<()> {
    check_mount(mountpoint)?;
    let s = snapshot(mountpoint)?;
    set_control(mountpoint, XATTR_CANCEL, "1")?;
    match s.moving {
        Some(m) => println!("cancelled the {} of {}", m.kind, m.path),
        None => println!("no move in progress"),
    }
    Ok(())
}
