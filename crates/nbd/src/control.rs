//! Control and visibility for a served device: a Unix socket for `tierwise stats|status|flush|
//! cancel` (one command per line, JSON answers) and a Prometheus endpoint.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tierwise_block::HybridDevice;

/// The answer to one control command.
pub fn answer(dev: &HybridDevice, line: &str) -> String {
    let mut words = line.split_whitespace();
    let reply = match (words.next(), words.next()) {
        (Some("stats"), None) => {
            let (engine, arch) = dev.engine_stats();
            serde_json::json!({
                "spec": dev.spec(),
                "size": dev.size(),
                "block_size": dev.block_size(),
                "emulation": dev.emulation(),
                "emulated_devices": crate::emulated_stats(),
                "direct_io": crate::DIRECT.load(std::sync::atomic::Ordering::Relaxed),
                "movers": dev.movers(),
                "device": dev.stats(),
                "health": dev.health(),
                "engine": engine,
                "arch": arch.into_iter().collect::<std::collections::BTreeMap<_, _>>(),
            })
        }
        (Some("flush"), None) => match dev.writeback_all(Duration::from_secs(600)).and_then(|idle| {
            dev.flush()?;
            Ok(idle)
        }) {
            Ok(true) => serde_json::json!({"ok": true}),
            Ok(false) => serde_json::json!({"ok": false, "error": "write-back still running after 10 minutes"}),
            Err(e) => serde_json::json!({"ok": false, "error": e.to_string()}),
        },
        (Some("cancel"), None) => serde_json::json!({"ok": true, "cancelled": dev.cancel_queued()}),
        (Some("move-rate"), Some(v)) => match v.parse::<u64>() {
            Ok(rate) => {
                dev.set_move_rate(rate);
                serde_json::json!({"ok": true, "move_rate": rate})
            }
            Err(_) => {
                serde_json::json!({"ok": false, "error": format!("move-rate {v}: bytes per second, a whole number")})
            }
        },
        // Test-only (see `HybridDevice::wedge_for_tests`): refused unless the server was started
        // with TIERWISE_TEST_FAULTS=1.
        (Some("test-fault"), Some("wedge")) if test_faults_allowed() => {
            dev.wedge_for_tests();
            serde_json::json!({"ok": true, "fault": "wedge"})
        }
        _ => serde_json::json!({
            "ok": false,
            "error": format!("unknown command {line:?}; allowed: stats, flush, cancel, move-rate BYTES"),
        }),
    };
    reply.to_string()
}

/// Whether the test-only faults are on (`TIERWISE_TEST_FAULTS=1`).
fn test_faults_allowed() -> bool {
    std::env::var_os("TIERWISE_TEST_FAULTS").is_some_and(|v| v == "1")
}

/// Serves the control socket at `path` (replacing a stale socket file) on a thread.
pub fn serve_socket(path: &Path, dev: Arc<HybridDevice>) -> std::io::Result<()> {
    if path.exists() {
        // A live server answers; a stale socket from a crash does not and is replaced.
        if UnixStream::connect(path).is_ok() {
            return Err(std::io::Error::new(std::io::ErrorKind::AddrInUse, "another server answers on it"));
        }
        std::fs::remove_file(path)?;
    }
    let listener = UnixListener::bind(path)?;
    std::thread::Builder::new().name("tierwise-control".into()).spawn(move || {
        for stream in listener.incoming().flatten() {
            let dev = Arc::clone(&dev);
            let _ = std::thread::Builder::new().name("tierwise-control-conn".into()).spawn(move || {
                let mut out = match stream.try_clone() {
                    Ok(s) => s,
                    Err(_) => return,
                };
                for line in BufReader::new(stream).lines() {
                    let Ok(line) = line else { break };
                    if writeln!(out, "{}", answer(&dev, &line)).is_err() {
                        break;
                    }
                }
            });
        }
    })?;
    Ok(())
}

