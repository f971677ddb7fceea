//! GreenDM tiering (Li, Chen, Mukker and Zadok, ACM ToS 2015): a hybrid drive that splits the
//! virtual address space into extents of ES bytes and keeps each extent on exactly one device.
//!
//! - A mapping table (virtual extent → device + logical extent, state, miss count, last use),
//!   populated lazily. By default the drive starts empty: every virtual extent `v` is at its
//!   home, HDD logical extent `v`, and the SSD is free. With `scanned=true` it starts as the
//!   paper's experiments did ("we scanned the device initially to fill the mapping table"):
//!   virtual extent `v` lives on SSD logical extent `v` when `v` is below the SSD's extent
//!   count, and on HDD logical extent `v - ssd_extents` otherwise — the Linear layout — so that
//!   every promotion must first demote one of those extents, touched by the workload or not.
//! - A bitmap of used SSD extents with a free list allocated from low addresses; on the HDD,
//!   extents freed by promotions plus `reserved` spare extents, so that demotion always finds
//!   room (a demotion that finds none stalls and is counted). A demotion goes to the free HDD
//!   extent nearest the victim's home, which is its own home when the promotion freed it: a
//!   demoted extent lands where its neighbours are, not at a random address.
//! - Promotion when an extent's windowed miss count (misses within TW seconds of each other)
//!   reaches PT. It is cancelled when the SSD is full, metadata is being flushed, MCML moves are
//!   in flight, or the extent is busy (already moving).
//! - While an extent is promoted, its data is read into RAM and I/Os to it are served from the
//!   RAM copy (writes included: the SSD write carries them; a failed promotion writes the RAM
//!   copy back to the HDD — the front end's part of the contract).
//! - Background demotion when free SSD extents fall to LT, until HT are free (counting
//!   demotions in flight), victims by WSClock over the SSD extents; an access to an extent
//!   being demoted cancels its demotion.
//! - Metadata is flushed to the SSD every `md-flush` (its bytes are written), and promotions
//!   are cancelled for `md-flush-time` each time.
//!
//! Memory: an 8-byte table entry per virtual extent in touched 64-extent chunks, 8 bytes per SSD
//! extent for the reverse map and a bitmap bit.

use super::greendm_common::{FREE, MetaFlush, SsdBitmap, TAG_META};
use super::{ArchBuild, Architecture, Placement, Setup, Usage};
use crate::collector::windowed_miss::{MAX_WINDOW_S, WindowedMiss};
use crate::engine::Ctx;
use crate::extent_map::ExtentMap;
use crate::params::{ConfigError, ParamSpec, Params};
use crate::{Level, Nanos, ObjectId, Outcome, Request, Served, Work, WorkKind};

// Entry flags.
const ON_SSD: u8 = 1;
const RELOCATED: u8 = 2;
const PROMOTING: u8 = 4;
const DEMOTING: u8 = 8;
const STALE: u8 = 16;
const REFERENCED: u8 = 32;
const TOUCHED: u8 = 64;
/// The extent's home on the HDD (`home(v)`) is free: a demotion goes back there.
const HOME_FREE: u8 = 128;

/// HDD extents from here on are the reserved spares: the extents of the spare volume, which
/// the simulator lays out after the trace's volumes.
const SPARE_BASE: u64 = ObjectId::block_of(ObjectId::SPARE_VOLUME, 0).0;

/// One mapping-table entry (8 bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Ve {
    /// SSD logical extent when on the SSD; index into `relocated` when on the HDD away from home.
    le: u32,
    flags: u8,
    miss: WindowedMiss,
}

const _: () = assert!(std::mem::size_of::<Ve>() == 8, "a mapping-table entry stays 8 bytes");

