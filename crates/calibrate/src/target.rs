//! What is measured: a scratch file made in a directory (removed afterwards), or an existing
//! file or block device, opened with `O_DIRECT` so that the page cache answers nothing.

use std::fs::{self, File, OpenOptions};
use std::io::{Seek, SeekFrom};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use nix::fcntl::OFlag;

use crate::CalibrateError;

/// Offsets, lengths and buffers are multiples of this: what `O_DIRECT` asks of 4 KiB-sector
/// drives, and so of 512-byte ones too.
pub const ALIGN: u64 = 4096;

/// An open target.
pub struct Target {
    /// The file or device measured.
    pub path: PathBuf,
    /// Bytes measured over, from offset 0 (a multiple of 1 MiB).
    pub span: u64,
    /// Whether writes are allowed (a scratch file, or `overwrite`).
    pub writable: bool,
    /// Whether calibrate made the file (it must be filled before reads mean anything, and is
    /// removed at the end).
    pub scratch: bool,
    /// The kernel's `queue/rotational` for the device underneath, when it can be found.
    pub rotational: Option<bool>,
    /// The kernel's name for that device (`sda`, `vda`, `nvme0n1`).
    pub device: Option<String>,
    /// The file lives in memory (tmpfs, ramfs): direct I/O there reaches no device.
    pub memory: bool,
    file: File,
    /// The same file opened with `O_DSYNC` as well: each write reaches stable media (a FUA
    /// or a cache flush), as with the drive's write cache off.
    sync_file: Option<File>,
}

impl Drop for Target {
    fn drop(&mut self) {
        if self.scratch {
            // Best effort: a scratch file left behind is named for what it is.
            let _ = fs::remove_file(&self.path);
        }
    }
}

fn direct(write: bool, extra: OFlag) -> OpenOptions {
    let mut o = OpenOptions::new();
    o.read(true).write(write).custom_flags((OFlag::O_DIRECT | extra).bits());
    o
}

fn open_error(path: &Path, e: std::io::Error) -> CalibrateError {
    if e.raw_os_error() == Some(nix::libc::EINVAL) {
        CalibrateError::NoDirectIo(path.to_path_buf())
    } else {
        CalibrateError::Io { what: format!("opening {}", path.display()), source: e }
    }
}

impl Target {
    /// Opens `path`: a directory gets a scratch file of `size` bytes; an existing file or
    /// block device is measured over `size` bytes (all of it when `None`), read-only unless
    /// `overwrite`.
    pub fn open(path: &Path, size: Option<u64>, overwrite: bool) -> Result<Target, CalibrateError> {
        let meta = fs::metadata(path).map_err(|e| CalibrateError::Io {
            what: format!(
                "{}: give a directory (a scratch file is made there and removed) or an existing file or block device",
                path.display()
            ),
            source: e,
        })?;
        if meta.is_dir() {
            return Target::scratch(path, size.unwrap_or(crate::DEFAULT_SCRATCH_BYTES));
        }
        if !(meta.is_file() || meta.file_type().is_block_device()) {
            return Err(CalibrateError::Input(format!(
                "{}: not a directory, regular file or block device",
                path.display()
            )));
        }
        let file = direct(overwrite, OFlag::empty()).open(path).map_err(|e| open_error(path, e))?;
        let len = (&file)
            .seek(SeekFrom::End(0))
            .map_err(|e| CalibrateError::Io { what: format!("sizing {}", path.display()), source: e })?;
        let span = size.map_or(len, |s| s.min(len)) / (1 << 20) * (1 << 20);
        if span < crate::MIN_SPAN {
            return Err(CalibrateError::Input(format!(
                "{}: {} bytes to measure over; at least {} MiB are needed",
                path.display(),
                span,
                crate::MIN_SPAN >> 20
            )));
        }
        let sync_file = if overwrite {
            Some(direct(true, OFlag::O_DSYNC).open(path).map_err(|e| open_error(path, e))?)
        } else {
            None
        };
        let dev = if meta.file_type().is_block_device() { meta.rdev() } else { meta.dev() };
        let (device, rotational) = sysfs_device(dev);
        Ok(Target {
            memory: in_memory(path),
            path: path.to_path_buf(),
            span,
            writable: overwrite,
            scratch: false,
            rotational,
            device,
            file,
            sync_file,
        })
    }

