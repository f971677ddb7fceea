//! The hybrid device: its shared state, its public operations and its lock order.
//!
//! # Concurrency
//! - One lock per block (striped: a block's stripe is `block % STRIPES`) orders data I/O
//!   against moves: reads hold their blocks' stripes shared, writes exclusively (a write may
//!   allocate the block's slot or read-modify-write a partial sector), and the mover holds the
//!   stripe of the block it moves exclusively for the whole copy and its completion. So the
//!   work an access issued starts after that access's I/O, and no write races a copy. A
//!   write-back is the exception: it writes the HDD without the stripe, and what touches the
//!   block's HDD bytes waits for it instead (`Core::cleaning`, `crate::mover::write_back`).
//! - The engine, the slot table and the work queue live under one core lock, held only to
//!   decide, never across I/O.
//! - A slot an I/O is using is pinned (a counter outside the lock): it is not handed to another
//!   block until the I/O is done, even if its block was evicted meanwhile.
//! - Lock order: stripes (ascending), then the commit lock, then the core lock.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tierwise_core::driver::{Route, WorkQueue};
use tierwise_core::{Clock, Engine, Level, Nanos, ObjectId, WorkKind};

use crate::backend::Backend;
use crate::error::DeviceError;
use crate::format::{Layout, Superblock};
use crate::slots::Slots;

pub(crate) const STRIPES: usize = 1024;

/// Time since the device opened, for the engine (which never reads the OS clock itself).
#[derive(Clone, Debug)]
pub struct SysClock(Instant);

impl SysClock {
    /// A clock starting now.
    pub fn new() -> SysClock {
        SysClock(Instant::now())
    }
}

impl Default for SysClock {
    fn default() -> Self {
        SysClock::new()
    }
}

impl Clock for SysClock {
    fn now(&self) -> Nanos {
        Nanos(self.0.elapsed().as_nanos().min(u128::from(u64::MAX)) as u64)
    }
}

/// How a device is served.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    /// Architecture spec (`cache:mode=write-back`, ...).
    pub spec: String,
    /// Background threads executing the engine's work (moves in flight at most).
    pub movers: usize,
    /// A checkpoint is committed at least this often while the table changes (dm-cache: 1 s).
    pub commit_interval: Duration,
    /// Bytes per second the movers may copy in total (0: unlimited).
    pub move_rate: u64,
    /// What the backend emulates (labels for stats; see [`crate::Emulated`]).
    pub emulation: Vec<String>,
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            spec: "cache:mode=write-back".into(),
            movers: 2,
            commit_interval: Duration::from_secs(1),
            move_rate: 0,
            emulation: Vec::new(),
        }
    }
}

/// Counters, for `stats` and metrics.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DeviceStats {
    /// Bytes read by clients.
    pub read_bytes: u64,
    /// Bytes written by clients.
    pub write_bytes: u64,
    /// Client reads served, per level (ram, ssd, hdd).
    pub reads_by_level: [u64; 3],
    /// Client writes acknowledged, per slowest level written.
    pub writes_by_level: [u64; 3],
    /// Work executed, by kind (promote, demote, copy, writeback), and its bytes.
    pub moves_done: [u64; 4],
    /// Work that failed (I/O errors).
    pub moves_failed: u64,
    /// Bytes copied by work.
    pub moved_bytes: u64,
    /// Copies into the SSD that took their bytes from the read that missed instead of
    /// reading the HDD again.
    pub fills_from_ram: u64,
    /// Checkpoints committed.
    pub commits: u64,
    /// Of those, commits forced by slot pressure that wrote and synced the SSD only: no block
    /// they dropped had HDD bytes waiting for a sync.
    #[serde(default)]
    pub ssd_only_commits: u64,
    /// Flushes and FUA writes handled.
    pub flushes: u64,
    /// Work queued or running now.
    pub queued: u64,
    /// Slots holding a block.
    pub slots_used: u64,
    /// Slots in all.
    pub slots: u64,
    /// SSD bytes the architecture may fill (the slots less a few kept spare).
    pub ssd_capacity: u64,
    /// Dirty bytes on the SSD.
    pub dirty_bytes: u64,
    /// Answers the device could not act on as given (a read served by the SSD with no slot):
    /// always 0 unless an architecture breaks its contract; tests assert it.
    pub anomalies: u64,
    /// Client writes kept in a moving sub-LUN's temporary buffer (`otf-ast`, `static-tiering`).
    pub buffered_writes: u64,
    /// Sub-LUN moves whose buffer was merged into the new home.
    pub buffer_merges: u64,
    /// Sectors held in temporary buffers now.
    pub buffered_sectors: u64,
}

