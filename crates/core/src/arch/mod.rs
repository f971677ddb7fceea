//! Architectures: what happens on an access, on a completion and on a timer.
//!
//! # Contract
//! - [`Architecture::access`] MUST return quickly and MUST NOT allocate per call once its tables
//!   have grown; it may issue work through the [`Ctx`].
//! - Space on the fast tier is accounted as *committed*: an object counts from the moment a
//!   promote/copy is issued (space reserved) until its demote completes or its invalidate is
//!   issued. Committed bytes never exceed the fast capacity.
//! - A failed or cancelled work item MUST leave the object where it was before the work was
//!   issued (roll back), with nothing lost: dirty data stays dirty.
//! - [`Architecture::check_invariants`] verifies the architecture's own bookkeeping; the
//!   conformance tests call it after every step.
//!
//! # Registry
//! One file per architecture implementing [`Architecture`] + [`ArchBuild`], and one line in the
//! `architectures!` list below.

pub mod bcache;
mod bcache_writeback_rate;
pub mod cache;
pub mod caps;
pub mod dmcache_smq;
pub mod file_common;
pub mod file_read_only_cache;
pub mod file_write_back;
pub mod file_write_through_all;
pub mod flashcache;
pub mod greendm_caching;
mod greendm_common;
pub mod greendm_tiering;
pub mod hca;
pub mod hdd_only;
pub mod hycache;
pub mod l2arc;
pub mod linear;
pub mod loris_dynamic_cold_dst;
pub mod loris_dynamic_cold_dst_cleaner;
pub mod loris_dynamic_hot_dst;
pub mod loris_interval_caching;
pub mod loris_interval_hot_dst;
pub mod loris_on_demand_caching;
pub mod loris_plain_cold_dst;
pub mod opencas;
pub mod otf_ast;
mod seq_cutoff;
mod ssd_log;
pub mod ssd_only;
pub mod static_tiering;
pub mod type_aware;

pub use caps::{Addressing, Capabilities, Copies, CostClass, Granularity, ObjectSizes, RamLevel};
use serde::{Deserialize, Serialize};

use crate::collector::{COLLECTORS, collector_info};
use crate::engine::Ctx;
use crate::params::{ConfigError, ParamSpec, Params};
use crate::{Level, Nanos, ObjectId, Outcome, Request, Served, Work};

/// The device geometry an architecture is built for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Setup {
    /// Bytes of the fast tier the architecture may use.
    pub fast_capacity: u64,
    /// Bytes of the slow tier (0 = unbounded).
    pub slow_capacity: u64,
    /// Fixed object size for block/extent front ends; 0 for variable-size objects (files,
    /// libCacheSim-style requests).
    pub object_size: u64,
}

/// Where one object is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placement {
    /// The engine tracks the object.
    pub tracked: bool,
    /// A valid copy is on the fast tier.
    pub on_fast: bool,
    /// A valid copy is on the slow tier.
    pub on_slow: bool,
    /// The fast copy is newer than the slow one (write-back).
    pub dirty: bool,
    /// Background work on it is in flight.
    pub moving: bool,
    /// The architecture keeps the object in RAM (HCA's L1 or transient buffer, ZFS's ARC): the
    /// front end holds its bytes (see [`crate::Served::keep_in_ram`]).
    pub in_ram: bool,
}

/// Space and object counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Fast-tier capacity.
    pub fast_capacity: u64,
    /// Committed fast-tier bytes (see the module contract).
    pub fast_used: u64,
    /// Dirty bytes on the fast tier.
    pub dirty_bytes: u64,
    /// Objects tracked.
    pub objects: usize,
    /// Objects with a copy on the fast tier.
    pub fast_objects: usize,
    /// Work in flight (filled in by the engine).
    pub in_flight: usize,
}

