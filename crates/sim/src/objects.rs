//! How trace records become engine accesses.
//!
//! - **blocks** (default for block traces): each request is split into the fixed-size blocks it
//!   touches, one access per block (libCacheSim does not do this; its issue #99). Object id =
//!   `volume << 48 | block`.
//!   Block boundaries are anchored at a byte offset (`blocks:4KiB@3584`): a volume whose
//!   partition starts at sector 63 has most requests at 3584 mod 4096, and a cache whose
//!   blocks follow LBA 0 would see every such request straddle two blocks. `@auto` (the
//!   default) anchors at the dominant offset when one dominates; see [`resolve_anchor`].
//! - **requests**: one request = one object (id = the trace's key, size = request length); reads
//!   and writes kept. The default for object traces (oracleGeneral, csv without `id-unit`).
//! - **lcs**: libCacheSim-compatible, for differential checks: one request = one object, writes
//!   treated as reads, size-0 requests dropped; with `--ignore-size` every object has size 1.

use serde::{Deserialize, Serialize};
use tierwise_core::{ObjectId, Request};

use crate::trace::{IoOp, TraceRecord};

/// Bits of the object id left for the block number in block mode.
pub const VOLUME_SHIFT: u32 = tierwise_core::ObjectId::VOLUME_SHIFT;
/// Spacing of volumes in logical HDD addresses (`volume << 48 | offset`); the simulator's
/// [`crate::layout::VolumeLayout`] places them on the disk.
pub const VOLUME_STRIDE: u64 = 1 << VOLUME_SHIFT;
/// Volume numbers are kept to 16 bits in object ids and addresses.
const VOLUME_MASK: u64 = 0xFFFF;

/// Where block boundaries fall.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Anchor {
    /// At the dominant request offset modulo the block size, when one dominates; else LBA 0.
    /// Resolved by [`resolve_anchor`] before a run; an unresolved `Auto` maps like `At(0)`.
    Auto,
    /// Blocks start at byte addresses congruent to this, modulo the block size.
    At(u64),
}

/// The request → object mapping.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ObjectMode {
    /// Fixed-size blocks of this many bytes.
    Blocks {
        /// Block size in bytes (power of two, 512..=1 GiB).
        size: u64,
        /// Where the blocks start.
        anchor: Anchor,
    },
    /// One request = one object, ops kept.
    Requests,
    /// libCacheSim-compatible.
    LibCacheSim {
        /// Every object has size 1 (libCacheSim `-ignore_obj_size 1`).
        ignore_size: bool,
    },
}

impl ObjectMode {
    /// Blocks of `size` bytes, anchored automatically.
    pub fn blocks(size: u64) -> ObjectMode {
        ObjectMode::Blocks { size, anchor: Anchor::Auto }
    }

    /// The same mode with another block size (the anchor kept); other modes unchanged.
    pub fn with_block_size(self, size: u64) -> ObjectMode {
        match self {
            ObjectMode::Blocks { anchor, .. } => ObjectMode::Blocks { size, anchor },
            m => m,
        }
    }

    /// The fixed object size the engine is built for (0 = variable).
    pub fn object_size(&self) -> u64 {
        match self {
            ObjectMode::Blocks { size, .. } => *size,
            _ => 0,
        }
    }

    /// Parses `blocks`, `blocks:SIZE`, `blocks:SIZE@ANCHOR` (`@auto` or a byte offset, a
    /// multiple of 512), `requests`, `lcs` or `lcs:ignore-size`.
    pub fn parse(s: &str) -> Result<ObjectMode, String> {
        let (name, arg) = s.split_once(':').unwrap_or((s, ""));
        match name {
            "blocks" | "block" => {
                let (size_text, anchor_text) = arg.split_once('@').unwrap_or((arg, "auto"));
                let size = if size_text.is_empty() { 4096 } else { tierwise_core::params::parse_size(size_text)? };
                if !size.is_power_of_two() || !(512..=1 << 30).contains(&size) {
                    return Err(format!("block size {size}: expected a power of two from 512 bytes to 1 GiB"));
                }
                let anchor = match anchor_text {
                    "auto" => Anchor::Auto,
                    t => {
                        let at = tierwise_core::params::parse_size(t)
                            .map_err(|e| format!("block anchor `{t}`: {e} (expected auto or a byte offset)"))?;
                        if at % 512 != 0 {
                            return Err(format!("block anchor {at}: expected a multiple of 512 bytes (a sector)"));
                        }
                        Anchor::At(at % size)
                    }
                };
                Ok(ObjectMode::Blocks { size, anchor })
            }
            "requests" | "request" if arg.is_empty() => Ok(ObjectMode::Requests),
            "lcs" | "libcachesim" if arg.is_empty() => Ok(ObjectMode::LibCacheSim { ignore_size: false }),
            "lcs" | "libcachesim" if arg == "ignore-size" => Ok(ObjectMode::LibCacheSim { ignore_size: true }),
            _ => Err(format!(
                "unknown object mode `{s}`: expected blocks[:SIZE[@ANCHOR]], requests, lcs or lcs:ignore-size"
            )),
        }
    }

