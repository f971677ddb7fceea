//! Read-only file caching (beyond Loris): reads fill the cache on demand; a write goes to the HDD
//! and drops the cached copy, so the SSD never holds data the HDD lacks.

use super::file_common::{FileArch, FileMode, single_mode_file_arch};

single_mode_file_arch!(
    ReadOnlyCachingKind,
    FileMode::ReadOnlyCaching,
    "file caching: HDD reads copy admitted files; any write drops the copy and goes to the HDD"
);

/// Read-only file caching.
pub type FileReadOnlyCache = FileArch<ReadOnlyCachingKind>;
