//! GreenDM caching: the same drive with the SSD as a cache of HDD extents (copies, not moves).
//!
//! - A cache-entry table: SSD extent → the virtual (= HDD) extent it caches, with dirty flag,
//!   access time and reference bit; and per virtual extent its SSD extent and windowed miss
//!   counter. SSD extents come from a bitmap, lowest free first. The SSD starts empty.
//! - Prefetch (a copy) when an extent's windowed miss count reaches PT, under the same
//!   cancellations as tiering (SSD full, metadata flush, MCML, busy). While it is copied, I/O to
//!   the extent is served from the RAM copy (writes absorbed there make the new copy dirty).
//! - Writes to a cached extent go to the SSD and queue a write-back; the queue drops duplicates
//!   and is capped (`wb-queue`). When it is full a write to a clean extent goes to both devices
//!   instead (write-through), so nothing dirty is ever without a write-back on its way.
//! - Background eviction when free SSD extents fall to LT, until HT: victims by WSClock; a
//!   dirty victim is written back before it is dropped.
//! - Discards (deletes) are ignored: the data stays valid, as on a drive without TRIM support.

use super::greendm_common::{FREE, MetaFlush, SsdBitmap, TAG_META};
use super::greendm_tiering::GreenDmKnobs;
use super::{ArchBuild, Architecture, Placement, Setup, Usage};
use crate::collector::windowed_miss::WindowedMiss;
use crate::engine::Ctx;
use crate::extent_map::ExtentMap;
use crate::params::{ConfigError, ParamSpec, Params};
use crate::{LOGICAL_ADDR, Level, Levels, Nanos, ObjectId, Op, Outcome, Request, Served, Work, WorkKind};

const CACHED: u16 = 1;
const FILLING: u16 = 2;
const DIRTY: u16 = 4;
const QUEUED: u16 = 8;
const WRITING_BACK: u16 = 16;
const REDIRTIED: u16 = 32;
const EVICTING: u16 = 64;
const ABSORBED: u16 = 128;
const REFERENCED: u16 = 256;
const TOUCHED: u16 = 512;

/// Write-backs in flight at most (the write-back thread's queue depth).
const WRITEBACKS_IN_FLIGHT: u32 = 64;

/// Per virtual extent (12 bytes).
#[derive(Clone, Copy, Debug, Default)]
struct Ce {
    le: u32,
    flags: u16,
    miss: WindowedMiss,
}

/// The GreenDM caching architecture.
#[derive(Debug)]
pub struct GreenDmCaching {
    es: u64,
    pt: u8,
    tw_s: u16,
    mcml: u32,
    lt: u32,
    ht: u32,
    tau_s: u16,
    wb_cap: usize,
    meta: MetaFlush,
    map: ExtentMap<Ce>,
    ssd_extents: u32,
    owner: Vec<u64>,
    ssd: SsdBitmap,
    queue: std::collections::VecDeque<u64>,
    moves: u32,
    writebacks: u32,
    evicting_pending: u32,
    evicting_mode: bool,
    hand: u32,
    dirty: u64,
    cached: u64,
    counters: Counters,
}

#[derive(Clone, Copy, Debug, Default)]
struct Counters {
    cancel_full: u64,
    cancel_mcml: u64,
    cancel_flush: u64,
    cancel_busy: u64,
    duplicate_writebacks: u64,
    write_through_queue_full: u64,
    served_from_ram: u64,
}

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "es",
        default: "64KiB",
        help: "extent size, a multiple of 4 KiB; front ends split requests at ES (paper: 64 KiB beat 4 KiB)",
    },
    ParamSpec { name: "pt", default: "1", help: "prefetch threshold: misses within TW (1..=255)" },
    ParamSpec { name: "tw", default: "60s", help: "time window between misses that count together (1s..=9h)" },
    ParamSpec { name: "mcml", default: "16", help: "maximum concurrent prefetches and evictions (1..=4096)" },
    ParamSpec {
        name: "lt",
        // Not a literal: it follows the SSD's size, so a recorded spec (`full_spec`) leaves it out.
        default: "(64, at most a quarter of the SSD's extents)",
        help: "evict when free SSD extents fall to LT (0..HT; at most a quarter of the SSD's extents by default)",
    },
    ParamSpec {
        name: "ht",
        default: "(128, at most half of the SSD's extents)",
        help: "evict until HT SSD extents are free (at most half of the SSD's extents by default)",
    },
    ParamSpec { name: "window", default: "30s", help: "WSClock working-set window (1s..=9h)" },
    ParamSpec { name: "wb-queue", default: "1024", help: "write-back queue capacity (1..=2^24)" },
    ParamSpec { name: "md-flush", default: "60s", help: "metadata flush interval (0 = never)" },
    ParamSpec { name: "md-flush-time", default: "100ms", help: "prefetches are cancelled this long per flush" },
];

