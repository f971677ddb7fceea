//! Loris's Interval-driven Hot-DST: files are allocated on the HDD; every `interval` (the paper ran
//! 5 s and 80 s) the hottest HDD files migrate while admitted and hotter than the coldest SSD file,
//! which is demoted to make room.

use super::file_common::{FileArch, FilePolicy, INTERVAL, Promote, SIEVE, file_policy_arch};

/// The policy: what this architecture does, as a value.
pub const POLICY: FilePolicy = FilePolicy {
    name: "interval-hot-dst",
    help: "file DST (Loris): allocate on HDD; every interval migrate hottest-on-HDD while hotter than coldest-on-SSD",
    promote: Promote::OnInterval,
    params: &[SIEVE, INTERVAL],
    ..FilePolicy::DST
};

file_policy_arch!(IntervalHotDstKind, POLICY);

/// Interval Hot-DST.
pub type IntervalHotDst = FileArch<IntervalHotDstKind>;
