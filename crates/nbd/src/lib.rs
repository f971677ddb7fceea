//! The nbdkit plugin behind `tierwise serve`: a thin adapter that turns NBD requests into
//! calls on [`tierwise_block::HybridDevice`]. All block logic lives in `tierwise-block`.
//!
//! ```text
//! nbdkit ./libtierwise_nbd.so ssd=SSD.img hdd=HDD.img policy=cache:mode=write-back \
//!        [movers=2] [move-rate=BYTES] [control=SOCKET] [metrics=ADDR:PORT]
//! ```
//!
//! nbdkit's rules this follows: threads start in `after_fork` (nbdkit forks when it
//! daemonizes), a panic must not cross into C (every callback catches unwinding and answers
//! EIO), and only functions that nbdkit 1.32 exports are called.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use nbdkit::{Error, FuaFlags, Result, Server, ThreadModel};
use tierwise_block::{Backend, DeviceError, Emulated, FileBackend, HddQueue, HybridDevice, ServeOptions};

pub mod control;

/// The plugin's parameters, gathered by `config`.
#[derive(Clone, Debug, Default)]
struct Config {
    ssd: Option<PathBuf>,
    hdd: Option<PathBuf>,
    policy: Option<String>,
    force_policy: bool,
    movers: Option<usize>,
    move_rate: Option<u64>,
    control: Option<PathBuf>,
    /// nbdkit's pid file and Unix socket, removed at a clean stop (nbdkit leaves them).
    pidfile: Option<PathBuf>,
    socket: Option<PathBuf>,
    metrics: Option<String>,
    emulate_hdd: Option<String>,
    emulate_ssd: Option<String>,
    hdd_queue: Option<String>,
    /// Open the images with O_DIRECT.
    direct: bool,
}

static CONFIG: Mutex<Config> = Mutex::new(Config {
    ssd: None,
    hdd: None,
    policy: None,
    force_policy: false,
    movers: None,
    move_rate: None,
    control: None,
    pidfile: None,
    socket: None,
    metrics: None,
    emulate_hdd: None,
    emulate_ssd: None,
    hdd_queue: None,
    direct: false,
});
/// Whether the images are open with O_DIRECT (for `stats`).
pub(crate) static DIRECT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
static DEVICE: OnceLock<Arc<HybridDevice>> = OnceLock::new();
/// The emulated images, when `--emulate-*` asked for them (their own stats for `stats`).
static EMULATED: OnceLock<Arc<Emulated>> = OnceLock::new();

/// Each emulated device's label and what it has done so far: requests, bytes, busy time.
pub(crate) fn emulated_stats() -> serde_json::Value {
    let devices = EMULATED.get().map(|e| e.device_stats()).unwrap_or_default();
    devices.into_iter().map(|(label, stats)| serde_json::json!({"label": label, "stats": stats})).collect()
}

/// A `key=true|false` parameter.
fn boolean(key: &str, value: &str) -> Result<bool> {
    match value {
        "true" | "yes" | "1" | "on" => Ok(true),
        "false" | "no" | "0" | "off" => Ok(false),
        _ => Err(Error::new(libc::EINVAL, format!("{key}={value}: expected true or false"))),
    }
}

fn config() -> std::sync::MutexGuard<'static, Config> {
    CONFIG.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn device() -> Result<&'static Arc<HybridDevice>> {
    DEVICE.get().ok_or_else(|| Error::new(libc::EIO, "the device is not open"))
}

fn to_nbd(e: DeviceError) -> Error {
    Error::new(e.errno(), e.to_string())
}

/// Runs a callback, turning a panic into EIO: unwinding into nbdkit's C code would abort it.
fn guarded<T>(what: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => {
            let msg = p
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| p.downcast_ref::<&str>().copied())
                .unwrap_or("unknown panic");
            Err(Error::new(libc::EIO, format!("tierwise: internal error in {what}: {msg}")))
        }
    }
}

/// One client connection (all state is the device's).
#[derive(Debug, Default)]
struct Connection;

