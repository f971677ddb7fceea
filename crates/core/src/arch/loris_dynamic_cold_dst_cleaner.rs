//! Loris's Dynamic Cold-DST with background cleaning: after the first blocking write a timer
//! (`cleaner-period`) keeps free as much SSD space as foreground cleaning has evicted so far,
//! capped at `cleaner-cap` of the SSD (Loris's cleaner was deliberately conservative).

use super::file_common::{FileArch, FileMode, single_mode_file_arch};

single_mode_file_arch!(
    DynamicColdDstCleanerKind,
    FileMode::DynamicColdDstCleaner,
    "file DST (Loris): Dynamic Cold-DST + background cleaner freeing ahead of demand"
);

/// Dynamic Cold-DST with the background cleaner.
pub type DynamicColdDstCleaner = FileArch<DynamicColdDstCleanerKind>;
