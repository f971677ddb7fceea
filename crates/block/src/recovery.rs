//! Creating a device (formatting a new pair of images, or adopting an HDD image in place) and
//! opening one: the images are checked against each other, the newest valid checkpoint is
//! read, and the engine is told what the SSD holds.
//!
//! After a crash (the newest checkpoint is not marked clean) a slot's bytes may be newer than
//! the checkpoint says — a write reached it after the last commit — so every slot counts as
//! dirty: it is written back unless the engine keeps it as a dirty copy. Like dm-cache after an
//! unclean shutdown, the SSD's copy wins; it holds either the old or the new bytes of a write
//! that was never acknowledged as flushed, and both are allowed.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU32, AtomicU64};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::Instant;

use tierwise_core::arch::Architecture;
use tierwise_core::arch::{Addressing, CostClass, arch_info};
use tierwise_core::driver::WorkQueue;
use tierwise_core::params::Params;
use tierwise_core::{Engine, Level, ObjectId, Setup, build_arch, extent_size_of, full_spec, same_policy};

use crate::backend::{Backend, Dev};
use crate::device::{Core, DeviceStats, HybridDevice, STRIPES, ServeOptions, Shared, SysClock};
use crate::error::{DeviceError, FormatError};
use crate::format::{Checkpoint, Layout, Role, SECTOR, SUPER_LEN, Superblock};
use crate::slots::Slots;

/// What a new device looks like.
#[derive(Clone, Debug)]
pub struct CreateOptions {
    /// Architecture spec; decides the layout and the default block size.
    pub spec: String,
    /// Bytes per block; default: the spec's extent size, else 4 KiB.
    pub block_size: Option<u64>,
    /// The SSD image's length.
    pub ssd_size: u64,
    /// The virtual device's size on the HDD; `None` adopts the HDD image's current length
    /// (its bytes stay where they are: an existing file system is served as it is).
    pub hdd_size: Option<u64>,
}

/// Checks that a spec can be served by the block device, and gives its capabilities.
pub fn servable(spec: &str) -> Result<tierwise_core::arch::Capabilities, DeviceError> {
    let (name, _) = Params::parse(spec).map_err(|e| DeviceError::Spec(e.to_string()))?;
    let info = arch_info(&name).map_err(|e| DeviceError::Spec(e.to_string()))?;
    let caps = info.caps;
    if !caps.runs_on_blocks() {
        return Err(DeviceError::Spec(format!("{name} places files, not blocks: use `tierwise mount`")));
    }
    if caps.cost == CostClass::SsdOnly {
        return Err(DeviceError::Spec(format!("{name} puts everything on the SSD: serve the SSD image directly")));
    }
    Ok(caps)
}

/// The architectures [`servable`] accepts.
pub fn servable_names() -> Vec<&'static str> {
    tierwise_core::ARCHITECTURES
        .iter()
        .filter(|a| a.caps.runs_on_blocks() && a.caps.cost != CostClass::SsdOnly)
        .map(|a| a.name)
        .collect()
}

