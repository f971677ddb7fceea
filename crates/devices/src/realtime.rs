//! The opt-in latency emulation of the real front ends (`tierwise mount|serve --emulate-hdd
//! PRESET`, `--emulate-ssd PRESET`): each I/O on a tier is held until the device model says it
//! would have completed, so tiering effects show on a machine whose tiers sit on one fast
//! device. The front end maps its I/O to device addresses; this module does the waiting. A
//! device serves one request at a time in arrival order (`fifo`, seeks that depend on the
//! distance from the previous request), or, for an HDD, behind the simulator's request queue
//! (`none`, `mq-deadline`: merging, sorting, NCQ; [`crate::realtime_queue`]).
//!
//! A plain `sleep` ends late: Linux lets a normal thread's timer fire up to its timer slack
//! (50 µs by default) after the deadline, and waking a thread takes a few tens of µs more in a
//! VM. Against an emulated SSD whose requests take tens of µs that doubles the latency the
//! model predicts. So the emulation sets its threads' timer slack to 1 ns, and each thread ends
//! its sleeps early by how late its recent sleeps woke, which puts the wake-ups on the
//! deadline on average; waits shorter than that lateness are spun.
//!
//! Spinning takes a core from everything else on the host, the client and the server's other
//! threads included, and a loaded host wakes sleepers later, which made more waits shorter than
//! the lateness: with 16 requests outstanding on an emulated SSD, two thirds of the server's CPU
//! went to spinning and the device ran at half the model's speed. So one thread spins at a
//! time, never longer than [`MAX_SPIN`]; any other short wait sleeps as briefly as the kernel
//! allows and ends late by the difference.

use std::cell::Cell;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tierwise_core::Nanos;

use crate::realtime_queue::QueuedEmulator;
use crate::{DevOp, Device, Hdd, Presets, QueueConfig, Scheduler, Ssd};

/// One emulated device, shared by the threads that do I/O on its tier.
pub struct Emulator {
    label: String,
    serving: Serving,
}

/// How an emulated device takes its requests.
#[expect(clippy::large_enum_variant, reason = "one per emulated device, never moved")]
enum Serving {
    /// One at a time, in arrival order.
    InOrder { device: Mutex<Device>, start: Instant },
    /// Behind a request queue, reordered and merged.
    Queued(QueuedEmulator),
}

impl std::fmt::Debug for Emulator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Emulator").field("label", &self.label).finish()
    }
}

impl Emulator {
    /// An HDD from the presets (`tierwise list devices`), serving in arrival order.
    pub fn hdd(preset: &str) -> Result<Emulator, String> {
        Emulator::hdd_queued(preset, QueueConfig { scheduler: Scheduler::Fifo, ..QueueConfig::default() })
    }

    /// An HDD from the presets behind a request queue configured by `queue` (`fifo`: one
    /// request at a time in arrival order, as [`Emulator::hdd`]).
    pub fn hdd_queued(preset: &str, queue: QueueConfig) -> Result<Emulator, String> {
        let presets = Presets::builtin();
        let spec = presets.hdd(preset).map_err(|e| e.to_string())?;
        let device = Device::new(Box::new(Hdd::new(&spec)?), None);
        Ok(match queue.scheduler {
            Scheduler::Fifo => Emulator::new(format!("hdd {preset} (emulated: {})", spec.description), device),
            _ => Emulator {
                label: format!("hdd {preset} (emulated: {}; {} queue)", spec.description, queue.label()),
                serving: Serving::Queued(QueuedEmulator::new(device, queue)),
            },
        })
    }

    /// An SSD from the presets.
    pub fn ssd(preset: &str) -> Result<Emulator, String> {
        let presets = Presets::builtin();
        let spec = presets.ssd(preset).map_err(|e| e.to_string())?;
        let label = format!("ssd {preset} (emulated: {})", spec.description);
        Ok(Emulator::new(label, Device::new(Box::new(Ssd::new(&spec)?), None)))
    }

    /// No spin-down: a volume in use keeps its disk spinning.
    fn new(label: String, device: Device) -> Emulator {
        Emulator { label, serving: Serving::InOrder { device: Mutex::new(device), start: Instant::now() } }
    }

    /// What is emulated, for stats and status (always says "emulated").
    pub fn label(&self) -> &str {
        &self.label
    }

    /// What the emulated device has done so far (requests, bytes, busy time).
    pub fn stats(&self) -> crate::DeviceStats {
        match &self.serving {
            Serving::InOrder { device, .. } => {
                *device.lock().unwrap_or_else(std::sync::PoisonError::into_inner).stats()
            }
            Serving::Queued(q) => q.stats(),
        }
    }

