//! Short reads held back around a truncation, so that a reader never copies zeros for a file
//! that another process truncates and rewrites (`open(O_TRUNC)` and a write: `>`, `fs::write`).
//!
//! What goes wrong without it, in the kernel's FUSE client: while a truncating SETATTR is in
//! flight the inode's size is marked unstable and keeps its old value. A READ of the file that
//! the daemon answers after it truncated is short; the kernel zero-fills the rest of the page,
//! marks it up to date, and does not lower the size (it is unstable). A reader that then
//! copies up to the old size copies zeros — 5.6 % of the reads in `scripts/fs-races.py`'s
//! rewrite pattern, where a local file system shows none.
//!
//! The kernel's SETATTR caller, once it has the reply, first lowers the size and then drops
//! the cached pages, waiting for pages still being read. So a READ of a file whose size change
//! is in flight, or was answered less than [`SETTLE`] ago, first waits until the change is
//! answered and the caller has had [`SETTLE`] to lower the size, and only then reads: the
//! bytes it returns are the file's new ones, and the reader copies them up to the new size.
//! A READ that raced a size change beginning after its check, and came back short, reads
//! again. Reads of files no size change touched lately cost one atomic load.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// How long the kernel's SETATTR caller is given, after its reply is sent, to lower the size
/// (a thread wake-up: tens of µs here; more on a busy machine).
pub(crate) const SETTLE: Duration = Duration::from_micros(1000);

/// A read waits at most this long for a truncation in flight (a stuck one must not hold
/// readers for ever; they are then answered as before).
const MAX_WAIT: Duration = Duration::from_secs(1);

#[derive(Debug, Default)]
struct State {
    in_flight: u32,
    /// When the last truncation's reply was sent.
    replied: Option<Instant>,
}

/// Truncations in flight and just answered, per inode.
#[derive(Debug, Default)]
pub(crate) struct TruncationFence {
    files: Mutex<HashMap<u64, State>>,
    replied: Condvar,
    /// Size changes begun, ever; a read that sees it move while it read may have raced one.
    begun: AtomicU64,
    /// `files` is not empty (reads of an untouched mount skip the lock).
    any: std::sync::atomic::AtomicBool,
}

/// A truncation in flight; dropping it (after its reply is sent) records the reply.
#[must_use]
pub(crate) struct Truncating<'a> {
    fence: &'a TruncationFence,
    ino: u64,
}

impl TruncationFence {
    /// A size change of `ino` starts (before the daemon changes the file).
    pub(crate) fn begin(&self, ino: u64) -> Truncating<'_> {
        let mut files = lock(&self.files);
        self.begun.fetch_add(1, Ordering::SeqCst);
        files.entry(ino).or_default().in_flight += 1;
        self.any.store(true, Ordering::SeqCst);
        Truncating { fence: self, ino }
    }

    /// Reads `size` bytes of `ino` with `read`, once any size change of the file in flight or
    /// just answered has settled; reads again when a size change began while it read and the
    /// read came back short (it may have seen the new size before the kernel did).
    pub(crate) fn read_settled<E>(
        &self,
        ino: u64,
        size: usize,
        mut read: impl FnMut() -> Result<Vec<u8>, E>,
    ) -> Result<Vec<u8>, E> {
        for _ in 0..3 {
            let begun = self.begun.load(Ordering::SeqCst);
            self.wait_settled(ino);
            let data = read()?;
            if data.len() >= size || self.begun.load(Ordering::SeqCst) == begun {
                return Ok(data);
            }
        }
        self.wait_settled(ino);
        read()
    }

    /// Waits until no size change of `ino` is in flight or answered less than [`SETTLE`] ago
    /// (at most [`MAX_WAIT`]).
    fn wait_settled(&self, ino: u64) {
        if !self.any.load(Ordering::SeqCst) {
            return;
        }
        let deadline = Instant::now() + MAX_WAIT;
        let mut files = lock(&self.files);
        loop {
            let now = Instant::now();
            files.retain(|_, s| s.in_flight > 0 || s.replied.is_some_and(|t| now < t + SETTLE));
            self.any.store(!files.is_empty(), Ordering::SeqCst);
            let Some(s) = files.get(&ino) else { return };
            if now >= deadline {
                return;
            }
            if s.in_flight > 0 {
                files = self.replied.wait_timeout(files, deadline - now).unwrap_or_else(|e| e.into_inner()).0;
                continue;
            }
            let settled = s.replied.map_or(now, |t| t + SETTLE);
            drop(files);
            std::thread::sleep(settled.saturating_duration_since(now));
            files = lock(&self.files);
        }
    }
}

