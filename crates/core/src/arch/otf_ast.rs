//! OTF-AST, on-the-fly automated storage tiering (the seed's algorithm is lost to OCR; SPEC §1
//! gives our reconstruction): sub-LUN tiering that follows hot spots within minutes.
//!
//! - The volume is cut into sub-LUNs (default 1 GiB); all start on the HDD; the SSD holds
//!   `SSD / sub-LUN` of them (the paper's 24 GB SSD = 24 sub-LUNs).
//! - Every `t` seconds the interval-concentration collector ranks the interval: when the top `n`
//!   sub-LUNs carry at least `i`% of the I/Os, the interval is concentrated; a sub-LUN in the top
//!   `n` for `c` consecutive concentrated intervals is promoted (while the SSD has room), and a
//!   promoted one out of the top `n` for `o` consecutive intervals times out and is demoted.
//! - A move copies a whole sub-LUN at a throttled rate (the paper measured 2–3 minutes per GiB
//!   up and 6–7 minutes down); at most `max-moves` run at once. Promotions are started before
//!   timed-out demotions (ours: the mover is the bottleneck and a demotion only frees a slot).
//! - Writes to a sub-LUN under migration go to the temporary buffer (RAM, 512-byte validity
//!   bitmap); reads of fully buffered ranges are served from it, others from the source; when the
//!   move ends, the buffered sectors are merged into the new home (a copy from RAM), repeated
//!   while writes keep arriving. A failed move merges them into the old home instead.

use hashbrown::HashMap;

use super::{ArchBuild, Architecture, Placement, Setup, Usage};
use crate::collector::interval::IntervalConcentration;
use crate::engine::Ctx;
use crate::object_table::IdHash;
use crate::params::{ConfigError, ParamSpec, Params};
use crate::temp_buffer::{Coverage, TempBuffer};
use crate::{Bytes, Level, Levels, Nanos, ObjectId, Op, Outcome, Request, Served, Work, WorkKind};

const ON_SSD: u8 = 1;
const PROMOTING: u8 = 2;
const DEMOTING: u8 = 4;
const MERGING: u8 = 8;

const TAG_MOVE: u64 = 0;
const TAG_MERGE: u64 = 1;

/// A sub-LUN's state.
#[derive(Clone, Copy, Debug, Default)]
struct SubLun {
    slot: u32,
    flags: u8,
}

/// A migration's buffered writes.
#[derive(Clone, Debug)]
struct Buffer {
    bits: TempBuffer,
    /// Writes since the current merge was issued.
    written_since_merge: bool,
}

/// Sub-LUN placement, migrations and the temporary buffer; shared by OTF-AST and static tiering.
#[derive(Debug)]
pub(crate) struct SubLuns {
    size: u64,
    slots: u32,
    owner: Vec<u64>,
    table: HashMap<u64, SubLun, IdHash>,
    buffers: HashMap<u64, Buffer, IdHash>,
    moves: u32,
    max_moves: u32,
    promote_pace: Nanos,
    demote_pace: Nanos,
    pub(crate) counters: MoverCounters,
}

/// What the mover counted.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct MoverCounters {
    buffered_writes: u64,
    buffered_bytes: u64,
    reads_from_buffer: u64,
    merges: u64,
    failed_moves: u64,
}

const FREE: u64 = u64::MAX;

/// Knobs shared by the sub-LUN tiering architectures.
pub(crate) const MOVER_PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "sub-lun",
        default: "(the block size)",
        help: "sub-LUN size (paper: 1GiB); the simulator splits requests at it",
    },
    ParamSpec { name: "max-moves", default: "1", help: "sub-LUN migrations at once (1..=64)" },
    ParamSpec {
        name: "promote-time",
        default: "150s",
        help: "time to copy 1 GiB HDD -> SSD (paper: 2-3 min; 0 = device speed)",
    },
    ParamSpec {
        name: "demote-time",
        default: "390s",
        help: "time to copy 1 GiB SSD -> HDD (paper: 6-7 min; 0 = device speed)",
    },
];

