//! The one teardown every test and test script uses for what it mounted or served, whatever
//! state it is in (a deadlocked daemon included). In this order, each step under a deadline:
//!
//! 1. abort the FUSE connection of every mount found (`/sys/fs/fuse/connections/N/abort`):
//!    every request waiting on a stuck daemon fails at once with `ENOTCONN`;
//! 2. kill -9 the processes found (the daemons, nbdkit and its plugin, nbdfuse, a tool left
//!    running on the mount) and wait until they have exited;
//! 3. lazy-unmount the mounts, deepest first;
//! 4. detach the loop devices whose backing file is in a test directory.
//!
//! Found means: named by the caller, or under one of the caller's directories (a mountpoint
//! under it; a process whose command line, working directory or open files name it; a loop
//! device backed by a file in it). Nothing is chosen by a process-name pattern: a test's
//! teardown touches only what its own directories hold. Removing the directories is left to
//! the caller, after this returns (then no delete can reach into a live mount).

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// What to tear down.
#[derive(Clone, Debug, Default)]
pub struct Targets {
    /// Directories: everything mounted under them, run from or in them, backed by files in them.
    pub dirs: Vec<PathBuf>,
    /// Mountpoints (anywhere).
    pub mounts: Vec<PathBuf>,
    /// Processes to kill.
    pub pids: Vec<i32>,
}

impl Targets {
    /// Everything under `dirs`.
    pub fn under<P: AsRef<Path>>(dirs: &[P]) -> Targets {
        Targets { dirs: dirs.iter().map(|d| d.as_ref().to_path_buf()).collect(), ..Targets::default() }
    }
    /// One mountpoint, and the daemon serving it when known.
    pub fn mount(mnt: &Path, daemon: Option<i32>) -> Targets {
        Targets { mounts: vec![mnt.to_path_buf()], pids: daemon.into_iter().collect(), ..Targets::default() }
    }
}

/// What a teardown found and did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// FUSE connections aborted (the mountpoint each served).
    pub aborted: Vec<PathBuf>,
    /// Processes killed: pid and command line.
    pub killed: Vec<(i32, String)>,
    /// Mounts detached.
    pub unmounted: Vec<PathBuf>,
    /// Loop devices detached, with their backing file.
    pub detached: Vec<(String, PathBuf)>,
    /// Steps that did not finish within their deadline, or failed.
    pub problems: Vec<String>,
}

impl Report {
    /// Whether nothing was found.
    pub fn is_empty(&self) -> bool {
        self.aborted.is_empty() && self.killed.is_empty() && self.unmounted.is_empty() && self.detached.is_empty()
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for m in &self.aborted {
            writeln!(f, "aborted the FUSE connection of {}", m.display())?;
        }
        for (pid, cmd) in &self.killed {
            writeln!(f, "killed -9 pid {pid}: {cmd}")?;
        }
        for m in &self.unmounted {
            writeln!(f, "unmounted (lazy) {}", m.display())?;
        }
        for (dev, file) in &self.detached {
            writeln!(f, "detached {dev} (backed by {})", file.display())?;
        }
        for p in &self.problems {
            writeln!(f, "problem: {p}")?;
        }
        Ok(())
    }
}

/// Tears down a mountpoint (and its daemon) when dropped: the guard of every test that mounts.
/// It does not unmount cleanly (a test that checks what a clean unmount saves calls
/// `tierwise umount` itself); it makes sure nothing of the mount outlives the test.
#[derive(Debug)]
pub struct Unmount(pub PathBuf);

impl Drop for Unmount {
    fn drop(&mut self) {
        release(&Targets::mount(&self.0, None));
    }
}

/// Tears its targets down when dropped (mounts, processes and loop devices a test made).
#[derive(Debug)]
pub struct Guard(pub Targets);

impl Drop for Guard {
    fn drop(&mut self) {
        release(&self.0);
    }
}

/// [`teardown`], its problems said on stderr (a guard has no one else to tell).
pub fn release(targets: &Targets) {
    let report = teardown(targets);
    if !report.problems.is_empty() {
        eprintln!("teardown of {targets:?}:\n{report}");
    }
}

