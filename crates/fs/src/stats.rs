//! What a mount reports (`tierwise status`, `stats`, metrics), what it saves across restarts
//! (counters, access statistics), and the space `df` shows.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tierwise_core::{ObjectId, Tier, WorkKind};

use crate::control::{Counters, MoveInProgress, Snapshot, TierSpace};
use crate::mover::MoverStats;
use crate::shared::{Shared, lock, read_lock};

/// How long a snapshot waits for the engine's lock before it reports the last figures read.
const ENGINE_WAIT: Duration = Duration::from_millis(500);

/// What a snapshot reads under the engine's lock.
#[derive(Clone, Debug, Default)]
pub(crate) struct EngineView {
    session: Counters,
    usage: tierwise_core::Usage,
    queue: usize,
}

/// The mount's counters from the engine's and the mover's.
pub(crate) fn counters_of(e: &tierwise_core::EngineStats, m: &MoverStats) -> Counters {
    use tierwise_core::engine::EngineStats as S;
    let outside = |t: Tier, i: usize| m.outside[t.index()][i].load(Ordering::Relaxed);
    Counters {
        reads_ssd: e.reads_by_level[0] + e.reads_by_level[1] + outside(Tier::Fast, 0),
        reads_hdd: e.reads_by_level[2] + outside(Tier::Slow, 0),
        writes_ssd: e.writes_by_level[0] + e.writes_by_level[1] + outside(Tier::Fast, 1),
        writes_hdd: e.writes_by_level[2] + outside(Tier::Slow, 1),
        read_bytes_ssd: e.read_bytes_by_level[0] + e.read_bytes_by_level[1] + outside(Tier::Fast, 2),
        read_bytes_hdd: e.read_bytes_by_level[2] + outside(Tier::Slow, 2),
        write_bytes_ssd: e.write_bytes_by_level[0] + e.write_bytes_by_level[1] + outside(Tier::Fast, 3),
        write_bytes_hdd: e.write_bytes_by_level[2] + outside(Tier::Slow, 3),
        promotions: e.done[S::kind_index(WorkKind::Promote)],
        demotions: e.done[S::kind_index(WorkKind::Demote)],
        copies: e.done[S::kind_index(WorkKind::Copy)],
        writebacks: e.done[S::kind_index(WorkKind::Writeback)],
        bytes_moved: m.bytes.load(Ordering::Relaxed),
        moves_failed: m.failed.load(Ordering::Relaxed),
        moves_cancelled: m.cancelled.load(Ordering::Relaxed),
    }
}

/// Bytes a user can store on the mount, as `df` shows them: (size, free for anyone, free for
/// unprivileged users).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Space {
    pub(crate) size: u64,
    pub(crate) free: u64,
    pub(crate) avail: u64,
}

impl Shared {
    /// Size and free space of `tier`'s file system (zeros when it is lost).
    pub(crate) fn tier_space(&self, tier: Tier) -> TierSpace {
        self.tiers.statvfs(tier).map_or_else(
            |_| TierSpace::default(),
            |st| TierSpace {
                size: st.blocks().saturating_mul(st.fragment_size()),
                free: st.blocks_available().saturating_mul(st.fragment_size()),
            },
        )
    }

    /// What a user can store under the policy. A caching policy keeps every file on the HDD
    /// (the SSD holds copies), so the HDD's space is what there is. A tiering policy (one copy
    /// per file) adds the SSD quota: the SSD space tierwise may use, minus what it uses
    /// already, never more than the SSD's file system has free. `hdd-only` is the HDD,
    /// `ssd-only` the SSD up to the quota.
    /// Whether the two tiers are directories of one file system (one device).
    pub(crate) fn one_file_system(&self) -> bool {
        self.tiers.root_id(Tier::Fast).0 == self.tiers.root_id(Tier::Slow).0
    }

    pub(crate) fn usable_space(&self) -> Option<Space> {
        let st = |t: Tier| self.tiers.statvfs(t).ok();
        let (ssd, hdd) = (st(Tier::Fast)?, st(Tier::Slow)?);
        let bytes = |blocks: u64, st: &nix::sys::statvfs::Statvfs| blocks.saturating_mul(st.fragment_size());
        let hdd_space = Space {
            size: bytes(hdd.blocks(), &hdd),
            free: bytes(hdd.blocks_free(), &hdd),
            avail: bytes(hdd.blocks_available(), &hdd),
        };
        let policy_used = lock(&self.engine).usage().fast_used;
        let used = policy_used + self.pinned_ssd_bytes().0;
        let quota = self.cfg.ssd_quota.min(bytes(ssd.blocks(), &ssd));
        let quota_left = quota.saturating_sub(used);
        let ssd_space = Space {
            size: quota,
            free: quota_left.min(bytes(ssd.blocks_free(), &ssd)),
            avail: quota_left.min(bytes(ssd.blocks_available(), &ssd)),
        };
        Some(match self.layout {
            crate::Layout::HddOnly | crate::Layout::Caching => hdd_space,
            crate::Layout::SsdOnly => ssd_space,
            // Both tiers on one file system (ROOT/ssd and ROOT/hdd on one disk): its space once.
            crate::Layout::Tiering if self.one_file_system() => hdd_space,
            crate::Layout::Tiering => Space {
                size: hdd_space.size + ssd_space.size,
                free: hdd_space.free + ssd_space.free,
                avail: hdd_space.avail + ssd_space.avail,
            },
        })
    }