impl SubLuns {
    pub(crate) fn build(p: &mut Params, setup: &Setup) -> Result<SubLuns, ConfigError> {
        if setup.object_size == 0 {
            return Err(
                p.inconsistent("needs fixed-size sub-LUNs: run with --objects blocks:SUBLUN (e.g. blocks:1GiB)")
            );
        }
        let size = p.size_or("sub-lun", setup.object_size, 4096, 1 << 40)?;
        if size != setup.object_size {
            return Err(p.inconsistent(format!(
                "sub-lun = {size} but requests are split into {}-byte blocks: run with --objects blocks:{size}",
                setup.object_size
            )));
        }
        let slots = setup.fast_capacity / size;
        if slots == 0 {
            return Err(p.inconsistent(format!(
                "the SSD ({}) is smaller than one sub-LUN ({})",
                Bytes(setup.fast_capacity),
                Bytes(size)
            )));
        }
        let max_moves = p.u64("max-moves", 1, 64)? as u32;
        let per_gib = |d: Nanos| Nanos((d.0 as f64 * size as f64 / (1u64 << 30) as f64) as u64);
        let promote_pace = per_gib(p.duration("promote-time", Nanos::ZERO, Nanos::from_secs(86_400))?);
        let demote_pace = per_gib(p.duration("demote-time", Nanos::ZERO, Nanos::from_secs(86_400))?);
        let slots = u32::try_from(slots).map_err(|_| p.inconsistent("too many SSD slots: use larger sub-LUNs"))?;
        Ok(SubLuns {
            size,
            slots,
            owner: vec![FREE; slots as usize],
            table: HashMap::with_hasher(IdHash),
            buffers: HashMap::with_hasher(IdHash),
            moves: 0,
            max_moves,
            promote_pace,
            demote_pace,
            counters: MoverCounters::default(),
        })
    }

    pub(crate) fn slots(&self) -> u32 {
        self.slots
    }

    pub(crate) fn on_ssd(&self, id: u64) -> bool {
        self.table.get(&id).is_some_and(|s| s.flags & ON_SSD != 0)
    }

    pub(crate) fn moving(&self, id: u64) -> bool {
        self.table.get(&id).is_some_and(|s| s.flags & (PROMOTING | DEMOTING | MERGING) != 0)
    }

    pub(crate) fn can_move(&self) -> bool {
        self.moves < self.max_moves
    }

    fn free_slot(&self) -> Option<u32> {
        self.owner.iter().position(|&o| o == FREE).map(|s| s as u32)
    }

    pub(crate) fn has_free_slot(&self) -> bool {
        self.free_slot().is_some()
    }

