//! `tierwise serve`: a hybrid block device exported over NBD by nbdkit with our plugin, and the
//! control verbs (`stats`, `status`, `flush`, `cancel`) on a served device's control socket.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Args;
use serde::Deserialize;
use tierwise_block::{CreateOptions, FileBackend};
use tierwise_core::params::parse_size;

/// Arguments of `tierwise serve`.
#[derive(Args, Debug, Default)]
pub(crate) struct ServeArgs {
    /// The SSD image.
    #[arg(long)]
    ssd: Option<PathBuf>,
    /// The HDD image. Given with --create and an existing image without a tierwise device on
    /// it, the image is adopted in place: the device starts as its bytes (a file system on it
    /// stays mountable through the device).
    #[arg(long)]
    hdd: Option<PathBuf>,
    /// Architecture spec (`tierwise list architectures`; block architectures without a RAM
    /// level are served). Default: the policy the images record (every knob, written at
    /// --create); for new images cache:mode=write-through. Another policy than the recorded one
    /// needs --force-policy.
    #[arg(long)]
    policy: Option<String>,
    /// Change the policy the images record to --policy: dirty blocks are written back to the
    /// HDD first and the SSD starts empty under the new policy.
    #[arg(long, requires = "policy")]
    force_policy: bool,
    /// Make the images first: the SSD image of --ssd-size, and the HDD image of --hdd-size
    /// (or the existing HDD image's size, adopted in place).
    #[arg(long)]
    create: bool,
    /// With --create: the SSD image's size (e.g. 1GiB).
    #[arg(long)]
    ssd_size: Option<String>,
    /// With --create: the virtual device's size on the HDD image (e.g. 20GiB).
    #[arg(long)]
    hdd_size: Option<String>,
    /// With --create: bytes per block (default: the spec's extent size, else 4KiB).
    #[arg(long)]
    block_size: Option<String>,
    /// Serve on this Unix socket (default: the SSD image's path + ".sock").
    #[arg(long, conflicts_with = "port")]
    socket: Option<PathBuf>,
    /// Serve on this TCP port on --bind (default 127.0.0.1).
    #[arg(long)]
    port: Option<u16>,
    /// The address to listen on with --port.
    #[arg(long, default_value = "127.0.0.1")]
    bind: String,
    /// The control socket for `tierwise stats|status|flush|cancel` (default: the NBD socket's
    /// path + ".control", or the SSD image's with --port).
    #[arg(long)]
    control: Option<PathBuf>,
    /// Serve Prometheus metrics on ADDR:PORT.
    #[arg(long)]
    metrics: Option<String>,
    /// Background moves in flight at most (default 2).
    #[arg(long)]
    movers: Option<usize>,
    /// Moves copy at most this many bytes per second (e.g. 50MiB; 0: unlimited).
    #[arg(long)]
    move_rate: Option<String>,
    /// The HDD image answers at this simulated disk's speed (`tierwise list devices`), so
    /// tiering shows on a machine without an HDD; labelled in stats.
    #[arg(long)]
    emulate_hdd: Option<String>,
    /// The SSD image answers at this simulated SSD's speed; labelled in stats.
    #[arg(long)]
    emulate_ssd: Option<String>,
    /// The emulated HDD's request queue, as the simulator's `--hdd-queue`: mq-deadline
    /// (default: sorted, merged, reordered by the drive's NCQ, as a Linux host drives a SATA
    /// disk), none (merged and NCQ, arrival order) or fifo (one request at a time); the kernel's
    /// knobs after a colon, as the simulator's (mq-deadline:fifo_batch=1,writes_starved=2).
    #[arg(long)]
    hdd_queue: Option<String>,
    /// Open the images with O_DIRECT: no page cache between the device and the disks under
    /// the images, so a read of the HDD image waits for that disk (calibrate it with
    /// `tierwise calibrate` for the prediction's preset). Unaligned requests go through
    /// read-modify-write of the 4 KiB blocks they touch.
    #[arg(long)]
    direct: bool,
    /// Settings from a TOML file (the same names as the flags; flags win).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Stay in the foreground until stopped (Ctrl-C or SIGTERM commit a final checkpoint).
    #[arg(long)]
    foreground: bool,
    /// The plugin to load (default: libtierwise_nbd.so beside this binary).
    #[arg(long)]
    plugin: Option<PathBuf>,
}