/// The GreenDM tiering architecture.
#[derive(Debug)]
pub struct GreenDmTiering {
    es: u64,
    pt: u8,
    tw_s: u16,
    mcml: u32,
    lt: u32,
    ht: u32,
    tau_s: u16,
    meta: MetaFlush,
    map: ExtentMap<Ve>,
    ssd_extents: u32,
    /// Virtual extent per SSD logical extent, FREE when free.
    owner: Vec<u64>,
    ssd: SsdBitmap,
    /// Free HDD extents, last freed first. An entry below [`SPARE_BASE`] is the home of
    /// extent `owner_of_home(h)` and is free only while that extent has [`HOME_FREE`] (a
    /// demotion back home takes it without searching this list).
    hdd_free: Vec<u64>,
    /// Virtual extents below this start on the SSD (the scanned start); 0 when empty.
    scanned_below: u64,
    relocated: Vec<u64>,
    relocated_free: Vec<u32>,
    reserved_next: u64,
    reserved_left: u32,
    moves: u32,
    demotions_in_flight: u32,
    demoting: bool,
    hand: u32,
    ssd_residents: u64,
    counters: Counters,
}

#[derive(Clone, Copy, Debug, Default)]
struct Counters {
    cancel_full: u64,
    cancel_mcml: u64,
    cancel_flush: u64,
    cancel_busy: u64,
    demotion_stalled: u64,
    demotion_cancelled: u64,
    served_from_ram: u64,
}

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "es",
        default: "64KiB",
        help: "extent size, a multiple of 4 KiB; front ends split requests at ES (paper, FIU online: +142% over Linear at 64 KiB, +58% at 4 KiB)",
    },
    ParamSpec { name: "pt", default: "1", help: "promotion threshold: misses within TW (1..=255)" },
    ParamSpec { name: "tw", default: "60s", help: "time window between misses that count together (1s..=9h)" },
    ParamSpec { name: "mcml", default: "16", help: "maximum concurrent migrations (1..=4096)" },
    ParamSpec {
        name: "lt",
        // Not a literal: it follows the SSD's size, so a recorded spec (`full_spec`) leaves it out.
        default: "(64, at most a quarter of the SSD's extents)",
        help: "demote when free SSD extents fall to LT (0..HT; at most a quarter of the SSD's extents by default)",
    },
    ParamSpec {
        name: "ht",
        default: "(128, at most half of the SSD's extents)",
        help: "demote until HT SSD extents are free (LT+1..=SSD extents; at most half of them by default)",
    },
    ParamSpec { name: "reserved", default: "64", help: "spare HDD extents for demotions (0..=2^20)" },
    ParamSpec {
        name: "scanned",
        default: "false",
        help: "start with the SSD full, holding virtual extents 0..N (the paper's setup), instead of empty",
    },
    ParamSpec { name: "window", default: "30s", help: "WSClock working-set window (1s..=9h)" },
    ParamSpec { name: "md-flush", default: "60s", help: "metadata flush interval (0 = never)" },
    ParamSpec { name: "md-flush-time", default: "100ms", help: "promotions are cancelled this long per flush" },
];

impl ArchBuild for GreenDmTiering {
    const NAME: &'static str = "greendm-tiering";
    const CAPS: crate::arch::Capabilities = crate::arch::Capabilities::BLOCK_TIERING
        .with_ram_level(crate::arch::RamLevel::MoveCopies)
        .with_objects(crate::arch::ObjectSizes::Extent("es"));
    const VERSION: u32 = 1;
    const HELP: &'static str =
        "GreenDM tiering: extents move on windowed misses (PT, TW), MCML, LT/HT background demotion by WSClock";
    const PARAMS: &'static [ParamSpec] = PARAMS;
    const USES_COLLECTOR: bool = false;

