//! The tierwise simulator: trace readers, device models, the event loop and its metrics,
//! side-by-side comparison and miss-ratio curves.

pub mod trace;
