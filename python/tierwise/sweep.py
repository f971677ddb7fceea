"""Sweeps: traces × architectures × SSD sizes × knob values, one simulation per job, on a Dask
cluster (an embedded LocalCluster by default, ``scheduler="tcp://HOST:PORT"`` for an existing
one) or, without Dask, in local processes.

Every finished job is written at once as its own Parquet file, named by a hash of what decides
its result (the trace's content, the spec, the size, the model options, and the build: a hash of
every source file of the native module and of this package, see :func:`build_stamp`). An
interrupted sweep therefore resumes where it stopped, an unchanged job is never rerun, and a job
of a sweep rerun after any change to the code runs again. Every row names the build that
computed it; a worker running another build than the client is a failed job, not a result.
A job that fails is retried, then reported with its error: :class:`SweepError` lists every
failure after the other jobs have finished and been saved.

Command line: ``tierwise sweep SWEEP.toml`` (or ``python -m tierwise.sweep SWEEP.toml``).
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import os
import sys
import time
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from tierwise import _native, workloads
from tierwise._api import report_row
from tierwise._progress import ProgressArg, enabled
from tierwise.stats import summarize

RESULTS = "results.parquet"
SUMMARY_TABLE = "summary.parquet"
WORKLOADS = "workloads"
SUMMARY = "sweep.json"
META = "sweep-meta.json"
FAILURES = "failures.json"


class SweepError(_native.TierwiseError):
    """Jobs failed after their retries, or the sweep cannot start; ``failures`` lists each
    failed job with its error."""

    def __init__(self, message: str, failures: list[dict[str, Any]] | None = None):
        super().__init__(message)
        self.failures = failures or []


@dataclass
class Job:
    """One simulation of a sweep."""

    key: str
    trace: str
    arch: str
    ssd: str
    knobs: dict[str, str]
    job: dict[str, Any]
    trace_digest: str
    # The trace entry as given (a file, or a synthetic workload `zipf:…`) and, for a synthetic
    # one, which replicate this is and its seed.
    workload: str = ""
    replicate: int = 0
    seed: int | None = None


@dataclass
class SweepStats:
    """What a sweep did and how long it took."""

    jobs: int = 0
    cached: int = 0
    ran: int = 0
    failed: int = 0
    workers: int = 0
    wall_s: float = 0.0
    compute_s: float = 0.0
    executor: str = ""
    failures: list[dict[str, Any]] = field(default_factory=list)

    @property
    def overhead_per_job_s(self) -> float:
        """Scheduling overhead per job that ran: worker time not spent simulating."""
        if self.ran == 0:
            return 0.0
        return max(0.0, self.wall_s * self.workers - self.compute_s) / self.ran


_BUILD: dict[str, str] = {}


def build_stamp() -> dict[str, str]:
    """The build that computes results here: ``stamp`` (SHA-256 of the native module's sources
    hash and of this package's Python files: part of every job's key) and ``describe`` (the
    version, sources hash and git commit, recorded in every result)."""
    if not _BUILD:
        native = _native.build()
        h = hashlib.sha256(str(native["sources_sha256"]).encode())
        package = Path(__file__).parent
        for py in sorted(package.glob("*.py")):
            h.update(py.name.encode() + b"\0")
            h.update(py.read_bytes())
        stamp = h.hexdigest()
        _BUILD.update(stamp=stamp, describe=f"{native['describe']}, python {stamp[:12]}")
    return dict(_BUILD)


def trace_digest(path: str | os.PathLike[str]) -> str:
    """SHA-256 of a trace file's bytes (a job's result depends on the content, not the path)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _spec_with(arch: str, knobs: Mapping[str, str]) -> str:
    if not knobs:
        return arch
    extra = ",".join(f"{k}={v}" for k, v in knobs.items())
    return f"{arch},{extra}" if ":" in arch else f"{arch}:{extra}"


def _arch_knobs() -> dict[str, set[str]]:
    cat = json.loads(_native.catalogue())
    collector_knobs = set()
    for e in cat:
        if e["kind"] == "collector":
            collector_knobs |= {k["name"] for k in e["knobs"]}
    out = {}
    for e in cat:
        if e["kind"] == "architecture":
            names = {k["name"] for k in e["knobs"]}
            if "collector" in names:
                names |= collector_knobs
            out[e["name"]] = names
    return out


