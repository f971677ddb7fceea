//! The mount's crash-safe metadata: pins, the write-back dirty set, a journal of moves and the
//! persistent counters, in one embedded transactional store (redb) under the state directory.
//!
//! What needs which durability:
//! - A move's journal record is committed durably *before* the move touches the destination,
//!   so after a crash the next mount knows which files were half-moved and finishes or rolls
//!   back each one ([`crate::HybridFs::new`]).
//! - The dirty set and the end-of-move records are committed lazily (no sync) and made durable
//!   by the next durable commit or by [`StateStore::sync`], which `fsync(2)` on the mount calls:
//!   data a program did not fsync may be lost by any file system, and a dirty mark that did not
//!   survive only costs an exact answer (adoption then falls back to comparing the copies).
//! - Counters are saved every few seconds and at unmount.
//!
//! Keys are relative paths as raw bytes (file names need not be UTF-8).

use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use redb::{Database, Durability, ReadableDatabase, ReadableTable, TableDefinition};
use tierwise_core::driver::MoveJournal;
use tierwise_core::{Tier, WorkKind};

/// Pinned files: path → tier index (0 SSD, 1 HDD).
const PINS: TableDefinition<&[u8], u8> = TableDefinition::new("pins");
/// Write-back dirty files: path → 1.
const DIRTY: TableDefinition<&[u8], u8> = TableDefinition::new("dirty");
/// Moves started and not yet ended: id → (kind, source tier, size, mtime ns, path).
const JOURNAL: TableDefinition<u64, (u8, u8, u64, u64, &[u8])> = TableDefinition::new("journal");
/// Renames that change more than one name on the tiers, journalled before the first change:
/// id → (from, to, what each tier held at both names; see [`RenameRecord`]).
const RENAMES: TableDefinition<u64, RenameRow> = TableDefinition::new("renames");
/// One row of [`RENAMES`]: from, to, flags, and the ids (inode, size, mtime) each tier held.
type RenameRow<'a> = (&'a [u8], &'a [u8], u8, [u64; 16]);
/// What the volume is: `policy` → the full spec of the policy it runs (every knob), kept with
/// the data as bcache, lvm and Open-CAS keep their cache mode in their metadata.
const META: TableDefinition<&str, &str> = TableDefinition::new("meta");
/// Named counters, totals over the volume's life.
const COUNTERS: TableDefinition<&str, u64> = TableDefinition::new("counters");
/// Access statistics: path → (rank, coldest 0, in the collector's ranking; the collector's count).
const HEAT: TableDefinition<&[u8], (u64, u64)> = TableDefinition::new("heat");

/// The store's file name inside the state directory.
pub const STATE_FILE: &str = "state.redb";

/// Store failures.
#[derive(Debug, thiserror::Error)]
#[error("state store `{path}`: {source}")]
pub struct StateError {
    path: PathBuf,
    #[source]
    source: redb::Error,
}

impl StateError {
    /// Another process has the store open (a second mount of the same tiers): never a reason
    /// to set the store aside.
    pub fn is_locked(&self) -> bool {
        matches!(self.source, redb::Error::DatabaseAlreadyOpen)
    }
}

/// The database: read-write, or read-only for a read-only mount (which never writes it).
enum Db {
    Rw(Database),
    Ro(redb::ReadOnlyDatabase),
}

/// One journalled move: what was copied from where, and what the source looked like.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MoveRecord {
    /// What the move does.
    pub kind: WorkKind,
    /// The tier copied from.
    pub from: Tier,
    /// The source's size when the move started.
    pub size: u64,
    /// The source's modification time (ns since the epoch) when the move started; the copy
    /// carries the same time, which is how recovery tells a finished copy from a stale one.
    pub mtime_ns: u64,
    /// The file.
    pub rel: PathBuf,
}

/// What a name held on one tier when a rename was journalled: a file or directory's device and
/// inode, and for a file its size and modification time (so that a later file that happens to
/// reuse the inode number is not taken for it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NameId {
    /// Device.
    pub dev: u64,
    /// Inode.
    pub ino: u64,
    /// Size (0 for a directory).
    pub size: u64,
    /// Modification time, ns since the epoch (0 for a directory).
    pub mtime_ns: u64,
}

