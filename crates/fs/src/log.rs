//! The daemon's log: levels, and one sink chosen at start (stderr, a file, or syslog, which
//! journald collects). Under systemd (stderr connected to the journal, `JOURNAL_STREAM` set)
//! each line carries its syslog priority as a `<N>` prefix, which journald turns into the
//! entry's priority.

use std::fmt::Arguments;
use std::io::Write;
use std::os::unix::net::UnixDatagram;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU8, Ordering};

/// How much to log.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Something failed and needs an admin.
    Error = 0,
    /// Something unusual that tierwise handled.
    Warn = 1,
    /// Start, stop, tiers lost and back.
    Info = 2,
    /// Every move and decision of note.
    Debug = 3,
}

impl Level {
    /// Parses `error`, `warn`, `info` or `debug`.
    pub fn parse(s: &str) -> Result<Level, String> {
        match s {
            "error" => Ok(Level::Error),
            "warn" | "warning" => Ok(Level::Warn),
            "info" => Ok(Level::Info),
            "debug" => Ok(Level::Debug),
            _ => Err(format!("log level `{s}`: expected error, warn, info or debug")),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Level::Error => "error",
            Level::Warn => "warning",
            Level::Info => "info",
            Level::Debug => "debug",
        }
    }

    /// The syslog priority (daemon facility added where syslog needs it).
    fn priority(self) -> u8 {
        match self {
            Level::Error => 3,
            Level::Warn => 4,
            Level::Info => 6,
            Level::Debug => 7,
        }
    }
}

/// Where the log goes.
#[derive(Debug)]
pub enum Sink {
    /// Standard error (the foreground, and systemd services).
    Stderr,
    /// A file, appended to (`--log FILE`).
    File(std::fs::File),
    /// The local syslog socket (`/dev/log`, read by journald or rsyslog): a detached daemon.
    Syslog(UnixDatagram),
}

static LEVEL: AtomicU8 = AtomicU8::new(Level::Info as u8);
static SINK: Mutex<Option<Sink>> = Mutex::new(None);

/// Sets the level and the sink (stderr until this is called).
pub fn init(level: Level, sink: Sink) {
    LEVEL.store(level as u8, Ordering::Relaxed);
    *SINK.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(sink);
}

/// The syslog socket, when there is one.
pub fn syslog() -> Option<Sink> {
    let s = UnixDatagram::unbound().ok()?;
    s.connect("/dev/log").ok()?;
    Some(Sink::Syslog(s))
}

/// Whether `level` is logged.
pub fn enabled(level: Level) -> bool {
    level as u8 <= LEVEL.load(Ordering::Relaxed)
}

/// Logs a line at `level`.
pub fn log(level: Level, args: Arguments<'_>) {
    if !enabled(level) {
        return;
    }
    let mut sink = SINK.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    match sink.as_mut() {
        None | Some(Sink::Stderr) => {
            let prefix = if std::env::var_os("JOURNAL_STREAM").is_some() {
                format!("<{}>", level.priority())
            } else {
                String::new()
            };
            let _ = writeln!(std::io::stderr(), "{prefix}tierwise: {}: {args}", level.name());
        }
        Some(Sink::File(f)) => {
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
            let _ = writeln!(f, "{}.{:03} {} {args}", now.as_secs(), now.subsec_millis(), level.name());
        }
        Some(Sink::Syslog(s)) => {
            // RFC 3164 without a timestamp (the receiver adds one); facility daemon (3).
            let line = format!("<{}>tierwise[{}]: {args}", 3 * 8 + level.priority(), std::process::id());
            if s.send(line.as_bytes()).is_err() {
                let _ = writeln!(std::io::stderr(), "tierwise: {}: {args}", level.name());
            }
        }
    }
}

/// Logs an error.
pub fn error(args: Arguments<'_>) {
    log(Level::Error, args);
}

/// Logs a warning.
pub fn warn(args: Arguments<'_>) {
    log(Level::Warn, args);
}

/// Logs an informational line.
pub fn info(args: Arguments<'_>) {
    log(Level::Info, args);
}

/// Logs a debugging line.
pub fn debug(args: Arguments<'_>) {
    log(Level::Debug, args);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_parse_and_filter_and_a_file_sink_gets_the_lines() {
        assert_eq!(Level::parse("warn"), Ok(Level::Warn));
        assert!(Level::parse("loud").unwrap_err().contains("error, warn, info or debug"));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        init(Level::Info, Sink::File(std::fs::File::create(&path).unwrap()));
        info(format_args!("mounted {}", 1));
        debug(format_args!("not shown"));
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("info mounted 1") && !text.contains("not shown"), "{text}");
        init(Level::Info, Sink::Stderr);
    }
}
