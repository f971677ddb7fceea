//! The images under the device, behind a small trait so tests can replace them: [`FileBackend`]
//! is the real thing (two image files, each locked against a second server), [`MemBackend`]
//! keeps both images in memory and can simulate a power cut (writes not yet synced are lost or
//! torn), which is how the commit protocol is tested.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use nix::fcntl::{Flock, FlockArg};

use crate::error::DeviceError;

/// One of the two images.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dev {
    /// The fast image.
    Ssd = 0,
    /// The slow image.
    Hdd = 1,
}

/// What the device needs of its images. Implementations MUST be safe to call from many
/// threads at once on disjoint ranges; `sync` MUST make every write that returned before it was
/// called durable.
pub trait Backend: Send + Sync {
    /// Reads exactly `buf.len()` bytes at `off`.
    fn read(&self, dev: Dev, buf: &mut [u8], off: u64) -> io::Result<()>;
    /// Writes all of `buf` at `off`.
    fn write(&self, dev: Dev, buf: &[u8], off: u64) -> io::Result<()>;
    /// Makes completed writes durable.
    fn sync(&self, dev: Dev) -> io::Result<()>;
    /// The range's contents may be dropped (reads then return zeroes); a hint.
    fn discard(&self, dev: Dev, off: u64, len: u64) -> io::Result<()>;
    /// The image's length.
    fn len(&self, dev: Dev) -> io::Result<u64>;
    /// Grows the image to `len` bytes (adopting an HDD image in place appends the metadata).
    fn grow(&self, dev: Dev, len: u64) -> io::Result<()>;
    /// Whether the range is a hole (unallocated, reads as zeroes); `false` when unknown.
    fn is_hole(&self, _dev: Dev, _off: u64, _len: u64) -> io::Result<bool> {
        Ok(false)
    }
    /// Which of the `n` blocks of `bs` bytes from `off` are holes, as [`Backend::is_hole`] says
    /// of each (an implementation may ask the file system once per run instead of per block).
    fn holes(&self, dev: Dev, off: u64, bs: u64, n: usize) -> io::Result<Vec<bool>> {
        (0..n as u64).map(|i| self.is_hole(dev, off + i * bs, bs)).collect()
    }
}

/// Two image files, each held with an exclusive `flock` for as long as this lives (and by
/// nbdkit's forked server, which inherits the descriptors).
#[derive(Debug)]
pub struct FileBackend {
    files: [Flock<File>; 2],
    paths: [PathBuf; 2],
    data_runs: [Mutex<DataRuns>; 2],
    /// Set when the images are open with `O_DIRECT` (`serve --direct`).
    direct: Option<crate::direct::DirectIo>,
}

/// Runs of data [`Backend::holes`] found in an image, kept until a discard may punch a hole in
/// one: asking the file system where a run of data ends (`SEEK_HOLE`) walks its page cache to
/// the run's end, on tmpfs the whole rest of a written image, each time. Writes only add data,
/// so they leave the runs true; a hole reported wrongly as data is the safe mistake anyway.
#[derive(Debug, Default)]
struct DataRuns {
    /// Start → end.
    runs: std::collections::BTreeMap<u64, u64>,
    /// Discards so far: a run found before one is not kept.
    discards: u64,
}

impl DataRuns {
    /// More runs than this (a fragmented image) and they are forgotten, to bound the memory.
    const MAX: usize = 65_536;

    /// The end of the known run of data holding `pos`.
    fn end_of_run_at(&self, pos: u64) -> Option<u64> {
        self.runs.range(..=pos).next_back().map(|(_, &end)| end).filter(|&end| end > pos)
    }

    fn learn(&mut self, start: u64, end: u64, discards_before: u64) {
        if self.discards != discards_before {
            return;
        }
        if self.runs.len() >= Self::MAX {
            self.runs.clear();
        }
        self.runs.insert(start, end);
    }
}

impl FileBackend {
    /// Opens both images read-write and locks them; creates them first when `create` gives
    /// their lengths (an existing file is kept, so an HDD image is adopted in place).
    pub fn open(ssd: &Path, hdd: &Path, create: Option<(u64, u64)>) -> Result<FileBackend, DeviceError> {
        FileBackend::open_with(ssd, hdd, create, false)
    }