MODEL_AXIS = "model."


def model_variants(model: Mapping[str, Any] | None) -> list[tuple[dict[str, Any], dict[str, str]]]:
    """The model options as variants: a value given as a list (``timing = ["closed:8",
    "closed:32"]``, ``hdd = [...]``, ``hdd_queue = [...]``) is an axis of the sweep, and every
    combination of the axes' values is one variant. Returns (the options of the variant, its
    axis values as ``{"model.timing": "closed:8", …}``, which rows carry among their knobs)."""
    model = dict(model or {})
    axes = {k: list(v) for k, v in model.items() if isinstance(v, list | tuple)}
    for k, vals in axes.items():
        if not vals:
            raise _native.SpecError(f"model option `{k}`: an empty list; give one value or several to sweep over")
    fixed = {k: v for k, v in model.items() if k not in axes}
    out = []
    for combo in itertools.product(*axes.values()):
        chosen = dict(zip(axes, combo))
        named = {MODEL_AXIS + k: str(v) for k, v in chosen.items() if len(axes[k]) > 1}
        out.append(({**fixed, **chosen}, named))
    return out


def expand(
    traces: Sequence[str | os.PathLike[str]],
    archs: Sequence[str],
    ssd: Sequence[str],
    knobs: Mapping[str, Sequence[Any]] | None = None,
    model: Mapping[str, Any] | None = None,
    trace_options: Mapping[str, Any] | None = None,
    replicates: int = 1,
    seed: int = 1,
    workdir: str | os.PathLike[str] | None = None,
    measure_from: str = "auto",
) -> list[Job]:
    """The cross product as jobs, every one checked before any runs. A knob is applied to the
    architectures that have it; a knob no architecture has, an unknown architecture, option or
    trace path raises :class:`SpecError` naming the entry. A synthetic workload
    (``zipf:requests=…,objects=…,alpha=…``) runs ``replicates`` times, with seeds ``seed``,
    ``seed + 1``, …; its traces are written under ``workdir``. A model option given as a list
    is an axis too (:func:`model_variants`); rows carry its value among their knobs as
    ``model.OPTION``."""
    if not traces or not archs or not ssd:
        raise _native.SpecError("a sweep needs at least one trace, one architecture and one SSD size")
    if replicates < 1:
        raise _native.SpecError(f"replicates = {replicates}: expected at least 1")
    entries: list[tuple[str, str, int, int | None]] = []  # (path, workload, replicate, seed)
    for t in traces:
        if workloads.is_synthetic(t):
            workloads.parse(str(t))
        elif replicates > 1:
            raise _native.SpecError(
                f"trace `{t}`: a trace file replays the same way every time, so replicates of it are copies; "
                "replicates need a seeded workload (`zipf:requests=…,objects=…,alpha=…`)"
            )
    for t in traces:
        if workloads.is_synthetic(t):
            where = Path(workdir if workdir is not None else ".") / WORKLOADS
            for r in range(replicates):
                path = workloads.materialize(str(t), seed + r, where)
                entries.append((os.fspath(path), str(t), r, seed + r))
        else:
            entries.append((os.fspath(t), os.fspath(t), 0, None))
    knobs = {k: [str(v) for v in (vals if isinstance(vals, list | tuple) else [vals])] for k, vals in (knobs or {}).items()}
    known = _arch_knobs()
    for name in knobs:
        if not any(name in known.get(a.split(":")[0], set()) for a in archs):
            raise _native.SpecError(f"knob `{name}`: none of the sweep's architectures has it ({', '.join(archs)})")
    variants = model_variants(model)
    trace_options = dict(trace_options or {})
    digests: dict[str, str] = {}
    for t, *_ in entries:
        p = Path(t)
        if not p.is_file():
            raise _native.SpecError(f"trace `{t}`: no such file")
        digests[os.fspath(t)] = trace_digest(p)
    jobs: list[Job] = []
    version = _native.version()
    build = build_stamp()["stamp"]
    for (t, workload, replicate, rep_seed), arch, size, (model, axes) in itertools.product(
        entries, archs, ssd, variants
    ):
        base = arch.split(":")[0]
        mine = [k for k in knobs if k in known.get(base, set())]
        for values in itertools.product(*(knobs[k] for k in mine)):
            kv = dict(zip(mine, values))
            spec = _spec_with(arch, kv)
            kv.update(axes)
            job = {
                "trace": os.fspath(t),
                "arch": spec,
                "ssd": size,
                "trace_options": trace_options,
                "model": model,
                "measure_from": str(measure_from),
            }
            try:
                _native.check_sim(json.dumps(job))
            except _native.TierwiseError as e:
                where = "".join(f" {k}={v}" for k, v in axes.items())
                raise type(e)(f"sweep entry trace={t} arch={spec} ssd={size}{where}: {e}") from None
            ident = {k: v for k, v in job.items() if k != "trace"}
            ident["trace_sha256"] = digests[os.fspath(t)]
            ident["tierwise"] = version
            ident["build"] = build
            key = hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:24]
            jobs.append(Job(key, t, spec, size, kv, job, digests[t], workload, replicate, rep_seed))
    seen: set[str] = set()
    unique = []
    for j in jobs:
        if j.key not in seen:
            seen.add(j.key)
            unique.append(j)
    return unique