/// Formats a pair of images. The HDD image's existing bytes are kept.
pub fn create(backend: &dyn Backend, opts: &CreateOptions) -> Result<Superblock, DeviceError> {
    let caps = servable(&opts.spec)?;
    let bs = opts.block_size.or_else(|| extent_size_of(&opts.spec)).unwrap_or(4096);
    if bs < SECTOR || !bs.is_power_of_two() || bs > 64 << 20 {
        return Err(DeviceError::Spec(format!("block size {bs}: a power of two from 512 B to 64 MiB")));
    }
    let hdd_now = backend.len(Dev::Hdd).map_err(|e| DeviceError::io("sizing the HDD image", e))?;
    if hdd_now >= SUPER_LEN && read_super(backend, Dev::Hdd, hdd_now).is_ok() {
        return Err(DeviceError::Images(
            "the HDD image is already part of a tierwise device; serve it without --create (nothing was changed)"
                .into(),
        ));
    }
    let hdd_data = opts.hdd_size.unwrap_or(hdd_now);
    if hdd_data == 0 || !hdd_data.is_multiple_of(bs) {
        return Err(DeviceError::Images(format!(
            "the HDD's {hdd_data} bytes are not a positive multiple of the {bs}-byte block (nothing was changed)"
        )));
    }
    if hdd_now > hdd_data {
        return Err(DeviceError::Images(format!(
            "the HDD image has {hdd_now} bytes, more than the {hdd_data} asked for: its data would be cut (nothing was changed)"
        )));
    }
    let slots = slots_for(opts.ssd_size, bs);
    if slots < 2 {
        return Err(DeviceError::Images(format!(
            "an SSD of {} bytes holds fewer than two {bs}-byte blocks",
            opts.ssd_size
        )));
    }
    let layout = if caps.addressing == Addressing::Concatenated { Layout::Concatenated } else { Layout::Identity };
    let uuid = new_uuid();
    // Every knob recorded: a restart without --policy serves exactly this.
    let spec = full_spec(&opts.spec).map_err(|e| DeviceError::Spec(e.to_string()))?;
    let sb = |role| Superblock {
        role,
        layout,
        uuid,
        block_size: bs,
        slots,
        meta_len: Superblock::meta_len_for(slots, bs),
        hdd_data,
        spec: spec.clone(),
    };
    let (ssd, hdd) = (sb(Role::Ssd), sb(Role::Hdd));
    let io = |what: &str| {
        let what = what.to_string();
        move |e| DeviceError::io(what, e)
    };
    backend.grow(Dev::Ssd, ssd.ssd_len()).map_err(io("sizing the SSD image"))?;
    backend.grow(Dev::Hdd, hdd.hdd_len()).map_err(io("growing the HDD image by its metadata"))?;
    // Two valid empty checkpoints, then the superblocks: an image without its superblock is
    // not a device, so a crash during creation leaves nothing half-made that could be served.
    for (seq, copy) in [(0u64, 0u64), (1, 1)] {
        let bytes = Checkpoint { seq, clean: true, entries: Vec::new() }.encode(uuid, bs);
        backend.write(Dev::Ssd, &bytes, ssd.meta_offset(copy)).map_err(io("writing a checkpoint"))?;
        backend.write(Dev::Hdd, &bytes, hdd.meta_offset(copy)).map_err(io("writing a checkpoint"))?;
    }
    backend.sync(Dev::Ssd).map_err(io("syncing the SSD image"))?;
    backend.sync(Dev::Hdd).map_err(io("syncing the HDD image"))?;
    backend.write(Dev::Ssd, &ssd.encode(), 0).map_err(io("writing the SSD superblock"))?;
    backend.write(Dev::Hdd, &hdd.encode(), hdd.offset()).map_err(io("writing the HDD superblock"))?;
    backend.sync(Dev::Ssd).map_err(io("syncing the SSD image"))?;
    backend.sync(Dev::Hdd).map_err(io("syncing the HDD image"))?;
    Ok(ssd)
}

/// The most slots of `bs` bytes an SSD image of `len` bytes holds with its metadata.
fn slots_for(len: u64, bs: u64) -> u64 {
    let mut slots = len / bs;
    let probe = |slots| Superblock {
        role: Role::Ssd,
        layout: Layout::Identity,
        uuid: 0,
        block_size: bs,
        slots,
        meta_len: Superblock::meta_len_for(slots, bs),
        hdd_data: 0,
        spec: String::new(),
    };
    while slots > 0 && probe(slots).ssd_len() > len {
        let over = probe(slots).ssd_len() - len;
        slots = slots.saturating_sub(over.div_ceil(bs).max(1));
    }
    while probe(slots + 1).ssd_len() <= len {
        slots += 1;
    }
    slots
}

fn new_uuid() -> u128 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(Instant::now().elapsed().as_nanos());
    h.write_u32(std::process::id());
    let a = h.finish();
    let mut h2 = std::collections::hash_map::RandomState::new().build_hasher();
    h2.write_u64(a);
    (u128::from(a) << 64) | u128::from(h2.finish())
}

fn read_super(backend: &dyn Backend, dev: Dev, len: u64) -> Result<Superblock, FormatError> {
    let off = if dev == Dev::Ssd { 0 } else { len.saturating_sub(SUPER_LEN) };
    let mut b = vec![0u8; SUPER_LEN as usize];
    backend.read(dev, &mut b, off).map_err(|_| FormatError::NotTierwise)?;
    Superblock::decode(&b)
}

