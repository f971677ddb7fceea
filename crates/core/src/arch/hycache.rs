//! HyCache: new files are created on the SSD; when SSD usage passes `threshold` (default 90 %) the
//! least recently (collector=lru, default) or least frequently (collector=lfu) used files move to
//! the HDD until usage is below it; opening an HDD file moves it back. One copy only; no sieving
//! unless `sieve` is set.

use super::file_common::{FileArch, FileMode, single_mode_file_arch};

single_mode_file_arch!(
    HyCacheKind,
    FileMode::HyCache,
    "file DST (HyCache): create on SSD; above threshold evict LRU/LFU to HDD; open moves back"
);

/// HyCache.
pub type HyCache = FileArch<HyCacheKind>;
