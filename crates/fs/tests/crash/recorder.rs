//! Records the tiers after every call tierwise makes on them (through `tiers::calls`), with
//! which operation of the workload was running: every point is a state a `kill -9` there
//! leaves, and the syncs among the calls say what a power cut may take back.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use tierwise_fs::tiers::calls::{self, Call, Observer};

use super::tree::Tree;

/// The file system a call changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fs {
    Ssd,
    Hdd,
}

/// The trees right after one call (or when recording started).
#[derive(Clone, Debug)]
pub struct Point {
    /// `None`: the state when recording started (durable: the setup synced everything).
    pub call: Option<(Call, Fs)>,
    pub ssd: Arc<Tree>,
    pub hdd: Arc<Tree>,
    /// Operations of the workload finished by then.
    pub done: usize,
    /// Whether the next one had started.
    pub in_flight: bool,
}

impl Point {
    /// Whether this point's call made everything before it on `fs` durable.
    pub fn barrier_of(&self, fs: Fs) -> bool {
        match self.call {
            None => true,
            Some((c, f)) => f == fs && c.is_barrier(),
        }
    }

    pub fn changed(&self, fs: Fs) -> bool {
        matches!(self.call, Some((_, f)) if f == fs)
    }
}

/// One recording.
pub struct Recorder {
    ssd: PathBuf,
    hdd: PathBuf,
    inner: Mutex<Inner>,
}

struct Inner {
    points: Vec<Point>,
    done: usize,
    in_flight: bool,
}

static ACTIVE: Mutex<Option<Arc<Recorder>>> = Mutex::new(None);

struct Forward;

impl Observer for Forward {
    fn after(&self, call: Call, on: &Path, _ok: bool) {
        let active = ACTIVE.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        if let Some(r) = active {
            r.after(call, on);
        }
    }
}

fn install() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        assert!(calls::observe(Box::new(Forward)), "one observer per process");
    });
}

impl Recorder {
    /// Starts recording the tiers `ssd` and `hdd` (canonical paths) as they are now.
    pub fn start(ssd: &Path, hdd: &Path) -> Arc<Recorder> {
        install();
        let ssd = ssd.canonicalize().expect("ssd path");
        let hdd = hdd.canonicalize().expect("hdd path");
        calls::exclusive(|| {
            let first = Point {
                call: None,
                ssd: Arc::new(Tree::take(&ssd)),
                hdd: Arc::new(Tree::take(&hdd)),
                done: 0,
                in_flight: false,
            };
            let r = Arc::new(Recorder {
                ssd: ssd.clone(),
                hdd: hdd.clone(),
                inner: Mutex::new(Inner { points: vec![first], done: 0, in_flight: false }),
            });
            *ACTIVE.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Arc::clone(&r));
            r
        })
    }

    fn after(&self, call: Call, on: &Path) {
        let fs = if on.starts_with(&self.ssd) {
            Fs::Ssd
        } else if on.starts_with(&self.hdd) {
            Fs::Hdd
        } else {
            return;
        };
        let mut g = self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let last = g.points.last().cloned().expect("a first point");
        let (ssd, hdd) = match fs {
            Fs::Ssd => (Arc::new(Tree::take(&self.ssd)), last.hdd),
            Fs::Hdd => (last.ssd, Arc::new(Tree::take(&self.hdd))),
        };
        let (done, in_flight) = (g.done, g.in_flight);
        g.points.push(Point { call: Some((call, fs)), ssd, hdd, done, in_flight });
    }

    /// Operation `i` starts.
    pub fn begin(&self, i: usize) {
        calls::exclusive(|| {
            let mut g = self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            g.done = i;
            g.in_flight = true;
        });
    }

    /// Operation `i` returned.
    pub fn end(&self, i: usize) {
        calls::exclusive(|| {
            let mut g = self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            g.done = i + 1;
            g.in_flight = false;
        });
    }

    /// Stops recording; the points, first to last.
    pub fn stop(&self) -> Vec<Point> {
        calls::exclusive(|| {
            *ACTIVE.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = None;
            std::mem::take(&mut self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner).points)
        })
    }
}

/// A crash state: the SSD and HDD trees a crash at point `at` may leave.
#[derive(Clone, Debug)]
pub struct CrashState {
    pub at: usize,
    pub ssd: Arc<Tree>,
    pub hdd: Arc<Tree>,
    /// `kill -9` (everything done so far is there) rather than a power cut.
    pub kill: bool,
}

/// The crash states of a recording: a `kill -9` after every call, and power cuts there, each
/// tier file system keeping a prefix of its calls no shorter than its last sync (`all`: every
/// prefix pair; otherwise the extremes: the last sync and everything). Identical states are
/// kept once.
pub fn crash_states(points: &[Point], all: bool) -> Vec<CrashState> {
    let mut out: Vec<CrashState> = Vec::new();
    // A kill state is checked against the operations done by then; a power cut's only against
    // what was synced, which a later point with the same trees cannot add to.
    let mut killed: std::collections::HashSet<(usize, usize, usize, bool)> = std::collections::HashSet::new();
    let mut cut: std::collections::HashSet<(usize, usize)> = std::collections::HashSet::new();
    // Index of the point whose tree each file system had, per point.
    let mut ssd_at = vec![0usize; points.len()];
    let mut hdd_at = vec![0usize; points.len()];
    for (k, p) in points.iter().enumerate() {
        if k > 0 {
            ssd_at[k] = if p.changed(Fs::Ssd) { k } else { ssd_at[k - 1] };
            hdd_at[k] = if p.changed(Fs::Hdd) { k } else { hdd_at[k - 1] };
        }
    }
    for k in 0..points.len() {
        let candidates = |fs: Fs, at: &[usize]| -> Vec<usize> {
            let last_sync = (0..=k).rev().find(|&j| points[j].barrier_of(fs)).unwrap_or(0);
            let mut v: Vec<usize> = (last_sync..=k).filter(|&j| j == last_sync || points[j].changed(fs)).collect();
            v = v.into_iter().map(|j| at[j]).collect();
            v.dedup();
            if !all && v.len() > 2 {
                v = vec![v[0], v[v.len() - 1]];
            }
            v
        };
        let (ks, kh) = (ssd_at[k], hdd_at[k]);
        if killed.insert((ks, kh, points[k].done, points[k].in_flight)) {
            out.push(CrashState {
                at: k,
                ssd: Arc::clone(&points[ks].ssd),
                hdd: Arc::clone(&points[kh].hdd),
                kill: true,
            });
        }
        for s in candidates(Fs::Ssd, &ssd_at) {
            for h in candidates(Fs::Hdd, &hdd_at) {
                if (s, h) == (ks, kh) || !cut.insert((s, h)) {
                    continue;
                }
                out.push(CrashState {
                    at: k,
                    ssd: Arc::clone(&points[s].ssd),
                    hdd: Arc::clone(&points[h].hdd),
                    kill: false,
                });
            }
        }
    }
    out
}
