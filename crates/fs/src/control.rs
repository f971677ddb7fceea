//! Control and visibility: the statistics a mount reports (`tierwise stats`, `status`, the
//! Prometheus endpoint) and the names of the control attributes.
//!
//! The command line talks to a running mount through extended attributes, so no socket or
//! extra permission model is needed: reading `user.tierwise.stats` on the mount's root returns
//! [`Snapshot`] as JSON; writing `user.tierwise.flush` (any value) on the root queues the
//! write-back of every dirty file; `user.tierwise.cancel` cancels the move in progress;
//! `user.tierwise.move_rate` (MB/s, 0 = unlimited) changes the move rate; on a file,
//! `user.tierwise.pin` (`ssd`, `hdd` or `none`) pins or unpins it and `user.tierwise.tier` says
//! where it is.

use serde::{Deserialize, Serialize};

/// Read on the root: the statistics as JSON.
pub const XATTR_STATS: &str = "user.tierwise.stats";
/// Written on the root: write back every dirty file.
pub const XATTR_FLUSH: &str = "user.tierwise.flush";
/// Written on the root: cancel the move in progress (it is rolled back and may be retried).
pub const XATTR_CANCEL: &str = "user.tierwise.cancel";
/// Written on the root: the move rate in MB/s (0 = unlimited).
pub const XATTR_MOVE_RATE: &str = "user.tierwise.move_rate";
/// On a file: `ssd`, `hdd` or `none`.
pub const XATTR_PIN: &str = "user.tierwise.pin";
/// On a file: where it is (read only).
pub const XATTR_TIER: &str = "user.tierwise.tier";
/// Written on the root, test-only: `deadlock-engine` takes the engine's lock and never gives it
/// back (the tests that prove the shared teardown clears a deadlocked daemon). Refused unless
/// the daemon was started with `TIERWISE_TEST_FAULTS=1`.
pub const XATTR_TEST_FAULT: &str = "user.tierwise.test_fault";

/// Counters of one period (this mount, or the volume's whole life).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    /// Reads served from the SSD tier (hits).
    pub reads_ssd: u64,
    /// Reads served from the HDD tier (misses).
    pub reads_hdd: u64,
    /// Writes acknowledged by the SSD tier alone.
    pub writes_ssd: u64,
    /// Writes that reached the HDD tier before being acknowledged.
    pub writes_hdd: u64,
    /// Bytes read from the SSD tier.
    pub read_bytes_ssd: u64,
    /// Bytes read from the HDD tier.
    pub read_bytes_hdd: u64,
    /// Bytes written to the SSD tier.
    pub write_bytes_ssd: u64,
    /// Bytes written to the HDD tier.
    pub write_bytes_hdd: u64,
    /// Tiering moves up.
    pub promotions: u64,
    /// Tiering moves down.
    pub demotions: u64,
    /// Copies into the SSD cache.
    pub copies: u64,
    /// Write-backs of dirty files.
    pub writebacks: u64,
    /// Bytes copied between tiers by background work.
    pub bytes_moved: u64,
    /// Background work that failed.
    pub moves_failed: u64,
    /// Background work cancelled.
    pub moves_cancelled: u64,
}

