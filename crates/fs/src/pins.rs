//! Pins and the control attributes written on the mount (`tierwise pin`, `flush`, `cancel`,
//! the move rate).
//!
//! A pinned file is taken out of the policy: the engine forgets it, the file system keeps its
//! one copy on the pinned tier and serves it there. Files pinned to the SSD use a reserve of
//! the quota (`pin_reserve`) that the policy never gets, so the SSD never holds more than the
//! quota; a pin that does not fit the reserve is refused with ENOSPC. The reserve is shared, so
//! users other than root may pin only their own files, and to the SSD only within
//! `user_pin_quota` bytes each (0, the default: not at all).

use std::ffi::OsStr;
use std::os::unix::fs::MetadataExt;
use std::sync::atomic::Ordering;

use fuser::Errno;
use tierwise_core::{ObjectId, Op, Request, Tier, WorkKind};

use crate::control;
use crate::inodes::ROOT;
use crate::shared::{Shared, errno, lock, read_lock, write_lock};

impl Shared {
    /// Pins file `ino` to `want`, or unpins it (`None`), for user `uid`; see the module docs.
    pub(crate) fn set_pin(&self, ino: u64, want: Option<Tier>, uid: u32) -> Result<(), Errno> {
        if self.cfg.read_only {
            return Err(Errno::EROFS);
        }
        let node = self.node(ino)?;
        if node.dir || ino == ROOT {
            return Err(Errno::EISDIR);
        }
        // Let the work already queued or running on the file finish first.
        self.wait_for(ino, &[]);
        let _claim = self.claim(ino);
        let file_lock = self.file_lock(ino);
        let _g = write_lock(&file_lock);
        let current = read_lock(&self.pins).get(&ino).copied();
        if current == want {
            return Ok(());
        }
        if self.passed_through(ino) {
            // Open by passthrough: moving it would leave the kernel on the old copy.
            return Err(Errno::EBUSY);
        }
        if read_lock(&self.linked).contains_key(&ino) {
            // Hard-linked: a move would copy one name and leave the others on the old file.
            return Err(Errno::EMLINK);
        }
        let auth = *self.copies(ino).first().ok_or(Errno::ENOENT)?;
        let meta = self.at(ino, auth)?.metadata().map_err(|e| errno(&e))?;
        if !meta.is_file() {
            return Err(Errno::EINVAL);
        }
        if uid != 0 {
            // Another user's file, or the shared SSD reserve beyond this user's share.
            if meta.uid() != uid {
                return Err(Errno::EPERM);
            }
            if want == Some(Tier::Fast) {
                if self.cfg.user_pin_quota == 0 {
                    return Err(Errno::EPERM);
                }
                if self.pinned_ssd_bytes_of(Some(uid)).0 + meta.len() > self.cfg.user_pin_quota {
                    return Err(Errno::EDQUOT);
                }
            }
        }
        self.drop_fds(ino);
        self.retire_backing(ino);
        match want {
            Some(tier) => {
                if tier == Tier::Fast && self.pinned_ssd_bytes().0 + meta.len() > self.cfg.pin_reserve {
                    return Err(Errno::ENOSPC);
                }
                if auth != tier {
                    let kind = if tier == Tier::Fast { WorkKind::Promote } else { WorkKind::Demote };
                    let (rel, plan) = self.plan(ino, auth)?;
                    self.journalled(ino, &rel, kind, "pin", auth, &plan, || plan.run_move(&mut self.pace(ino, auth)))
                        .map_err(|e| errno(&e))?;
                }
                if current.is_none() {
                    // Out of the policy: the engine forgets it (work it queued for the file is
                    // skipped by the mover, which sees the pin).
                    let class = self.class(&node.rel, false);
                    self.tell(&Request::op(ObjectId(ino), Op::Delete).with_class(class));
                }
                // A cached copy on the other tier is stale now.
                self.with_rel(ino, |rel| self.tiers.remove(tier.other(), rel))?;
                self.with_rel(ino, |rel| self.store.set_pin(rel, Some(tier)).map_err(std::io::Error::other))?;
                if lock(&self.dirty_marked).remove(&ino) {
                    let _ = self.with_rel(ino, |rel| self.store.set_dirty(rel, false).map_err(std::io::Error::other));
                }
                write_lock(&self.pins).insert(ino, tier);
            }
            None => {
                self.with_rel(ino, |rel| self.store.set_pin(rel, None).map_err(std::io::Error::other))?;
                write_lock(&self.pins).remove(&ino);
                let mut copies = [None, None];
                copies[auth.index()] = Some((meta.len(), crate::tiers::mtime(&meta)));
                if let Err(e) = self.with_rel(ino, |rel| self.adopt_file(ino, rel, &copies, false)) {
                    // The policy wanted the file on the other tier and the move failed: the
                    // engine must not believe it there (a later write would recreate it there
                    // from nothing, and reads would follow it). It stays pinned where it is.
                    let class = self.class(&node.rel, false);
                    self.tell(&Request::op(ObjectId(ino), Op::Delete).with_class(class));
                    write_lock(&self.pins).insert(ino, auth);
                    let _ =
                        self.with_rel(ino, |rel| self.store.set_pin(rel, Some(auth)).map_err(std::io::Error::other));
                    return Err(e);
                }
                self.sync_dirty_mark(ino);
            }
        }
        Ok(())
    }

