//! What the engine answers: how an access is served, and the background work it asks for.
//!
//! The contract follows dm-cache's policy/core split: the engine returns [`Work`]; a front end
//! executes it and reports [`Outcome`] through [`crate::Engine::complete`]. A decision is not a
//! fact until the front end confirms it; a failed or cancelled move rolls back inside the engine.

use serde::{Deserialize, Serialize};

use crate::{Level, Levels, Nanos, ObjectId, WorkId};

/// Address value meaning "the object's own logical address" (no remapping): caches and
/// single-device baselines keep data where the front end put it.
pub const LOGICAL_ADDR: u64 = u64::MAX;

/// How one access is served.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Served {
    /// For a read: the single level that supplies the data. For a write: the level that
    /// acknowledges it (the slowest one written).
    pub level: Level,
    /// Every level the access touches (a write-through write touches both tiers).
    pub touches: Levels,
    /// Byte address on the slow device of the start of the accessed object, when the slow device
    /// is touched (drives the HDD seek model); [`LOGICAL_ADDR`] when not remapped.
    pub slow_addr: u64,
    /// Byte address on the fast device of the object; [`LOGICAL_ADDR`] when not remapped.
    pub fast_addr: u64,
    /// After serving this read, the front end keeps the whole object's bytes in RAM (a fill of
    /// a RAM cache level: HCA's L1, ZFS's ARC); it reads the whole object for that if the
    /// access was partial. The architecture drops the RAM copy later with an
    /// [`WorkKind::Invalidate`] from [`Level::Ram`]. Writes that touch [`Level::Ram`] update the
    /// RAM copy in place.
    pub keep_in_ram: bool,
    /// The access completes only after the work issued while handling it, and any work already
    /// in flight on the same object, has completed: a foreground cleaner had to make room on the
    /// fast tier first (Loris's blocking write), or the object is leaving the fast tier and the
    /// access lands on the destination after the move. Front ends MUST finish that work before
    /// they execute the access (and re-submit the access if that work failed).
    pub blocked: bool,
}

impl Served {
    /// Served by one level only.
    pub fn by(level: Level) -> Served {
        Served {
            level,
            touches: Levels::one(level),
            slow_addr: LOGICAL_ADDR,
            fast_addr: LOGICAL_ADDR,
            keep_in_ram: false,
            blocked: false,
        }
    }
    /// Written to several levels; the slowest acknowledges.
    pub fn written_to(touches: Levels) -> Served {
        let level = touches.slowest().unwrap_or(Level::Slow);
        Served { level, touches, slow_addr: LOGICAL_ADDR, fast_addr: LOGICAL_ADDR, keep_in_ram: false, blocked: false }
    }
    /// A read assembled from several levels (a partial block: its cached sectors from the
    /// fast tier, the rest from the slow one); the slowest finishes it.
    pub fn assembled(touches: Levels) -> Served {
        Served::written_to(touches)
    }
    /// Sets the slow-device address.
    pub fn at_slow(mut self, addr: u64) -> Served {
        self.slow_addr = addr;
        self
    }
    /// Sets the fast-device address.
    pub fn at_fast(mut self, addr: u64) -> Served {
        self.fast_addr = addr;
        self
    }
    /// Asks the front end to keep the object in RAM after serving it.
    pub fn keeping_in_ram(mut self) -> Served {
        self.keep_in_ram = true;
        self
    }
    /// Marks the access as waiting for the work issued while handling it.
    pub fn after_work(mut self) -> Served {
        self.blocked = true;
        self
    }
    /// A metadata-only operation (create, delete, rename, stat) touches no data device.
    pub fn metadata() -> Served {
        Served {
            level: Level::Ram,
            touches: Levels::NONE,
            slow_addr: LOGICAL_ADDR,
            fast_addr: LOGICAL_ADDR,
            keep_in_ram: false,
            blocked: false,
        }
    }
}

/// The kind of a piece of background work.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum WorkKind {
    /// Tiering: move the object from the slow tier to the fast tier. On success the fast copy is
    /// the only copy and the front end removes the slow one. When the architecture serves the
    /// object from [`Level::Ram`] during the move (GreenDM), the front end holds the object in
    /// RAM, applies those accesses there, and `Done` means the destination holds the final RAM
    /// copy; on failure it writes the RAM copy back to the source.
    Promote,
    /// Tiering: move the object from the fast tier to the slow tier.
    Demote,
    /// Caching: copy the object into the fast tier (fill on miss, prefetch). The slow copy stays
    /// authoritative. With `from == Level::Ram` it writes bytes the architecture holds in RAM
    /// (a transient buffer, a merge of buffered writes) to `to`.
    Copy,
    /// Caching: write a dirty fast copy back to the slow tier; the fast copy stays and becomes
    /// clean.
    Writeback,
    /// Caching: drop a clean copy on `from` — the fast tier, or with `from == Level::Ram` the
    /// RAM copy the front end keeps (see [`Served::keep_in_ram`]). Takes effect in the engine
    /// when issued; the front end MUST apply it before executing any later work and does not
    /// report completion.
    Invalidate,
}

