//! Loris's Interval-driven Caching: Interval Hot-DST that copies instead of moving, with
//! write-through-update writes.

use super::file_common::{FileArch, FilePolicy, INTERVAL, Promote, SIEVE, file_policy_arch};

/// The policy: what this architecture does, as a value.
pub const POLICY: FilePolicy = FilePolicy {
    name: "interval-caching",
    help: "file caching (Loris): every interval copy hottest-on-HDD files; write-through-update",
    promote: Promote::OnInterval,
    params: &[SIEVE, INTERVAL],
    ..FilePolicy::CACHING
};

file_policy_arch!(IntervalCachingKind, POLICY);

/// Interval Caching.
pub type IntervalCaching = FileArch<IntervalCachingKind>;