/// What the core lock protects.
pub(crate) struct Core {
    pub(crate) engine: Engine<SysClock>,
    pub(crate) slots: Slots,
    /// Work taken from the engine and not finished: in issue order for the movers, per block
    /// for the accesses that must wait for it.
    pub(crate) work: WorkQueue,
    /// Blocks whose queued copy may take its bytes from the read that missed (the engine's
    /// `source_in_ram`), and those bytes once that read has them: the copy then writes the
    /// SSD without reading the HDD a second time.
    pub(crate) want_ram: HashSet<u64>,
    /// RAM copies held for the architecture (shared with [`Shared::ram`]): an invalidation
    /// from RAM drops one.
    pub(crate) ram: Arc<crate::ram::RamCopies>,
    pub(crate) ram_fill: HashMap<u64, Vec<u8>>,
    /// Blocks whose write-back is writing the HDD without holding the block's stripe
    /// (`crate::mover::write_back`): other work on the block, and client writes that reach the
    /// HDD, wait until it is done.
    pub(crate) cleaning: HashSet<u64>,
    /// With the SSD detached after failing: blocks whose only current copy it held
    /// (`crate::failover`).
    pub(crate) lost: HashSet<u64>,
    /// The slot table changed since the last commit.
    pub(crate) table_changed: bool,
    pub(crate) stopping: bool,
    pub(crate) stats: DeviceStats,
}

/// State shared by client threads and movers.
pub(crate) struct Shared {
    pub(crate) core: Mutex<Core>,
    pub(crate) work_ready: Condvar,
    pub(crate) work_done: Condvar,
    pub(crate) stripes: Vec<RwLock<()>>,
    pub(crate) pins: Vec<AtomicU32>,
    pub(crate) backend: Arc<dyn Backend>,
    pub(crate) ssd_sb: Superblock,
    pub(crate) hdd_sb: Superblock,
    pub(crate) opts: ServeOptions,
    pub(crate) commit_lock: Mutex<u64>,
    /// RAM copies of blocks being moved (`RamLevel::MoveCopies`) or held in a RAM cache
    /// level (`RamLevel::Cache`).
    pub(crate) ram: Arc<crate::ram::RamCopies>,
    pub(crate) ram_level: tierwise_core::arch::RamLevel,
    /// Sub-LUNs being moved and the sectors written to them meanwhile (`RamLevel::WriteBuffer`).
    pub(crate) wbuf: crate::subluns::WriteBuffers,
    pub(crate) moved_at: AtomicU64,
    pub(crate) move_rate: AtomicU64,
    pub(crate) started: Instant,
    /// I/O errors by image and operation, and the state they put the device in.
    pub(crate) health: Arc<crate::health::Health>,
    /// Blocks the HDD took writes to since its last sync (commits forced by slot pressure).
    pub(crate) hdd_log: Arc<crate::hdd_log::HddWriteLog>,
    /// Mean time of a client's HDD write lately, in ns (`crate::write_runs`).
    pub(crate) hdd_write_ns: AtomicU64,
}

impl Shared {
    pub(crate) fn lock(&self) -> MutexGuard<'_, Core> {
        self.core.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
    pub(crate) fn block_size(&self) -> u64 {
        self.ssd_sb.block_size
    }
    pub(crate) fn size(&self) -> u64 {
        self.ssd_sb.virtual_size()
    }
    pub(crate) fn layout(&self) -> Layout {
        self.ssd_sb.layout
    }
    /// Byte offset of slot `slot` on the SSD image.
    pub(crate) fn slot_offset(&self, slot: u32) -> u64 {
        self.ssd_sb.ssd_data_start() + u64::from(slot) * self.block_size()
    }
    pub(crate) fn stripe(&self, block: u64) -> &RwLock<()> {
        &self.stripes[(block % STRIPES as u64) as usize]
    }
    pub(crate) fn pin(&self, slot: u32) {
        self.pins[slot as usize].fetch_add(1, Ordering::AcqRel);
    }
    pub(crate) fn unpin(&self, slot: u32) {
        self.pins[slot as usize].fetch_sub(1, Ordering::AcqRel);
    }
}