/// A child process killed -9 (and reaped) when dropped, so that a test failing half way
/// leaves no process behind.
#[derive(Debug)]
pub struct KillOnDrop(pub std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl std::ops::Deref for KillOnDrop {
    type Target = std::process::Child;
    fn deref(&self) -> &std::process::Child {
        &self.0
    }
}

impl std::ops::DerefMut for KillOnDrop {
    fn deref_mut(&mut self) -> &mut std::process::Child {
        &mut self.0
    }
}

/// The deadline of each step.
pub const STEP_DEADLINE: Duration = Duration::from_secs(10);

/// Tears `targets` down (see the module's documentation).
pub fn teardown(targets: &Targets) -> Report {
    let mut report = Report::default();
    let mounts = mounts_of(targets);
    // Loop devices are found first: once the mount holding a backing file is detached, the
    // kernel no longer names that file by its path.
    let loops = loops_under(&targets.dirs);
    // 1. abort: nothing below can then block on a stuck daemon.
    let fuse: Vec<Mount> =
        mounts.iter().filter(|m| m.fstype.starts_with("fuse") && m.fstype != "fuseblk").cloned().collect();
    if !fuse.is_empty() {
        let step = within(STEP_DEADLINE, move || {
            ensure_fusectl();
            fuse.into_iter()
                .filter_map(|m| {
                    let abort = format!("/sys/fs/fuse/connections/{}/abort", m.minor);
                    std::fs::write(&abort, "1").ok().map(|()| m.mountpoint)
                })
                .collect::<Vec<_>>()
        });
        match step {
            Some(done) => report.aborted = done,
            None => report.problems.push(format!("aborting FUSE connections took over {STEP_DEADLINE:?}")),
        }
    }
    // 2. kill -9, and wait until every thread has gone (files and locks released).
    let mut victims: Vec<(i32, String)> = processes_of(targets, &mounts);
    for &pid in &targets.pids {
        if !victims.iter().any(|(p, _)| *p == pid) && !crate::exited(pid) && !protected(pid) {
            victims.push((pid, cmdline(pid)));
        }
    }
    for (pid, _) in &victims {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(*pid), nix::sys::signal::Signal::SIGKILL);
    }
    let deadline = Instant::now() + STEP_DEADLINE;
    while victims.iter().any(|(p, _)| !crate::exited(*p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    for (pid, cmd) in &victims {
        if !crate::exited(*pid) {
            report.problems.push(format!("pid {pid} ({cmd}) still runs {STEP_DEADLINE:?} after kill -9"));
        }
    }
    report.killed = victims;
    // 3. lazy unmount, deepest first (a mount inside another goes before it).
    let mut by_depth = mounts.clone();
    by_depth.sort_by_key(|m| std::cmp::Reverse(m.mountpoint.components().count()));
    for m in by_depth {
        let at = m.mountpoint.clone();
        let step = within(STEP_DEADLINE, move || nix::mount::umount2(&at, nix::mount::MntFlags::MNT_DETACH));
        match step {
            Some(Ok(())) => report.unmounted.push(m.mountpoint),
            // Gone already: detached with its parent.
            Some(Err(nix::errno::Errno::EINVAL | nix::errno::Errno::ENOENT)) => {}
            Some(Err(e)) => report.problems.push(format!("umount -l {}: {e}", m.mountpoint.display())),
            None => report.problems.push(format!("umount -l {} took over {STEP_DEADLINE:?}", m.mountpoint.display())),
        }
    }
    // 4. loop devices backed by files in the test's directories.
    for (dev, file) in loops {
        let out = std::process::Command::new("timeout")
            .args(["-k", "2", &STEP_DEADLINE.as_secs().to_string(), "losetup", "-d", &dev])
            .output();
        match out {
            Ok(o) if o.status.success() => report.detached.push((dev, file)),
            Ok(o) => report.problems.push(format!("losetup -d {dev}: {}", String::from_utf8_lossy(&o.stderr).trim())),
            Err(e) => report.problems.push(format!("losetup -d {dev}: {e}")),
        }
    }
    report
}

/// What is still there of a teardown's targets.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Leftovers {
    /// Mounts at or under the targets.
    pub mounts: Vec<PathBuf>,
    /// Processes naming them: pid and command line.
    pub processes: Vec<(i32, String)>,
    /// Loop devices backed by files in them.
    pub loops: Vec<(String, PathBuf)>,
}

impl Leftovers {
    /// Whether nothing is left.
    pub fn is_empty(&self) -> bool {
        self.mounts.is_empty() && self.processes.is_empty() && self.loops.is_empty()
    }
}

impl fmt::Display for Leftovers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for m in &self.mounts {
            writeln!(f, "left: mount {}", m.display())?;
        }
        for (pid, cmd) in &self.processes {
            writeln!(f, "left: pid {pid}: {cmd}")?;
        }
        for (dev, file) in &self.loops {
            writeln!(f, "left: {dev} (backed by {})", file.display())?;
        }
        Ok(())
    }
}