    fn scratch(dir: &Path, size: u64) -> Result<Target, CalibrateError> {
        let span = size / (1 << 20) * (1 << 20);
        if span < crate::MIN_SPAN {
            return Err(CalibrateError::Input(format!(
                "--size {size}: at least {} MiB are needed",
                crate::MIN_SPAN >> 20
            )));
        }
        let stat = nix::sys::statvfs::statvfs(dir)
            .map_err(|e| CalibrateError::Io { what: format!("free space of {}", dir.display()), source: e.into() })?;
        let free = stat.blocks_available().saturating_mul(stat.fragment_size());
        // Leave the file system a margin: a full disk is worse than a refused calibration.
        if free < span.saturating_add(span / 10).saturating_add(256 << 20) {
            return Err(CalibrateError::Input(format!(
                "{}: {} MiB free, a {} MiB scratch file plus a margin does not fit; give a smaller --size",
                dir.display(),
                free >> 20,
                span >> 20
            )));
        }
        let path = dir.join(format!(".tierwise-calibrate-{}.img", std::process::id()));
        let mut o = direct(true, OFlag::empty());
        o.create_new(true);
        let file = o.open(&path).map_err(|e| open_error(&path, e))?;
        let sync_file = match direct(true, OFlag::O_DSYNC).open(&path) {
            Ok(f) => f,
            Err(e) => {
                let _ = fs::remove_file(&path);
                return Err(open_error(&path, e));
            }
        };
        let dev = fs::metadata(&path).map(|m| m.dev()).unwrap_or(0);
        let (device, rotational) = sysfs_device(dev);
        Ok(Target {
            memory: in_memory(dir),
            path,
            span,
            writable: true,
            scratch: true,
            rotational,
            device,
            file,
            sync_file: Some(sync_file),
        })
    }

    /// The file, for direct reads and writes.
    pub fn file(&self) -> &File {
        &self.file
    }

    /// The file opened with `O_DSYNC` too (writable targets only).
    pub fn sync_file(&self) -> Option<&File> {
        self.sync_file.as_ref()
    }
}

/// Whether `path` is on a file system kept in memory (Linux 6.6 and later accept `O_DIRECT`
/// on tmpfs, so the open alone does not tell).
fn in_memory(path: &Path) -> bool {
    use nix::sys::statfs::{FsType, TMPFS_MAGIC, statfs};
    // ramfs's magic (linux/magic.h); nix names tmpfs's only.
    const RAMFS_MAGIC: FsType = FsType(0x8584_58f6);
    statfs(path).is_ok_and(|s| s.filesystem_type() == TMPFS_MAGIC || s.filesystem_type() == RAMFS_MAGIC)
}

/// The kernel's name and `queue/rotational` for device number `dev` (a partition's come from
/// its disk).
fn sysfs_device(dev: u64) -> (Option<String>, Option<bool>) {
    let (major, minor) = (nix::sys::stat::major(dev), nix::sys::stat::minor(dev));
    let base = PathBuf::from(format!("/sys/dev/block/{major}:{minor}"));
    let Ok(real) = fs::canonicalize(&base) else { return (None, None) };
    let name = real.file_name().map(|n| n.to_string_lossy().into_owned());
    let rotational = [real.join("queue/rotational"), real.join("../queue/rotational")]
        .iter()
        .find_map(|p| fs::read_to_string(p).ok())
        .and_then(|s| match s.trim() {
            "1" => Some(true),
            "0" => Some(false),
            _ => None,
        });
    (name, rotational)
}

/// A buffer whose start is `ALIGN`-aligned, as `O_DIRECT` needs (found inside a larger
/// vector, so no unsafe allocation is needed).
pub struct AlignedBuf {
    raw: Vec<u8>,
    start: usize,
    len: usize,
}

impl AlignedBuf {
    /// `len` bytes of pseudo-random content (so that compressing or deduplicating devices
    /// store them as they would real data).
    pub fn new(len: usize, seed: u64) -> AlignedBuf {
        let align = ALIGN as usize;
        let mut raw = vec![0u8; len + align];
        let start = raw.as_ptr().align_offset(align).min(align);
        let mut rng = tierwise_sim::synth::Rng::new(seed);
        for chunk in raw[start..start + len].chunks_mut(8) {
            let v = rng.next_u64().to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
        AlignedBuf { raw, start, len }
    }

    /// The aligned bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.raw[self.start..self.start + self.len]
    }

    /// The aligned bytes, writable.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.raw[self.start..self.start + self.len]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn einval_on_open_means_no_direct_io() {
        let e = open_error(Path::new("/mnt/x"), std::io::Error::from_raw_os_error(nix::libc::EINVAL));
        assert!(matches!(e, CalibrateError::NoDirectIo(_)));
        assert!(e.to_string().contains("/mnt/x") && e.to_string().contains("O_DIRECT"));
        let e = open_error(Path::new("/mnt/x"), std::io::Error::from_raw_os_error(nix::libc::EACCES));
        assert!(e.to_string().starts_with("opening /mnt/x"), "{e}");
    }

    #[test]
    fn buffers_are_aligned_and_filled() {
        for len in [4096, 1 << 20] {
            let mut b = AlignedBuf::new(len, 5);
            assert_eq!(b.bytes().as_ptr().align_offset(ALIGN as usize), 0);
            assert_eq!(b.bytes().len(), len);
            assert!(b.bytes().iter().any(|&x| x != 0));
            b.bytes_mut()[0] = 1;
        }
    }
}
