//! A device's request queue as a Linux host and a SATA drive have it: block-layer merging of
//! contiguous same-direction requests up to `max_sectors_kb`, an I/O scheduler, and the
//! drive's own command queue (NCQ) that reorders by positioning time.
//!
//! - [`Scheduler::Fifo`]: the simulator's old model — arrival order, no merging, one command
//!   at a time, priorities ignored. For comparison only.
//! - [`Scheduler::None`]: blk-mq `none`: arrival order, merging, NCQ.
//! - [`Scheduler::MqDeadline`] (the default for rotational disks), as `block/mq-deadline.c`
//!   dispatches: in batches of up to `fifo_batch` (16) requests of one direction in ascending
//!   sector order from where that direction last stopped; each new batch prefers reads, but
//!   writes get the next batch once reads have been chosen over waiting writes `writes_starved`
//!   (2) times; a batch starts at the oldest request when its deadline (reads 500 ms, writes
//!   5 s) has passed or nothing lies ahead. I/O priority classes:
//!   idle-class requests go only when no normal request is queued, after an idle gap, unless
//!   they have waited `prio_aging` (10 s, mq-deadline's `prio_aging_expire`).
//!
//! Service time is decided when the drive starts a command, from the head position and the
//! platter angle at that moment (see `hdd.rs`), so reordering pays off as it does on a drive.

use std::collections::{BTreeMap, VecDeque};

use serde::{Deserialize, Serialize};
use tierwise_core::Nanos;

use super::{DevOp, Device};

/// Which I/O scheduler orders the queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Scheduler {
    /// Arrival order, no merging, no NCQ, no priorities (the old model).
    Fifo,
    /// blk-mq `none`: arrival order with merging and NCQ.
    None,
    /// mq-deadline: sorted dispatch with deadlines and priority classes.
    MqDeadline,
}

impl Scheduler {
    /// Parses `fifo`, `none` or `mq-deadline`.
    pub fn parse(s: &str) -> Result<Scheduler, String> {
        match s {
            "fifo" => Ok(Scheduler::Fifo),
            "none" => Ok(Scheduler::None),
            "mq-deadline" | "deadline" => Ok(Scheduler::MqDeadline),
            _ => Err(format!("unknown HDD queue `{s}`: expected mq-deadline (default), none or fifo")),
        }
    }

    /// Short label.
    pub fn label(&self) -> &'static str {
        match self {
            Scheduler::Fifo => "fifo",
            Scheduler::None => "none",
            Scheduler::MqDeadline => "mq-deadline",
        }
    }
}

/// A queue's settings; the defaults are a stock Linux host's for a SATA disk.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct QueueConfig {
    /// The scheduler.
    pub scheduler: Scheduler,
    /// Largest merged request (`max_sectors_kb`: 1280 KiB on recent kernels).
    pub max_request_bytes: u64,
    /// mq-deadline `read_expire`.
    pub read_expire: Nanos,
    /// mq-deadline `write_expire`.
    pub write_expire: Nanos,
    /// mq-deadline `fifo_batch`: requests dispatched in one direction before choosing again.
    pub fifo_batch: u32,
    /// mq-deadline `writes_starved`: read batches chosen over waiting writes before writes go.
    pub writes_starved: u32,
    /// mq-deadline `prio_aging_expire`: idle-class requests older than this go as normal.
    pub prio_aging: Nanos,
    /// A command the drive has held this long goes before shorter-positioning ones.
    pub ncq_starvation: Nanos,
}

impl Default for QueueConfig {
    fn default() -> Self {
        QueueConfig {
            scheduler: Scheduler::MqDeadline,
            max_request_bytes: 1280 << 10,
            read_expire: Nanos::from_millis(500),
            write_expire: Nanos::from_secs(5),
            fifo_batch: 16,
            writes_starved: 2,
            prio_aging: Nanos::from_secs(10),
            ncq_starvation: Nanos::from_secs(1),
        }
    }
}

