//! Every call tierwise makes that changes a tier, or makes a change durable, can be observed
//! one at a time: creating, writing, truncating, renaming, linking, unlinking, making and
//! removing directories, setting attributes, syncing files and directories, and committing the
//! state store.
//!
//! This is the seam the crash-consistency enumeration uses (`crates/fs/tests/crash_states.rs`):
//! with an [`Observer`] installed, calls run serially and the observer sees each one right
//! after it returned, so it can record the trees exactly as a crash at that point (`kill -9`)
//! would leave them, and, from which calls were syncs, what a power cut could take back. No
//! observer is installed in a real mount: each call then costs one atomic load.

use std::cell::Cell;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

/// What a call did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Call {
    /// Created a regular file (or truncated one while opening it).
    Create,
    /// Wrote file data.
    Write,
    /// Changed a file's size.
    SetLen,
    /// Changed mode, owner, times or extended attributes.
    Attrs,
    /// Made a directory.
    Mkdir,
    /// Made a symlink.
    Symlink,
    /// Made a hard link.
    Link,
    /// Renamed a name.
    Rename,
    /// Removed a file's name.
    Unlink,
    /// Removed a directory.
    Rmdir,
    /// Synced a file's data and metadata.
    SyncFile,
    /// Synced a directory's entries.
    SyncDir,
    /// Synced a whole tier file system (`syncfs`).
    SyncFs,
    /// Committed the state store without syncing it.
    Commit,
    /// Committed the state store durably.
    DurableCommit,
}

impl Call {
    /// Whether the call returns only once what came before it on its file system is durable
    /// (the model the enumeration uses: a sync commits the file system's journal, as ext4's
    /// does for metadata).
    pub fn is_barrier(self) -> bool {
        matches!(self, Call::SyncFile | Call::SyncDir | Call::SyncFs | Call::DurableCommit)
    }
}

/// Sees each call right after it returned, while no other call runs.
pub trait Observer: Send + Sync {
    /// `call` was made on `on` (the directory it changed a name in, the file it wrote or
    /// synced, or the state store's file), and returned `ok`.
    fn after(&self, call: Call, on: &Path, ok: bool);
}

struct Installed {
    serial: Mutex<()>,
    observer: Box<dyn Observer>,
}

static OBSERVER: OnceLock<Installed> = OnceLock::new();

thread_local! {
    /// Inside an observed call on this thread (a call made by another one is not seen twice).
    static INSIDE: Cell<bool> = const { Cell::new(false) };
}

/// Installs `observer` for the rest of the process (tests; once). Returns `false` when one was
/// installed already.
pub fn observe(observer: Box<dyn Observer>) -> bool {
    OBSERVER.set(Installed { serial: Mutex::new(()), observer }).is_ok()
}

/// Runs `f` while no observed call runs (a test marking where its operations begin and end).
pub fn exclusive<T>(f: impl FnOnce() -> T) -> T {
    match OBSERVER.get() {
        Some(o) => {
            let _g = o.serial.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            f()
        }
        None => f(),
    }
}

/// Runs the call `f`, made on `on()`, observed when an observer is installed.
fn run<T, E>(call: Call, on: impl FnOnce() -> PathBuf, f: impl FnOnce() -> Result<T, E>) -> Result<T, E> {
    let Some(o) = OBSERVER.get() else { return f() };
    if INSIDE.get() {
        return f();
    }
    let _g = o.serial.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    INSIDE.set(true);
    let r = f();
    o.observer.after(call, &on(), r.is_ok());
    INSIDE.set(false);
    r
}

/// Runs the call `f` on the open file or directory `fd`.
pub(crate) fn on_fd<T, E>(call: Call, fd: &impl AsRawFd, f: impl FnOnce() -> Result<T, E>) -> Result<T, E> {
    let raw = fd.as_raw_fd();
    run(call, || std::fs::read_link(format!("/proc/self/fd/{raw}")).unwrap_or_default(), f)
}

/// Runs the call `f` on `path`.
pub(crate) fn on_path<T, E>(call: Call, path: &Path, f: impl FnOnce() -> Result<T, E>) -> Result<T, E> {
    run(call, || path.to_path_buf(), f)
}
