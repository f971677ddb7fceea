//! Loris's Dynamic Cold-DST: Plain Cold-DST plus on-demand promotion as in Dynamic Hot-DST.

use super::file_common::{FileArch, FileMode, single_mode_file_arch};

single_mode_file_arch!(
    DynamicColdDstKind,
    FileMode::DynamicColdDst,
    "file DST (Loris): allocate on SSD; demote on pressure; an HDD read migrates an admitted file back"
);

/// Dynamic Cold-DST.
pub type DynamicColdDst = FileArch<DynamicColdDstKind>;
