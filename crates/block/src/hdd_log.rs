//! Which blocks the HDD image took writes to since its last sync. A commit forced by slot
//! pressure ([`crate::mover::commit_for_slots`]) syncs the HDD only when a block it drops from
//! the table is among them: the checkpoint then sends that block's reads to the HDD, so the
//! HDD's bytes must be durable first. Otherwise the HDD's last sync already made them so, and
//! the commit touches the SSD alone, as dm-cache commits to its metadata device only.

use std::collections::HashSet;
use std::io;
use std::sync::{Arc, Mutex, PoisonError};

use crate::backend::{Backend, Dev};

/// The blocks written (or discarded) on the HDD image since its last sync began.
#[derive(Debug)]
pub(crate) struct HddWriteLog {
    block_size: u64,
    /// The virtual device's bytes on the HDD; writes past them are metadata.
    data_len: u64,
    unsynced: Mutex<Unsynced>,
}

/// At most [`MAX_LOGGED`] blocks; past that, every block counts as unsynced until the next
/// sync (a client that never flushes, on a table that does not change, is never synced: the
/// log must not grow with the device).
#[derive(Debug, Default)]
struct Unsynced {
    blocks: HashSet<u64>,
    overflowed: bool,
}

const MAX_LOGGED: usize = 1 << 16;

impl HddWriteLog {
    pub(crate) fn new(block_size: u64, data_len: u64) -> HddWriteLog {
        HddWriteLog { block_size, data_len, unsynced: Mutex::new(Unsynced::default()) }
    }

    fn set(&self) -> std::sync::MutexGuard<'_, Unsynced> {
        self.unsynced.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn note(&self, off: u64, len: u64) {
        let end = off.saturating_add(len).min(self.data_len);
        if off >= end {
            return;
        }
        let mut set = self.set();
        if set.overflowed {
            return;
        }
        for block in off / self.block_size..end.div_ceil(self.block_size) {
            set.blocks.insert(block);
        }
        if set.blocks.len() > MAX_LOGGED {
            *set = Unsynced { blocks: HashSet::new(), overflowed: true };
        }
    }

    /// Whether any of `blocks` took a write the HDD has not synced yet.
    pub(crate) fn any_unsynced(&self, blocks: &[u64]) -> bool {
        let set = self.set();
        if set.overflowed {
            return !blocks.is_empty();
        }
        !set.blocks.is_empty() && blocks.iter().any(|b| set.blocks.contains(b))
    }
}

/// A backend that records the HDD's writes in an [`HddWriteLog`]. A sync takes the log's
/// blocks before it starts (a write logged after that stays logged) and gives them back if it
/// fails.
pub(crate) struct Logged {
    pub(crate) inner: Arc<dyn Backend>,
    pub(crate) log: Arc<HddWriteLog>,
}

