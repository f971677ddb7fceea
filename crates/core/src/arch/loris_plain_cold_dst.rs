//! Loris's Plain Cold-DST: files are allocated on the SSD; a write that does not fit demotes the
//! coldest files (the write waits); demoted files never come back.

use super::file_common::{FileArch, FilePolicy, file_policy_arch};
use crate::Level;

/// The policy: what this architecture does, as a value.
pub const POLICY: FilePolicy = FilePolicy {
    name: "plain-cold-dst",
    help: "file DST (Loris): allocate on SSD; demote the coldest on space pressure; never promote",
    creates_on: Level::Fast,
    ..FilePolicy::DST
};

file_policy_arch!(PlainColdDstKind, POLICY);

/// Plain Cold-DST.
pub type PlainColdDst = FileArch<PlainColdDstKind>;
