//! Progress bars (indicatif) behind the simulator's `Progress` trait. Nothing is drawn with
//! `--quiet` or when stderr is not a terminal.

use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use tierwise_sim::compare::ProgressFactory;
use tierwise_sim::sim::Progress;

/// A set of bars drawn together.
pub struct Bars {
    multi: MultiProgress,
    quiet: bool,
}

impl Bars {
    /// Bars, or none when `quiet`.
    pub fn new(quiet: bool) -> Bars {
        let target = if quiet { ProgressDrawTarget::hidden() } else { ProgressDrawTarget::stderr() };
        Bars { multi: MultiProgress::with_draw_target(target), quiet }
    }

    /// `--quiet`: no progress of any kind.
    pub fn quiet(&self) -> bool {
        self.quiet
    }

    /// Removes all bars from the screen.
    pub fn clear(&self) {
        let _ = self.multi.clear();
    }
}

/// A bar counting finished jobs (simulations of a sweep), safe to update from several threads.
pub struct Counter {
    bar: ProgressBar,
}

impl Bars {
    /// A job counter labelled `label`.
    pub fn counter(&self, label: &str) -> Counter {
        let bar = if self.quiet { ProgressBar::hidden() } else { self.multi.add(ProgressBar::new(0)) };
        let style = ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} {elapsed} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar());
        bar.set_style(style.progress_chars("=> "));
        bar.set_prefix(label.to_string());
        bar.enable_steady_tick(Duration::from_millis(200));
        Counter { bar }
    }
}

impl Counter {
    /// `done` of `total` jobs finished, the last being `label`.
    pub fn step(&self, label: &str, done: usize, total: usize) {
        self.bar.set_length(total as u64);
        self.bar.set_position(done as u64);
        self.bar.set_message(label.to_string());
    }

    /// Removes the bar.
    pub fn done(&self) {
        self.bar.finish_and_clear();
    }
}

/// One spinner with a request count and rate.
pub struct Spinner {
    bar: ProgressBar,
}

impl Spinner {
    /// A spinner labelled `label`.
    pub fn new(bars: &Bars, label: &str) -> Spinner {
        let bar = if bars.quiet { ProgressBar::hidden() } else { bars.multi.add(ProgressBar::new_spinner()) };
        let style =
            ProgressStyle::with_template("{spinner} {prefix:<48} {human_pos:>12} requests  {per_sec:>14}  {elapsed}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner());
        bar.set_style(style);
        bar.set_prefix(label.to_string());
        bar.enable_steady_tick(Duration::from_millis(200));
        Spinner { bar }
    }

    /// Marks it finished.
    pub fn done(&self) {
        self.bar.finish();
    }
}

impl Progress for Spinner {
    fn update(&mut self, records: u64) {
        self.bar.set_position(records);
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        if !self.bar.is_finished() {
            self.bar.finish();
        }
    }
}

impl ProgressFactory for Bars {
    fn make(&self, label: &str) -> Box<dyn Progress + Send> {
        Box::new(Spinner::new(self, label))
    }
}
