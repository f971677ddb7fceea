//! What a FUSE front end adds to the operations it carries: the requests each makes of the
//! daemon (its time) and the pieces in which data reaches the engine (one access per data
//! request, as the mount tells its engine).

use tierwise_core::Nanos;

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
