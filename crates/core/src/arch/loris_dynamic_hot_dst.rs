//! Loris's Dynamic Hot-DST: files are allocated on the HDD and a read served by the HDD queues the
//! file for migration when the collector admits it (inverse bitmap: its counter beats the last file
//! evicted from the SSD). Shared rules (sieving, cleaner) in [`super::file_common`].

use super::file_common::{FileArch, FilePolicy, Promote, file_policy_arch};

/// The policy: what this architecture does, as a value.
pub const POLICY: FilePolicy = FilePolicy {
    name: "dynamic-hot-dst",
    help: "file DST (Loris): allocate on HDD; an HDD read migrates an admitted file to the SSD",
    promote: Promote::OnHddRead,
    ..FilePolicy::DST
};

file_policy_arch!(DynamicHotDstKind, POLICY);

/// Dynamic Hot-DST.
pub type DynamicHotDst = FileArch<DynamicHotDstKind>;
