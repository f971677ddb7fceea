//! `tierwise mount` and its `--config` file; the daemon ([`daemon`]), the background start and
//! the `mount.tierwise` helper ([`helper`]), and the commands that talk to a running mount
//! ([`control`]) through its control attributes (see `tierwise_fs::control`), so they need no
//! socket and obey the mount's permissions.

mod control;
mod daemon;
mod helper;
mod mountinfo;

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::Args;
pub use control::{cmd_cancel, cmd_flush, cmd_pin, cmd_stats, cmd_status, cmd_umount, cmd_which_tier};
pub use helper::mount_helper;
use serde::Deserialize;
use tierwise_core::Bytes;

#[derive(Args, Default)]
pub struct MountArgs {
    /// MOUNTPOINT with --ssd and --hdd (or a config file naming them), or ROOT MOUNTPOINT where
    /// ROOT holds `ssd/` and `hdd/`.
    #[arg(num_args = 1..=2, required = true)]
    paths: Vec<PathBuf>,
    /// The SSD tier's directory.
    #[arg(long)]
    ssd: Option<PathBuf>,
    /// The HDD tier's directory.
    #[arg(long)]
    hdd: Option<PathBuf>,
    /// A TOML file with any of the settings below (flags given on the command line win).
    #[arg(long)]
    config: Option<PathBuf>,
    /// A file-level architecture (see `tierwise list architectures`), e.g. hycache:collector=lfu
    /// [default: the policy these tiers were last mounted with (recorded in the state store),
    /// else on-demand-caching]. A different policy than the recorded one needs --force-policy.
    #[arg(long)]
    policy: Option<String>,
    /// Change the policy the tiers were last mounted with to --policy: the old policy's dirty
    /// files are written back to the HDD first.
    #[arg(long)]
    force_policy: bool,
    /// A policy for one directory subtree, PREFIX=ARCH (repeatable), e.g. /web=on-demand-caching;
    /// --policy then covers every other path and gives the knobs all volumes share.
    #[arg(long = "volume", value_name = "PREFIX=ARCH")]
    volumes: Vec<String>,
    /// How much of the SSD directory's file system tierwise may use: bytes (40GiB) or a share
    /// (80%) [default: 90%].
    #[arg(long)]
    ssd_quota: Option<String>,
    /// Of the SSD quota, how much is kept for files pinned to the SSD (bytes, or a share of the
    /// quota) [default: 10%].
    #[arg(long)]
    pin_reserve: Option<String>,
    /// Request-handling threads [default: 4].
    #[arg(long)]
    threads: Option<usize>,
    /// Background moves copy at most this many MB/s (0: unlimited) [default: 0].
    #[arg(long)]
    move_rate: Option<f64>,
    /// Delay HDD-tier I/O by this simulator HDD preset (`tierwise list devices`); labelled in status.
    #[arg(long)]
    emulate_hdd: Option<String>,
    /// Delay SSD-tier I/O by this simulator SSD preset; labelled in status.
    #[arg(long)]
    emulate_ssd: Option<String>,
    /// The emulated HDD's request queue, as the simulator's `--hdd-queue`: mq-deadline
    /// (default: merged, sorted, reordered by the drive's NCQ), none or fifo (one at a time).
    #[arg(long)]
    hdd_queue: Option<String>,
    /// Where the state store lives [default: .tierwise-state in the SSD directory].
    #[arg(long)]
    state_dir: Option<PathBuf>,
    /// Serve Prometheus metrics on this address (e.g. 127.0.0.1:9108).
    #[arg(long)]
    metrics: Option<String>,
    /// FUSE passthrough (Linux >= 6.9), the default where the policy allows it (every file
    /// policy but file-write-back, and the baselines): the kernel does a file's I/O on its tier
    /// file, the policy sees opens (as whole-file reads) and sizes at close. Given explicitly,
    /// a policy that cannot use it is warned about.
    #[arg(long)]
    passthrough: bool,
    /// Regular FUSE I/O for every file: the policy sees every read and write with its offset
    /// and length (what per-I/O accounting needs), at a FUSE round trip per request.
    #[arg(long, conflicts_with = "passthrough")]
    no_passthrough: bool,
    /// Let the kernel's page cache sit above the policy (FUSE writeback cache, cached pages kept
    /// across opens): much faster, but the policy sees only the reads the cache misses and
    /// writes when the kernel flushes them. Do not change the tier directories behind the mount.
    #[arg(long)]
    kernel_cache: bool,
    /// Bypass the page cache for regular FUSE I/O: every read and write reaches the policy at
    /// the size the application asked for (about 2x sequential throughput; mmap still works).
    /// Not with --kernel-cache.
    #[arg(long, conflicts_with = "kernel_cache")]
    direct_io: bool,
    /// Stay in the foreground (otherwise tierwise detaches once the mount is live).
    #[arg(long)]
    foreground: bool,
    /// Let other users use the mount (permissions are still checked: default_permissions).
    #[arg(long)]
    allow_other: bool,
    /// Mount read-only: every file is served where it is, nothing moves, and neither the
    /// trees nor the state store are written.
    #[arg(long)]
    read_only: bool,
    /// Do not allow programs to be executed from the mount (mount(8)'s noexec).
    #[arg(long)]
    noexec: bool,
    /// Ignore set-user-id and set-group-id bits (mount(8)'s nosuid).
    #[arg(long)]
    nosuid: bool,
    /// Do not interpret device files (mount(8)'s nodev).
    #[arg(long)]
    nodev: bool,
    /// Do not update access times (mount(8)'s noatime).
    #[arg(long)]
    noatime: bool,
    /// Writes are synchronous (mount(8)'s sync: each write is synced before it returns).
    #[arg(long)]
    sync: bool,
    /// Of the pin reserve, how much each user other than root may pin to the SSD (bytes, or a
    /// share of the reserve) [default: 0: only root pins to the SSD].
    #[arg(long)]
    user_pin_quota: Option<String>,
    /// Log to this file (appended) instead of stderr (in the foreground) or syslog (detached).
    #[arg(long)]
    log: Option<PathBuf>,
    /// error, warn, info or debug [default: info].
    #[arg(long)]
    log_level: Option<String>,
    /// The source shown in the mount table and by `df` (mount.tierwise passes the fstab
    /// source, so `mount -a` recognises the mount) [default: the tiers as given].
    #[arg(long, hide = true)]
    source: Option<String>,
    /// Settings that came from the config file (for messages naming the key).
    #[arg(skip)]
    from_config: Vec<&'static str>,
}

