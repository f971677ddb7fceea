//! The device's health: every I/O error on an image counted by image and operation, a state
//! (ok, degraded, failed) with the reason in words, and the back-off that keeps background
//! work that keeps failing (write-backs to a full or read-only HDD) from spinning.
//!
//! - **ok**: no image error in the last [`RECENT`].
//! - **degraded**: an image errs (the reason names which, how, and what the device does about
//!   it), or the SSD was detached after failing (every block is served from the HDD, as bcache
//!   runs a backing device whose cache failed).
//! - **failed**: the SSD failed holding dirty blocks, whose only current copy it had: reads of
//!   those blocks answer EIO (see docs/BLOCK.md, "When an image fails", for the recovery).

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::backend::{Backend, Dev};

/// How long an error keeps the device degraded after the last one.
pub const RECENT: Duration = Duration::from_secs(30);

/// SSD errors in a row (no SSD call succeeding in between) after which the SSD counts as lost.
pub const SSD_LOST_AFTER: u64 = 8;

/// The operations counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    Read = 0,
    Write = 1,
    Sync = 2,
}

/// I/O errors per image and operation, since the device opened.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct IoErrors {
    /// SSD image: reads, writes, syncs.
    pub ssd: [u64; 3],
    /// HDD image: reads, writes, syncs.
    pub hdd: [u64; 3],
}

/// What `stats` and the metrics say of the device's health.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct HealthReport {
    /// `ok`, `degraded` or `failed`.
    pub state: String,
    /// Why it is not ok, in words.
    pub reason: Option<String>,
    /// I/O errors by image and operation.
    pub errors: IoErrors,
    /// The last error: what failed and how.
    pub last_error: Option<String>,
    /// Seconds since the last error.
    pub last_error_age_s: Option<f64>,
    /// Background work that failed and was retried after a pause (not at once).
    pub backed_off: u64,
    /// SSD slots taken out of use after a read error (their blocks served from the HDD).
    pub retired_slots: u64,
    /// Whether the SSD was detached after failing: everything is served from the HDD.
    pub ssd_detached: bool,
    /// Dirty blocks the detached SSD held (their only current copy): reads of them fail.
    pub lost_dirty_blocks: u64,
}

/// Counters and state, shared by the monitored backend and the device.
#[derive(Debug, Default)]
pub(crate) struct Health {
    errors: [[AtomicU64; 3]; 2],
    /// SSD errors since the last SSD call that succeeded.
    ssd_errors_in_a_row: AtomicU64,
    last: Mutex<Option<(Instant, String)>>,
    pub(crate) backed_off: AtomicU64,
    pub(crate) retired_slots: AtomicU64,
    pub(crate) ssd_detached: AtomicBool,
    pub(crate) lost_dirty_blocks: AtomicU64,
}

fn name(dev: Dev) -> &'static str {
    if dev == Dev::Ssd { "SSD" } else { "HDD" }
}

fn verb(op: Op) -> &'static str {
    match op {
        Op::Read => "reads",
        Op::Write => "writes",
        Op::Sync => "syncs",
    }
}

impl Health {
    fn record(&self, dev: Dev, op: Op, e: &io::Error) {
        self.errors[dev as usize][op as usize].fetch_add(1, Ordering::Relaxed);
        if dev == Dev::Ssd {
            self.ssd_errors_in_a_row.fetch_add(1, Ordering::Relaxed);
        }
        let text = format!("{} image {} fail: {e}", name(dev), verb(op));
        *self.last.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some((Instant::now(), text));
    }

    fn ok(&self, dev: Dev) {
        if dev == Dev::Ssd && self.ssd_errors_in_a_row.load(Ordering::Relaxed) != 0 {
            self.ssd_errors_in_a_row.store(0, Ordering::Relaxed);
        }
    }

    /// Whether the SSD has failed enough in a row to count as lost.
    pub(crate) fn ssd_lost(&self) -> bool {
        self.ssd_errors_in_a_row.load(Ordering::Relaxed) >= SSD_LOST_AFTER
    }