impl Counters {
    /// The counters as (name, value) pairs, for the store.
    pub fn pairs(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("reads_ssd", self.reads_ssd),
            ("reads_hdd", self.reads_hdd),
            ("writes_ssd", self.writes_ssd),
            ("writes_hdd", self.writes_hdd),
            ("read_bytes_ssd", self.read_bytes_ssd),
            ("read_bytes_hdd", self.read_bytes_hdd),
            ("write_bytes_ssd", self.write_bytes_ssd),
            ("write_bytes_hdd", self.write_bytes_hdd),
            ("promotions", self.promotions),
            ("demotions", self.demotions),
            ("copies", self.copies),
            ("writebacks", self.writebacks),
            ("bytes_moved", self.bytes_moved),
            ("moves_failed", self.moves_failed),
            ("moves_cancelled", self.moves_cancelled),
        ]
    }

    /// Counters from saved pairs (unknown names ignored, missing ones zero).
    pub fn from_saved(saved: &std::collections::HashMap<String, u64>) -> Counters {
        Counters::from_pairs(|name| saved.get(name).copied().unwrap_or(0))
    }

    /// Counters whose every field is `value(name)`; the one place besides [`Counters::pairs`]
    /// that lists the fields.
    fn from_pairs(value: impl Fn(&str) -> u64) -> Counters {
        Counters {
            reads_ssd: value("reads_ssd"),
            reads_hdd: value("reads_hdd"),
            writes_ssd: value("writes_ssd"),
            writes_hdd: value("writes_hdd"),
            read_bytes_ssd: value("read_bytes_ssd"),
            read_bytes_hdd: value("read_bytes_hdd"),
            write_bytes_ssd: value("write_bytes_ssd"),
            write_bytes_hdd: value("write_bytes_hdd"),
            promotions: value("promotions"),
            demotions: value("demotions"),
            copies: value("copies"),
            writebacks: value("writebacks"),
            bytes_moved: value("bytes_moved"),
            moves_failed: value("moves_failed"),
            moves_cancelled: value("moves_cancelled"),
        }
    }

    /// Field by field `f(self, other)`.
    fn combine(&self, o: &Counters, f: impl Fn(u64, u64) -> u64) -> Counters {
        let (a, b) = (self.pairs(), o.pairs());
        let get = |v: &[(&str, u64)], name: &str| v.iter().find(|(n, _)| *n == name).map_or(0, |(_, x)| *x);
        Counters::from_pairs(|name| f(get(&a, name), get(&b, name)))
    }

    /// The sum of two periods.
    pub fn plus(&self, o: &Counters) -> Counters {
        self.combine(o, u64::saturating_add)
    }

    /// What happened between `earlier` and `self` (a later reading of the same counters).
    pub fn since(&self, earlier: &Counters) -> Counters {
        self.combine(earlier, u64::saturating_sub)
    }

    /// Fraction of reads served by the SSD tier.
    pub fn hit_ratio(&self) -> f64 {
        let all = self.reads_ssd + self.reads_hdd;
        if all == 0 { 0.0 } else { self.reads_ssd as f64 / all as f64 }
    }
}

/// The move in progress.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MoveInProgress {
    /// What the move does (`promote`, `demote`, `copy`, `writeback`, `pin`).
    pub kind: String,
    /// The file, relative to the mount.
    pub path: String,
    /// Bytes copied so far.
    pub done: u64,
    /// Bytes to copy.
    pub total: u64,
}

/// Request latencies of one kind, as a histogram.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LatencyHistogram {
    /// `read`, `write` or `metadata`.
    pub op: String,
    /// Upper bounds of the buckets in seconds; `counts` has one more entry, above them all.
    pub bounds_s: Vec<f64>,
    /// Requests per bucket (not cumulative).
    pub counts: Vec<u64>,
    /// Requests.
    pub count: u64,
    /// Their total time in seconds.
    pub sum_s: f64,
}

impl LatencyHistogram {
    /// The latency below which `q` (0 to 1) of the requests fell, as the bucket bound.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        if self.count == 0 {
            return None;
        }
        let want = (q * self.count as f64).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= want {
                return Some(self.bounds_s.get(i).copied().unwrap_or(f64::INFINITY));
            }
        }
        None
    }
}

/// Size and free space of a tier's file system.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TierSpace {
    /// Bytes in the file system.
    pub size: u64,
    /// Bytes free for unprivileged use.
    pub free: u64,
}

