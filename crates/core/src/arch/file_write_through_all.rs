//! Write-through-all file caching (beyond Loris): writes go to both tiers; a read served by the HDD
//! copies an admitted file, and a write covering the whole file places it on the SSD as well.

use super::file_common::{FileArch, FilePolicy, file_policy_arch};

/// The policy: what this architecture does, as a value.
pub const POLICY: FilePolicy = FilePolicy {
    name: "file-write-through-all",
    help: "file caching: write-through to both copies; HDD reads and whole-file writes allocate",
    whole_file_writes_allocate: true,
    ..FilePolicy::CACHING
};

file_policy_arch!(WriteThroughAllKind, POLICY);

/// Write-through-all file caching.
pub type FileWriteThroughAll = FileArch<WriteThroughAllKind>;
