//! Client I/O: a request is split at block boundaries, each piece is told to the engine once,
//! and its answer becomes a route (which image, where), executed outside the core lock.
//!
//! With the identity layout the HDD image holds every block at its own address, and the SSD
//! copy of a block is in the slot the slot table gives; a slot may hold only some sectors (a
//! partial write absorbed by a write-back cache): reads assembled from both take the valid
//! sectors from the SSD and the rest from the HDD, as the engine's answer says.

use std::sync::{RwLockReadGuard, RwLockWriteGuard};

use smallvec::SmallVec;

use tierwise_core::arch::RamLevel;
use tierwise_core::driver::revalidate;
use tierwise_core::{Level, ObjectId, Request, Served};

use crate::backend::Dev;
use crate::device::{Core, STRIPES, Shared};
use crate::error::DeviceError;
use crate::format::{Layout, SECTOR};

/// One block's share of a request.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Piece {
    pub(crate) block: u64,
    /// Offset inside the block.
    pub(crate) inner: u64,
    pub(crate) len: u64,
    /// Offset inside the request's buffer.
    pub(crate) at: usize,
}

/// A request's pieces, or anything per piece: small requests (most are one block) allocate
/// nothing, which is measurable at 200,000 requests a second.
type PerPiece<T> = SmallVec<[T; 4]>;

fn pieces(block_size: u64, offset: u64, len: u64) -> PerPiece<Piece> {
    let mut out = PerPiece::with_capacity((len / block_size + 2) as usize);
    let mut pos = offset;
    let end = offset + len;
    while pos < end {
        let block = pos / block_size;
        let inner = pos % block_size;
        let n = (block_size - inner).min(end - pos);
        out.push(Piece { block, inner, len: n, at: (pos - offset) as usize });
        pos += n;
    }
    out
}

fn check_range(sh: &Shared, offset: u64, len: u64) -> Result<(), DeviceError> {
    let size = sh.size();
    if offset.checked_add(len).is_none_or(|e| e > size) {
        return Err(DeviceError::OutOfRange { offset, len, size });
    }
    Ok(())
}

/// The stripes of `blocks`, ascending and each once (the lock order).
fn stripe_ids(blocks: impl Iterator<Item = u64>) -> PerPiece<usize> {
    let mut ids: PerPiece<usize> = blocks.map(|b| (b % STRIPES as u64) as usize).collect();
    ids.sort_unstable();
    ids.dedup();
    ids
}

pub(crate) enum Guards<'a> {
    Shared(#[expect(dead_code, reason = "held for its drop")] PerPiece<RwLockReadGuard<'a, ()>>),
    Exclusive(#[expect(dead_code, reason = "held for its drop")] PerPiece<RwLockWriteGuard<'a, ()>>),
}

pub(crate) fn lock_stripes<'a>(sh: &'a Shared, blocks: impl Iterator<Item = u64>, exclusive: bool) -> Guards<'a> {
    let ids = stripe_ids(blocks);
    if exclusive {
        Guards::Exclusive(
            ids.iter().map(|&i| sh.stripes[i].write().unwrap_or_else(std::sync::PoisonError::into_inner)).collect(),
        )
    } else {
        Guards::Shared(
            ids.iter().map(|&i| sh.stripes[i].read().unwrap_or_else(std::sync::PoisonError::into_inner)).collect(),
        )
    }
}

/// Starts loading what the engine and the route will read for a request's first blocks, so
/// the cache misses of random I/O overlap instead of following each other: the engine's index
/// and the slot map at once, then (once the slot is known) the slot's valid bits and pin
/// while the engine reads its entry. The concatenated layout has no slots to load.
fn prefetch_slots(sh: &Shared, c: &Core, ps: &[Piece]) {
    let first = &ps[..ps.len().min(8)];
    for p in first {
        c.engine.prefetch(ObjectId(p.block), false);
    }
    if sh.layout() != Layout::Identity {
        return;
    }
    for p in first {
        c.slots.prefetch(p.block);
    }
    for p in first {
        c.slots.prefetch_slot_of(p.block, &sh.pins);
    }
}