/// The TOML file `--config` reads.
#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct ServeFile {
    ssd: Option<PathBuf>,
    hdd: Option<PathBuf>,
    policy: Option<String>,
    socket: Option<PathBuf>,
    port: Option<u16>,
    control: Option<PathBuf>,
    metrics: Option<String>,
    movers: Option<usize>,
    move_rate: Option<String>,
    emulate_hdd: Option<String>,
    emulate_ssd: Option<String>,
    hdd_queue: Option<String>,
    direct: Option<bool>,
}

fn merged(mut a: ServeArgs) -> Result<ServeArgs> {
    let Some(path) = a.config.clone() else {
        return Ok(a);
    };
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let f: ServeFile = toml::from_str(&text).with_context(|| format!("{}", path.display()))?;
    a.ssd = a.ssd.or(f.ssd);
    a.hdd = a.hdd.or(f.hdd);
    a.policy = a.policy.or(f.policy);
    if a.port.is_none() {
        a.socket = a.socket.or(f.socket);
    }
    a.port = a.port.or(f.port);
    a.control = a.control.or(f.control);
    a.metrics = a.metrics.or(f.metrics);
    a.movers = a.movers.or(f.movers);
    a.move_rate = a.move_rate.or(f.move_rate);
    a.emulate_hdd = a.emulate_hdd.or(f.emulate_hdd);
    a.emulate_ssd = a.emulate_ssd.or(f.emulate_ssd);
    a.hdd_queue = a.hdd_queue.or(f.hdd_queue);
    a.direct = a.direct || f.direct.unwrap_or(false);
    Ok(a)
}

fn size_arg(flag: &str, v: &str) -> Result<u64> {
    parse_size(v).map_err(|e| anyhow::anyhow!("--{flag} {v}: {e} (for example 512MiB or 20GiB)"))
}

/// Where nbdkit's plugin is.
fn plugin_path(given: Option<&Path>) -> Result<PathBuf> {
    if let Some(p) = given {
        return Ok(p.to_path_buf());
    }
    if let Some(p) = std::env::var_os("TIERWISE_NBD_PLUGIN") {
        return Ok(PathBuf::from(p));
    }
    let exe = std::env::current_exe().context("finding this binary")?;
    let dir = exe.parent().unwrap_or(Path::new("."));
    for cand in [
        dir.join("libtierwise_nbd.so"),
        dir.join("../deps/libtierwise_nbd.so"),
        dir.join("../lib/tierwise/libtierwise_nbd.so"),
    ] {
        if cand.exists() {
            return Ok(cand);
        }
    }
    bail!(
        "the nbdkit plugin libtierwise_nbd.so is not beside {}; build it (cargo build --release -p tierwise-nbd) or pass --plugin",
        exe.display()
    )
}