impl ArchBuild for GreenDmCaching {
    const NAME: &'static str = "greendm-caching";
    const CAPS: crate::arch::Capabilities = crate::arch::Capabilities::BLOCK_CACHING
        .with_ram_level(crate::arch::RamLevel::MoveCopies)
        .with_objects(crate::arch::ObjectSizes::Extent("es"));
    const VERSION: u32 = 1;
    const HELP: &'static str = "GreenDM caching: prefetch on windowed misses, write-back queue with duplicate removal and a cap, LT/HT eviction";
    const PARAMS: &'static [ParamSpec] = PARAMS;
    const USES_COLLECTOR: bool = false;

    fn build(p: &mut Params, setup: &Setup) -> Result<Self, ConfigError> {
        let GreenDmKnobs { es, pt, tw_s, mcml, extents: n, lt, ht, tau_s, md_every, md_time } =
            GreenDmKnobs::parse(p, setup)?;
        let wb_cap = p.u64("wb-queue", 1, 1 << 24)? as usize;
        Ok(GreenDmCaching {
            es,
            pt,
            tw_s,
            mcml,
            lt,
            ht,
            tau_s,
            wb_cap,
            meta: MetaFlush::new(md_every, md_time),
            map: ExtentMap::new(),
            ssd_extents: n,
            owner: vec![FREE; n as usize],
            ssd: SsdBitmap::new(n, false),
            queue: std::collections::VecDeque::new(),
            moves: 0,
            writebacks: 0,
            evicting_pending: 0,
            evicting_mode: false,
            hand: 0,
            dirty: 0,
            cached: 0,
            counters: Counters::default(),
        })
    }
}

#[inline]
fn secs(now: Nanos) -> u16 {
    (now.0 / 1_000_000_000) as u16
}

impl GreenDmCaching {
    fn entry_mut(&mut self, v: u64) -> &mut Ce {
        let e = self.map.get_mut(v);
        e.flags |= TOUCHED;
        e
    }

    fn alloc_ssd(&mut self) -> Option<u32> {
        self.ssd.alloc()
    }

    fn free_le(&mut self, le: u32) {
        self.ssd.release(le);
        self.owner[le as usize] = FREE;
    }

    fn fast_addr(&self, le: u32) -> u64 {
        u64::from(le) * self.es
    }

    fn issue(&self, cx: &mut Ctx<'_>, kind: WorkKind, v: u64, le: u32) {
        let (from, to) = match kind {
            WorkKind::Copy => (Level::Slow, Level::Fast),
            WorkKind::Writeback => (Level::Fast, Level::Slow),
            _ => (Level::Fast, Level::Fast),
        };
        cx.issue(
            Work::new(kind, ObjectId(v), from, to, self.es)
                .at(LOGICAL_ADDR, self.fast_addr(le))
                .with_tag(u64::from(le)),
        );
    }

    fn try_prefetch(&mut self, cx: &mut Ctx<'_>, v: u64) {
        let e = self.map.get(v);
        if e.flags & (FILLING | CACHED) != 0 {
            self.counters.cancel_busy += 1;
            return;
        }
        if self.moves >= self.mcml {
            self.counters.cancel_mcml += 1;
            return;
        }
        if self.meta.flushing(cx.now) {
            self.counters.cancel_flush += 1;
            return;
        }
        let Some(le) = self.alloc_ssd() else {
            self.counters.cancel_full += 1;
            return;
        };
        self.owner[le as usize] = v;
        let e = self.entry_mut(v);
        e.flags |= FILLING;
        e.le = le;
        self.moves += 1;
        self.issue(cx, WorkKind::Copy, v, le);
    }