/// The end of `tierwise mount --help`: fstab, signals, logs.
pub const LONG_HELP: &str = "\
fstab and mount -t tierwise (after `ln -s \"$(command -v tierwise)\" /sbin/mount.tierwise`):
  SOURCE  MOUNTPOINT  tierwise  OPTIONS  0 0
  /srv/tw                 /data     tierwise  policy=dynamic-hot-dst,ssd_quota=80%,allow_other  0 0
  /mnt/ssd/tw:/srv/hdd/tw /archive  tierwise  ro,config=/etc/tierwise/archive.toml              0 0
  SOURCE is ROOT (with ROOT/ssd and ROOT/hdd) or SSD_DIR:HDD_DIR. OPTIONS are the config file's
  keys as key=value (config, policy, volume, ssd_quota, pin_reserve, user_pin_quota, threads,
  move_rate, emulate_hdd, emulate_ssd, hdd_queue, state_dir, metrics, log, log_level) and the switches ro,
  allow_other, passthrough, no_passthrough, kernel_cache, direct_io; mount(8)'s generic options are ignored.
  The mount table shows type fuse.tierwise with SOURCE, so `mount -a` run again does nothing.

Signals: SIGTERM and SIGINT unmount (the move in hand rolls back, the state is saved; the mount
  is detached if files are open there, and the daemon exits when they close). SIGHUP is ignored.