impl Core {
    /// Takes the engine's new work: invalidations apply now (the slot waits for a commit), the
    /// rest is queued for the movers.
    pub(crate) fn drain(&mut self) -> bool {
        for w in self.engine.pending_work() {
            crate::trace::note(w.obj.0, || format!("issued {:?} {:?}->{:?}", w.kind, w.from, w.to));
            if w.kind.needs_completion() && w.source_in_ram && w.from == tierwise_core::Level::Slow {
                self.want_ram.insert(w.obj.0);
            }
        }
        let (ram, slots, table_changed) = (&self.ram, &mut self.slots, &mut self.table_changed);
        let queued = self.work.take_issued(&mut self.engine, |w| {
            if w.from == tierwise_core::Level::Ram {
                ram.drop_copy(w.obj.0);
            } else if w.from == tierwise_core::Level::Fast
                && slots.holds_at(w.obj.0, w.fast_addr)
                && slots.unmap(w.obj.0).is_some()
            {
                *table_changed = true;
            }
            Route::Applied
        });
        queued > 0
    }

    /// Makes the slot table agree with the engine about `block`: a slot the engine no longer
    /// counts as a valid copy is unmapped.
    pub(crate) fn reconcile(&mut self, block: u64) {
        if self.slots.slot_of(block).is_some() && !self.engine.placement(ObjectId(block)).on_fast {
            self.slots.unmap(block);
            self.table_changed = true;
        }
    }
}

/// A hybrid block device over an SSD image and an HDD image.
pub struct HybridDevice {
    pub(crate) shared: Arc<Shared>,
    movers: Mutex<Vec<JoinHandle<()>>>,
}

impl std::fmt::Debug for HybridDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HybridDevice").field("spec", &self.shared.opts.spec).field("size", &self.size()).finish()
    }
}

impl Drop for HybridDevice {
    /// Stops the movers without a final commit (as a crash would leave the images);
    /// [`HybridDevice::shutdown`] is the clean way.
    fn drop(&mut self) {
        self.shared.lock().stopping = true;
        self.shared.work_ready.notify_all();
        self.shared.work_done.notify_all();
        let movers = std::mem::take(&mut *self.movers.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
        for h in movers {
            let _ = h.join();
        }
    }
}

impl HybridDevice {
    pub(crate) fn from_shared(shared: Arc<Shared>) -> HybridDevice {
        HybridDevice { shared, movers: Mutex::new(Vec::new()) }
    }

    /// Starts the background movers and the committer. Call after any fork (nbdkit forks
    /// when it daemonizes): threads do not survive one.
    pub fn start(&self) {
        let mut movers = self.movers.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if !movers.is_empty() {
            return;
        }
        for i in 0..self.shared.opts.movers.max(1) {
            let s = Arc::clone(&self.shared);
            let h = std::thread::Builder::new()
                .name(format!("tierwise-mover-{i}"))
                .spawn(move || crate::mover::run(&s, i == 0));
            if let Ok(h) = h {
                movers.push(h);
            }
        }
    }

    /// The exported size in bytes.
    pub fn size(&self) -> u64 {
        self.shared.size()
    }

    /// Bytes per block.
    pub fn block_size(&self) -> u64 {
        self.shared.block_size()
    }

    /// What the images emulate (empty: the real devices).
    pub fn emulation(&self) -> &[String] {
        &self.shared.opts.emulation
    }

    /// Background moves executing at once, at most.
    pub fn movers(&self) -> usize {
        self.shared.opts.movers.max(1)
    }

    /// The architecture spec served.
    pub fn spec(&self) -> &str {
        &self.shared.opts.spec
    }

    /// Reads `buf.len()` bytes at `offset`.
    pub fn read(&self, buf: &mut [u8], offset: u64) -> Result<(), DeviceError> {
        let sh = &self.shared;
        if crate::failover::detached(sh) {
            return crate::failover::read_detached(sh, buf, offset);
        }
        crate::io::read(sh, buf, offset).or_else(|e| {
            crate::failover::after_error(sh);
            if crate::failover::detached(sh) { crate::failover::read_detached(sh, buf, offset) } else { Err(e) }
        })
    }

