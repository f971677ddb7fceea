//! Write-back file caching (beyond Loris; Loris lacked sub-file mapping for it): new files are
//! created on the SSD, writes to a cached file go to the SSD only and make it dirty, whole-file writes
//! allocate, and dirty files are written back above `dirty-high` down to `dirty-low`, on eviction
//! (before the copy is dropped), after `writeback-idle` without an access down to `dirty-low`,
//! and on flush. A dirty file is never dropped: the dirty set is what a
//! real front end journals.

use super::file_common::{
    DIRTY_HIGH, DIRTY_LOW, FileArch, FilePolicy, MAX_WRITEBACKS, SIEVE, WRITEBACK_IDLE, Writes, file_policy_arch,
};
use crate::Level;

/// The policy: what this architecture does, as a value.
pub const POLICY: FilePolicy = FilePolicy {
    name: "file-write-back",
    help: "file caching: new files and writes land on the SSD (dirty) and are written back later",
    creates_on: Level::Fast,
    writes: Writes::Dirty,
    whole_file_writes_allocate: true,
    params: &[SIEVE, DIRTY_HIGH, DIRTY_LOW, WRITEBACK_IDLE, MAX_WRITEBACKS],
    ..FilePolicy::CACHING
};

file_policy_arch!(FileWriteBackKind, POLICY);

/// Write-back file caching.
pub type FileWriteBack = FileArch<FileWriteBackKind>;