/// Everything a mount reports.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// Where the mount is.
    #[serde(default)]
    pub mountpoint: String,
    /// The architecture spec.
    pub policy: String,
    /// How file data is served: `passthrough`, `regular FUSE I/O`, `kernel page cache`,
    /// `direct I/O`, or a per-volume mix.
    #[serde(default)]
    pub data_path: String,
    /// Why passthrough is not used when it was asked for (or would help).
    #[serde(default)]
    pub passthrough_declined: Option<String>,
    /// A read-only mount (moves nothing).
    #[serde(default)]
    pub read_only: bool,
    /// SSD tier directory.
    pub ssd_dir: String,
    /// HDD tier directory.
    pub hdd_dir: String,
    /// The state store.
    pub state: String,
    /// The SSD tier's file system.
    #[serde(default)]
    pub ssd_space: TierSpace,
    /// The HDD tier's file system.
    #[serde(default)]
    pub hdd_space: TierSpace,
    /// SSD bytes tierwise may use.
    pub ssd_quota: u64,
    /// Of the quota, bytes kept for pinned files (the policy manages the rest).
    pub pin_reserve: u64,
    /// SSD bytes the policy holds.
    pub ssd_used: u64,
    /// Files pinned to the SSD tier and their bytes.
    pub pinned_ssd_files: u64,
    /// Bytes of files pinned to the SSD tier.
    pub pinned_ssd_bytes: u64,
    /// Files pinned to the HDD tier.
    pub pinned_hdd_files: u64,
    /// Files the policy tracks.
    pub files: u64,
    /// Of which with a copy on the SSD tier.
    pub files_on_ssd: u64,
    /// Dirty bytes (write-back) not yet on the HDD tier.
    pub dirty_bytes: u64,
    /// Background work queued or in flight.
    pub queue_depth: u64,
    /// The move rate limit in bytes/s (0 = unlimited).
    pub move_rate: u64,
    /// The move in progress.
    pub moving: Option<MoveInProgress>,
    /// Emulated tiers (empty when the tiers run at the speed of their directories).
    pub emulation: Vec<String>,
    /// The simulator HDD preset the HDD tier emulates.
    #[serde(default)]
    pub emulate_hdd: Option<String>,
    /// The simulator SSD preset the SSD tier emulates.
    #[serde(default)]
    pub emulate_ssd: Option<String>,
    /// Tiers whose root is gone (file system unmounted, directory removed): `ssd`, `hdd`.
    /// Their files answer EIO, and nothing is created there, until the root is back.
    #[serde(default)]
    pub lost_tiers: Vec<String>,
    /// `ok`, `degraded` (a tier is gone, or erred in the last 30 s) or `failed` (both gone).
    #[serde(default)]
    pub health: String,
    /// Why the mount is not ok, in words.
    #[serde(default)]
    pub health_reason: Option<String>,
    /// I/O errors per tier (ssd, hdd) and operation (read, write, sync).
    #[serde(default)]
    pub io_errors: [[u64; 3]; 2],
    /// Seconds since mounting.
    pub uptime_s: f64,
    /// The daemon's process id (`tierwise umount` waits for it to exit).
    #[serde(default)]
    pub pid: u32,
    /// When the engine's lock was held too long to read (a long call, or a deadlock): how old,
    /// in seconds, the engine's part of these figures is (counters, usage, queue; from the last
    /// snapshot that read it, or zeros). `None`: read now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_stale_s: Option<f64>,
    /// Request latencies by kind.
    #[serde(default)]
    pub latency: Vec<LatencyHistogram>,
    /// This mount's counters.
    pub session: Counters,
    /// Counters over the volume's life (saved in the state store).
    pub total: Counters,
}