    fn build(p: &mut Params, setup: &Setup) -> Result<Self, ConfigError> {
        let GreenDmKnobs { es, pt, tw_s, mcml, extents: ssd_extents, lt, ht, tau_s, md_every, md_time } =
            GreenDmKnobs::parse(p, setup)?;
        let reserved = p.u64("reserved", 0, 1 << 20)? as u32;
        let scanned = p.bool("scanned")?;
        Ok(GreenDmTiering {
            es,
            pt,
            tw_s,
            mcml,
            lt,
            ht,
            tau_s,
            meta: MetaFlush::new(md_every, md_time),
            map: ExtentMap::new(),
            ssd_extents,
            // Scanned start: SSD extent i holds virtual extent i.
            owner: if scanned { (0..u64::from(ssd_extents)).collect() } else { vec![FREE; ssd_extents as usize] },
            ssd: SsdBitmap::new(ssd_extents, scanned),
            hdd_free: Vec::new(),
            scanned_below: if scanned { u64::from(ssd_extents) } else { 0 },
            relocated: Vec::new(),
            relocated_free: Vec::new(),
            // Reserved spares sit past every volume of the trace.
            reserved_next: SPARE_BASE,
            reserved_left: reserved,
            moves: 0,
            demotions_in_flight: 0,
            demoting: false,
            hand: 0,
            ssd_residents: if scanned { u64::from(ssd_extents) } else { 0 },
            counters: Counters::default(),
        })
    }
}

/// The knobs GreenDM's tiering and caching modes share, validated together.
pub(crate) struct GreenDmKnobs {
    pub(crate) es: u64,
    pub(crate) pt: u8,
    pub(crate) tw_s: u16,
    pub(crate) mcml: u32,
    /// SSD extents.
    pub(crate) extents: u32,
    pub(crate) lt: u32,
    pub(crate) ht: u32,
    /// WSClock working-set window, seconds.
    pub(crate) tau_s: u16,
    pub(crate) md_every: Nanos,
    pub(crate) md_time: Nanos,
}

impl GreenDmKnobs {
    pub(crate) fn parse(p: &mut Params, setup: &Setup) -> Result<GreenDmKnobs, ConfigError> {
        let es = extent_size(p, setup)?;
        let pt = p.u64("pt", 1, 255)? as u8;
        let max_w = Nanos::from_secs(MAX_WINDOW_S);
        let tw = p.duration("tw", Nanos::from_secs(1), max_w)?;
        let mcml = p.u64("mcml", 1, 4096)? as u32;
        let n = setup.fast_capacity / es;
        if n == 0 {
            return Err(p.inconsistent(format!(
                "the SSD ({} bytes) is smaller than one extent (es = {es} bytes)",
                setup.fast_capacity
            )));
        }
        if n > u64::from(u32::MAX) {
            return Err(p.inconsistent("more than 2^32 SSD extents: use a larger es"));
        }
        let lt = p.u64_or("lt", 64.min(n / 4), 0, n)? as u32;
        let ht = p.u64_or("ht", 128.min(n / 2).max(u64::from(lt) + 1), 1, n)? as u32;
        if lt >= ht {
            return Err(
                p.inconsistent(format!("lt ({lt}) must be below ht ({ht}); allowed: 0 <= lt < ht <= {n} SSD extents"))
            );
        }
        let window = p.duration("window", Nanos::from_secs(1), max_w)?;
        let md_every = p.duration("md-flush", Nanos::ZERO, Nanos::from_secs(86_400))?;
        let md_time = p.duration("md-flush-time", Nanos::ZERO, Nanos::from_secs(60))?;
        Ok(GreenDmKnobs {
            es,
            pt,
            tw_s: (tw.0 / 1_000_000_000) as u16,
            mcml,
            extents: n as u32,
            lt,
            ht,
            tau_s: (window.0 / 1_000_000_000) as u16,
            md_every,
            md_time,
        })
    }
}

/// ES: a multiple of 4 KiB equal to the object size the front end splits requests at.
pub(crate) fn extent_size(p: &mut Params, setup: &Setup) -> Result<u64, ConfigError> {
    if setup.object_size == 0 {
        return Err(p.inconsistent("needs fixed-size extents: run with --objects blocks:ES"));
    }
    let es = p.size_or("es", setup.object_size, 4096, 1 << 30)?;
    if es % 4096 != 0 {
        return Err(p.inconsistent(format!("es = {es}: must be a multiple of 4 KiB (4096..=1GiB)")));
    }
    if es != setup.object_size {
        return Err(p.inconsistent(format!(
            "es = {es} but requests are split into {}-byte blocks: run with --objects blocks:{es}",
            setup.object_size
        )));
    }
    Ok(es)
}

