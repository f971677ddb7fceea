//! The build that computes results, named in every result (`build` fields). The binaries set
//! it once at start ([`set`]) from `tierwise-build-info`; the library does not depend on that
//! crate itself, so that a change to any source file rebuilds only the binaries' stamp, not
//! the simulator.

use std::sync::OnceLock;

static BUILD: OnceLock<String> = OnceLock::new();

/// What results carry when no binary set the stamp (the library used from a test or another
/// program).
pub const UNSTAMPED: &str = "unstamped (library use)";

/// Sets the build stamp results carry; the first call wins.
pub fn set(stamp: String) {
    let _ = BUILD.set(stamp);
}

/// The build stamp results carry.
pub fn build() -> String {
    BUILD.get().map_or_else(|| UNSTAMPED.to_string(), Clone::clone)
}