Logs: stderr in the foreground (systemd's journal), syslog in the background, or --log FILE.
systemd: contrib/systemd/tierwise@.service (Type=notify), one instance per mountpoint.
One daemon per tier pair: mounting the same tiers again is refused, naming the running mount.";

/// The `--config` file: the same settings as the flags.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    ssd: Option<PathBuf>,
    hdd: Option<PathBuf>,
    policy: Option<String>,
    /// `"/web" = "on-demand-caching"`: a policy per directory prefix.
    volumes: Option<std::collections::BTreeMap<String, String>>,
    ssd_quota: Option<String>,
    pin_reserve: Option<String>,
    threads: Option<usize>,
    move_rate: Option<f64>,
    emulate_hdd: Option<String>,
    emulate_ssd: Option<String>,
    hdd_queue: Option<String>,
    state_dir: Option<PathBuf>,
    metrics: Option<String>,
    allow_other: Option<bool>,
    passthrough: Option<bool>,
    kernel_cache: Option<bool>,
    direct_io: Option<bool>,
    read_only: Option<bool>,
    user_pin_quota: Option<String>,
    log: Option<PathBuf>,
    log_level: Option<String>,
}

impl MountArgs {
    /// Fills what the command line left out from the config file.
    fn merge_config(&mut self) -> Result<()> {
        let Some(path) = &self.config else { return Ok(()) };
        let text = fs::read_to_string(path).with_context(|| format!("reading the config file {}", path.display()))?;
        let c: FileConfig = toml::from_str(&text).map_err(|e| {
            anyhow::anyhow!(
                "config file {}: {e}\n(allowed keys: ssd, hdd, policy, volumes (a table), ssd_quota, pin_reserve, user_pin_quota, threads, move_rate, emulate_hdd, emulate_ssd, hdd_queue, state_dir, metrics, allow_other, passthrough, kernel_cache, direct_io, read_only, log, log_level)",
                path.display()
            )
        })?;
        // Relative tier paths in the file are relative to the file.
        let base = path.parent().unwrap_or(Path::new("."));
        let rel = |p: PathBuf| if p.is_relative() { base.join(p) } else { p };
        self.ssd = self.ssd.take().or(c.ssd.map(rel));
        self.hdd = self.hdd.take().or(c.hdd.map(rel));
        self.state_dir = self.state_dir.take().or(c.state_dir.map(rel));
        self.policy = self.policy.take().or(c.policy);
        if self.volumes.is_empty() {
            self.volumes = c.volumes.unwrap_or_default().into_iter().map(|(p, a)| format!("{p}={a}")).collect();
        }
        if self.ssd_quota.is_none() && c.ssd_quota.is_some() {
            self.from_config.push("ssd_quota");
        }
        if self.pin_reserve.is_none() && c.pin_reserve.is_some() {
            self.from_config.push("pin_reserve");
        }
        if self.user_pin_quota.is_none() && c.user_pin_quota.is_some() {
            self.from_config.push("user_pin_quota");
        }
        if self.move_rate.is_none() && c.move_rate.is_some() {
            self.from_config.push("move_rate");
        }
        if self.log_level.is_none() && c.log_level.is_some() {
            self.from_config.push("log_level");
        }
        if self.hdd_queue.is_none() && c.hdd_queue.is_some() {
            self.from_config.push("hdd_queue");
        }
        self.ssd_quota = self.ssd_quota.take().or(c.ssd_quota);
        self.pin_reserve = self.pin_reserve.take().or(c.pin_reserve);
        self.user_pin_quota = self.user_pin_quota.take().or(c.user_pin_quota);
        self.log = self.log.take().or(c.log.map(rel));
        self.log_level = self.log_level.take().or(c.log_level);
        self.threads = self.threads.or(c.threads);
        self.move_rate = self.move_rate.or(c.move_rate);
        self.emulate_hdd = self.emulate_hdd.take().or(c.emulate_hdd);
        self.emulate_ssd = self.emulate_ssd.take().or(c.emulate_ssd);
        self.hdd_queue = self.hdd_queue.take().or(c.hdd_queue);
        self.metrics = self.metrics.take().or(c.metrics);
        self.allow_other |= c.allow_other.unwrap_or(false);
        match c.passthrough {
            Some(false) if !self.passthrough => self.no_passthrough = true,
            Some(true) if !self.no_passthrough => self.passthrough = true,
            _ => {}
        }
        self.kernel_cache |= c.kernel_cache.unwrap_or(false);
        self.direct_io |= c.direct_io.unwrap_or(false);
        self.read_only |= c.read_only.unwrap_or(false);
        Ok(())
    }