#[inline]
fn secs(now: Nanos) -> u16 {
    (now.0 / 1_000_000_000) as u16
}

impl GreenDmTiering {
    /// The logical HDD byte address of HDD extent `h` (its volume kept; see
    /// [`ObjectId::logical_addr`]): extent ids carry their volume, so `h * es` would not do.
    fn hdd_addr(&self, h: u64) -> u64 {
        ObjectId(h).logical_addr(self.es)
    }

    /// The HDD extent that is home to virtual extent `v` (`v >= scanned_below`): a scanned
    /// start shifts volume 0's homes down by the extents it put on the SSD (the paper's
    /// concatenated start); other volumes keep their ids.
    fn home(&self, v: u64) -> u64 {
        if ObjectId(v).volume() == 0 { v - self.scanned_below } else { v }
    }

    /// The virtual extent whose home is HDD extent `h` (below [`SPARE_BASE`]).
    fn owner_of_home(&self, h: u64) -> u64 {
        if ObjectId(h).volume() == 0 { h + self.scanned_below } else { h }
    }

    /// The HDD logical extent of a virtual extent that is on the HDD.
    fn hdd_le(&self, v: u64, e: &Ve) -> u64 {
        if e.flags & RELOCATED != 0 { self.relocated[e.le as usize] } else { self.home(v) }
    }

    fn entry(&self, v: u64) -> Ve {
        let mut e = self.map.get(v);
        if e.flags & TOUCHED == 0 && v < self.scanned_below {
            // Never touched: still where the scanned start put it.
            e = Ve { le: v as u32, flags: ON_SSD | TOUCHED, miss: WindowedMiss::default() };
        }
        e
    }

    fn entry_mut(&mut self, v: u64) -> &mut Ve {
        let scanned_below = self.scanned_below;
        let e = self.map.get_mut(v);
        if e.flags & TOUCHED == 0 {
            *e = if v < scanned_below {
                Ve { le: v as u32, flags: ON_SSD | TOUCHED, miss: WindowedMiss::default() }
            } else {
                Ve { le: 0, flags: TOUCHED, miss: WindowedMiss::default() }
            };
        }
        e
    }

    fn alloc_ssd(&mut self) -> Option<u32> {
        self.ssd.alloc()
    }

    fn free_ssd_le(&mut self, le: u32) {
        self.ssd.release(le);
        self.owner[le as usize] = FREE;
    }

    /// A free HDD extent for a demotion of `v`: its own home when that is free, else the
    /// last one freed.
    fn alloc_hdd(&mut self, v: u64) -> Option<u64> {
        if v >= self.scanned_below && self.entry(v).flags & HOME_FREE != 0 {
            self.entry_mut(v).flags &= !HOME_FREE;
            return Some(self.home(v));
        }
        while let Some(h) = self.hdd_free.pop() {
            if h >= SPARE_BASE {
                return Some(h);
            }
            let owner = self.owner_of_home(h);
            if self.entry(owner).flags & HOME_FREE != 0 {
                self.entry_mut(owner).flags &= !HOME_FREE;
                return Some(h);
            }
            // Taken already by its own extent's demotion back home.
        }
        if self.reserved_left > 0 {
            self.reserved_left -= 1;
            self.reserved_next += 1;
            return Some(self.reserved_next - 1);
        }
        None
    }

    /// HDD extent `h` is free again.
    fn release_hdd(&mut self, h: u64) {
        self.hdd_free.push(h);
        if h < SPARE_BASE {
            let owner = self.owner_of_home(h);
            self.entry_mut(owner).flags |= HOME_FREE;
        }
    }

    fn flushing(&self, now: Nanos) -> bool {
        self.meta.flushing(now)
    }

