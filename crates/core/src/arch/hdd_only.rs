//! Baseline: every byte lives on the slow tier; the SSD is not used.

use super::{ArchBuild, Architecture, Placement, Setup, Usage};
use crate::engine::Ctx;
use crate::params::{ConfigError, ParamSpec, Params};
use crate::{Level, ObjectId, Outcome, Request, Served, Work};

/// The HDD-only baseline.
#[derive(Clone, Debug)]
pub struct HddOnly;

impl ArchBuild for HddOnly {
    const NAME: &'static str = "hdd-only";
    const CAPS: crate::arch::Capabilities = crate::arch::Capabilities::baseline(crate::arch::CostClass::HddOnly);
    const VERSION: u32 = 1;
    const HELP: &'static str = "baseline: everything on the HDD, SSD unused";
    const PARAMS: &'static [ParamSpec] = &[];
    const USES_COLLECTOR: bool = false;
    fn build(_: &mut Params, _: &Setup) -> Result<Self, ConfigError> {
        Ok(HddOnly)
    }
}

impl Architecture for HddOnly {
    #[inline]
    fn access(&mut self, _cx: &mut Ctx<'_>, req: &Request) -> Served {
        if req.op.is_data() { Served::by(Level::Slow) } else { Served::metadata() }
    }
    fn complete(&mut self, _cx: &mut Ctx<'_>, _work: &Work, _outcome: Outcome) {}
    fn placement(&self, _obj: ObjectId) -> Placement {
        Placement { tracked: false, on_slow: true, ..Placement::default() }
    }
    fn usage(&self) -> Usage {
        Usage::default()
    }
    fn check_invariants(&self) -> Result<(), String> {
        Ok(())
    }
    fn memory_bytes(&self) -> usize {
        0
    }
}