    /// Queues a write-back for a dirty extent; false when the queue is full.
    fn enqueue(&mut self, v: u64) -> bool {
        let e = self.map.get(v);
        if e.flags & QUEUED != 0 {
            self.counters.duplicate_writebacks += 1;
            return true;
        }
        if self.queue.len() >= self.wb_cap {
            return false;
        }
        self.queue.push_back(v);
        self.entry_mut(v).flags |= QUEUED;
        true
    }

    fn start_writeback(&mut self, cx: &mut Ctx<'_>, v: u64) {
        let e = self.entry_mut(v);
        e.flags |= WRITING_BACK;
        let le = e.le;
        self.writebacks += 1;
        self.issue(cx, WorkKind::Writeback, v, le);
    }

    /// The write-back thread: issues queued write-backs.
    fn pump(&mut self, cx: &mut Ctx<'_>) {
        while self.writebacks < WRITEBACKS_IN_FLIGHT {
            let Some(v) = self.queue.pop_front() else { break };
            let e = self.entry_mut(v);
            e.flags &= !QUEUED;
            if e.flags & DIRTY != 0 && e.flags & WRITING_BACK == 0 {
                self.start_writeback(cx, v);
            }
        }
    }

    fn victim(&mut self, now: Nanos) -> Option<(u64, u32)> {
        let n = self.ssd_extents;
        let now_s = secs(now);
        let mut oldest: Option<(u16, u32)> = None;
        for _ in 0..2 * n {
            let le = self.hand;
            self.hand = if self.hand + 1 == n { 0 } else { self.hand + 1 };
            let v = self.owner[le as usize];
            if v == FREE {
                continue;
            }
            let e = self.map.get(v);
            if e.flags & CACHED == 0 || e.flags & (EVICTING | FILLING) != 0 {
                continue;
            }
            if e.flags & REFERENCED != 0 {
                self.entry_mut(v).flags &= !REFERENCED;
                continue;
            }
            let age = now_s.wrapping_sub(e.miss.last_seen());
            if age > self.tau_s {
                return Some((v, le));
            }
            if oldest.is_none_or(|(a, _)| age > a) {
                oldest = Some((age, le));
            }
        }
        let (_, le) = oldest?;
        Some((self.owner[le as usize], le))
    }

    fn drop_copy(&mut self, cx: &mut Ctx<'_>, v: u64, le: u32) {
        self.issue(cx, WorkKind::Invalidate, v, le);
        let e = self.entry_mut(v);
        e.flags &= !(CACHED | EVICTING | REFERENCED);
        e.miss.reset();
        self.free_le(le);
        self.cached -= 1;
    }

    fn run_eviction(&mut self, cx: &mut Ctx<'_>) {
        if self.ssd.free() <= self.lt {
            self.evicting_mode = true;
        }
        while self.evicting_mode && self.ssd.free() + self.evicting_pending < self.ht && self.moves < self.mcml {
            let Some((v, le)) = self.victim(cx.now) else { break };
            let e = self.map.get(v);
            if e.flags & DIRTY == 0 {
                self.drop_copy(cx, v, le);
            } else {
                self.entry_mut(v).flags |= EVICTING;
                self.evicting_pending += 1;
                self.moves += 1;
                if e.flags & WRITING_BACK == 0 {
                    self.start_writeback(cx, v);
                }
            }
        }
        if self.ssd.free() + self.evicting_pending >= self.ht {
            self.evicting_mode = false;
        }
    }

    fn mark_dirty(&mut self, v: u64) {
        let e = self.entry_mut(v);
        if e.flags & DIRTY == 0 {
            e.flags |= DIRTY;
            self.dirty += 1;
        } else if e.flags & WRITING_BACK != 0 {
            e.flags |= REDIRTIED;
        }
    }
}

