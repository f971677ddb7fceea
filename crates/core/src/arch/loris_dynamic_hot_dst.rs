//! Loris's Dynamic Hot-DST: files are allocated on the HDD and a read served by the HDD queues the
//! file for migration when the collector admits it (inverse bitmap: its counter beats the last file
//! evicted from the SSD). Shared rules (sieving, cleaner) in [`super::file_common`].

use super::file_common::{FileArch, FileMode, single_mode_file_arch};

single_mode_file_arch!(
    DynamicHotDstKind,
    FileMode::DynamicHotDst,
    "file DST (Loris): allocate on HDD; an HDD read migrates an admitted file to the SSD"
);

/// Dynamic Hot-DST.
pub type DynamicHotDst = FileArch<DynamicHotDstKind>;
