//! Write-through-all file caching (beyond Loris): writes go to both tiers; a read served by the HDD
//! copies an admitted file, and a write covering the whole file places it on the SSD as well.

use super::file_common::{FileArch, FileMode, single_mode_file_arch};

single_mode_file_arch!(
    WriteThroughAllKind,
    FileMode::WriteThroughAll,
    "file caching: write-through to both copies; HDD reads and whole-file writes allocate"
);

/// Write-through-all file caching.
pub type FileWriteThroughAll = FileArch<WriteThroughAllKind>;
