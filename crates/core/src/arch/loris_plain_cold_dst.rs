//! Loris's Plain Cold-DST: files are allocated on the SSD; a write that does not fit demotes the
//! coldest files (the write waits); demoted files never come back.

use super::file_common::{FileArch, FileMode, single_mode_file_arch};

single_mode_file_arch!(
    PlainColdDstKind,
    FileMode::PlainColdDst,
    "file DST (Loris): allocate on SSD; demote the coldest on space pressure; never promote"
);

/// Plain Cold-DST.
pub type PlainColdDst = FileArch<PlainColdDstKind>;