impl QueueConfig {
    /// Parses `mq-deadline`, `none` or `fifo`, optionally followed by `:KNOB=N,...` with the
    /// kernel's names (`/sys/block/DEV/queue/iosched/` and `queue/max_sectors_kb`): `fifo_batch`,
    /// `writes_starved`, `read_expire` and `write_expire` (ms), `max_sectors_kb`.
    pub fn parse(s: &str) -> Result<QueueConfig, String> {
        let (name, knobs) = s.split_once(':').unwrap_or((s, ""));
        let mut c = QueueConfig { scheduler: Scheduler::parse(name)?, ..QueueConfig::default() };
        const ALLOWED: &str = "fifo_batch (1..=1024), writes_starved (0..=1024), read_expire and write_expire \
                               (ms, 1..=3600000), max_sectors_kb (4..=65536)";
        for kv in knobs.split(',').filter(|k| !k.is_empty()) {
            let (k, v) = kv.split_once('=').ok_or_else(|| format!("HDD queue knob `{kv}`: expected NAME=VALUE"))?;
            let n: u64 = v.parse().map_err(|_| format!("HDD queue knob {k}={v}: expected a whole number"))?;
            let bad = || format!("HDD queue knob {k}={v}: unknown or out of range; allowed: {ALLOWED}");
            match k {
                "fifo_batch" if (1..=1024).contains(&n) => c.fifo_batch = n as u32,
                "writes_starved" if n <= 1024 => c.writes_starved = n as u32,
                "read_expire" if (1..=3_600_000).contains(&n) => c.read_expire = Nanos::from_millis(n),
                "write_expire" if (1..=3_600_000).contains(&n) => c.write_expire = Nanos::from_millis(n),
                "max_sectors_kb" if (4..=65_536).contains(&n) => c.max_request_bytes = n << 10,
                _ => return Err(bad()),
            }
        }
        Ok(c)
    }

    /// The scheduler's name and the knobs that differ from the defaults, as
    /// [`QueueConfig::parse`] reads them back.
    pub fn label(&self) -> String {
        let d = QueueConfig::default();
        let mut knobs = Vec::new();
        if self.fifo_batch != d.fifo_batch {
            knobs.push(format!("fifo_batch={}", self.fifo_batch));
        }
        if self.writes_starved != d.writes_starved {
            knobs.push(format!("writes_starved={}", self.writes_starved));
        }
        for (name, v, dv) in
            [("read_expire", self.read_expire, d.read_expire), ("write_expire", self.write_expire, d.write_expire)]
        {
            if v != dv {
                knobs.push(format!("{name}={}", v.0 / 1_000_000));
            }
        }
        if self.max_request_bytes != d.max_request_bytes {
            knobs.push(format!("max_sectors_kb={}", self.max_request_bytes >> 10));
        }
        if knobs.is_empty() {
            self.scheduler.label().to_string()
        } else {
            format!("{}:{}", self.scheduler.label(), knobs.join(","))
        }
    }
}

/// The priority class of one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// Foreground and best-effort background I/O.
    Normal,
    /// Only after the device has had no normal I/O for `after` (or after aging).
    Idle {
        /// Idle gap required.
        after: Nanos,
    },
}

/// A queued request, possibly several merged.
#[derive(Clone, Debug)]
struct Pending {
    op: DevOp,
    addr: u64,
    len: u64,
    arrival: Nanos,
    idle_after: Option<Nanos>,
    /// The first request's token, and those merged into it (no allocation for one).
    token: u64,
    merged: Vec<u64>,
}

impl Pending {
    fn requests(&self) -> u64 {
        1 + self.merged.len() as u64
    }
}

/// What [`DiskQueue::dispatch`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dispatch {
    /// The device started a command that completes at this time; call
    /// [`DiskQueue::complete`] then.
    Started(Nanos),
    /// Only idle-class requests are queued and none may go before this time.
    WaitUntil(Nanos),
    /// Nothing queued, or the device is busy.
    Nothing,
}

/// Sorted requests of one class and direction, with their arrival order for deadlines.
#[derive(Default)]
struct Lane {
    by_addr: BTreeMap<(u64, u64), Pending>,
    arrivals: VecDeque<(Nanos, (u64, u64))>,
}