    /// Sub-LUNs on the SSD (or on their way there).
    pub(crate) fn residents(&self) -> impl Iterator<Item = u64> + '_ {
        self.owner.iter().copied().filter(|&o| o != FREE)
    }

    fn home(&self, s: &SubLun) -> Level {
        if s.flags & ON_SSD != 0 { Level::Fast } else { Level::Slow }
    }

    pub(crate) fn access(&mut self, req: &Request) -> Served {
        let id = req.obj.0;
        let s = self.table.get(&id).copied().unwrap_or_default();
        let home = self.home(&s);
        let at_home = |sv: Served| if home == Level::Fast { sv.at_fast(u64::from(s.slot) * self.size) } else { sv };
        if s.flags & (PROMOTING | DEMOTING | MERGING) == 0 {
            return at_home(Served::by(home));
        }
        let Some(buf) = self.buffers.get_mut(&id) else { return at_home(Served::by(home)) };
        if req.op == Op::Write {
            let added = buf.bits.write(req.offset, req.len);
            buf.written_since_merge = true;
            self.counters.buffered_writes += 1;
            self.counters.buffered_bytes += added * crate::temp_buffer::SECTOR;
            return Served::by(Level::Ram);
        }
        match buf.bits.coverage(req.offset, req.len) {
            Coverage::Full => {
                self.counters.reads_from_buffer += 1;
                Served::by(Level::Ram)
            }
            Coverage::None => at_home(Served::by(home)),
            Coverage::Partial => {
                self.counters.reads_from_buffer += 1;
                let mut sv = Served::written_to(Levels::one(Level::Ram).with(home));
                sv.level = home;
                at_home(sv)
            }
        }
    }

    /// Starts moving `id` to the SSD; false when no slot or move is available.
    pub(crate) fn promote(&mut self, cx: &mut Ctx<'_>, id: u64) -> bool {
        if !self.can_move() || self.on_ssd(id) || self.moving(id) {
            return false;
        }
        let Some(slot) = self.free_slot() else { return false };
        self.owner[slot as usize] = id;
        let e = self.table.entry(id).or_default();
        e.slot = slot;
        e.flags |= PROMOTING;
        self.moves += 1;
        self.buffers.insert(id, Buffer { bits: TempBuffer::new(self.size), written_since_merge: false });
        let w = Work::new(WorkKind::Promote, ObjectId(id), Level::Slow, Level::Fast, self.size)
            .at(crate::LOGICAL_ADDR, u64::from(slot) * self.size)
            .with_tag(TAG_MOVE)
            .paced(self.promote_pace);
        cx.issue(w);
        true
    }

    /// Starts moving `id` back to the HDD; false when it is not on the SSD or no move is free.
    pub(crate) fn demote(&mut self, cx: &mut Ctx<'_>, id: u64) -> bool {
        if !self.can_move() || !self.on_ssd(id) || self.moving(id) {
            return false;
        }
        let Some(e) = self.table.get_mut(&id) else { return false };
        e.flags |= DEMOTING;
        let slot = e.slot;
        self.moves += 1;
        self.buffers.insert(id, Buffer { bits: TempBuffer::new(self.size), written_since_merge: false });
        let w = Work::new(WorkKind::Demote, ObjectId(id), Level::Fast, Level::Slow, self.size)
            .at(crate::LOGICAL_ADDR, u64::from(slot) * self.size)
            .with_tag(TAG_MOVE)
            .paced(self.demote_pace);
        cx.issue(w);
        true
    }

    fn issue_merge(&mut self, cx: &mut Ctx<'_>, id: u64) {
        let (slot, home) = match self.table.get(&id) {
            Some(s) => (s.slot, self.home(s)),
            None => return,
        };
        let Some(buf) = self.buffers.get_mut(&id) else { return };
        if buf.bits.valid_bytes() == 0 {
            self.buffers.remove(&id);
            if let Some(s) = self.table.get_mut(&id) {
                s.flags &= !MERGING;
            }
            return;
        }
        buf.written_since_merge = false;
        let bytes = buf.bits.valid_bytes();
        self.counters.merges += 1;
        if let Some(s) = self.table.get_mut(&id) {
            s.flags |= MERGING;
        }
        cx.issue(
            Work::new(WorkKind::Copy, ObjectId(id), Level::Ram, home, bytes)
                .at(crate::LOGICAL_ADDR, u64::from(slot) * self.size)
                .with_tag(TAG_MERGE),
        );
    }

    /// Handles a completion; returns the sub-LUN and whether it is now on the SSD, when a move
    /// ended (successfully or not).
    pub(crate) fn complete(&mut self, cx: &mut Ctx<'_>, work: &Work, outcome: Outcome) -> Option<(u64, bool)> {
        let id = work.obj.0;
        if work.tag == TAG_MERGE {
            let again = self.buffers.get(&id).is_some_and(|b| b.written_since_merge || outcome != Outcome::Done);
            if again {
                self.issue_merge(cx, id);
            } else {
                self.buffers.remove(&id);
                if let Some(s) = self.table.get_mut(&id) {
                    s.flags &= !MERGING;
                }
            }
            return None;
        }
        self.moves -= 1;
        let s = self.table.get(&id).copied().unwrap_or_default();
        let done = outcome == Outcome::Done;
        if !done {
            self.counters.failed_moves += 1;
        }
        match work.kind {
            WorkKind::Promote => {
                let e = self.table.entry(id).or_default();
                e.flags &= !PROMOTING;
                if done {
                    e.flags |= ON_SSD;
                } else {
                    self.owner[s.slot as usize] = FREE;
                }
            }
            WorkKind::Demote => {
                let e = self.table.entry(id).or_default();
                e.flags &= !DEMOTING;
                if done {
                    e.flags &= !ON_SSD;
                    self.owner[s.slot as usize] = FREE;
                }
            }
            _ => return None,
        }
        // Buffered writes go to wherever the sub-LUN lives now.
        self.issue_merge(cx, id);
        if self.table.get(&id).is_some_and(|e| e.flags == 0) {
            self.table.remove(&id);
        }
        Some((id, self.on_ssd(id)))
    }

    pub(crate) fn placement(&self, id: u64) -> Placement {
        let on_fast = self.on_ssd(id);
        Placement {
            tracked: self.table.contains_key(&id),
            on_fast,
            on_slow: !on_fast,
            dirty: false,
            moving: self.moving(id),
            in_ram: false,
        }
    }

    pub(crate) fn usage(&self) -> Usage {
        let used = self.residents().count() as u64;
        Usage {
            fast_capacity: u64::from(self.slots) * self.size,
            fast_used: used * self.size,
            dirty_bytes: 0,
            objects: self.table.len(),
            fast_objects: self.table.values().filter(|s| s.flags & ON_SSD != 0).count(),
            in_flight: 0,
        }
    }

    pub(crate) fn counters(&self, out: &mut Vec<(&'static str, u64)>) {
        let c = &self.counters;
        out.extend([
            ("writes buffered during migration", c.buffered_writes),
            ("bytes buffered during migration", c.buffered_bytes),
            ("reads served from the buffer", c.reads_from_buffer),
            ("buffer merges", c.merges),
            ("failed or cancelled migrations", c.failed_moves),
        ]);
    }

    pub(crate) fn check_invariants(&self) -> Result<(), String> {
        for (slot, &o) in self.owner.iter().enumerate() {
            if o == FREE {
                continue;
            }
            let Some(s) = self.table.get(&o) else { return Err(format!("slot {slot} owned by unknown sub-LUN {o}")) };
            if s.slot as usize != slot || s.flags & (ON_SSD | PROMOTING) == 0 {
                return Err(format!("slot {slot} owned by sub-LUN {o} with flags {:#x} slot {}", s.flags, s.slot));
            }
        }
        for (&id, s) in &self.table {
            if s.flags & ON_SSD != 0 && self.owner[s.slot as usize] != id {
                return Err(format!("sub-LUN {id} claims slot {} owned by another", s.slot));
            }
            if s.flags & (PROMOTING | DEMOTING) != 0 && !self.buffers.contains_key(&id) {
                return Err(format!("sub-LUN {id} moves without a buffer"));
            }
        }
        if self.moves > self.max_moves {
            return Err(format!("{} moves in flight, max {}", self.moves, self.max_moves));
        }
        Ok(())
    }

    pub(crate) fn memory_bytes(&self) -> usize {
        self.owner.capacity() * 8
            + self.table.capacity() * 16
            + self.buffers.values().map(|b| b.bits.memory_bytes() + 32).sum::<usize>()
    }
}

