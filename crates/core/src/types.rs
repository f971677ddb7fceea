//! Newtypes and small value types that cross crate boundaries.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Identity of an object the engine places: a file (front end assigns the id, like an inode
/// number) or a fixed-size extent/block (id = extent number, optionally tagged with a volume).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ObjectId(pub u64);

impl ObjectId {
    /// Bits of a block id left for the block number; the volume is in the bits above
    /// (`volume << 48 | block`). Block front ends serve one volume (0).
    pub const VOLUME_SHIFT: u32 = 48;
    /// Mask of the block number.
    pub const BLOCK_MASK: u64 = (1 << Self::VOLUME_SHIFT) - 1;

    /// The block `block` of volume `volume`.
    pub const fn block_of(volume: u64, block: u64) -> ObjectId {
        ObjectId(volume << Self::VOLUME_SHIFT | (block & Self::BLOCK_MASK))
    }
    /// The volume of a block id.
    pub const fn volume(self) -> u64 {
        self.0 >> Self::VOLUME_SHIFT
    }
    /// The block number within its volume.
    pub const fn block(self) -> u64 {
        self.0 & Self::BLOCK_MASK
    }
    /// The volume architectures use for slow-tier space outside every volume (spare extents);
    /// the simulator lays it out after the last volume.
    pub const SPARE_VOLUME: u64 = 0xFFFF;

    /// The logical slow-tier address of a block of `object_size` bytes: its volume in the top
    /// 16 bits, its byte offset (at most 2^48 - 1) below. The simulator maps logical addresses
    /// to the disk's by its volume layout; a served device has one volume.
    pub const fn logical_addr(self, object_size: u64) -> u64 {
        let bytes = self.block().saturating_mul(object_size);
        let bytes = if bytes > Self::BLOCK_MASK { Self::BLOCK_MASK } else { bytes };
        self.volume() << Self::VOLUME_SHIFT | bytes
    }
}

/// Time in nanoseconds since an arbitrary epoch chosen by the [`crate::Clock`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Nanos(pub u64);

impl Nanos {
    /// Zero time.
    pub const ZERO: Nanos = Nanos(0);
    /// The largest representable time; used as "never".
    pub const MAX: Nanos = Nanos(u64::MAX);

    /// From whole seconds.
    pub const fn from_secs(s: u64) -> Nanos {
        Nanos(s.saturating_mul(1_000_000_000))
    }
    /// From milliseconds.
    pub const fn from_millis(ms: u64) -> Nanos {
        Nanos(ms.saturating_mul(1_000_000))
    }
    /// From microseconds.
    pub const fn from_micros(us: u64) -> Nanos {
        Nanos(us.saturating_mul(1_000))
    }
    /// From fractional seconds (negative and NaN map to zero).
    pub fn from_secs_f64(s: f64) -> Nanos {
        if s.is_nan() || s <= 0.0 { Nanos(0) } else { Nanos((s * 1e9).min(u64::MAX as f64) as u64) }
    }
    /// As fractional seconds.
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }
    /// Saturating addition.
    pub const fn saturating_add(self, d: Nanos) -> Nanos {
        Nanos(self.0.saturating_add(d.0))
    }
    /// Saturating subtraction.
    pub const fn saturating_sub(self, d: Nanos) -> Nanos {
        Nanos(self.0.saturating_sub(d.0))
    }
}

impl fmt::Display for Nanos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ns = self.0;
        if ns >= 1_000_000_000 {
            write!(f, "{:.3}s", ns as f64 / 1e9)
        } else if ns >= 1_000_000 {
            write!(f, "{:.3}ms", ns as f64 / 1e6)
        } else if ns >= 1_000 {
            write!(f, "{:.3}us", ns as f64 / 1e3)
        } else {
            write!(f, "{ns}ns")
        }
    }
}

/// A byte count.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Bytes(pub u64);

impl Bytes {
    /// One kibibyte.
    pub const KIB: u64 = 1024;
    /// One mebibyte.
    pub const MIB: u64 = 1024 * 1024;
    /// One gibibyte.
    pub const GIB: u64 = 1024 * 1024 * 1024;
}

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        let units = [(Bytes::GIB, "GiB"), (Bytes::MIB, "MiB"), (Bytes::KIB, "KiB")];
        for (unit, name) in units {
            if b >= unit {
                let v = b as f64 / unit as f64;
                return if b.is_multiple_of(unit) {
                    write!(f, "{}{name}", b / unit)
                } else {
                    write!(f, "{v:.2}{name}")
                };
            }
        }
        write!(f, "{b}B")
    }
}

/// Identifies one piece of background work (a move, copy or write-back) the engine asked a front
/// end to execute. Generation-tagged so a stale or duplicate completion is detected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct WorkId(pub u64);

/// A storage tier. The engine places objects on these two; RAM levels are modelled by
/// architectures that have them (see [`Level`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Tier {
    /// The small fast device (SSD).
    Fast = 0,
    /// The large slow device (HDD).
    Slow = 1,
}

