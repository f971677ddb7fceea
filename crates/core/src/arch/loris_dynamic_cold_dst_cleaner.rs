//! Loris's Dynamic Cold-DST with background cleaning: after the first blocking write a timer
//! (`cleaner-period`) keeps free as much SSD space as foreground cleaning has evicted so far,
//! capped at `cleaner-cap` of the SSD (Loris's cleaner was deliberately conservative).

use super::file_common::{CLEANER_CAP, CLEANER_PERIOD, FileArch, FilePolicy, Promote, SIEVE, Space, file_policy_arch};
use crate::Level;

/// The policy: what this architecture does, as a value.
pub const POLICY: FilePolicy = FilePolicy {
    name: "dynamic-cold-dst-cleaner",
    help: "file DST (Loris): Dynamic Cold-DST + background cleaner freeing ahead of demand",
    creates_on: Level::Fast,
    promote: Promote::OnHddRead,
    space: Space::BackgroundCleaner,
    params: &[SIEVE, CLEANER_PERIOD, CLEANER_CAP],
    ..FilePolicy::DST
};

file_policy_arch!(DynamicColdDstCleanerKind, POLICY);

/// Dynamic Cold-DST with the background cleaner.
pub type DynamicColdDstCleaner = FileArch<DynamicColdDstCleanerKind>;
