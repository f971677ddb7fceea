//! RAM copies of blocks being moved, for architectures that serve a block from RAM while it
//! moves (`RamLevel::MoveCopies`: GreenDM holds an extent under promotion in RAM and serves its
//! I/O there). The copy is loaded on first use from the block's current bytes; writes answered
//! [`tierwise_core::Level::Ram`] land in it; the move writes it to its destination, or back to
//! its source if the move fails. A flush writes copies that absorbed writes to the block's HDD
//! address first, so an acknowledged flush covers them too; a copy whose move is under way is
//! covered once the move has settled (see [`RamCopies::for_move`]).

use std::collections::HashMap;
use std::sync::Mutex;

use tierwise_core::arch::RamLevel;

use crate::backend::Dev;
use crate::device::Shared;
use crate::error::DeviceError;
use crate::format::SECTOR;

/// One block's RAM copy.
#[derive(Debug)]
pub(crate) struct RamCopy {
    pub(crate) bytes: Vec<u8>,
    /// A write landed in it that its block's HDD bytes lack.
    pub(crate) written: bool,
}

/// The RAM copies, by block.
#[derive(Debug, Default)]
pub(crate) struct RamCopies {
    map: Mutex<HashMap<u64, RamCopy>>,
}

impl RamCopies {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, RamCopy>> {
        self.map.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Loads `block`'s copy if it has none. The caller holds the block's stripe.
    fn ensure(&self, sh: &Shared, block: u64) -> Result<(), DeviceError> {
        if self.lock().contains_key(&block) {
            return Ok(());
        }
        let bytes = match fed_bytes(sh, block) {
            Some(bytes) => bytes,
            None => current_bytes(sh, block)?,
        };
        self.lock().entry(block).or_insert(RamCopy { bytes, written: false });
        Ok(())
    }

    /// Reads `dst.len()` bytes at `inner` of `block` from its RAM copy.
    pub(crate) fn read(&self, sh: &Shared, block: u64, inner: u64, dst: &mut [u8]) -> Result<(), DeviceError> {
        self.ensure(sh, block)?;
        let g = self.lock();
        let c = g.get(&block).ok_or_else(|| DeviceError::Images(format!("block {block}'s RAM copy vanished")))?;
        dst.copy_from_slice(&c.bytes[inner as usize..inner as usize + dst.len()]);
        Ok(())
    }

    /// Writes `data` at `inner` of `block` into its RAM copy; `written`: the HDD lacks it.
    pub(crate) fn write(
        &self,
        sh: &Shared,
        block: u64,
        inner: u64,
        data: &[u8],
        written: bool,
    ) -> Result<(), DeviceError> {
        if inner == 0 && data.len() as u64 == sh.block_size() {
            self.put(block, data, written);
            return Ok(());
        }
        self.ensure(sh, block)?;
        let mut g = self.lock();
        let c = g.get_mut(&block).ok_or_else(|| DeviceError::Images(format!("block {block}'s RAM copy vanished")))?;
        c.bytes[inner as usize..inner as usize + data.len()].copy_from_slice(data);
        c.written |= written;
        Ok(())
    }

    /// Replaces `block`'s copy with a whole block's bytes (a whole write, or a read the
    /// architecture keeps). `written`: the HDD lacks them.
    pub(crate) fn put(&self, block: u64, bytes: &[u8], written: bool) {
        let mut g = self.lock();
        let c = g.entry(block).or_insert_with(|| RamCopy { bytes: Vec::new(), written: false });
        c.bytes.clear();
        c.bytes.extend_from_slice(bytes);
        c.written = written;
    }

    /// Keeps `block`'s current bytes (a partial read the architecture keeps: it was not in
    /// RAM, so a copy held from before is stale). The caller holds the block's stripe.
    pub(crate) fn keep(&self, sh: &Shared, block: u64) -> Result<(), DeviceError> {
        let bytes = current_bytes(sh, block)?;
        self.put(block, &bytes, false);
        Ok(())
    }

