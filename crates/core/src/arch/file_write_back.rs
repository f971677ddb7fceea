//! Write-back file caching (beyond Loris; Loris lacked sub-file mapping for it): new files are
//! created on the SSD, writes to a cached file go to the SSD only and make it dirty, whole-file writes
//! allocate, and dirty files are written back above `dirty-high` down to `dirty-low`, on eviction
//! (before the copy is dropped) and on flush. A dirty file is never dropped: the dirty set is what a
//! real front end journals.

use super::file_common::{FileArch, FileMode, single_mode_file_arch};

single_mode_file_arch!(
    FileWriteBackKind,
    FileMode::WriteBack,
    "file caching: new files and writes land on the SSD (dirty) and are written back later"
);

/// Write-back file caching.
pub type FileWriteBack = FileArch<FileWriteBackKind>;