/// Reads and cross-checks the two superblocks.
fn check_images(backend: &dyn Backend) -> Result<(Superblock, Superblock), DeviceError> {
    let len = |d| backend.len(d).map_err(|e| DeviceError::io("sizing an image", e));
    let (ssd_len, hdd_len) = (len(Dev::Ssd)?, len(Dev::Hdd)?);
    let what = |d: Dev, e: FormatError| {
        let name = if d == Dev::Ssd { "SSD" } else { "HDD" };
        DeviceError::Images(format!(
            "the {name} image is not a tierwise {name} image ({e}); create one with --create, nothing was changed"
        ))
    };
    let ssd = match read_super(backend, Dev::Ssd, ssd_len) {
        Ok(s) => s,
        Err(_) if is_hdd_at_end(backend, Dev::Ssd, ssd_len) => {
            return Err(DeviceError::Images("the images are swapped: --ssd names an HDD image".into()));
        }
        Err(e) => return Err(what(Dev::Ssd, e)),
    };
    if ssd.role != Role::Ssd {
        return Err(DeviceError::Images("the --ssd image holds an HDD superblock: are the images swapped?".into()));
    }
    let hdd = match read_super(backend, Dev::Hdd, hdd_len) {
        Ok(h) => h,
        Err(_) if hdd_has_ssd_super(backend) => {
            return Err(DeviceError::Images("the images are swapped: --hdd names an SSD image".into()));
        }
        Err(_) if is_hdd_at_end(backend, Dev::Hdd, ssd.hdd_len()) => {
            return Err(DeviceError::Images(format!(
                "the HDD image has {hdd_len} bytes, the device's is {} (resized?); nothing was changed",
                ssd.hdd_len()
            )));
        }
        Err(e) => return Err(what(Dev::Hdd, e)),
    };
    if hdd.uuid != ssd.uuid {
        return Err(DeviceError::Images(
            "the SSD and HDD images belong to different devices (their identities differ); nothing was changed".into(),
        ));
    }
    if ssd_len < ssd.ssd_len() {
        return Err(DeviceError::Images(format!(
            "the SSD image has {ssd_len} bytes, the device needs {} (truncated?); nothing was changed",
            ssd.ssd_len()
        )));
    }
    if hdd_len != hdd.hdd_len() {
        return Err(DeviceError::Images(format!(
            "the HDD image has {hdd_len} bytes, the device's is {} (resized?); nothing was changed",
            hdd.hdd_len()
        )));
    }
    Ok((ssd, hdd))
}

fn is_hdd_at_end(backend: &dyn Backend, dev: Dev, len: u64) -> bool {
    let mut b = vec![0u8; SUPER_LEN as usize];
    len >= SUPER_LEN
        && backend.read(dev, &mut b, len - SUPER_LEN).is_ok()
        && Superblock::decode(&b).is_ok_and(|s| s.role == Role::Hdd)
}

fn hdd_has_ssd_super(backend: &dyn Backend) -> bool {
    let mut b = vec![0u8; SUPER_LEN as usize];
    backend.read(Dev::Hdd, &mut b, 0).is_ok() && Superblock::decode(&b).is_ok_and(|s| s.role == Role::Ssd)
}

/// The newest valid checkpoint among the four copies. The HDD's replica alone is trusted only
/// if it records a clean stop: commits forced by slot pressure write the SSD's copies only
/// (`crate::mover::commit_for_slots`), so after a crash a replica may name slots reused since.
fn newest_checkpoint(backend: &dyn Backend, ssd: &Superblock, hdd: &Superblock) -> Result<Checkpoint, DeviceError> {
    let mut best: Option<Checkpoint> = None;
    let mut ssd_valid = false;
    let mut problems = Vec::new();
    for (dev, sb) in [(Dev::Ssd, ssd), (Dev::Hdd, hdd)] {
        for copy in 0..2 {
            let mut b = vec![0u8; sb.meta_len as usize];
            let name = format!("{} copy {copy}", if dev == Dev::Ssd { "SSD" } else { "HDD" });
            if let Err(e) = backend.read(dev, &mut b, sb.meta_offset(copy)) {
                problems.push(format!("{name}: {e}"));
                continue;
            }
            match Checkpoint::decode(&b, sb.uuid, sb.block_size, sb.slots) {
                Ok(cp) => {
                    ssd_valid |= dev == Dev::Ssd;
                    if best.as_ref().is_none_or(|b| cp.seq > b.seq) {
                        best = Some(cp);
                    }
                }
                Err(e) => problems.push(format!("{name}: {e}")),
            }
        }
    }
    match best {
        None => Err(DeviceError::NoCheckpoint(problems.join("; "))),
        Some(cp) if !ssd_valid && !cp.clean => Err(DeviceError::ReplicaOnly(problems.join("; "))),
        Some(cp) => Ok(cp),
    }
}

