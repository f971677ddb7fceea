//! Tier health: a tier whose root is gone (its file system unmounted, the directory removed)
//! is fenced until it is back; every I/O error on a tier is counted by tier and operation, and
//! the mount's state (ok, degraded, failed) says why, as the served device's does.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use fuser::Errno;
use tierwise_core::Tier;

use crate::log;
use crate::shared::Shared;

/// How long an I/O error keeps the mount degraded after the last one.
pub(crate) const RECENT: Duration = Duration::from_secs(30);

/// The operations counted.
#[derive(Clone, Copy, Debug)]
pub(crate) enum IoOp {
    Read = 0,
    Write = 1,
    Sync = 2,
}

/// I/O errors per tier (fast first) and operation (read, write, sync), and the last one.
#[derive(Debug, Default)]
pub(crate) struct TierErrors {
    counts: [[AtomicU64; 3]; 2],
    last: Mutex<Option<(Instant, String)>>,
}

impl TierErrors {
    /// Counts an error of `op` on `tier` (a missing file is no tier error).
    pub(crate) fn record(&self, tier: Tier, op: IoOp, e: &std::io::Error) {
        if e.kind() == std::io::ErrorKind::NotFound || e.raw_os_error() == Some(nix::libc::EINTR) {
            return;
        }
        self.counts[tier.index()][op as usize].fetch_add(1, Ordering::Relaxed);
        let name = if tier == Tier::Fast { "SSD" } else { "HDD" };
        let verb = ["reads", "writes", "syncs"][op as usize];
        *self.last.lock().unwrap_or_else(std::sync::PoisonError::into_inner) =
            Some((Instant::now(), format!("{name} tier {verb} fail: {e}")));
    }

    /// The counts, fast tier first.
    pub(crate) fn counts(&self) -> [[u64; 3]; 2] {
        std::array::from_fn(|t| std::array::from_fn(|o| self.counts[t][o].load(Ordering::Relaxed)))
    }

    /// The last error and how long ago.
    pub(crate) fn last(&self) -> Option<(Duration, String)> {
        self.last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_ref()
            .map(|(at, t)| (at.elapsed(), t.clone()))
    }
}

impl Shared {
    /// The mount's state and why: `failed` with both tiers gone, `degraded` with one gone or an
    /// I/O error in the last [`RECENT`], else `ok`.
    pub(crate) fn health_state(&self) -> (&'static str, Option<String>) {
        let lost: Vec<&str> = Tier::ALL
            .into_iter()
            .filter(|t| self.lost[t.index()].load(Ordering::Relaxed))
            .map(|t| if t == Tier::Fast { "SSD" } else { "HDD" })
            .collect();
        match (lost.len(), self.tier_errors.last()) {
            (2, _) => ("failed", Some("both tiers are gone: every file answers EIO until they are back".into())),
            (1, _) => {
                ("degraded", Some(format!("the {} tier is gone: its files answer EIO until it is back", lost[0])))
            }
            (_, Some((age, text))) if age < RECENT => {
                let doing = if text.starts_with("HDD tier writes") {
                    "; moves to the HDD fail and are retried with back-off, dirty files stay on the SSD"
                } else if text.starts_with("SSD tier writes") {
                    "; moves to the SSD fail and roll back, files stay on the HDD"
                } else {
                    ""
                };
                ("degraded", Some(format!("{text}{doing}")))
            }
            _ => ("ok", None),
        }
    }

    /// Checks both tier roots; says so in the log when one is lost or back. Returns whether
    /// any is lost now.
    pub(crate) fn refresh_health(&self) -> bool {
        let mut any = false;
        for t in Tier::ALL {
            let lost = !self.tiers.root_intact(t);
            any |= lost;
            if self.lost[t.index()].swap(lost, Ordering::AcqRel) != lost {
                let name = if t == Tier::Fast { "SSD" } else { "HDD" };
                let root = self.tiers.root(t).display();
                if lost {
                    log::error(format_args!(
                        "the {name} tier {root} is gone (its file system was unmounted or the directory removed): its files answer EIO and nothing is written there until it is back"
                    ));
                } else {
                    log::info(format_args!("the {name} tier {root} is back"));
                    self.work_cv.notify_all();
                }
            }
        }
        any
    }

    /// Namespace changes (create, mkdir, symlink, unlink, rmdir, rename) wait for both tiers: a
    /// change made on one alone would resurrect or duplicate names when the other comes back.
    /// A read-only mount changes nothing.
    pub(crate) fn both_tiers(&self) -> Result<(), Errno> {
        if self.cfg.read_only {
            return Err(Errno::EROFS);
        }
        if self.refresh_health() { Err(Errno::EIO) } else { Ok(()) }
    }

    /// ENOENT for a name no tier holds, or EIO when a tier that may hold it is lost.
    pub(crate) fn missing(&self) -> Errno {
        if self.refresh_health() { Errno::EIO } else { Errno::ENOENT }
    }
}