    /// How a setting is named in a message: the flag, or the config file's key when it came
    /// from there.
    fn setting(&self, key: &'static str) -> String {
        match &self.config {
            Some(c) if self.from_config.contains(&key) => format!("config file {}: {key}", c.display()),
            _ => format!("--{}", key.replace('_', "-")),
        }
    }
}

/// The policy spec with per-directory volumes folded in: `type-aware` with the policy's
/// architecture as the default for other paths and its knobs shared by every volume.
fn with_volumes(policy: &str, volumes: &[String]) -> Result<String> {
    if volumes.is_empty() {
        return Ok(policy.to_string());
    }
    let (name, knobs) = policy.split_once(':').unwrap_or((policy, ""));
    if name == "type-aware" {
        bail!("give the volumes either in the type-aware policy or as --volume / [volumes], not both");
    }
    let mut parts = Vec::new();
    for v in volumes {
        let Some((prefix, arch)) = v.split_once('=') else {
            bail!("volume `{v}`: expected PREFIX=ARCH, e.g. /web=on-demand-caching");
        };
        if arch.contains(':') {
            bail!(
                "volume `{v}`: per-volume knobs are not supported; knobs in the policy (`{policy}`) apply to every volume"
            );
        }
        parts.push(format!("{}={}", prefix.trim(), arch.trim()));
    }
    let mut spec = format!("type-aware:default={name},volumes={}", parts.join(";"));
    if !knobs.is_empty() {
        spec.push(',');
        spec.push_str(knobs);
    }
    Ok(spec)
}

/// `SIZE` or `PCT%` of `whole`.
fn size_or_share(flag: &str, text: &str, whole: impl FnOnce() -> Result<u64>) -> Result<u64> {
    match text.strip_suffix('%') {
        Some(p) => {
            let pct: f64 =
                p.trim().parse().map_err(|_| anyhow::anyhow!("{flag} `{text}`: expected a size or a percentage"))?;
            if !(0.0..=100.0).contains(&pct) {
                bail!("{flag} `{text}`: a percentage from 0 to 100");
            }
            Ok((whole()? as f64 * pct / 100.0) as u64)
        }
        None => tierwise_core::params::parse_size(text).map_err(|e| anyhow::anyhow!("{flag} `{text}`: {e}")),
    }
}

/// Bytes tierwise's files already take on the SSD tier (they count towards the quota, so the
/// default quota is derived from free space plus these). Symlinks are not followed.
fn tier_usage(root: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let mut total = 0;
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = fs::read_dir(&dir) else { continue };
        for e in entries.flatten() {
            if e.file_name().as_encoded_bytes().starts_with(b".tierwise-") {
                continue;
            }
            let Ok(m) = e.path().symlink_metadata() else { continue };
            if m.is_dir() {
                stack.push(e.path());
            } else if m.is_file() {
                total += m.blocks() * 512;
            }
        }
    }
    total
}

