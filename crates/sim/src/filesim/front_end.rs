//! What a FUSE front end adds to the operations it carries: the requests each makes of the
//! daemon (its time) and the pieces in which data reaches the engine (one access per data
//! request, as the mount tells its engine, each told when the one before is done).

use tierwise_core::{Level, Nanos, Op, Request};

use super::{FileSim, timed};
use crate::filetrace::{FileOp, FileOpKind};

/// What a FUSE front end adds to each operation: its requests (open, data, flush, release),
/// each costing the daemon a fixed time. Calibrated on this machine (docs/PERFORMANCE.md,
/// issue 16): an SSD-only mount against the simulator's SSD-only prediction.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FrontEndCost {
    /// Time per request: the kernel round trip and the daemon's handling.
    pub per_request: Nanos,
    /// File data goes through the daemon (regular FUSE I/O); `false`: passthrough, only
    /// opens, flushes and releases reach it.
    pub data_requests: bool,
    /// Bytes per data request (FUSE's `max_read`/`max_write`).
    pub max_request: u64,
}

impl FrontEndCost {
    /// The requests `op` makes of the front end, as the replayer issues it (every operation
    /// opens and closes its file; lookups are cached by the kernel and not counted).
    pub fn requests(&self, op: &FileOp) -> u64 {
        let data = || if self.data_requests { pieces(Some(*self), op.offset, op.length).count() as u64 } else { 0 };
        match op.kind {
            // open (or create), the data, flush and release.
            FileOpKind::Read | FileOpKind::Write | FileOpKind::Append => 3 + data(),
            FileOpKind::Create => 3,
            // open, setattr, flush, release.
            FileOpKind::Truncate => 4,
            FileOpKind::Mkdir | FileOpKind::Delete | FileOpKind::Rmdir | FileOpKind::Rename | FileOpKind::Stat => 1,
        }
    }

    /// The front end's time for `op`.
    pub fn cost(&self, op: &FileOp) -> Nanos {
        Nanos(self.per_request.0.saturating_mul(self.requests(op)))
    }
}

/// The pieces in which `front_end` hands `len` bytes at `offset` to the engine: one per FUSE
/// data request (at most `max_request` bytes, split where the kernel splits them, at its
/// multiples); the whole range at once without a front end or with passthrough.
pub(super) fn pieces(front_end: Option<FrontEndCost>, offset: u64, len: u64) -> impl Iterator<Item = (u64, u64)> {
    let step = front_end.filter(|f| f.data_requests).map_or(u64::MAX, |f| f.max_request.max(1));
    let end = offset.saturating_add(len);
    let mut at = Some(offset);
    std::iter::from_fn(move || {
        let from = at?;
        let next = (from / step).saturating_add(1).saturating_mul(step).min(end);
        at = (next < end).then_some(next);
        Some((from, next - from))
    })
}

/// The data of an operation not yet told to the engine. FUSE hands one reader's requests to
/// the daemon one after another (the next when the previous is answered), so on a modelled
/// front end each piece reaches the engine, and the devices, when the one before it is done.
/// On a busy HDD that matters: the second piece of a file queues behind what others sent
/// meanwhile, and the engine hears it later (measured on the mount: the pieces of one read
/// arrive tens of milliseconds apart on the emulated HDD).
#[derive(Clone, Copy, Debug)]
pub(super) struct PiecesLeft {
    /// The range still to tell (`offset`, `len`), with the operation's object and class.
    req: Request,
    /// The operation is inside the measurement window (it was counted at its dispatch).
    measured: bool,
    /// The slowest level its pieces were served by so far (what the count says).
    level: Level,
}

impl FileSim {
    /// Tells the engine a read or write of `req.len` bytes at `req.offset`, piece by piece as
    /// the front end splits it: at once without one (or untimed), else the first piece now and
    /// the others as each completes ([`PiecesLeft`]).
    pub(super) fn tell_data(&mut self, req: Request) {
        let sequential =
            self.timed.is_some() && self.cur_op != timed::NOBODY && self.cfg.front_end.is_some_and(|f| f.data_requests);
        let end = req.offset.saturating_add(req.len);
        for (offset, len) in pieces(self.cfg.front_end, req.offset, req.len) {
            let served = self.access(Request { offset, len, ..req }, true);
            if sequential && offset + len < end {
                let rest = Request { offset: offset + len, len: end - offset - len, ..req };
                let left = PiecesLeft { req: rest, measured: self.n >= self.cfg.measure_from, level: served.level };
                if let Some(t) = self.timed.as_mut() {
                    t.pieces_left.insert(self.cur_op, left);
                }
                return;
            }
        }
    }

    /// Operation `waiter`'s previous piece is done at `time`: tells the engine the next one and
    /// starts its I/O, as the front end would send it now.
    pub(super) fn next_piece(&mut self, waiter: u32, left: PiecesLeft, time: Nanos) {
        let (offset, len) = pieces(self.cfg.front_end, left.req.offset, left.req.len).next().unwrap_or_default();
        let saved = (self.cur_op, self.now, self.op_level);
        (self.cur_op, self.now) = (waiter, time);
        let served = self.access(Request { offset, len, ..left.req }, true);
        (self.cur_op, self.now, self.op_level) = saved;
        let level = left.level.max(served.level);
        if left.measured && level != left.level {
            self.recount(left.req.op, left.level, level);
        }
        let rest = left.req.len - len;
        let Some(t) = self.timed.as_mut() else { return };
        if rest > 0 {
            let req = Request { offset: offset + len, len: rest, ..left.req };
            t.pieces_left.insert(waiter, PiecesLeft { req, level, ..left });
        }
        t.resume_if_idle(waiter, time);
    }

    /// An operation counted as served by `old` turned out to need `new` (a later piece).
    fn recount(&mut self, op: Op, old: Level, new: Level) {
        let t = &mut self.tally;
        let levels = if op == Op::Read { &mut t.read_levels } else { &mut t.write_levels };
        levels[old.index()] -= 1;
        levels[new.index()] += 1;
        if old != Level::Slow && new == Level::Slow {
            t.fast_ops -= 1;
        }
    }
}
