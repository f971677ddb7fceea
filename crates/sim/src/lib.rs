//! The tierwise simulator: trace readers, device models, the event loop and its metrics,
//! side-by-side comparison and miss-ratio curves.

pub mod alignment;
pub mod compare;
pub mod device;
pub mod filesim;
pub mod filetrace;
pub mod metrics;
pub mod mrc;
pub mod objects;
pub mod plot;
pub mod report;
pub mod reproduce;
pub mod sim;
pub mod stat;
pub mod synth;
mod timed;
pub mod trace;
pub mod verdict;

pub use sim::{SimConfig, SimError, Timing, simulate};