    /// A copy of `block`'s bytes, loaded from its current bytes if none is held.
    pub(crate) fn bytes(&self, sh: &Shared, block: u64) -> Result<Vec<u8>, DeviceError> {
        self.ensure(sh, block)?;
        self.lock()
            .get(&block)
            .map(|c| c.bytes.clone())
            .ok_or_else(|| DeviceError::Images(format!("block {block}'s RAM copy vanished")))
    }

    /// Drops `block`'s copy (an invalidation from RAM).
    pub(crate) fn drop_copy(&self, block: u64) {
        self.lock().remove(&block);
    }

    /// A copy of `block`'s copy for the move that runs now, which writes it. The copy stays
    /// here until the move has settled (the mover drops it then): a flush meanwhile finds it
    /// and waits for the block's stripe, so its bytes are in a committed slot or on the HDD
    /// before the flush is answered. The caller holds the stripe.
    pub(crate) fn for_move(&self, block: u64) -> Option<RamCopy> {
        self.lock().get(&block).map(|c| RamCopy { bytes: c.bytes.clone(), written: c.written })
    }

    /// Writes every copy that absorbed writes to its block's HDD address (a flush), each under
    /// its block's stripe.
    pub(crate) fn persist(&self, sh: &Shared) -> Result<(), DeviceError> {
        let blocks: Vec<u64> = self.lock().iter().filter(|(_, c)| c.written).map(|(&b, _)| b).collect();
        for block in blocks {
            let _stripe = sh.stripe(block).write().unwrap_or_else(std::sync::PoisonError::into_inner);
            let bytes = match self.lock().get_mut(&block) {
                Some(c) if c.written => {
                    c.written = false;
                    c.bytes.clone()
                }
                _ => continue,
            };
            sh.backend
                .write(Dev::Hdd, &bytes, block * sh.block_size())
                .map_err(|e| DeviceError::io("writing a RAM copy to the HDD image", e))?;
        }
        Ok(())
    }

    /// Drops every copy (shutdown, after the moves stopped).
    pub(crate) fn clear(&self) {
        self.lock().clear();
    }
}

/// The bytes the read that missed, and issued this block's move, read whole for the move
/// (`crate::fills`), if that read is done. They are current: every write since is served from
/// the RAM copy. The copy then costs no second HDD read of the block, as the simulator serves
/// it from the move's one read. A read that arrives while that read is still under way reads
/// the block itself: waiting for the feeding read instead was measured slower (CloudPhysics,
/// GreenDM tiering: 605 waits of 8.5 ms median, IOPS 0.85x, docs/PERFORMANCE.md). Move copies
/// only: while a block moves, every access is served from its copy, so the first access loads
/// it; a RAM cache level's writes go to the HDD around a fed fill, and may leave those bytes
/// stale.
fn fed_bytes(sh: &Shared, block: u64) -> Option<Vec<u8>> {
    if sh.ram_level != RamLevel::MoveCopies {
        return None;
    }
    sh.lock().ram_fill.get(&block).filter(|b| b.len() as u64 == sh.block_size()).cloned()
}

/// A block's bytes as they are now: the HDD's, with the valid sectors of its slot over them.
/// The caller holds the block's stripe.
pub(crate) fn current_bytes(sh: &Shared, block: u64) -> Result<Vec<u8>, DeviceError> {
    let bs = sh.block_size();
    let mut bytes = vec![0u8; bs as usize];
    sh.backend.read(Dev::Hdd, &mut bytes, block * bs).map_err(|e| DeviceError::io("reading the HDD image", e))?;
    let slot = {
        let c = sh.lock();
        c.slots.slot_of(block).map(|s| {
            sh.pin(s);
            (s, c.slots.runs(s, 0, bs / SECTOR))
        })
    };
    if let Some((s, runs)) = slot {
        let r = runs.iter().filter(|r| r.2).try_for_each(|&(sec, n, _)| {
            let part = &mut bytes[(sec * SECTOR) as usize..((sec + n) * SECTOR) as usize];
            sh.backend.read(Dev::Ssd, part, sh.slot_offset(s) + sec * SECTOR)
        });
        sh.unpin(s);
        r.map_err(|e| DeviceError::io("reading the SSD image", e))?;
    }
    Ok(bytes)
}