/// What is still there of `targets` (nothing is changed): the mounts, the processes and the
/// loop devices a teardown would act on.
pub fn leftovers(targets: &Targets) -> Leftovers {
    let mounts = mounts_of(targets);
    Leftovers {
        processes: processes_of(targets, &mounts),
        mounts: mounts.into_iter().map(|m| m.mountpoint).collect(),
        loops: loops_under(&targets.dirs),
    }
}

/// Runs `f` on a thread of its own; its result, or `None` past `deadline` (the thread is left
/// to finish or stay stuck: a syscall on a dead mount cannot be cancelled from outside).
pub fn within<T: Send + 'static>(deadline: Duration, f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(deadline).ok()
}

/// One line of the mount table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mount {
    /// Where it is mounted.
    pub mountpoint: PathBuf,
    /// The file system type (`fuse.tierwise`, `ext4`, ...).
    pub fstype: String,
    /// The minor device number: a FUSE mount's connection number.
    pub minor: u32,
}

/// This process's mount table (`/proc/self/mountinfo`), read without touching any mountpoint.
pub fn mount_table() -> Vec<Mount> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let (head, tail) = l.split_once(" - ")?;
            let f: Vec<&str> = head.split(' ').collect();
            let minor = f.get(2)?.split_once(':')?.1.parse().ok()?;
            Some(Mount {
                mountpoint: PathBuf::from(unescape(f.get(4)?)),
                fstype: tail.split(' ').next()?.to_string(),
                minor,
            })
        })
        .collect()
}

/// The table escapes space, tab, newline and backslash as octal (`\040`).
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let oct = b.get(i + 1..i + 4).and_then(|d| u8::from_str_radix(std::str::from_utf8(d).ok()?, 8).ok());
        match (b[i], oct) {
            (b'\\', Some(c)) => {
                out.push(c);
                i += 4;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Whether `p` is `dir` or inside it (by path, never by touching it).
fn inside(p: &Path, dir: &Path) -> bool {
    p.starts_with(dir)
}

/// `dir` with symlinks in its parent resolved (`/tmp` may be a link); the directory itself may
/// be a dead mount, so it is never resolved.
fn real(dir: &Path) -> PathBuf {
    match (dir.parent(), dir.file_name()) {
        (Some(parent), Some(name)) => {
            std::fs::canonicalize(parent).map_or_else(|_| dir.to_path_buf(), |p| p.join(name))
        }
        _ => dir.to_path_buf(),
    }
}

fn mounts_of(targets: &Targets) -> Vec<Mount> {
    let dirs: Vec<PathBuf> = targets.dirs.iter().map(|d| real(d)).collect();
    let named: Vec<PathBuf> = targets.mounts.iter().map(|m| real(m)).collect();
    let mut found: Vec<Mount> = mount_table()
        .into_iter()
        .filter(|m| dirs.iter().any(|d| inside(&m.mountpoint, d)) || named.iter().any(|n| inside(&m.mountpoint, n)))
        .collect();
    found.dedup_by(|a, b| a.mountpoint == b.mountpoint);
    found
}

/// This process and its ancestors: never killed (a test tearing down its own mounts, the runner).
fn protected(pid: i32) -> bool {
    let mut p = std::process::id() as i32;
    for _ in 0..64 {
        if p == pid {
            return true;
        }
        match parent_of(p) {
            Some(pp) if pp > 1 => p = pp,
            _ => return false,
        }
    }
    false
}

fn parent_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(") ")?.1.split(' ').nth(1)?.parse().ok()
}

fn cmdline(pid: i32) -> String {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    String::from_utf8_lossy(&raw).split('\0').filter(|a| !a.is_empty()).collect::<Vec<_>>().join(" ")
}

/// Processes whose command line, working directory or open files name a target directory or
/// mount. Read from `/proc` only (`readlink` there never reaches the file system behind it).
fn processes_of(targets: &Targets, mounts: &[Mount]) -> Vec<(i32, String)> {
    let mut places: Vec<PathBuf> = targets.dirs.iter().map(|d| real(d)).collect();
    places.extend(targets.dirs.iter().cloned());
    places.extend(mounts.iter().map(|m| m.mountpoint.clone()));
    places.extend(targets.mounts.iter().cloned());
    places.sort();
    places.dedup();
    if places.is_empty() {
        return Vec::new();
    }
    let names_a_place = |p: &Path| places.iter().any(|d| inside(p, d));
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else { return found };
    for e in entries.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else { continue };
        if protected(pid) || crate::exited(pid) {
            continue;
        }
        let raw = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if raw.is_empty() {
            continue; // a kernel thread
        }
        let by_args = raw.split(|&b| b == 0).any(|a| {
            let a = String::from_utf8_lossy(a);
            // `--ssd=/dir/x`, `ssd=/dir/x`, `nbd+unix:///?socket=/dir/s`: the path after `=`.
            let path = a.rsplit_once('=').map_or(&*a, |(_, v)| v);
            path.starts_with('/') && names_a_place(Path::new(path))
        });
        let by_cwd = std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|c| names_a_place(&c));
        let by_files = || {
            std::fs::read_dir(format!("/proc/{pid}/fd"))
                .is_ok_and(|fds| fds.flatten().any(|fd| std::fs::read_link(fd.path()).is_ok_and(|t| names_a_place(&t))))
        };
        if by_args || by_cwd || by_files() {
            found.push((pid, cmdline(pid)));
        }
    }
    found
}

