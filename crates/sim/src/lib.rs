//! The tierwise simulator: trace readers, device models, the event loop and its metrics,
//! side-by-side comparison and miss-ratio curves.

pub mod trace;
pub mod device;
pub mod metrics;
pub mod objects;
pub mod sim;

pub use sim::{SimConfig, SimError, Timing, simulate};
pub mod mrc;
