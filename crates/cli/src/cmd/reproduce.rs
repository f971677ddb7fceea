//! `tierwise reproduce`: a seed paper's experiments beside its numbers.

use anyhow::{Result, bail};

use crate::args::*;
use crate::progress::Bars;
use crate::repo_root;

/// The repository root (for the bundled traces): the current directory if it has `data/traces`,
/// else the source tree this binary was built from.
pub(crate) fn cmd_reproduce(a: ReproduceArgs, bars: &Bars) -> Result<()> {
    use tierwise_sim::jobs::{ReproduceJob, run_reproduce};
    use tierwise_sim::reproduce::TARGETS;
    if !TARGETS.iter().any(|(t, _)| *t == a.target) {
        let known: Vec<String> = TARGETS.iter().map(|(t, h)| format!("  {t:<8} {h}")).collect();
        bail!("unknown reproduction target `{}`; expected one of:\n{}", a.target, known.join("\n"));
    }
    let traces_dir = a.traces.clone().unwrap_or_else(|| repo_root().join("data/traces"));
    let job = ReproduceJob {
        target: a.target.clone(),
        scale: a.scale,
        traces: traces_dir,
        seed: a.seed,
        threads: a.threads.unwrap_or(0),
    };
    let bar = bars.counter(&format!("reproduce {}", a.target));
    let progress = |label: &str, done: usize, total: usize| bar.step(label, done, total);
    let r = run_reproduce(&job, &progress)?;
    bar.done();
    print!("{}", r.to_text());
    let files = r.write(&a.out).map_err(anyhow::Error::msg)?;
    println!("\nwrote {}", files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>().join(", "));
    Ok(())
}