/// Checks a pair of images without changing them: their superblocks agree and a valid
/// checkpoint can be read. Returns the SSD's superblock.
pub fn inspect(backend: &dyn Backend) -> Result<Superblock, DeviceError> {
    let (ssd, hdd) = check_images(backend)?;
    newest_checkpoint(backend, &ssd, &hdd)?;
    Ok(ssd)
}

/// Whether `spec` can run on the device of superblock `sb`: its layout and extent size.
fn fits(spec: &str, sb: &Superblock) -> Result<Layout, DeviceError> {
    let caps = servable(spec)?;
    let want = if caps.addressing == Addressing::Concatenated { Layout::Concatenated } else { Layout::Identity };
    if want != sb.layout {
        return Err(DeviceError::Spec(format!(
            "{spec} lays the device out {want:?}, these images are laid out {:?} (created for {}); nothing was changed",
            sb.layout, sb.spec
        )));
    }
    let bs = sb.block_size;
    if let Some(es) = extent_size_of(spec).filter(|&es| es != bs) {
        return Err(DeviceError::Spec(format!(
            "{spec} places extents of {es} bytes, the device's blocks are {bs} bytes: give the spec es={bs} \
             (or sub-lun=), or create the device with --block-size {es}; nothing was changed"
        )));
    }
    Ok(want)
}

/// The policy a device runs when (re)started: the one recorded in its superblock, unless
/// `asked` names another; that is refused unless `force` (then [`change_policy`] must run before
/// [`open`]). Returns the spec and whether it is a change.
pub fn choose_policy(backend: &dyn Backend, asked: Option<&str>, force: bool) -> Result<(String, bool), DeviceError> {
    let (ssd_sb, _) = check_images(backend)?;
    let stored = ssd_sb.spec;
    match asked {
        None if stored.is_empty() => Ok((crate::DEFAULT_SERVE_POLICY.to_string(), false)),
        None => Ok((stored, false)),
        Some(a) if stored.is_empty() || same_policy(a, &stored) => Ok((a.to_string(), false)),
        Some(a) if force => Ok((a.to_string(), true)),
        Some(a) => Err(DeviceError::PolicyMismatch { stored, asked: a.to_string() }),
    }
}