/// `tierwise serve`.
pub(crate) fn cmd_serve(args: ServeArgs) -> Result<()> {
    let a = merged(args)?;
    let (Some(ssd), Some(hdd)) = (a.ssd.clone(), a.hdd.clone()) else {
        bail!("--ssd IMAGE and --hdd IMAGE are required (or ssd = and hdd = in --config)");
    };
    if let Some(p) = &a.policy {
        tierwise_block::servable(p)?;
    }
    if let Some(q) = &a.hdd_queue {
        if a.emulate_hdd.is_none() {
            bail!("--hdd-queue {q} orders the emulated HDD's requests: give --emulate-hdd PRESET too");
        }
        tierwise_block::HddQueue::parse(q).map_err(|e| anyhow::anyhow!("--hdd-queue {q}: {e}"))?;
    }
    let socket = a.socket.clone().unwrap_or_else(|| with_suffix(&ssd, ".sock"));
    let control = a.control.clone().unwrap_or_else(|| match a.port {
        Some(_) => with_suffix(&ssd, ".control"),
        None => with_suffix(&socket, ".control"),
    });
    let pidfile = with_suffix(&control, ".pid");
    // A Unix socket's path must fit in sun_path: a longer one cannot be bound (or reached by
    // clients), and the control socket's bind failed silently in the daemon.
    let nbd_socket = a.port.is_none().then_some(("NBD socket", "--socket", &socket));
    for (what, flag, path) in nbd_socket.into_iter().chain([("control socket", "--control", &control)]) {
        let path = abs(path);
        let len = path.as_os_str().len();
        if len > MAX_SOCKET_PATH {
            bail!(
                "the {what} {} is {len} bytes long as an absolute path; a Unix socket's path can be at most {MAX_SOCKET_PATH}: give {flag} a shorter path",
                path.display()
            );
        }
    }
    // A running server's pid file is its own: refused before anything is touched.
    if let Some(pid) = running_pid(&pidfile) {
        bail!("a server is already running with pid {pid} ({}); stop it first: kill {pid}", pidfile.display());
    }
    let policy = if a.create {
        let policy = a.policy.clone().unwrap_or_else(|| tierwise_block::DEFAULT_SERVE_POLICY.to_string());
        create_images(&a, &ssd, &hdd, &policy)?;
        policy
    } else {
        for (flag, v) in [("--ssd-size", &a.ssd_size), ("--hdd-size", &a.hdd_size), ("--block-size", &a.block_size)] {
            if v.is_some() {
                bail!("{flag} is for --create; these images exist already");
            }
        }
        // Check the pair before nbdkit starts, read-only, for a clear message.
        let backend = FileBackend::open(&ssd, &hdd, None)?;
        tierwise_block::recovery::inspect(&backend)?;
        let (policy, change) = tierwise_block::choose_policy(&backend, a.policy.as_deref(), a.force_policy)?;
        if change {
            println!("tierwise: changing the policy to {policy}: dirty blocks are written back to the HDD first");
        }
        policy
    };
    let plugin = plugin_path(a.plugin.as_deref())?;
    let _ = std::fs::remove_file(&pidfile);
    if a.port.is_none() {
        remove_stale_socket(&socket)?;
    }
    let mut cmd = Command::new("nbdkit");
    cmd.arg("--exportname").arg("").arg("--pidfile").arg(&pidfile);
    match a.port {
        Some(p) => {
            cmd.arg("--port").arg(p.to_string()).arg("--ipaddr").arg(&a.bind);
        }
        None => {
            cmd.arg("--unix").arg(&socket);
        }
    }
    if a.foreground {
        cmd.arg("--foreground");
    }
    cmd.arg(&plugin)
        .arg(format!("ssd={}", abs(&ssd).display()))
        .arg(format!("hdd={}", abs(&hdd).display()))
        .arg(format!("policy={policy}"))
        .arg(format!("control={}", abs(&control).display()))
        .arg(format!("pidfile={}", abs(&pidfile).display()));
    if a.port.is_none() {
        cmd.arg(format!("socket={}", abs(&socket).display()));
    }
    if a.force_policy {
        cmd.arg("force-policy=true");
    }
    if a.direct {
        cmd.arg("direct=true");
    }
    if let Some(m) = &a.movers {
        cmd.arg(format!("movers={m}"));
    }
    if let Some(r) = &a.move_rate {
        cmd.arg(format!("move-rate={}", size_arg("move-rate", r)?));
    }
    if let Some(m) = &a.metrics {
        cmd.arg(format!("metrics={m}"));
    }
    for (key, preset) in [("emulate-hdd", &a.emulate_hdd), ("emulate-ssd", &a.emulate_ssd), ("hdd-queue", &a.hdd_queue)]
    {
        if let Some(p) = preset {
            cmd.arg(format!("{key}={p}"));
        }
    }
    let uri = match a.port {
        Some(p) => format!("nbd://{}:{p}", a.bind),
        None => format!("nbd+unix:///?socket={}", abs(&socket).display()),
    };
    if a.foreground {
        print_attach(&uri, &a, &socket, &control, &policy);
        // nbdkit takes this process's place, so that a supervisor's SIGTERM reaches it and the
        // device stops cleanly (final checkpoint) instead of losing its parent first.
        use std::os::unix::process::CommandExt;
        let err = cmd.exec();
        bail!("starting nbdkit: {err} (install it: apt-get install nbdkit)");
    }
    let status = cmd.status().context("starting nbdkit (install it: apt-get install nbdkit)")?;
    if !status.success() {
        bail!("nbdkit could not start the device ({status}); its message is above");
    }
    // nbdkit writes its pid file once it accepts connections.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !pidfile.exists() {
        if Instant::now() > deadline {
            bail!("nbdkit did not start serving within 30 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    print_attach(&uri, &a, &socket, &control, &policy);
    Ok(())
}

fn print_attach(uri: &str, a: &ServeArgs, socket: &Path, control: &Path, policy: &str) {
    println!("tierwise: serving {policy} at {uri}");
    if a.direct {
        println!("  DIRECT I/O: the images are open with O_DIRECT (no page cache under the device)");
    }
    for (what, preset) in [("HDD", &a.emulate_hdd), ("SSD", &a.emulate_ssd)] {
        if let Some(p) = preset {
            let queue = match what {
                "HDD" => format!(", behind a {} queue", a.hdd_queue.as_deref().unwrap_or("mq-deadline")),
                _ => String::new(),
            };
            println!("  EMULATED {what}: the image answers at the simulated {p}'s speed{queue}");
        }
    }
    println!("  attach:  nbdinfo '{uri}'");
    println!("           qemu-io -f raw '{uri}'   |   qemu-img info '{uri}'");
    match a.port {
        Some(p) => {
            println!("           nbd-client {} {p} /dev/nbd0   (needs the nbd kernel module)", a.bind);
            println!("           mkdir m && nbdfuse m '{uri}' &   # then m/nbd is the device as a file");
        }
        None => {
            println!("           nbd-client -unix {} /dev/nbd0   (needs the nbd kernel module)", socket.display());
            println!(
                "           mkdir m && nbdfuse m --unix {} &   # then m/nbd is the device as a file",
                socket.display()
            );
        }
    }
    println!("  control: tierwise stats|status|flush|cancel {}", control.display());
    if !a.foreground {
        println!("  stop:    kill $(cat {})   (commits a final checkpoint)", with_suffix(control, ".pid").display());
    }
}

/// The pid in `pidfile` when that process is alive.
fn running_pid(pidfile: &Path) -> Option<i32> {
    let pid: i32 = std::fs::read_to_string(pidfile).ok()?.trim().parse().ok()?;
    (pid > 0 && nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok()).then_some(pid)
}

/// A socket left by a server that was killed is removed; one that answers is in use.
fn remove_stale_socket(socket: &Path) -> Result<()> {
    if is_control_socket(socket) {
        if UnixStream::connect(socket).is_ok() {
            bail!("{} is in use by a running server", socket.display());
        }
        std::fs::remove_file(socket).with_context(|| format!("removing the stale socket {}", socket.display()))?;
    }
    Ok(())
}

fn with_suffix(p: &Path, suffix: &str) -> PathBuf {
    let mut s = p.as_os_str().to_os_string();
    s.push(suffix);
    PathBuf::from(s)
}

/// The longest path a Unix socket can be bound at (`sun_path` holds 108 bytes with its NUL).
const MAX_SOCKET_PATH: usize = 107;

fn abs(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

fn create_images(a: &ServeArgs, ssd: &Path, hdd: &Path, policy: &str) -> Result<()> {
    let Some(ssd_size) = a.ssd_size.as_deref() else {
        bail!("--create needs --ssd-size (and --hdd-size unless the HDD image exists and is adopted in place)");
    };
    let ssd_size = size_arg("ssd-size", ssd_size)?;
    let hdd_size = a.hdd_size.as_deref().map(|v| size_arg("hdd-size", v)).transpose()?;
    if hdd_size.is_none() && !hdd.exists() {
        bail!("--create needs --hdd-size: {} does not exist to be adopted", hdd.display());
    }
    if ssd.exists() && std::fs::metadata(ssd).map(|m| m.len() > 0).unwrap_or(false) {
        bail!("{} exists and is not empty; --create will not overwrite an SSD image (remove it first)", ssd.display());
    }
    let block_size = a.block_size.as_deref().map(|v| size_arg("block-size", v)).transpose()?;
    let backend = FileBackend::open(ssd, hdd, Some((ssd_size, hdd_size.unwrap_or(0))))?;
    let sb =
        tierwise_block::create(&backend, &CreateOptions { spec: policy.to_string(), block_size, ssd_size, hdd_size })?;
    println!(
        "tierwise: created {} ({} slots of {} bytes) and {} ({} bytes of data{})",
        ssd.display(),
        sb.slots,
        sb.block_size,
        hdd.display(),
        sb.hdd_data,
        if hdd_size.is_none() { ", adopted in place" } else { "" }
    );
    Ok(())
}

/// Whether `path` is a served device's control socket (else the control verbs take it as a
/// mountpoint).
pub(crate) fn is_control_socket(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.file_type().is_socket())
}

/// Sends one command to a control socket and returns its JSON answer, waiting at most
/// `timeout` for it (none: as long as the command takes, e.g. a flush).
fn ask(control: &Path, command: &str, timeout: Option<Duration>) -> Result<serde_json::Value> {
    let beside = with_suffix(control, ".control");
    let nbd_socket = || {
        anyhow::anyhow!(
            "{} is the device's NBD socket (for clients); control commands go to its control socket{}",
            control.display(),
            if is_control_socket(&beside) { format!(": {}", beside.display()) } else { String::new() }
        )
    };
    if is_control_socket(&beside) {
        return Err(nbd_socket());
    }
    let mut s = UnixStream::connect(control)
        .with_context(|| format!("connecting to {} (is the device served?)", control.display()))?;
    s.set_read_timeout(timeout)?;
    writeln!(s, "{command}")?;
    let mut line = String::new();
    // An NBD server greets first ("NBDMAGIC") and drops a peer that sends no handshake.
    match BufReader::new(&s).read_line(&mut line) {
        Ok(_) if line.starts_with("NBDMAGIC") => return Err(nbd_socket()),
        Ok(_) => {}
        Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
            bail!(
                "{} did not answer {command} within {:.1} s (--timeout): the server is busy or stuck; `kill -9` of its pid ({}.pid) is safe, it recovers from its checkpoint",
                control.display(),
                timeout.unwrap_or_default().as_secs_f64(),
                control.display()
            );
        }
        Err(e) => {
            return Err(anyhow::anyhow!(
                "{} answered nothing readable ({e}): is it a tierwise control socket?",
                control.display()
            ));
        }
    }
    let v: serde_json::Value = serde_json::from_str(&line).with_context(|| format!("answer to {command}: {line}"))?;
    if v.get("ok").and_then(serde_json::Value::as_bool) == Some(false) {
        bail!("{}", v.get("error").and_then(serde_json::Value::as_str).unwrap_or("failed"));
    }
    Ok(v)
}

/// `tierwise stats SOCKET`.
pub(crate) fn cmd_stats(control: &Path, json: bool, timeout: Duration) -> Result<()> {
    let v = ask(control, "stats", Some(timeout))?;
    if json {
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    let d = &v["device"];
    let n = |x: &serde_json::Value| x.as_u64().unwrap_or(0);
    let reads = &d["reads_by_level"];
    let (ssd, hdd) = (n(&reads[1]), n(&reads[2]));
    println!(
        "reads      {:>12}  ssd {ssd}  hdd {hdd}  hit ratio {:.3}",
        ssd + hdd,
        ssd as f64 / (ssd + hdd).max(1) as f64
    );
    let w = &d["writes_by_level"];
    println!("writes     {:>12}  ssd {}  hdd {}", n(&w[1]) + n(&w[2]), n(&w[1]), n(&w[2]));
    println!("bytes      read {}  written {}", n(&d["read_bytes"]), n(&d["write_bytes"]));
    let m = &d["moves_done"];
    println!(
        "moves      promote {}  demote {}  copy {}  writeback {}  failed {}  bytes {}",
        n(&m[0]),
        n(&m[1]),
        n(&m[2]),
        n(&m[3]),
        n(&d["moves_failed"]),
        n(&d["moved_bytes"])
    );
    println!(
        "commits    {} ({} SSD-only, forced by slot pressure)  flushes {}",
        n(&d["commits"]),
        n(&d["ssd_only_commits"]),
        n(&d["flushes"])
    );
    Ok(())
}

/// `tierwise status SOCKET`.
pub(crate) fn cmd_status(control: &Path, timeout: Duration) -> Result<()> {
    let v = ask(control, "stats", Some(timeout))?;
    let d = &v["device"];
    let n = |x: &serde_json::Value| x.as_u64().unwrap_or(0);
    println!("policy     {}", v["spec"].as_str().unwrap_or("?"));
    for label in v["emulation"].as_array().into_iter().flatten() {
        println!("emulated   {}", label.as_str().unwrap_or("?"));
    }
    println!("size       {} bytes in blocks of {}", n(&v["size"]), n(&v["block_size"]));
    println!(
        "ssd        {} of {} slots used, {} bytes dirty",
        n(&d["slots_used"]),
        n(&d["slots"]),
        n(&d["dirty_bytes"])
    );
    println!("queue      {} moves queued or running", n(&d["queued"]));
    let h = &v["health"];
    match h["reason"].as_str() {
        Some(why) => println!("health     {}: {why}", h["state"].as_str().unwrap_or("?").to_uppercase()),
        None => println!("health     {}", h["state"].as_str().unwrap_or("?")),
    }
    let errs = |d: &str| h["errors"][d].as_array().map(|a| a.iter().map(n).collect::<Vec<_>>()).unwrap_or_default();
    let (ssd, hdd) = (errs("ssd"), errs("hdd"));
    if ssd.iter().chain(&hdd).any(|&x| x > 0) {
        println!("io errors  ssd read/write/sync {ssd:?}  hdd {hdd:?}  retried after back-off {}", n(&h["backed_off"]));
    }
    if n(&d["anomalies"]) > 0 {
        println!("anomalies  {} (answers the device could not act on; please report)", n(&d["anomalies"]));
    }
    Ok(())
}

/// `tierwise flush SOCKET`: writes back every dirty block and waits.
pub(crate) fn cmd_flush(control: &Path) -> Result<()> {
    ask(control, "flush", None)?;
    println!("flushed: no dirty data left on the SSD; a checkpoint is committed");
    Ok(())
}

/// `tierwise cancel SOCKET`.
pub(crate) fn cmd_cancel(control: &Path) -> Result<()> {
    let v = ask(control, "cancel", Some(Duration::from_secs(30)))?;
    println!("cancelled {} queued moves", v["cancelled"].as_u64().unwrap_or(0));
    Ok(())
}