impl WorkKind {
    /// Whether the front end must report completion.
    pub const fn needs_completion(self) -> bool {
        !matches!(self, WorkKind::Invalidate)
    }
    /// Lower-case name.
    pub const fn name(self) -> &'static str {
        match self {
            WorkKind::Promote => "promote",
            WorkKind::Demote => "demote",
            WorkKind::Copy => "copy",
            WorkKind::Writeback => "writeback",
            WorkKind::Invalidate => "invalidate",
        }
    }
}

/// One piece of work for a front end.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Work {
    /// Identity to report back in [`crate::Engine::complete`].
    pub id: WorkId,
    /// What to do.
    pub kind: WorkKind,
    /// The object concerned.
    pub obj: ObjectId,
    /// Where the bytes come from (for invalidate: the level dropped).
    pub from: Level,
    /// Where the bytes go (for invalidate: same as `from`).
    pub to: Level,
    /// Number of bytes to copy (the object's size when issued).
    pub bytes: u64,
    /// Byte address of the object on the slow device (seek model); [`LOGICAL_ADDR`] when not
    /// remapped.
    pub slow_addr: u64,
    /// Byte address of the object on the fast device; [`LOGICAL_ADDR`] when not remapped.
    pub fast_addr: u64,
    /// The bytes are already in the front end's memory (a fill right after the miss that read
    /// them): only the write to `to` is needed.
    pub source_in_ram: bool,
    /// Private to the architecture that issued the work (e.g. its table slot); front ends ignore
    /// it. The engine hands the issued work back to the architecture on completion.
    pub tag: u64,
    /// Pacing: a throttled move that the front end spreads over at least this long (OTF-AST
    /// copies a 1 GiB sub-LUN in minutes, not seconds). Zero: as fast as the devices allow.
    pub min_duration: Nanos,
    /// How the work's I/O competes with foreground I/O on a device.
    #[serde(default)]
    pub priority: Priority,
}

/// The I/O priority class of background work, as Linux's `ioprio` classes: what a front end
/// asks its I/O scheduler for (mq-deadline and BFQ honour them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Priority {
    /// Best effort, like foreground I/O (a fill or a promotion that a reader may soon need).
    #[default]
    Normal,
    /// Only when the device has had no normal I/O for this long (a cleaner that writes back
    /// dirty data while the disk is otherwise idle; dm-cache's migrations when idle). A
    /// scheduler ages idle I/O so that it is never starved for ever.
    Idle(Nanos),
}

impl Work {
    /// Work with no addresses (the objects' own), no pacing, tag 0; `id` is assigned on issue.
    pub fn new(kind: WorkKind, obj: ObjectId, from: Level, to: Level, bytes: u64) -> Work {
        Work {
            id: WorkId(0),
            kind,
            obj,
            from,
            to,
            bytes,
            slow_addr: LOGICAL_ADDR,
            fast_addr: LOGICAL_ADDR,
            source_in_ram: false,
            tag: 0,
            min_duration: Nanos::ZERO,
            // Write-back is a cleaner's job; everything else may be waited for soon.
            priority: if kind == WorkKind::Writeback { Priority::Idle(Nanos::ZERO) } else { Priority::Normal },
        }
    }
    /// Sets the architecture's tag.
    pub fn with_tag(mut self, tag: u64) -> Work {
        self.tag = tag;
        self
    }
    /// Sets the device addresses.
    pub fn at(mut self, slow_addr: u64, fast_addr: u64) -> Work {
        self.slow_addr = slow_addr;
        self.fast_addr = fast_addr;
        self
    }
    /// Paces the move over at least `d`.
    pub fn paced(mut self, d: Nanos) -> Work {
        self.min_duration = d;
        self
    }
    /// Sets the I/O priority class.
    pub fn with_priority(mut self, p: Priority) -> Work {
        self.priority = p;
        self
    }
}

/// The result of executing a piece of work.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Outcome {
    /// Done: the data is where the work said.
    Done,
    /// The front end tried and failed (I/O error, no space); the engine rolls back.
    Failed,
    /// The front end gave up before finishing (shutdown, conflict); the engine rolls back.
    Cancelled,
}