/// One device's queue: scheduler, merging, NCQ.
pub struct DiskQueue {
    cfg: QueueConfig,
    depth: usize,
    /// `lanes[idle][write]` (mq-deadline and none).
    lanes: [[Lane; 2]; 2],
    /// Arrival order (fifo and none).
    order: VecDeque<(u64, u64, usize, usize)>,
    /// Commands the drive holds.
    ncq: Vec<Pending>,
    in_service: Option<Pending>,
    /// How long after the command in service frees the device its requests complete (zero for
    /// a disk; a flash device overlaps commands, so it is free again before a request's
    /// latency has passed).
    in_service_tail: Nanos,
    /// The same for the command [`DiskQueue::complete`] last ended.
    completed_tail: Nanos,
    seq: u64,
    sweep_pos: u64,
    /// mq-deadline: where each class and direction last stopped (`latest_pos`).
    latest_pos: [[u64; 2]; 2],
    /// mq-deadline: the batch being dispatched (class, direction) and its length so far.
    batch: Option<(usize, usize)>,
    batching: u32,
    /// mq-deadline: read batches chosen while writes waited.
    starved: u32,
    last_normal: Nanos,
    queued: usize,
    merged: u64,
    done_tokens: Vec<u64>,
    candidates: Vec<(DevOp, u64, u64)>,
}

impl DiskQueue {
    /// A queue for `device` (its model says how many commands it reorders).
    pub fn new(cfg: QueueConfig, device: &Device) -> DiskQueue {
        let depth = if cfg.scheduler == Scheduler::Fifo { 1 } else { device.queue_depth().max(1) as usize };
        DiskQueue {
            cfg,
            depth,
            lanes: Default::default(),
            order: VecDeque::new(),
            ncq: Vec::with_capacity(depth),
            in_service: None,
            in_service_tail: Nanos::ZERO,
            completed_tail: Nanos::ZERO,
            seq: 0,
            sweep_pos: 0,
            latest_pos: [[0; 2]; 2],
            batch: None,
            batching: 0,
            starved: 0,
            last_normal: Nanos::ZERO,
            queued: 0,
            merged: 0,
            done_tokens: Vec::new(),
            candidates: Vec::with_capacity(depth),
        }
    }

    /// Requests merged into others so far (iostat's `rrqm/s + wrqm/s`).
    pub fn merged(&self) -> u64 {
        self.merged
    }

    /// Whether nothing is queued or in service.
    pub fn is_idle(&self) -> bool {
        self.queued == 0 && self.ncq.is_empty() && self.in_service.is_none()
    }

    /// Whether the device is executing a command.
    pub fn busy(&self) -> bool {
        self.in_service.is_some()
    }

    /// Queues a request; `token` comes back from [`DiskQueue::complete`].
    pub fn submit(&mut self, now: Nanos, op: DevOp, addr: u64, len: u64, class: Class, token: u64) {
        let idle_after = match (class, self.cfg.scheduler) {
            (Class::Idle { after }, Scheduler::MqDeadline) => Some(after),
            _ => None,
        };
        if idle_after.is_none() {
            self.last_normal = self.last_normal.max(now);
        }
        self.queued += 1;
        let (li, wi) = (usize::from(idle_after.is_some()), usize::from(op == DevOp::Write));
        if self.cfg.scheduler != Scheduler::Fifo && self.try_merge(li, wi, addr, len, token) {
            self.queued -= 1;
            self.merged += 1;
            return;
        }
        self.seq += 1;
        let p = Pending { op, addr, len, arrival: now, idle_after, token, merged: Vec::new() };
        let lane = &mut self.lanes[li][wi];
        lane.arrivals.push_back((now, (addr, self.seq)));
        lane.by_addr.insert((addr, self.seq), p);
        if self.cfg.scheduler != Scheduler::MqDeadline {
            self.order.push_back((addr, self.seq, li, wi));
        }
    }