    /// The report, with `dirty_bytes` the dirty data the SSD holds now (what an HDD that refuses
    /// writes keeps from being written back).
    pub(crate) fn report(&self, dirty_bytes: u64) -> HealthReport {
        let errs = |d: usize| std::array::from_fn(|o| self.errors[d][o].load(Ordering::Relaxed));
        let last = self.last.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        let age = last.as_ref().map(|(at, _)| at.elapsed());
        let detached = self.ssd_detached.load(Ordering::Relaxed);
        let lost = self.lost_dirty_blocks.load(Ordering::Relaxed);
        let (state, reason) = if detached && lost > 0 {
            (
                "failed",
                Some(format!(
                    "the SSD failed holding {lost} dirty block(s), whose only current copy it had: reads of them fail (EIO), every other block is served from the HDD; see docs/BLOCK.md, \"When an image fails\""
                )),
            )
        } else if detached {
            ("degraded", Some("the SSD failed and was detached: every block is served from the HDD".to_string()))
        } else if let (Some((_, text)), Some(age)) = (&last, age)
            && age < RECENT
        {
            let doing = if text.starts_with("HDD image writes") && dirty_bytes > 0 {
                format!("; {dirty_bytes} dirty bytes wait on the SSD, write-backs are retried with back-off")
            } else if text.starts_with("HDD image writes") {
                "; writes that must reach the HDD fail, reads are served".to_string()
            } else if text.starts_with("SSD image reads") {
                "; clean blocks are read from the HDD instead and their slots retired".to_string()
            } else {
                String::new()
            };
            ("degraded", Some(format!("{text}{doing}")))
        } else {
            ("ok", None)
        };
        HealthReport {
            state: state.to_string(),
            reason,
            errors: IoErrors { ssd: errs(0), hdd: errs(1) },
            last_error: last.map(|(_, t)| t),
            last_error_age_s: age.map(|a| a.as_secs_f64()),
            backed_off: self.backed_off.load(Ordering::Relaxed),
            retired_slots: self.retired_slots.load(Ordering::Relaxed),
            ssd_detached: detached,
            lost_dirty_blocks: lost,
        }
    }
}

/// A backend whose every error is counted in a [`Health`].
pub(crate) struct Monitored {
    pub(crate) inner: Arc<dyn Backend>,
    pub(crate) health: Arc<Health>,
}

impl Monitored {
    fn watch<T>(&self, dev: Dev, op: Op, r: io::Result<T>) -> io::Result<T> {
        match &r {
            Ok(_) => self.health.ok(dev),
            Err(e) => self.health.record(dev, op, e),
        }
        r
    }
}

impl Backend for Monitored {
    fn read(&self, dev: Dev, buf: &mut [u8], off: u64) -> io::Result<()> {
        self.watch(dev, Op::Read, self.inner.read(dev, buf, off))
    }
    fn write(&self, dev: Dev, buf: &[u8], off: u64) -> io::Result<()> {
        self.watch(dev, Op::Write, self.inner.write(dev, buf, off))
    }
    fn sync(&self, dev: Dev) -> io::Result<()> {
        self.watch(dev, Op::Sync, self.inner.sync(dev))
    }
    fn discard(&self, dev: Dev, off: u64, len: u64) -> io::Result<()> {
        self.watch(dev, Op::Write, self.inner.discard(dev, off, len))
    }
    fn len(&self, dev: Dev) -> io::Result<u64> {
        self.inner.len(dev)
    }
    fn grow(&self, dev: Dev, len: u64) -> io::Result<()> {
        self.watch(dev, Op::Write, self.inner.grow(dev, len))
    }
    fn is_hole(&self, dev: Dev, off: u64, len: u64) -> io::Result<bool> {
        self.inner.is_hole(dev, off, len)
    }
    fn holes(&self, dev: Dev, off: u64, bs: u64, n: usize) -> io::Result<Vec<bool>> {
        self.inner.holes(dev, off, bs, n)
    }
}
