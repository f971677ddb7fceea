//! Mounting the hybrid file system in-process for the integration tests.

#![allow(dead_code, reason = "each test file uses a part")]
#![expect(clippy::unwrap_used, reason = "a failing setup should stop the test loudly")]

use std::path::{Path, PathBuf};

pub mod differential;

use tierwise_fs::{HybridFs, MountConfig, Tiers, mount_options};

/// Whether `/dev/fuse` can be opened; when not, the test fails (see `tierwise_testkit`).
pub fn fuse_available() -> bool {
    tierwise_testkit::fuse()
}

/// A live mount, unmounted on drop.
pub struct Mounted {
    session: Option<fuser::BackgroundSession>,
    /// The mountpoint.
    pub mnt: PathBuf,
}

impl Mounted {
    /// A mount run by `session` on `mnt`.
    pub fn from_session(session: fuser::BackgroundSession, mnt: &Path) -> Mounted {
        Mounted { session: Some(session), mnt: mnt.to_path_buf() }
    }

    /// Unmounts (waits for the file system to finish). One that does not finish within 30 s
    /// (a deadlocked file system) is torn down instead: its FUSE connection aborted, the
    /// mount detached; its stuck threads are left behind and the test fails.
    pub fn unmount(&mut self) {
        if let Some(s) = self.session.take() {
            let mnt = self.mnt.clone();
            let clean = tierwise_testkit::teardown::within(std::time::Duration::from_secs(30), move || {
                let _ = tierwise_fs::session::unmount(&mnt);
                let _ = s.join();
            });
            if clean.is_none() {
                tierwise_testkit::teardown::release(&tierwise_testkit::teardown::Targets::mount(&self.mnt, None));
                if !std::thread::panicking() {
                    panic!(
                        "{}: the file system did not finish within 30 s of its unmount; torn down",
                        self.mnt.display()
                    );
                }
            }
        }
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        self.unmount();
    }
}

/// Mounts `ssd` + `hdd` on `mnt` with `cfg`, four threads.
pub fn mount_with(ssd: &Path, hdd: &Path, mnt: &Path, cfg: &MountConfig) -> Mounted {
    mount_with_backend(ssd, hdd, mnt, cfg, std::sync::Arc::new(tierwise_fs::tiers::Direct))
}

/// [`mount_with`], the moves done through `backend` (fault injection).
pub fn mount_with_backend(
    ssd: &Path,
    hdd: &Path,
    mnt: &Path,
    cfg: &MountConfig,
    backend: std::sync::Arc<dyn tierwise_fs::tiers::Backend>,
) -> Mounted {
    let tiers = Tiers::open(ssd, hdd, mnt).unwrap().with_backend(backend);
    let cfg = MountConfig { mountpoint: Some(mnt.to_path_buf()), ..cfg.clone() };
    let fs = HybridFs::new(tiers, &cfg).unwrap();
    let mut fcfg = fuser::Config::default();
    fcfg.mount_options = mount_options("tierwise");
    fcfg.n_threads = Some(4);
    let session = tierwise_fs::session::mount_session(fs, mnt, &fcfg).unwrap().spawn().unwrap();
    Mounted { session: Some(session), mnt: mnt.to_path_buf() }
}

/// [`mount_with`], recording every access the mount tells its engine.
pub fn mount_recording(ssd: &Path, hdd: &Path, mnt: &Path, cfg: &MountConfig) -> (Mounted, tierwise_fs::CallRecorder) {
    let tiers = Tiers::open(ssd, hdd, mnt).unwrap();
    let cfg = MountConfig { mountpoint: Some(mnt.to_path_buf()), ..cfg.clone() };
    let fs = HybridFs::new(tiers, &cfg).unwrap();
    let recorder = fs.record_calls();
    let mut fcfg = fuser::Config::default();
    fcfg.mount_options = mount_options("tierwise");
    fcfg.n_threads = Some(4);
    let session = tierwise_fs::session::mount_session(fs, mnt, &fcfg).unwrap().spawn().unwrap();
    (Mounted { session: Some(session), mnt: mnt.to_path_buf() }, recorder)
}

/// Mounts with a policy and quota, the debug event log on.
pub fn mount(ssd: &Path, hdd: &Path, mnt: &Path, policy: &str, quota: u64) -> Mounted {
    mount_with(ssd, hdd, mnt, &MountConfig { debug_events: true, ..MountConfig::new(policy, quota) })
}

/// The mount's statistics, through the control attribute.
pub fn stats(mnt: &Path) -> tierwise_fs::Snapshot {
    let raw = xattr::get(mnt, tierwise_fs::control::XATTR_STATS).unwrap().unwrap();
    serde_json::from_slice(&raw).unwrap()
}

/// Polls `cond` every 10 ms for up to 20 s.
pub fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !cond() {
        assert!(std::time::Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}
