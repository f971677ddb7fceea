//! Loris's On-demand Caching: Dynamic Hot-DST that copies instead of moving. Writes to a cached file
//! go to both copies (write-through-update); writes to uncached files go to the HDD. Cleaning just
//! drops copies.

use super::file_common::{FileArch, FilePolicy, file_policy_arch};

/// The policy: what this architecture does, as a value.
pub const POLICY: FilePolicy = FilePolicy {
    name: "on-demand-caching",
    help: "file caching (Loris): an HDD read copies an admitted file to the SSD; write-through-update",
    ..FilePolicy::CACHING
};

file_policy_arch!(OnDemandCachingKind, POLICY);

/// On-demand Caching.
pub type OnDemandCaching = FileArch<OnDemandCachingKind>;
