//! When the kernel's cached pages of a file are dropped: never while another handle may be
//! writing it.
//!
//! Without the writeback cache, a buffered write copies its bytes into the file's cached pages
//! first and sends WRITE after. A regular open answered without `FOPEN_KEEP_CACHE` makes the
//! kernel drop the file's pages; if that happens between another writer's copy and its WRITE
//! reaching us, and a READ of such a page is answered before the write lands, the kernel
//! caches the old bytes — zeros past the old end, for an append — as up to date and keeps them
//! after the write completes: a reader sees zeros for bytes already written. The kernel drops
//! the pages after our answer to the OPEN, so nothing we do while answering can order it
//! against a writer opening at the same moment.
//!
//! So the daemon drops them itself (`FUSE_NOTIFY_INVAL_INODE`) and answers every regular open
//! with `FOPEN_KEEP_CACHE`. An open drops the pages only when no regular handle of the file is
//! open for writing (every page then holds what the tiers hold), and a writer's open waits
//! until a drop in progress is over. With a writer open, the cached pages are current — every
//! change of the file's bytes passes through them — and are kept; the reads they serve do
//! not reach the policy, as they would not with the kernel cache.
//!
//! While another handle of the file is open, a drop keeps the page that holds the end of the
//! file (see [`whole_pages`]): a reader may still be copying from it, and an append after the
//! drop would otherwise land in a new page while that reader copies the old one's zero-filled
//! tail up to the new size. Reads of a last page kept so do not reach the policy (the open
//! does).
//!
//! A drop runs in the request thread of the open that needs it (a hand-off to another thread
//! cost ~60 µs per open here, three times the drop). It waits for pages locked by reads in
//! flight, which need a free request thread to be answered, and a read can wait for a whole
//! move of its file; so at most half the request threads drop pages at once, and a drop past
//! that runs on a thread of its own ([`MAX_DROPPERS`] at most, so that one stuck behind a move
//! does not hold up another), which an open waits for only so long: past that, the open is
//! answered as before and the kernel drops the pages itself.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use fuser::{FopenFlags, INodeNo, Notifier};

/// Files are spread over this many independent locks.
const SHARDS: usize = 16;
/// How long an open waits for the daemon's drop of the file's pages (normally microseconds:
/// it only waits for reads in flight).
const DROP_WAIT: Duration = Duration::from_secs(2);
/// At most this many drops run at once (each may be stuck behind a move).
const MAX_DROPPERS: usize = 16;
/// A dropping thread beyond the first ends after this long without work.
const DROPPER_IDLE: Duration = Duration::from_secs(5);

/// The handle of a regular open for writing (counted here).
pub(crate) const WRITER_FH: u64 = 2;

#[derive(Default)]
struct Shard {
    files: Mutex<HashMap<u64, FileState>>,
    changed: Condvar,
}

#[derive(Default)]
struct FileState {
    /// Regular handles open for writing.
    writers: u32,
    /// A drop of the file's pages is queued or running.
    dropping: bool,
    /// Drops of the file's pages finished (an open waiting for one sees it change).
    drops: u64,
    /// Opens waiting for a drop.
    waiters: u32,
}

impl FileState {
    fn idle(&self) -> bool {
        self.writers == 0 && !self.dropping && self.waiters == 0
    }
}

#[derive(Default)]
struct Shards([Shard; SHARDS]);

impl Shards {
    fn of(&self, ino: u64) -> &Shard {
        // Inode numbers are sequential: the low bits spread them.
        &self.0[(ino as usize) % SHARDS]
    }

    /// A drop of file `ino`'s pages is over.
    fn dropped(&self, ino: u64) {
        let shard = self.of(ino);
        let mut files = lock(&shard.files);
        if let Some(f) = files.get_mut(&ino) {
            f.dropping = false;
            f.drops += 1;
            if f.idle() {
                files.remove(&ino);
            }
        }
        drop(files);
        shard.changed.notify_all();
    }
}

type DropPages = dyn Fn(u64) -> std::io::Result<()> + Send + Sync;

/// The threads that drop pages, and their queue.
struct Droppers {
    queue: Mutex<DropQueue>,
    work: Condvar,
    drop_pages: Box<DropPages>,
    shards: Arc<Shards>,
}

#[derive(Default)]
struct DropQueue {
    pending: VecDeque<u64>,
    threads: usize,
    idle: usize,
    closed: bool,
}

impl Droppers {
    /// Queues a drop of file `ino`'s pages; starts a thread when none is free.
    fn submit(self: &Arc<Self>, ino: u64) -> std::io::Result<()> {
        let mut q = lock(&self.queue);
        if q.idle == 0 && q.threads < MAX_DROPPERS {
            let me = Arc::clone(self);
            std::thread::Builder::new().name("page-drops".into()).spawn(move || me.serve())?;
            q.threads += 1;
        }
        q.pending.push_back(ino);
        drop(q);
        self.work.notify_one();
        Ok(())
    }