    /// Holds the calling thread until a request of `len` bytes at `addr`, arriving now, would
    /// have completed on the emulated device.
    pub fn wait(&self, op: DevOp, addr: u64, len: u64) {
        let (device, start) = match &self.serving {
            Serving::InOrder { device, start } => (device, start),
            Serving::Queued(q) => return q.wait(op, addr, len),
        };
        let now = Nanos(start.elapsed().as_nanos().min(u128::from(u64::MAX)) as u64);
        let done = device.lock().unwrap_or_else(std::sync::PoisonError::into_inner).submit(now, op, addr, len);
        sleep_from_until(now, done);
    }

    /// Holds the calling thread until a cache flush arriving now would have completed: every
    /// write the device acknowledged is then on its media (an HDD's write cache written back).
    pub fn flush(&self) {
        let (now, done) = match &self.serving {
            Serving::InOrder { device, start } => {
                let now = Nanos(start.elapsed().as_nanos().min(u128::from(u64::MAX)) as u64);
                (now, device.lock().unwrap_or_else(std::sync::PoisonError::into_inner).flush(now))
            }
            Serving::Queued(q) => q.flush(),
        };
        sleep_from_until(now, done);
    }
}

/// Sleeps from model time `now` until `done` (nothing if that has passed).
fn sleep_from_until(now: Nanos, done: Nanos) {
    let wait = done.0.saturating_sub(now.0);
    if wait > 0 {
        sleep_on_time(Duration::from_nanos(wait));
    }
}

/// How late a thread's sleeps wake, learnt from the sleeps themselves.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Lateness {
    /// Moving average of how long after its deadline a sleep returned, in ns.
    late_ns: u64,
}

/// The longest wait spun rather than slept: an idle host's sleeps wake ~20 µs late, and
/// spinning longer than a few times that costs more host CPU than the lateness it saves.
pub const MAX_SPIN: Duration = Duration::from_micros(50);

/// The shortest sleep asked of the kernel: a wait it cannot end on time (see [`Plan`]).
const SHORTEST_SLEEP: Duration = Duration::from_nanos(1);

/// Whether a thread of this process is spinning (at most one does).
static SPINNING: AtomicBool = AtomicBool::new(false);

/// What a wait of some length does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Plan {
    /// Sleep this long (the wait less the expected lateness), then return. A wait shorter
    /// than the lateness but longer than [`MAX_SPIN`] sleeps as briefly as the kernel allows.
    Sleep(Duration),
    /// The wait is shorter than a sleep's lateness and than [`MAX_SPIN`]: spin until its end
    /// (if no other thread is spinning; else as `Sleep` does).
    Spin,
}

impl Lateness {
    /// A preempted sleep can wake milliseconds late; such a one-off must not make every later
    /// sleep end that much early.
    const MAX_SAMPLE: Duration = Duration::from_micros(200);

    /// The expected lateness.
    pub fn expected(&self) -> Duration {
        Duration::from_nanos(self.late_ns)
    }

    /// How to wait `wait`.
    pub fn plan(&self, wait: Duration) -> Plan {
        let early = self.expected();
        if wait > early {
            Plan::Sleep(wait - early)
        } else if wait <= MAX_SPIN {
            Plan::Spin
        } else {
            Plan::Sleep(SHORTEST_SLEEP)
        }
    }

    /// Learns from a sleep of `asked` that took `took`.
    pub fn observe(&mut self, asked: Duration, took: Duration) {
        let late = took.saturating_sub(asked).min(Self::MAX_SAMPLE).as_nanos() as u64;
        // An average over about the last 8 sleeps: follows a change of load within a few
        // requests, and one odd wake-up moves it by an eighth.
        self.late_ns = (self.late_ns * 7 + late) / 8;
    }
}

thread_local! {
    static LATENESS: Cell<Lateness> = const { Cell::new(Lateness { late_ns: 0 }) };
    static SLACK_SET: Cell<bool> = const { Cell::new(false) };
}

/// Sleeps `wait`, ending on time on average (see the module's note).
pub fn sleep_on_time(wait: Duration) {
    fine_timer_slack_once();
    let deadline = Instant::now() + wait;
    let mut lateness = LATENESS.get();
    match take_spin(lateness.plan(wait), &SPINNING) {
        Plan::Spin => {
            while Instant::now() < deadline {
                std::hint::spin_loop();
            }
            SPINNING.store(false, Ordering::Release);
        }
        Plan::Sleep(d) => {
            let t = Instant::now();
            std::thread::sleep(d);
            lateness.observe(d, t.elapsed());
            LATENESS.set(lateness);
        }
    }
}

/// `plan`, unless it spins while another thread does (`spinning` is taken): then the shortest
/// sleep. A `Spin` returned holds `spinning` until the caller releases it.
fn take_spin(plan: Plan, spinning: &AtomicBool) -> Plan {
    match plan {
        Plan::Spin if spinning.swap(true, Ordering::Acquire) => Plan::Sleep(SHORTEST_SLEEP),
        plan => plan,
    }
}

/// [`set_fine_timer_slack`] for the calling thread, once.
pub(crate) fn fine_timer_slack_once() {
    if !SLACK_SET.get() {
        SLACK_SET.set(true);
        set_fine_timer_slack();
    }
}