GUARD_HINT = (
    "tierwise.sweep() was called while a worker process imported the script that calls it: worker "
    "processes import the main script again, so a script must call sweep() under "
    "`if __name__ == \"__main__\":` (notebooks and `python -c` need nothing)"
)
FAULT_ENV = "TIERWISE_SWEEP_KILL_WORKER_ONCE"
# For the test of workers that run another build than the client: the workers' stamp.
_FAKE_BUILD_ENV = "TIERWISE_SWEEP_WORKER_BUILD"


def _fault_injection(job: dict[str, Any]) -> None:
    """For the tests of worker death: with ``TIERWISE_SWEEP_KILL_WORKER_ONCE=DIR`` set, the first
    attempt of every job kills its own worker process (leaving a mark in DIR), as an OOM kill
    or a lost node would."""
    marks = os.environ.get(FAULT_ENV)
    if not marks:
        return
    mark = Path(marks) / hashlib.sha256(json.dumps(job, sort_keys=True).encode()).hexdigest()
    try:
        fd = os.open(mark, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return
    os.close(fd)
    os._exit(70)


def run_job(job: dict[str, Any], trace_bytes: bytes | None = None) -> dict[str, Any]:
    """Runs one job where it is called (a Dask worker or a local process): returns the result
    and the seconds spent simulating. With ``trace_bytes`` the trace was shipped: it is written
    to a private directory under its own name (formats are recognised by name)."""
    import tempfile

    _fault_injection(job)
    if os.environ.get(_FAKE_BUILD_ENV):
        _BUILD.update(stamp=os.environ[_FAKE_BUILD_ENV], describe=os.environ[_FAKE_BUILD_ENV])
    started = time.perf_counter()
    if trace_bytes is None:
        out = json.loads(_native.sim(json.dumps(job)))
    else:
        with tempfile.TemporaryDirectory(prefix="tierwise-sweep-") as d:
            local = Path(d) / Path(job["trace"]).name
            local.write_bytes(trace_bytes)
            out = json.loads(_native.sim(json.dumps({**job, "trace": os.fspath(local)})))
            out["report"]["trace"] = job["trace"]
    out["compute_s"] = time.perf_counter() - started
    out["build"] = build_stamp()
    return out


def _check_out(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    meta = out / META
    version = _native.version()
    if meta.exists():
        try:
            had = json.loads(meta.read_text())
        except (OSError, ValueError) as e:
            raise SweepError(f"{meta}: unreadable ({e}); use another results directory") from None
        if had.get("tierwise") != version:
            raise SweepError(
                f"{out}: results of tierwise {had.get('tierwise')}, this is {version}; "
                "results of different versions are not mixed: use another directory"
            )
    else:
        meta.write_text(json.dumps({"tierwise": version, "format": 1}, indent=2))
    (out / "jobs").mkdir(exist_ok=True)


def _job_file(out: Path, key: str) -> Path:
    return out / "jobs" / f"{key}.parquet"


def _save(out: Path, j: Job, result: dict[str, Any]) -> None:
    row = report_row(
        result["report"],
        key=j.key,
        trace_file=j.trace,
        trace_sha256=j.trace_digest,
        spec=j.arch,
        ssd=j.ssd,
        size_label=result["size_label"],
        size_fraction=result["size_fraction"],
        knobs=json.dumps(j.knobs, sort_keys=True),
        workload=j.workload,
        replicate=j.replicate,
        seed=j.seed,
        build_stamp=result["build"]["stamp"],
        compute_s=result["compute_s"],
        report_json=json.dumps(result["report"]),
    )
    row["notes"] = json.dumps(row.get("notes", []))
    final = _job_file(out, j.key)
    tmp = final.with_suffix(".tmp")
    # pyarrow directly: the client writes one file per finished job while the workers compute,
    # so its cost comes out of the same cores (7 ms a job through pandas, under 2 ms this way).
    pq.write_table(pa.Table.from_pylist([row]), tmp)
    os.replace(tmp, final)  # a killed sweep leaves no half-written result behind


def _collect(out: Path, jobs: Sequence[Job]) -> pd.DataFrame:
    frames = [pd.read_parquet(_job_file(out, j.key)) for j in jobs if _job_file(out, j.key).exists()]
    if not frames:
        return pd.DataFrame()
    df = pd.concat(frames, ignore_index=True)
    order = {j.key: i for i, j in enumerate(jobs)}
    df = df.sort_values("key", key=lambda s: s.map(order)).reset_index(drop=True)
    return df


def _finite(v: Any) -> Any:
    """JSON has no NaN: an interval of one replicate is null."""
    return None if isinstance(v, float) and v != v else v


def _aggregates(summary: pd.DataFrame) -> list[dict[str, Any]]:
    """The summary table as sweep.json's ``aggregates`` (for `tierwise report`)."""
    out = []
    for r in summary.to_dict("records"):
        metrics: dict[str, dict[str, Any]] = {}
        for col, v in r.items():
            name, dot, stat = col.rpartition(".")
            if dot and stat in ("mean", "std", "ci_low", "ci_high"):
                metrics.setdefault(name, {})[stat] = _finite(v)
        out.append(
            {
                "workload": r["workload"],
                "spec": r["spec"],
                "ssd": r["ssd"],
                "size_label": r["size_label"],
                "size_fraction": _finite(r["size_fraction"]),
                "knobs": json.loads(r["knobs"]),
                "n": int(r["n"]),
                "confidence": summary.attrs.get("confidence", 0.95),
                "metrics": metrics,
            }
        )
    return out


def _write_summary(
    out: Path, df: pd.DataFrame, stats: SweepStats, config: dict[str, Any], summary_table: pd.DataFrame | None
) -> None:
    df.drop(columns=["compute_s"]).to_parquet(out / RESULTS, index=False)
    if summary_table is not None:
        summary_table.to_parquet(out / SUMMARY_TABLE, index=False)
    rows = [
        {
            "workload": r.workload,
            "replicate": r.replicate,
            "trace": r.trace_file,
            "spec": r.spec,
            "ssd": r.ssd,
            "size_label": r.size_label,
            "size_fraction": r.size_fraction,
            "knobs": json.loads(r.knobs),
            "report": json.loads(r.report_json),
        }
        for r in df.itertuples()
    ]
    summary = {
        "sweep": config,
        "tierwise": _native.version(),
        "build": build_stamp()["describe"],
        "jobs": stats.jobs,
        "failed": stats.failures,
        "rows": rows,
        "aggregates": _aggregates(summary_table) if summary_table is not None else [],
    }
    (out / SUMMARY).write_text(json.dumps(summary, indent=1))


def _bar(progress: ProgressArg, total: int, initial: int) -> Any:
    if not enabled(progress):
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=initial, desc="sweep", unit="job", file=sys.stderr)


def _read_traces(jobs: list[Job]) -> dict[str, bytes]:
    """The bytes of every trace the jobs read, each read once (for shipping to workers)."""
    return {t: Path(t).read_bytes() for t in dict.fromkeys(j.trace for j in jobs)}


def _retryable(e: BaseException) -> bool:
    # A bad trace or spec fails the same way every time.
    return not isinstance(e, _native.SpecError | _native.TraceError)


def _run_local(todo: list[Job], workers: int, retries: int, ship: bool, done_cb: Any) -> None:
    """Local processes, in rounds: a job that failed (or whose worker died, which breaks the
    pool) is retried in the next round with a fresh pool."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    ctx = multiprocessing.get_context("spawn")
    attempts = {j.key: 0 for j in todo}
    shipped = _read_traces(todo) if ship else {}
    remaining = list(todo)
    while remaining:
        with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
            futures = {
                pool.submit(run_job, j.job, shipped.get(j.trace)): j for j in remaining
            }
            remaining = []
            for f in as_completed(futures):
                j = futures[f]
                try:
                    result = f.result()
                except Exception as e:  # noqa: BLE001 - every failure is retried, then reported
                    attempts[j.key] += 1
                    if attempts[j.key] <= retries and _retryable(e):
                        remaining.append(j)
                    else:
                        done_cb(j, None, e)
                    continue
                done_cb(j, result, None)


def _run_dask(todo: list[Job], client: Any, retries: int, ship: bool, done_cb: Any) -> None:
    """Dask: a job is retried on failure, and rescheduled by Dask if its worker dies."""
    from dask.distributed import as_completed

    # Each trace goes to the cluster once, however many jobs read it.
    shipped = {t: client.scatter(data) for t, data in _read_traces(todo).items()} if ship else {}
    futures = {}
    for j in todo:
        f = client.submit(run_job, j.job, shipped.get(j.trace), key=f"tierwise-sim-{j.key}", retries=retries, pure=False)
        futures[f] = j
    for f in as_completed(list(futures)):
        j = futures[f]
        try:
            result = f.result()
        except Exception as e:  # noqa: BLE001 - Dask retried it already; report it
            done_cb(j, None, e)
            continue
        done_cb(j, result, None)


def sweep(
    traces: Sequence[str | os.PathLike[str]],
    archs: Sequence[str],
    ssd: Sequence[str],
    knobs: Mapping[str, Sequence[Any]] | None = None,
    *,
    out: str | os.PathLike[str] = "sweep-out",
    model: Mapping[str, Any] | None = None,
    trace_options: Mapping[str, Any] | None = None,
    scheduler: str | None = None,
    workers: int | None = None,
    executor: str = "auto",
    retries: int = 2,
    ship_traces: bool = False,
    progress: ProgressArg = None,
    max_jobs: int | None = None,
    replicates: int = 1,
    seed: int = 1,
    confidence: float = 0.95,
    measure_from: str = "auto",
) -> pd.DataFrame:
    """Runs the cross product of ``traces × archs × ssd × knobs`` and returns one row per job
    (the columns of :func:`tierwise.sim` plus key, trace_file, spec, knobs).

    ``executor``: ``dask`` (a LocalCluster of ``workers`` processes, or ``scheduler``),
    ``processes`` (local processes, no Dask) or ``auto`` (Dask when installed). Results go to
    ``out``: ``jobs/KEY.parquet`` per job, ``results.parquet`` and ``sweep.json`` (for
    ``tierwise report``) at the end. ``max_jobs`` stops after that many new jobs (the rest run
    on the next call). ``ship_traces`` sends each trace's bytes to the workers instead of
    assuming a shared path. ``measure_from`` is ``tierwise sim --measure-from``'s warm-up: for
    block traces a request index or a share such as ``"20%"``; for file traces ``auto`` (after
    the setup phase) or an operation index.

    A synthetic workload among ``traces`` (``zipf:requests=…,objects=…,alpha=…``, `tierwise trace
    gen`'s parameters) runs ``replicates`` times with seeds ``seed``, ``seed + 1``, …; with more
    than one replicate, ``df.attrs["summary"]`` (and ``out/summary.parquet``) holds the mean,
    standard deviation and ``confidence`` interval of every metric over the replicates
    (:func:`tierwise.stats.summarize`), and the report draws them with error bars.
    """
    if not 0 < confidence < 1:
        raise _native.SpecError(f"confidence = {confidence}: expected within (0, 1)")
    import multiprocessing

    # `_inheriting`: what multiprocessing itself checks to refuse starting processes there.
    if getattr(multiprocessing.current_process(), "_inheriting", False):
        # A worker process importing the user's script again (spawn): its sweep call is not
        # guarded, and would start workers of its own.
        raise SweepError(GUARD_HINT)
    outp = Path(out)
    jobs = expand(traces, archs, ssd, knobs, model, trace_options, replicates, seed, outp, measure_from)
    _check_out(outp)
    todo = [j for j in jobs if not _job_file(outp, j.key).exists()]
    stats = SweepStats(jobs=len(jobs), cached=len(jobs) - len(todo))
    if max_jobs is not None:
        todo = todo[:max_jobs]
    workers = workers or os.cpu_count() or 2
    if executor == "auto":
        try:
            import dask.distributed  # noqa: F401

            executor = "dask"
        except ImportError:
            executor = "processes"
    if executor not in ("dask", "processes"):
        raise _native.SpecError(f"executor `{executor}`: expected dask, processes or auto")
    stats.executor = executor if scheduler is None else f"dask at {scheduler}"
    bar = _bar(progress, len(jobs), stats.cached)

    mine = build_stamp()

    def done(j: Job, result: dict[str, Any] | None, error: BaseException | None) -> None:
        if result is not None and result["build"]["stamp"] != mine["stamp"]:
            error = SweepError(
                f"the worker runs another build of tierwise ({result['build']['describe']}) than this client "
                f"({mine['describe']}): install the same build on the workers; its result was not kept"
            )
            result = None
        if result is not None:
            _save(outp, j, result)
            stats.ran += 1
            stats.compute_s += result["compute_s"]
        else:
            stats.failed += 1
            stats.failures.append({"key": j.key, "trace": j.trace, "spec": j.arch, "ssd": j.ssd, "error": f"{type(error).__name__}: {error}"})
        if bar is not None:
            bar.set_postfix_str(f"{j.arch} @ {j.ssd}", refresh=False)
            bar.update(1)

    started = time.perf_counter()
    try:
        if todo and executor == "dask":
            from dask.distributed import Client, LocalCluster

            if scheduler is not None:
                with Client(scheduler) as client:
                    stats.workers = max(1, len(client.scheduler_info().get("workers", {})))
                    _run_dask(todo, client, retries, ship_traces, done)
            else:
                with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, Client(cluster) as client:
                    stats.workers = workers
                    _run_dask(todo, client, retries, ship_traces, done)
        elif todo:
            stats.workers = workers
            _run_local(todo, workers, retries, ship_traces, done)
    finally:
        if bar is not None:
            bar.close()
    stats.wall_s = time.perf_counter() - started
    df = _collect(outp, jobs)
    config = {
        "traces": [os.fspath(t) for t in traces],
        "archs": list(archs),
        "ssd": list(ssd),
        "knobs": {k: list(map(str, v)) for k, v in (knobs or {}).items()},
        "model": dict(model or {}),
        "replicates": replicates,
        "seed": seed,
        "measure_from": str(measure_from),
    }
    summary_table = summarize(df, confidence=confidence) if replicates > 1 and not df.empty else None
    if not df.empty:
        _write_summary(outp, df, stats, config, summary_table)
    if summary_table is not None:
        # After writing: pandas stores attrs in the Parquet metadata, as JSON.
        df.attrs["summary"] = summary_table
    (outp / FAILURES).write_text(json.dumps(stats.failures, indent=1))
    df.attrs["sweep"] = stats
    df.attrs["out"] = os.fspath(outp)
    if stats.failures:
        lines = "\n".join(f"  {f['spec']} @ {f['ssd']} on {f['trace']}: {f['error']}" for f in stats.failures)
        hint = ""
        main_file = getattr(sys.modules.get("__main__"), "__file__", None)
        if main_file and all("BrokenProcessPool" in f["error"] for f in stats.failures):
            hint = f"\nevery worker process died; if {main_file} calls sweep() at its top level: {GUARD_HINT}"
        raise SweepError(f"{len(stats.failures)} of {len(jobs)} jobs failed after {retries} retries:\n{lines}{hint}", stats.failures)
    return df


def load_sweep_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Reads SWEEP.toml: traces, archs, ssd, [knobs], [model], [trace_options], [run]. Paths are
    relative to the file. Unknown keys are refused by name."""
    p = Path(path)
    try:
        doc = tomllib.loads(p.read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise _native.SpecError(f"{p}: {e}") from None
    allowed = {"traces", "archs", "ssd", "knobs", "model", "trace_options", "run", "replicates", "seed", "measure_from"}
    for k in doc:
        if k not in allowed:
            raise _native.SpecError(f"{p}: unknown key `{k}`: expected one of {', '.join(sorted(allowed))}")
    run = doc.get("run", {})
    run_allowed = {"out", "workers", "scheduler", "executor", "retries", "ship_traces"}
    for k in run:
        if k not in run_allowed:
            raise _native.SpecError(f"{p}: [run] unknown key `{k}`: expected one of {', '.join(sorted(run_allowed))}")
    base = p.parent
    traces = [
        t if workloads.is_synthetic(t) or Path(t).is_absolute() else os.fspath(base / t) for t in doc.get("traces", [])
    ]
    out = run.get("out", "sweep-out")
    return {
        "traces": traces,
        "archs": doc.get("archs", []),
        "ssd": [str(s) for s in doc.get("ssd", [])],
        "knobs": doc.get("knobs", {}),
        "model": doc.get("model", {}),
        "trace_options": doc.get("trace_options", {}),
        "replicates": doc.get("replicates", 1),
        "seed": doc.get("seed", 1),
        "measure_from": str(doc.get("measure_from", "auto")),
        "out": os.fspath(base / out) if not Path(out).is_absolute() else out,
        "workers": run.get("workers"),
        "scheduler": run.get("scheduler"),
        "executor": run.get("executor", "auto"),
        "retries": run.get("retries", 2),
        "ship_traces": run.get("ship_traces", False),
    }


def main(argv: Sequence[str] | None = None) -> int:
    """``tierwise sweep SWEEP.toml``."""
    ap = argparse.ArgumentParser(prog="tierwise sweep", description="Run a sweep file on Dask or local processes.")
    ap.add_argument("file", help="SWEEP.toml")
    ap.add_argument("--out", help="results directory (overrides [run] out)")
    ap.add_argument("--scheduler", help="tcp://HOST:PORT of an existing Dask scheduler")
    ap.add_argument("--workers", type=int, help="LocalCluster workers / local processes (default: cores)")
    ap.add_argument("--executor", choices=["auto", "dask", "processes"])
    ap.add_argument("--retries", type=int)
    ap.add_argument("--ship-traces", action="store_true", help="send trace bytes to the workers")
    ap.add_argument("--max-jobs", type=int, help="stop after this many new jobs (resume later)")
    ap.add_argument("--quiet", action="store_true", help="no progress bar")
    a = ap.parse_args(argv)
    try:
        cfg = load_sweep_file(a.file)
        for k in ("out", "scheduler", "workers", "executor", "retries"):
            if getattr(a, k) is not None:
                cfg[k] = getattr(a, k)
        if a.ship_traces:
            cfg["ship_traces"] = True
        df = sweep(progress=False if a.quiet else None, max_jobs=a.max_jobs, **cfg)
    except SweepError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except _native.TierwiseError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    s: SweepStats = df.attrs["sweep"]
    print(
        f"{s.jobs} jobs: {s.cached} already done, {s.ran} ran, {s.failed} failed; "
        f"{s.wall_s:.1f} s on {s.workers} workers ({s.executor}), "
        f"scheduling overhead {s.overhead_per_job_s * 1e3:.0f} ms per job"
    )
    print(f"wrote {Path(cfg['out']) / RESULTS} and {Path(cfg['out']) / SUMMARY}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