    /// Back or front merge into a queued request of the same class and direction.
    fn try_merge(&mut self, li: usize, wi: usize, addr: u64, len: u64, token: u64) -> bool {
        let max = self.cfg.max_request_bytes;
        let lane = &mut self.lanes[li][wi];
        // Back merge: a request ending where this one starts.
        if let Some((_, p)) = lane.by_addr.range_mut(..(addr, 0)).next_back()
            && p.addr + p.len == addr
            && p.len + len <= max
        {
            p.len += len;
            p.merged.push(token);
            return true;
        }
        // Front merge: a request starting where this one ends (re-keyed at the new start).
        let end = addr + len;
        let key = lane.by_addr.range((end, 0)..(end + 1, 0)).next().map(|(k, _)| *k);
        if let Some(k) = key
            && let Some(mut p) = lane.by_addr.remove(&k)
        {
            if p.len + len <= max {
                p.addr = addr;
                p.len += len;
                p.merged.push(token);
                let nk = (addr, k.1);
                lane.arrivals.push_back((p.arrival, nk));
                lane.by_addr.insert(nk, p);
                if let Some(o) = self.order.iter_mut().find(|o| (o.0, o.1) == k) {
                    o.0 = addr;
                }
                return true;
            }
            lane.by_addr.insert(k, p);
        }
        false
    }

    /// The oldest request of a lane, if it has waited `expire`.
    fn expired(lane: &mut Lane, now: Nanos, expire: Nanos) -> Option<(u64, u64)> {
        while let Some(&(arrival, key)) = lane.arrivals.front() {
            if !lane.by_addr.contains_key(&key) {
                lane.arrivals.pop_front();
                continue;
            }
            return (arrival.saturating_add(expire) <= now).then_some(key);
        }
        None
    }

    /// The next key of a lane in the ascending sweep from `pos`, wrapping round.
    fn sweep(lane: &Lane, pos: u64) -> Option<(u64, u64)> {
        lane.by_addr.range((pos, 0)..).next().or_else(|| lane.by_addr.iter().next()).map(|(k, _)| *k)
    }

    /// Takes the next request out of the scheduler, or says when an idle one may go.
    fn next_from_scheduler(&mut self, now: Nanos) -> Result<Option<Pending>, Nanos> {
        if self.queued == 0 {
            return Ok(None);
        }
        let (li, wi, key) = match self.cfg.scheduler {
            Scheduler::Fifo | Scheduler::None => loop {
                let Some((addr, seq, li, wi)) = self.order.pop_front() else { return Ok(None) };
                if self.lanes[li][wi].by_addr.contains_key(&(addr, seq)) {
                    break (li, wi, (addr, seq));
                }
            },
            Scheduler::MqDeadline => {
                let normal = !self.lanes[0][0].by_addr.is_empty() || !self.lanes[0][1].by_addr.is_empty();
                let aged = [0, 1]
                    .into_iter()
                    .find_map(|w| Self::expired(&mut self.lanes[1][w], now, self.cfg.prio_aging).map(|k| (1, w, k)));
                let li = if normal { 0 } else { 1 };
                if let Some(found) = aged {
                    found
                } else {
                    if li == 1 {
                        // Idle class: only after the device has had no normal I/O for a while.
                        let after = [0, 1]
                            .into_iter()
                            .filter_map(|w| Self::sweep(&self.lanes[1][w], self.sweep_pos))
                            .filter_map(|k| {
                                self.lanes[1].iter().find_map(|l| l.by_addr.get(&k)).and_then(|p| p.idle_after)
                            })
                            .min()
                            .unwrap_or(Nanos::ZERO);
                        let due = self.last_normal.saturating_add(after);
                        if now < due || !self.ncq.is_empty() {
                            return Err(due.max(now));
                        }
                    }
                    match self.mq_deadline_pick(li, now) {
                        Some((w, k)) => (li, w, k),
                        None => return Ok(None),
                    }
                }
            }
        };
        let p = self.lanes[li][wi].by_addr.remove(&key);
        if let Some(p) = &p {
            self.queued -= 1;
            self.sweep_pos = p.addr + p.len;
            self.latest_pos[li][wi] = p.addr + p.len;
        }
        Ok(p)
    }

