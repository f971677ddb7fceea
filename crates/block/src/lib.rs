//! The hybrid block device behind `tierwise serve`: an SSD image and an HDD image run by the
//! tierwise engine, with crash-safe metadata. A front end (the nbdkit plugin) only translates
//! its protocol into [`HybridDevice`] calls.
//!
//! - [`recovery::create`] formats a pair of images (or adopts an HDD image in place) and
//!   [`recovery::open`] opens one, recovering the newest checkpoint.
//! - [`HybridDevice`] serves reads, writes, FUA, flushes, trims and zeroes; background movers
//!   execute the engine's work ([`mover`]).
//! - [`backend`] is the seam under it all: real image files, or memory images that can
//!   simulate a power cut.
//! - [`format`] is the on-disk format.

pub mod backend;
mod device;
pub mod direct;
pub mod emulate;
pub mod error;
mod failover;
mod fills;
pub mod format;
mod hdd_log;
pub mod health;
mod io;
mod mover;
mod ram;
pub mod recovery;
mod slot_map;
mod slots;
mod status;
mod subluns;
#[doc(hidden)]
pub mod trace;
mod write_runs;

pub use backend::{Backend, Dev, FileBackend, MemBackend};
pub use device::{DeviceStats, HybridDevice, ServeOptions, SysClock};
pub use emulate::Emulated;
pub use error::{DeviceError, FormatError};
pub use health::{HealthReport, IoErrors};
pub use recovery::{CreateOptions, change_policy, choose_policy, create, open, servable, servable_names};
pub use status::Extent;
/// The emulated HDD's request queue (`Emulated::new`).
pub use tierwise_devices::QueueConfig as HddQueue;

/// The architecture `tierwise serve` runs when none is named: a write-through cache (losing
/// the SSD loses no data), as bcache and dm-cache default to.
pub const DEFAULT_SERVE_POLICY: &str = "cache:mode=write-through";