/// Where a piece's bytes are read from.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ReadRoute {
    /// From the block's RAM copy (it is being moved; `RamLevel::MoveCopies`).
    pub(crate) ram: bool,
    pub(crate) dev: Dev,
    pub(crate) off: u64,
    /// Valid sectors of this slot are laid over the bytes read (an assembled read).
    pub(crate) overlay: Option<u32>,
    /// The slot this route uses, pinned until the I/O is done.
    pub(crate) pinned: Option<u32>,
}

pub(crate) fn hdd_offset(sh: &Shared, p: &Piece) -> u64 {
    p.block * sh.block_size() + p.inner
}

/// Turns a read's answer into a route, pinning the slot it uses.
fn read_route(sh: &Shared, c: &mut Core, p: &Piece, served: &Served) -> ReadRoute {
    if sh.layout() == Layout::Concatenated {
        return match served.level {
            Level::Fast => ReadRoute {
                ram: false,
                dev: Dev::Ssd,
                off: sh.ssd_sb.ssd_data_start() + served.fast_addr + p.inner,
                overlay: None,
                pinned: None,
            },
            _ => ReadRoute { ram: false, dev: Dev::Hdd, off: served.slow_addr + p.inner, overlay: None, pinned: None },
        };
    }
    let served = &crate::subluns::at_home(sh, c, p.block, served);
    let hdd = ReadRoute { ram: false, dev: Dev::Hdd, off: hdd_offset(sh, p), overlay: None, pinned: None };
    if served.level == Level::Ram && sh.ram_level != RamLevel::None {
        return ReadRoute { ram: true, ..hdd };
    }
    let both = served.touches.contains(Level::Fast) && served.touches.contains(Level::Slow);
    match (served.level, c.slots.slot_of(p.block)) {
        (Level::Fast, Some(s)) | (Level::Slow, Some(s)) if served.level == Level::Fast || both => {
            sh.pin(s);
            let (first, n) = sector_span(p.inner, p.len);
            if c.slots.all_valid(s, first, n) {
                ReadRoute {
                    ram: false,
                    dev: Dev::Ssd,
                    off: sh.slot_offset(s) + p.inner,
                    overlay: None,
                    pinned: Some(s),
                }
            } else {
                if !both {
                    // Told "the SSD" for sectors the slot does not hold: the best bytes there are.
                    c.stats.anomalies += 1;
                }
                ReadRoute { overlay: Some(s), pinned: Some(s), ..hdd }
            }
        }
        (Level::Slow, _) => hdd,
        _ => {
            // The SSD (or a RAM level this front end does not hold) with no slot.
            c.stats.anomalies += 1;
            hdd
        }
    }
}

/// The sectors a byte range of a block covers: (first, count).
fn sector_span(inner: u64, len: u64) -> (u64, u64) {
    let first = inner / SECTOR;
    (first, (inner + len).div_ceil(SECTOR) - first)
}

pub(crate) fn execute_read(sh: &Shared, buf: &mut [u8], p: &Piece, r: &ReadRoute) -> Result<(), DeviceError> {
    let dst = &mut buf[p.at..p.at + p.len as usize];
    if r.ram {
        return sh.ram.read(sh, p.block, p.inner, dst);
    }
    let dev_name = if r.dev == Dev::Ssd { "SSD" } else { "HDD" };
    sh.backend.read(r.dev, dst, r.off).map_err(|e| DeviceError::io(format!("reading the {dev_name} image"), e))?;
    if let Some(slot) = r.overlay {
        let runs = {
            let c = sh.lock();
            let (first, n) = sector_span(p.inner, p.len);
            c.slots.runs(slot, first, n)
        };
        for (sec, count, valid) in runs {
            if !valid {
                continue;
            }
            let from = (sec * SECTOR).max(p.inner);
            let to = ((sec + count) * SECTOR).min(p.inner + p.len);
            let d = &mut dst[(from - p.inner) as usize..(to - p.inner) as usize];
            sh.backend
                .read(Dev::Ssd, d, sh.slot_offset(slot) + from)
                .map_err(|e| DeviceError::io("reading the SSD image", e))?;
        }
    }
    Ok(())
}

