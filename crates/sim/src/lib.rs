//! The tierwise simulator: trace readers, device models, the event loop and its metrics,
//! side-by-side comparison and miss-ratio curves.

pub mod alignment;
pub mod analysis;
pub mod compare;
/// The device models (their own crate, which the mount's emulation uses too).
pub use tierwise_devices as device;
pub mod filesim;
pub mod filetrace;
pub mod html;
pub mod jobs;
pub mod layout;
pub mod metrics;
pub mod mrc;
pub mod mrc_belady;
pub mod mrc_sampled;
pub mod objects;
pub mod plot;
pub mod report;
pub mod reproduce;
pub mod sim;
mod slab;
pub mod stamp;
pub mod stat;
pub mod synth;
mod timed;
pub mod trace;
pub mod verdict;

pub use sim::{SimConfig, SimError, Timing, simulate};
pub use timed::MetadataCommits;
