//! The seam under the move protocol: the handful of operations a move does on tier data
//! (create the temporary copy, write it, sync it, rename it into place, sync the directory,
//! remove the source). [`Direct`] does them on the tier directories; [`Faulty`] wraps it and
//! injects the failures a real device or a crash produces (ENOSPC, EIO, short writes, the
//! process dying between two steps), so tests can prove that no fault loses or corrupts a file.

use std::collections::HashMap;
use std::fmt;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use super::at::{Access, At};
use super::calls::{self, Call};

/// One step of the move protocol, in the order a move runs them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Step {
    /// Create the temporary file next to the destination.
    CreateTemp,
    /// Write a chunk of data into it.
    Write,
    /// Sync the temporary file (data and metadata).
    SyncFile,
    /// Rename the temporary file over the destination.
    Rename,
    /// Sync the destination's directory (the rename is durable).
    SyncDir,
    /// Remove the source (a move, not a copy).
    Unlink,
}

impl Step {
    /// Every step, in protocol order.
    pub const ALL: [Step; 6] =
        [Step::CreateTemp, Step::Write, Step::SyncFile, Step::Rename, Step::SyncDir, Step::Unlink];
}

/// What a move does to tier data. Every method has the real behaviour as its default; an
/// implementation overrides what it wants to observe or break.
pub trait Backend: Send + Sync + fmt::Debug {
    /// Creates `tmp` (which must not exist), open for writing.
    fn create_temp(&self, tmp: &At) -> io::Result<File> {
        tmp.open(Access::CreateNew)
    }
    /// Writes some of `buf` at `offset`; returns how many bytes it wrote (may be fewer).
    fn write_at(&self, out: &File, buf: &[u8], offset: u64) -> io::Result<usize> {
        calls::on_fd(Call::Write, out, || out.write_at(buf, offset))
    }
    /// Makes `file`'s data and metadata durable.
    fn sync_file(&self, file: &File) -> io::Result<()> {
        calls::on_fd(Call::SyncFile, file, || file.sync_all())
    }
    /// Renames `from` over `to` (atomic on one file system).
    fn rename(&self, from: &At, to: &At) -> io::Result<()> {
        from.rename_to(to)
    }
    /// Makes the names in `at`'s directory durable.
    fn sync_dir(&self, at: &At) -> io::Result<()> {
        at.sync_dir()
    }
    /// Removes `src` if it is still the file with device and inode `id` (ENOENT otherwise).
    fn unlink_source(&self, src: &At, id: (u64, u64)) -> io::Result<()> {
        src.unlink_if(id)
    }
}

/// The tier directories themselves.
#[derive(Clone, Copy, Debug, Default)]
pub struct Direct;

impl Backend for Direct {}