/// An architecture. See the module docs for the contract.
pub trait Architecture {
    /// Handles one access and says how to serve it.
    fn access(&mut self, cx: &mut Ctx<'_>, req: &Request) -> Served;
    /// Handles the outcome of work this architecture issued.
    fn complete(&mut self, cx: &mut Ctx<'_>, work: &Work, outcome: Outcome);
    /// Runs due timers.
    fn tick(&mut self, _cx: &mut Ctx<'_>) {}
    /// When the next timer is due.
    fn next_tick(&self) -> Option<Nanos> {
        None
    }
    /// Issues write-backs for every dirty object.
    fn flush(&mut self, _cx: &mut Ctx<'_>) {}
    /// Learns about an object that already exists on `level`.
    fn adopt(&mut self, _cx: &mut Ctx<'_>, _obj: ObjectId, _level: Level, _size: u64, _dirty: bool) {}
    /// Where an object is.
    fn placement(&self, obj: ObjectId) -> Placement;
    /// Space and object counts.
    fn usage(&self) -> Usage;
    /// Verifies internal bookkeeping.
    fn check_invariants(&self) -> Result<(), String>;
    /// Heap bytes held.
    fn memory_bytes(&self) -> usize;
    /// Counters particular to this architecture (cancelled promotions, buffered writes, ...),
    /// for reports. Called rarely; may allocate.
    fn counters(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }
    /// A hint that `obj` will be accessed soon: `deep == false` a few accesses ahead (prefetch
    /// the index), `deep == true` closer (prefetch the entry and ranking state). Default: nothing.
    fn prefetch(&self, _obj: ObjectId, _deep: bool) {}
    /// Access statistics a front end keeps across restarts (see [`crate::Engine::heat_ranking`]):
    /// `objs` ordered coldest first by the collector's ranking, each with the count part of its
    /// ranking ([`crate::collector::Collector::heat`]). Untracked objects are left out. Default:
    /// nothing is kept (block-level architectures).
    fn heat_ranking(&self, _objs: &[ObjectId]) -> Vec<(ObjectId, u64)> {
        Vec::new()
    }
    /// Re-ranks an adopted object as just accessed, with the count it had before a restart.
    fn restore_heat(&mut self, _cx: &mut Ctx<'_>, _obj: ObjectId, _heat: u64) {}
}

/// How an architecture is built from its spec.
pub trait ArchBuild: Architecture + Sized {
    /// Registry token.
    const NAME: &'static str;
    /// Bumped when behaviour changes.
    const VERSION: u32;
    /// One line of help.
    const HELP: &'static str;
    /// Knobs with defaults.
    const PARAMS: &'static [ParamSpec];
    /// Knobs shared with other architectures (listed after its own).
    const EXTRA_PARAMS: &'static [ParamSpec] = &[];
    /// Whether the architecture takes a `collector=` knob.
    const USES_COLLECTOR: bool;
    /// The collector it uses when none is named (with `USES_COLLECTOR`).
    const DEFAULT_COLLECTOR: &'static str = "lru";
    /// What front ends may assume of it (declared, never inferred from its name).
    const CAPS: Capabilities;
    /// A file-level architecture's policy, when it is one (a per-volume architecture may
    /// name it for a volume).
    const FILE_POLICY: Option<&'static file_common::FilePolicy> = None;
    /// Builds from parameters (validated here, once).
    fn build(params: &mut Params, setup: &Setup) -> Result<Self, ConfigError>;
}

/// One registry row.
#[derive(Clone, Copy)]
pub struct ArchInfo {
    /// Token used in specs.
    pub name: &'static str,
    /// Behaviour version.
    pub version: u32,
    /// One line of help.
    pub help: &'static str,
    /// Knobs.
    pub params: &'static [ParamSpec],
    /// Knobs shared with other architectures.
    pub extra_params: &'static [ParamSpec],
    /// Whether a `collector=` knob applies.
    pub uses_collector: bool,
    /// The collector used when none is named.
    pub default_collector: &'static str,
    /// What front ends may assume of it.
    pub caps: Capabilities,
    /// Its file-level policy, when it is one.
    pub file_policy: Option<&'static file_common::FilePolicy>,
    /// Constructor.
    pub create: fn(&mut Params, &Setup) -> Result<AnyArch, ConfigError>,
}

macro_rules! architectures {
    ($($variant:ident => $module:ident :: $ty:ident),+ $(,)?) => {
        /// Every registered architecture, statically dispatched.
        #[derive(Debug)]
        pub enum AnyArch {
            $(
                #[doc = concat!("See [`", stringify!($module), "::", stringify!($ty), "`].")]
                $variant($module::$ty)
            ),+
        }

        /// The registry: one row per architecture.
        pub const ARCHITECTURES: &[ArchInfo] = &[
            $(ArchInfo {
                name: <$module::$ty as ArchBuild>::NAME,
                version: <$module::$ty as ArchBuild>::VERSION,
                help: <$module::$ty as ArchBuild>::HELP,
                params: <$module::$ty as ArchBuild>::PARAMS,
                extra_params: <$module::$ty as ArchBuild>::EXTRA_PARAMS,
                uses_collector: <$module::$ty as ArchBuild>::USES_COLLECTOR,
                default_collector: <$module::$ty as ArchBuild>::DEFAULT_COLLECTOR,
                caps: <$module::$ty as ArchBuild>::CAPS,
                file_policy: <$module::$ty as ArchBuild>::FILE_POLICY,
                create: |p, s| {
                    p.declare(<$module::$ty as ArchBuild>::PARAMS);
                    p.declare(<$module::$ty as ArchBuild>::EXTRA_PARAMS);
                    Ok(AnyArch::$variant(<$module::$ty as ArchBuild>::build(p, s)?))
                },
            }),+
        ];

        macro_rules! dispatch {
            ($self:ident, $a:ident => $e:expr) => {
                match $self { $(AnyArch::$variant($a) => $e),+ }
            };
        }
    };
}

architectures! {
    SsdOnly => ssd_only::SsdOnly,
    HddOnly => hdd_only::HddOnly,
    Linear => linear::Linear,
    Cache => cache::Cache,
    GreenDmTiering => greendm_tiering::GreenDmTiering,
    GreenDmCaching => greendm_caching::GreenDmCaching,
    OtfAst => otf_ast::OtfAst,
    StaticTiering => static_tiering::StaticTiering,
    Flashcache => flashcache::Flashcache,
    Hca => hca::Hca,
    ZfsL2Arc => l2arc::L2Arc,
    Bcache => bcache::Bcache,
    DmCacheSmq => dmcache_smq::DmCacheSmq,
    OpenCas => opencas::OpenCas,
    DynamicHotDst => loris_dynamic_hot_dst::DynamicHotDst,
    IntervalHotDst => loris_interval_hot_dst::IntervalHotDst,
    PlainColdDst => loris_plain_cold_dst::PlainColdDst,
    DynamicColdDst => loris_dynamic_cold_dst::DynamicColdDst,
    DynamicColdDstCleaner => loris_dynamic_cold_dst_cleaner::DynamicColdDstCleaner,
    OnDemandCaching => loris_on_demand_caching::OnDemandCaching,
    IntervalCaching => loris_interval_caching::IntervalCaching,
    FileReadOnlyCache => file_read_only_cache::FileReadOnlyCache,
    FileWriteThroughAll => file_write_through_all::FileWriteThroughAll,
    FileWriteBack => file_write_back::FileWriteBack,
    TypeAware => type_aware::TypeAware,
    HyCache => hycache::HyCache,
}

impl Architecture for AnyArch {
    #[inline]
    fn access(&mut self, cx: &mut Ctx<'_>, req: &Request) -> Served {
        dispatch!(self, a => a.access(cx, req))
    }
    fn complete(&mut self, cx: &mut Ctx<'_>, work: &Work, outcome: Outcome) {
        dispatch!(self, a => a.complete(cx, work, outcome))
    }
    fn tick(&mut self, cx: &mut Ctx<'_>) {
        dispatch!(self, a => a.tick(cx))
    }
    fn next_tick(&self) -> Option<Nanos> {
        dispatch!(self, a => a.next_tick())
    }
    fn flush(&mut self, cx: &mut Ctx<'_>) {
        dispatch!(self, a => a.flush(cx))
    }
    fn adopt(&mut self, cx: &mut Ctx<'_>, obj: ObjectId, level: Level, size: u64, dirty: bool) {
        dispatch!(self, a => a.adopt(cx, obj, level, size, dirty))
    }
    fn placement(&self, obj: ObjectId) -> Placement {
        dispatch!(self, a => a.placement(obj))
    }
    fn usage(&self) -> Usage {
        dispatch!(self, a => a.usage())
    }
    fn check_invariants(&self) -> Result<(), String> {
        dispatch!(self, a => a.check_invariants())
    }
    fn memory_bytes(&self) -> usize {
        dispatch!(self, a => a.memory_bytes())
    }
    #[inline]
    fn prefetch(&self, obj: ObjectId, deep: bool) {
        dispatch!(self, a => a.prefetch(obj, deep))
    }
    fn counters(&self) -> Vec<(&'static str, u64)> {
        dispatch!(self, a => a.counters())
    }
    fn heat_ranking(&self, objs: &[ObjectId]) -> Vec<(ObjectId, u64)> {
        dispatch!(self, a => a.heat_ranking(objs))
    }
    fn restore_heat(&mut self, cx: &mut Ctx<'_>, obj: ObjectId, heat: u64) {
        dispatch!(self, a => a.restore_heat(cx, obj, heat))
    }
}

/// Looks an architecture up by name.
pub fn arch_info(name: &str) -> Result<&'static ArchInfo, ConfigError> {
    ARCHITECTURES.iter().find(|a| a.name.eq_ignore_ascii_case(name)).ok_or_else(|| ConfigError::UnknownName {
        kind: "architecture",
        name: name.to_string(),
        allowed: ARCHITECTURES.iter().map(|a| a.name.to_string()).collect(),
    })
}

/// The extent size a spec asks for through its `es` (GreenDM) or `sub-lun` (OTF-AST, static
/// tiering) knob, or the default that knob documents as a size; front ends split requests at
/// this size.
pub fn extent_size_of(spec: &str) -> Option<u64> {
    ArchSpec::parse(spec).ok()?.extent_size()
}

/// An architecture spec parsed once: the registry entry it names and its knobs (their values
/// are checked when it is built for a setup).
#[derive(Clone)]
pub struct ArchSpec {
    /// The registry entry.
    pub info: &'static ArchInfo,
    /// The spec as given.
    pub text: String,
    params: Params,
}

impl std::fmt::Debug for ArchSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArchSpec").field("name", &self.info.name).field("text", &self.text).finish()
    }
}

impl ArchSpec {
    /// Parses `spec` (`name[:knob=value,...]`), naming the architectures allowed when the name is
    /// unknown.
    pub fn parse(spec: &str) -> Result<ArchSpec, ConfigError> {
        let (name, params) = Params::parse(spec)?;
        Ok(ArchSpec { info: arch_info(&name)?, text: spec.to_string(), params })
    }

    /// The extent size its extent knob asks for (given, else the knob's default), when it
    /// places extents of a size it chooses ([`ObjectSizes::Extent`]).
    pub fn extent_size(&self) -> Option<u64> {
        let ObjectSizes::Extent(knob) = self.info.caps.objects else { return None };
        if let Some(v) = self.params.peek(knob) {
            return crate::params::parse_size(v).ok();
        }
        self.info
            .params
            .iter()
            .chain(self.info.extra_params)
            .find(|p| p.name == knob)
            .and_then(|p| crate::params::parse_size(p.default).ok())
    }

    /// The object size to build it for when requests are split into `block`-byte blocks
    /// (0 = variable-size objects): its own extent size, if it has one and blocks are fixed.
    pub fn object_size_for(&self, block: u64) -> u64 {
        if block == 0 { 0 } else { self.extent_size().unwrap_or(block) }
    }

    /// Builds it for `setup`, the object size adjusted by [`ArchSpec::object_size_for`].
    pub fn build(&self, setup: &Setup) -> Result<AnyArch, ConfigError> {
        let setup = Setup { object_size: self.object_size_for(setup.object_size), ..*setup };
        build_arch(&self.text, &setup)
    }
}

/// `spec` with every knob its architecture (and its collector) documents a value for, given or
/// default, in one order (knobs sorted by name): what a device or a mount records with its data,
/// so that a restart keeps the policy it ran even if a later version changes a default, and so
/// that two spellings of one policy compare equal ([`same_policy`]).
pub fn full_spec(spec: &str) -> Result<String, ConfigError> {
    let (name, params) = Params::parse(spec)?;
    let info = arch_info(&name)?;
    let mut knobs: std::collections::BTreeMap<String, String> =
        params.pairs().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let mut documented: Vec<&ParamSpec> = info.params.iter().chain(info.extra_params).collect();
    if info.uses_collector {
        // An architecture may document its own collector default (HCA: lfu).
        let own = documented.iter().find(|p| p.name == "collector" && !p.default.starts_with('(')).map(|p| p.default);
        let collector =
            knobs.get("collector").cloned().unwrap_or_else(|| own.unwrap_or(info.default_collector).to_string());
        if let Ok(c) = collector_info(&collector) {
            documented.extend(c.params);
        }
        knobs.insert("collector".into(), collector);
    }
    for p in documented {
        if !p.default.is_empty() && !p.default.starts_with('(') {
            knobs.entry(p.name.to_string()).or_insert_with(|| p.default.to_string());
        }
    }
    let rest: Vec<String> = knobs.into_iter().map(|(k, v)| format!("{k}={v}")).collect();
    Ok(if rest.is_empty() { info.name.to_string() } else { format!("{}:{}", info.name, rest.join(",")) })
}

/// Whether two specs name one policy: the same architecture with the same knobs once every
/// default is filled in (see [`full_spec`]).
pub fn same_policy(a: &str, b: &str) -> bool {
    matches!((full_spec(a), full_spec(b)), (Ok(x), Ok(y)) if x == y)
}

/// Builds an architecture from a spec such as `cache:mode=write-back,collector=lfu`. Every knob
/// is validated here; an unknown knob is an error that lists the valid ones.
pub fn build_arch(spec: &str, setup: &Setup) -> Result<AnyArch, ConfigError> {
    let (name, mut params) = Params::parse(spec)?;
    let info = arch_info(&name)?;
    params.set_owner(info.name);
    let arch = (info.create)(&mut params, setup)?;
    let mut allowed: Vec<&[ParamSpec]> = vec![info.params, info.extra_params];
    if info.uses_collector {
        allowed.push(COLLECTOR_KNOB);
        if let Some(c) = params.peek("collector").and_then(|c| collector_info(c).ok()) {
            allowed.push(c.params);
        }
    }
    params.finish(&allowed)?;
    Ok(arch)
}

/// The `collector=` knob shared by architectures that rank objects.
pub const COLLECTOR_KNOB: &[ParamSpec] = &[ParamSpec {
    name: "collector",
    default: "(per architecture)",
    help: "hot/cold ranking: any collector of `tierwise list collectors` (plus its knobs)",
}];

/// Validates a collector name early, with the list of valid ones.
pub fn check_collector_name(name: &str) -> Result<(), ConfigError> {
    collector_info(name).map(|_| ())
}

/// Names of all collectors (for help output).
pub fn collector_names() -> Vec<&'static str> {
    COLLECTORS.iter().map(|c| c.name).collect()
}

#[cfg(test)]
mod file_tests;
#[cfg(test)]
mod registry_tests;
#[cfg(test)]
mod tests;