    /// Drops file `ino`'s pages in this thread.
    fn drop_now(&self, ino: u64) {
        // ENOENT: the kernel holds nothing of the file. Any other failure (the connection is
        // gone) leaves nothing to protect either.
        let _ = (self.drop_pages)(ino);
        self.shards.dropped(ino);
    }

    fn serve(&self) {
        let mut q = lock(&self.queue);
        loop {
            if let Some(ino) = q.pending.pop_front() {
                drop(q);
                self.drop_now(ino);
                q = lock(&self.queue);
                continue;
            }
            if q.closed {
                break;
            }
            q.idle += 1;
            let (next, waited) = self.work.wait_timeout(q, DROPPER_IDLE).unwrap_or_else(PoisonError::into_inner);
            q = next;
            q.idle -= 1;
            if waited.timed_out() && q.pending.is_empty() && q.threads > 1 {
                break;
            }
        }
        q.threads -= 1;
    }
}

/// Regular handles open for writing, and drops of cached pages, per file.
pub(crate) struct PageCache {
    shards: Arc<Shards>,
    /// The dropping threads; unset until the session gives a notifier.
    droppers: OnceLock<Arc<Droppers>>,
    /// Request threads that may drop pages themselves now.
    inline_slots: AtomicUsize,
    /// How long an open waits for a drop on another thread.
    drop_wait: Duration,
}

impl Default for PageCache {
    fn default() -> Self {
        PageCache::waiting(DROP_WAIT)
    }
}

