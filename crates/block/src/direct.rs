//! Direct I/O on an image (`tierwise serve --direct`): the images are opened with `O_DIRECT`,
//! so the host's page cache neither absorbs writes nor answers reads, and the device under the
//! image is what a request waits for (what `tierwise calibrate` measured).
//!
//! `O_DIRECT` needs 4 KiB-aligned offsets, lengths and buffers; NBD requests and the block
//! device's own metadata need not be. Every request goes through an aligned bounce buffer
//! covering the 4 KiB blocks it touches; a write that covers a block only partly reads that
//! block first (read-modify-write). Two writes to different bytes of one block must not undo
//! each other, so a partial block is updated under its stripe's write lock, and whole blocks
//! under a read lock of theirs (whole-block writes never wait for each other).

use std::cell::RefCell;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

/// The alignment `O_DIRECT` asks of 4 KiB-sector drives (and so of 512-byte ones too).
pub const ALIGN: u64 = 4096;
const STRIPES: u64 = 256;

thread_local! {
    static BOUNCE: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// `f` on an aligned scratch buffer of `len` bytes (this thread's, grown as needed).
fn with_bounce<R>(len: usize, f: impl FnOnce(&mut [u8]) -> R) -> R {
    BOUNCE.with(|b| {
        let mut v = b.borrow_mut();
        let a = ALIGN as usize;
        if v.len() < len + a {
            v.resize(len + a, 0);
        }
        let start = v.as_ptr().align_offset(a).min(a);
        f(&mut v[start..start + len])
    })
}

/// Reads `buf.len()` bytes at `off`; bytes past the end of the file read as zeroes (a block
/// that the image's last bytes fill only partly).
fn read_full(file: &File, buf: &mut [u8], off: u64) -> io::Result<()> {
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], off + done as u64) {
            Ok(0) => {
                buf[done..].fill(0);
                break;
            }
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The aligned range `[start, end)` covering `len` bytes at `off`.
fn covering(off: u64, len: usize) -> (u64, u64) {
    let start = off / ALIGN * ALIGN;
    (start, (off + len as u64).div_ceil(ALIGN) * ALIGN)
}

enum Guard<'a> {
    // The guards are held, not read.
    Shared(#[expect(dead_code, reason = "held for its lifetime")] RwLockReadGuard<'a, ()>),
    Exclusive(#[expect(dead_code, reason = "held for its lifetime")] RwLockWriteGuard<'a, ()>),
}

/// Aligned reads and writes on `O_DIRECT` files, with the stripe locks that keep partial-block
/// writes from undoing each other.
#[derive(Debug)]
pub struct DirectIo {
    stripes: Vec<RwLock<()>>,
}

impl Default for DirectIo {
    fn default() -> Self {
        DirectIo { stripes: (0..STRIPES).map(|_| RwLock::new(())).collect() }
    }
}

impl DirectIo {
    /// Reads exactly `buf.len()` bytes at `off`.
    pub fn read(&self, file: &File, buf: &mut [u8], off: u64) -> io::Result<()> {
        let (start, end) = covering(off, buf.len());
        if start == off && end == off + buf.len() as u64 && buf.as_ptr().align_offset(ALIGN as usize) == 0 {
            return read_full(file, buf, off);
        }
        with_bounce((end - start) as usize, |b| {
            read_full(file, b, start)?;
            let at = (off - start) as usize;
            buf.copy_from_slice(&b[at..at + buf.len()]);
            Ok(())
        })
    }

    /// The stripe locks for a write of `[start, end)` whose first and last blocks are partial
    /// as `head` and `tail` say: exclusive for a partial block, shared for whole ones; taken in
    /// ascending stripe order, so that no two writers wait for each other in a cycle.
    fn lock(&self, start: u64, end: u64, head: bool, tail: bool) -> Vec<Guard<'_>> {
        let (first, last) = (start / ALIGN, end / ALIGN - 1);
        let blocks = last - first + 1;
        let exclusive = |s: u64| (head && first % STRIPES == s) || (tail && last % STRIPES == s);
        // The blocks' stripes form one run modulo STRIPES: walked from stripe 0 upwards, it is
        // [0, wrap end) then [run start, STRIPES) when it wraps, else just the run.
        let stripes: Box<dyn Iterator<Item = u64>> = if blocks >= STRIPES {
            Box::new(0..STRIPES)
        } else {
            let (s0, s1) = (first % STRIPES, last % STRIPES);
            if s0 <= s1 { Box::new(s0..=s1) } else { Box::new((0..=s1).chain(s0..STRIPES)) }
        };
        stripes
            .map(|s| {
                let lock = &self.stripes[s as usize];
                if exclusive(s) {
                    Guard::Exclusive(lock.write().unwrap_or_else(std::sync::PoisonError::into_inner))
                } else {
                    Guard::Shared(lock.read().unwrap_or_else(std::sync::PoisonError::into_inner))
                }
            })
            .collect()
    }

    /// Writes all of `buf` at `off`.
    pub fn write(&self, file: &File, buf: &[u8], off: u64) -> io::Result<()> {
        if buf.is_empty() {
            return Ok(());
        }
        let (start, end) = covering(off, buf.len());
        let head = start != off;
        let tail = end != off + buf.len() as u64;
        let _held = self.lock(start, end, head, tail);
        if !head && !tail && buf.as_ptr().align_offset(ALIGN as usize) == 0 {
            return file.write_all_at(buf, off);
        }
        with_bounce((end - start) as usize, |b| {
            let n = b.len();
            let a = ALIGN as usize;
            if head {
                read_full(file, &mut b[..a], start)?;
            }
            if tail && (n > a || !head) {
                read_full(file, &mut b[n - a..], end - ALIGN)?;
            }
            let at = (off - start) as usize;
            b[at..at + buf.len()].copy_from_slice(buf);
            // An image whose length is not a multiple of 4 KiB: the aligned write of its last
            // block grows it, and the length is put back (under that block's exclusive lock).
            let len = if tail { Some(file.metadata()?.len()).filter(|&l| l < end) } else { None };
            file.write_all_at(b, start)?;
            match len {
                Some(l) => file.set_len(l.max(off + buf.len() as u64)),
                None => Ok(()),
            }
        })
    }
}

#[cfg(test)]
mod tests {

    use std::os::unix::fs::OpenOptionsExt;

    use super::*;

    /// A file in a directory on the build's disk (/tmp may be in memory).
    fn direct_file(dir: &std::path::Path, len: u64) -> File {
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .custom_flags(nix::fcntl::OFlag::O_DIRECT.bits())
            .open(dir.join("img"))
            .unwrap();
        f.set_len(len).unwrap();
        f
    }

    #[test]
    fn unaligned_reads_and_writes_match_a_plain_buffer() {
        let dir = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
        let len = 64 * ALIGN + 1000; // the last block is partial
        let file = direct_file(dir.path(), len);
        let io = DirectIo::default();
        let mut model = vec![0u8; len as usize];
        let mut seed = 7u64;
        let mut next = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        for round in 0..400u64 {
            let off = next(len - 1);
            let n = 1 + next((len - off).min(3 * ALIGN));
            if round % 2 == 0 {
                let data: Vec<u8> = (0..n).map(|i| (round + i) as u8).collect();
                io.write(&file, &data, off).unwrap();
                model[off as usize..(off + n) as usize].copy_from_slice(&data);
            } else {
                let mut got = vec![0u8; n as usize];
                io.read(&file, &mut got, off).unwrap();
                assert!(got == model[off as usize..(off + n) as usize], "read {n} at {off}");
            }
        }
        assert_eq!(file.metadata().unwrap().len(), len, "writes never grow the image");
        let mut all = vec![0u8; len as usize];
        io.read(&file, &mut all, 0).unwrap();
        assert!(all == model);
    }

    #[test]
    fn writes_whose_stripes_wrap_or_cover_all_of_them() {
        let dir = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
        let file = direct_file(dir.path(), 600 * ALIGN);
        let io = DirectIo::default();
        // Blocks 255 and 256 (stripes 255 and 0), partial at both ends; then 300 blocks.
        assert_eq!(io.lock(255 * ALIGN, 257 * ALIGN, true, true).len(), 2);
        assert_eq!(io.lock(0, 300 * ALIGN, false, false).len(), STRIPES as usize);
        io.write(&file, &[7u8; 5000], 255 * ALIGN + 100).unwrap();
        io.write(&file, &vec![9u8; 300 * ALIGN as usize], 280 * ALIGN).unwrap();
        let mut got = vec![0u8; 5000];
        io.read(&file, &mut got, 255 * ALIGN + 100).unwrap();
        assert!(got.iter().all(|&b| b == 7));
        let mut got = vec![0u8; 300 * ALIGN as usize];
        io.read(&file, &mut got, 280 * ALIGN).unwrap();
        assert!(got.iter().all(|&b| b == 9));
    }

    #[test]
    fn concurrent_writes_to_one_block_keep_each_others_bytes() {
        let dir = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
        let file = direct_file(dir.path(), 16 * ALIGN);
        let io = DirectIo::default();
        // Eight writers, each owning every eighth 512-byte sector of the same 16 blocks: without
        // the stripe locks a read-modify-write brings back a neighbour's old sector.
        std::thread::scope(|s| {
            for w in 0..8u64 {
                let (file, io) = (&file, &io);
                s.spawn(move || {
                    for round in 0..200u64 {
                        for block in 0..16u64 {
                            let off = block * ALIGN + w * 512;
                            io.write(file, &[(w + 1) as u8 ^ (round as u8 & 0xF0); 512], off).unwrap();
                        }
                    }
                    for block in 0..16u64 {
                        io.write(file, &[(w + 1) as u8; 512], block * ALIGN + w * 512).unwrap();
                    }
                });
            }
        });
        let mut all = vec![0u8; (16 * ALIGN) as usize];
        io.read(&file, &mut all, 0).unwrap();
        for (i, sector) in all.chunks(512).enumerate() {
            let want = (i % 8 + 1) as u8;
            assert!(sector.iter().all(|&b| b == want), "sector {i} lost its last write");
        }
    }
}
