//! `tierwise._native`: the simulator's jobs for Python. Every function takes a job as JSON (the
//! serde form of `tierwise_sim::jobs`, so unknown options are refused by name), runs it with
//! the interpreter released, and returns the result as JSON: the same structures the CLI writes
//! with `--json`, so the two cannot drift apart. `tierwise/__init__.py` turns them into
//! DataFrames.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use serde::Serialize;
use tierwise_sim::compare::ProgressFactory;
use tierwise_sim::jobs::{self, JobError};
use tierwise_sim::sim::Progress;

create_exception!(_native, TierwiseError, PyException, "Any tierwise failure.");
create_exception!(
    _native,
    TraceError,
    TierwiseError,
    "A trace is missing, unreadable or malformed; the message names file, line and field."
);
create_exception!(
    _native,
    SpecError,
    TierwiseError,
    "An architecture spec, size or option is invalid; the message names it and what is allowed."
);
create_exception!(_native, RunError, TierwiseError, "A simulation failed while running.");

fn to_py(e: JobError) -> PyErr {
    match e.kind() {
        "trace" => TraceError::new_err(e.to_string()),
        "input" => SpecError::new_err(e.to_string()),
        _ => RunError::new_err(e.to_string()),
    }
}

/// A job that does not parse: an unknown or mistyped option.
fn parse<T: serde::de::DeserializeOwned>(job: &str) -> PyResult<T> {
    serde_json::from_str(job).map_err(|e| {
        // serde names JSON fields and positions; the caller wrote keyword arguments.
        let msg = e.to_string().replace("unknown field", "unknown option");
        let msg = msg.split(" at line ").next().unwrap_or(&msg).to_string();
        SpecError::new_err(msg)
    })
}

fn dump<T: Serialize>(v: &T) -> PyResult<String> {
    serde_json::to_string(v).map_err(|e| RunError::new_err(format!("encoding the result: {e}")))
}

/// Progress to a Python callable `progress(records)`, called with the interpreter attached.
struct Records(Option<Py<PyAny>>);

impl Progress for Records {
    fn update(&mut self, records: u64) {
        if let Some(cb) = &self.0 {
            // A failing callback must not stop the simulation; Python prints it as unraisable.
            Python::attach(|py| {
                if let Err(e) = cb.call1(py, (records,)) {
                    e.write_unraisable(py, None);
                }
            });
        }
    }
}

/// Progress of a comparison: `progress(label, runs_done)` as each run ends (its reporter is
/// dropped when the run finishes).
struct Runs(Arc<RunsShared>);

struct RunsShared {
    callback: Option<Py<PyAny>>,
    done: AtomicUsize,
}

struct RunEnd {
    runs: Arc<RunsShared>,
    label: String,
}

impl Progress for RunEnd {
    fn update(&mut self, _records: u64) {}
}

impl Drop for RunEnd {
    fn drop(&mut self) {
        let done = self.runs.done.fetch_add(1, Ordering::Relaxed) + 1;
        if let Some(cb) = &self.runs.callback {
            Python::attach(|py| {
                if let Err(e) = cb.call1(py, (self.label.as_str(), done)) {
                    e.write_unraisable(py, None);
                }
            });
        }
    }
}

impl ProgressFactory for Runs {
    fn make(&self, label: &str) -> Box<dyn Progress + Send> {
        Box::new(RunEnd { runs: Arc::clone(&self.0), label: label.to_string() })
    }
}

#[derive(Serialize)]
struct SimResult {
    report: tierwise_sim::metrics::SimReport,
    size_label: String,
    size_fraction: f64,
}

/// Runs a `sim` job (JSON); returns `{report, size_label, size_fraction}` as JSON.
#[pyfunction]
#[pyo3(signature = (job, progress=None))]
fn sim(py: Python<'_>, job: &str, progress: Option<Py<PyAny>>) -> PyResult<String> {
    let job: jobs::SimJob = parse(job)?;
    let out = py.detach(|| jobs::run_sim(&job, &mut Records(progress))).map_err(to_py)?;
    dump(&SimResult { report: out.report, size_label: out.size_label, size_fraction: out.size_fraction })
}

/// Runs a `compare` job (JSON); returns `{throughput, latency, latency_note, verdicts}` as JSON.
#[pyfunction]
#[pyo3(signature = (job, progress=None))]
fn compare(py: Python<'_>, job: &str, progress: Option<Py<PyAny>>) -> PyResult<String> {
    let job: jobs::CompareJob = parse(job)?;
    let runs = Runs(Arc::new(RunsShared { callback: progress, done: AtomicUsize::new(0) }));
    let out = py.detach(|| jobs::run_compare(&job, &runs)).map_err(to_py)?;
    dump(&out)
}

#[derive(Serialize)]
struct MrcResult {
    mrc: tierwise_sim::mrc::Mrc,
    objects: String,
    note: Option<String>,
}

/// Runs an `mrc` job (JSON); returns `{mrc, objects, note}` as JSON.
#[pyfunction]
#[pyo3(signature = (job, progress=None))]
fn mrc(py: Python<'_>, job: &str, progress: Option<Py<PyAny>>) -> PyResult<String> {
    let job: jobs::MrcJob = parse(job)?;
    let out = py.detach(|| jobs::run_mrc(&job, &mut Records(progress))).map_err(to_py)?;
    dump(&MrcResult { mrc: out.mrc, objects: out.mode.label(), note: out.note })
}