impl Architecture for GreenDmCaching {
    fn access(&mut self, cx: &mut Ctx<'_>, req: &Request) -> Served {
        if !req.op.is_data() {
            return Served::metadata();
        }
        let v = req.obj.0;
        let e = self.map.get(v);
        let now = cx.now;
        let served = if e.flags & FILLING != 0 {
            self.counters.served_from_ram += 1;
            if req.op == Op::Write {
                self.entry_mut(v).flags |= ABSORBED;
            }
            Served::by(Level::Ram)
        } else if e.flags & CACHED != 0 {
            let le = e.le;
            let ent = self.entry_mut(v);
            ent.flags |= REFERENCED;
            ent.miss.touch_at(now);
            if req.op == Op::Write {
                if ent.flags & EVICTING != 0 {
                    // Written again: keep it after all; its write-back goes on.
                    ent.flags &= !EVICTING;
                    self.evicting_pending -= 1;
                    self.moves -= 1;
                }
                let flags = self.map.get(v).flags;
                if flags & DIRTY != 0 {
                    // Already queued or being written back: the queue drops the duplicate.
                    if flags & QUEUED != 0 {
                        self.counters.duplicate_writebacks += 1;
                    }
                    self.mark_dirty(v);
                    Served::by(Level::Fast).at_fast(self.fast_addr(le))
                } else if self.enqueue(v) {
                    self.mark_dirty(v);
                    Served::by(Level::Fast).at_fast(self.fast_addr(le))
                } else {
                    // Queue full: write through, the copy stays clean.
                    self.counters.write_through_queue_full += 1;
                    Served::written_to(Levels::one(Level::Fast).with(Level::Slow)).at_fast(self.fast_addr(le))
                }
            } else {
                Served::by(Level::Fast).at_fast(self.fast_addr(le))
            }
        } else {
            let tw = self.tw_s;
            let count = self.entry_mut(v).miss.miss(now, tw);
            if self.ssd.free() <= self.lt || self.evicting_mode {
                self.run_eviction(cx);
            }
            if count >= self.pt {
                self.try_prefetch(cx, v);
            }
            Served::by(Level::Slow)
        };
        self.pump(cx);
        served
    }

    fn complete(&mut self, cx: &mut Ctx<'_>, work: &Work, outcome: Outcome) {
        if work.tag == TAG_META {
            return;
        }
        let v = work.obj.0;
        let le = work.tag as u32;
        match work.kind {
            WorkKind::Copy => {
                self.moves -= 1;
                let e = self.entry_mut(v);
                let absorbed = e.flags & ABSORBED != 0;
                e.flags &= !(FILLING | ABSORBED);
                if outcome == Outcome::Done {
                    e.flags |= CACHED | REFERENCED;
                    e.miss.touch_at(cx.now);
                    self.cached += 1;
                    if absorbed {
                        // The copy carries writes the HDD does not have yet.
                        self.mark_dirty(v);
                        if !self.enqueue(v) {
                            self.start_writeback(cx, v);
                        }
                    }
                } else {
                    // The front end wrote the RAM copy back to the HDD.
                    self.free_le(le);
                }
            }
            WorkKind::Writeback => {
                self.writebacks -= 1;
                let e = self.entry_mut(v);
                e.flags &= !WRITING_BACK;
                let evicting = e.flags & EVICTING != 0;
                if outcome == Outcome::Done && e.flags & REDIRTIED == 0 {
                    e.flags &= !DIRTY;
                    self.dirty -= 1;
                    if evicting {
                        self.evicting_pending -= 1;
                        self.moves -= 1;
                        self.drop_copy(cx, v, le);
                    }
                } else {
                    e.flags &= !REDIRTIED;
                    if !self.enqueue(v) {
                        self.start_writeback(cx, v);
                    }
                }
            }
            _ => {}
        }
        self.run_eviction(cx);
        self.pump(cx);
    }

    fn tick(&mut self, cx: &mut Ctx<'_>) {
        self.meta.tick(cx, self.map.memory_bytes() as u64);
    }

    fn next_tick(&self) -> Option<Nanos> {
        self.meta.next_tick()
    }

    fn flush(&mut self, cx: &mut Ctx<'_>) {
        let dirty: Vec<u64> = self
            .map
            .iter()
            .filter(|(_, e)| e.flags & DIRTY != 0 && e.flags & WRITING_BACK == 0)
            .map(|(v, _)| v)
            .collect();
        for v in dirty {
            self.start_writeback(cx, v);
        }
    }

    fn placement(&self, obj: ObjectId) -> Placement {
        let e = self.map.get(obj.0);
        Placement {
            tracked: e.flags & TOUCHED != 0,
            on_fast: e.flags & CACHED != 0,
            on_slow: true,
            dirty: e.flags & DIRTY != 0,
            moving: e.flags & (FILLING | WRITING_BACK) != 0,
            in_ram: false,
        }
    }