/// Reads `buf.len()` bytes at `offset`.
pub(crate) fn read(sh: &Shared, buf: &mut [u8], offset: u64) -> Result<(), DeviceError> {
    check_range(sh, offset, buf.len() as u64)?;
    let ps = pieces(sh.block_size(), offset, buf.len() as u64);
    let mut waited = Vec::new();
    {
        let _g = lock_stripes(sh, ps.iter().map(|p| p.block), false);
        let mut routes = PerPiece::with_capacity(ps.len());
        // Blocks the architecture keeps in its RAM level after this read.
        let mut kept: PerPiece<Piece> = PerPiece::new();
        // Blocks read whole: a copy the engine just issued takes the bytes (`crate::fills`).
        let mut whole: PerPiece<u64> = PerPiece::new();
        let mut queued = false;
        {
            let mut c = sh.lock();
            c.stats.read_bytes += buf.len() as u64;
            prefetch_slots(sh, &c, &ps);
            c.engine.begin_request();
            for p in &ps {
                let req = Request::read(ObjectId(p.block), p.inner, p.len);
                let served = c.engine.access(&req);
                crate::trace::note(p.block, || {
                    format!("read {}+{} -> {:?} {:?}", p.inner, p.len, served.level, served.touches)
                });
                // A read of the HDD waits for a write-back writing the block there: it would
                // read a mix of the older and the written-back bytes.
                if served.blocked || (served.touches.contains(Level::Slow) && c.cleaning.contains(&p.block)) {
                    queued |= c.drain();
                    waited.push((*p, req, served));
                    continue;
                }
                c.stats.reads_by_level[served.level.index()] += 1;
                // The route first: an architecture may invalidate, in the same answer, the SSD
                // copy it serves this read from (HCA moving a page up from its L2); the pin
                // keeps the slot until the read is done.
                let route = read_route(sh, &mut c, p, &served);
                if crate::fills::feeds_copy(sh, &mut c, p, &route) {
                    whole.push(p.block);
                }
                routes.push((*p, route));
                if served.keep_in_ram {
                    kept.push(*p);
                }
                queued |= c.drain();
            }
        }
        if queued {
            sh.work_ready.notify_all();
        }
        let mut result = run_reads(sh, buf, &routes, &whole);
        if result.is_err() {
            // An image erred: again piece by piece, an SSD piece whose HDD copy is current read
            // from the HDD instead (its slot retired), as a write-through cache can afford.
            result = routes.iter().try_for_each(|(p, r)| crate::failover::read_or_fall_back(sh, buf, p, r));
        }
        for (_, r) in &routes {
            if let Some(s) = r.pinned {
                sh.unpin(s);
            }
        }
        result?;
        crate::fills::keep_for_fills(sh, buf, &routes);
        // A RAM cache level keeps the whole blocks this read touched.
        for p in kept {
            if p.inner == 0 && p.len == sh.block_size() {
                sh.ram.put(p.block, &buf[p.at..p.at + p.len as usize], false);
            } else {
                sh.ram.keep(sh, p.block)?;
            }
        }
    }
    for (p, req, served) in waited {
        let (_g, mut c) = settled(sh, p.block, false);
        let served = again_if_stale(&mut c, &req, served);
        c.stats.reads_by_level[served.level.index()] += 1;
        let route = read_route(sh, &mut c, &p, &served);
        drop(c);
        let r = crate::failover::read_or_fall_back(sh, buf, &p, &route);
        if let Some(s) = route.pinned {
            sh.unpin(s);
        }
        r?;
    }
    Ok(())
}

/// Executes read routes, merging pieces next to each other on one image into one read. A
/// partial piece of a block in `whole` (a copy the engine issued waits for its bytes) widens
/// the read to the block's edge and hands the block over (`crate::fills`): a multi-block miss
/// is one HDD read, not one per block fed (issue 35).
fn run_reads(sh: &Shared, buf: &mut [u8], routes: &[(Piece, ReadRoute)], whole: &[u64]) -> Result<(), DeviceError> {
    let mut i = 0;
    while i < routes.len() {
        let (p, r) = routes[i];
        // Pieces next to each other on the same image (HDD blocks, or SSD slots allocated in
        // a row) are read with one call.
        let j = if r.overlay.is_none() && !r.ram {
            run_end(routes, i, |(q, s), (last, lr)| {
                s.dev == r.dev
                    && !s.ram
                    && s.overlay.is_none()
                    && s.off == lr.off + last.len
                    && q.at == last.at + last.len as usize
            })
        } else {
            i + 1
        };
        let run = &routes[i..j];
        if run.iter().any(|(q, _)| whole.contains(&q.block)) {
            crate::fills::read_widened(sh, buf, run, whole)?;
        } else {
            let (last, _) = routes[j - 1];
            let merged = Piece { block: p.block, inner: p.inner, len: (last.at - p.at) as u64 + last.len, at: p.at };
            execute_read(sh, buf, &merged, &r)?;
        }
        i = j;
    }
    Ok(())
}

