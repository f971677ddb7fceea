//! The architecture wrapper every file-level architecture is: its kind (name, help, modes) around the shared core.

use super::*;

/// One file-level architecture: its name, help and mode(s).
pub trait FileArchKind {
    /// Registry token.
    const NAME: &'static str;
    /// Bumped when behaviour changes.
    const VERSION: u32;
    /// One line of help.
    const HELP: &'static str;
    /// Its own knobs.
    const PARAMS: &'static [ParamSpec] = &[];
    /// The shared knobs it takes (see [`FilePolicy::params`]).
    const SHARED_PARAMS: &'static [ParamSpec] = FILE_PARAMS;
    /// The collector used when none is named.
    const DEFAULT_COLLECTOR: &'static str = "inverse-bitmap";
    /// What front ends may assume of it.
    const CAPS: crate::arch::Capabilities;
    /// Its policy, when it is one policy (not one per volume).
    const POLICY: Option<&'static FilePolicy> = None;
    /// The policy per volume (index 0 = everything not in a listed volume).
    fn modes(p: &mut Params) -> Result<Vec<&'static FilePolicy>, ConfigError>;
}

/// A file-level architecture: the shared core run in the modes `K` names.
#[derive(Debug)]
pub struct FileArch<K> {
    core: FileCore,
    _kind: std::marker::PhantomData<K>,
}

impl<K> FileArch<K> {
    /// The shared core (inspection).
    pub fn core(&self) -> &FileCore {
        &self.core
    }
}

impl<K: FileArchKind> crate::arch::ArchBuild for FileArch<K> {
    const NAME: &'static str = K::NAME;
    const VERSION: u32 = K::VERSION;
    const HELP: &'static str = K::HELP;
    const PARAMS: &'static [ParamSpec] = K::PARAMS;
    const EXTRA_PARAMS: &'static [ParamSpec] = K::SHARED_PARAMS;
    const USES_COLLECTOR: bool = true;
    const DEFAULT_COLLECTOR: &'static str = K::DEFAULT_COLLECTOR;
    const CAPS: crate::arch::Capabilities = K::CAPS;
    const FILE_POLICY: Option<&'static FilePolicy> = K::POLICY;
    fn build(p: &mut Params, setup: &Setup) -> Result<Self, ConfigError> {
        let modes = K::modes(p)?;
        Ok(FileArch { core: FileCore::build(p, setup, modes)?, _kind: std::marker::PhantomData })
    }
}

impl<K: FileArchKind> crate::arch::Architecture for FileArch<K> {
    #[inline]
    fn access(&mut self, cx: &mut Ctx<'_>, req: &Request) -> Served {
        self.core.access(cx, req)
    }
    fn complete(&mut self, cx: &mut Ctx<'_>, work: &Work, outcome: Outcome) {
        self.core.complete(cx, work, outcome)
    }
    fn tick(&mut self, cx: &mut Ctx<'_>) {
        self.core.tick(cx)
    }
    fn next_tick(&self) -> Option<Nanos> {
        self.core.next_tick()
    }
    fn flush(&mut self, cx: &mut Ctx<'_>) {
        self.core.flush(cx)
    }
    fn adopt(&mut self, cx: &mut Ctx<'_>, obj: ObjectId, level: Level, size: u64, dirty: bool) {
        self.core.adopt(cx, obj, level, size, dirty)
    }
    fn placement(&self, obj: ObjectId) -> Placement {
        self.core.placement(obj)
    }
    fn usage(&self) -> Usage {
        self.core.usage()
    }
    fn check_invariants(&self) -> Result<(), String> {
        self.core.check_invariants()
    }
    fn memory_bytes(&self) -> usize {
        self.core.memory_bytes()
    }
    fn counters(&self) -> Vec<(&'static str, u64)> {
        self.core.counters()
    }
    fn heat_ranking(&self, objs: &[ObjectId]) -> Vec<(ObjectId, u64)> {
        self.core.heat_ranking(objs)
    }
    fn restore_heat(&mut self, cx: &mut Ctx<'_>, obj: ObjectId, heat: u64) {
        self.core.restore_heat(cx, obj, heat)
    }
    fn prefetch(&self, obj: ObjectId, deep: bool) {
        self.core.prefetch(obj, deep)
    }
}

/// Makes the architecture of one [`FilePolicy`] (a `pub const` in the same module).
macro_rules! file_policy_arch {
    ($kind:ident, $policy:ident) => {
        /// Marker for this architecture's policy.
        #[derive(Debug)]
        pub struct $kind;
        impl $crate::arch::file_common::FileArchKind for $kind {
            const NAME: &'static str = $policy.name;
            const VERSION: u32 = 1;
            const HELP: &'static str = $policy.help;
            const SHARED_PARAMS: &'static [$crate::params::ParamSpec] = $policy.params;
            const DEFAULT_COLLECTOR: &'static str = $policy.default_collector;
            const CAPS: $crate::arch::Capabilities = $policy.capabilities();
            const POLICY: Option<&'static $crate::arch::file_common::FilePolicy> = Some(&$policy);
            fn modes(
                _p: &mut $crate::params::Params,
            ) -> Result<Vec<&'static $crate::arch::file_common::FilePolicy>, $crate::params::ConfigError> {
                Ok(vec![&$policy])
            }
        }
    };
}
pub(crate) use file_policy_arch;

/// A stable bottom-up merge sort by `less`, which need not be a total order (the result is then
/// some order, never a panic). O(n log n) comparisons, one buffer of n.
pub(crate) fn merge_sort<T: Copy>(v: &mut [T], less: impl Fn(&T, &T) -> bool) {
    let n = v.len();
    let mut buf: Vec<T> = v.to_vec();
    let mut width = 1;
    while width < n {
        let mut start = 0;
        while start < n {
            let (mid, end) = ((start + width).min(n), (start + 2 * width).min(n));
            let (mut i, mut j) = (start, mid);
            for slot in &mut buf[start..end] {
                let take_right = j < end && (i >= mid || less(&v[j], &v[i]));
                *slot = if take_right { v[j] } else { v[i] };
                if take_right {
                    j += 1;
                } else {
                    i += 1;
                }
            }
            start = end;
        }
        v.copy_from_slice(&buf);
        width *= 2;
    }
}
