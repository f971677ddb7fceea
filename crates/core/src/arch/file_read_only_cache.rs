//! Read-only file caching (beyond Loris): reads fill the cache on demand; a write goes to the HDD
//! and drops the cached copy, so the SSD never holds data the HDD lacks.

use super::file_common::{FileArch, FilePolicy, Writes, file_policy_arch};

/// The policy: what this architecture does, as a value.
pub const POLICY: FilePolicy = FilePolicy {
    name: "file-read-only-cache",
    help: "file caching: HDD reads copy admitted files; any write drops the copy and goes to the HDD",
    writes: Writes::DropCopy,
    ..FilePolicy::CACHING
};

file_policy_arch!(ReadOnlyCachingKind, POLICY);

/// Read-only file caching.
pub type FileReadOnlyCache = FileArch<ReadOnlyCachingKind>;
