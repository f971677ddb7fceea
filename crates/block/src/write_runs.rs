//! How a client write's routes reach the images: merged into runs per image, and to the HDD
//! and the SSD at once when it goes to both.

use std::sync::atomic::Ordering;
use std::time::Instant;

use crate::backend::Dev;
use crate::device::Shared;
use crate::error::DeviceError;
use crate::format::SECTOR;
use crate::io::{Piece, WriteRoute, execute_write, run_end};

/// Executes write routes, merging runs of whole-sector pieces that are next to each other on
/// both their images into one call per image. Returns how many routes were written.
///
/// On a slow HDD (see [`PARALLEL_ABOVE_NS`]), a write-through write goes to the HDD and the SSD
/// at once, as bcache sends the bio to the backing device and the cache together: one after
/// the other kept the client waiting for both latencies, and left the HDD's queue shallower
/// than the simulator's (which issues to both levels at once), so its scheduler reordered less
/// (issue 35). Only whole sectors: a partial sector's SSD copy is merged with the HDD's bytes,
/// which the HDD write goes first for.
pub(crate) fn run_writes(sh: &Shared, buf: &[u8], routes: &[(Piece, WriteRoute)]) -> (Result<(), DeviceError>, usize) {
    // A thread per write costs tens of µs: worth it only when the HDD's writes take far longer
    // (a disk, an emulated one), not when they land in the page cache in a few µs. Asked
    // first: on a fast HDD the routes are not scanned.
    let at_once = sh.hdd_write_ns.load(Ordering::Relaxed) > PARALLEL_ABOVE_NS
        && routes.iter().any(|(_, r)| !r.ram && r.hdd.is_some())
        && routes.iter().any(|(_, r)| !r.ram && (r.ssd.is_some() || r.ssd_at.is_some()))
        && routes.iter().all(|(p, _)| whole_sectors(p));
    if !at_once {
        if let Err(e) = write_hdd_runs(sh, buf, routes) {
            return (Err(e), 0);
        }
        return write_ssd_runs(sh, buf, routes);
    }
    let (hdd, ssd) = std::thread::scope(|s| {
        let hdd = s.spawn(|| write_hdd_runs(sh, buf, routes));
        let ssd = write_ssd_runs(sh, buf, routes);
        (hdd.join(), ssd)
    });
    match hdd {
        Ok(Ok(())) => ssd,
        // The HDD's write failed: nothing counts as written (the slots' new sectors stay
        // invalid), as when the HDD went first and the SSD was never written.
        Ok(Err(e)) => (Err(e), 0),
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

/// The HDD's mean write time above which a write-through write goes to both images at once: a
/// disk's (an emulated one's) under load, well above a page-cache write delayed by preemption
/// on a busy host.
const PARALLEL_ABOVE_NS: u64 = 1_000_000;

fn whole_sectors(p: &Piece) -> bool {
    p.inner.is_multiple_of(SECTOR) && p.len.is_multiple_of(SECTOR)
}

/// The HDD's part of [`run_writes`] (and the routes moving through RAM, in order): one write
/// per run of pieces adjacent in the request and on the HDD, whatever slots the SSD gave them.
/// A real stack passes the client's range to the backing device as one request (bcache passes
/// the bio through). Merging only where the SSD slots were adjacent too made a 64 KiB
/// write-through write 16 HDD writes, each losing a rotation (issue 35).
fn write_hdd_runs(sh: &Shared, buf: &[u8], routes: &[(Piece, WriteRoute)]) -> Result<(), DeviceError> {
    let hdd_of = |r: &WriteRoute| if r.ram { None } else { r.hdd };
    let mut i = 0;
    while i < routes.len() {
        let (p, r) = routes[i];
        if r.ram {
            execute_write(sh, buf, &p, &r)?;
            i += 1;
            continue;
        }
        let Some(off) = r.hdd else {
            i += 1;
            continue;
        };
        let j = run_end(routes, i, |(q, s), (last, ls)| {
            q.at == last.at + last.len as usize
                && matches!((hdd_of(ls), hdd_of(s)), (Some(a), Some(b)) if b == a + last.len)
        });
        let (last, _) = routes[j - 1];
        let data = &buf[p.at..last.at + last.len as usize];
        let started = Instant::now();
        sh.backend.write(Dev::Hdd, data, off).map_err(|e| DeviceError::io("writing the HDD image", e))?;
        // A moving average over about the last eight writes.
        let ns = started.elapsed().as_nanos().min(u128::from(u64::MAX / 8)) as u64;
        let mean = sh.hdd_write_ns.load(Ordering::Relaxed);
        sh.hdd_write_ns.store(mean - mean / 8 + ns / 8, Ordering::Relaxed);
        i = j;
    }
    Ok(())
}

/// The SSD's part of [`run_writes`]: merged where slots (or the concatenated layout's
/// addresses) follow each other and the pieces are whole sectors. Returns how many routes were
/// written.
fn write_ssd_runs(sh: &Shared, buf: &[u8], routes: &[(Piece, WriteRoute)]) -> (Result<(), DeviceError>, usize) {
    let ssd_at = |p: &Piece, r: &WriteRoute| r.ssd.map(|w| sh.slot_offset(w.slot) + p.inner).or(r.ssd_at);
    let mut i = 0;
    while i < routes.len() {
        let (p, r) = routes[i];
        if r.ram || (r.ssd.is_none() && r.ssd_at.is_none()) {
            i += 1;
            continue;
        }
        let j = if whole_sectors(&p) {
            run_end(routes, i, |(q, s), (last, ls)| {
                whole_sectors(q)
                    && !s.ram
                    && q.at == last.at + last.len as usize
                    && ls.ssd.is_some() == s.ssd.is_some()
                    && matches!((ssd_at(last, ls), ssd_at(q, s)), (Some(a), Some(b)) if b == a + last.len)
            })
        } else {
            i + 1
        };
        let (last, _) = routes[j - 1];
        let merged = Piece { block: p.block, inner: p.inner, len: (last.at - p.at) as u64 + last.len, at: p.at };
        if let Err(e) = execute_write(sh, buf, &merged, &WriteRoute { hdd: None, ..r }) {
            return (Err(e), i);
        }
        i = j;
    }
    (Ok(()), routes.len())
}
