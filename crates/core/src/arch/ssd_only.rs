//! Baseline: every byte lives on the fast tier (as if the SSD were large enough for everything).

use super::{ArchBuild, Architecture, Placement, Setup, Usage};
use crate::engine::Ctx;
use crate::params::{ConfigError, ParamSpec, Params};
use crate::{Level, ObjectId, Outcome, Request, Served, Work};

/// The SSD-only baseline.
#[derive(Clone, Debug)]
pub struct SsdOnly {
    capacity: u64,
}

impl ArchBuild for SsdOnly {
    const NAME: &'static str = "ssd-only";
    const CAPS: crate::arch::Capabilities = crate::arch::Capabilities::baseline(crate::arch::CostClass::SsdOnly);
    const VERSION: u32 = 1;
    const HELP: &'static str = "baseline: everything on the SSD (assumed large enough)";
    const PARAMS: &'static [ParamSpec] = &[];
    const USES_COLLECTOR: bool = false;
    fn build(_: &mut Params, setup: &Setup) -> Result<Self, ConfigError> {
        Ok(SsdOnly { capacity: setup.fast_capacity })
    }
}

impl Architecture for SsdOnly {
    #[inline]
    fn access(&mut self, _cx: &mut Ctx<'_>, req: &Request) -> Served {
        if req.op.is_data() { Served::by(Level::Fast) } else { Served::metadata() }
    }
    fn complete(&mut self, _cx: &mut Ctx<'_>, _work: &Work, _outcome: Outcome) {}
    fn placement(&self, _obj: ObjectId) -> Placement {
        Placement { tracked: false, on_fast: true, ..Placement::default() }
    }
    fn usage(&self) -> Usage {
        Usage { fast_capacity: self.capacity, ..Usage::default() }
    }
    fn check_invariants(&self) -> Result<(), String> {
        Ok(())
    }
    fn memory_bytes(&self) -> usize {
        0
    }
}