/// A tierwise mount on `mountpoint` whose daemon is gone (killed -9, crashed) answers every
/// access with ENOTCONN ("transport endpoint is not connected") or ECONNABORTED: it is detached,
/// so that the
/// same mount command (a systemd unit's restart) mounts again. A stale mount of another FUSE
/// file system is not touched.
fn detach_stale(mountpoint: &Path) -> Result<()> {
    // The path as the mount table spells it, without resolving the dead mount itself.
    let abs = std::path::absolute(mountpoint).unwrap_or_else(|_| mountpoint.to_path_buf());
    let abs = match (abs.parent().and_then(|p| fs::canonicalize(p).ok()), abs.file_name()) {
        (Some(p), Some(n)) => p.join(n),
        _ => abs,
    };
    let Some(m) = mountinfo::mounts().into_iter().rev().find(|m| m.mountpoint == abs) else {
        return Ok(());
    };
    // statfs always reaches the daemon (a stat may be answered from the kernel's cache).
    // A dead daemon's mount answers ENOTCONN, or ECONNABORTED once the kernel aborted it.
    match nix::sys::statfs::statfs(&abs) {
        Err(nix::errno::Errno::ENOTCONN | nix::errno::Errno::ECONNABORTED) => {}
        _ => return Ok(()),
    }
    if !m.is_tierwise() {
        bail!(
            "{} is a {} mount whose daemon is gone; detach it first (fusermount3 -uz {})",
            mountpoint.display(),
            m.fstype,
            mountpoint.display()
        );
    }
    let detached = if nix::unistd::Uid::effective().is_root() {
        nix::mount::umount2(&abs, nix::mount::MntFlags::MNT_DETACH).map_err(|e| anyhow::anyhow!("{e}"))
    } else {
        std::process::Command::new("fusermount3")
            .arg("-uz")
            .arg(&abs)
            .status()
            .map_err(|e| anyhow::anyhow!("fusermount3: {e}"))
            .and_then(|s| if s.success() { Ok(()) } else { Err(anyhow::anyhow!("fusermount3 -uz: {s}")) })
    };
    detached.with_context(|| format!("detaching the stale mount on {}", mountpoint.display()))?;
    eprintln!(
        "tierwise: {} was a tierwise mount whose daemon is gone (of {}); detached it, mounting again",
        mountpoint.display(),
        m.source
    );
    Ok(())
}

