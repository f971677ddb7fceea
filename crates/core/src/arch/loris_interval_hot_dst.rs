//! Loris's Interval-driven Hot-DST: files are allocated on the HDD; every `interval` (the paper ran
//! 5 s and 80 s) the hottest HDD files migrate while admitted and hotter than the coldest SSD file,
//! which is demoted to make room.

use super::file_common::{FileArch, FileMode, single_mode_file_arch};

single_mode_file_arch!(
    IntervalHotDstKind,
    FileMode::IntervalHotDst,
    "file DST (Loris): allocate on HDD; every interval migrate hottest-on-HDD while hotter than coldest-on-SSD"
);

/// Interval Hot-DST.
pub type IntervalHotDst = FileArch<IntervalHotDstKind>;