    /// mq-deadline's choice in class `li`: the batch goes on in sector order while it is
    /// shorter than `fifo_batch` and a request lies ahead; otherwise a new batch picks its
    /// direction (reads, unless writes have been passed over `writes_starved` times) and
    /// starts at the oldest request if that one has expired or nothing lies ahead.
    fn mq_deadline_pick(&mut self, li: usize, now: Nanos) -> Option<(usize, (u64, u64))> {
        let ahead = |lane: &Lane, pos: u64| lane.by_addr.range((pos, 0)..).next().map(|(k, _)| *k);
        if let Some((bl, w)) = self.batch
            && bl == li
            && self.batching < self.cfg.fifo_batch
            && let Some(k) = ahead(&self.lanes[li][w], self.latest_pos[li][w])
        {
            self.batching += 1;
            return Some((w, k));
        }
        let (reads, writes) = (!self.lanes[li][0].by_addr.is_empty(), !self.lanes[li][1].by_addr.is_empty());
        let w = if reads && !(writes && self.pass_over_writes()) {
            0
        } else if writes {
            self.starved = 0;
            1
        } else {
            return None;
        };
        let expire = if w == 0 { self.cfg.read_expire } else { self.cfg.write_expire };
        let lane = &mut self.lanes[li][w];
        let expired = Self::expired(lane, now, expire);
        let k = match (expired, ahead(lane, self.latest_pos[li][w])) {
            (None, Some(k)) => k,
            _ => Self::expired(lane, now, Nanos::ZERO).or_else(|| Self::sweep(lane, 0))?,
        };
        self.batch = Some((li, w));
        self.batching = 1;
        Some((w, k))
    }

    /// Reads are chosen while writes wait: counts it, and says when writes have waited long
    /// enough (mq-deadline's `starved++ >= writes_starved`).
    fn pass_over_writes(&mut self) -> bool {
        let starved = self.starved >= self.cfg.writes_starved;
        self.starved += 1;
        starved
    }

    /// If the device is free at `now`, fills the drive's queue and starts the command with the
    /// shortest positioning time (or the oldest one that has waited too long).
    pub fn dispatch(&mut self, now: Nanos, device: &mut Device) -> Dispatch {
        if self.in_service.is_some() {
            return Dispatch::Nothing;
        }
        let mut wait = None;
        while self.ncq.len() < self.depth {
            match self.next_from_scheduler(now) {
                Ok(Some(p)) => {
                    let idle = p.idle_after.is_some();
                    self.ncq.push(p);
                    if idle {
                        // The drive does not know classes: send idle work one command at a time.
                        break;
                    }
                }
                Ok(None) => break,
                Err(t) => {
                    wait = Some(t);
                    break;
                }
            }
        }
        if self.ncq.is_empty() {
            return wait.map_or(Dispatch::Nothing, Dispatch::WaitUntil);
        }
        let starving = now.saturating_sub(self.cfg.ncq_starvation);
        let pick = if self.ncq.len() == 1 {
            0
        } else {
            self.ncq
                .iter()
                .enumerate()
                .filter(|(_, p)| p.arrival <= starving)
                .min_by_key(|(_, p)| p.arrival)
                .map(|(i, _)| i)
                .unwrap_or_else(|| {
                    self.candidates.clear();
                    self.candidates.extend(self.ncq.iter().map(|p| (p.op, p.addr, p.len)));
                    device.shortest_positioning(now, &self.candidates)
                })
        };
        let p = self.ncq.swap_remove(pick);
        let done = device.submit(now, p.op, p.addr, p.len);
        let waited = now.0.saturating_sub(p.arrival.0);
        device.add_queueing(waited.saturating_mul(p.requests()));
        if p.idle_after.is_none() {
            self.last_normal = self.last_normal.max(done);
        }
        self.in_service = Some(p);
        // A disk is free when its command completes; a flash model earlier (its IOPS slot).
        let free = device.busy_until().min(done);
        self.in_service_tail = done.saturating_sub(free);
        Dispatch::Started(free)
    }

    /// How long after the device was freed the requests [`DiskQueue::complete`] returned
    /// complete (zero for a disk).
    pub fn completion_delay(&self) -> Nanos {
        self.completed_tail
    }

