//! OTF-AST's interval-concentration collector (reconstructed; the paper's algorithm section is
//! lost to OCR — SPEC §1 gives the reconstruction).
//!
//! Every `t` seconds, count the I/Os per sub-LUN. The interval is *concentrated* when the top
//! `n` sub-LUNs carry at least `i`% of its I/Os. A sub-LUN is promoted after being in the top
//! `n` for `c` consecutive concentrated intervals (a non-concentrated interval breaks every
//! streak); a promoted sub-LUN that has been out of the top `n` for `o` consecutive intervals
//! times out and is demoted.
//!
//! It is not in the per-access collector registry: it ranks per interval, not per access, and
//! its users (OTF-AST, static tiering) call [`IntervalConcentration::end_interval`].

use hashbrown::HashMap;

use crate::object_table::IdHash;

/// Per sub-LUN streaks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Streak {
    in_top: u32,
    out_of_top: u32,
    promoted: bool,
}

/// What one interval decided.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct IntervalOutcome {
    /// Whether the top `n` carried at least `i`% of the I/Os.
    pub concentrated: bool,
    /// I/Os in the interval.
    pub total: u64,
    /// The top `n` sub-LUNs, hottest first.
    pub top: Vec<u64>,
    /// Sub-LUNs that earned promotion, hottest first.
    pub promote: Vec<u64>,
    /// Promoted sub-LUNs that timed out.
    pub timeout: Vec<u64>,
}

/// The collector.
#[derive(Clone, Debug)]
pub struct IntervalConcentration {
    share: f64,
    top_n: usize,
    needed: u32,
    timeout: u32,
    counts: HashMap<u64, u64, IdHash>,
    streaks: HashMap<u64, Streak, IdHash>,
    scratch: Vec<(u64, u64)>,
}

impl IntervalConcentration {
    /// `share` = i / 100, `top_n` = n, `needed` = c, `timeout` = o.
    pub fn new(share: f64, top_n: usize, needed: u32, timeout: u32) -> IntervalConcentration {
        IntervalConcentration {
            share,
            top_n,
            needed,
            timeout,
            counts: HashMap::with_hasher(IdHash),
            streaks: HashMap::with_hasher(IdHash),
            scratch: Vec::new(),
        }
    }

    /// Counts one I/O to `sub_lun`.
    #[inline]
    pub fn record(&mut self, sub_lun: u64) {
        *self.counts.entry(sub_lun).or_insert(0) += 1;
    }

    /// I/Os counted so far in this interval.
    pub fn counts(&self) -> &HashMap<u64, u64, IdHash> {
        &self.counts
    }

    /// Tells the collector whether a sub-LUN is (now) on the SSD: set when its promotion
    /// completes, cleared when its demotion completes or a promotion fails.
    pub fn set_promoted(&mut self, sub_lun: u64, promoted: bool) {
        let s = self.streaks.entry(sub_lun).or_default();
        s.promoted = promoted;
        s.out_of_top = 0;
        if promoted {
            s.in_top = 0;
        }
    }

    /// Closes the interval: ranks it, updates the streaks and says what to move.
    pub fn end_interval(&mut self) -> IntervalOutcome {
        self.scratch.clear();
        self.scratch.extend(self.counts.iter().map(|(&id, &c)| (c, id)));
        // Hottest first; ties by id for determinism.
        self.scratch.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        let total: u64 = self.scratch.iter().map(|x| x.0).sum();
        let top: Vec<u64> = self.scratch.iter().take(self.top_n).map(|x| x.1).collect();
        let top_sum: u64 = self.scratch.iter().take(self.top_n).map(|x| x.0).sum();
        let concentrated = total > 0 && top_sum as f64 >= self.share * total as f64;
        let mut out = IntervalOutcome { concentrated, total, top: top.clone(), ..IntervalOutcome::default() };
        // Streaks: in-top counts only in concentrated intervals; anything else breaks them.
        for (id, s) in self.streaks.iter_mut() {
            let in_top = top.contains(id);
            if !(concentrated && in_top) {
                s.in_top = 0;
            }
            if s.promoted {
                if in_top {
                    s.out_of_top = 0;
                } else {
                    s.out_of_top += 1;
                    if s.out_of_top >= self.timeout {
                        out.timeout.push(*id);
                    }
                }
            }
        }
        if concentrated {
            for &id in &top {
                let s = self.streaks.entry(id).or_default();
                s.in_top += 1;
                if !s.promoted && s.in_top >= self.needed {
                    out.promote.push(id);
                }
            }
        }
        out.timeout.sort_unstable();
        // Forget sub-LUNs with nothing to remember.
        self.streaks.retain(|_, s| s.promoted || s.in_top > 0);
        self.counts.clear();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn interval(c: &mut IntervalConcentration, ios: &[(u64, u64)]) -> IntervalOutcome {
        for &(id, n) in ios {
            for _ in 0..n {
                c.record(id);
            }
        }
        c.end_interval()
    }

    #[test]
    fn promotion_after_c_concentrated_intervals_and_timeout_after_o() {
        // n = 1, i = 50 %, c = 3, o = 2.
        let mut c = IntervalConcentration::new(0.5, 1, 3, 2);
        let hot = [(7, 60), (1, 20), (2, 20)];
        assert!(interval(&mut c, &hot).promote.is_empty());
        assert!(interval(&mut c, &hot).promote.is_empty());
        let o = interval(&mut c, &hot);
        assert!(o.concentrated);
        assert_eq!(o.promote, vec![7], "third consecutive concentrated interval");
        c.set_promoted(7, true);
        // Not concentrated: 7 has 30 of 100.
        let cold = [(7, 30), (1, 35), (2, 35)];
        let o = interval(&mut c, &cold);
        assert!(!o.concentrated);
        assert!(o.timeout.is_empty(), "one interval out of the top");
        let o = interval(&mut c, &cold);
        assert_eq!(o.timeout, vec![7], "second interval out of the top");
    }

    #[test]
    fn a_flat_interval_breaks_the_streak() {
        let mut c = IntervalConcentration::new(0.5, 1, 2, 10);
        let hot = [(7, 60), (1, 40)];
        let flat = [(7, 34), (1, 33), (2, 33)];
        interval(&mut c, &hot);
        interval(&mut c, &flat);
        assert!(interval(&mut c, &hot).promote.is_empty(), "the streak restarted");
        assert_eq!(interval(&mut c, &hot).promote, vec![7]);
    }
}
