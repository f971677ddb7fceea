//! Loris's Interval-driven Caching: Interval Hot-DST that copies instead of moving, with
//! write-through-update writes.

use super::file_common::{FileArch, FileMode, single_mode_file_arch};

single_mode_file_arch!(
    IntervalCachingKind,
    FileMode::IntervalCaching,
    "file caching (Loris): every interval copy hottest-on-HDD files; write-through-update"
);

/// Interval Caching.
pub type IntervalCaching = FileArch<IntervalCachingKind>;