/// The Prometheus exposition of the device's counters.
pub fn prometheus(dev: &HybridDevice) -> String {
    let s = dev.stats();
    let (e, _) = dev.engine_stats();
    let mut out = String::new();
    let mut metric = |name: &str, help: &str, kind: &str, samples: &[(&str, u64)]| {
        out.push_str(&format!("# HELP tierwise_block_{name} {help}\n# TYPE tierwise_block_{name} {kind}\n"));
        for (labels, v) in samples {
            if labels.is_empty() {
                out.push_str(&format!("tierwise_block_{name} {v}\n"));
            } else {
                out.push_str(&format!("tierwise_block_{name}{{{labels}}} {v}\n"));
            }
        }
    };
    metric("read_bytes_total", "Bytes read by clients.", "counter", &[("", s.read_bytes)]);
    metric("write_bytes_total", "Bytes written by clients.", "counter", &[("", s.write_bytes)]);
    metric(
        "reads_total",
        "Client reads by the level that served them.",
        "counter",
        &[
            ("level=\"ram\"", s.reads_by_level[0]),
            ("level=\"ssd\"", s.reads_by_level[1]),
            ("level=\"hdd\"", s.reads_by_level[2]),
        ],
    );
    metric(
        "writes_total",
        "Client writes by the slowest level written.",
        "counter",
        &[
            ("level=\"ram\"", s.writes_by_level[0]),
            ("level=\"ssd\"", s.writes_by_level[1]),
            ("level=\"hdd\"", s.writes_by_level[2]),
        ],
    );
    metric(
        "moves_total",
        "Background work done, by kind.",
        "counter",
        &[
            ("kind=\"promote\"", s.moves_done[0]),
            ("kind=\"demote\"", s.moves_done[1]),
            ("kind=\"copy\"", s.moves_done[2]),
            ("kind=\"writeback\"", s.moves_done[3]),
        ],
    );
    metric("moves_failed_total", "Background work that failed.", "counter", &[("", s.moves_failed)]);
    metric(
        "moved_bytes_total",
        "Bytes copied between the images by background work.",
        "counter",
        &[("", s.moved_bytes)],
    );
    metric("commits_total", "Metadata checkpoints committed.", "counter", &[("", s.commits)]);
    metric("flushes_total", "Flushes and FUA writes.", "counter", &[("", s.flushes)]);
    metric("queued", "Background work queued or running.", "gauge", &[("", s.queued)]);
    metric("slots_used", "SSD slots holding a block.", "gauge", &[("", s.slots_used)]);
    metric("slots", "SSD slots.", "gauge", &[("", s.slots)]);
    metric("dirty_bytes", "Bytes on the SSD newer than the HDD.", "gauge", &[("", s.dirty_bytes)]);
    metric("invalidations_total", "SSD copies dropped.", "counter", &[("", e.issued[4])]);
    let h = dev.health();
    let ops = ["read", "write", "sync"];
    let errors: Vec<(String, u64)> = [("ssd", h.errors.ssd), ("hdd", h.errors.hdd)]
        .iter()
        .flat_map(|(d, counts)| ops.iter().zip(counts).map(move |(o, n)| (format!("device=\"{d}\",op=\"{o}\""), *n)))
        .collect();
    let errors: Vec<(&str, u64)> = errors.iter().map(|(l, n)| (l.as_str(), *n)).collect();
    metric("io_errors_total", "I/O errors by image and operation.", "counter", &errors);
    metric(
        "health",
        "1 for the device's state: ok, degraded (an image errs, or the SSD was detached), failed (the SSD failed holding dirty blocks).",
        "gauge",
        &[
            ("state=\"ok\"", u64::from(h.state == "ok")),
            ("state=\"degraded\"", u64::from(h.state == "degraded")),
            ("state=\"failed\"", u64::from(h.state == "failed")),
        ],
    );
    metric("backed_off_total", "Failed background work retried after a pause.", "counter", &[("", h.backed_off)]);
    metric(
        "retired_slots_total",
        "SSD slots taken out of use after a read error.",
        "counter",
        &[("", h.retired_slots)],
    );
    out
}

/// Serves `GET /metrics` on `addr` on a thread.
pub fn serve_metrics(addr: &str, dev: Arc<HybridDevice>) -> std::io::Result<()> {
    let listener = TcpListener::bind(addr)?;
    std::thread::Builder::new().name("tierwise-metrics".into()).spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
            let mut req = [0u8; 1024];
            let n = stream.read(&mut req).unwrap_or(0);
            let head = String::from_utf8_lossy(&req[..n]);
            let (status, body) = if head.starts_with("GET /metrics") || head.starts_with("GET / ") {
                ("200 OK", prometheus(&dev))
            } else {
                ("404 Not Found", "only /metrics is served\n".to_string())
            };
            let _ = write!(
                stream,
                "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    })?;
    Ok(())
}
