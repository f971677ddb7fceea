//! Loris's On-demand Caching: Dynamic Hot-DST that copies instead of moving. Writes to a cached file
//! go to both copies (write-through-update); writes to uncached files go to the HDD. Cleaning just
//! drops copies.

use super::file_common::{FileArch, FileMode, single_mode_file_arch};

single_mode_file_arch!(
    OnDemandCachingKind,
    FileMode::OnDemandCaching,
    "file caching (Loris): an HDD read copies an admitted file to the SSD; write-through-update"
);

/// On-demand Caching.
pub type OnDemandCaching = FileArch<OnDemandCachingKind>;