    /// As [`FileBackend::open`]; with `direct`, both images are opened with `O_DIRECT` (the
    /// page cache bypassed: the devices under them answer every request).
    pub fn open_with(
        ssd: &Path,
        hdd: &Path,
        create: Option<(u64, u64)>,
        direct: bool,
    ) -> Result<FileBackend, DeviceError> {
        if ssd == hdd || ssd.canonicalize().ok().is_some_and(|s| hdd.canonicalize().ok().is_some_and(|h| h == s)) {
            return Err(DeviceError::Images(format!("--ssd and --hdd name the same image {}", ssd.display())));
        }
        let open = |p: &Path, len: Option<u64>| -> Result<Flock<File>, DeviceError> {
            let mut o = OpenOptions::new();
            o.read(true).write(true);
            if len.is_some() {
                o.create(true);
            }
            if direct {
                o.custom_flags(nix::fcntl::OFlag::O_DIRECT.bits());
            }
            let f = o.open(p).map_err(|e| {
                if direct && e.raw_os_error() == Some(nix::libc::EINVAL) {
                    DeviceError::Images(format!(
                        "{}: its file system does not support direct I/O (O_DIRECT); serve it without --direct",
                        p.display()
                    ))
                } else {
                    DeviceError::io(format!("opening {}", p.display()), e)
                }
            })?;
            Flock::lock(f, FlockArg::LockExclusiveNonblock).map_err(|(_, e)| {
                if e == nix::errno::Errno::EWOULDBLOCK {
                    DeviceError::InUse(p.display().to_string())
                } else {
                    DeviceError::io(format!("locking {}", p.display()), e.into())
                }
            })
        };
        let s = open(ssd, create.map(|c| c.0))?;
        let h = open(hdd, create.map(|c| c.1))?;
        Ok(FileBackend {
            files: [s, h],
            paths: [ssd.to_path_buf(), hdd.to_path_buf()],
            data_runs: Default::default(),
            direct: direct.then(crate::direct::DirectIo::default),
        })
    }

    /// The image's path.
    pub fn path(&self, dev: Dev) -> &Path {
        &self.paths[dev as usize]
    }

    /// Whether the images are open with `O_DIRECT`.
    pub fn is_direct(&self) -> bool {
        self.direct.is_some()
    }
}