/// One journalled rename: recovery finishes it on every tier where it did not happen yet
/// (the journal is committed with the pins and dirty marks already under the new name, so
/// finishing is the one outcome that agrees with the store).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RenameRecord {
    /// The name renamed.
    pub from: PathBuf,
    /// The new name.
    pub to: PathBuf,
    /// Per tier (fast first): what `from` held (the source's copy there).
    pub source: [Option<NameId>; 2],
    /// Per tier: what `to` held (the replaced file's copy, or an empty directory).
    pub replaced: [Option<NameId>; 2],
}

impl RenameRecord {
    /// Presence flags (bit `tier * 2 + k`, k 0 source, 1 replaced) and the ids, four values
    /// each (device, inode, size, time), source then replaced, fast tier first.
    fn encode(&self) -> (u8, [u64; 16]) {
        let mut flags = 0u8;
        let mut ids = [0u64; 16];
        for t in 0..2 {
            for (k, id) in [self.source[t], self.replaced[t]].into_iter().enumerate() {
                if let Some(id) = id {
                    flags |= 1 << (t * 2 + k);
                    let at = (t * 2 + k) * 4;
                    ids[at..at + 4].copy_from_slice(&[id.dev, id.ino, id.size, id.mtime_ns]);
                }
            }
        }
        (flags, ids)
    }

    fn decode(from: &[u8], to: &[u8], flags: u8, ids: [u64; 16]) -> RenameRecord {
        let mut rec = RenameRecord { from: path_of(from), to: path_of(to), source: [None; 2], replaced: [None; 2] };
        for t in 0..2 {
            for k in 0..2 {
                if flags & (1 << (t * 2 + k)) == 0 {
                    continue;
                }
                let at = (t * 2 + k) * 4;
                let id = NameId { dev: ids[at], ino: ids[at + 1], size: ids[at + 2], mtime_ns: ids[at + 3] };
                if k == 0 {
                    rec.source[t] = Some(id);
                } else {
                    rec.replaced[t] = Some(id);
                }
            }
        }
        rec
    }
}

/// Nanoseconds since the epoch of `t` (0 before it).
pub fn epoch_ns(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_nanos().min(u128::from(u64::MAX)) as u64)
}

/// A kind's code in the journal: the engine's own index of kinds.
fn kind_code(k: WorkKind) -> u8 {
    tierwise_core::EngineStats::kind_index(k) as u8
}

fn kind_of(c: u8) -> WorkKind {
    match c {
        0 => WorkKind::Promote,
        1 => WorkKind::Demote,
        2 => WorkKind::Copy,
        3 => WorkKind::Writeback,
        _ => WorkKind::Invalidate,
    }
}

fn tier_of(c: u8) -> Tier {
    if c == 0 { Tier::Fast } else { Tier::Slow }
}

fn key(rel: &Path) -> &[u8] {
    rel.as_os_str().as_bytes()
}

fn path_of(k: &[u8]) -> PathBuf {
    PathBuf::from(OsStr::from_bytes(k))
}

/// `rel` with its prefix `from` replaced by `to`, when `rel` is `from` or under it.
fn rebase(rel: &Path, from: &Path, to: &Path) -> Option<PathBuf> {
    let rest = rel.strip_prefix(from).ok()?;
    Some(if rest.as_os_str().is_empty() { to.to_path_buf() } else { to.join(rest) })
}

/// The store; see the module docs.
pub struct StateStore {
    db: Db,
    path: PathBuf,
    next_move: AtomicU64,
    /// A lazy commit happened since the last durable one.
    unsynced: AtomicBool,
}

impl StateStore {
    /// Opens (or creates) the store in `dir`. Returns it and whether it existed before (a new
    /// store means placement is rebuilt from the trees alone).
    pub fn open(dir: &Path) -> Result<(StateStore, bool), StateError> {
        let path = dir.join(STATE_FILE);
        let err = |e: redb::Error| StateError { path: path.clone(), source: e };
        std::fs::create_dir_all(dir).map_err(|e| err(redb::Error::Io(e)))?;
        let existed = path.exists();
        let db = Db::Rw(Database::create(&path).map_err(|e| err(e.into()))?);
        let store =
            StateStore { db, path: path.clone(), next_move: AtomicU64::new(0), unsynced: AtomicBool::new(false) };
        store.create_tables()?;
        let last = store.read(|tx| Ok(tx.open_table(JOURNAL)?.last()?.map_or(0, |(k, _)| k.value())))?;
        store.next_move.store(last + 1, Ordering::Relaxed);
        Ok((store, existed))
    }