/// Writes all of `buf` at `offset` through `backend`, as many calls as short writes need.
pub(super) fn write_all_at(backend: &dyn Backend, out: &File, mut buf: &[u8], mut offset: u64) -> io::Result<()> {
    while !buf.is_empty() {
        match backend.write_at(out, buf, offset) {
            Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, "the tier accepted no bytes")),
            Ok(n) => {
                buf = buf.get(n..).unwrap_or_default();
                offset += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// A fault to inject.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The `nth` (from 1) time `step` runs, it fails with `errno` instead.
    Fail {
        /// Which step.
        step: Step,
        /// Which occurrence of it.
        nth: u32,
        /// The error (`libc::EIO`, `libc::ENOSPC`, ...).
        errno: i32,
    },
    /// The destination fills up: a write that would take the bytes written by all moves past
    /// this many fails with ENOSPC (after writing what fits, as a real file system does).
    NoSpaceAfter(u64),
    /// Every write writes at most this many bytes (a short write; the caller must go on).
    ShortWrites(usize),
    /// Every `period`-th run of `step` fails with `errno` (faults that keep coming while the
    /// system keeps working).
    Every {
        /// Which step.
        step: Step,
        /// One run in this many fails.
        period: u32,
        /// The error.
        errno: i32,
    },
    /// The process exits (status [`EXIT_CODE`], no clean-up) just before the `nth` (from 1)
    /// run of `step`: a daemon killed mid-move, for tests that run the mount in a child process.
    ExitBefore {
        /// Which step.
        step: Step,
        /// Which occurrence of it.
        nth: u32,
    },
    /// The process dies just before the `nth` (from 1) run of `step`: a panic carrying
    /// [`Crashed`], which skips every clean-up the way `kill -9` would. Tests catch it and
    /// then run recovery on what is left on the tiers.
    CrashBefore {
        /// Which step.
        step: Step,
        /// Which occurrence of it.
        nth: u32,
    },
}

/// The exit status of [`Fault::ExitBefore`].
pub const EXIT_CODE: i32 = 86;

/// The panic payload of [`Fault::CrashBefore`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Crashed(pub Step);

/// [`Direct`] with faults injected.
#[derive(Debug, Default)]
pub struct Faulty {
    faults: Mutex<Vec<Fault>>,
    runs: Mutex<HashMap<Step, u32>>,
    written: AtomicU64,
}

impl Faulty {
    /// A backend that injects `faults`.
    pub fn new(faults: impl IntoIterator<Item = Fault>) -> Faulty {
        Faulty { faults: Mutex::new(faults.into_iter().collect()), ..Faulty::default() }
    }

    /// Replaces the faults (the counts of steps run so far are kept).
    pub fn set_faults(&self, faults: impl IntoIterator<Item = Fault>) {
        *crate::shared::lock(&self.faults) = faults.into_iter().collect();
    }

    /// How many times `step` has run (or been attempted).
    pub fn runs(&self, step: Step) -> u32 {
        crate::shared::lock(&self.runs).get(&step).copied().unwrap_or(0)
    }

    /// Counts a run of `step` and applies the faults that name it.
    fn enter(&self, step: Step) -> io::Result<()> {
        let n = {
            let mut runs = crate::shared::lock(&self.runs);
            let n = runs.entry(step).or_insert(0);
            *n += 1;
            *n
        };
        let faults = crate::shared::lock(&self.faults).clone();
        for f in faults {
            match f {
                Fault::CrashBefore { step: s, nth } if s == step && nth == n => std::panic::panic_any(Crashed(step)),
                Fault::ExitBefore { step: s, nth } if s == step && nth == n => std::process::exit(EXIT_CODE),
                Fault::Fail { step: s, nth, errno } if s == step && nth == n => {
                    return Err(io::Error::from_raw_os_error(errno));
                }
                Fault::Every { step: s, period, errno } if s == step && n.is_multiple_of(period.max(1)) => {
                    return Err(io::Error::from_raw_os_error(errno));
                }
                _ => {}
            }
        }
        Ok(())
    }
}

impl Backend for Faulty {
    fn create_temp(&self, tmp: &At) -> io::Result<File> {
        self.enter(Step::CreateTemp)?;
        Direct.create_temp(tmp)
    }

    fn write_at(&self, out: &File, buf: &[u8], offset: u64) -> io::Result<usize> {
        self.enter(Step::Write)?;
        let mut len = buf.len();
        let faults = crate::shared::lock(&self.faults).clone();
        let mut full = false;
        for f in faults {
            match f {
                Fault::ShortWrites(max) => len = len.min(max.max(1)),
                Fault::NoSpaceAfter(limit) => {
                    let room = limit.saturating_sub(self.written.load(Ordering::Relaxed));
                    if room < len as u64 {
                        len = room as usize;
                        full = true;
                    }
                }
                _ => {}
            }
        }
        if len == 0 && full {
            return Err(io::Error::from_raw_os_error(nix::libc::ENOSPC));
        }
        let n = Direct.write_at(out, buf.get(..len).unwrap_or(buf), offset)?;
        self.written.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }

    fn sync_file(&self, file: &File) -> io::Result<()> {
        self.enter(Step::SyncFile)?;
        Direct.sync_file(file)
    }

    fn rename(&self, from: &At, to: &At) -> io::Result<()> {
        self.enter(Step::Rename)?;
        Direct.rename(from, to)
    }

    fn sync_dir(&self, at: &At) -> io::Result<()> {
        self.enter(Step::SyncDir)?;
        Direct.sync_dir(at)
    }

    fn unlink_source(&self, src: &At, id: (u64, u64)) -> io::Result<()> {
        self.enter(Step::Unlink)?;
        Direct.unlink_source(src, id)
    }
}