    /// Writes `buf` at `offset`; with `fua` it is durable (with the table that finds it) when
    /// this returns.
    pub fn write(&self, buf: &[u8], offset: u64, fua: bool) -> Result<(), DeviceError> {
        let sh = &self.shared;
        if crate::failover::detached(sh) {
            crate::failover::write_detached(sh, buf, offset)?;
        } else {
            crate::io::write(sh, buf, offset).or_else(|e| {
                crate::failover::after_error(sh);
                if crate::failover::detached(sh) { crate::failover::write_detached(sh, buf, offset) } else { Err(e) }
            })?;
        }
        if fua { self.flush() } else { Ok(()) }
    }

    /// Writes zeroes.
    pub fn write_zeroes(&self, offset: u64, len: u64, fua: bool) -> Result<(), DeviceError> {
        const CHUNK: u64 = 1 << 20;
        let zeros = vec![0u8; CHUNK.min(len) as usize];
        let mut done = 0;
        while done < len {
            let n = CHUNK.min(len - done);
            self.write(&zeros[..n as usize], offset + done, false)?;
            done += n;
        }
        if fua { self.flush() } else { Ok(()) }
    }

    /// Discards whole blocks in the range: the engine forgets them (their SSD copies are
    /// freed) and the HDD's bytes are punched out; reads of them return zeroes.
    pub fn trim(&self, offset: u64, len: u64, fua: bool) -> Result<(), DeviceError> {
        if crate::failover::detached(&self.shared) {
            // A hint: the HDD keeps the bytes (a lost block stays lost until written whole).
            return Ok(());
        }
        crate::io::trim(&self.shared, offset, len)?;
        if fua { self.flush() } else { Ok(()) }
    }

    /// Block status: holes and data from `offset`, covering at most `len` bytes (a long range
    /// is answered in part; ask again from where the answer ends).
    pub fn extents(&self, offset: u64, len: u64) -> Result<Vec<crate::Extent>, DeviceError> {
        crate::status::extents(&self.shared, offset, len)
    }

    /// Makes every completed write durable: the images are synced and, if the slot table
    /// changed, a checkpoint is committed (dm-cache commits its metadata on flush).
    pub fn flush(&self) -> Result<(), DeviceError> {
        self.shared.lock().stats.flushes += 1;
        self.shared.ram.persist(&self.shared)?;
        crate::mover::commit(&self.shared, false)
    }

    /// Asks the engine to write back every dirty block, and waits until the queue is empty.
    /// Fails (rather than wait out `timeout`) once write-backs keep failing: an HDD that refuses
    /// writes (full, read-only) cannot take them, and the error says so.
    pub fn writeback_all(&self, timeout: Duration) -> Result<bool, DeviceError> {
        let failed_before = {
            let mut c = self.shared.lock();
            c.engine.flush();
            if c.drain() {
                self.shared.work_ready.notify_all();
            }
            c.stats.moves_failed
        };
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let step = Duration::from_millis(200).min(deadline.saturating_duration_since(std::time::Instant::now()));
            if self.wait_idle(step)? {
                return Ok(true);
            }
            if std::time::Instant::now() >= deadline {
                return Ok(false);
            }
            let failed = self.shared.lock().stats.moves_failed - failed_before;
            let h = self.shared.health.report(0);
            if failed >= 8 && h.state != "ok" {
                return Err(DeviceError::io(
                    format!(
                        "writing back: {failed} write-backs failed ({}); the dirty data stays on the SSD and is retried with back-off",
                        h.last_error.unwrap_or_default()
                    ),
                    std::io::Error::from_raw_os_error(5),
                ));
            }
        }
    }

    /// Cancels the work queued and not yet running (the engine rolls it back; a policy may
    /// issue it again); returns how many. A promotion that serves its block from RAM
    /// (`RamLevel::MoveCopies`) runs to its end: its RAM copy may hold acknowledged writes,
    /// and only the move settles it (it is in a slot or on the HDD after).
    pub fn cancel_queued(&self) -> usize {
        let move_copies = self.shared.ram_level == tierwise_core::arch::RamLevel::MoveCopies;
        let mut c = self.shared.lock();
        let core = &mut *c;
        let cancelled = core.work.cancel_queued_where(&mut core.engine, |w| {
            !(move_copies && w.from == Level::Slow && matches!(w.kind, WorkKind::Promote | WorkKind::Copy))
        });
        for w in &cancelled {
            c.reconcile(w.obj.0);
            c.want_ram.remove(&w.obj.0);
            c.ram_fill.remove(&w.obj.0);
        }
        let n = cancelled.len();
        // A policy may answer at once with new work; it runs as usual.
        if c.drain() {
            self.shared.work_ready.notify_all();
        }
        drop(c);
        self.shared.work_done.notify_all();
        n
    }