/// Changes the policy recorded on a device that is not being served: every block the SSD holds
/// newer than the HDD (every mapped block after an unclean shutdown) is written back, the SSD's
/// table is emptied (the new policy starts cold, as bcache does after a detach), and both
/// superblocks name `spec`. Checked first: nothing is written unless `spec` fits the device.
/// A crash at any point leaves a device that opens: under the old policy with its table (every
/// written-back block is also on the HDD), or empty under either.
pub fn change_policy(backend: &dyn Backend, spec: &str) -> Result<(), DeviceError> {
    let (ssd_sb, hdd_sb) = check_images(backend)?;
    fits(spec, &ssd_sb)?;
    let full = full_spec(spec).map_err(|e| DeviceError::Spec(e.to_string()))?;
    let cp = newest_checkpoint(backend, &ssd_sb, &hdd_sb)?;
    let io = |what: &'static str| move |e| DeviceError::io(what, e);
    let bs = ssd_sb.block_size;
    let slot_offset = |slot: u32| ssd_sb.ssd_data_start() + u64::from(slot) * bs;
    for e in cp.entries.iter().filter(|e| e.dirty || !cp.clean) {
        if ssd_sb.layout == Layout::Concatenated {
            break; // one address space: a slot is the block's only home
        }
        let mut buf = vec![0u8; bs as usize];
        backend.read(Dev::Ssd, &mut buf, slot_offset(e.slot)).map_err(io("reading the SSD image"))?;
        let sectors = bs / SECTOR;
        let valid = |s: u64| {
            e.partial.as_ref().is_none_or(|bits| bits.get((s / 64) as usize).is_some_and(|w| w >> (s % 64) & 1 == 1))
        };
        let mut s = 0;
        while s < sectors {
            if !valid(s) {
                s += 1;
                continue;
            }
            let start = s;
            while s < sectors && valid(s) {
                s += 1;
            }
            let (from, to) = ((start * SECTOR) as usize, (s * SECTOR) as usize);
            backend
                .write(Dev::Hdd, &buf[from..to], e.block * bs + from as u64)
                .map_err(io("writing back to the HDD image"))?;
        }
    }
    backend.sync(Dev::Hdd).map_err(io("syncing the HDD image"))?;
    if ssd_sb.layout == Layout::Identity {
        // An empty table, newer than every copy, in both copies of both images.
        for (k, copy) in [(1u64, (cp.seq + 1) % 2), (2, (cp.seq + 2) % 2)] {
            let bytes = Checkpoint { seq: cp.seq + k, clean: true, entries: Vec::new() }.encode(ssd_sb.uuid, bs);
            backend.write(Dev::Ssd, &bytes, ssd_sb.meta_offset(copy)).map_err(io("writing a checkpoint"))?;
            backend.write(Dev::Hdd, &bytes, hdd_sb.meta_offset(copy)).map_err(io("writing a checkpoint"))?;
            backend.sync(Dev::Ssd).map_err(io("syncing the SSD image"))?;
            backend.sync(Dev::Hdd).map_err(io("syncing the HDD image"))?;
        }
    }
    // The HDD's superblock first: the SSD's is the one read.
    let hdd_new = Superblock { spec: full.clone(), ..hdd_sb };
    backend.write(Dev::Hdd, &hdd_new.encode(), hdd_new.offset()).map_err(io("writing the HDD superblock"))?;
    backend.sync(Dev::Hdd).map_err(io("syncing the HDD image"))?;
    let ssd_new = Superblock { spec: full, ..ssd_sb };
    backend.write(Dev::Ssd, &ssd_new.encode(), 0).map_err(io("writing the SSD superblock"))?;
    backend.sync(Dev::Ssd).map_err(io("syncing the SSD image"))?;
    Ok(())
}

/// Opens a device: checks the images, recovers the newest checkpoint, tells the engine what
/// the SSD holds, and commits a checkpoint marked in use. Call [`HybridDevice::start`] to run
/// its movers. The policy must be the one the device records ([`choose_policy`]).
pub fn open(backend: Arc<dyn Backend>, opts: ServeOptions) -> Result<HybridDevice, DeviceError> {
    let caps = servable(&opts.spec)?;
    // Every image error from here on is counted (`stats`' health).
    let health = Arc::new(crate::health::Health::default());
    let backend: Arc<dyn Backend> = Arc::new(crate::health::Monitored { inner: backend, health: Arc::clone(&health) });
    let (ssd_sb, hdd_sb) = check_images(&*backend)?;
    if !ssd_sb.spec.is_empty() && !same_policy(&opts.spec, &ssd_sb.spec) {
        return Err(DeviceError::PolicyMismatch { stored: ssd_sb.spec.clone(), asked: opts.spec.clone() });
    }
    let want = fits(&opts.spec, &ssd_sb)?;
    let cp = newest_checkpoint(&*backend, &ssd_sb, &hdd_sb)?;
    let bs = ssd_sb.block_size;
    let hdd_log = Arc::new(crate::hdd_log::HddWriteLog::new(bs, ssd_sb.hdd_data));
    let backend: Arc<dyn Backend> = Arc::new(crate::hdd_log::Logged { inner: backend, log: Arc::clone(&hdd_log) });
    let slots = ssd_sb.slots;
    // A few slots are kept over the engine's capacity, so a slot waiting for a commit rarely
    // makes a move wait (SSD over-provisioning).
    let spare = if want == Layout::Identity { (slots / 16).clamp(1, 1024) } else { 0 };
    let setup = Setup { fast_capacity: (slots - spare) * bs, slow_capacity: ssd_sb.hdd_data, object_size: bs };
    let arch = build_arch(&opts.spec, &setup).map_err(|e| DeviceError::Spec(e.to_string()))?;
    if want == Layout::Identity && arch.usage().fast_used > 0 {
        return Err(DeviceError::Spec(format!(
            "{} starts with blocks on the SSD (a scanned start); the device starts with an empty \
             SSD, so serve it without that knob",
            opts.spec
        )));
    }
    let ram = Arc::new(crate::ram::RamCopies::default());
    let mut core = Core {
        ram: Arc::clone(&ram),
        engine: Engine::new(arch, SysClock::new()),
        slots: Slots::new(slots, bs, ssd_sb.hdd_data / bs),
        work: WorkQueue::new(),
        want_ram: HashSet::new(),
        cleaning: HashSet::new(),
        lost: HashSet::new(),
        ram_fill: HashMap::new(),
        table_changed: true,
        stopping: false,
        stats: DeviceStats::default(),
    };
    core.slots.restore(&cp.entries);
    let move_rate = opts.move_rate;
    let shared = Arc::new(Shared {
        core: Mutex::new(core),
        work_ready: Condvar::new(),
        work_done: Condvar::new(),
        stripes: (0..STRIPES).map(|_| RwLock::new(())).collect(),
        pins: (0..slots).map(|_| AtomicU32::new(0)).collect(),
        backend,
        ssd_sb,
        hdd_sb,
        opts,
        commit_lock: Mutex::new(cp.seq),
        ram,
        ram_level: caps.ram_level,
        wbuf: crate::subluns::WriteBuffers::default(),
        moved_at: AtomicU64::new(0),
        move_rate: AtomicU64::new(move_rate),
        started: Instant::now(),
        health,
        hdd_log,
        hdd_write_ns: AtomicU64::new(0),
    });
    adopt(&shared, &cp)?;
    crate::mover::commit(&shared, false)?;
    Ok(HybridDevice::from_shared(shared))
}