/// Asks the kernel to fire this thread's timers within 1 ns of their deadline (default 50 µs).
fn set_fine_timer_slack() {
    #[cfg(target_os = "linux")]
    {
        // Best effort: without it the lateness is larger, and still learnt.
        let _ = nix::sys::prctl::set_timerslack(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sleeper that wakes `late` after every deadline, and `spike` late once in a while.
    fn run(l: &mut Lateness, wait: Duration, late: Duration, spike_every: usize, n: usize) -> Vec<i64> {
        let mut errors = Vec::new();
        for i in 0..n {
            let took = match l.plan(wait) {
                Plan::Spin => wait,
                Plan::Sleep(d) => {
                    let jitter = if spike_every > 0 && i % spike_every == spike_every - 1 {
                        Duration::from_millis(5)
                    } else {
                        late
                    };
                    l.observe(d, d + jitter);
                    d + jitter
                }
            };
            errors.push(took.as_nanos() as i64 - wait.as_nanos() as i64);
        }
        errors
    }

    #[test]
    fn sleeps_that_wake_late_are_ended_early_by_that_much() {
        let mut l = Lateness::default();
        let errors = run(&mut l, Duration::from_micros(100), Duration::from_micros(70), 0, 100);
        // The first sleep is 70 µs late; once learnt, the wake-ups land on the deadline.
        assert_eq!(errors[0], 70_000);
        let tail = &errors[50..];
        assert!(tail.iter().all(|e| e.abs() < 1_000), "{tail:?}");
        assert!((l.expected().as_micros() as i64 - 70).abs() <= 1, "{:?}", l.expected());
    }

    #[test]
    fn a_wait_shorter_than_the_lateness_is_spun() {
        let mut l = Lateness::default();
        run(&mut l, Duration::from_micros(500), Duration::from_micros(30), 0, 100);
        assert_eq!(l.plan(Duration::from_micros(20)), Plan::Spin);
        assert!(matches!(l.plan(Duration::from_micros(100)), Plan::Sleep(d) if d < Duration::from_micros(75)));
    }

    #[test]
    fn a_wait_longer_than_the_spin_limit_is_never_spun() {
        // A loaded host: sleeps wake 150 µs late.
        let mut l = Lateness::default();
        run(&mut l, Duration::from_micros(1_000), Duration::from_micros(150), 0, 100);
        assert_eq!(l.plan(Duration::from_micros(40)), Plan::Spin);
        assert_eq!(l.plan(Duration::from_micros(100)), Plan::Sleep(SHORTEST_SLEEP));
        assert!(matches!(l.plan(Duration::from_micros(400)), Plan::Sleep(d) if d < Duration::from_micros(255)));
    }

    #[test]
    fn one_thread_spins_at_a_time() {
        let spinning = AtomicBool::new(false);
        assert_eq!(take_spin(Plan::Spin, &spinning), Plan::Spin);
        // Another short wait meanwhile sleeps; sleeps are not held back.
        assert_eq!(take_spin(Plan::Spin, &spinning), Plan::Sleep(SHORTEST_SLEEP));
        let d = Duration::from_micros(70);
        assert_eq!(take_spin(Plan::Sleep(d), &spinning), Plan::Sleep(d));
        spinning.store(false, Ordering::Release);
        assert_eq!(take_spin(Plan::Spin, &spinning), Plan::Spin);
    }

    #[test]
    fn a_preempted_sleep_does_not_make_later_ones_end_milliseconds_early() {
        let mut l = Lateness::default();
        // Every 20th sleep wakes 5 ms late.
        let errors = run(&mut l, Duration::from_micros(300), Duration::from_micros(40), 20, 400);
        assert!(l.expected() < Duration::from_micros(100), "{:?}", l.expected());
        // Apart from the spikes themselves, no wake-up is more than the cap early.
        assert!(errors.iter().all(|&e| e > -(Lateness::MAX_SAMPLE.as_nanos() as i64)), "{errors:?}");
        let mut sorted = errors.clone();
        sorted.sort_unstable();
        let median = sorted[sorted.len() / 2];
        assert!(median.abs() < 25_000, "median error {median} ns");
    }

    #[test]
    fn an_emulated_hdd_takes_milliseconds_and_an_unknown_preset_is_an_error() {
        let hdd = Emulator::hdd("wd5000aaks").unwrap_or_else(|e| panic!("{e}"));
        assert!(hdd.label().contains("emulated"));
        let t = Instant::now();
        for addr in [0u64, 300 << 30, 20 << 20, 450 << 30] {
            hdd.wait(DevOp::Read, addr, 4096);
        }
        assert!(t.elapsed() >= Duration::from_millis(8), "{:?}", t.elapsed());
        assert!(Emulator::hdd("no-such-disk").is_err());
        assert!(Emulator::ssd("vertex3").is_ok_and(|s| s.label().starts_with("ssd vertex3 (emulated")));
    }
}