#[derive(Serialize)]
struct StatResult {
    stats: tierwise_sim::stat::TraceStats,
    note: Option<String>,
}

/// Runs a `trace stat` job (JSON); returns `{stats, note}` as JSON.
#[pyfunction]
#[pyo3(signature = (job, progress=None))]
fn trace_stat(py: Python<'_>, job: &str, progress: Option<Py<PyAny>>) -> PyResult<String> {
    let job: jobs::StatJob = parse(job)?;
    let (stats, note) = py.detach(|| jobs::run_stat(&job, &mut Records(progress))).map_err(to_py)?;
    dump(&StatResult { stats, note })
}

/// Runs a `reproduce` job (JSON); returns the reproduction as JSON. With `out`, also writes the
/// CLI's files (JSON, CSV, PNG charts) there.
#[pyfunction]
#[pyo3(signature = (job, out=None, progress=None))]
fn reproduce(
    py: Python<'_>,
    job: &str,
    out: Option<std::path::PathBuf>,
    progress: Option<Py<PyAny>>,
) -> PyResult<String> {
    let job: jobs::ReproduceJob = parse(job)?;
    let report = |label: &str, done: usize, total: usize| {
        if let Some(cb) = &progress {
            Python::attach(|py| {
                if let Err(e) = cb.call1(py, (label, done, total)) {
                    e.write_unraisable(py, None);
                }
            });
        }
    };
    let r = py
        .detach(|| {
            let r = jobs::run_reproduce(&job, &report)?;
            if let Some(dir) = &out {
                r.write(dir).map_err(JobError::Run)?;
            }
            Ok(r)
        })
        .map_err(to_py)?;
    dump(&r)
}

/// Writes a seeded Zipf workload (JSON: requests, objects, alpha, size, write_fraction, rate,
/// seed) to `path` (`tierwise trace gen`): MQSim ASCII when the name contains `mqsim`, else
/// oracleGeneral. The same seed writes the same bytes on every machine.
#[pyfunction]
fn gen_zipf(py: Python<'_>, workload: &str, path: std::path::PathBuf) -> PyResult<()> {
    let w: tierwise_sim::synth::ZipfWorkload = parse(workload)?;
    w.validate().map_err(SpecError::new_err)?;
    py.detach(|| w.write(&path)).map_err(|e| RunError::new_err(format!("writing {}: {e}", path.display())))
}

/// Checks a `sim` job (JSON) without running it; raises what running it would raise first.
#[pyfunction]
fn check_sim(job: &str) -> PyResult<()> {
    let job: jobs::SimJob = parse(job)?;
    jobs::check_sim_job(&job).map_err(to_py)
}

/// Writes the HTML report for `results` (files or directories) to `out`; returns how many
/// result files it holds.
#[pyfunction]
#[pyo3(signature = (results, out, title=None))]
fn report(
    py: Python<'_>,
    results: Vec<std::path::PathBuf>,
    out: std::path::PathBuf,
    title: Option<String>,
) -> PyResult<usize> {
    py.detach(|| tierwise_sim::html::write_report(&results, &out, title.as_deref()))
        .map_err(|e| SpecError::new_err(e.to_string()))
}

/// Every architecture and collector with its knobs and defaults, as JSON.
#[pyfunction]
fn catalogue() -> PyResult<String> {
    dump(&jobs::catalogue())
}

/// The engine's version.
#[pyfunction]
fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

/// The build: `describe` (what results record), `sources_sha256` (every Rust source file of
/// the native module, with its path: part of every sweep job's key), `commit` and `modified`.
#[pyfunction]
fn build(py: Python<'_>) -> PyResult<Bound<'_, pyo3::types::PyDict>> {
    use tierwise_build_info as b;
    let d = pyo3::types::PyDict::new(py);
    d.set_item("describe", b::describe())?;
    d.set_item("sources_sha256", b::SOURCES_SHA256)?;
    d.set_item("commit", b::GIT_COMMIT)?;
    d.set_item("modified", b::GIT_MODIFIED)?;
    d.set_item("version", b::VERSION)?;
    Ok(d)
}

/// The native module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    tierwise_sim::stamp::set(tierwise_build_info::describe());
    m.add("TierwiseError", py.get_type::<TierwiseError>())?;
    m.add("TraceError", py.get_type::<TraceError>())?;
    m.add("SpecError", py.get_type::<SpecError>())?;
    m.add("RunError", py.get_type::<RunError>())?;
    m.add_function(wrap_pyfunction!(sim, m)?)?;
    m.add_function(wrap_pyfunction!(build, m)?)?;
    m.add_function(wrap_pyfunction!(gen_zipf, m)?)?;
    m.add_function(wrap_pyfunction!(compare, m)?)?;
    m.add_function(wrap_pyfunction!(mrc, m)?)?;
    m.add_function(wrap_pyfunction!(trace_stat, m)?)?;
    m.add_function(wrap_pyfunction!(reproduce, m)?)?;
    m.add_function(wrap_pyfunction!(catalogue, m)?)?;
    m.add_function(wrap_pyfunction!(report, m)?)?;
    m.add_function(wrap_pyfunction!(check_sim, m)?)?;
    m.add_function(wrap_pyfunction!(version, m)?)?;
    Ok(())
}
