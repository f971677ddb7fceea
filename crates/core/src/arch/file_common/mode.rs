//! A file-level architecture's mode (what differs between them), the per-file metadata word and the shared knobs.

use super::*;

/// What one file-level architecture does; see the module docs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FileMode {
    /// Loris: allocate on the HDD; a read served by the HDD queues an admitted file for migration.
    DynamicHotDst,
    /// Loris: allocate on the HDD; every interval migrate hottest-on-HDD while hotter than
    /// coldest-on-SSD.
    IntervalHotDst,
    /// Loris: allocate on the SSD; demote on space pressure; never promote.
    PlainColdDst,
    /// Loris: Plain Cold-DST plus on-demand promotion.
    DynamicColdDst,
    /// Loris: Dynamic Cold-DST plus the background cleaner.
    DynamicColdDstCleaner,
    /// Loris: Dynamic Hot-DST that copies (write-through-update).
    OnDemandCaching,
    /// Loris: Interval Hot-DST that copies (write-through-update).
    IntervalCaching,
    /// Copies on HDD reads; a write drops the copy.
    ReadOnlyCaching,
    /// Copies on HDD reads; writes go to both; whole-file writes allocate.
    WriteThroughAll,
    /// Copies on HDD reads; writes go to the SSD copy only (dirty) and are written back later;
    /// new files are created on the SSD.
    WriteBack,
    /// HyCache: create on the SSD; above a usage threshold evict to the HDD; opening an HDD file
    /// moves it back.
    HyCache,
}

impl FileMode {
    /// Every mode.
    pub const ALL: [FileMode; 11] = [
        FileMode::DynamicHotDst,
        FileMode::IntervalHotDst,
        FileMode::PlainColdDst,
        FileMode::DynamicColdDst,
        FileMode::DynamicColdDstCleaner,
        FileMode::OnDemandCaching,
        FileMode::IntervalCaching,
        FileMode::ReadOnlyCaching,
        FileMode::WriteThroughAll,
        FileMode::WriteBack,
        FileMode::HyCache,
    ];