impl Backend for FileBackend {
    fn read(&self, dev: Dev, buf: &mut [u8], off: u64) -> io::Result<()> {
        match &self.direct {
            Some(d) => d.read(&self.files[dev as usize], buf, off),
            None => self.files[dev as usize].read_exact_at(buf, off),
        }
    }
    fn write(&self, dev: Dev, buf: &[u8], off: u64) -> io::Result<()> {
        match &self.direct {
            Some(d) => d.write(&self.files[dev as usize], buf, off),
            None => self.files[dev as usize].write_all_at(buf, off),
        }
    }
    fn sync(&self, dev: Dev) -> io::Result<()> {
        self.files[dev as usize].sync_data()
    }
    fn discard(&self, dev: Dev, off: u64, len: u64) -> io::Result<()> {
        use nix::fcntl::{FallocateFlags, fallocate};
        let flags = FallocateFlags::FALLOC_FL_PUNCH_HOLE | FallocateFlags::FALLOC_FL_KEEP_SIZE;
        let punched = fallocate(&*self.files[dev as usize], flags, off as i64, len as i64);
        let mut known = self.data_runs[dev as usize].lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        known.runs.clear();
        known.discards += 1;
        drop(known);
        match punched {
            Ok(()) => Ok(()),
            // A file system without hole punching: the discard is only a hint.
            Err(nix::errno::Errno::EOPNOTSUPP) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
    fn len(&self, dev: Dev) -> io::Result<u64> {
        Ok(self.files[dev as usize].metadata()?.len())
    }
    fn grow(&self, dev: Dev, len: u64) -> io::Result<()> {
        let f = &self.files[dev as usize];
        if f.metadata()?.len() < len { f.set_len(len) } else { Ok(()) }
    }
    fn is_hole(&self, dev: Dev, off: u64, len: u64) -> io::Result<bool> {
        use nix::unistd::{Whence, lseek};
        // The descriptor's own offset is never used (all I/O is positioned): moving it is harmless.
        match lseek(&*self.files[dev as usize], off as i64, Whence::SeekData) {
            Ok(data) => Ok(data as u64 >= off + len),
            // No data at or after `off`.
            Err(nix::errno::Errno::ENXIO) => Ok(true),
            // A file system that cannot tell: say data.
            Err(nix::errno::Errno::EINVAL | nix::errno::Errno::EOPNOTSUPP) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }
    fn holes(&self, dev: Dev, off: u64, bs: u64, n: usize) -> io::Result<Vec<bool>> {
        use nix::errno::Errno;
        use nix::unistd::{Whence, lseek};
        let f = &*self.files[dev as usize];
        let end = off + bs * n as u64;
        let mut holes = vec![false; n];
        // Two `lseek`s per run of data instead of one per block: a hole runs from `pos` to the
        // next data, a run of data from there to the next hole (or a run already known).
        let known = &self.data_runs[dev as usize];
        let lock = || known.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut pos = off;
        while pos < end {
            // (Each guard is dropped at the end of its statement: `learn` takes the lock again.)
            let (known_end, discards) = {
                let k = lock();
                (k.end_of_run_at(pos), k.discards)
            };
            if let Some(run_end) = known_end {
                pos = run_end;
                continue;
            }
            let data = match lseek(f, pos as i64, Whence::SeekData) {
                Ok(d) => (d as u64).min(end),
                Err(Errno::ENXIO) => end,
                // A file system that cannot tell: the rest is data.
                Err(Errno::EINVAL | Errno::EOPNOTSUPP) => return Ok(holes),
                Err(e) => return Err(e.into()),
            };
            // Only blocks wholly inside the hole are holes.
            let (first, last) = ((pos - off).div_ceil(bs) as usize, ((data - off) / bs) as usize);
            holes[first..last].iter_mut().for_each(|h| *h = true);
            if data >= end {
                break;
            }
            let known_end = lock().end_of_run_at(data);
            let run_end = match known_end {
                Some(e) => e,
                None => match lseek(f, data as i64, Whence::SeekHole) {
                    Ok(h) => {
                        let h = (h as u64).max(data + 1);
                        lock().learn(data, h, discards);
                        h
                    }
                    Err(Errno::EINVAL | Errno::EOPNOTSUPP) => return Ok(holes),
                    Err(e) => return Err(e.into()),
                },
            };
            pos = run_end;
        }
        Ok(holes)
    }
}

/// Both images in memory, with durable and volatile state kept apart: a write is volatile until
/// a `sync` of its image; [`MemBackend::power_cut`] keeps each volatile write whole, torn at a
/// sector, or not at all, as a seeded choice.
#[derive(Debug, Default)]
pub struct MemBackend {
    inner: Mutex<MemImages>,
}

#[derive(Debug, Default, Clone)]
struct MemImages {
    durable: [Vec<u8>; 2],
    current: [Vec<u8>; 2],
    volatile: [Vec<(u64, Vec<u8>)>; 2],
    faults: Option<(u64, u64)>,
    /// Per image: (reads fail, writes and syncs fail, errno).
    failing: [Option<(bool, bool, i32)>; 2],
}

impl MemBackend {
    /// Two zeroed images.
    pub fn new(ssd_len: u64, hdd_len: u64) -> MemBackend {
        let z = |n: u64| vec![0u8; n as usize];
        let img =
            MemImages { durable: [z(ssd_len), z(hdd_len)], current: [z(ssd_len), z(hdd_len)], ..MemImages::default() };
        MemBackend { inner: Mutex::new(img) }
    }

    /// The images after a power cut now: durable bytes plus a seeded choice of the volatile
    /// writes (each kept, dropped, or torn at a sector boundary).
    pub fn power_cut(&self, seed: u64) -> MemBackend {
        let g = self.lock();
        let mut rng = seed | 1;
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let mut after = g.durable.clone();
        for (image, writes) in after.iter_mut().zip(&g.volatile) {
            for (off, bytes) in writes {
                let keep = match next() % 3 {
                    0 => 0,
                    1 => bytes.len(),
                    _ => ((next() as usize % bytes.len().max(1)) / 512) * 512,
                };
                let o = *off as usize;
                image[o..o + keep].copy_from_slice(&bytes[..keep]);
            }
        }
        let img = MemImages { durable: after.clone(), current: after, ..MemImages::default() };
        MemBackend { inner: Mutex::new(img) }
    }

    /// Writes whose offset falls in `[from, to)` on either image fail with EIO from now on.
    pub fn fail_writes(&self, range: Option<(u64, u64)>) {
        self.lock().faults = range;
    }

    /// From now on `dev`'s reads fail (`reads`), its writes and syncs fail (`writes`), with
    /// `errno` (EIO for a failing disk, ENOSPC for a full one, EROFS for a read-only one);
    /// `reads` and `writes` both false: it works again.
    pub fn fail(&self, dev: Dev, reads: bool, writes: bool, errno: i32) {
        self.lock().failing[dev as usize] = (reads || writes).then_some((reads, writes, errno));
    }

    fn failing(&self, dev: Dev, write: bool) -> io::Result<()> {
        match self.lock().failing[dev as usize] {
            Some((r, w, errno)) if (write && w) || (!write && r) => Err(io::Error::from_raw_os_error(errno)),
            _ => Ok(()),
        }
    }

    /// A copy of an image's current bytes.
    pub fn image(&self, dev: Dev) -> Vec<u8> {
        self.lock().current[dev as usize].clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, MemImages> {
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

fn range_err(off: u64, len: usize, size: usize) -> io::Error {
    io::Error::new(io::ErrorKind::UnexpectedEof, format!("{len} bytes at {off} beyond the image's {size}"))
}

impl Backend for MemBackend {
    fn read(&self, dev: Dev, buf: &mut [u8], off: u64) -> io::Result<()> {
        self.failing(dev, false)?;
        let g = self.lock();
        let img = &g.current[dev as usize];
        let o = off as usize;
        let src = img.get(o..o + buf.len()).ok_or_else(|| range_err(off, buf.len(), img.len()))?;
        buf.copy_from_slice(src);
        Ok(())
    }
    fn write(&self, dev: Dev, buf: &[u8], off: u64) -> io::Result<()> {
        self.failing(dev, true)?;
        let mut g = self.lock();
        if let Some((from, to)) = g.faults
            && off >= from
            && off < to
        {
            return Err(io::Error::from_raw_os_error(5));
        }
        let d = dev as usize;
        let o = off as usize;
        let size = g.current[d].len();
        let dst = g.current[d].get_mut(o..o + buf.len()).ok_or_else(|| range_err(off, buf.len(), size))?;
        dst.copy_from_slice(buf);
        g.volatile[d].push((off, buf.to_vec()));
        Ok(())
    }
    fn sync(&self, dev: Dev) -> io::Result<()> {
        self.failing(dev, true)?;
        let mut g = self.lock();
        let d = dev as usize;
        g.volatile[d].clear();
        g.durable[d] = g.current[d].clone();
        Ok(())
    }
    fn discard(&self, dev: Dev, off: u64, len: u64) -> io::Result<()> {
        self.write(dev, &vec![0u8; len as usize], off)
    }
    fn len(&self, dev: Dev) -> io::Result<u64> {
        Ok(self.lock().current[dev as usize].len() as u64)
    }
    fn grow(&self, dev: Dev, len: u64) -> io::Result<()> {
        let mut g = self.lock();
        let d = dev as usize;
        let g = &mut *g;
        for img in [&mut g.current[d], &mut g.durable[d]] {
            if (img.len() as u64) < len {
                img.resize(len as usize, 0);
            }
        }
        Ok(())
    }
    fn is_hole(&self, dev: Dev, off: u64, len: u64) -> io::Result<bool> {
        // In memory, nothing is allocated or not: a range of zeroes stands for a hole.
        let g = self.lock();
        let img = &g.current[dev as usize];
        let end = (off + len).min(img.len() as u64);
        Ok(off >= end || img[off as usize..end as usize].iter().all(|&b| b == 0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `holes` answers, per block, what `is_hole` does of each block alone: over sparse images
    /// with data scattered at block and sub-block places, from every kind of starting point,
    /// with holes punched and data written between the questions (the runs it keeps stay true).
    #[test]
    fn holes_per_run_agree_with_holes_per_block() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let bs = 4096u64;
        let blocks = 300u64;
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for round in 0..6 {
            let (ssd, hdd) = (dir.path().join(format!("s{round}")), dir.path().join(format!("h{round}")));
            let b = FileBackend::open(&ssd, &hdd, Some((bs, blocks * bs))).unwrap_or_else(|e| panic!("{e}"));
            // Runs of data of 1-8 blocks, some written only in part of a block.
            for _ in 0..(round * 8) {
                let at = next() % (blocks * bs);
                let len = 1 + next() % (8 * bs);
                let len = len.min(blocks * bs - at);
                b.write(Dev::Hdd, &vec![0xa5; len as usize], at).unwrap_or_else(|e| panic!("{e}"));
            }
            for step in 0..40 {
                // Holes punched meanwhile (a trim), and data written again.
                if step % 10 == 9 {
                    let at = next() % blocks * bs;
                    let len = (1 + next() % 6) * bs;
                    b.discard(Dev::Hdd, at, len.min(blocks * bs - at)).unwrap_or_else(|e| panic!("{e}"));
                } else if step % 10 == 4 {
                    b.write(Dev::Hdd, &[1; 4096], next() % blocks * bs).unwrap_or_else(|e| panic!("{e}"));
                }
                let first = next() % blocks;
                let n = 1 + (next() % (blocks - first)) as usize;
                let per_run = b.holes(Dev::Hdd, first * bs, bs, n).unwrap_or_else(|e| panic!("{e}"));
                let per_block: Vec<bool> = (0..n as u64)
                    .map(|i| b.is_hole(Dev::Hdd, (first + i) * bs, bs).unwrap_or_else(|e| panic!("{e}")))
                    .collect();
                assert_eq!(per_run, per_block, "round {round}, blocks {first}..{}", first + n as u64);
            }
        }
    }
}