/// After waiting: the first answer, unless work that ran meanwhile made it unsafe, then asked
/// again without counting (the engine's told-once rule).
fn again_if_stale(c: &mut Core, req: &Request, served: Served) -> Served {
    let (served, asked_again) = revalidate(&mut c.engine, req, served);
    if asked_again {
        c.drain();
    }
    served
}

/// Waits until no work is queued or running on `block`, then takes its stripe and the core
/// lock (a write-back that starts meanwhile holds no stripe while it writes the HDD: waits
/// again).
fn settled(sh: &Shared, block: u64, exclusive: bool) -> (Guards<'_>, CoreGuard<'_>) {
    loop {
        wait_block_idle(sh, block);
        let g = lock_stripes(sh, std::iter::once(block), exclusive);
        let c = sh.lock();
        if !c.cleaning.contains(&block) {
            return (g, c);
        }
    }
}

/// Waits until no work is queued or running on `block`.
fn wait_block_idle(sh: &Shared, block: u64) {
    let mut c = sh.lock();
    while c.work.busy(ObjectId(block)) && !c.stopping {
        c = sh.work_done.wait(c).unwrap_or_else(std::sync::PoisonError::into_inner);
    }
}

/// Where a piece's bytes are written.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct WriteRoute {
    /// Into the block's RAM copy (it is being moved; `RamLevel::MoveCopies`).
    pub(crate) ram: bool,
    pub(crate) hdd: Option<u64>,
    pub(crate) ssd: Option<SlotWrite>,
    /// Concatenated layout: the SSD image offset.
    pub(crate) ssd_at: Option<u64>,
}

/// A write into a block's slot.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SlotWrite {
    pub(crate) slot: u32,
    /// Mapped for this write: settled once its bytes are in.
    new: bool,
    /// The slot held the first (last) sector the write covers before it: a partial sector is
    /// merged with the slot's bytes, else with the HDD's.
    head_valid: bool,
    tail_valid: bool,
    /// Every sector the write covers was valid before: nothing to record after it.
    all_valid: bool,
}

/// Writes `buf` at `offset`.
pub(crate) fn write(sh: &Shared, buf: &[u8], offset: u64) -> Result<(), DeviceError> {
    check_range(sh, offset, buf.len() as u64)?;
    let ps = pieces(sh.block_size(), offset, buf.len() as u64);
    let mut waited = Vec::new();
    {
        let _g = lock_stripes(sh, ps.iter().map(|p| p.block), true);
        let mut routes = PerPiece::with_capacity(ps.len());
        let mut queued = false;
        let mut c = sh.lock();
        c.stats.write_bytes += buf.len() as u64;
        prefetch_slots(sh, &c, &ps);
        c.engine.begin_request();
        for p in &ps {
            let req = Request::write(ObjectId(p.block), p.inner, p.len);
            let served = c.engine.access(&req);
            crate::trace::note(p.block, || {
                format!("write {}+{} -> {:?} {:?}", p.inner, p.len, served.level, served.touches)
            });
            queued |= c.drain();
            // A write that reaches the HDD waits for a write-back writing the block there
            // (`crate::mover::write_back`), or the older bytes could land after it.
            if served.blocked || (served.touches.contains(Level::Slow) && c.cleaning.contains(&p.block)) {
                waited.push((*p, req, served));
                continue;
            }
            c.stats.writes_by_level[served.level.index()] += 1;
            let served = crate::subluns::at_home(sh, &c, p.block, &served);
            let (guard, route) = write_route(sh, c, p, &served)?;
            c = guard;
            routes.push((*p, route));
        }
        drop(c);
        if queued {
            sh.work_ready.notify_all();
        }
        let (result, written) = crate::write_runs::run_writes(sh, buf, &routes);
        finish_writes(sh, &routes, written);
        buffer_moving(sh, buf, &routes[..written]);
        result?;
    }
    for (p, req, served) in waited {
        let (_g, mut c) = settled(sh, p.block, true);
        let served = again_if_stale(&mut c, &req, served);
        c.stats.writes_by_level[served.level.index()] += 1;
        let served = crate::subluns::at_home(sh, &c, p.block, &served);
        let (c, route) = write_route(sh, c, &p, &served)?;
        drop(c);
        let r = execute_write(sh, buf, &p, &route);
        finish_writes(sh, &[(p, route)], usize::from(r.is_ok()));
        if r.is_ok() {
            buffer_moving(sh, buf, &[(p, route)]);
        }
        r?;
    }
    Ok(())
}