    /// The architecture name of this mode (its registry token).
    pub const fn name(self) -> &'static str {
        match self {
            FileMode::DynamicHotDst => "dynamic-hot-dst",
            FileMode::IntervalHotDst => "interval-hot-dst",
            FileMode::PlainColdDst => "plain-cold-dst",
            FileMode::DynamicColdDst => "dynamic-cold-dst",
            FileMode::DynamicColdDstCleaner => "dynamic-cold-dst-cleaner",
            FileMode::OnDemandCaching => "on-demand-caching",
            FileMode::IntervalCaching => "interval-caching",
            FileMode::ReadOnlyCaching => "file-read-only-cache",
            FileMode::WriteThroughAll => "file-write-through-all",
            FileMode::WriteBack => "file-write-back",
            FileMode::HyCache => "hycache",
        }
    }
    /// The mode of an architecture name.
    pub fn by_name(name: &str) -> Option<FileMode> {
        FileMode::ALL.into_iter().find(|m| m.name() == name)
    }
    /// Caching: the SSD holds copies (else DST: one copy, moved).
    pub const fn copies(self) -> bool {
        matches!(
            self,
            FileMode::OnDemandCaching
                | FileMode::IntervalCaching
                | FileMode::ReadOnlyCaching
                | FileMode::WriteThroughAll
                | FileMode::WriteBack
        )
    }
    /// What front ends may assume of this mode run alone.
    pub const fn capabilities(self) -> crate::arch::Capabilities {
        match self {
            FileMode::WriteBack => crate::arch::Capabilities::FILE_CACHING,
            _ if self.copies() => crate::arch::Capabilities::FILE_READ_CACHING,
            _ => crate::arch::Capabilities::FILE_TIERING,
        }
    }
    /// New files are created on the SSD.
    pub fn allocates_on_ssd(self) -> bool {
        matches!(
            self,
            FileMode::PlainColdDst
                | FileMode::DynamicColdDst
                | FileMode::DynamicColdDstCleaner
                | FileMode::WriteBack
                | FileMode::HyCache
        )
    }
    /// A read served by the HDD promotes (or copies) an admitted file.
    pub fn promotes_on_read(self) -> bool {
        matches!(
            self,
            FileMode::DynamicHotDst
                | FileMode::DynamicColdDst
                | FileMode::DynamicColdDstCleaner
                | FileMode::OnDemandCaching
                | FileMode::ReadOnlyCaching
                | FileMode::WriteThroughAll
                | FileMode::WriteBack
        )
    }
    /// Promotions run on a timer.
    pub fn promotes_on_interval(self) -> bool {
        matches!(self, FileMode::IntervalHotDst | FileMode::IntervalCaching)
    }
    /// Opening an HDD file moves it to the SSD.
    pub fn promotes_on_open(self) -> bool {
        self == FileMode::HyCache
    }
    /// Whether the file-level SSD may hold the only, dirty copy of a file.
    pub(super) fn dirties(self) -> bool {
        self == FileMode::WriteBack
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

pub(super) const SIEVE: ParamSpec =
    ParamSpec { name: "sieve", default: "1MiB", help: "files larger than this never go to the SSD (0 = no sieving)" };
pub(super) const SIEVE_HYCACHE: ParamSpec =
    ParamSpec { name: "sieve", default: "0", help: "files larger than this never go to the SSD (0 = no sieving)" };
pub(super) const INTERVAL: ParamSpec =
    ParamSpec { name: "interval", default: "5s", help: "migration period (Loris: 5s and 80s)" };
pub(super) const CLEANER_PERIOD: ParamSpec =
    ParamSpec { name: "cleaner-period", default: "1s", help: "background cleaner: how often it runs" };
pub(super) const CLEANER_CAP: ParamSpec = ParamSpec {
    name: "cleaner-cap",
    default: "10%",
    help: "background cleaner: free at most this share ahead of demand",
};
pub(super) const THRESHOLD: ParamSpec =
    ParamSpec { name: "threshold", default: "90%", help: "evict down below this SSD usage" };
pub(super) const DIRTY_HIGH: ParamSpec =
    ParamSpec { name: "dirty-high", default: "50%", help: "start writing back above this share dirty" };
pub(super) const DIRTY_LOW: ParamSpec =
    ParamSpec { name: "dirty-low", default: "25%", help: "stop writing back below this share dirty" };
pub(super) const MAX_WRITEBACKS: ParamSpec =
    ParamSpec { name: "max-writebacks", default: "16", help: "write-backs in flight at most" };

/// Every shared knob of the file-level architectures (a per-volume policy takes those of every
/// mode a volume may have, which excludes HyCache's).
pub const FILE_PARAMS: &[ParamSpec] =
    &[SIEVE, INTERVAL, CLEANER_PERIOD, CLEANER_CAP, DIRTY_HIGH, DIRTY_LOW, MAX_WRITEBACKS];

impl FileMode {
    /// The shared knobs this mode uses (an architecture of this mode accepts only these).
    pub const fn shared_params(self) -> &'static [ParamSpec] {
        match self {
            FileMode::IntervalHotDst | FileMode::IntervalCaching => &[SIEVE, INTERVAL],
            FileMode::DynamicColdDstCleaner => &[SIEVE, CLEANER_PERIOD, CLEANER_CAP],
            FileMode::WriteBack => &[SIEVE, DIRTY_HIGH, DIRTY_LOW, MAX_WRITEBACKS],
            FileMode::HyCache => &[SIEVE_HYCACHE, THRESHOLD],
            _ => &[SIEVE],
        }
    }

    /// The collector used when none is named.
    pub const fn default_collector(self) -> &'static str {
        match self {
            FileMode::HyCache => "lru",
            _ => "inverse-bitmap",
        }
    }
}
