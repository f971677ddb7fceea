//! Tier health: a tier whose root is gone (its file system unmounted, the directory removed)
//! is fenced until it is back.

use std::sync::atomic::Ordering;

use fuser::Errno;
use tierwise_core::Tier;

use crate::log;
use crate::shared::Shared;

impl Shared {
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