    /// Refuses (ENOSPC) growing file `ino`, pinned to the SSD, to `end` bytes beyond the pin
    /// reserve. Files outside the policy for other reasons are not held to it, and nothing is
    /// with the kernel's writeback cache: the application has been told its write succeeded
    /// before the daemon sees it, so a refusal then would lose acknowledged data.
    pub(crate) fn check_pin_growth(&self, ino: u64, end: u64) -> Result<(), Errno> {
        if self.cfg.kernel_cache || read_lock(&self.pins).get(&ino) != Some(&Tier::Fast) {
            return Ok(());
        }
        let size = self.at(ino, Tier::Fast)?.metadata().map_err(|e| errno(&e))?.len();
        if end <= size {
            return Ok(());
        }
        if self.pinned_ssd_bytes().0.saturating_add(end - size) > self.cfg.pin_reserve {
            return Err(Errno::ENOSPC);
        }
        Ok(())
    }

    /// Files pinned to the SSD tier: (bytes, files).
    pub(crate) fn pinned_ssd_bytes(&self) -> (u64, u64) {
        self.pinned_ssd_bytes_of(None)
    }

    /// Files pinned to the SSD tier owned by `owner` (every owner: `None`): (bytes, files).
    fn pinned_ssd_bytes_of(&self, owner: Option<u32>) -> (u64, u64) {
        let on_ssd: Vec<u64> =
            read_lock(&self.pins).iter().filter(|(_, t)| **t == Tier::Fast).map(|(&i, _)| i).collect();
        let (mut bytes, mut files) = (0, 0);
        for ino in on_ssd {
            let Ok(m) = self.at(ino, Tier::Fast).and_then(|a| a.metadata().map_err(|e| errno(&e))) else { continue };
            if owner.is_none_or(|u| u == m.uid()) {
                bytes += m.len();
                files += 1;
            }
        }
        (bytes, files)
    }

    /// Handles a write of one of tierwise's control attributes (see [`control`]) by user
    /// `uid`; `None` when `name` is an ordinary attribute.
    pub(crate) fn control_set(&self, ino: u64, name: &OsStr, value: &[u8], uid: u32) -> Option<Result<(), Errno>> {
        let text = String::from_utf8_lossy(value);
        let text = text.trim();
        // The mount-wide controls are root's (or the mount owner's, for a user mount).
        let owner = uid == 0 || uid == nix::unistd::geteuid().as_raw();
        let root_only = |r: Result<(), Errno>| {
            Some(if ino != ROOT {
                Err(Errno::EINVAL)
            } else if !owner {
                Err(Errno::EPERM)
            } else {
                r
            })
        };
        if name == control::XATTR_TIER || name == control::XATTR_STATS {
            Some(Err(Errno::EPERM))
        } else if name == control::XATTR_PIN {
            let want = match text {
                "ssd" => Some(Tier::Fast),
                "hdd" => Some(Tier::Slow),
                "none" | "" => None,
                _ => return Some(Err(Errno::EINVAL)),
            };
            Some(self.set_pin(ino, want, if owner { 0 } else { uid }))
        } else if name == control::XATTR_TEST_FAULT {
            if std::env::var_os("TIERWISE_TEST_FAULTS").is_none_or(|v| v != "1") {
                return Some(Err(Errno::EPERM));
            }
            root_only(if text == "deadlock-engine" { Ok(()) } else { Err(Errno::EINVAL) }).inspect(|r| {
                if r.is_ok() {
                    std::mem::forget(lock(&self.engine));
                }
            })
        } else if name == control::XATTR_FLUSH {
            root_only(Ok(())).inspect(|r| {
                if r.is_ok() {
                    let mut e = lock(&self.engine);
                    e.flush();
                    self.work_cv.notify_all();
                }
            })
        } else if name == control::XATTR_CANCEL {
            root_only(Ok(())).inspect(|r| {
                if r.is_ok() && self.progress.ino.load(Ordering::Acquire) != 0 {
                    self.progress.cancel.store(true, Ordering::Release);
                }
            })
        } else if name == control::XATTR_MOVE_RATE {
            match text.parse::<f64>() {
                Ok(mb) if mb >= 0.0 && mb.is_finite() => root_only(Ok(())).inspect(|r| {
                    if r.is_ok() {
                        self.move_rate.store((mb * 1e6) as u64, Ordering::Relaxed);
                    }
                }),
                _ => Some(Err(Errno::EINVAL)),
            }
        } else {
            None
        }
    }
}