impl Drop for Truncating<'_> {
    fn drop(&mut self) {
        let mut files = lock(&self.fence.files);
        if let Some(s) = files.get_mut(&self.ino) {
            s.in_flight = s.in_flight.saturating_sub(1);
            s.replied = Some(Instant::now());
        }
        drop(files);
        self.fence.replied.notify_all();
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn bytes(n: usize) -> impl FnMut() -> Result<Vec<u8>, ()> {
        move || Ok(vec![1; n])
    }

    #[test]
    fn a_read_of_an_untouched_file_is_not_held() {
        let f = TruncationFence::default();
        let t = Instant::now();
        assert_eq!(f.read_settled(7, 10, bytes(3)).map(|d| d.len()), Ok(3));
        drop(f.begin(8));
        std::thread::sleep(SETTLE);
        assert_eq!(f.read_settled(8, 10, bytes(0)).map(|d| d.len()), Ok(0));
        // Neither waited for a size change (that would be MAX_WAIT).
        assert!(t.elapsed() < MAX_WAIT / 2, "{:?}", t.elapsed());
        assert!(lock(&f.files).is_empty() && !f.any.load(Ordering::SeqCst));
    }

    #[test]
    fn a_read_waits_for_the_size_change_in_flight_and_for_it_to_settle_before_reading() {
        let f = Arc::new(TruncationFence::default());
        let truncation = f.begin(1);
        let reader = {
            let f = Arc::clone(&f);
            std::thread::spawn(move || {
                let mut read_at = None;
                let r = f.read_settled(1, 10, || {
                    read_at = Some(Instant::now());
                    Ok::<_, ()>(Vec::new())
                });
                (r, read_at)
            })
        };
        std::thread::sleep(Duration::from_millis(50));
        let replied = Instant::now();
        drop(truncation);
        let (r, read_at) = reader.join().unwrap_or_else(|_| panic!("the reader panicked"));
        assert_eq!(r, Ok(Vec::new()));
        let read_at = read_at.unwrap_or_else(|| panic!("never read"));
        assert!(read_at >= replied + SETTLE, "read {:?} after the reply", read_at - replied);
    }

    #[test]
    fn a_short_read_that_raced_a_size_change_beginning_reads_again() {
        let f = TruncationFence::default();
        let mut reads = 0;
        let r = f.read_settled(5, 10, || {
            reads += 1;
            if reads == 1 {
                // The size change begins (and is answered) while this read runs.
                drop(f.begin(5));
                return Ok(vec![1; 4]);
            }
            Ok::<_, ()>(Vec::new())
        });
        assert_eq!((r, reads), (Ok(Vec::new()), 2));
        // A full read is not repeated, whatever began meanwhile.
        let mut reads = 0;
        let r = f.read_settled(6, 4, || {
            reads += 1;
            drop(f.begin(6));
            Ok::<_, ()>(vec![1; 4])
        });
        assert_eq!((r.map(|d| d.len()), reads), (Ok(4), 1));
    }

    #[test]
    fn a_stuck_size_change_holds_a_read_for_a_bounded_time() {
        let f = TruncationFence::default();
        let _stuck = f.begin(3);
        let t = Instant::now();
        assert!(f.read_settled(3, 1, bytes(1)).is_ok());
        assert!(t.elapsed() >= MAX_WAIT && t.elapsed() < MAX_WAIT * 3, "{:?}", t.elapsed());
    }
}