    /// Ends the command in service; returns the tokens of the requests it carried.
    pub fn complete(&mut self) -> &[u64] {
        self.done_tokens.clear();
        self.completed_tail = std::mem::take(&mut self.in_service_tail);
        if let Some(p) = self.in_service.take() {
            self.done_tokens.push(p.token);
            self.done_tokens.extend_from_slice(&p.merged);
        }
        &self.done_tokens
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Hdd, Presets};

    #[test]
    fn queue_knobs_parse_with_the_kernels_names_and_label_back() {
        let c = QueueConfig::parse("mq-deadline:fifo_batch=1,writes_starved=0,write_expire=100,max_sectors_kb=512")
            .unwrap();
        assert_eq!((c.fifo_batch, c.writes_starved, c.write_expire), (1, 0, Nanos::from_millis(100)));
        assert_eq!(c.max_request_bytes, 512 << 10);
        assert_eq!(QueueConfig::parse(&c.label()).unwrap(), c);
        assert_eq!(c.label(), "mq-deadline:fifo_batch=1,writes_starved=0,write_expire=100,max_sectors_kb=512");
        assert_eq!(QueueConfig::parse("mq-deadline").unwrap(), QueueConfig::default());
        assert_eq!(QueueConfig::default().label(), "mq-deadline");
        assert_eq!(QueueConfig::parse("none").unwrap().scheduler, Scheduler::None);
        for bad in
            ["mq-deadline:fifo_batch=0", "mq-deadline:quantum=4", "mq-deadline:fifo_batch", "mq-deadline:read_expire=x"]
        {
            let e = QueueConfig::parse(bad).unwrap_err();
            assert!(e.contains("HDD queue knob"), "{bad}: {e}");
        }
        assert!(QueueConfig::parse("cfq").unwrap_err().contains("mq-deadline"));
    }

    fn hdd() -> Device {
        Device::new(Box::new(Hdd::new(&Presets::builtin().hdd("wd5000aaks").unwrap()).unwrap()), None)
    }