    /// A store in memory, empty (a read-only mount of tiers that have none).
    pub fn in_memory() -> Result<StateStore, StateError> {
        let path = PathBuf::from("(in memory)");
        let db = Database::builder()
            .create_with_backend(redb::backends::InMemoryBackend::new())
            .map_err(|e| StateError { path: path.clone(), source: e.into() })?;
        let store = StateStore { db: Db::Rw(db), path, next_move: AtomicU64::new(0), unsynced: AtomicBool::new(false) };
        store.create_tables()?;
        Ok(store)
    }

    /// Opens the store in `dir` read-only (a read-only mount reads pins, the dirty set and the
    /// journal, and writes nothing); `None` when there is no store.
    pub fn open_read_only(dir: &Path) -> Result<Option<StateStore>, StateError> {
        let path = dir.join(STATE_FILE);
        if !path.exists() {
            return Ok(None);
        }
        let db =
            redb::ReadOnlyDatabase::open(&path).map_err(|e| StateError { path: path.clone(), source: e.into() })?;
        Ok(Some(StateStore { db: Db::Ro(db), path, next_move: AtomicU64::new(0), unsynced: AtomicBool::new(false) }))
    }

    /// Creates the tables, so reads never meet a missing one.
    fn create_tables(&self) -> Result<(), StateError> {
        self.write(Durability::Immediate, |tx| {
            tx.open_table(PINS)?;
            tx.open_table(DIRTY)?;
            tx.open_table(JOURNAL)?;
            tx.open_table(RENAMES)?;
            tx.open_table(META)?;
            tx.open_table(COUNTERS)?;
            tx.open_table(HEAT)?;
            Ok(())
        })
    }