/// Tells the engine about every slot of the checkpoint; what it does not keep is written back
/// first if it may hold newer bytes than the HDD, then unmapped.
fn adopt(sh: &Shared, cp: &Checkpoint) -> Result<(), DeviceError> {
    let bs = sh.block_size();
    let io = |what: &'static str| move |e| DeviceError::io(what, e);
    let mut c = sh.lock();
    for e in &cp.entries {
        let slot = e.slot;
        if e.partial.is_some() {
            // Its missing sectors are current on the HDD: make the slot whole.
            let runs = c.slots.runs(slot, 0, bs / SECTOR);
            crate::io::fill_runs(sh, e.block, slot, &runs).map_err(io("making a partial slot whole"))?;
            let _ = c.slots.set_valid(slot, 0, bs / SECTOR);
        }
        let dirty = e.dirty || !cp.clean;
        c.engine.adopt(ObjectId(e.block), Level::Fast, bs, dirty);
        let p = c.engine.placement(ObjectId(e.block));
        // Kept as a dirty copy, or as the only copy (tiering): nothing to write back.
        if dirty && !(p.on_fast && (p.dirty || !p.on_slow)) {
            let mut buf = vec![0u8; bs as usize];
            sh.backend.read(Dev::Ssd, &mut buf, sh.slot_offset(slot)).map_err(io("reading the SSD image"))?;
            sh.backend.write(Dev::Hdd, &buf, e.block * bs).map_err(io("writing back to the HDD image"))?;
        }
        if !p.on_fast {
            c.slots.unmap(e.block);
        }
    }
    c.drain();
    c.table_changed = true;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ssd_is_filled_with_as_many_slots_as_fit_beside_the_metadata() {
        for (len, bs) in [(1 << 20, 4096u64), (64 << 20, 4096), (10 << 20, 1 << 20), (123_456_789, 65536)] {
            let n = slots_for(len, bs);
            let sb = Superblock {
                role: Role::Ssd,
                layout: Layout::Identity,
                uuid: 0,
                block_size: bs,
                slots: n,
                meta_len: Superblock::meta_len_for(n, bs),
                hdd_data: 0,
                spec: String::new(),
            };
            assert!(sb.ssd_len() <= len, "{len}/{bs}: {n} slots need {}", sb.ssd_len());
            let more = Superblock { slots: n + 1, meta_len: Superblock::meta_len_for(n + 1, bs), ..sb };
            assert!(more.ssd_len() > len, "{len}/{bs}: one more slot would fit");
        }
    }

    #[test]
    fn every_block_architecture_is_served_but_ssd_only() {
        for ok in [
            "cache:mode=write-back",
            "linear",
            "hca",
            "zfs-l2arc-like",
            "greendm-tiering",
            "greendm-caching",
            "otf-ast",
            "static-tiering",
        ] {
            assert!(servable(ok).is_ok(), "{ok}");
        }
        let e = servable("on-demand-caching").err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains("tierwise mount"), "{e}");
        assert!(servable("ssd-only").is_err());
    }
}
