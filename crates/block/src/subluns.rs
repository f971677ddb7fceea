//! Sub-LUN moves with a temporary write buffer (`RamLevel::WriteBuffer`: OTF-AST and static
//! tiering). A sub-LUN is one block of the device (its `sub-lun` knob is the block size), so a
//! move can be long: it is copied a chunk at a time, each chunk under the block's stripe, and
//! client I/O goes on between chunks instead of waiting for the whole move.
//!
//! While a sub-LUN moves, the architecture answers its writes "into the buffer" and its reads
//! "from the buffer" where the buffer covers them. Here a write the architecture sends to the
//! buffer is written to the sub-LUN's current home (the source of the move: the place the last
//! checkpoint names, so a flush makes it durable and a crash finds it there) and its sectors are
//! kept in the buffer, in RAM. When the last chunk is copied, the buffer is merged into the new
//! home under the stripe, before the block is mapped there, so the copy misses no write that
//! landed on a chunk already copied. The merge the architecture issues afterwards finds its
//! sectors at home already. A read the architecture serves from the buffer reads the home,
//! which holds the same bytes.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, RwLockWriteGuard};
use std::time::{Duration, Instant};

use tierwise_core::arch::RamLevel;
use tierwise_core::{Level, Served, Work, WorkKind};

use crate::backend::Dev;
use crate::device::{Core, Shared};
use crate::format::SECTOR;

/// One moving sub-LUN's temporary buffer.
#[derive(Debug, Default)]
struct Buffer {
    /// Sector index → its bytes, as last written.
    sectors: BTreeMap<u64, Box<[u8]>>,
    /// A write's sectors could not be kept: the move must fail (its source has them).
    lost: bool,
}

/// Sectors written to sub-LUNs while they move, by block.
#[derive(Debug, Default)]
pub(crate) struct WriteBuffers {
    moving: Mutex<HashMap<u64, Buffer>>,
}

impl WriteBuffers {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Buffer>> {
        self.moving.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether `block` is being moved.
    pub(crate) fn moving(&self, block: u64) -> bool {
        self.lock().contains_key(&block)
    }

    /// Keeps whole sectors written at sector `first` of `block`, if it is moving; returns the
    /// sectors kept.
    pub(crate) fn record(&self, block: u64, first: u64, bytes: &[u8]) -> u64 {
        let mut m = self.lock();
        let Some(buf) = m.get_mut(&block) else { return 0 };
        let mut n = 0;
        for (i, s) in bytes.chunks_exact(SECTOR as usize).enumerate() {
            buf.sectors.insert(first + i as u64, s.into());
            n += 1;
        }
        n
    }

    /// A write to `block` reached its source but could not be kept for the merge.
    pub(crate) fn lose(&self, block: u64) {
        if let Some(b) = self.lock().get_mut(&block) {
            b.lost = true;
        }
    }

    /// Sectors held in all buffers.
    pub(crate) fn sectors(&self) -> u64 {
        self.lock().values().map(|b| b.sectors.len() as u64).sum()
    }

    fn start(&self, block: u64) {
        self.lock().insert(block, Buffer::default());
    }

