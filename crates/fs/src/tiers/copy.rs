//! The move protocol's copy: source opened, destination directory resolved, then copied to a
//! temporary name, synced and renamed into place; for a move, the source removed last, only if
//! it is still the file that was copied.

use std::ffi::OsString;
use std::fs::{self, File};
use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::sync::{Arc, OnceLock};

use tierwise_core::Tier;

use super::at::{Access, At};
use super::backend::{self, Backend};
use super::calls::{self, Call};
use super::{COPY_CHUNK, RESERVED_PREFIX, Tiers, atime, mtime};

/// A copy of one file from one tier to the other, resolved and ready to run. The directories
/// are open, so renames of them (or of their parents) while it runs do not matter.
#[derive(Debug)]
pub struct CopyPlan {
    src: At,
    input: File,
    /// Device and inode of the source: what [`CopyPlan::remove_source`] may remove.
    src_id: (u64, u64),
    dst: At,
    tmp: At,
    /// What does the steps (the tiers themselves, or a fault-injecting stand-in).
    backend: Arc<dyn Backend>,
    /// Device and inode of the copy this plan made: what [`CopyPlan::abandon`] may remove.
    made: OnceLock<(u64, u64)>,
    /// Whether the rename into place replaced a file at the destination (a cached file's other
    /// copy): then the new copy is that copy now, and [`CopyPlan::abandon`] must keep it.
    replaced: OnceLock<bool>,
}

impl Tiers {
    /// Resolves a copy of `rel` from tier `from` to the other: opens the source file and the
    /// destination's directory, creating missing parent directories there as copies of the
    /// source's ([`Tiers::parent_dir`]). Callers hold the namespace lock (shared) so that no
    /// directory rename runs while `rel` is resolved on the two tiers.
    pub fn plan_copy(&self, rel: &Path, from: Tier, ino: u64) -> io::Result<CopyPlan> {
        let src = self.at(from, rel)?;
        let input = src.open(Access::Read)?;
        let m = input.metadata()?;
        let dst = self.at_creating(from.other(), rel)?;
        let tmp = dst.sibling(&OsString::from(format!("{RESERVED_PREFIX}tmp-{ino}")))?;
        Ok(CopyPlan {
            src,
            input,
            src_id: (m.dev(), m.ino()),
            dst,
            tmp,
            backend: self.backend.clone(),
            made: OnceLock::new(),
            replaced: OnceLock::new(),
        })
    }
}

impl CopyPlan {
    /// Copies the source over the destination with the move protocol, keeping the source.
    /// Returns the bytes copied. `pace(offset, len, total)` runs before each chunk is written:
    /// it may sleep (rate limit, emulation) or fail to cancel the copy (the source is intact and
    /// the temporary file is removed).
    pub fn run(&self, pace: &mut dyn FnMut(u64, u64, u64) -> io::Result<()>) -> io::Result<u64> {
        let result = (|| {
            let meta = self.input.metadata()?;
            // A temporary left by an earlier failed attempt goes first.
            match self.tmp.unlink() {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
            let b = &*self.backend;
            // The source's name first: a copy made durable under a name its source tier may
            // still lose (a rename not yet synced) would come back after a power cut as a second
            // file beside the old name (found by the crash enumeration).
            b.sync_dir(&self.src)?;
            let out = b.create_temp(&self.tmp)?;
            if let Ok(m) = out.metadata() {
                let _ = self.made.set((m.dev(), m.ino()));
            }
            let n = copy_data(b, &self.input, &out, meta.len(), pace)?;
            calls::on_fd(Call::Attrs, &out, || {
                copy_metadata(&self.input, &meta, &out)?;
                out.set_times(fs::FileTimes::new().set_accessed(atime(&meta)).set_modified(mtime(&meta)))
            })?;
            b.sync_file(&out)?;
            drop(out);
            let _ = self.replaced.set(self.dst.exists());
            b.rename(&self.tmp, &self.dst)?;
            b.sync_dir(&self.dst)?;
            Ok(n)
        })();
        if result.is_err() {
            let _ = self.tmp.unlink();
        }
        result
    }

    /// Moves the file: [`CopyPlan::run`], then [`CopyPlan::remove_source`]. If either fails
    /// while the source is still there, the copy is removed again ([`CopyPlan::abandon`]), so a
    /// failed move leaves exactly the one copy it started from.
    pub fn run_move(&self, pace: &mut dyn FnMut(u64, u64, u64) -> io::Result<()>) -> io::Result<u64> {
        let result = self.run(pace).and_then(|n| self.remove_source().map(|()| n));
        if result.is_err() {
            self.abandon();
        }
        result
    }

    /// Removes the source, if its name still holds the file that was copied, and syncs its
    /// directory. An error after the source is gone is not a failure: the move took effect,
    /// only the durability of the removal is unsure, and a crash would leave two identical
    /// copies, which adoption resolves.
    pub fn remove_source(&self) -> io::Result<()> {
        match self.backend.unlink_source(&self.src, self.src_id) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) if self.source_intact() => return Err(e),
            Err(_) => {} // removed despite the error
        }
        if let Err(e) = self.backend.sync_dir(&self.src) {
            crate::log::debug(format_args!("syncing the directory of a moved file's source: {e}"));
        }
        Ok(())
    }

    /// Whether the source's name still holds the file that was copied.
    fn source_intact(&self) -> bool {
        self.src.metadata().is_ok_and(|m| (m.dev(), m.ino()) == self.src_id)
    }

    /// Undoes a move that failed: removes the copy this plan made (if its name still holds it)
    /// while the source is intact, so one copy remains, not two that could later differ. A copy
    /// that replaced a file at the destination stays: that file (a cached file's other copy,
    /// identical) is gone, and removing the new one would leave the file with one copy fewer
    /// than the policy believes (found by the fault tests: a pin of a cached file whose source
    /// removal failed lost the HDD copy, and a later invalidation the SSD one).
    pub fn abandon(&self) {
        let _ = self.tmp.unlink();
        if let Some(&made) = self.made.get()
            && self.replaced.get() != Some(&true)
            && self.source_intact()
            && self.dst.unlink_if(made).is_ok()
        {
            let _ = self.dst.sync_dir();
        }
    }

    /// The source's metadata (what a journal record says the copy must match).
    pub fn source_metadata(&self) -> io::Result<fs::Metadata> {
        self.input.metadata()
    }
}