    fn usage(&self) -> Usage {
        Usage {
            fast_capacity: u64::from(self.ssd_extents) * self.es,
            fast_used: u64::from(self.ssd_extents - self.ssd.free()) * self.es,
            dirty_bytes: self.dirty * self.es,
            objects: self.map.iter().filter(|(_, e)| e.flags & TOUCHED != 0).count(),
            fast_objects: self.cached as usize,
            in_flight: 0,
        }
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        let c = &self.counters;
        vec![
            ("prefetches cancelled: SSD full", c.cancel_full),
            ("prefetches cancelled: MCML reached", c.cancel_mcml),
            ("prefetches cancelled: metadata flush", c.cancel_flush),
            ("prefetches cancelled: extent busy", c.cancel_busy),
            ("write-backs deduplicated in the queue", c.duplicate_writebacks),
            ("writes sent through: queue full", c.write_through_queue_full),
            ("I/Os served from RAM during prefetch", c.served_from_ram),
            ("metadata flushes", self.meta.count),
        ]
    }

    fn check_invariants(&self) -> Result<(), String> {
        let (mut cached, mut dirty, mut wb, mut evicting) = (0u64, 0u64, 0u32, 0u32);
        for (le, v) in self.ssd.check(&self.owner)? {
            let e = self.map.get(v);
            if e.le != le || e.flags & (CACHED | FILLING) == 0 {
                return Err(format!("SSD extent {le} owned by {v:#x} (flags {:#x}, le {})", e.flags, e.le));
            }
        }
        for (v, e) in self.map.iter() {
            if e.flags & CACHED != 0 {
                cached += 1;
                if self.owner[e.le as usize] != v {
                    return Err(format!("{v:#x} cached in SSD extent {} owned by another", e.le));
                }
            }
            if e.flags & DIRTY != 0 {
                dirty += 1;
                if e.flags & CACHED == 0 {
                    return Err(format!("{v:#x} dirty but not cached"));
                }
                if e.flags & (QUEUED | WRITING_BACK) == 0 {
                    return Err(format!("{v:#x} dirty with no write-back queued or in flight"));
                }
            }
            if e.flags & WRITING_BACK != 0 {
                wb += 1;
            }
            if e.flags & EVICTING != 0 {
                evicting += 1;
            }
        }
        if cached != self.cached || dirty != self.dirty {
            return Err(format!("counters cached {} dirty {} but found {cached} {dirty}", self.cached, self.dirty));
        }
        if wb != self.writebacks || evicting != self.evicting_pending {
            return Err(format!(
                "write-backs {} / {wb}, evicting {} / {evicting}",
                self.writebacks, self.evicting_pending
            ));
        }
        Ok(())
    }

    fn memory_bytes(&self) -> usize {
        self.map.memory_bytes() + self.owner.capacity() * 8 + self.ssd.memory_bytes() + self.queue.capacity() * 8
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{Harness, OBJ, Step};
    use crate::{Level, ObjectId, Request, WorkKind};

    /// GreenDM caching prefetches an extent after PT misses within TW, serves it from RAM while
    /// copying, then from the SSD; writes queue one write-back each (duplicates dropped).
    #[test]
    fn greendm_caching_prefetches_and_queues_write_backs() {
        let mut h = Harness::new("greendm-caching:pt=2,md-flush=0", 8, false);
        h.step(&Step::Read(3, true)).unwrap();
        assert!(h.queued.is_empty(), "one miss is below PT");
        h.step(&Step::Read(3, true)).unwrap();
        assert_eq!(h.queued.len(), 1);
        assert_eq!(h.queued[0].kind, WorkKind::Copy);
        assert_eq!(h.engine.access(&Request::read(ObjectId(3), 0, OBJ)).level, Level::Ram);
        h.drain();
        h.step(&Step::Execute(0)).unwrap();
        h.step(&Step::Complete(0, 9)).unwrap();
        assert_eq!(h.engine.access(&Request::read(ObjectId(3), 0, OBJ)).level, Level::Fast);
        h.step(&Step::Write(3, true)).unwrap();
        h.step(&Step::Write(3, true)).unwrap();
        let wb = h.queued.iter().filter(|w| w.kind == WorkKind::Writeback).count();
        assert_eq!(wb, 1, "one write-back for the dirty extent");
        h.settle().unwrap();
        let c: std::collections::BTreeMap<_, _> = h.engine.arch_counters().into_iter().collect();
        assert!(c["I/Os served from RAM during prefetch"] >= 1);
    }
}