impl Drop for PageCache {
    fn drop(&mut self) {
        if let Some(d) = self.droppers.get() {
            lock(&d.queue).closed = true;
            d.work.notify_all();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl PageCache {
    /// Opens wait up to `drop_wait` for a drop.
    fn waiting(drop_wait: Duration) -> Self {
        PageCache { shards: Arc::default(), droppers: OnceLock::new(), inline_slots: AtomicUsize::new(0), drop_wait }
    }

    /// Drops pages through `notifier` from now on, `request_threads` serving the session (the
    /// first call; later ones do nothing). `others_open` tells whether a file has a handle open
    /// besides the opener's; `size_of` gives its size now (`None`: unknown).
    pub(crate) fn start(
        &self,
        notifier: Notifier,
        request_threads: usize,
        others_open: impl Fn(u64) -> bool + Send + Sync + 'static,
        size_of: impl Fn(u64) -> Option<u64> + Send + Sync + 'static,
    ) {
        let page = page_size();
        self.start_with(request_threads, move |ino| {
            let (offset, len) = drop_range(others_open(ino), || size_of(ino), page);
            notifier.inval_inode(INodeNo(ino), offset, len)
        });
    }

    /// [`Self::start`] with `drop_pages` for the kernel's notification (tests).
    fn start_with(
        &self,
        request_threads: usize,
        drop_pages: impl Fn(u64) -> std::io::Result<()> + Send + Sync + 'static,
    ) {
        self.inline_slots.store(request_threads / 2, Ordering::Release);
        let _ = self.droppers.set(Arc::new(Droppers {
            queue: Mutex::new(DropQueue::default()),
            work: Condvar::new(),
            drop_pages: Box::new(drop_pages),
            shards: Arc::clone(&self.shards),
        }));
    }

    /// How a regular open of file `ino` is answered (`writable`: for writing) under the page
    /// cache: with `FOPEN_KEEP_CACHE` when we dropped the pages (or must keep them), without
    /// it — the kernel then drops them, as FUSE does by default — when we could not.
    pub(crate) fn open(&self, ino: u64, writable: bool) -> FopenFlags {
        let Some(droppers) = self.droppers.get() else {
            return FopenFlags::empty();
        };
        let shard = self.shards.of(ino);
        let deadline = Instant::now() + self.drop_wait;
        let mut files = lock(&shard.files);
        let f = files.entry(ino).or_default();
        if writable {
            f.writers += 1;
        }
        // With another writer open, the pages are current: keep them.
        if f.writers > u32::from(writable) {
            return FopenFlags::FOPEN_KEEP_CACHE;
        }
        // No other writer: drop the pages, or join a drop under way (every writer waits for
        // it, so the pages it leaves are current).
        let seen = f.drops;
        if !f.dropping && self.take_inline_slot() {
            f.dropping = true;
            drop(files);
            droppers.drop_now(ino);
            self.inline_slots.fetch_add(1, Ordering::AcqRel);
            return FopenFlags::FOPEN_KEEP_CACHE;
        }
        if !f.dropping {
            if droppers.submit(ino).is_err() {
                return FopenFlags::empty();
            }
            f.dropping = true;
        }
        f.waiters += 1;
        let flags = loop {
            let now = Instant::now();
            if now >= deadline {
                break FopenFlags::empty();
            }
            files = shard.changed.wait_timeout(files, deadline - now).unwrap_or_else(PoisonError::into_inner).0;
            if files.get(&ino).is_none_or(|f| f.drops != seen) {
                break FopenFlags::FOPEN_KEEP_CACHE;
            }
        };
        if let Some(f) = files.get_mut(&ino) {
            f.waiters -= 1;
            if f.idle() {
                files.remove(&ino);
            }
        }
        flags
    }

    fn take_inline_slot(&self) -> bool {
        self.inline_slots.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1)).is_ok()
    }

    /// A regular handle of file `ino` open for writing was released.
    pub(crate) fn release_writer(&self, ino: u64) {
        let mut files = lock(&self.shards.of(ino).files);
        if let Some(f) = files.get_mut(&ino) {
            f.writers = f.writers.saturating_sub(1);
            if f.idle() {
                files.remove(&ino);
            }
        }
    }
}

/// The `(offset, len)` of a file's pages to drop, as `FUSE_NOTIFY_INVAL_INODE` takes it:
/// `(0, 0)` for every page when no other handle is open, else [`whole_pages`] of its size;
/// `(-1, 0)` (the attributes only) when that leaves none or the size is unknown.
fn drop_range(others_open: bool, size: impl FnOnce() -> Option<u64>, page: u64) -> (i64, i64) {
    if !others_open {
        return (0, 0);
    }
    size().and_then(|size| whole_pages(size, page)).unwrap_or((-1, 0))
}

/// The byte range `(offset, len)` of a file of `size` bytes whose pages are dropped while
/// another handle of it is open: every page before the one holding the end of the file, none
/// if there are none.
///
/// The last page is kept. A READ of it was answered short and the kernel zero-filled the rest;
/// a reader copying from it checks the file's size only after it has the page. Were the page
/// dropped under that reader, an append would go into a new page and raise the size, and the
/// reader would copy the old page's zeros up to the new size: bytes just written, read as
/// zeros. Kept, the append goes into the page the reader holds. (Pages before it are whole
/// and no write is in flight when pages are dropped, so their copies are current.) With no
/// other handle open no reader can be copying, and every page goes: a kept last page that a
/// partial write left not up to date would cost a READ of its own.
fn whole_pages(size: u64, page: u64) -> Option<(i64, i64)> {
    let len = size - size % page.max(1);
    (len > 0).then(|| (0, i64::try_from(len).unwrap_or(i64::MAX)))
}

/// The kernel's page size.
fn page_size() -> u64 {
    nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE)
        .ok()
        .flatten()
        .and_then(|n| u64::try_from(n).ok())
        .unwrap_or(4096)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    const KEEP: FopenFlags = FopenFlags::FOPEN_KEEP_CACHE;

    /// A page cache whose drops are counted, and held until `gate` lets each one go.
    fn counted(wait: Duration) -> (Arc<PageCache>, Arc<AtomicUsize>, std::sync::mpsc::SyncSender<()>) {
        let pc = Arc::new(PageCache::waiting(wait));
        let drops = Arc::new(AtomicUsize::new(0));
        let (gate, release) = std::sync::mpsc::sync_channel::<()>(64);
        let release = Mutex::new(release);
        let counter = Arc::clone(&drops);
        pc.start_with(0, move |_| {
            let _ = lock(&release).recv();
            counter.fetch_add(1, Ordering::SeqCst);
            Ok(())
        });
        (pc, drops, gate)
    }

    #[test]
    fn with_another_handle_open_a_drop_spares_the_last_page_and_alone_it_drops_all() {
        let unused = || -> Option<u64> { panic!("the size is not needed when no other handle is open") };
        assert_eq!(drop_range(false, unused, 4096), (0, 0), "alone: every page");
        assert_eq!(drop_range(true, || Some(42_793), 4096), (0, 40_960), "shared: all but the last page");
        assert_eq!(drop_range(true, || Some(300), 4096), (-1, 0), "shared, one page: the attributes only");
        assert_eq!(drop_range(true, || None, 4096), (-1, 0), "shared, size unknown: nothing dropped");
    }