    /// Where the store lives.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn err(&self, e: impl Into<redb::Error>) -> StateError {
        StateError { path: self.path.clone(), source: e.into() }
    }

    fn write(
        &self,
        durability: Durability,
        f: impl FnOnce(&redb::WriteTransaction) -> Result<(), redb::Error>,
    ) -> Result<(), StateError> {
        // A read-only store is never written (a read-only mount moves and records nothing).
        let Db::Rw(db) = &self.db else { return Ok(()) };
        let mut tx = db.begin_write().map_err(|e| self.err(e))?;
        tx.set_durability(durability).map_err(|e| self.err(e))?;
        f(&tx).map_err(|e| self.err(e))?;
        let call = if matches!(durability, Durability::Immediate) {
            crate::tiers::calls::Call::DurableCommit
        } else {
            crate::tiers::calls::Call::Commit
        };
        crate::tiers::calls::on_path(call, &self.path, || tx.commit()).map_err(|e| self.err(e))?;
        match durability {
            Durability::Immediate => self.unsynced.store(false, Ordering::Release),
            _ => self.unsynced.store(true, Ordering::Release),
        }
        Ok(())
    }

    fn read<T>(&self, f: impl FnOnce(&redb::ReadTransaction) -> Result<T, redb::Error>) -> Result<T, StateError> {
        let tx = match &self.db {
            Db::Rw(db) => db.begin_read(),
            Db::Ro(db) => db.begin_read(),
        }
        .map_err(|e| self.err(e))?;
        f(&tx).map_err(|e| self.err(e))
    }

    /// Makes every lazy commit durable (a no-op when there was none).
    pub fn sync(&self) -> Result<(), StateError> {
        if self.unsynced.load(Ordering::Acquire) {
            self.write(Durability::Immediate, |_| Ok(()))?;
        }
        Ok(())
    }

    /// The policy the volume was last mounted with (its full spec), if any was recorded.
    pub fn policy(&self) -> Result<Option<String>, StateError> {
        self.read(|tx| match tx.open_table(META) {
            Ok(t) => Ok(t.get("policy")?.map(|v| v.value().to_string())),
            // A store written before the table existed (read-only: cannot create it).
            Err(redb::TableError::TableDoesNotExist(_)) => Ok(None),
            Err(e) => Err(e.into()),
        })
    }

    /// Records the policy the volume runs (durably: a restart must find it).
    pub fn set_policy(&self, spec: &str) -> Result<(), StateError> {
        self.write(Durability::Immediate, |tx| {
            tx.open_table(META)?.insert("policy", spec)?;
            Ok(())
        })
    }

    /// Whether the volume was unmounted cleanly last time (a store that never said: no).
    pub fn was_clean(&self) -> Result<bool, StateError> {
        self.read(|tx| match tx.open_table(META) {
            Ok(t) => Ok(t.get("clean")?.is_some_and(|v| v.value() == "1")),
            Err(redb::TableError::TableDoesNotExist(_)) => Ok(false),
            Err(e) => Err(e.into()),
        })
    }

    /// Records whether the volume is cleanly unmounted (`false` while mounted), durably.
    pub fn set_clean(&self, clean: bool) -> Result<(), StateError> {
        self.write(Durability::Immediate, |tx| {
            tx.open_table(META)?.insert("clean", if clean { "1" } else { "0" })?;
            Ok(())
        })
    }

    /// The pinned files.
    pub fn pins(&self) -> Result<Vec<(PathBuf, Tier)>, StateError> {
        self.read(|tx| {
            let t = tx.open_table(PINS)?;
            let mut out = Vec::new();
            for row in t.iter()? {
                let (k, v) = row?;
                out.push((path_of(k.value()), tier_of(v.value())));
            }
            Ok(out)
        })
    }

    /// Pins `rel` to `tier`, or unpins it (durably: an admin's decision).
    pub fn set_pin(&self, rel: &Path, tier: Option<Tier>) -> Result<(), StateError> {
        self.write(Durability::Immediate, |tx| {
            let mut t = tx.open_table(PINS)?;
            match tier {
                Some(tier) => {
                    t.insert(key(rel), tier.index() as u8)?;
                }
                None => {
                    t.remove(key(rel))?;
                }
            }
            Ok(())
        })
    }

    /// The files whose SSD copy is newer than their HDD copy (write-back).
    pub fn dirty(&self) -> Result<Vec<PathBuf>, StateError> {
        self.read(|tx| {
            let t = tx.open_table(DIRTY)?;
            let mut out = Vec::new();
            for row in t.iter()? {
                out.push(path_of(row?.0.value()));
            }
            Ok(out)
        })
    }

    /// Marks `rel` dirty or clean (lazily; see the module docs).
    pub fn set_dirty(&self, rel: &Path, dirty: bool) -> Result<(), StateError> {
        self.write(Durability::None, |tx| {
            let mut t = tx.open_table(DIRTY)?;
            if dirty {
                t.insert(key(rel), 1)?;
            } else {
                t.remove(key(rel))?;
            }
            Ok(())
        })
    }

    /// Forgets `rel` (and, for a directory, everything under it): pins and dirty marks.
    pub fn forget(&self, rel: &Path) -> Result<(), StateError> {
        self.rekey(rel, None)
    }

    /// Renames `from` (and everything under it) to `to` in the pins and the dirty set.
    pub fn rename(&self, from: &Path, to: &Path) -> Result<(), StateError> {
        self.rekey(from, Some(to))
    }

    fn rekey(&self, from: &Path, to: Option<&Path>) -> Result<(), StateError> {
        self.write(Durability::Immediate, |tx| rekey_in(tx, from, to))
    }

    /// Journals a rename before it changes any name (durably), with the pins and dirty marks
    /// under `from` moved to `to` in the same transaction. Returns its id for
    /// [`StateStore::end_rename`].
    pub fn begin_rename(&self, rec: &RenameRecord) -> Result<u64, StateError> {
        let id = self.next_move.fetch_add(1, Ordering::Relaxed);
        let (flags, ids) = rec.encode();
        self.write(Durability::Immediate, |tx| {
            rekey_in(tx, &rec.from, Some(&rec.to))?;
            tx.open_table(RENAMES)?.insert(id, (key(&rec.from), key(&rec.to), flags, ids))?;
            Ok(())
        })?;
        Ok(id)
    }

    /// Ends journalled renames (lazily: recovery finds a finished one finished).
    pub fn end_renames(&self, ids: &[u64]) -> Result<(), StateError> {
        if ids.is_empty() {
            return Ok(());
        }
        self.write(Durability::None, |tx| {
            let mut t = tx.open_table(RENAMES)?;
            for &id in ids {
                t.remove(id)?;
            }
            Ok(())
        })
    }

    /// The journalled renames, oldest first.
    pub fn unfinished_renames(&self) -> Result<Vec<RenameRecord>, StateError> {
        self.read(|tx| {
            let t = match tx.open_table(RENAMES) {
                Ok(t) => t,
                // A store written before renames were journalled, opened read-only.
                Err(redb::TableError::TableDoesNotExist(_)) => return Ok(Vec::new()),
                Err(e) => return Err(e.into()),
            };
            let mut out = Vec::new();
            for row in t.iter()? {
                let (_, v) = row?;
                let (from, to, flags, ids) = v.value();
                out.push(RenameRecord::decode(from, to, flags, ids));
            }
            Ok(out)
        })
    }

    /// Rewrites the devices and inodes the rename journal names through `map` (`None`: kept).
    /// For tests that rebuild a crashed tree elsewhere: a crash keeps inode numbers, a copy
    /// does not.
    #[doc(hidden)]
    pub fn remap_ids(&self, map: &dyn Fn(u64, u64) -> Option<(u64, u64)>) -> Result<(), StateError> {
        let mut recs = Vec::new();
        self.read(|tx| {
            for row in tx.open_table(RENAMES)?.iter()? {
                let (k, v) = row?;
                let (from, to, flags, ids) = v.value();
                recs.push((k.value(), RenameRecord::decode(from, to, flags, ids)));
            }
            Ok(())
        })?;
        self.write(Durability::Immediate, |tx| {
            let mut t = tx.open_table(RENAMES)?;
            for (id, mut rec) in recs {
                for n in rec.source.iter_mut().chain(rec.replaced.iter_mut()).flatten() {
                    if let Some((dev, ino)) = map(n.dev, n.ino) {
                        (n.dev, n.ino) = (dev, ino);
                    }
                }
                let (flags, ids) = rec.encode();
                t.insert(id, (key(&rec.from), key(&rec.to), flags, ids))?;
            }
            Ok(())
        })
    }

    /// Empties the rename journal after recovery finished every record.
    pub fn clear_renames(&self) -> Result<(), StateError> {
        self.write(Durability::Immediate, |tx| {
            tx.open_table(RENAMES)?.retain(|_, _| false)?;
            Ok(())
        })
    }

    /// Journals a move before it starts (durably). Returns its id for [`StateStore::end_move`].
    pub fn begin_move(&self, rec: &MoveRecord) -> Result<u64, StateError> {
        let id = self.next_move.fetch_add(1, Ordering::Relaxed);
        self.write(Durability::Immediate, |tx| {
            tx.open_table(JOURNAL)?
                .insert(id, (kind_code(rec.kind), rec.from.index() as u8, rec.size, rec.mtime_ns, key(&rec.rel)))?;
            Ok(())
        })?;
        Ok(id)
    }

    /// Ends a journalled move (lazily: a record that outlives its move is recognised as done).
    pub fn end_move(&self, id: u64) -> Result<(), StateError> {
        self.write(Durability::None, |tx| {
            tx.open_table(JOURNAL)?.remove(id)?;
            Ok(())
        })
    }

    /// The moves a crash interrupted (or whose end was not yet durable).
    pub fn unfinished_moves(&self) -> Result<Vec<MoveRecord>, StateError> {
        self.read(|tx| {
            let t = tx.open_table(JOURNAL)?;
            let mut out = Vec::new();
            for row in t.iter()? {
                let (_, v) = row?;
                let (kind, from, size, mtime_ns, rel) = v.value();
                out.push(MoveRecord { kind: kind_of(kind), from: tier_of(from), size, mtime_ns, rel: path_of(rel) });
            }
            Ok(out)
        })
    }

    /// Empties the journal after recovery handled every record.
    pub fn clear_journal(&self) -> Result<(), StateError> {
        self.write(Durability::Immediate, |tx| {
            let mut t = tx.open_table(JOURNAL)?;
            t.retain(|_, _| false)?;
            Ok(())
        })
    }

    /// The saved access statistics: path → (rank, coldest first; count).
    pub fn heat(&self) -> Result<HashMap<PathBuf, (u64, u64)>, StateError> {
        self.read(|tx| {
            let t = tx.open_table(HEAT)?;
            let mut out = HashMap::new();
            for row in t.iter()? {
                let (k, v) = row?;
                out.insert(path_of(k.value()), v.value());
            }
            Ok(out)
        })
    }

    /// Replaces the access statistics with `ranked` (coldest first, each with its count), in one
    /// transaction; durable when `durable` (at unmount), otherwise with the next durable commit.
    pub fn save_heat(&self, ranked: &[(PathBuf, u64)], durable: bool) -> Result<(), StateError> {
        let durability = if durable { Durability::Immediate } else { Durability::None };
        self.write(durability, |tx| {
            let mut t = tx.open_table(HEAT)?;
            t.retain(|_, _| false)?;
            for (rank, (rel, heat)) in ranked.iter().enumerate() {
                t.insert(key(rel), (rank as u64, *heat))?;
            }
            Ok(())
        })
    }

    /// The saved counters.
    pub fn counters(&self) -> Result<HashMap<String, u64>, StateError> {
        self.read(|tx| {
            let t = tx.open_table(COUNTERS)?;
            let mut out = HashMap::new();
            for row in t.iter()? {
                let (k, v) = row?;
                out.insert(k.value().to_string(), v.value());
            }
            Ok(out)
        })
    }

    /// Saves counters (durably when `durable`, at unmount).
    pub fn save_counters(&self, values: &[(&str, u64)], durable: bool) -> Result<(), StateError> {
        let d = if durable { Durability::Immediate } else { Durability::None };
        self.write(d, |tx| {
            let mut t = tx.open_table(COUNTERS)?;
            for (k, v) in values {
                t.insert(*k, *v)?;
            }
            Ok(())
        })
    }
}