impl Backend for Logged {
    fn read(&self, dev: Dev, buf: &mut [u8], off: u64) -> io::Result<()> {
        self.inner.read(dev, buf, off)
    }
    fn write(&self, dev: Dev, buf: &[u8], off: u64) -> io::Result<()> {
        let r = self.inner.write(dev, buf, off);
        // Logged once the write is done (failed ones too: part of it may have landed). Logged
        // before it, a sync could take the log, start, and miss the write still under way,
        // leaving it unsynced and unlogged; logged after, a sync that takes the log first
        // started after the write was done and covers it.
        if dev == Dev::Hdd {
            self.log.note(off, buf.len() as u64);
        }
        r
    }
    fn sync(&self, dev: Dev) -> io::Result<()> {
        if dev != Dev::Hdd {
            return self.inner.sync(dev);
        }
        let taken = std::mem::take(&mut *self.log.set());
        let r = self.inner.sync(dev);
        if r.is_err() {
            let mut set = self.log.set();
            set.overflowed |= taken.overflowed;
            set.blocks.extend(taken.blocks);
        }
        r
    }
    fn discard(&self, dev: Dev, off: u64, len: u64) -> io::Result<()> {
        let r = self.inner.discard(dev, off, len);
        if dev == Dev::Hdd {
            self.log.note(off, len);
        }
        r
    }
    fn len(&self, dev: Dev) -> io::Result<u64> {
        self.inner.len(dev)
    }
    fn grow(&self, dev: Dev, len: u64) -> io::Result<()> {
        self.inner.grow(dev, len)
    }
    fn is_hole(&self, dev: Dev, off: u64, len: u64) -> io::Result<bool> {
        self.inner.is_hole(dev, off, len)
    }
    fn holes(&self, dev: Dev, off: u64, bs: u64, n: usize) -> io::Result<Vec<bool>> {
        self.inner.holes(dev, off, bs, n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::MemBackend;

    #[test]
    fn a_write_stays_logged_until_a_sync_succeeds() {
        let log = Arc::new(HddWriteLog::new(4096, 64 * 4096));
        let b = Logged { inner: Arc::new(MemBackend::new(1 << 20, 64 * 4096 + (1 << 20))), log: Arc::clone(&log) };
        b.write(Dev::Hdd, &[1; 8192], 4096 + 512).expect("write");
        b.write(Dev::Ssd, &[1; 4096], 0).expect("write");
        assert!(log.any_unsynced(&[1]) && log.any_unsynced(&[3]) && !log.any_unsynced(&[0, 4]));
        b.sync(Dev::Ssd).expect("sync");
        assert!(log.any_unsynced(&[2]), "an SSD sync leaves the HDD's writes unsynced");
        b.sync(Dev::Hdd).expect("sync");
        assert!(!log.any_unsynced(&[1, 2, 3]));
        b.discard(Dev::Hdd, 10 * 4096, 4096).expect("discard");
        assert!(log.any_unsynced(&[10]), "a discard changes what the block reads");
        b.write(Dev::Hdd, &[1; 4096], 64 * 4096).expect("metadata write");
        assert!(!log.any_unsynced(&[64]), "metadata past the data is not a block");
    }

    /// An image whose HDD writes wait at a gate until the test opens it.
    struct Gated {
        inner: MemBackend,
        entered: std::sync::mpsc::SyncSender<()>,
        open: Mutex<std::sync::mpsc::Receiver<()>>,
    }

    impl Backend for Gated {
        fn read(&self, dev: Dev, buf: &mut [u8], off: u64) -> io::Result<()> {
            self.inner.read(dev, buf, off)
        }
        fn write(&self, dev: Dev, buf: &[u8], off: u64) -> io::Result<()> {
            let _ = self.entered.send(());
            let _ = self.open.lock().unwrap_or_else(PoisonError::into_inner).recv();
            self.inner.write(dev, buf, off)
        }
        fn sync(&self, dev: Dev) -> io::Result<()> {
            self.inner.sync(dev)
        }
        fn discard(&self, dev: Dev, off: u64, len: u64) -> io::Result<()> {
            self.inner.discard(dev, off, len)
        }
        fn len(&self, dev: Dev) -> io::Result<u64> {
            self.inner.len(dev)
        }
        fn grow(&self, dev: Dev, len: u64) -> io::Result<()> {
            self.inner.grow(dev, len)
        }
    }

    #[test]
    fn a_write_under_way_while_a_sync_starts_stays_logged() {
        let (entered_tx, entered) = std::sync::mpsc::sync_channel(1);
        let (open, open_rx) = std::sync::mpsc::sync_channel(1);
        let inner =
            Gated { inner: MemBackend::new(1 << 20, 64 * 4096), entered: entered_tx, open: Mutex::new(open_rx) };
        let log = Arc::new(HddWriteLog::new(4096, 64 * 4096));
        let b = Arc::new(Logged { inner: Arc::new(inner), log: Arc::clone(&log) });
        let writer = {
            let b = Arc::clone(&b);
            std::thread::spawn(move || b.write(Dev::Hdd, &[7; 4096], 5 * 4096))
        };
        entered.recv().expect("the write started");
        // The sync starts (and ends) while the write is still under way: it may not cover it.
        b.sync(Dev::Hdd).expect("sync");
        open.send(()).expect("open the gate");
        writer.join().expect("writer").expect("write");
        assert!(log.any_unsynced(&[5]), "a write the sync may have missed must stay logged");
    }

    #[test]
    fn a_log_past_its_bound_counts_every_block_until_the_next_sync() {
        let blocks = MAX_LOGGED as u64 + 8;
        let log = Arc::new(HddWriteLog::new(512, blocks * 512));
        let b = Logged { inner: Arc::new(MemBackend::new(1 << 20, blocks * 512)), log: Arc::clone(&log) };
        b.write(Dev::Hdd, &vec![1; (blocks * 512) as usize], 0).expect("write");
        assert!(log.set().blocks.is_empty(), "the log holds no more than its bound");
        assert!(log.any_unsynced(&[blocks + 100]), "past its bound, every block counts as unsynced");
        assert!(!log.any_unsynced(&[]));
        b.sync(Dev::Hdd).expect("sync");
        assert!(!log.any_unsynced(&[0, 1, 2]));
    }
}