/// Keeps the whole sectors these writes covered in the temporary buffer of a sub-LUN that is
/// moving (`crate::subluns`), read back from where they were written when a write covers part
/// of a sector. The caller still holds the blocks' stripes.
fn buffer_moving(sh: &Shared, buf: &[u8], routes: &[(Piece, WriteRoute)]) {
    if sh.ram_level != RamLevel::WriteBuffer {
        return;
    }
    for (p, r) in routes {
        if !sh.wbuf.moving(p.block) {
            continue;
        }
        let (first, n) = sector_span(p.inner, p.len);
        let mut sectors = vec![0u8; (n * SECTOR) as usize];
        if p.inner.is_multiple_of(SECTOR) && p.len.is_multiple_of(SECTOR) {
            sectors.copy_from_slice(&buf[p.at..p.at + p.len as usize]);
        } else {
            let home = match (r.ssd, r.hdd) {
                (Some(w), _) => (Dev::Ssd, sh.slot_offset(w.slot)),
                (None, Some(h)) => (Dev::Hdd, h - p.inner),
                _ => continue,
            };
            if sh.backend.read(home.0, &mut sectors, home.1 + first * SECTOR).is_err() {
                // The move would miss this write: it fails instead (the source has the write).
                sh.wbuf.lose(p.block);
                sh.lock().stats.anomalies += 1;
                continue;
            }
        }
        sh.wbuf.record(p.block, first, &sectors);
        sh.lock().stats.buffered_writes += 1;
    }
}

/// The end (exclusive) of the run of routes from `i` on in which each route `follows` the one
/// before it.
pub(crate) fn run_end<T: Copy>(
    routes: &[(Piece, T)],
    i: usize,
    follows: impl Fn(&(Piece, T), &(Piece, T)) -> bool,
) -> usize {
    let mut j = i + 1;
    while j < routes.len() && follows(&routes[j], &routes[j - 1]) {
        j += 1;
    }
    j
}

/// Once the bytes of the first `written` routes are in: marks the sectors they wrote valid,
/// settles the slots they mapped, and unpins every route's slot.
fn finish_writes(sh: &Shared, routes: &[(Piece, WriteRoute)], written: usize) {
    let mut done = Vec::new();
    for (i, (p, r)) in routes.iter().enumerate() {
        if let Some(w) = r.ssd {
            sh.unpin(w.slot);
            if i < written && !w.all_valid {
                done.push((*p, w));
            }
        }
    }
    if !done.is_empty() {
        let mut c = sh.lock();
        for (p, w) in done {
            if c.slots.slot_of(p.block) == Some(w.slot) {
                let (first, n) = sector_span(p.inner, p.len);
                if c.slots.set_valid(w.slot, first, n) {
                    c.table_changed = true;
                }
                if w.new {
                    c.slots.settle(w.slot, p.block);
                }
            }
        }
    }
}

type CoreGuard<'a> = std::sync::MutexGuard<'a, Core>;