/// Renames `from` (and everything under it) to `to` in the pins and the dirty set, dropping
/// what the rename replaces; `to` `None`: forgets `from`.
fn rekey_in(tx: &redb::WriteTransaction, from: &Path, to: Option<&Path>) -> Result<(), redb::Error> {
    for def in [PINS, DIRTY] {
        let mut t = tx.open_table(def)?;
        let mut hits: Vec<(PathBuf, u8)> = Vec::new();
        let mut replaced: Vec<PathBuf> = Vec::new();
        for row in t.iter()? {
            let (k, v) = row?;
            let p = path_of(k.value());
            if p.starts_with(from) {
                hits.push((p, v.value()));
            } else if to.is_some_and(|to| p.starts_with(to)) {
                // What the rename replaces.
                replaced.push(p);
            }
        }
        for p in replaced {
            t.remove(key(&p))?;
        }
        for (p, v) in hits {
            t.remove(key(&p))?;
            if let Some(new) = to.and_then(|to| rebase(&p, from, to)) {
                t.insert(key(&new), v)?;
            }
        }
    }
    Ok(())
}

/// How often the counters are saved while mounted.
pub const COUNTER_SAVE_INTERVAL: Duration = Duration::from_secs(5);

/// How often the access statistics are saved while mounted (and at unmount): ranking every file
/// costs O(n log n) under the engine's lock, so not often; a crash loses at most this much of
/// their history.
pub const HEAT_SAVE_INTERVAL: Duration = Duration::from_secs(300);

