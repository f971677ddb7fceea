//! Baseline "Linear" (GreenDM's Mylinear): the SSD and the HDD concatenated into one address
//! space, SSD first, with no movement. Block `b` lives on the SSD when `b * size` is below the
//! SSD capacity, else on the HDD at `b * size - capacity`.

use super::{ArchBuild, Architecture, Placement, Setup, Usage};
use crate::engine::Ctx;
use crate::params::{ConfigError, ParamSpec, Params};
use crate::{Level, ObjectId, Outcome, Request, Served, Work};

/// The linear-concatenation baseline.
#[derive(Clone, Debug)]
pub struct Linear {
    capacity: u64,
    object_size: u64,
}

impl ArchBuild for Linear {
    const NAME: &'static str = "linear";
    const CAPS: crate::arch::Capabilities = crate::arch::Capabilities {
        addressing: crate::arch::Addressing::Concatenated,
        objects: crate::arch::ObjectSizes::Fixed,
        ..crate::arch::Capabilities::BLOCK_TIERING
    };
    const VERSION: u32 = 1;
    const HELP: &'static str = "baseline: SSD and HDD concatenated (SSD first), no movement; block mode only";
    const PARAMS: &'static [ParamSpec] = &[];
    const USES_COLLECTOR: bool = false;
    fn build(p: &mut Params, setup: &Setup) -> Result<Self, ConfigError> {
        if setup.object_size == 0 {
            return Err(p.inconsistent(
                "linear maps addresses and needs fixed-size objects (block mode); it cannot run on \
                 variable-size objects (object/libCacheSim mode or files)",
            ));
        }
        Ok(Linear { capacity: setup.fast_capacity, object_size: setup.object_size })
    }
}

impl Linear {
    /// The object's logical address (its volume in the top bits). The SSD is the start of
    /// volume 0; other volumes of a multi-volume trace are wholly on the HDD.
    fn addr(&self, obj: ObjectId) -> u64 {
        obj.logical_addr(self.object_size)
    }
}

impl Architecture for Linear {
    #[inline]
    fn access(&mut self, _cx: &mut Ctx<'_>, req: &Request) -> Served {
        if !req.op.is_data() {
            return Served::metadata();
        }
        let a = self.addr(req.obj);
        if a < self.capacity {
            Served::by(Level::Fast).at_fast(a)
        } else if req.obj.volume() == 0 {
            Served::by(Level::Slow).at_slow(a - self.capacity)
        } else {
            Served::by(Level::Slow).at_slow(a)
        }
    }
    fn complete(&mut self, _cx: &mut Ctx<'_>, _work: &Work, _outcome: Outcome) {}
    fn placement(&self, obj: ObjectId) -> Placement {
        let fast = self.addr(obj) < self.capacity;
        Placement { tracked: false, on_fast: fast, on_slow: !fast, ..Placement::default() }
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