    #[test]
    fn the_page_holding_the_end_of_the_file_is_kept() {
        assert_eq!(whole_pages(0, 4096), None);
        assert_eq!(whole_pages(4095, 4096), None, "a file within one page keeps it");
        assert_eq!(whole_pages(4096, 4096), Some((0, 4096)), "the page after the end is kept");
        assert_eq!(whole_pages(42_793, 4096), Some((0, 40_960)));
        assert_eq!(whole_pages(u64::MAX, 4096), Some((0, i64::MAX)));
        assert!(page_size().is_power_of_two());
    }

    #[test]
    fn without_a_notifier_the_kernel_drops_the_pages() {
        let pc = PageCache::default();
        assert_eq!(pc.open(1, false), FopenFlags::empty());
        assert_eq!(pc.open(1, true), FopenFlags::empty());
    }

    #[test]
    fn an_open_drops_the_pages_itself_unless_another_handle_writes() {
        let (pc, drops, gate) = counted(Duration::from_secs(30));
        gate.send(()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(pc.open(5, false), KEEP);
        assert_eq!(drops.load(Ordering::SeqCst), 1);
        // A writer's own open drops them too (no one else can be writing)...
        gate.send(()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(pc.open(5, true), KEEP);
        assert_eq!(drops.load(Ordering::SeqCst), 2);
        // ...but while it is open, no open drops them: its copies may be on their way.
        assert_eq!(pc.open(5, false), KEEP);
        assert_eq!(pc.open(5, true), KEEP);
        assert_eq!(drops.load(Ordering::SeqCst), 2);
        // Both writers gone: opens drop the pages again.
        pc.release_writer(5);
        pc.release_writer(5);
        gate.send(()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(pc.open(5, false), KEEP);
        assert_eq!(drops.load(Ordering::SeqCst), 3);
        assert!(lock(&pc.shards.of(5).files).is_empty(), "an idle file is forgotten");
    }

    #[test]
    fn a_writer_waits_for_a_drop_under_way_and_a_drop_too_slow_leaves_it_to_the_kernel() {
        let (pc, drops, gate) = counted(Duration::from_secs(30));
        let reader = {
            let pc = Arc::clone(&pc);
            std::thread::spawn(move || pc.open(9, false))
        };
        while lock(&pc.shards.of(9).files).get(&9).is_none_or(|f| !f.dropping) {
            std::thread::sleep(Duration::from_millis(1));
        }
        let writer = {
            let pc = Arc::clone(&pc);
            std::thread::spawn(move || pc.open(9, true))
        };
        std::thread::sleep(Duration::from_millis(100));
        assert!(!writer.is_finished(), "the writer's open did not wait for the drop");
        gate.send(()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(writer.join().unwrap_or_else(|_| panic!("writer")), KEEP);
        assert_eq!(reader.join().unwrap_or_else(|_| panic!("reader")), KEEP);
        assert_eq!(drops.load(Ordering::SeqCst), 1, "one drop served both opens");

        let (pc, _, gate) = counted(Duration::from_millis(50));
        assert_eq!(pc.open(3, false), FopenFlags::empty());
        gate.send(()).unwrap_or_else(|e| panic!("{e}"));
    }

    #[test]
    fn a_drop_stuck_behind_one_file_does_not_hold_up_another() {
        let pc = PageCache::waiting(Duration::from_secs(30));
        let (unstick, stuck) = std::sync::mpsc::channel::<()>();
        let stuck = Mutex::new(stuck);
        pc.start_with(0, move |ino| {
            if ino == 1 {
                let _ = lock(&stuck).recv();
            }
            Ok(())
        });
        let pc = Arc::new(pc);
        let first = {
            let pc = Arc::clone(&pc);
            std::thread::spawn(move || pc.open(1, false))
        };
        while lock(&pc.shards.of(1).files).get(&1).is_none_or(|f| !f.dropping) {
            std::thread::sleep(Duration::from_millis(1));
        }
        let started = Instant::now();
        assert_eq!(pc.open(2, true), KEEP);
        assert!(started.elapsed() < Duration::from_secs(5), "the second file's drop waited for the first's");
        assert!(!first.is_finished());
        unstick.send(()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(first.join().unwrap_or_else(|_| panic!("first")), KEEP);
    }

    #[test]
    fn an_open_drops_the_pages_in_its_own_thread_while_half_the_threads_are_free() {
        let pc = PageCache::waiting(Duration::from_secs(30));
        let (tx, rx) = std::sync::mpsc::channel();
        let tx = Mutex::new(tx);
        pc.start_with(4, move |_| {
            let _ = lock(&tx).send(std::thread::current().id());
            Ok(())
        });
        assert_eq!(pc.open(4, false), KEEP);
        assert_eq!(rx.recv().ok(), Some(std::thread::current().id()));
        assert_eq!(pc.inline_slots.load(Ordering::SeqCst), 2, "the slot was given back");
    }
}