    /// Runs `n` random 4 KiB reads with `depth` outstanding; returns IOPS.
    fn random_reads(scheduler: Scheduler, depth: usize, n: u64) -> f64 {
        let mut dev = hdd();
        let mut q = DiskQueue::new(QueueConfig { scheduler, ..QueueConfig::default() }, &dev);
        let cap = 500_000_000_000u64 / 4096;
        let mut s = 99u64;
        let mut rand = || {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 11) % cap) * 4096
        };
        let mut now = Nanos::ZERO;
        for t in 0..depth as u64 {
            q.submit(now, DevOp::Read, rand(), 4096, Class::Normal, t);
        }
        let mut issued = depth as u64;
        let mut done = 0;
        while done < n {
            let Dispatch::Started(t) = q.dispatch(now, &mut dev) else { panic!("queue stalled") };
            now = t;
            let finished = q.complete().len() as u64;
            done += finished;
            for _ in 0..finished {
                q.submit(now, DevOp::Read, rand(), 4096, Class::Normal, issued);
                issued += 1;
            }
        }
        n as f64 / now.as_secs_f64()
    }

    #[test]
    fn ncq_reordering_raises_random_iops_with_depth() {
        let qd1 = random_reads(Scheduler::MqDeadline, 1, 3000);
        let qd32 = random_reads(Scheduler::MqDeadline, 32, 3000);
        let fifo32 = random_reads(Scheduler::Fifo, 32, 3000);
        assert!((qd1 / 112.0 - 1.0).abs() < 0.08, "QD1 at the preset's calibration: {qd1:.0}");
        assert!((fifo32 / qd1 - 1.0).abs() < 0.08, "fifo gains nothing from depth: {fifo32:.0} vs {qd1:.0}");
        let gain = qd32 / qd1;
        assert!((1.8..3.2).contains(&gain), "QD32 / QD1 = {gain:.2} ({qd32:.0} vs {qd1:.0} IOPS)");
    }

    #[test]
    fn contiguous_requests_merge_into_one_command() {
        let mut dev = hdd();
        let mut q = DiskQueue::new(QueueConfig::default(), &dev);
        q.submit(Nanos::ZERO, DevOp::Write, 1 << 20, 4096, Class::Normal, 1);
        q.submit(Nanos::ZERO, DevOp::Write, (1 << 20) + 4096, 4096, Class::Normal, 2);
        q.submit(Nanos::ZERO, DevOp::Write, (1 << 20) - 4096, 4096, Class::Normal, 3);
        q.submit(Nanos::ZERO, DevOp::Read, (1 << 20) + 8192, 4096, Class::Normal, 4);
        assert_eq!(q.merged(), 2, "back and front merge; a read does not merge into writes");
        let Dispatch::Started(_) = q.dispatch(Nanos::ZERO, &mut dev) else { panic!() };
        let mut tokens = q.complete().to_vec();
        tokens.sort_unstable();
        assert!(tokens == [1, 2, 3] || tokens == [4], "{tokens:?}");
        let _ = q.dispatch(Nanos::from_secs(1), &mut dev);
        q.complete();
        assert_eq!(dev.stats().writes, 1, "three 4 KiB writes, one device write");
        assert!(q.is_idle());
    }

    #[test]
    fn writes_go_after_two_read_batches_not_after_their_deadline() {
        // Reads keep 32 queued; one write waits among them. mq-deadline passes it over for two
        // read batches (writes_starved = 2) of at most 16 (fifo_batch), then writes: well
        // before its 5 s deadline.
        let mut dev = hdd();
        let mut q = DiskQueue::new(QueueConfig::default(), &dev);
        let mut now = Nanos::ZERO;
        let addr = |i: u64| (i.wrapping_mul(2_654_435_761) % 100_000_000) * 4096;
        for t in 0..32 {
            q.submit(now, DevOp::Read, addr(t), 4096, Class::Normal, t);
        }
        q.submit(now, DevOp::Write, 7 << 30, 4096, Class::Normal, 1_000_000);
        let (mut next, mut served) = (32u64, 0u64);
        let written_after = loop {
            let Dispatch::Started(t) = q.dispatch(now, &mut dev) else { panic!("queue stalled") };
            now = t;
            let done = q.complete().to_vec();
            if done.contains(&1_000_000) {
                break served;
            }
            served += done.len() as u64;
            for _ in &done {
                q.submit(now, DevOp::Read, addr(next), 4096, Class::Normal, next);
                next += 1;
            }
            assert!(served < 1000, "the write starved");
        };
        // Two read batches, plus the commands the drive already held (NCQ).
        let ncq = u64::from(dev.queue_depth());
        assert!(written_after <= 2 * 16 + ncq, "the write waited for {written_after} reads");
        assert!(now < Nanos::from_secs(1), "the write went at {now}, not at its deadline");
    }

    #[test]
    fn idle_class_waits_for_an_idle_gap_and_ages() {
        let mut dev = hdd();
        let mut q = DiskQueue::new(QueueConfig::default(), &dev);
        let idle = Class::Idle { after: Nanos::from_millis(100) };
        q.submit(Nanos::ZERO, DevOp::Write, 0, 4096, idle, 1);
        q.submit(Nanos::ZERO, DevOp::Read, 1 << 30, 4096, Class::Normal, 2);
        let Dispatch::Started(t) = q.dispatch(Nanos::ZERO, &mut dev) else { panic!() };
        assert_eq!(q.complete(), [2], "normal first");
        let Dispatch::WaitUntil(due) = q.dispatch(t, &mut dev) else { panic!() };
        assert!(due >= t.saturating_add(Nanos::from_millis(100)), "{due} after {t}");
        let Dispatch::Started(_) = q.dispatch(due, &mut dev) else { panic!() };
        assert_eq!(q.complete(), [1]);
        // Aging: an idle request queued 10 s ago goes even while normal I/O keeps arriving.
        q.submit(Nanos::from_secs(20), DevOp::Write, 0, 4096, idle, 3);
        q.submit(Nanos::from_secs(31), DevOp::Read, 1 << 30, 4096, Class::Normal, 4);
        let Dispatch::Started(_) = q.dispatch(Nanos::from_secs(31), &mut dev) else { panic!() };
        assert_eq!(q.complete(), [3]);
    }
}