/// Turns a write's answer into a route: the HDD at the block's address, and the block's slot
/// (allocated now if the SSD takes a block it did not hold; a commit first if every free slot
/// waits for one).
fn write_route<'a>(
    sh: &'a Shared,
    mut c: CoreGuard<'a>,
    p: &Piece,
    served: &Served,
) -> Result<(CoreGuard<'a>, WriteRoute), DeviceError> {
    let mut route = WriteRoute::default();
    if sh.layout() == Layout::Concatenated {
        match served.level {
            Level::Fast => route.ssd_at = Some(sh.ssd_sb.ssd_data_start() + served.fast_addr + p.inner),
            _ => route.hdd = Some(served.slow_addr + p.inner),
        }
        return Ok((c, route));
    }
    if served.touches.contains(Level::Slow) {
        route.hdd = Some(hdd_offset(sh, p));
    }
    if served.touches.contains(Level::Ram) {
        if sh.ram_level != RamLevel::None {
            route.ram = true;
        } else {
            c.stats.anomalies += 1;
        }
    }
    if served.touches.contains(Level::Fast) {
        let slot = match c.slots.slot_of(p.block) {
            Some(s) => Some((s, false)),
            None => {
                let (guard, s) = alloc_slot(sh, c)?;
                c = guard;
                // While a commit ran, other work may have taken the block off the SSD.
                match s {
                    Some(s) if c.engine.placement(ObjectId(p.block)).on_fast => {
                        c.slots.map(s, p.block, true);
                        c.table_changed = true;
                        Some((s, true))
                    }
                    Some(s) => {
                        c.slots.give_back(s);
                        None
                    }
                    None => return Err(DeviceError::Images("no SSD slot could be freed for a write".into())),
                }
            }
        };
        if let Some((s, new)) = slot {
            sh.pin(s);
            // The sectors this write covers become valid once its bytes are in (a checkpoint
            // taken meanwhile must not call them valid); partial edges are merged first.
            let (first, n) = sector_span(p.inner, p.len);
            let head_valid = c.slots.is_valid(s, first);
            let tail_valid = c.slots.is_valid(s, first + n - 1);
            let all_valid = !new && c.slots.all_valid(s, first, n);
            route.ssd = Some(SlotWrite { slot: s, new, head_valid, tail_valid, all_valid });
        }
    }
    Ok((c, route))
}

