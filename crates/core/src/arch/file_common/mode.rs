//! A file-level architecture as a value (what differs between them), the per-file metadata word
//! and the shared knobs.

use super::*;

/// What brings a file to the SSD.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Promote {
    /// Nothing: files reach the SSD only when created there.
    Never,
    /// A read served by the HDD queues the file, if the collector admits it.
    OnHddRead,
    /// Every `interval`, the hottest files on the HDD while hotter than the coldest on the SSD.
    OnInterval,
    /// Opening a file on the HDD moves it to the SSD.
    OnOpen,
}

/// What the SSD holds of a file and what a write to an SSD-resident file does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Writes {
    /// DST: the SSD holds the only copy, moved between the tiers; writes go where it is.
    Moves,
    /// Caching, write-through-update: a write goes to both copies.
    UpdateBoth,
    /// Caching, read-only: a write goes to the HDD and drops the SSD copy.
    DropCopy,
    /// Caching, write-back: a write goes to the SSD copy only (dirty), written back later.
    Dirty,
}

/// How SSD space is freed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Space {
    /// When a write or a promotion needs it (the foreground cleaner).
    OnDemand,
    /// On demand, and after the first blocking write a timer frees ahead of demand (Loris).
    BackgroundCleaner,
    /// Whenever usage passes `threshold` (HyCache).
    Threshold,
}

/// One file-level architecture, declared as a value: every way the architectures differ is a
/// field here, and the shared core reads only these. An architecture is one file holding one
/// of these and one registry line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FilePolicy {
    /// Registry token.
    pub name: &'static str,
    /// One line of help.
    pub help: &'static str,
    /// Where new files are created (the SSD only while they fit and are not sieved).
    pub creates_on: Level,
    /// What brings a file to the SSD.
    pub promote: Promote,
    /// One copy or copies, and what writes do to them.
    pub writes: Writes,
    /// A write of a whole HDD file allocates an SSD copy (write-allocate; caching only).
    pub whole_file_writes_allocate: bool,
    /// How SSD space is freed.
    pub space: Space,
    /// Directories stay on the SSD for good (HyCache's namespace).
    pub keeps_namespace: bool,
    /// A per-volume (type-aware) architecture may use it in a volume.
    pub per_volume: bool,
    /// The shared knobs it takes, with their defaults (written here only).
    pub params: &'static [ParamSpec],
    /// The collector used when none is named.
    pub default_collector: &'static str,
}

impl FilePolicy {
    /// Loris's DST baseline every DST policy starts from: created on the HDD, moved, never
    /// promoted, space freed on demand.
    pub const DST: FilePolicy = FilePolicy {
        name: "",
        help: "",
        creates_on: Level::Slow,
        promote: Promote::Never,
        writes: Writes::Moves,
        whole_file_writes_allocate: false,
        space: Space::OnDemand,
        keeps_namespace: false,
        per_volume: true,
        params: &[SIEVE],
        default_collector: "inverse-bitmap",
    };
    /// The caching baseline: copies made on HDD reads, writes update both.
    pub const CACHING: FilePolicy =
        FilePolicy { promote: Promote::OnHddRead, writes: Writes::UpdateBoth, ..FilePolicy::DST };

    /// Caching: the SSD holds copies (else DST: one copy, moved).
    pub const fn copies(&self) -> bool {
        !matches!(self.writes, Writes::Moves)
    }
    /// Whether the SSD may hold the only, dirty copy of a file.
    pub const fn dirties(&self) -> bool {
        matches!(self.writes, Writes::Dirty)
    }
    /// New files are created on the SSD.
    pub const fn allocates_on_ssd(&self) -> bool {
        matches!(self.creates_on, Level::Fast)
    }
    /// What front ends may assume of this policy run alone.
    pub const fn capabilities(&self) -> crate::arch::Capabilities {
        match self.writes {
            Writes::Dirty => crate::arch::Capabilities::FILE_CACHING,
            Writes::UpdateBoth | Writes::DropCopy => crate::arch::Capabilities::FILE_READ_CACHING,
            Writes::Moves => crate::arch::Capabilities::FILE_TIERING,
        }
    }
    /// The default of shared knob `name` as written in this policy's parameters.
    pub(super) fn default_of(&self, name: &str) -> Option<&'static str> {
        self.params.iter().find(|p| p.name == name).map(|p| p.default)
    }
}