    fn finish(&self, block: u64) -> Buffer {
        self.lock().remove(&block).unwrap_or_default()
    }
}

/// Whether `w` is a sub-LUN move copied in chunks.
pub(crate) fn chunked(sh: &Shared, w: &Work) -> bool {
    sh.ram_level == RamLevel::WriteBuffer && matches!(w.kind, WorkKind::Promote | WorkKind::Demote)
}

/// Whether the architecture merges its buffer (work from RAM): the device merged it already.
pub(crate) fn is_merge(sh: &Shared, w: &Work) -> bool {
    sh.ram_level == RamLevel::WriteBuffer && w.from == Level::Ram
}

/// The chunk a move copies under the stripe at a time: a sixteenth of the sub-LUN, between
/// 4 KiB and 1 MiB.
fn chunk(block_size: u64) -> u64 {
    (block_size / 16 / 4096 * 4096).clamp(4096, 1 << 20).min(block_size)
}

/// An answer "into (or from) the buffer" as the sub-LUN's current home: its slot if it has
/// one, else the HDD.
pub(crate) fn at_home(sh: &Shared, c: &Core, block: u64, served: &Served) -> Served {
    if sh.ram_level != RamLevel::WriteBuffer || served.level != Level::Ram {
        return *served;
    }
    Served::by(if c.slots.slot_of(block).is_some() { Level::Fast } else { Level::Slow })
}

type Outcome = Result<Option<u32>, Option<u32>>;

/// Moves a whole sub-LUN chunk by chunk; returns the outcome (a promotion's new slot, mapped
/// at completion) with the block's stripe held, so that completion happens before any client
/// I/O can see the block half-switched.
pub(crate) fn move_block<'a>(sh: &'a Shared, w: &Work) -> (Outcome, RwLockWriteGuard<'a, ()>) {
    let block = w.obj.0;
    let bs = sh.block_size();
    let lock = || sh.stripe(block).write().unwrap_or_else(std::sync::PoisonError::into_inner);
    // Source and destination, and the slot a promotion fills.
    let (src, dst, new_slot, pinned) = match w.kind {
        WorkKind::Promote => {
            let (c, slot) = match crate::io::alloc_slot(sh, sh.lock()) {
                Ok(x) => x,
                Err(_) => return (Err(None), lock()),
            };
            drop(c);
            let Some(slot) = slot else { return (Err(None), lock()) };
            ((Dev::Hdd, block * bs), (Dev::Ssd, sh.slot_offset(slot)), Some(slot), None)
        }
        _ => {
            let c = sh.lock();
            let Some(slot) = c.slots.slot_of(block) else { return (Err(None), lock()) };
            if !c.slots.all_valid(slot, 0, bs / SECTOR) {
                // Part of the block is only on the HDD: not a tiered sub-LUN; nothing to copy
                // in chunks (and nothing this layout expects).
                drop(c);
                return (Err(None), lock());
            }
            sh.pin(slot);
            ((Dev::Ssd, sh.slot_offset(slot)), (Dev::Hdd, block * bs), None, Some(slot))
        }
    };
    sh.wbuf.start(block);
    let started = Instant::now();
    let step = chunk(bs);
    let mut data = vec![0u8; step as usize];
    let mut result: Result<(), ()> = Ok(());
    let mut off = 0;
    while off < bs {
        let n = step.min(bs - off);
        if sh.lock().stopping {
            result = Err(());
            break;
        }
        crate::mover::pace(sh, n);
        // The architecture's own pace (OTF-AST's minutes per GiB) spread over the chunks.
        let due = w.min_duration.0.saturating_mul(off + n) / bs.max(1);
        let elapsed = started.elapsed().as_nanos() as u64;
        if due > elapsed {
            std::thread::sleep(Duration::from_nanos(due - elapsed));
        }
        let _g = lock();
        let d = &mut data[..n as usize];
        if sh.backend.read(src.0, d, src.1 + off).is_err() || sh.backend.write(dst.0, d, dst.1 + off).is_err() {
            result = Err(());
            break;
        }
        off += n;
    }
    let guard = lock();
    let buffered = sh.wbuf.finish(block);
    if buffered.lost {
        result = Err(());
    }
    if result.is_ok() {
        // The merge: writes that landed on chunks already copied.
        let mut c = sh.lock();
        c.stats.buffer_merges += 1;
        drop(c);
        for (sector, bytes) in &buffered.sectors {
            if sh.backend.write(dst.0, bytes, dst.1 + sector * SECTOR).is_err() {
                result = Err(());
                break;
            }
        }
    }
    if let Some(s) = pinned {
        sh.unpin(s);
    }
    crate::trace::note(block, || {
        format!("sub-LUN move {:?}: {} sectors merged, {result:?}", w.kind, buffered.sectors.len())
    });
    let outcome = match result {
        Ok(()) => Ok(new_slot),
        // A failed move leaves the block at its source, which every write reached.
        Err(()) => Err(new_slot),
    };
    (outcome, guard)
}