/// The OTF-AST architecture.
#[derive(Debug)]
pub struct OtfAst {
    mover: SubLuns,
    collector: IntervalConcentration,
    t: Nanos,
    next: Nanos,
    intervals: u64,
    concentrated: u64,
    promotions_blocked: u64,
}

const PARAMS: &[ParamSpec] = &[
    ParamSpec { name: "t", default: "60s", help: "interval length (1s..=1d)" },
    ParamSpec {
        name: "i",
        default: "50",
        help: "concentration threshold: % of the interval's I/Os in the top n (1..=100)",
    },
    ParamSpec { name: "n", default: "20", help: "top sub-LUNs examined per interval (1..=100000)" },
    ParamSpec {
        name: "c",
        default: "3",
        help: "consecutive concentrated intervals in the top n before promotion (1..=1000)",
    },
    ParamSpec {
        name: "o",
        default: "10",
        help: "consecutive intervals out of the top n before a promoted sub-LUN times out (1..=100000)",
    },
];

impl ArchBuild for OtfAst {
    const NAME: &'static str = "otf-ast";
    const CAPS: crate::arch::Capabilities = crate::arch::Capabilities::BLOCK_TIERING
        .with_ram_level(crate::arch::RamLevel::WriteBuffer)
        .with_objects(crate::arch::ObjectSizes::Extent("sub-lun"));
    const VERSION: u32 = 1;
    const HELP: &'static str =
        "OTF-AST: sub-LUN tiering by interval concentration (t, i, n, c, o) with a temporary write buffer";
    const PARAMS: &'static [ParamSpec] = PARAMS;
    const EXTRA_PARAMS: &'static [ParamSpec] = MOVER_PARAMS;
    const USES_COLLECTOR: bool = false;

    fn build(p: &mut Params, setup: &Setup) -> Result<Self, ConfigError> {
        let t = p.duration("t", Nanos::from_secs(1), Nanos::from_secs(86_400))?;
        let i = p.percent("i", 1.0, 100.0)?;
        let n = p.u64("n", 1, 100_000)? as usize;
        let c = p.u64("c", 1, 1000)? as u32;
        let o = p.u64("o", 1, 100_000)? as u32;
        let mover = SubLuns::build(p, setup)?;
        Ok(OtfAst {
            mover,
            collector: IntervalConcentration::new(i, n, c, o),
            t,
            next: t,
            intervals: 0,
            concentrated: 0,
            promotions_blocked: 0,
        })
    }
}