    fn try_promote(&mut self, cx: &mut Ctx<'_>, v: u64) {
        let e = self.entry(v);
        if e.flags & (PROMOTING | DEMOTING) != 0 {
            // GreenDM drops a promotion while the extent has I/O in flight. The engine sees one
            // access at a time, so here "busy" means the extent is already moving.
            self.counters.cancel_busy += 1;
            return;
        }
        if self.moves >= self.mcml {
            self.counters.cancel_mcml += 1;
            return;
        }
        if self.flushing(cx.now) {
            self.counters.cancel_flush += 1;
            return;
        }
        let Some(le) = self.alloc_ssd() else {
            self.counters.cancel_full += 1;
            return;
        };
        let hdd = self.hdd_le(v, &e);
        self.owner[le as usize] = v;
        let es = self.es;
        let ent = self.entry_mut(v);
        ent.flags |= PROMOTING;
        ent.flags &= !STALE;
        self.moves += 1;
        let w = Work::new(WorkKind::Promote, ObjectId(v), Level::Slow, Level::Fast, es)
            .at(self.hdd_addr(hdd), u64::from(le) * es)
            .with_tag(u64::from(le));
        cx.issue(w);
    }

    /// WSClock over the SSD extents: the next victim, or None after two laps.
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
            let e = self.entry(v);
            if e.flags & (PROMOTING | DEMOTING) != 0 || e.flags & ON_SSD == 0 {
                continue;
            }
            if e.flags & REFERENCED != 0 {
                self.entry_mut(v).flags &= !REFERENCED;
                continue;
            }
            let age = now_s.wrapping_sub(e.last_use_s());
            if age > self.tau_s || self.map.get(v).flags & TOUCHED == 0 {
                return Some((v, le));
            }
            if oldest.is_none_or(|(a, _)| age > a) {
                oldest = Some((age, le));
            }
        }
        let (_, le) = oldest?;
        Some((self.owner[le as usize], le))
    }

    fn run_demotion(&mut self, cx: &mut Ctx<'_>) {
        if self.ssd.free() <= self.lt {
            self.demoting = true;
        }
        while self.demoting && self.ssd.free() + self.demotions_in_flight < self.ht && self.moves < self.mcml {
            let Some((v, le)) = self.victim(cx.now) else { break };
            let Some(hdd) = self.alloc_hdd(v) else {
                self.counters.demotion_stalled += 1;
                break;
            };
            let es = self.es;
            let ent = self.entry_mut(v);
            ent.flags |= DEMOTING;
            ent.flags &= !STALE;
            self.moves += 1;
            self.demotions_in_flight += 1;
            let w = Work::new(WorkKind::Demote, ObjectId(v), Level::Fast, Level::Slow, es)
                .at(self.hdd_addr(hdd), u64::from(le) * es)
                .with_tag(hdd);
            cx.issue(w);
        }
        if self.ssd.free() + self.demotions_in_flight >= self.ht {
            self.demoting = false;
        }
    }

    fn set_hdd_home(&mut self, v: u64, hdd: u64) {
        let reloc = if v >= self.scanned_below && hdd == self.home(v) {
            None
        } else {
            Some(match self.relocated_free.pop() {
                Some(i) => {
                    self.relocated[i as usize] = hdd;
                    i
                }
                None => {
                    self.relocated.push(hdd);
                    (self.relocated.len() - 1) as u32
                }
            })
        };
        let e = self.entry_mut(v);
        e.flags &= !(ON_SSD | RELOCATED);
        match reloc {
            Some(i) => {
                e.flags |= RELOCATED;
                e.le = i;
            }
            None => e.le = 0,
        }
    }
}

impl Ve {
    /// While on the SSD, the miss clock holds the time of last use.
    fn last_use_s(&self) -> u16 {
        self.miss.last_seen()
    }
}

