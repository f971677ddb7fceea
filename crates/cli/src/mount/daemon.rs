//! The mount daemon in the foreground: the FUSE session, signals (SIGTERM and SIGINT unmount
//! cleanly), systemd's readiness notification, and the log once detached.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use nix::sys::signal::{SigSet, Signal};
use tierwise_fs::HybridFs;
use tierwise_fs::log::{self, Level, Sink};

/// Set in the environment of a daemon `tierwise mount` started in the background: it leaves
/// the terminal's session and, once mounted, logs to `--log` or syslog.
pub const DETACHED_ENV: &str = "TIERWISE_DETACHED";

/// The signals the daemon handles itself.
fn handled() -> SigSet {
    let mut set = SigSet::empty();
    for s in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP] {
        set.add(s);
    }
    set
}

/// Blocks SIGTERM, SIGINT and SIGHUP in this thread, before any other thread starts (they
/// inherit the mask), so only the signal thread receives them. A detached daemon also leaves
/// the terminal's session, so closing the terminal does not reach it.
pub fn prepare() -> Result<SigSet> {
    if std::env::var_os(DETACHED_ENV).is_some() {
        let _ = nix::unistd::setsid();
    }
    let set = handled();
    set.thread_block().context("blocking signals")?;
    Ok(set)
}

/// Where the log goes once the mount is live.
pub struct LogPlan {
    pub level: Level,
    pub file: Option<PathBuf>,
}

impl LogPlan {
    /// The `--log` file, opened before anything is mounted: a path that cannot be written is an
    /// error on the terminal, never a mount left behind by a daemon that then exits.
    fn open_file(&self) -> Result<Option<std::fs::File>> {
        self.file
            .as_ref()
            .map(|f| {
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(f)
                    .with_context(|| format!("--log {}: cannot open it for appending", f.display()))
            })
            .transpose()
    }

    /// Stderr (the foreground; systemd's journal), or for a detached daemon `--log FILE`, else
    /// syslog, with stdin, stdout and stderr on /dev/null (the terminal may be gone).
    fn apply(&self, file: Option<std::fs::File>, detached: bool) -> Result<()> {
        let sink = match file {
            Some(f) => Sink::File(f),
            None if detached => log::syslog().unwrap_or(Sink::Stderr),
            None => Sink::Stderr,
        };
        log::init(self.level, sink);
        if detached {
            let null = std::fs::OpenOptions::new().read(true).write(true).open("/dev/null")?;
            let _ = nix::unistd::dup2_stdout(&null);
            let _ = nix::unistd::dup2_stderr(&null);
            let _ = nix::unistd::dup2_stdin(&null);
            std::panic::set_hook(Box::new(|info| log::error(format_args!("the daemon panicked: {info}"))));
        }
        Ok(())
    }
}

/// Tells systemd (`Type=notify` units) about the daemon's state; nothing without
/// `NOTIFY_SOCKET`.
pub fn sd_notify(state: &str) {
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else { return };
    let Ok(sock) = UnixDatagram::unbound() else { return };
    let bytes = path.as_bytes();
    let sent = if let Some(name) = bytes.strip_prefix(b"@") {
        use std::os::linux::net::SocketAddrExt;
        std::os::unix::net::SocketAddr::from_abstract_name(name).and_then(|a| sock.send_to_addr(state.as_bytes(), &a))
    } else {
        sock.send_to(state.as_bytes(), Path::new(OsStr::from_bytes(bytes)))
    };
    if let Err(e) = sent {
        log::warn(format_args!("notifying systemd: {e}"));
    }
}

/// Mounts `fs` on `mountpoint` and serves it until it is unmounted: by `tierwise umount`,
/// `umount`, or SIGTERM/SIGINT (which unmount it, lazily when files are still open there).
/// Returns once the file system has stopped and saved its state.
pub fn serve(fs: HybridFs, mountpoint: &Path, fcfg: &fuser::Config, signals: SigSet, logs: &LogPlan) -> Result<()> {
    let log_file = logs.open_file()?;
    let session = tierwise_fs::session::mount_session(fs, mountpoint, fcfg)
        .with_context(|| format!("mounting {}", mountpoint.display()))?;
    logs.apply(log_file, std::env::var_os(DETACHED_ENV).is_some())?;
    log::info(format_args!("mounted on {} (pid {})", mountpoint.display(), std::process::id()));
    sd_notify(&format!("READY=1\nSTATUS=serving {}", mountpoint.display()));
    let mp = mountpoint.to_path_buf();
    std::thread::Builder::new().name("tierwise-signals".into()).spawn(move || on_signals(&signals, &mp))?;
    session.run().with_context(|| format!("serving {}", mountpoint.display()))?;
    log::info(format_args!("unmounted {}", mountpoint.display()));
    Ok(())
}

/// Waits for signals: SIGTERM and SIGINT unmount (the kernel then ends the session, the daemon
/// finishes or rolls back the move in hand, saves its state and exits); SIGHUP is ignored.
fn on_signals(signals: &SigSet, mountpoint: &Path) {
    loop {
        match signals.wait() {
            Ok(Signal::SIGHUP) => {
                log::info(format_args!("SIGHUP ignored (settings change at the next mount)"));
            }
            Ok(sig) => {
                log::info(format_args!("{sig}: unmounting {}", mountpoint.display()));
                sd_notify("STOPPING=1");
                unmount(mountpoint);
            }
            Err(e) => {
                log::error(format_args!("waiting for signals: {e}"));
                return;
            }
        }
    }
}

/// Unmounts `mountpoint`; while files are open there, detaches it (it disappears from the
/// namespace now and ends when they are closed).
pub fn unmount(mountpoint: &Path) {
    match tierwise_fs::session::unmount(mountpoint) {
        Ok(false) => {}
        Ok(true) => log::warn(format_args!(
            "{} is busy (files are open there): detached it; the daemon exits when they are closed",
            mountpoint.display()
        )),
        Err(e) => log::error(format_args!("unmounting {}: {e}", mountpoint.display())),
    }
}
