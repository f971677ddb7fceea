//! Static tiering, OTF-AST's baseline ("conventional" automated storage tiering): every long
//! period (default 24 h; the OTF-AST paper also ran 100–120 minutes) place the top-K sub-LUNs of
//! the previous window (`m` minutes) on the SSD, K being the SSD's sub-LUN slots. Between
//! periods nothing moves, so the SSD follows hot spots only as fast as the period allows.
//!
//! Moves use the same throttled sub-LUN mover and temporary buffer as OTF-AST.

use std::collections::VecDeque;

use hashbrown::HashMap;

use super::otf_ast::{MOVER_PARAMS, SubLuns};
use super::{ArchBuild, Architecture, Placement, Setup, Usage};
use crate::engine::Ctx;
use crate::object_table::IdHash;
use crate::params::{ConfigError, ParamSpec, Params};
use crate::{Nanos, ObjectId, Outcome, Request, Served, Work};

/// The static tiering architecture.
#[derive(Debug)]
pub struct StaticTiering {
    mover: SubLuns,
    period: Nanos,
    bucket: Nanos,
    buckets_per_window: usize,
    current: HashMap<u64, u64, IdHash>,
    history: VecDeque<HashMap<u64, u64, IdHash>>,
    next_bucket: Nanos,
    next_period: Nanos,
    /// Moves planned at the last period, waiting for a free mover: (sub-LUN, to the SSD).
    plan: VecDeque<(u64, bool)>,
    periods: u64,
}

const PARAMS: &[ParamSpec] = &[
    ParamSpec { name: "period", default: "24h", help: "how often placement is recomputed (1min..=30d)" },
    ParamSpec { name: "m", default: "60", help: "history window in minutes ranked at each period (1..=43200)" },
];

impl ArchBuild for StaticTiering {
    const NAME: &'static str = "static-tiering";
    const CAPS: crate::arch::Capabilities = crate::arch::Capabilities::BLOCK_TIERING
        .with_ram_level(crate::arch::RamLevel::WriteBuffer)
        .with_objects(crate::arch::ObjectSizes::Extent("sub-lun"));
    const VERSION: u32 = 1;
    const HELP: &'static str = "static tiering: every period, the top-K sub-LUNs of the last m minutes go to the SSD";
    const PARAMS: &'static [ParamSpec] = PARAMS;
    const EXTRA_PARAMS: &'static [ParamSpec] = MOVER_PARAMS;
    const USES_COLLECTOR: bool = false;

    fn build(p: &mut Params, setup: &Setup) -> Result<Self, ConfigError> {
        let period = p.duration("period", Nanos::from_secs(60), Nanos::from_secs(30 * 86_400))?;
        let m = p.u64("m", 1, 43_200)?;
        let mover = SubLuns::build(p, setup)?;
        let bucket = Nanos::from_secs(60);
        Ok(StaticTiering {
            mover,
            period,
            bucket,
            buckets_per_window: m as usize,
            current: HashMap::with_hasher(IdHash),
            history: VecDeque::new(),
            next_bucket: bucket,
            next_period: period,
            plan: VecDeque::new(),
            periods: 0,
        })
    }
}

impl StaticTiering {
    fn replan(&mut self) {
        let mut totals: HashMap<u64, u64, IdHash> = HashMap::with_hasher(IdHash);
        for b in &self.history {
            for (&id, &c) in b {
                *totals.entry(id).or_insert(0) += c;
            }
        }
        let mut ranked: Vec<(u64, u64)> = totals.into_iter().map(|(id, c)| (c, id)).collect();
        ranked.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        let target: Vec<u64> = ranked.iter().take(self.mover.slots() as usize).map(|x| x.1).collect();
        self.plan.clear();
        // Make room first, then fill it, hottest first.
        for id in self.mover.residents().collect::<Vec<_>>() {
            if !target.contains(&id) {
                self.plan.push_back((id, false));
            }
        }
        for id in target {
            if !self.mover.on_ssd(id) {
                self.plan.push_back((id, true));
            }
        }
    }

    fn run_plan(&mut self, cx: &mut Ctx<'_>) {
        while self.mover.can_move() {
            let Some(&(id, up)) = self.plan.front() else { break };
            if up && !self.mover.has_free_slot() {
                // Waits for a demotion to free a slot.
                if self.plan.iter().any(|&(_, u)| !u) {
                    let pos = self.plan.iter().position(|&(_, u)| !u).unwrap_or(0);
                    let down = self.plan.remove(pos);
                    if let Some((d, _)) = down {
                        self.mover.demote(cx, d);
                    }
                    continue;
                }
                break;
            }
            self.plan.pop_front();
            if up {
                self.mover.promote(cx, id);
            } else {
                self.mover.demote(cx, id);
            }
        }
    }
}

impl Architecture for StaticTiering {
    #[inline]
    fn access(&mut self, _cx: &mut Ctx<'_>, req: &Request) -> Served {
        if !req.op.is_data() {
            return Served::metadata();
        }
        *self.current.entry(req.obj.0).or_insert(0) += 1;
        self.mover.access(req)
    }

    fn complete(&mut self, cx: &mut Ctx<'_>, work: &Work, outcome: Outcome) {
        self.mover.complete(cx, work, outcome);
        self.run_plan(cx);
    }

    fn tick(&mut self, cx: &mut Ctx<'_>) {
        while cx.now >= self.next_bucket {
            self.next_bucket = self.next_bucket.saturating_add(self.bucket);
            let b = std::mem::replace(&mut self.current, HashMap::with_hasher(IdHash));
            self.history.push_back(b);
            while self.history.len() > self.buckets_per_window {
                self.history.pop_front();
            }
        }
        if cx.now >= self.next_period {
            while self.next_period <= cx.now {
                self.next_period = self.next_period.saturating_add(self.period);
            }
            self.periods += 1;
            self.replan();
        }
        self.run_plan(cx);
    }

    fn next_tick(&self) -> Option<Nanos> {
        Some(self.next_bucket.min(self.next_period))
    }

    fn placement(&self, obj: ObjectId) -> Placement {
        self.mover.placement(obj.0)
    }

    fn usage(&self) -> Usage {
        self.mover.usage()
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        let mut v = vec![("placement periods", self.periods), ("planned moves waiting", self.plan.len() as u64)];
        self.mover.counters(&mut v);
        v
    }

    fn check_invariants(&self) -> Result<(), String> {
        self.mover.check_invariants()
    }

    fn memory_bytes(&self) -> usize {
        self.mover.memory_bytes() + self.history.iter().map(|b| b.capacity() * 16).sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{Harness, Step, run_work};
    use crate::{ObjectId, WorkKind};

    /// Static tiering moves nothing until its period ends, then places the top K of the window.
    #[test]
    fn static_tiering_moves_only_at_its_period() {
        let mut h = Harness::new("static-tiering:period=3min,m=10,max-moves=4", 2, false);
        for round in 0..3 {
            for o in [3u64, 3, 3, 8, 8, 9] {
                h.step(&Step::Read(o, true)).unwrap();
            }
            h.step(&Step::Tick).unwrap();
            let promotes = h.queued.iter().filter(|w| w.kind == WorkKind::Promote).count();
            assert_eq!(promotes, if round < 2 { 0 } else { 2 }, "round {round}");
        }
        run_work(&mut h);
        assert!(h.engine.placement(ObjectId(3)).on_fast && h.engine.placement(ObjectId(8)).on_fast);
        assert!(!h.engine.placement(ObjectId(9)).on_fast, "K = 2 slots");
    }
}