/// Takes a free slot, committing first when every free one waits for a commit.
pub(crate) fn alloc_slot<'a>(
    sh: &'a Shared,
    mut c: CoreGuard<'a>,
) -> Result<(CoreGuard<'a>, Option<u32>), DeviceError> {
    for attempt in 0..100 {
        if let Some(s) = c.slots.alloc(&sh.pins) {
            return Ok((c, Some(s)));
        }
        drop(c);
        if attempt == 0 || attempt % 10 == 0 {
            crate::mover::commit_for_slots(sh)?;
        } else {
            // Every free slot is pinned by an I/O in progress: it is done in microseconds.
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
        c = sh.lock();
    }
    Ok((c, None))
}

/// Writes one piece to its destinations. A piece that writes part of a sector into a slot
/// whose copy of that sector is not valid is merged with the sector's current bytes (the
/// HDD's) first, so the slot never holds a torn sector.
pub(crate) fn execute_write(sh: &Shared, buf: &[u8], p: &Piece, r: &WriteRoute) -> Result<(), DeviceError> {
    let data = &buf[p.at..p.at + p.len as usize];
    if r.ram {
        // Written through to the HDD as well when the route says so; else the RAM copy is
        // the only place of these bytes until its move ends (a flush writes it to the HDD).
        sh.ram.write(sh, p.block, p.inner, data, r.hdd.is_none())?;
    }
    if let Some(off) = r.hdd {
        sh.backend.write(Dev::Hdd, data, off).map_err(|e| DeviceError::io("writing the HDD image", e))?;
    }
    if let Some(off) = r.ssd_at {
        sh.backend.write(Dev::Ssd, data, off).map_err(|e| DeviceError::io("writing the SSD image", e))?;
    }
    if let Some(w) = r.ssd {
        let base = sh.slot_offset(w.slot);
        let start = p.inner / SECTOR * SECTOR;
        let end = (p.inner + p.len).div_ceil(SECTOR) * SECTOR;
        let ssd_err = |e| DeviceError::io("writing the SSD image", e);
        if start == p.inner && end == p.inner + p.len {
            sh.backend.write(Dev::Ssd, data, base + p.inner).map_err(ssd_err)?;
        } else {
            // The bytes around the write in its edge sectors come from where they are current:
            // the slot if it held the sector, else the HDD (which this piece's own HDD write,
            // if any, has already updated; the block's stripe keeps other writers out).
            let mut merged = vec![0u8; (end - start) as usize];
            let hdd_base = p.block * sh.block_size();
            let fill = |dst: &mut [u8], from: u64, valid: bool| -> Result<(), DeviceError> {
                if valid {
                    sh.backend.read(Dev::Ssd, dst, base + from).map_err(|e| DeviceError::io("reading the SSD image", e))
                } else {
                    sh.backend
                        .read(Dev::Hdd, dst, hdd_base + from)
                        .map_err(|e| DeviceError::io("reading the HDD image", e))
                }
            };
            let head = (p.inner - start) as usize;
            fill(&mut merged[..head], start, w.head_valid)?;
            let tail_from = p.inner + p.len;
            fill(&mut merged[(tail_from - start) as usize..], tail_from, w.tail_valid)?;
            merged[head..head + p.len as usize].copy_from_slice(data);
            sh.backend.write(Dev::Ssd, &merged, base + start).map_err(ssd_err)?;
        }
    }
    Ok(())
}

/// Copies the runs of `block`'s sectors that are not valid in `slot` from the HDD into the
/// slot (making a partial slot whole). The caller keeps the slot from being reused (holds the
/// block's stripe and a pin, or runs before serving).
pub(crate) fn fill_runs(sh: &Shared, block: u64, slot: u32, runs: &[(u64, u64, bool)]) -> std::io::Result<()> {
    let mut buf = Vec::new();
    for &(sec, n, _) in runs.iter().filter(|r| !r.2) {
        buf.resize((n * SECTOR) as usize, 0);
        sh.backend.read(Dev::Hdd, &mut buf, block * sh.block_size() + sec * SECTOR)?;
        sh.backend.write(Dev::Ssd, &buf, sh.slot_offset(slot) + sec * SECTOR)?;
    }
    Ok(())
}

/// Discards whole blocks in the range: each is told to the engine as deleted, and its HDD
/// bytes are punched out if the engine then keeps no SSD copy (an architecture that ignores
/// discards, as Flashcache does, keeps its copy, and the HDD's bytes stay equal to it). A
/// block with work queued or running is discarded only once that work is done: a write-back
/// of its old bytes must not land after the discard, or after a later write.
pub(crate) fn trim(sh: &Shared, offset: u64, len: u64) -> Result<(), DeviceError> {
    check_range(sh, offset, len)?;
    let bs = sh.block_size();
    let first = offset.div_ceil(bs);
    let end = (offset + len) / bs;
    if first >= end || sh.layout() != Layout::Identity {
        return Ok(());
    }
    for block in first..end {
        loop {
            wait_block_idle(sh, block);
            let _g = sh.stripe(block).write().unwrap_or_else(std::sync::PoisonError::into_inner);
            {
                let mut c = sh.lock();
                if c.work.busy(ObjectId(block)) {
                    continue;
                }
                c.engine.access(&Request::op(ObjectId(block), tierwise_core::Op::Delete));
                if c.drain() {
                    sh.work_ready.notify_all();
                }
                c.reconcile(block);
                if c.engine.placement(ObjectId(block)).on_fast {
                    break;
                }
            }
            sh.backend
                .discard(Dev::Hdd, block * bs, bs)
                .map_err(|e| DeviceError::io("discarding on the HDD image", e))?;
            break;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_split_at_block_boundaries() {
        let ps = pieces(4096, 4000, 5000);
        let got: Vec<(u64, u64, u64, usize)> = ps.iter().map(|p| (p.block, p.inner, p.len, p.at)).collect();
        assert_eq!(got, vec![(0, 4000, 96, 0), (1, 0, 4096, 96), (2, 0, 808, 4192)]);
        assert_eq!(sector_span(4000, 96), (7, 1));
        assert_eq!(sector_span(0, 4096), (0, 8));
        assert_eq!(sector_span(100, 1000), (0, 3));
        assert_eq!(stripe_ids([5, 1029, 3, 5].into_iter()).as_slice(), [3, 5]);
    }
}
