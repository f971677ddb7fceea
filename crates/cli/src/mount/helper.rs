//! Starting the daemon in the background (`tierwise mount` without `--foreground`) and the
//! `mount.tierwise` helper that `mount -t tierwise` and fstab lines run.

use std::ffi::OsString;
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::daemon::DETACHED_ENV;
use super::mountinfo::{is_tierwise_mount, mounted_on};

/// Runs `tierwise ARGS` (a foreground mount) in the background and waits until the mount is
/// live; when the daemon fails first, its message is the error. The daemon logs to `--log`
/// or syslog afterwards: nothing is written to a file of ours.
pub fn spawn_daemon(args: Vec<OsString>, mountpoint: &Path, announce: bool) -> Result<()> {
    use std::os::unix::process::CommandExt;
    let exe = std::env::current_exe().context("finding the tierwise binary")?;
    let mut child = Command::new(exe)
        .arg0("tierwise")
        .args(&args)
        .env(DETACHED_ENV, "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting the mount process")?;
    // What the daemon says before it is mounted (its errors) is collected here.
    let said = Arc::new(Mutex::new(String::new()));
    if let Some(mut err) = child.stderr.take() {
        let said = Arc::clone(&said);
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = err.read(&mut buf) {
                if n == 0 {
                    break;
                }
                said.lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        if is_tierwise_mount(mountpoint) {
            if announce {
                println!("mounted {} (pid {})", mountpoint.display(), child.id());
            }
            return Ok(());
        }
        if let Some(status) = child.try_wait()? {
            std::thread::sleep(Duration::from_millis(50)); // the rest of its message
            let msg = said.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
            let msg = msg.trim().trim_start_matches("error: ");
            bail!(
                "{msg}{}",
                if msg.is_empty() { format!("the mount process exited ({status})") } else { String::new() }
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    bail!("{} did not become a tierwise mount within 60 s", mountpoint.display())
}

/// `mount.tierwise SOURCE DIR [-o OPTIONS]`, as mount(8) runs it for `mount -t tierwise` and
/// fstab lines. SOURCE is ROOT (holding `ssd/` and `hdd/`) or `SSD_DIR:HDD_DIR`; OPTIONS are
/// `key=value` settings as in the config file (`config=FILE` reads one), `ro`, and mount(8)'s
/// generic ones, which are ignored.
pub fn mount_helper(argv: Vec<OsString>) -> Result<()> {
    let mut positional: Vec<OsString> = Vec::new();
    let mut options: Vec<String> = Vec::new();
    let mut it = argv.into_iter();
    while let Some(a) = it.next() {
        let s = a.to_string_lossy().into_owned();
        if s == "-o" {
            let o = it.next().context("-o needs a value")?;
            options.extend(o.to_string_lossy().split(',').map(str::to_string));
        } else if let Some(o) = s.strip_prefix("-o") {
            options.extend(o.split(',').map(str::to_string));
        } else if s.starts_with('-') {
            // -s (sloppy), -f (fake), -n (no mtab), -v (verbose), -N namespace: nothing to do.
        } else {
            positional.push(a);
        }
    }
    let [source, dir] = positional.as_slice() else {
        bail!("usage: mount.tierwise ROOT|SSD_DIR:HDD_DIR MOUNTPOINT [-o key=value,...]");
    };
    let dir = Path::new(dir);
    if let Some(m) = mounted_on(dir).filter(|m| m.is_tierwise()) {
        // `mount -a` run again: already mounted from the same source is success, as mount(8)
        // says for other file systems; anything else is refused.
        if m.source == source.to_string_lossy() {
            eprintln!("mount.tierwise: {} is already mounted from {}", dir.display(), m.source);
            return Ok(());
        }
        bail!("{} is already a tierwise mount (of {}); unmount it first", dir.display(), m.source);
    }
    let args = helper_args(&source.to_string_lossy(), dir, &options)?;
    // mount(8) helpers are silent on success.
    spawn_daemon(args, dir, false)
}

/// The `tierwise mount` arguments for a helper call.
pub fn helper_args(source: &str, dir: &Path, options: &[String]) -> Result<Vec<OsString>> {
    // The defaults they name, or mount(8)'s own business: nothing for the daemon to do.
    const GENERIC: &[&str] = &[
        "rw", "defaults", "auto", "noauto", "user", "nouser", "users", "_netdev", "nofail", "exec", "suid", "dev",
        "async", "atime", "relatime", "loop",
    ];
    const KEYS: &[&str] = &[
        "config",
        "policy",
        "volume",
        "ssd_quota",
        "pin_reserve",
        "user_pin_quota",
        "threads",
        "move_rate",
        "emulate_hdd",
        "emulate_ssd",
        "hdd_queue",
        "state_dir",
        "metrics",
        "log",
        "log_level",
    ];
    const SWITCHES: &[&str] = &[
        "allow_other",
        "passthrough",
        "no_passthrough",
        "kernel_cache",
        "direct_io",
        "force_policy",
        // Applied by the kernel to the FUSE mount.
        "noexec",
        "nosuid",
        "nodev",
        "noatime",
        "sync",
    ];
    let mut args: Vec<OsString> = vec!["mount".into(), "--foreground".into(), "--source".into(), source.into()];
    match source.split_once(':') {
        Some((ssd, hdd)) => {
            args.extend(["--ssd".into(), ssd.into(), "--hdd".into(), hdd.into(), dir.into()]);
        }
        None => args.extend([source.into(), dir.into()]),
    }
    for o in options.iter().filter(|o| !o.is_empty()) {
        if GENERIC.contains(&o.as_str()) || o.starts_with("x-") || o.starts_with("comment=") {
            continue;
        }
        if o == "ro" {
            args.push("--read-only".into());
            continue;
        }
        if SWITCHES.contains(&o.as_str()) {
            args.push(format!("--{}", o.replace('_', "-")).into());
            continue;
        }
        let Some((k, v)) = o.split_once('=') else {
            bail!("-o {o}: expected key=value (keys: {}; switches: ro, {})", KEYS.join(", "), SWITCHES.join(", "));
        };
        if !KEYS.contains(&k) {
            bail!("-o {o}: unknown setting `{k}` (keys: {}; switches: ro, {})", KEYS.join(", "), SWITCHES.join(", "));
        }
        args.push(format!("--{}", k.replace('_', "-")).into());
        args.push(v.into());
    }
    Ok(args)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helper_options_become_mount_flags_and_unknown_ones_are_refused() {
        let opts: Vec<String> =
            ["rw", "policy=hycache", "ssd_quota=50%", "allow_other", "x-systemd.automount", "noauto", "ro"]
                .iter()
                .map(|s| s.to_string())
                .collect();
        let a = helper_args("/srv/ssd:/srv/hdd", Path::new("/mnt/t"), &opts).unwrap();
        let a: Vec<String> = a.iter().map(|s| s.to_string_lossy().into_owned()).collect();
        assert_eq!(
            a,
            [
                "mount",
                "--foreground",
                "--source",
                "/srv/ssd:/srv/hdd",
                "--ssd",
                "/srv/ssd",
                "--hdd",
                "/srv/hdd",
                "/mnt/t",
                "--policy",
                "hycache",
                "--ssd-quota",
                "50%",
                "--allow-other",
                "--read-only"
            ]
        );
        // mount(8)'s flags that change what the mount allows are passed on, never dropped.
        let flags: Vec<String> =
            ["noexec", "nosuid", "nodev", "noatime", "exec"].iter().map(|s| s.to_string()).collect();
        let a = helper_args("/srv/tier", Path::new("/mnt/t"), &flags).unwrap();
        let a: Vec<String> = a.iter().skip(6).map(|s| s.to_string_lossy().into_owned()).collect();
        assert_eq!(a, ["--noexec", "--nosuid", "--nodev", "--noatime"]);
        let root = helper_args("/srv/tier", Path::new("/mnt/t"), &[]).unwrap();
        assert_eq!(root.len(), 6);
        let err = helper_args("/srv/tier", Path::new("/mnt/t"), &["speed=9".into()]).unwrap_err().to_string();
        assert!(err.contains("unknown setting `speed`") && err.contains("policy"), "{err}");
    }
}