impl Architecture for GreenDmTiering {
    fn access(&mut self, cx: &mut Ctx<'_>, req: &Request) -> Served {
        if !req.op.is_data() {
            return Served::metadata();
        }
        let v = req.obj.0;
        let e = self.entry(v);
        if e.flags & PROMOTING != 0 {
            self.counters.served_from_ram += 1;
            return Served::by(Level::Ram);
        }
        if e.flags & ON_SSD != 0 {
            let now = cx.now;
            let ent = self.entry_mut(v);
            ent.flags |= REFERENCED;
            ent.miss.touch_at(now);
            if ent.flags & DEMOTING != 0 {
                ent.flags |= STALE;
            }
            let le = ent.le;
            return Served::by(Level::Fast).at_fast(u64::from(le) * self.es);
        }
        let hdd = self.hdd_le(v, &e);
        let (now, tw) = (cx.now, self.tw_s);
        let count = self.entry_mut(v).miss.miss(now, tw);
        if self.ssd.free() <= self.lt || self.demoting {
            self.run_demotion(cx);
        }
        if count >= self.pt {
            self.try_promote(cx, v);
        }
        Served::by(Level::Slow).at_slow(self.hdd_addr(hdd))
    }

    fn complete(&mut self, cx: &mut Ctx<'_>, work: &Work, outcome: Outcome) {
        if work.tag == TAG_META {
            return;
        }
        let v = work.obj.0;
        self.moves -= 1;
        match work.kind {
            WorkKind::Promote => {
                let le = work.tag as u32;
                let e = self.entry(v);
                if outcome == Outcome::Done {
                    // The old HDD home is free for demotions.
                    let old = self.hdd_le(v, &e);
                    if e.flags & RELOCATED != 0 {
                        self.relocated_free.push(e.le);
                    }
                    let now = cx.now;
                    let ent = self.entry_mut(v);
                    ent.flags = (ent.flags | ON_SSD | REFERENCED) & !(PROMOTING | RELOCATED | STALE);
                    ent.le = le;
                    ent.miss.reset();
                    ent.miss.touch_at(now);
                    self.release_hdd(old);
                    self.ssd_residents += 1;
                } else {
                    self.free_ssd_le(le);
                    self.entry_mut(v).flags &= !PROMOTING;
                }
            }
            WorkKind::Demote => {
                self.demotions_in_flight -= 1;
                let hdd = work.tag;
                let e = self.entry(v);
                if outcome == Outcome::Done && e.flags & STALE == 0 {
                    let le = e.le;
                    self.set_hdd_home(v, hdd);
                    let ent = self.entry_mut(v);
                    ent.flags &= !DEMOTING;
                    ent.miss.reset();
                    self.free_ssd_le(le);
                    self.ssd_residents -= 1;
                } else {
                    // Accessed meanwhile (or failed): it stays on the SSD.
                    self.counters.demotion_cancelled += 1;
                    self.release_hdd(hdd);
                    self.entry_mut(v).flags &= !(DEMOTING | STALE);
                }
            }
            _ => {}
        }
        self.run_demotion(cx);
    }

    /// A front end restarting tells which extents its SSD holds: each takes a free SSD extent
    /// as a completed promotion would (its HDD place is freed for demotions). An extent that
    /// does not fit, or is already placed, is left where the table has it.
    fn adopt(&mut self, cx: &mut Ctx<'_>, obj: ObjectId, level: Level, _size: u64, _dirty: bool) {
        let v = obj.0;
        let e = self.entry(v);
        if level != Level::Fast || e.flags & (ON_SSD | PROMOTING | DEMOTING) != 0 {
            return;
        }
        let Some(le) = self.alloc_ssd() else {
            return;
        };
        let old = self.hdd_le(v, &e);
        if e.flags & RELOCATED != 0 {
            self.relocated_free.push(e.le);
        }
        self.owner[le as usize] = v;
        let now = cx.now;
        let ent = self.entry_mut(v);
        ent.flags = (ent.flags | ON_SSD | REFERENCED) & !(RELOCATED | STALE);
        ent.le = le;
        ent.miss.reset();
        ent.miss.touch_at(now);
        self.release_hdd(old);
        self.ssd_residents += 1;
        self.run_demotion(cx);
    }

