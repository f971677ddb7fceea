//! HyCache: new files are created on the SSD; when SSD usage passes `threshold` (default 90 %) the
//! least recently (collector=lru, default) or least frequently (collector=lfu) used files move to
//! the HDD until usage is below it; opening an HDD file moves it back. One copy only; no sieving
//! unless `sieve` is set.

use super::file_common::{FileArch, FilePolicy, Promote, Space, THRESHOLD, file_policy_arch};
use crate::Level;
use crate::params::ParamSpec;

const SIEVE_HYCACHE: ParamSpec =
    ParamSpec { name: "sieve", default: "0", help: "files larger than this never go to the SSD (0 = no sieving)" };

/// The policy: what this architecture does, as a value.
pub const POLICY: FilePolicy = FilePolicy {
    name: "hycache",
    help: "file DST (HyCache): create on SSD; above threshold evict LRU/LFU to HDD; open moves back",
    creates_on: Level::Fast,
    promote: Promote::OnOpen,
    space: Space::Threshold,
    keeps_namespace: true,
    // Its threshold eviction is not one a shared SSD could run per volume.
    per_volume: false,
    params: &[SIEVE_HYCACHE, THRESHOLD],
    default_collector: "lru",
    ..FilePolicy::DST
};

file_policy_arch!(HyCacheKind, POLICY);

/// HyCache.
pub type HyCache = FileArch<HyCacheKind>;