// Per-file flags.
pub(super) const ON_FAST: u16 = 1;
pub(super) const ON_SLOW: u16 = 2;
pub(super) const DIRTY: u16 = 4;
pub(super) const MOVING: u16 = 8;
pub(super) const LEAVING: u16 = 16;
pub(super) const STALE: u16 = 32;
pub(super) const DELETED: u16 = 64;
pub(super) const META: u16 = 128;
pub(super) const IN_COLL: u16 = 256;
pub(super) const COLL_FAST: u16 = 512;
pub(super) const REDIRTY: u16 = 1024;
pub(super) const PENDING: u16 = 2048;

/// Per-file state packed into 8 bytes: size (44 bits: files up to 16 TiB, ext4's limit), flags
/// (12 bits), volume (8 bits).
#[derive(Clone, Copy, Debug, Default)]
pub struct FileMeta(u64);

pub(super) const SIZE_BITS: u32 = 44;
/// The largest file size tracked exactly; larger sizes saturate (and are sieved).
pub const MAX_FILE_SIZE: u64 = (1 << SIZE_BITS) - 1;
/// Volumes a type-aware spec may define.
pub const MAX_VOLUMES: usize = 255;

impl FileMeta {
    pub(super) fn new(size: u64, flags: u16, volume: u16) -> FileMeta {
        let mut m = FileMeta(0);
        m.set_size(size);
        m.set_flags(flags);
        m.set_volume(volume);
        m
    }
    pub(super) fn size(&self) -> u64 {
        self.0 & MAX_FILE_SIZE
    }
    pub(super) fn set_size(&mut self, size: u64) {
        self.0 = (self.0 & !MAX_FILE_SIZE) | size.min(MAX_FILE_SIZE);
    }
    pub(super) fn flags(&self) -> u16 {
        ((self.0 >> SIZE_BITS) & 0xfff) as u16
    }
    pub(super) fn set_flags(&mut self, flags: u16) {
        self.0 = (self.0 & !(0xfff << SIZE_BITS)) | (u64::from(flags & 0xfff) << SIZE_BITS);
    }
    pub(super) fn volume(&self) -> u16 {
        (self.0 >> 56) as u16
    }
    pub(super) fn set_volume(&mut self, volume: u16) {
        self.0 = (self.0 & !(0xff << 56)) | (u64::from(volume.min(255)) << 56);
    }
    pub(super) fn has(&self, f: u16) -> bool {
        self.flags() & f != 0
    }
}

const _: () = assert!(std::mem::size_of::<FileMeta>() == 8);

/// Sieving: the size above which a file never goes to the SSD.
pub const SIEVE: ParamSpec =
    ParamSpec { name: "sieve", default: "1MiB", help: "files larger than this never go to the SSD (0 = no sieving)" };
/// Interval migration: its period.
pub const INTERVAL: ParamSpec =
    ParamSpec { name: "interval", default: "5s", help: "migration period (Loris: 5s and 80s)" };
/// The background cleaner's period.
pub const CLEANER_PERIOD: ParamSpec =
    ParamSpec { name: "cleaner-period", default: "1s", help: "background cleaner: how often it runs" };
/// The background cleaner's cap.
pub const CLEANER_CAP: ParamSpec = ParamSpec {
    name: "cleaner-cap",
    default: "10%",
    help: "background cleaner: free at most this share ahead of demand",
};
/// HyCache's eviction threshold.
pub const THRESHOLD: ParamSpec =
    ParamSpec { name: "threshold", default: "90%", help: "evict down below this SSD usage" };
/// Write-back: the high watermark.
pub const DIRTY_HIGH: ParamSpec =
    ParamSpec { name: "dirty-high", default: "50%", help: "start writing back above this share dirty" };
/// Write-back: the low watermark.
pub const DIRTY_LOW: ParamSpec =
    ParamSpec { name: "dirty-low", default: "25%", help: "stop writing back below this share dirty" };
/// Write-back: idle write-back.
pub const WRITEBACK_IDLE: ParamSpec = ParamSpec {
    name: "writeback-idle",
    default: "5s",
    help: "after this long without an access, write back down to dirty-low (0s: only above dirty-high)",
};
/// Write-back: concurrency.
pub const MAX_WRITEBACKS: ParamSpec =
    ParamSpec { name: "max-writebacks", default: "16", help: "write-backs in flight at most" };

/// Every shared knob of the file-level architectures (a per-volume policy takes those of every
/// mode a volume may have, which excludes HyCache's).
pub const FILE_PARAMS: &[ParamSpec] =
    &[SIEVE, INTERVAL, CLEANER_PERIOD, CLEANER_CAP, DIRTY_HIGH, DIRTY_LOW, WRITEBACK_IDLE, MAX_WRITEBACKS];