    /// Short label.
    pub fn label(&self) -> String {
        match self {
            ObjectMode::Blocks { size, anchor: Anchor::At(0) } => format!("blocks:{}", tierwise_core::Bytes(*size)),
            ObjectMode::Blocks { size, anchor: Anchor::At(a) } => {
                format!("blocks:{}@{a}", tierwise_core::Bytes(*size))
            }
            ObjectMode::Blocks { size, anchor: Anchor::Auto } => {
                format!("blocks:{}@auto", tierwise_core::Bytes(*size))
            }
            ObjectMode::Requests => "requests".into(),
            ObjectMode::LibCacheSim { ignore_size: false } => "lcs".into(),
            ObjectMode::LibCacheSim { ignore_size: true } => "lcs:ignore-size".into(),
        }
    }
}

/// One engine access derived from a record, with the byte address it has on the HDD.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Piece {
    /// The access.
    pub req: Request,
    /// Logical byte address on the (shared) HDD of the accessed bytes.
    pub addr: u64,
}

/// Maps records to pieces.
#[derive(Clone, Copy, Debug)]
pub struct Mapper {
    mode: ObjectMode,
    shift: u32,
    /// Added to byte offsets so that anchored block boundaries fall on multiples of the size.
    bias: u64,
}

impl Mapper {
    /// A mapper for `mode`; object traces in block mode fall back to requests (their ids are
    /// not addresses).
    pub fn new(mode: ObjectMode, object_trace: bool) -> Mapper {
        let mode = match mode {
            ObjectMode::Blocks { .. } if object_trace => ObjectMode::Requests,
            m => m,
        };
        let (shift, bias) = match mode {
            ObjectMode::Blocks { size, anchor: Anchor::At(a) } => (size.trailing_zeros(), (size - a % size) % size),
            ObjectMode::Blocks { size, anchor: Anchor::Auto } => (size.trailing_zeros(), 0),
            _ => (0, 0),
        };
        Mapper { mode, shift, bias }
    }

    /// The effective mode.
    pub fn mode(&self) -> ObjectMode {
        self.mode
    }

    /// The logical HDD address of a whole object (for background moves).
    #[inline]
    pub fn object_addr(&self, obj: ObjectId) -> u64 {
        match self.mode {
            ObjectMode::Blocks { .. } => {
                let volume = obj.0 >> VOLUME_SHIFT;
                let block = obj.0 & ((1 << VOLUME_SHIFT) - 1);
                volume << VOLUME_SHIFT | ((block << self.shift).saturating_sub(self.bias) & (VOLUME_STRIDE - 1))
            }
            // Object ids carry no address: spread objects over the disk deterministically.
            _ => tierwise_core::object_table::hash_id(obj) >> 16 << 12,
        }
    }

    /// The first object `rec` touches (for prefetching).
    #[inline]
    pub fn first_object(&self, rec: &TraceRecord) -> ObjectId {
        match self.mode {
            ObjectMode::Blocks { .. } => ObjectId(
                (u64::from(rec.volume) & VOLUME_MASK) << VOLUME_SHIFT
                    | ((rec.offset.saturating_add(self.bias) >> self.shift) & ((1 << VOLUME_SHIFT) - 1)),
            ),
            _ => ObjectId(rec.key),
        }
    }

