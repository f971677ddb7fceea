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

    /// Removes all bars from the screen.
    pub fn clear(&self) {
        let _ = self.multi.clear();
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