/// The store is the mount's move journal (see [`tierwise_core::driver::journalled`]).
impl MoveJournal for StateStore {
    type Record = MoveRecord;
    type Error = StateError;
    fn begin(&self, record: &MoveRecord) -> Result<u64, StateError> {
        self.begin_move(record)
    }
    fn end(&self, id: u64) -> Result<(), StateError> {
        self.end_move(id)
    }
    fn unfinished(&self) -> Result<Vec<MoveRecord>, StateError> {
        self.unfinished_moves()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pins_dirty_journal_and_counters_survive_reopening() {
        let dir = tempfile::tempdir().unwrap();
        {
            let (s, existed) = StateStore::open(dir.path()).unwrap();
            assert!(!existed);
            s.set_pin(Path::new("a/b"), Some(Tier::Fast)).unwrap();
            s.set_pin(Path::new("c"), Some(Tier::Slow)).unwrap();
            s.set_dirty(Path::new("a/d"), true).unwrap();
            s.set_dirty(Path::new("e"), true).unwrap();
            s.set_dirty(Path::new("e"), false).unwrap();
            let rec = MoveRecord { kind: WorkKind::Demote, from: Tier::Fast, size: 7, mtime_ns: 9, rel: "x/y".into() };
            let id = s.begin_move(&rec).unwrap();
            let id2 = s.begin_move(&MoveRecord { rel: "z".into(), ..rec.clone() }).unwrap();
            s.end_move(id2).unwrap();
            assert_ne!(id, id2);
            s.save_counters(&[("promotions", 3)], false).unwrap();
            s.sync().unwrap();
        }
        let (s, existed) = StateStore::open(dir.path()).unwrap();
        assert!(existed);
        let mut pins = s.pins().unwrap();
        pins.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(pins, vec![("a/b".into(), Tier::Fast), ("c".into(), Tier::Slow)]);
        assert_eq!(s.dirty().unwrap(), vec![PathBuf::from("a/d")]);
        let moves = s.unfinished_moves().unwrap();
        assert_eq!(moves.len(), 1);
        assert_eq!(moves[0].rel, PathBuf::from("x/y"));
        assert_eq!(moves[0].kind, WorkKind::Demote);
        assert_eq!(s.counters().unwrap().get("promotions"), Some(&3));
        // A new move after reopening does not reuse the pending record's id.
        let id3 = s
            .begin_move(&MoveRecord { kind: WorkKind::Copy, from: Tier::Slow, size: 1, mtime_ns: 1, rel: "q".into() })
            .unwrap();
        assert_eq!(s.unfinished_moves().unwrap().len(), 2);
        s.end_move(id3).unwrap();
        s.clear_journal().unwrap();
        assert!(s.unfinished_moves().unwrap().is_empty());
    }

    #[test]
    fn renaming_a_directory_moves_the_pins_and_dirty_marks_under_it() {
        let dir = tempfile::tempdir().unwrap();
        let (s, _) = StateStore::open(dir.path()).unwrap();
        s.set_pin(Path::new("d/f"), Some(Tier::Fast)).unwrap();
        s.set_dirty(Path::new("d/sub/g"), true).unwrap();
        s.set_dirty(Path::new("dd/h"), true).unwrap();
        s.set_dirty(Path::new("n/old"), true).unwrap();
        s.rename(Path::new("d"), Path::new("n")).unwrap();
        assert_eq!(s.pins().unwrap(), vec![("n/f".into(), Tier::Fast)]);
        let mut dirty = s.dirty().unwrap();
        dirty.sort();
        assert_eq!(dirty, vec![PathBuf::from("dd/h"), PathBuf::from("n/sub/g")], "`dd` is not under `d`");
        s.forget(Path::new("n")).unwrap();
        assert!(s.pins().unwrap().is_empty());
        assert_eq!(s.dirty().unwrap(), vec![PathBuf::from("dd/h")]);
    }
}

#[cfg(test)]
mod rename_journal_tests {
    use super::*;