impl Tier {
    /// Both tiers, fast first.
    pub const ALL: [Tier; 2] = [Tier::Fast, Tier::Slow];
    /// Index usable for two-element arrays.
    pub const fn index(self) -> usize {
        self as usize
    }
    /// The other tier.
    pub const fn other(self) -> Tier {
        match self {
            Tier::Fast => Tier::Slow,
            Tier::Slow => Tier::Fast,
        }
    }
    /// The device level of this tier.
    pub const fn level(self) -> Level {
        match self {
            Tier::Fast => Level::Fast,
            Tier::Slow => Level::Slow,
        }
    }
}

impl fmt::Display for Tier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Tier::Fast => "ssd",
            Tier::Slow => "hdd",
        })
    }
}

/// Where an access was served from, or a background move reads/writes: RAM (a buffer or L1 cache
/// inside the architecture), the fast tier or the slow tier.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Level {
    /// Main memory held by the architecture (L1 cache, transient buffer, in-flight copy).
    Ram = 0,
    /// The fast tier (SSD).
    Fast = 1,
    /// The slow tier (HDD).
    Slow = 2,
}

impl Level {
    /// All levels, fastest first.
    pub const ALL: [Level; 3] = [Level::Ram, Level::Fast, Level::Slow];
    /// Index usable for three-element arrays.
    pub const fn index(self) -> usize {
        self as usize
    }
    /// Short lower-case name used in tables ("ram", "ssd", "hdd").
    pub const fn name(self) -> &'static str {
        match self {
            Level::Ram => "ram",
            Level::Fast => "ssd",
            Level::Slow => "hdd",
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A small set of [`Level`]s (bit per level).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Levels(u8);

impl Levels {
    /// The empty set.
    pub const NONE: Levels = Levels(0);
    /// A set of one level.
    pub const fn one(l: Level) -> Levels {
        Levels(1 << l as u8)
    }
    /// Adds a level.
    pub const fn with(self, l: Level) -> Levels {
        Levels(self.0 | 1 << l as u8)
    }
    /// Both sets together.
    pub const fn union(self, o: Levels) -> Levels {
        Levels(self.0 | o.0)
    }
    /// Membership test.
    pub const fn contains(self, l: Level) -> bool {
        self.0 & (1 << l as u8) != 0
    }
    /// True when empty.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }
    /// Iterates members, fastest first.
    pub fn iter(self) -> impl Iterator<Item = Level> {
        Level::ALL.into_iter().filter(move |l| self.contains(*l))
    }
    /// The slowest member (the one that bounds a write's latency).
    pub fn slowest(self) -> Option<Level> {
        self.iter().last()
    }
}

/// What kind of object this is; file-level policies may treat metadata differently (Loris saw
/// directories pinned hot).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ObjectKind {
    /// File or extent data.
    #[default]
    Data,
    /// A directory or other metadata object.
    Meta,
}

/// The class a front end attaches to an access: which volume (policy domain) and what kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ObjectClass {
    /// Index of the volume (type-aware policy domain, e.g. a directory prefix); 0 by default.
    pub volume: u16,
    /// Data or metadata.
    pub kind: ObjectKind,
}

/// The operation of one access.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Op {
    /// Read `len` bytes at `offset`.
    Read,
    /// Write `len` bytes at `offset` (may extend a file).
    Write,
    /// A new object of `len` bytes (usually 0) comes into existence.
    Create,
    /// The object is removed; every copy of it is dropped.
    Delete,
    /// The object is truncated or extended to `offset` bytes.
    Truncate,
    /// The object was renamed; `class` carries its (possibly new) class.
    Rename,
    /// The object was opened (HyCache promotes on open).
    Open,
    /// The object's metadata was read.
    Stat,
}

impl Op {
    /// True for operations that move data bytes.
    pub const fn is_data(self) -> bool {
        matches!(self, Op::Read | Op::Write)
    }
}

/// One access told to the engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Request {
    /// The object accessed.
    pub obj: ObjectId,
    /// What happened.
    pub op: Op,
    /// Byte offset within the object (for [`Op::Truncate`], the new size).
    pub offset: u64,
    /// Byte length (for [`Op::Create`], the initial size).
    pub len: u64,
    /// Volume and kind.
    pub class: ObjectClass,
}

impl Request {
    /// A read of `len` bytes at `offset`.
    pub fn read(obj: ObjectId, offset: u64, len: u64) -> Request {
        Request { obj, op: Op::Read, offset, len, class: ObjectClass::default() }
    }
    /// A write of `len` bytes at `offset`.
    pub fn write(obj: ObjectId, offset: u64, len: u64) -> Request {
        Request { obj, op: Op::Write, offset, len, class: ObjectClass::default() }
    }
    /// Any operation with zero offset and length.
    pub fn op(obj: ObjectId, op: Op) -> Request {
        Request { obj, op, offset: 0, len: 0, class: ObjectClass::default() }
    }
    /// Sets the class.
    pub fn with_class(mut self, class: ObjectClass) -> Request {
        self.class = class;
        self
    }
}

/// A per-object slot index inside an architecture's object table; collectors index their
/// per-object state by it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Slot(pub u32);

impl Slot {
    /// As a vector index.
    #[inline]
    pub const fn idx(self) -> usize {
        self.0 as usize
    }
}