    /// Calls `f` for each piece of `rec`; returns the number of pieces (0 = dropped).
    #[inline]
    pub fn split(&self, rec: &TraceRecord, mut f: impl FnMut(Piece)) -> u32 {
        let make = |obj: ObjectId, write: bool, offset: u64, len: u64| {
            if write { Request::write(obj, offset, len) } else { Request::read(obj, offset, len) }
        };
        let write = rec.op == IoOp::Write;
        match self.mode {
            ObjectMode::Blocks { size, .. } => {
                if rec.len == 0 {
                    return 0;
                }
                let vol_base = (u64::from(rec.volume) & VOLUME_MASK) << VOLUME_SHIFT;
                // Virtual coordinates: byte offsets shifted so that anchored boundaries are
                // multiples of the block size.
                let vstart = rec.offset.saturating_add(self.bias);
                let vstop = vstart.saturating_add(rec.len);
                let first = vstart >> self.shift;
                let last = (vstop - 1) >> self.shift;
                let vol_tag = (u64::from(rec.volume) & VOLUME_MASK) << VOLUME_SHIFT;
                let mut n = 0;
                for b in first..=last {
                    let start = (b << self.shift).max(vstart);
                    let end = ((b + 1) << self.shift).min(vstop);
                    let obj = ObjectId(vol_tag | (b & ((1 << VOLUME_SHIFT) - 1)));
                    f(Piece {
                        req: make(obj, write, start - (b << self.shift), end - start),
                        addr: vol_base | ((start - self.bias) & (VOLUME_STRIDE - 1)),
                    });
                    n += 1;
                    if n == u32::MAX || size == 0 {
                        break;
                    }
                }
                n
            }
            ObjectMode::Requests => {
                if rec.len == 0 {
                    return 0;
                }
                let addr = if rec.offset == 0 { self.object_addr(ObjectId(rec.key)) } else { rec.offset };
                f(Piece { req: make(ObjectId(rec.key), write, 0, rec.len), addr });
                1
            }
            ObjectMode::LibCacheSim { ignore_size } => {
                if rec.len == 0 {
                    return 0;
                }
                let len = if ignore_size { 1 } else { rec.len };
                let addr = if rec.offset == 0 { self.object_addr(ObjectId(rec.key)) } else { rec.offset };
                f(Piece { req: make(ObjectId(rec.key), false, 0, len), addr });
                1
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces(m: &Mapper, rec: &TraceRecord) -> Vec<Piece> {
        let mut v = Vec::new();
        m.split(rec, |p| v.push(p));
        v
    }

    #[test]
    fn block_mode_splits_at_block_boundaries() {
        let m = Mapper::new(ObjectMode::Blocks { size: 4096, anchor: Anchor::At(0) }, false);
        let rec = TraceRecord { time_ns: 0, op: IoOp::Write, volume: 2, offset: 4096 + 512, len: 8192, key: 9 };
        let p = pieces(&m, &rec);
        assert_eq!(p.len(), 3);
        assert_eq!(p[0].req, Request::write(ObjectId(2 << 48 | 1), 512, 3584));
        assert_eq!(p[1].req, Request::write(ObjectId(2 << 48 | 2), 0, 4096));
        assert_eq!(p[2].req, Request::write(ObjectId(2 << 48 | 3), 0, 512));
        assert_eq!(p[1].addr, 2 * VOLUME_STRIDE + 8192);
        assert_eq!(m.object_addr(ObjectId(2 << 48 | 2)), 2 * VOLUME_STRIDE + 8192);
        assert_eq!(pieces(&m, &TraceRecord { len: 0, ..rec }).len(), 0);
    }

    #[test]
    fn lcs_mode_is_one_object_per_request() {
        let m = Mapper::new(ObjectMode::LibCacheSim { ignore_size: false }, false);
        let rec = TraceRecord { time_ns: 0, op: IoOp::Write, volume: 0, offset: 512 * 77, len: 8192, key: 77 };
        let p = pieces(&m, &rec);
        assert_eq!(p, vec![Piece { req: Request::read(ObjectId(77), 0, 8192), addr: 512 * 77 }]);
        let m = Mapper::new(ObjectMode::LibCacheSim { ignore_size: true }, false);
        assert_eq!(pieces(&m, &rec)[0].req.len, 1);
        assert!(pieces(&m, &TraceRecord { len: 0, ..rec }).is_empty(), "size-0 requests are dropped");
    }

    #[test]
    fn object_traces_never_split() {
        let m = Mapper::new(ObjectMode::blocks(4096), true);
        assert_eq!(m.mode(), ObjectMode::Requests);
        assert_eq!(ObjectMode::parse("blocks:64k").unwrap(), ObjectMode::blocks(65536));
        assert_eq!(
            ObjectMode::parse("blocks:4KiB@3584").unwrap(),
            ObjectMode::Blocks { size: 4096, anchor: Anchor::At(3584) }
        );
        assert_eq!(
            ObjectMode::parse("blocks:4k@7680").unwrap(),
            ObjectMode::Blocks { size: 4096, anchor: Anchor::At(3584) }
        );
        assert_eq!(ObjectMode::parse("blocks:4k@3584").unwrap().label(), "blocks:4KiB@3584");
        assert!(ObjectMode::parse("blocks:4k@100").unwrap_err().contains("multiple of 512"));
        assert!(ObjectMode::parse("blocks:4k@x").unwrap_err().contains("anchor"));
        assert!(ObjectMode::parse("blocks:3000").is_err());
        assert!(ObjectMode::parse("lcs:what").is_err());
    }

    #[test]
    fn an_anchor_shifts_block_boundaries() {
        let m = Mapper::new(ObjectMode::Blocks { size: 4096, anchor: Anchor::At(3584) }, false);
        // 8 KiB at byte 3584: exactly two whole blocks, no partial ends.
        let rec = TraceRecord { time_ns: 0, op: IoOp::Write, volume: 0, offset: 3584, len: 8192, key: 0 };
        let p = pieces(&m, &rec);
        assert_eq!(p.len(), 2);
        assert_eq!(p[0].req, Request::write(ObjectId(1), 0, 4096));
        assert_eq!(p[1].req, Request::write(ObjectId(2), 0, 4096));
        assert_eq!((p[0].addr, p[1].addr), (3584, 3584 + 4096), "device addresses stay real");
        assert_eq!(m.object_addr(ObjectId(1)), 3584);
        assert_eq!(m.first_object(&rec), ObjectId(1));
        let head = pieces(&m, &TraceRecord { offset: 0, len: 4096, ..rec });
        assert_eq!(head[0].req, Request::write(ObjectId(0), 512, 3584));
        assert_eq!(head[1].req, Request::write(ObjectId(1), 0, 512));
    }
}