/// `tierwise mount`: checks everything, then serves in the foreground or starts a daemon in
/// the background and returns once the mount is live.
pub fn cmd_mount(mut a: MountArgs) -> Result<()> {
    use tierwise_fs::{HybridFs, MountConfig, Tiers};
    a.merge_config()?;
    let (ssd, hdd, mountpoint) = match (&a.ssd, &a.hdd, a.paths.as_slice()) {
        (Some(s), Some(h), [m]) => (s.clone(), h.clone(), m.clone()),
        (None, None, [root, m]) => (root.join("ssd"), root.join("hdd"), m.clone()),
        (None, None, [_]) => {
            bail!("give --ssd DIR --hdd DIR MOUNTPOINT, or ROOT MOUNTPOINT with ROOT/ssd and ROOT/hdd")
        }
        (Some(_), None, _) | (None, Some(_), _) => {
            bail!("give both --ssd and --hdd (or neither, with ROOT MOUNTPOINT)")
        }
        _ => bail!("give either --ssd and --hdd with one MOUNTPOINT, or ROOT MOUNTPOINT (not both forms)"),
    };
    // The mount table's source names the tiers absolutely (a relative one means nothing to
    // `df` or `mount -a` run elsewhere).
    let absolute = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    let source = a.source.clone().unwrap_or_else(|| match (&a.ssd, &a.hdd, a.paths.as_slice()) {
        (None, None, [root, _]) => absolute(root).display().to_string(),
        _ => format!("{}:{}", absolute(&ssd).display(), absolute(&hdd).display()),
    });
    detach_stale(&mountpoint)?;
    if !mountpoint.exists() {
        bail!("mountpoint `{}` does not exist (create the directory first)", mountpoint.display());
    }
    if !mountpoint.is_dir() {
        bail!("mountpoint `{}`: not a directory", mountpoint.display());
    }
    if let Some(m) = mountinfo::mounted_on(&mountpoint).filter(|m| m.is_tierwise()) {
        bail!("{} is already a tierwise mount (of {}); unmount it first", mountpoint.display(), m.source);
    }
    let threads = a.threads.unwrap_or(4);
    if threads == 0 {
        bail!("--threads 0: expected at least 1");
    }
    let tiers = Tiers::open(&ssd, &hdd, &mountpoint)?;
    // The policy kept with the data, unless another is asked for (and then only with
    // --force-policy, which HybridFs::new checks too).
    let stored = match tierwise_fs::stored_policy(&tiers.ssd, a.state_dir.as_deref()) {
        // Another daemon has these tiers: the tier lock refuses this mount below, naming it.
        Err(tierwise_fs::MountError::StoreInUse(_)) => None,
        r => r?,
    };
    let asked = (a.policy.is_some() || !a.volumes.is_empty())
        .then(|| with_volumes(a.policy.as_deref().unwrap_or("on-demand-caching"), &a.volumes))
        .transpose()?;
    let policy = match (asked, &stored) {
        (Some(p), Some(s)) if !tierwise_core::same_policy(&p, s) && !a.force_policy && !a.read_only => {
            bail!(
                "these tiers were last mounted with the policy `{s}`, not `{p}`: mount without --policy to keep it, or add --force-policy to change it (dirty files are written back to the HDD first); nothing was changed"
            )
        }
        (Some(p), _) => p,
        (None, Some(s)) => s.clone(),
        (None, None) => "on-demand-caching".to_string(),
    };
    tierwise_fs::check_policy(&policy)?;
    let quota = size_or_share(&a.setting("ssd_quota"), a.ssd_quota.as_deref().unwrap_or("90%"), || {
        // A share of what tierwise can have: the free space plus what its files take already
        // (the SSD's file system may hold other data too).
        let st = nix::sys::statvfs::statvfs(&tiers.ssd).context("statfs of the SSD tier")?;
        Ok(st.blocks_available().saturating_mul(st.fragment_size()) + tier_usage(&tiers.ssd))
    })?;
    if quota == 0 {
        bail!("{}: must be more than 0 bytes", a.setting("ssd_quota"));
    }
    let pin_reserve =
        size_or_share(&a.setting("pin_reserve"), a.pin_reserve.as_deref().unwrap_or("10%"), || Ok(quota))?;
    if pin_reserve >= quota {
        bail!(
            "{}: {} leaves the policy no SSD space (quota {})",
            a.setting("pin_reserve"),
            Bytes(pin_reserve),
            Bytes(quota)
        );
    }
    let user_pin_quota =
        size_or_share(&a.setting("user_pin_quota"), a.user_pin_quota.as_deref().unwrap_or("0"), || Ok(pin_reserve))?;
    if a.kernel_cache && a.direct_io {
        bail!("kernel_cache keeps pages cached and direct_io bypasses the page cache: pick one");
    }
    let move_rate = a.move_rate.unwrap_or(0.0);
    if !(move_rate >= 0.0 && move_rate.is_finite()) {
        bail!("{} {move_rate}: MB/s, 0 or more (0: unlimited)", a.setting("move_rate"));
    }
    let log_level = tierwise_fs::log::Level::parse(a.log_level.as_deref().unwrap_or("info"))
        .map_err(|e| anyhow::anyhow!("{}: {e}", a.setting("log_level")))?;
    for (flag, preset, hdd) in [("--emulate-hdd", &a.emulate_hdd, true), ("--emulate-ssd", &a.emulate_ssd, false)] {
        if let Some(p) = preset {
            let presets = tierwise_sim::device::Presets::builtin();
            let ok = if hdd { presets.hdd(p).map(|_| ()) } else { presets.ssd(p).map(|_| ()) };
            ok.map_err(|e| anyhow::anyhow!("{flag}: {e}"))?;
        }
    }
    let hdd_queue = match &a.hdd_queue {
        None => tierwise_sim::device::QueueConfig::default(),
        Some(q) if a.emulate_hdd.is_none() => {
            bail!("{} {q} orders the emulated HDD's requests: give --emulate-hdd PRESET too", a.setting("hdd_queue"))
        }
        Some(q) => tierwise_sim::device::QueueConfig::parse(q)
            .map_err(|e| anyhow::anyhow!("{} {q}: {e}", a.setting("hdd_queue")))?,
    };
    let cfg = MountConfig {
        pin_reserve,
        hdd_queue,
        user_pin_quota,
        state_dir: a.state_dir.clone(),
        move_rate: (move_rate * 1e6) as u64,
        emulate_hdd: a.emulate_hdd.clone(),
        emulate_ssd: a.emulate_ssd.clone(),
        passthrough: !a.no_passthrough,
        kernel_cache: a.kernel_cache,
        direct_io: a.direct_io,
        read_only: a.read_only,
        force_policy: a.force_policy,
        mountpoint: Some(fs::canonicalize(&mountpoint).unwrap_or_else(|_| mountpoint.clone())),
        ..MountConfig::new(&policy, quota)
    };
    let plan = tierwise_fs::data_path_plan(&cfg)?;
    // Bind before detaching, so a taken port is reported to the user.
    let metrics = match &a.metrics {
        Some(addr) => {
            Some(std::net::TcpListener::bind(addr).with_context(|| format!("--metrics {addr}: cannot listen there"))?)
        }
        None => None,
    };
    if !a.foreground {
        if a.passthrough
            && let Some(why) = &plan.declined
        {
            // Said on the terminal, not only in the daemon's log.
            eprintln!("tierwise: warning: --passthrough: {why}; those files use {}", plan.description);
        }
        drop(metrics);
        let mut args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
        args.push("--foreground".into());
        return helper::spawn_daemon(args, &mountpoint, true);
    }
    // Signals are blocked before any thread starts (the mover, metrics, FUSE workers).
    let signals = daemon::prepare()?;
    if std::env::var_os(daemon::DETACHED_ENV).is_none()
        && a.passthrough
        && let Some(why) = &plan.declined
    {
        eprintln!("tierwise: warning: --passthrough: {why}; those files use {}", plan.description);
    }
    let fs = HybridFs::new(tiers, &cfg)?;
    if let Some(listener) = metrics {
        let snapshot = fs.snapshot_fn();
        std::thread::Builder::new()
            .name("tierwise-metrics".into())
            .spawn(move || tierwise_fs::metrics::serve_metrics(listener, snapshot))?;
    }
    let mut fcfg = fuser::Config::default();
    fcfg.mount_options = tierwise_fs::mount_options(&source);
    if a.read_only {
        fcfg.mount_options.push(fuser::MountOption::RO);
    }
    // mount(8)'s generic flags, applied by the kernel (fstab's noexec must stop a script).
    for (on, opt) in [
        (a.noexec, fuser::MountOption::NoExec),
        (a.nosuid, fuser::MountOption::NoSuid),
        (a.nodev, fuser::MountOption::NoDev),
        (a.noatime, fuser::MountOption::NoAtime),
        (a.sync, fuser::MountOption::Sync),
    ] {
        if on {
            fcfg.mount_options.push(opt);
        }
    }
    if a.allow_other {
        // fuser adds allow_other for this ACL.
        fcfg.acl = fuser::SessionACL::All;
    }
    fcfg.n_threads = Some(threads);
    let emulated = match (&a.emulate_ssd, &a.emulate_hdd) {
        (None, None) => String::new(),
        (s, h) => format!(
            ", EMULATED tiers:{}{}",
            s.as_ref().map(|p| format!(" ssd={p}")).unwrap_or_default(),
            h.as_ref().map(|p| format!(" hdd={p}")).unwrap_or_default()
        ),
    };
    tierwise_fs::log::info(format_args!(
        "mounting {} (ssd {}, hdd {}, policy {policy}, {}, SSD quota {}, pin reserve {}{}{emulated})",
        mountpoint.display(),
        ssd.display(),
        hdd.display(),
        plan.description,
        Bytes(quota),
        Bytes(pin_reserve),
        if a.read_only { ", read-only" } else { "" },
    ));
    let logs = daemon::LogPlan { level: log_level, file: a.log.clone() };
    daemon::serve(fs, &mountpoint, &fcfg, signals, &logs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn volumes_become_a_type_aware_policy_with_shared_knobs() {
        assert_eq!(with_volumes("hycache", &[]).unwrap(), "hycache");
        let v = ["/web=on-demand-caching".to_string(), " /db = file-write-back".to_string()];
        assert_eq!(
            with_volumes("dynamic-hot-dst:sieve=4MiB", &v).unwrap(),
            "type-aware:default=dynamic-hot-dst,volumes=/web=on-demand-caching;/db=file-write-back,sieve=4MiB"
        );
        let err = with_volumes("dynamic-hot-dst", &["/web".into()]).unwrap_err().to_string();
        assert!(err.contains("PREFIX=ARCH"), "{err}");
        let err = with_volumes("dynamic-hot-dst", &["/web=hycache:threshold=50%".into()]).unwrap_err().to_string();
        assert!(err.contains("per-volume knobs"), "{err}");
        let err = with_volumes("type-aware:volumes=/a=on-demand-caching", &v).unwrap_err().to_string();
        assert!(err.contains("not both"), "{err}");
        // The composed spec is one the mount accepts; a bad volume architecture is named.
        tierwise_fs::check_policy(&with_volumes("dynamic-hot-dst", &v).unwrap()).unwrap();
        let bad = with_volumes("dynamic-hot-dst", &["/web=greendm-tiering".into()]).unwrap();
        let err = tierwise_fs::check_policy(&bad).unwrap_err().to_string();
        assert!(err.contains("greendm-tiering") && err.contains("on-demand-caching"), "{err}");
    }

    #[test]
    fn config_files_fill_in_what_flags_leave_out_and_reject_unknown_keys() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = dir.path().join("t.toml");
        fs::write(&cfg, "ssd = \"fast\"\nhdd = \"/abs/slow\"\npolicy = \"hycache\"\nthreads = 2\nmove_rate = 5.0\n")
            .unwrap();
        let mut a = MountArgs { config: Some(cfg.clone()), policy: Some("loris-dst".into()), ..MountArgs::default() };
        a.merge_config().unwrap();
        assert_eq!(a.ssd, Some(dir.path().join("fast")));
        assert_eq!(a.hdd, Some(PathBuf::from("/abs/slow")));
        assert_eq!(a.policy.as_deref(), Some("loris-dst"), "the flag wins");
        assert_eq!((a.threads, a.move_rate), (Some(2), Some(5.0)));
        fs::write(&cfg, "policy = \"dynamic-hot-dst\"\n[volumes]\n\"/web\" = \"on-demand-caching\"\n").unwrap();
        let mut a = MountArgs { config: Some(cfg.clone()), ..MountArgs::default() };
        a.merge_config().unwrap();
        assert_eq!(a.volumes, ["/web=on-demand-caching"]);
        fs::write(&cfg, "speed = 3\n").unwrap();
        let mut a = MountArgs { config: Some(cfg), ..MountArgs::default() };
        let err = a.merge_config().unwrap_err().to_string();
        assert!(err.contains("speed") && err.contains("allowed keys"), "{err}");
    }
}
