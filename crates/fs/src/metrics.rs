//! Request latencies (histograms per kind of request) and the Prometheus endpoint.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::control::{LatencyHistogram, Snapshot};

/// Upper bounds of the latency buckets, in seconds (Prometheus `le`); a last bucket is +Inf.
pub const BOUNDS_S: [f64; 16] =
    [1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 5e-2, 0.1, 0.25, 1.0, 5.0];

/// The kinds of request timed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// File reads.
    Read = 0,
    /// File writes.
    Write = 1,
    /// Opens, creates, lookups, attributes, renames and the rest.
    Meta = 2,
}

const KINDS: [(Kind, &str); 3] = [(Kind::Read, "read"), (Kind::Write, "write"), (Kind::Meta, "metadata")];

#[derive(Debug, Default)]
struct Histogram {
    /// Per bucket (not cumulative); the last one is above every bound.
    buckets: [AtomicU64; BOUNDS_S.len() + 1],
    sum_ns: AtomicU64,
}

/// Latency histograms, one per [`Kind`].
#[derive(Debug, Default)]
pub(crate) struct Latencies {
    hist: [Histogram; 3],
}

impl Latencies {
    /// Records one request of `kind` that took `d`.
    pub(crate) fn record(&self, kind: Kind, d: Duration) {
        let h = &self.hist[kind as usize];
        let s = d.as_secs_f64();
        let i = BOUNDS_S.iter().position(|&b| s <= b).unwrap_or(BOUNDS_S.len());
        h.buckets[i].fetch_add(1, Ordering::Relaxed);
        h.sum_ns.fetch_add(d.as_nanos().min(u128::from(u64::MAX)) as u64, Ordering::Relaxed);
    }

    /// Starts timing a request; it is recorded when the timer is dropped.
    pub(crate) fn timer(&self, kind: Kind) -> Timer<'_> {
        Timer { lat: self, kind, start: Instant::now() }
    }

    /// The histograms for a snapshot.
    pub(crate) fn snapshot(&self) -> Vec<LatencyHistogram> {
        KINDS
            .iter()
            .map(|&(kind, name)| {
                let h = &self.hist[kind as usize];
                let counts: Vec<u64> = h.buckets.iter().map(|b| b.load(Ordering::Relaxed)).collect();
                LatencyHistogram {
                    op: name.to_string(),
                    bounds_s: BOUNDS_S.to_vec(),
                    count: counts.iter().sum(),
                    counts,
                    sum_s: h.sum_ns.load(Ordering::Relaxed) as f64 / 1e9,
                }
            })
            .collect()
    }
}

/// Times one request (see [`Latencies::timer`]).
pub(crate) struct Timer<'a> {
    lat: &'a Latencies,
    kind: Kind,
    start: Instant,
}

impl Drop for Timer<'_> {
    fn drop(&mut self) {
        self.lat.record(self.kind, self.start.elapsed());
    }
}

/// Serves `GET /metrics` on `listener` until the process exits (other paths: 404): one
/// thread, one connection at a time, which is all a scraper needs.
pub fn serve_metrics(listener: TcpListener, snapshot: Arc<dyn Fn() -> Snapshot + Send + Sync>) {
    for conn in listener.incoming() {
        let Ok(conn) = conn else { continue };
        let _ = answer(conn, &*snapshot);
    }
}

fn answer(mut conn: TcpStream, snapshot: &dyn Fn() -> Snapshot) -> std::io::Result<()> {
    conn.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    // Skip the headers.
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h)? == 0 || h == "\r\n" || h == "\n" {
            break;
        }
    }
    let mut parts = line.split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    let (status, body) = match (method, path) {
        ("GET", "/metrics") => ("200 OK", snapshot().prometheus()),
        ("GET", _) => ("404 Not Found", String::from("tierwise serves /metrics only\n")),
        _ => ("405 Method Not Allowed", String::from("only GET\n")),
    };
    write!(
        conn,
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    conn.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latencies_land_in_their_buckets() {
        let l = Latencies::default();
        l.record(Kind::Read, Duration::from_micros(7));
        l.record(Kind::Read, Duration::from_millis(3));
        l.record(Kind::Read, Duration::from_secs(9));
        let s = l.snapshot();
        let read = &s[0];
        assert_eq!((read.op.as_str(), read.count), ("read", 3));
        assert_eq!(read.counts[0], 1, "7 µs is under 10 µs");
        assert_eq!(read.counts[8], 1, "3 ms is under 5 ms");
        assert_eq!(*read.counts.last().unwrap(), 1, "9 s is above every bound");
        assert!((read.sum_s - 9.003007).abs() < 1e-9);
        assert_eq!(s[1].count, 0);
    }
}
