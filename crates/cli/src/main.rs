//! The `tierwise` command line. Argument parsing, progress bars and printing only; the work is
//! done by `tierwise-core` and `tierwise-sim`.

mod args;
mod cmd;
mod mount;
mod progress;

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::Parser;

use crate::args::{Cli, Command};
use crate::progress::Bars;

fn main() {
    // Installed as /sbin/mount.tierwise (a link to this binary), mount(8) runs us as a helper.
    let argv0 = std::env::args_os().next().unwrap_or_default();
    if Path::new(&argv0).file_name().is_some_and(|n| n == "mount.tierwise") {
        if let Err(e) = mount::mount_helper(std::env::args_os().skip(1).collect()) {
            eprintln!("mount.tierwise: {e:#}");
            std::process::exit(32); // mount(8)'s "mount failure"
        }
        return;
    }
    tierwise_sim::stamp::set(tierwise_build_info::describe());
    let cli = Cli::parse();
    if !matches!(cli.command, Command::Mount(_) | Command::Replay(_)) {
        quiet_broken_pipe();
    }
    if let Err(e) = run(cli) {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}

/// A report piped into `head` ends quietly, as `cat` would, instead of panicking in `println!`.
/// Not for the daemons (`mount`, and `replay`, which runs its workers against a mount): a
/// client that hangs up on the control socket must not kill them.
fn quiet_broken_pipe() {
    use nix::sys::signal::{SigHandler, Signal, signal};
    #[expect(unsafe_code, reason = "restoring SIGPIPE's default action; no handler runs")]
    // SAFETY: SigDfl installs no Rust handler, so no code runs in signal context.
    let _ = unsafe { signal(Signal::SIGPIPE, SigHandler::SigDfl) };
}

/// A `--timeout`/`--wait` value in seconds.
fn seconds(s: f64) -> Result<std::time::Duration> {
    std::time::Duration::try_from_secs_f64(s)
        .map_err(|_| anyhow::anyhow!("{s}: a number of seconds, 0 or more, was expected"))
}

fn run(cli: Cli) -> Result<()> {
    let bars = Bars::new(cli.quiet);
    match cli.command {
        Command::Sim(a) => cmd::sim::cmd_sim(a, &bars),
        Command::Compare(a) => cmd::compare::cmd_compare(a, &bars),
        Command::Mrc(a) => cmd::mrc::cmd_mrc(a, &bars),
        Command::Trace(t) => cmd::trace::cmd_trace(t, &bars),
        Command::Reproduce(a) => cmd::reproduce::cmd_reproduce(a, &bars),
        Command::Bench(a) => cmd::bench::cmd_bench(a),
        Command::Calibrate(a) => cmd::calibrate::cmd_calibrate(a, &bars),
        Command::Report(a) => cmd::workbench::cmd_report(a),
        Command::Sweep(a) => cmd::workbench::cmd_sweep(a),
        Command::Mount(a) => mount::cmd_mount(a),
        Command::Umount { mountpoint, wait } => mount::cmd_umount(&mountpoint, seconds(wait)?),
        Command::WhichTier { paths } => mount::cmd_which_tier(&paths),
        Command::Serve(a) => cmd::serve::cmd_serve(a),
        // A served device's control socket, or a mountpoint.
        Command::Status { mountpoint, timeout } if cmd::serve::is_control_socket(&mountpoint) => {
            cmd::serve::cmd_status(&mountpoint, seconds(timeout)?)
        }
        Command::Stats { mountpoint, json, timeout } if cmd::serve::is_control_socket(&mountpoint) => {
            cmd::serve::cmd_stats(&mountpoint, json, seconds(timeout)?)
        }
        Command::Flush { mountpoint } if cmd::serve::is_control_socket(&mountpoint) => {
            cmd::serve::cmd_flush(&mountpoint)
        }
        Command::Cancel { mountpoint } if cmd::serve::is_control_socket(&mountpoint) => {
            cmd::serve::cmd_cancel(&mountpoint)
        }
        Command::Status { mountpoint, timeout } => mount::cmd_status(&mountpoint, seconds(timeout)?),
        Command::Stats { mountpoint, json, timeout } => mount::cmd_stats(&mountpoint, json, seconds(timeout)?),
        Command::Pin { tier, paths } => mount::cmd_pin(&paths, &tier),
        Command::Unpin { paths } => mount::cmd_pin(&paths, "none"),
        Command::Flush { mountpoint } => mount::cmd_flush(&mountpoint, &bars),
        Command::Cancel { mountpoint } => mount::cmd_cancel(&mountpoint),
        Command::Replay(a) => cmd::replay::cmd_replay(a, &bars),
        Command::List { what, json, markdown } => cmd::list::cmd_list(what.as_deref(), json, markdown),
    }
}

pub(crate) fn write_file(path: &Path, content: &[u8]) -> Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    fs::write(path, content).with_context(|| format!("writing {}", path.display()))
}

pub(crate) fn repo_root() -> PathBuf {
    let cwd = std::env::current_dir().unwrap_or_default();
    if cwd.join("data/traces").is_dir() {
        return cwd;
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}