    /// Saves the access statistics (the collector's ranking and counts of every file the
    /// policy tracks) to the store; see [`tierwise_core::Engine::heat_ranking`].
    pub(crate) fn save_heat(&self, durable: bool) {
        if self.cfg.read_only {
            return;
        }
        let files: HashMap<u64, Arc<Path>> = {
            let pins = read_lock(&self.pins);
            let orphans = lock(&self.orphans);
            lock(&self.inodes)
                .by_ino
                .iter()
                .filter(|(i, n)| !n.dir && !pins.contains_key(i) && !orphans.contains_key(i))
                .map(|(&i, n)| (i, Arc::clone(&n.rel)))
                .collect()
        };
        let ids: Vec<ObjectId> = files.keys().map(|&i| ObjectId(i)).collect();
        let ranked = lock(&self.engine).heat_ranking(&ids);
        let rows: Vec<(PathBuf, u64)> =
            ranked.into_iter().filter_map(|(o, h)| files.get(&o.0).map(|p| (p.to_path_buf(), h))).collect();
        let _ = self.store.save_heat(&rows, durable);
    }

    /// Saves the counters (totals over the volume's life) to the store.
    pub(crate) fn save_counters(&self, durable: bool) {
        if self.cfg.read_only {
            return;
        }
        let session = counters_of(lock(&self.engine).stats(), &self.stats);
        let _ = self.store.save_counters(&self.saved.plus(&session).pairs(), durable);
    }

    /// The engine's part of a snapshot: read under its lock when that comes within
    /// [`ENGINE_WAIT`], else the last one read (and its age), so that statistics never wait on
    /// a stuck engine.
    fn engine_view(&self) -> (EngineView, Option<f64>) {
        let deadline = Instant::now() + ENGINE_WAIT;
        let e = loop {
            match self.engine.try_lock() {
                Ok(e) => break e,
                Err(std::sync::TryLockError::Poisoned(p)) => break p.into_inner(),
                Err(std::sync::TryLockError::WouldBlock) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(2));
                }
                Err(std::sync::TryLockError::WouldBlock) => {
                    return match lock(&self.engine_view).clone() {
                        Some((at, v)) => (v, Some(at.elapsed().as_secs_f64())),
                        None => (EngineView::default(), Some(self.started.elapsed().as_secs_f64())),
                    };
                }
            }
        };
        let v = EngineView {
            session: counters_of(e.stats(), &self.stats),
            usage: e.usage(),
            queue: e.work.len() + e.pending_work().len(),
        };
        drop(e);
        *lock(&self.engine_view) = Some((Instant::now(), v.clone()));
        (v, None)
    }

    /// Everything the mount reports.
    pub(crate) fn snapshot(&self) -> Snapshot {
        let (EngineView { session, usage, queue }, engine_stale_s) = self.engine_view();
        let (pinned_ssd_bytes, pinned_ssd_files) = self.pinned_ssd_bytes();
        let pinned_hdd_files = read_lock(&self.pins).values().filter(|t| **t == Tier::Slow).count() as u64;
        let p = &self.progress;
        let moving_ino = p.ino.load(Ordering::Acquire);
        let moving = (moving_ino != 0).then(|| MoveInProgress {
            kind: (*lock(&p.kind)).to_string(),
            path: lock(&self.inodes).get(moving_ino).map(|n| n.rel.to_string_lossy().into_owned()).unwrap_or_default(),
            done: p.done.load(Ordering::Relaxed),
            total: p.total.load(Ordering::Relaxed),
        });
        let (data_path, passthrough_declined) = lock(&self.data_path).clone();
        Snapshot {
            mountpoint: self.cfg.mountpoint.as_deref().map(|m| m.display().to_string()).unwrap_or_default(),
            policy: self.cfg.policy.clone(),
            data_path,
            passthrough_declined,
            read_only: self.cfg.read_only,
            ssd_dir: self.tiers.ssd.display().to_string(),
            hdd_dir: self.tiers.hdd.display().to_string(),
            state: self.store.path().display().to_string(),
            ssd_space: self.tier_space(Tier::Fast),
            hdd_space: self.tier_space(Tier::Slow),
            ssd_quota: self.cfg.ssd_quota,
            pin_reserve: self.cfg.pin_reserve,
            ssd_used: usage.fast_used,
            pinned_ssd_files,
            pinned_ssd_bytes,
            pinned_hdd_files,
            files: if self.cfg.read_only { read_lock(&self.frozen).len() as u64 } else { usage.objects as u64 },
            files_on_ssd: usage.fast_objects as u64,
            dirty_bytes: usage.dirty_bytes,
            queue_depth: queue as u64,
            move_rate: self.move_rate.load(Ordering::Relaxed),
            moving,
            emulation: self.emulate.iter().flatten().map(|e| e.label().to_string()).collect(),
            emulate_hdd: self.cfg.emulate_hdd.clone(),
            emulate_ssd: self.cfg.emulate_ssd.clone(),
            lost_tiers: Tier::ALL
                .into_iter()
                .filter(|t| self.lost[t.index()].load(Ordering::Relaxed))
                .map(|t| if t == Tier::Fast { "ssd" } else { "hdd" }.to_string())
                .collect(),
            health: self.health_state().0.to_string(),
            health_reason: self.health_state().1,
            io_errors: self.tier_errors.counts(),
            uptime_s: self.started.elapsed().as_secs_f64(),
            pid: std::process::id(),
            engine_stale_s,
            latency: self.latency.snapshot(),
            total: self.saved.plus(&session),
            session,
        }
    }
}
