//! The tierwise policy engine.
//!
//! One engine decides where data lives on a hybrid SSD/HDD system — caching (the SSD holds
//! copies) or tiering (each object lives on one device and moves) — and three front ends run
//! it: the trace-driven simulator, the FUSE file system and the NBD block device. This crate has
//! no I/O and never reads the OS clock: time comes from a [`Clock`].
//!
//! - [`Engine`] — the entry point: `access`, `drain_work`, `complete`, `tick`.
//! - [`collector`] — hot/cold ranking, one file per policy, listed by [`collector::COLLECTORS`].
//! - [`arch`] — architectures (baselines, caching; the seeds' designs build on these).
//! - [`params`] — `name:key=value` specs, validated once.

pub mod arch;
mod clock;
pub mod collector;
mod decision;
pub mod driver;
pub mod engine;
pub mod extent_map;
pub mod list;
pub mod object_table;
pub mod params;
pub mod temp_buffer;
mod types;

pub use arch::{
    ARCHITECTURES, AnyArch, ArchSpec, Architecture, Placement, Setup, Usage, arch_info, build_arch, extent_size_of,
    full_spec, same_policy,
};
pub use clock::{Clock, ManualClock};
pub use decision::{LOGICAL_ADDR, Outcome, Priority, Served, Work, WorkKind};
pub use engine::{Call, CompleteError, Engine, EngineStats};
pub use params::ConfigError;
pub use types::{Bytes, Level, Levels, Nanos, ObjectClass, ObjectId, ObjectKind, Op, Request, Slot, Tier, WorkId};

/// Builds an engine from an architecture spec (e.g. `cache:mode=write-back,collector=arc`).
pub fn engine_from_spec<C: Clock>(spec: &str, setup: &Setup, clock: C) -> Result<Engine<C>, ConfigError> {
    Ok(Engine::new(build_arch(spec, setup)?, clock))
}