/// Copies the `len` bytes of `input` to `out` in chunks of [`COPY_CHUNK`], calling `pace` before
/// each; holes stay holes (only the data regions `SEEK_DATA`/`SEEK_HOLE` report are read and
/// written), so a sparse file does not grow when it moves. Returns the bytes copied.
fn copy_data(
    backend: &dyn Backend,
    input: &File,
    out: &File,
    len: u64,
    pace: &mut dyn FnMut(u64, u64, u64) -> io::Result<()>,
) -> io::Result<u64> {
    use nix::unistd::{Whence, lseek};
    use std::os::unix::fs::FileExt;
    let seek = |pos: u64, whence: Whence| -> io::Result<Option<u64>> {
        let pos = i64::try_from(pos).map_err(|_| io::Error::other("offset out of range"))?;
        match lseek(input, pos, whence) {
            Ok(p) => Ok(Some(p as u64)),
            Err(nix::errno::Errno::ENXIO) => Ok(None), // no data at or after `pos`
            Err(e) => Err(e.into()),
        }
    };
    let mut buf = vec![0u8; COPY_CHUNK];
    let (mut pos, mut copied) = (0u64, 0u64);
    while pos < len {
        let Some(start) = seek(pos, Whence::SeekData)? else { break };
        let end = seek(start, Whence::SeekHole)?.unwrap_or(len).min(len);
        let mut at = start;
        while at < end {
            let want = (end - at).min(COPY_CHUNK as u64) as usize;
            let got = input.read_at(&mut buf[..want], at)?;
            if got == 0 {
                break; // the file shrank under us: the copy is of what was there
            }
            pace(at, got as u64, len)?;
            backend::write_all_at(backend, out, buf.get(..got).unwrap_or_default(), at)?;
            at += got as u64;
            copied += got as u64;
        }
        pos = end.max(start + 1);
    }
    calls::on_fd(Call::SetLen, out, || out.set_len(len))?;
    Ok(copied)
}

/// Gives `dst` the owner, mode and extended attributes of the open file `src` (whose metadata
/// is `meta`). Owner first: a chown clears set-id bits, which the mode then restores. An
/// attribute the destination's file system refuses fails the copy (a move then rolls back
/// rather than lose it).
pub(super) fn copy_metadata(src: &File, meta: &fs::Metadata, dst: &File) -> io::Result<()> {
    use xattr::FileExt;
    let _ = std::os::unix::fs::fchown(dst, Some(meta.uid()), Some(meta.gid()));
    dst.set_permissions(fs::Permissions::from_mode(meta.mode() & 0o7777))?;
    let names = match src.list_xattr() {
        Ok(names) => names,
        Err(e) if e.raw_os_error() == Some(nix::libc::EOPNOTSUPP) => return Ok(()),
        Err(e) => return Err(e),
    };
    for name in names {
        if let Some(value) = src.get_xattr(&name)? {
            dst.set_xattr(&name, &value)?;
        }
    }
    Ok(())
}