impl Server for Connection {
    fn name() -> &'static str {
        "tierwise"
    }

    fn description() -> Option<&'static str> {
        Some("tierwise hybrid SSD/HDD block device: one policy engine places blocks on an SSD image and an HDD image")
    }

    fn config_help() -> Option<&'static str> {
        Some(
            "ssd=PATH        the SSD image (required)\n\
             hdd=PATH        the HDD image (required)\n\
             policy=SPEC     architecture spec (default: the one the images record; for new\n\
                             images cache:mode=write-through)\n\
             force-policy=true   change the recorded policy to policy= (dirty blocks are\n\
                             written back first)\n\
             movers=N        background moves in flight at most (default 2)\n\
             move-rate=BYTES moves copy at most this many bytes per second (0: unlimited)\n\
             control=PATH    Unix socket for tierwise stats|status|flush|cancel\n\
             pidfile=PATH    nbdkit's --pidfile, removed at a clean stop\n\
             socket=PATH     nbdkit's --unix socket, removed at a clean stop\n\
             metrics=ADDR    Prometheus metrics on ADDR:PORT\n\
             emulate-hdd=PRESET  the HDD image answers at this simulated disk's speed (labelled)\n\
             emulate-ssd=PRESET  the SSD image answers at this simulated SSD's speed (labelled)\n\
             hdd-queue=Q     the emulated HDD's queue: mq-deadline (default; with NCQ), none or fifo\n\
             direct=true     open the images with O_DIRECT (no page cache between the device and\n\
                             the disks under the images)",
        )
    }

    fn config(key: &str, value: &str) -> Result<()> {
        guarded("config", || {
            let mut c = config();
            let number = |v: &str| {
                v.parse::<u64>().map_err(|_| Error::new(libc::EINVAL, format!("{key}={v}: expected a whole number")))
            };
            match key {
                "ssd" => c.ssd = Some(PathBuf::from(value)),
                "hdd" => c.hdd = Some(PathBuf::from(value)),
                "policy" => c.policy = Some(value.to_string()),
                "force-policy" => c.force_policy = boolean(key, value)?,
                "direct" => c.direct = boolean(key, value)?,
                "movers" => c.movers = Some(number(value)?.clamp(1, 64) as usize),
                "move-rate" => c.move_rate = Some(number(value)?),
                "control" => c.control = Some(PathBuf::from(value)),
                "pidfile" => c.pidfile = Some(PathBuf::from(value)),
                "socket" => c.socket = Some(PathBuf::from(value)),
                "metrics" => c.metrics = Some(value.to_string()),
                "emulate-hdd" => c.emulate_hdd = Some(value.to_string()),
                "emulate-ssd" => c.emulate_ssd = Some(value.to_string()),
                "hdd-queue" => {
                    HddQueue::parse(value).map_err(|e| Error::new(libc::EINVAL, format!("hdd-queue={value}: {e}")))?;
                    c.hdd_queue = Some(value.to_string());
                }
                _ => {
                    return Err(Error::new(
                        libc::EINVAL,
                        format!(
                            "unknown parameter {key}; allowed: ssd, hdd, policy, force-policy, movers, move-rate, control, pidfile, socket, metrics, emulate-hdd, emulate-ssd, hdd-queue, direct"
                        ),
                    ));
                }
            }
            Ok(())
        })
    }

    fn config_complete() -> Result<()> {
        guarded("config_complete", || {
            let c = config();
            if c.ssd.is_none() || c.hdd.is_none() {
                return Err(Error::new(libc::EINVAL, "ssd=PATH and hdd=PATH are required"));
            }
            if let Some(p) = &c.policy {
                tierwise_block::servable(p).map_err(to_nbd)?;
            }
            Ok(())
        })
    }

    fn get_ready() -> Result<()> {
        guarded("get_ready", || {
            let c = config().clone();
            let (Some(ssd), Some(hdd)) = (c.ssd, c.hdd) else {
                return Err(Error::new(libc::EINVAL, "ssd=PATH and hdd=PATH are required"));
            };
            let files = FileBackend::open_with(&ssd, &hdd, None, c.direct).map_err(to_nbd)?;
            DIRECT.store(c.direct, std::sync::atomic::Ordering::Relaxed);
            // The policy kept with the data, unless another is asked for with force-policy.
            let (spec, change) =
                tierwise_block::choose_policy(&files, c.policy.as_deref(), c.force_policy).map_err(to_nbd)?;
            if change {
                nbdkit::debug!("changing the policy to {spec}: writing back dirty blocks first");
                tierwise_block::change_policy(&files, &spec).map_err(to_nbd)?;
            }
            let (backend, emulation): (Arc<dyn Backend>, Vec<String>) =
                if c.emulate_hdd.is_some() || c.emulate_ssd.is_some() {
                    let queue = HddQueue::parse(c.hdd_queue.as_deref().unwrap_or("mq-deadline"))
                        .map_err(|e| Error::new(libc::EINVAL, e))?;
                    let e = Emulated::new(Box::new(files), c.emulate_hdd.as_deref(), c.emulate_ssd.as_deref(), queue)
                        .map_err(|e| Error::new(libc::EINVAL, e))?;
                    let labels = e.labels().to_vec();
                    let e = Arc::new(e);
                    let _ = EMULATED.set(Arc::clone(&e));
                    (e, labels)
                } else {
                    (Arc::new(files), Vec::new())
                };
            let defaults = ServeOptions::default();
            let opts = ServeOptions {
                spec,
                movers: c.movers.unwrap_or(defaults.movers),
                move_rate: c.move_rate.unwrap_or(0),
                emulation,
                ..defaults
            };
            let dev = tierwise_block::open(backend, opts).map_err(to_nbd)?;
            DEVICE.set(Arc::new(dev)).map_err(|_| Error::new(libc::EIO, "the device was opened twice"))?;
            Ok(())
        })
    }

    fn after_fork() -> Result<()> {
        guarded("after_fork", || {
            let dev = device()?;
            dev.start();
            let c = config().clone();
            if let Some(path) = c.control {
                control::serve_socket(&path, Arc::clone(dev))
                    .map_err(|e| Error::new(libc::EIO, format!("control socket {}: {e}", path.display())))?;
            }
            if let Some(addr) = c.metrics {
                control::serve_metrics(&addr, Arc::clone(dev))
                    .map_err(|e| Error::new(libc::EIO, format!("metrics on {addr}: {e}")))?;
            }
            Ok(())
        })
    }

    fn unload() {
        // The final checkpoint, marked clean. A failure leaves the previous one, which
        // recovery treats as a crash: nothing is lost either way.
        let _ = catch_unwind(|| {
            // Only a server that served removes its files: a second start that was refused
            // (the images are locked) must leave the running server's alone.
            let Some(dev) = DEVICE.get() else { return };
            if let Err(e) = dev.shutdown() {
                eprintln!("tierwise: final checkpoint: {e}");
            }
            let c = config().clone();
            for path in [c.control, c.socket].into_iter().flatten() {
                let _ = std::fs::remove_file(path);
            }
            if let Some(p) = c.pidfile
                && std::fs::read_to_string(&p).is_ok_and(|pid| pid.trim() == std::process::id().to_string())
            {
                let _ = std::fs::remove_file(p);
            }
        });
    }

    fn thread_model() -> Result<ThreadModel> {
        Ok(ThreadModel::Parallel)
    }

    fn open(_readonly: bool) -> Result<Box<dyn Server>> {
        Ok(Box::new(Connection))
    }

    fn get_size(&self) -> Result<i64> {
        guarded("get_size", || Ok(device()?.size() as i64))
    }

    fn is_rotational(&self) -> Result<bool> {
        Ok(false)
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        guarded("pread", || device()?.read(buf, offset).map_err(to_nbd))
    }

    fn write_at(&self, buf: &[u8], offset: u64, flags: nbdkit::Flags) -> Result<()> {
        guarded("pwrite", || device()?.write(buf, offset, flags.contains(nbdkit::Flags::FUA)).map_err(to_nbd))
    }

    fn flush(&self) -> Result<()> {
        guarded("flush", || device()?.flush().map_err(to_nbd))
    }

    fn trim(&self, count: u32, offset: u64, flags: nbdkit::Flags) -> Result<()> {
        guarded("trim", || device()?.trim(offset, u64::from(count), flags.contains(nbdkit::Flags::FUA)).map_err(to_nbd))
    }

    fn zero(&self, count: u32, offset: u64, flags: nbdkit::Flags) -> Result<()> {
        guarded("zero", || {
            if flags.contains(nbdkit::Flags::FAST_ZERO) {
                // Zeroes are written like data: never faster than a write, as FAST_ZERO asks.
                return Err(Error::new(libc::ENOTSUP, "zeroes are written, not fast"));
            }
            device()?.write_zeroes(offset, u64::from(count), flags.contains(nbdkit::Flags::FUA)).map_err(to_nbd)
        })
    }

    fn can_flush(&self) -> Result<bool> {
        Ok(true)
    }

    fn can_fua(&self) -> Result<FuaFlags> {
        Ok(FuaFlags::Native)
    }

    fn can_multi_conn(&self) -> Result<bool> {
        // A flush syncs both images and commits the table for every connection's writes.
        Ok(true)
    }

    fn can_trim(&self) -> Result<bool> {
        Ok(true)
    }

    fn can_extents(&self) -> Result<bool> {
        Ok(true)
    }

    fn extents(&self, count: u32, offset: u64, _flags: nbdkit::Flags, h: &mut nbdkit::ExtentHandle) -> Result<()> {
        guarded("extents", || {
            for e in device()?.extents(offset, u64::from(count)).map_err(to_nbd)? {
                let kind = if e.hole { nbdkit::ExtentType::HoleZero } else { nbdkit::ExtentType::Allocated };
                h.add(e.offset, e.len, kind)?;
            }
            Ok(())
        })
    }

    fn can_write(&self) -> Result<bool> {
        Ok(true)
    }

    fn can_zero(&self) -> Result<bool> {
        Ok(true)
    }

    fn can_fast_zero(&self) -> Result<bool> {
        Ok(true)
    }
}

/// The C entry point nbdkit looks for (`plugin_init`).
mod entry {
    use super::Connection;
    use nbdkit::plugin;

    plugin!(Connection {
        config,
        config_complete,
        config_help,
        get_ready,
        after_fork,
        unload,
        thread_model,
        is_rotational,
        write_at,
        flush,
        trim,
        zero,
        extents,
        can_extents,
        can_flush,
        can_fua,
        can_multi_conn,
        can_trim,
        can_write,
        can_zero,
        can_fast_zero
    });
}
