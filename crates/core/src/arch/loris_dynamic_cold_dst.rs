//! Loris's Dynamic Cold-DST: Plain Cold-DST plus on-demand promotion as in Dynamic Hot-DST.

use super::file_common::{FileArch, FilePolicy, Promote, file_policy_arch};
use crate::Level;

/// The policy: what this architecture does, as a value.
pub const POLICY: FilePolicy = FilePolicy {
    name: "dynamic-cold-dst",
    help: "file DST (Loris): allocate on SSD; demote on pressure; an HDD read migrates an admitted file back",
    creates_on: Level::Fast,
    promote: Promote::OnHddRead,
    ..FilePolicy::DST
};

file_policy_arch!(DynamicColdDstKind, POLICY);

/// Dynamic Cold-DST.
pub type DynamicColdDst = FileArch<DynamicColdDstKind>;
