//! `tierwise report` (the self-contained HTML report) and `tierwise sweep` (run by the Python
//! package, where Dask lives).

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, Result, bail};
use clap::Args;

/// `tierwise report`.
#[derive(Args)]
pub(crate) struct ReportArgs {
    /// Result files (compare.json, compare-latency.json, mrc.json, sim --json output,
    /// reproduce-TARGET.json) or directories (a sweep's results directory, or any directory of
    /// those JSON files).
    #[arg(required = true)]
    pub(crate) results: Vec<PathBuf>,
    /// The HTML file to write.
    #[arg(long, short, default_value = "report.html")]
    pub(crate) output: PathBuf,
    /// The report's title.
    #[arg(long)]
    pub(crate) title: Option<String>,
}

pub(crate) fn cmd_report(a: ReportArgs) -> Result<()> {
    let n = tierwise_sim::html::write_report(&a.results, &a.output, a.title.as_deref())?;
    println!("wrote {} from {n} result file(s)", a.output.display());
    Ok(())
}

/// `tierwise sweep`: everything after the command goes to `python3 -m tierwise.sweep`.
#[derive(Args)]
#[command(disable_help_flag = true)]
pub(crate) struct SweepArgs {
    /// SWEEP.toml and options (`tierwise sweep --help` lists them).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub(crate) args: Vec<String>,
}

pub(crate) fn cmd_sweep(a: SweepArgs) -> Result<()> {
    // The interpreter the package was installed into; a venv's python3 when one is active.
    let python = std::env::var("TIERWISE_PYTHON").unwrap_or_else(|_| "python3".into());
    let found = Command::new(&python)
        .args(["-c", "import importlib.util,sys; sys.exit(importlib.util.find_spec('tierwise') is None)"])
        .status()
        .with_context(|| {
            format!("running {python} (set TIERWISE_PYTHON to the interpreter with tierwise installed)")
        })?;
    if !found.success() {
        bail!(
            "tierwise sweep runs in the Python package, which {python} does not have: \
             pip install './python[dask]' (or set TIERWISE_PYTHON to the interpreter that has it)"
        );
    }
    let e = Command::new(&python).args(["-m", "tierwise.sweep"]).args(&a.args).exec();
    Err(e).with_context(|| format!("starting {python} -m tierwise.sweep"))
}