    #[test]
    fn a_journalled_rename_survives_reopening_whole_and_moves_the_marks() {
        let dir = tempfile::tempdir().unwrap();
        let id = |n: u64| NameId { dev: 7 + n, ino: 100 + n, size: 1000 * n, mtime_ns: 5_000_000 + n };
        let rec = RenameRecord {
            from: "d/tmp".into(),
            to: "d/file".into(),
            source: [Some(id(1)), None],
            replaced: [Some(id(2)), Some(id(3))],
        };
        {
            let (s, _) = StateStore::open(dir.path()).unwrap();
            s.set_dirty(Path::new("d/tmp"), true).unwrap();
            s.set_dirty(Path::new("d/file"), true).unwrap();
            s.set_pin(Path::new("d/file"), Some(Tier::Slow)).unwrap();
            s.begin_rename(&rec).unwrap();
            let done = s.begin_rename(&RenameRecord { from: "x".into(), to: "y".into(), ..rec.clone() }).unwrap();
            s.end_renames(&[done]).unwrap();
            s.sync().unwrap();
        }
        let (s, _) = StateStore::open(dir.path()).unwrap();
        assert_eq!(s.unfinished_renames().unwrap(), vec![rec.clone()]);
        // The source's mark moved with the journal record; the replaced file's mark and pin went.
        assert_eq!(s.dirty().unwrap(), vec![PathBuf::from("d/file")]);
        assert!(s.pins().unwrap().is_empty());
        s.remap_ids(&|dev, ino| (ino == 101).then_some((dev, 9))).unwrap();
        assert_eq!(s.unfinished_renames().unwrap()[0].source[0].map(|n| n.ino), Some(9));
        s.clear_renames().unwrap();
        assert!(s.unfinished_renames().unwrap().is_empty());
    }
}