/// Loop devices whose backing file is in one of `dirs`.
fn loops_under(dirs: &[PathBuf]) -> Vec<(String, PathBuf)> {
    if dirs.is_empty() {
        return Vec::new();
    }
    let mut places: Vec<PathBuf> = dirs.iter().map(|d| real(d)).collect();
    places.extend(dirs.iter().cloned());
    let Ok(entries) = std::fs::read_dir("/sys/block") else { return Vec::new() };
    let mut found = Vec::new();
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.starts_with("loop") {
            continue;
        }
        let Ok(backing) = std::fs::read_to_string(e.path().join("loop/backing_file")) else { continue };
        let file = PathBuf::from(backing.trim().trim_end_matches(" (deleted)"));
        if places.iter().any(|d| inside(&file, d)) {
            found.push((format!("/dev/{name}"), file));
        }
    }
    found
}

/// Mounts the FUSE control file system where the kernel documents it, when it is not there (a
/// fresh mount namespace, or a machine that never mounted it).
pub fn ensure_fusectl() {
    let dir = Path::new("/sys/fs/fuse/connections");
    if mount_table().iter().any(|m| m.fstype == "fusectl") || !dir.exists() {
        return;
    }
    let _ = nix::mount::mount(Some("fusectl"), dir, Some("fusectl"), nix::mount::MsFlags::empty(), None::<&str>);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_table_paths_are_unescaped() {
        assert_eq!(unescape(r"/tmp/a\040b\134c"), r"/tmp/a b\c");
        assert_eq!(unescape("/plain"), "/plain");
        assert!(mount_table().iter().any(|m| m.mountpoint == Path::new("/")));
    }

    #[test]
    fn a_process_working_in_a_target_directory_is_killed_and_reported() {
        let dir = std::env::temp_dir().join(format!("tierwise-teardown-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        let mut child = std::process::Command::new("sleep").arg("600").current_dir(&dir).spawn().expect("sleep runs");
        let pid = child.id() as i32;
        let before = leftovers(&Targets::under(&[&dir]));
        assert!(before.processes.iter().any(|(p, _)| *p == pid), "{before:?}");
        let report = teardown(&Targets::under(&[&dir]));
        assert!(report.killed.iter().any(|(p, c)| *p == pid && c.contains("sleep")), "{report}");
        assert!(child.wait().is_ok());
        assert!(leftovers(&Targets::under(&[&dir])).is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_step_past_its_deadline_is_left_behind() {
        assert_eq!(within(Duration::from_secs(5), || 7), Some(7));
        assert_eq!(within(Duration::from_millis(20), || std::thread::sleep(Duration::from_secs(2))), None);
    }
}