impl Snapshot {
    /// The snapshot in the Prometheus text exposition format.
    pub fn prometheus(&self) -> String {
        let mut out = String::new();
        let mp = format!("mountpoint=\"{}\"", escape_label(&self.mountpoint));
        let mut metric = |name: &str, kind: &str, help: &str, rows: &[(&str, f64)]| {
            out.push_str(&format!("# HELP tierwise_{name} {help}\n# TYPE tierwise_{name} {kind}\n"));
            for (labels, v) in rows {
                let sep = if labels.is_empty() { "" } else { "," };
                out.push_str(&format!("tierwise_{name}{{{mp}{sep}{labels}}} {v}\n"));
            }
        };
        let t = &self.total;
        let f = |v: u64| v as f64;
        metric(
            "reads_total",
            "counter",
            "Reads by the tier that served them.",
            &[("tier=\"ssd\"", f(t.reads_ssd)), ("tier=\"hdd\"", f(t.reads_hdd))],
        );
        metric(
            "writes_total",
            "counter",
            "Writes by the slowest tier written.",
            &[("tier=\"ssd\"", f(t.writes_ssd)), ("tier=\"hdd\"", f(t.writes_hdd))],
        );
        metric(
            "read_bytes_total",
            "counter",
            "Bytes read per tier.",
            &[("tier=\"ssd\"", f(t.read_bytes_ssd)), ("tier=\"hdd\"", f(t.read_bytes_hdd))],
        );
        metric(
            "write_bytes_total",
            "counter",
            "Bytes written per tier.",
            &[("tier=\"ssd\"", f(t.write_bytes_ssd)), ("tier=\"hdd\"", f(t.write_bytes_hdd))],
        );
        metric(
            "moves_total",
            "counter",
            "Background work done, by kind.",
            &[
                ("kind=\"promote\"", f(t.promotions)),
                ("kind=\"demote\"", f(t.demotions)),
                ("kind=\"copy\"", f(t.copies)),
                ("kind=\"writeback\"", f(t.writebacks)),
            ],
        );
        metric("moved_bytes_total", "counter", "Bytes copied between tiers.", &[("", f(t.bytes_moved))]);
        metric("moves_failed_total", "counter", "Background work that failed.", &[("", f(t.moves_failed))]);
        metric("moves_cancelled_total", "counter", "Background work cancelled.", &[("", f(t.moves_cancelled))]);
        let lost = |t: &str| f(u64::from(self.lost_tiers.iter().any(|l| l == t)));
        metric(
            "tier_lost",
            "gauge",
            "1 while a tier's root is gone (its files answer EIO).",
            &[("tier=\"ssd\"", lost("ssd")), ("tier=\"hdd\"", lost("hdd"))],
        );
        let mut errors = Vec::new();
        for (t, tier) in ["ssd", "hdd"].iter().enumerate() {
            for (o, op) in ["read", "write", "sync"].iter().enumerate() {
                errors.push((format!("tier=\"{tier}\",op=\"{op}\""), f(self.io_errors[t][o])));
            }
        }
        let errors: Vec<(&str, f64)> = errors.iter().map(|(l, v)| (l.as_str(), *v)).collect();
        metric("io_errors_total", "counter", "I/O errors by tier and operation.", &errors);
        let state = |s: &str| f(u64::from(self.health == s));
        metric(
            "health",
            "gauge",
            "1 for the mount's state: ok, degraded (a tier is gone or erred lately), failed (both tiers gone).",
            &[
                ("state=\"ok\"", state("ok")),
                ("state=\"degraded\"", state("degraded")),
                ("state=\"failed\"", state("failed")),
            ],
        );
        metric("ssd_quota_bytes", "gauge", "SSD bytes tierwise may use.", &[("", f(self.ssd_quota))]);
        metric("ssd_used_bytes", "gauge", "SSD bytes the policy holds.", &[("", f(self.ssd_used))]);
        metric("pinned_ssd_bytes", "gauge", "Bytes of files pinned to the SSD.", &[("", f(self.pinned_ssd_bytes))]);
        metric("dirty_bytes", "gauge", "Dirty bytes not yet on the HDD tier.", &[("", f(self.dirty_bytes))]);
        metric("queue_depth", "gauge", "Background work queued or in flight.", &[("", f(self.queue_depth))]);
        metric("files", "gauge", "Files the policy tracks.", &[("", f(self.files))]);
        metric("hit_ratio", "gauge", "Fraction of reads served by the SSD tier.", &[("", t.hit_ratio())]);
        metric(
            "tier_size_bytes",
            "gauge",
            "Size of each tier's file system.",
            &[("tier=\"ssd\"", f(self.ssd_space.size)), ("tier=\"hdd\"", f(self.hdd_space.size))],
        );
        metric(
            "tier_free_bytes",
            "gauge",
            "Free space of each tier's file system.",
            &[("tier=\"ssd\"", f(self.ssd_space.free)), ("tier=\"hdd\"", f(self.hdd_space.free))],
        );
        out.push_str(
            "# HELP tierwise_request_duration_seconds Time the daemon took to answer requests, by kind.\n\
             # TYPE tierwise_request_duration_seconds histogram\n",
        );
        for h in &self.latency {
            let mut cumulative = 0;
            for (i, c) in h.counts.iter().enumerate() {
                cumulative += c;
                let le = h.bounds_s.get(i).map_or_else(|| "+Inf".to_string(), |b| b.to_string());
                out.push_str(&format!(
                    "tierwise_request_duration_seconds_bucket{{{mp},op=\"{}\",le=\"{le}\"}} {cumulative}\n",
                    h.op
                ));
            }
            out.push_str(&format!("tierwise_request_duration_seconds_sum{{{mp},op=\"{}\"}} {}\n", h.op, h.sum_s));
            out.push_str(&format!("tierwise_request_duration_seconds_count{{{mp},op=\"{}\"}} {}\n", h.op, h.count));
        }
        out
    }
}

/// A Prometheus label value: backslash, quote and newline escaped.
fn escape_label(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_add_subtract_and_round_trip_through_saved_pairs() {
        let a = Counters { reads_ssd: 5, moves_cancelled: 2, bytes_moved: 100, ..Counters::default() };
        let b = Counters { reads_ssd: 1, writebacks: 3, bytes_moved: 40, ..Counters::default() };
        let sum = a.plus(&b);
        assert_eq!((sum.reads_ssd, sum.writebacks, sum.bytes_moved, sum.moves_cancelled), (6, 3, 140, 2));
        assert_eq!(sum.since(&b), a);
        let saved = sum.pairs().into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        assert_eq!(Counters::from_saved(&saved), sum);
    }
}