impl Architecture for OtfAst {
    #[inline]
    fn access(&mut self, _cx: &mut Ctx<'_>, req: &Request) -> Served {
        if !req.op.is_data() {
            return Served::metadata();
        }
        self.collector.record(req.obj.0);
        self.mover.access(req)
    }

    fn complete(&mut self, cx: &mut Ctx<'_>, work: &Work, outcome: Outcome) {
        if let Some((id, on_ssd)) = self.mover.complete(cx, work, outcome) {
            self.collector.set_promoted(id, on_ssd);
        }
    }

    fn tick(&mut self, cx: &mut Ctx<'_>) {
        while cx.now >= self.next {
            self.next = self.next.saturating_add(self.t);
            self.intervals += 1;
            let out = self.collector.end_interval();
            if out.concentrated {
                self.concentrated += 1;
            }
            // Promotions go first: the mover is the bottleneck (minutes per sub-LUN) and a
            // demotion only frees a slot. When the SSD is full the promotion fails and the
            // timed-out sub-LUN's demotion takes the mover; a timeout not started now is
            // reported again at the next interval.
            for id in out.promote {
                if !self.mover.promote(cx, id) {
                    self.promotions_blocked += 1;
                }
            }
            for id in out.timeout {
                self.mover.demote(cx, id);
            }
        }
    }

    fn next_tick(&self) -> Option<Nanos> {
        Some(self.next)
    }

    fn placement(&self, obj: ObjectId) -> Placement {
        self.mover.placement(obj.0)
    }

    fn usage(&self) -> Usage {
        self.mover.usage()
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        let mut v = vec![
            ("intervals", self.intervals),
            ("concentrated intervals", self.concentrated),
            ("promotions blocked (no slot or move)", self.promotions_blocked),
        ];
        self.mover.counters(&mut v);
        v
    }

    fn check_invariants(&self) -> Result<(), String> {
        self.mover.check_invariants()
    }

    fn memory_bytes(&self) -> usize {
        self.mover.memory_bytes() + self.collector.counts().capacity() * 16
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{Harness, OBJ, Step, run_work};
    use crate::{Level, Nanos, ObjectId, Request, WorkKind};

    /// OTF-AST promotes a sub-LUN after `c` concentrated intervals in the top `n`, buffers writes
    /// while it moves and merges them afterwards, and demotes it after `o` intervals out of the top.
    #[test]
    fn otf_ast_follows_a_hot_spot() {
        let mut h = Harness::new("otf-ast:n=1,c=2,o=2,i=50", 4, false);
        for _ in 0..2 {
            for _ in 0..6 {
                h.step(&Step::Read(7, true)).unwrap();
            }
            h.step(&Step::Read(1, true)).unwrap();
            h.step(&Step::Tick).unwrap();
        }
        let w = h.queued.iter().find(|w| w.kind == WorkKind::Promote).copied().expect("promoted after c = 2 intervals");
        assert_eq!(w.obj, ObjectId(7));
        assert!(w.min_duration > Nanos::ZERO, "a paced move");
        // A write during the move lands in the buffer (RAM); a read of it comes back from there.
        h.step(&Step::Write(7, true)).unwrap();
        assert_eq!(h.engine.access(&Request::read(ObjectId(7), 0, OBJ)).level, Level::Ram);
        h.drain();
        run_work(&mut h);
        assert!(h.engine.placement(ObjectId(7)).on_fast);
        let c: std::collections::BTreeMap<_, _> = h.engine.arch_counters().into_iter().collect();
        assert_eq!(c["buffer merges"], 1);
        // Cold for o = 2 intervals: it times out, but sub-LUN 2, hot meanwhile, takes the mover
        // first; the demotion starts at the next interval once the mover is free.
        for _ in 0..2 {
            for _ in 0..6 {
                h.step(&Step::Read(2, true)).unwrap();
            }
            h.step(&Step::Tick).unwrap();
        }
        assert!(h.queued.iter().any(|w| w.kind == WorkKind::Promote && w.obj == ObjectId(2)));
        assert!(!h.queued.iter().any(|w| w.kind == WorkKind::Demote));
        h.drain();
        run_work(&mut h);
        h.step(&Step::Tick).unwrap();
        assert!(h.queued.iter().any(|w| w.kind == WorkKind::Demote && w.obj == ObjectId(7)));
        h.settle().unwrap();
        assert!(!h.engine.placement(ObjectId(7)).on_fast);
    }
}