    fn tick(&mut self, cx: &mut Ctx<'_>) {
        self.meta.tick(cx, self.map.memory_bytes() as u64);
    }

    fn next_tick(&self) -> Option<Nanos> {
        self.meta.next_tick()
    }

    fn placement(&self, obj: ObjectId) -> Placement {
        let e = self.entry(obj.0);
        let on_fast = e.flags & ON_SSD != 0;
        Placement {
            tracked: self.map.get(obj.0).flags & TOUCHED != 0,
            on_fast,
            on_slow: !on_fast,
            dirty: false,
            moving: e.flags & (PROMOTING | DEMOTING) != 0,
            in_ram: false,
        }
    }

    fn usage(&self) -> Usage {
        Usage {
            fast_capacity: u64::from(self.ssd_extents) * self.es,
            fast_used: u64::from(self.ssd_extents - self.ssd.free()) * self.es,
            dirty_bytes: 0,
            objects: self.map.iter().filter(|(_, e)| e.flags & TOUCHED != 0).count(),
            fast_objects: self.ssd_residents as usize,
            in_flight: 0,
        }
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        let c = &self.counters;
        vec![
            ("promotions cancelled: SSD full", c.cancel_full),
            ("promotions cancelled: MCML reached", c.cancel_mcml),
            ("promotions cancelled: metadata flush", c.cancel_flush),
            ("promotions cancelled: extent busy", c.cancel_busy),
            ("demotions stalled: no free HDD extent", c.demotion_stalled),
            ("demotions cancelled by an access", c.demotion_cancelled),
            ("I/Os served from RAM during promotion", c.served_from_ram),
            ("metadata flushes", self.meta.count),
        ]
    }

    fn check_invariants(&self) -> Result<(), String> {
        let mut residents = 0u64;
        for (le, v) in self.ssd.check(&self.owner)? {
            let e = self.entry(v);
            if e.flags & ON_SSD != 0 {
                residents += 1;
                if e.le != le {
                    return Err(format!("SSD extent {le} owned by {v:#x}, which maps to SSD extent {}", e.le));
                }
            } else if e.flags & PROMOTING == 0 {
                return Err(format!("SSD extent {le} owned by {v:#x}, which is neither on the SSD nor promoting"));
            }
        }
        if residents != self.ssd_residents {
            return Err(format!("{} SSD residents counted, {residents} found", self.ssd_residents));
        }
        if self.moves > self.mcml + 1 {
            return Err(format!("{} moves in flight, MCML {}", self.moves, self.mcml));
        }
        // Every extent on exactly one device: HDD homes are distinct.
        let mut homes = std::collections::HashSet::new();
        for (v, e) in self.map.iter() {
            if e.flags & TOUCHED == 0 {
                continue;
            }
            if e.flags & ON_SSD != 0 {
                if self.owner[e.le as usize] != v {
                    return Err(format!("{v:#x} claims SSD extent {} owned by {:#x}", e.le, self.owner[e.le as usize]));
                }
            } else if v >= self.scanned_below || e.flags & RELOCATED != 0 {
                let h = self.hdd_le(v, e);
                if !homes.insert(h) {
                    return Err(format!("HDD extent {h} holds two virtual extents"));
                }
            }
        }
        for (v, e) in self.map.iter() {
            if e.flags & HOME_FREE != 0 && (v < self.scanned_below || homes.contains(&self.home(v))) {
                return Err(format!("{v:#x}'s home is marked free but holds an extent (or it has none)"));
            }
        }
        Ok(())
    }

    fn memory_bytes(&self) -> usize {
        self.map.memory_bytes()
            + self.owner.capacity() * 8
            + self.ssd.memory_bytes()
            + self.hdd_free.capacity() * 8
            + self.relocated.capacity() * 8
            + self.relocated_free.capacity() * 4
    }
}

#[cfg(test)]
#[path = "greendm_tiering_tests.rs"]
mod tests;