    /// Changes the move rate (bytes per second, 0: unlimited).
    pub fn set_move_rate(&self, rate: u64) {
        self.shared.move_rate.store(rate, Ordering::Relaxed);
    }

    /// Waits until no work is queued or running; false on timeout.
    pub fn wait_idle(&self, timeout: Duration) -> Result<bool, DeviceError> {
        let deadline = Instant::now() + timeout;
        let mut c = self.shared.lock();
        while !c.work.is_empty() {
            let now = Instant::now();
            if now >= deadline {
                return Ok(false);
            }
            c = self
                .shared
                .work_done
                .wait_timeout(c, deadline - now)
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
        }
        Ok(true)
    }

    /// Current counters.
    pub fn stats(&self) -> DeviceStats {
        let c = self.shared.lock();
        let mut s = c.stats.clone();
        let u = c.engine.usage();
        s.queued = c.work.len() as u64;
        s.slots = self.shared.ssd_sb.slots;
        s.slots_used = c.slots.mapped() as u64;
        s.dirty_bytes = u.dirty_bytes;
        s.ssd_capacity = u.fast_capacity;
        s.buffered_sectors = self.shared.wbuf.sectors();
        s
    }

    /// The device's health: I/O errors by image and operation, and ok / degraded / failed
    /// with the reason (see [`crate::health`]).
    pub fn health(&self) -> crate::HealthReport {
        let dirty = self.shared.lock().engine.usage().dirty_bytes;
        self.shared.health.report(dirty)
    }

    /// Engine counters and the architecture's own, for reports.
    pub fn engine_stats(&self) -> (tierwise_core::EngineStats, Vec<(&'static str, u64)>) {
        let c = self.shared.lock();
        (c.engine.stats().clone(), c.engine.arch_counters())
    }

    /// Where a block is, in words (diagnostics).
    pub fn describe_block(&self, block: u64) -> String {
        let c = self.shared.lock();
        let p = c.engine.placement(ObjectId(block));
        let slot = c.slots.slot_of(block);
        let runs = slot.map(|s| c.slots.runs(s, 0, self.block_size() / crate::format::SECTOR));
        format!("block {block}: {p:?}, slot {slot:?} {runs:?}, work {:?}", c.work.on(ObjectId(block)))
    }

    /// A test-only fault: takes the core lock (engine, slots, work) and never gives it back, so
    /// every request and mover waits forever, as under a deadlock. Only for the tests that
    /// prove the shared teardown clears a wedged device (the nbdkit plugin honours it only with
    /// `TIERWISE_TEST_FAULTS=1` in its environment).
    pub fn wedge_for_tests(&self) {
        std::mem::forget(self.shared.lock());
    }

    /// Checks the engine's and the slot table's bookkeeping (tests).
    pub fn check(&self) -> Result<(), String> {
        let c = self.shared.lock();
        c.engine.check_invariants()?;
        c.slots.check()?;
        if self.shared.layout() == Layout::Identity {
            for b in c.slots.mapped_blocks() {
                if !c.engine.placement(ObjectId(b)).on_fast {
                    return Err(format!("block {b} has a slot the engine does not count"));
                }
            }
        }
        Ok(())
    }

    /// Stops the movers (finishing the work they run; the rest is cancelled) and commits a
    /// final checkpoint marked clean.
    pub fn shutdown(&self) -> Result<(), DeviceError> {
        {
            let mut c = self.shared.lock();
            c.stopping = true;
        }
        self.shared.work_ready.notify_all();
        let movers = std::mem::take(&mut *self.movers.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
        for h in movers {
            let _ = h.join();
        }
        {
            let mut c = self.shared.lock();
            let core = &mut *c;
            for w in core.work.cancel_queued(&mut core.engine) {
                c.reconcile(w.obj.0);
            }
            c.drain();
            c.want_ram.clear();
            c.ram_fill.clear();
        }
        // Writes a move's RAM copy absorbed reach the HDD before the final checkpoint.
        self.shared.ram.persist(&self.shared)?;
        self.shared.ram.clear();
        crate::mover::commit(&self.shared, true)
    }
}
