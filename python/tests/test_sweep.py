"""Sweeps: Dask equals serial, a killed sweep resumes without rerunning anything, bad entries
are refused before any job starts, dead workers are retried, versions are not mixed, and a change
of build recomputes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

import tierwise
from conftest import MSR, SYSTOR, TPCC, TRACES, load, need

# Columns that record how long a job took, not what it computed.
TIMING = ["compute_s", "wall_s", "engine_memory_bytes", "report_json"]


def same_results(a: pd.DataFrame, b: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(
        a.drop(columns=[c for c in TIMING if c in a]).reset_index(drop=True),
        b.drop(columns=[c for c in TIMING if c in b]).reset_index(drop=True),
    )


SMALL = dict(
    traces=[MSR, SYSTOR, TPCC],
    archs=["cache:mode=write-back", "greendm-tiering", "dm-cache-smq-like"],
    ssd=["10%", "25%"],
    knobs={"collector": ["lru", "arc"]},
    model={"timing": "closed:32"},
)


def test_a_two_worker_cluster_equals_serial(tmp_path: Path) -> None:
    need("dask.distributed")
    serial = tierwise.sweep(**SMALL, out=tmp_path / "serial", executor="processes", workers=1)
    dask = tierwise.sweep(**SMALL, out=tmp_path / "dask", executor="dask", workers=2)
    # cache takes collector=lru|arc, greendm-tiering has no collector knob, dm-cache's does.
    assert len(serial) == 3 * 2 * (2 + 1 + 2)
    same_results(serial, dask)
    assert dask.attrs["sweep"].executor == "dask" and dask.attrs["sweep"].ran == len(dask)
    assert set(dask["spec"]) >= {"cache:mode=write-back,collector=arc", "greendm-tiering"}
    summary = load(tmp_path / "dask" / "sweep.json")
    assert len(summary["rows"]) == len(dask) and summary["failed"] == []
    # Unchanged jobs are never rerun.
    again = tierwise.sweep(**SMALL, out=tmp_path / "dask", executor="dask", workers=2)
    assert again.attrs["sweep"].ran == 0 and again.attrs["sweep"].cached == len(dask)
    same_results(again, dask)


def write_sweep(path: Path, out: Path, n_sizes: int = 6) -> None:
    sizes = ", ".join(f'"{s}%"' for s in [2, 5, 10, 20, 30, 40, 50, 60][:n_sizes])
    path.write_text(
        f"""
traces = ["{TRACES / 'arc_OLTP.lis.zst'}"]
archs = ["cache:mode=write-back", "cache:mode=write-back,collector=arc"]
ssd = [{sizes}]
[model]
timing = "closed:32"
[run]
out = "{out}"
executor = "processes"
workers = 1
"""
    )


def test_a_killed_sweep_resumes_without_rerunning_a_job(tmp_path: Path) -> None:
    spec = tmp_path / "sweep.toml"
    out = tmp_path / "out"
    write_sweep(spec, out)
    cmd = [sys.executable, "-m", "tierwise.sweep", str(spec), "--quiet"]
    p = subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    jobs = out / "jobs"
    deadline = time.time() + 120
    while time.time() < deadline and len(list(jobs.glob("*.parquet"))) < 3:
        time.sleep(0.02)
    os.killpg(p.pid, signal.SIGKILL)  # the sweep and its worker processes, mid-job
    p.wait()
    before = {f.name: f.stat().st_mtime_ns for f in jobs.glob("*.parquet")}
    assert 3 <= len(before) < 12, "the sweep finished before it could be killed"
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert f"12 jobs: {len(before)} already done, {12 - len(before)} ran, 0 failed" in r.stdout, r.stdout
    after = {f.name: f.stat().st_mtime_ns for f in jobs.glob("*.parquet")}
    assert all(after[k] == v for k, v in before.items()), "a finished job ran again"
    assert len(after) == 12 and not list(jobs.glob("*.tmp"))
    # The same sweep, never interrupted.
    spec2 = tmp_path / "sweep2.toml"
    write_sweep(spec2, tmp_path / "out2")
    r = subprocess.run(cmd[:3] + [str(spec2), "--quiet"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    a = pd.read_parquet(out / "results.parquet")
    b = pd.read_parquet(tmp_path / "out2" / "results.parquet")
    same_results(a, b)


def test_bad_entries_are_refused_before_any_job(tmp_path: Path) -> None:
    out = tmp_path / "out"
    cases = [
        (dict(archs=["cache", "no-such-arch"]), "no-such-arch"),
        (dict(archs=["cache:mode=sideways"]), "sideways"),
        (dict(knobs={"colector": ["lru"]}), "colector"),
        (dict(traces=[MSR, tmp_path / "missing.csv"]), "missing.csv"),
        (dict(model={"timming": "none"}), "timming"),
        (dict(ssd=["10%", "150%"]), "150%"),
    ]
    for change, named in cases:
        args = dict(traces=[MSR], archs=["cache"], ssd=["10%"], out=out)
        args.update(change)
        with pytest.raises(tierwise.SpecError, match=named):
            tierwise.sweep(**args)
        assert not out.exists(), f"{named}: a job started"


def test_a_sweep_file_names_an_unknown_key(tmp_path: Path, cli: Path) -> None:
    spec = tmp_path / "s.toml"
    spec.write_text('traces = ["x"]\narchs = ["cache"]\nssd = ["10%"]\nworkerz = 3\n')
    env = {**os.environ, "TIERWISE_PYTHON": sys.executable}
    r = subprocess.run([str(cli), "sweep", str(spec)], capture_output=True, text=True, env=env)
    assert r.returncode == 2 and "unknown key `workerz`" in r.stderr, r.stderr
    # The CLI runs the same module: a good file runs and reports what it did.
    write_sweep(spec, tmp_path / "out", n_sizes=2)
    r = subprocess.run([str(cli), "sweep", str(spec), "--quiet"], capture_output=True, text=True, env=env)
    assert r.returncode == 0 and "4 jobs: 0 already done, 4 ran, 0 failed" in r.stdout, r.stdout + r.stderr
    assert "scheduling overhead" in r.stdout


def test_results_of_another_version_are_refused(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "sweep-meta.json").write_text(json.dumps({"tierwise": "0.0.1", "format": 1}))
    with pytest.raises(tierwise.SweepError, match="results of tierwise 0.0.1"):
        tierwise.sweep([MSR], ["cache"], ["10%"], out=out, executor="processes")
    assert not (out / "jobs").exists()


def test_a_sweep_after_a_change_of_build_recomputes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib

    sweep_module = importlib.import_module("tierwise.sweep")

    out = tmp_path / "out"
    args = dict(traces=[MSR], archs=["cache", "cache:collector=arc"], ssd=["10%"], out=out, executor="processes")
    first = tierwise.sweep(**args)
    assert first.attrs["sweep"].ran == 2
    real = sweep_module.build_stamp()
    assert (first["build_stamp"] == real["stamp"]).all()
    assert (first["build"] == tierwise._native.build()["describe"]).all(), "every row names the build"
    assert tierwise._native.build()["sources_sha256"][:12] in first.loc[0, "build"]
    assert load(out / "sweep.json")["build"] == real["describe"]
    # Another build (client and workers agree on it): nothing is reused.
    monkeypatch.setattr(sweep_module, "_BUILD", {"stamp": "another-build", "describe": "another build"})
    monkeypatch.setenv("TIERWISE_SWEEP_WORKER_BUILD", "another-build")
    second = tierwise.sweep(**args)
    s = second.attrs["sweep"]
    assert (s.cached, s.ran) == (0, 2), "a result of another build was reused"
    assert (second["build_stamp"] == "another-build").all()
    assert set(second["key"]).isdisjoint(first["key"])
    # Back on the first build: its results are still there.
    monkeypatch.setattr(sweep_module, "_BUILD", {})
    monkeypatch.delenv("TIERWISE_SWEEP_WORKER_BUILD")
    third = tierwise.sweep(**args)
    assert (third.attrs["sweep"].cached, third.attrs["sweep"].ran) == (2, 0)
    same_results(first, third)


def test_a_worker_of_another_build_is_a_failure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIERWISE_SWEEP_WORKER_BUILD", "a-stale-worker")
    with pytest.raises(tierwise.SweepError, match="another build of tierwise") as e:
        tierwise.sweep([MSR], ["cache"], ["10%"], out=tmp_path / "out", executor="processes")
    assert "a-stale-worker" in e.value.failures[0]["error"]
    assert not list((tmp_path / "out" / "jobs").glob("*.parquet")), "its result was kept"


@pytest.mark.parametrize("executor", ["processes", "dask"])
def test_a_dead_worker_is_retried(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, executor: str) -> None:
    if executor == "dask":
        need("dask.distributed")
    marks = tmp_path / "marks"
    marks.mkdir()
    # Every job's first attempt kills its worker process (os._exit), as an OOM kill would.
    monkeypatch.setenv("TIERWISE_SWEEP_KILL_WORKER_ONCE", str(marks))
    df = tierwise.sweep([MSR], ["cache", "cache:collector=arc"], ["10%"], out=tmp_path / "out", executor=executor, workers=2, retries=3)
    assert len(df) == 2 and len(list(marks.iterdir())) == 2
    monkeypatch.delenv("TIERWISE_SWEEP_KILL_WORKER_ONCE")
    clean = tierwise.sweep([MSR], ["cache", "cache:collector=arc"], ["10%"], out=tmp_path / "clean", executor="processes")
    same_results(df, clean)


def test_failures_are_reported_not_dropped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    monkeypatch.setenv("TIERWISE_SWEEP_KILL_WORKER_ONCE", str(marks))
    with pytest.raises(tierwise.SweepError, match="1 of 1 jobs failed") as e:
        tierwise.sweep([MSR], ["cache"], ["10%"], out=tmp_path / "out", executor="processes", retries=0)
    assert e.value.failures[0]["spec"] == "cache" and "BrokenProcessPool" in e.value.failures[0]["error"]
    assert load(tmp_path / "out" / "failures.json")[0]["spec"] == "cache"


def test_traces_can_be_shipped_to_workers(tmp_path: Path) -> None:
    shipped = tierwise.sweep([SYSTOR], ["cache"], ["10%"], out=tmp_path / "a", executor="processes", ship_traces=True)
    shared = tierwise.sweep([SYSTOR], ["cache"], ["10%"], out=tmp_path / "b", executor="processes")
    same_results(shipped, shared)
    assert shipped.loc[0, "trace"] == str(SYSTOR)


def test_a_sweep_row_is_the_compare_row(tmp_path: Path) -> None:
    """One job of a sweep is one `tierwise sim`, and "10%" is the same SSD bytes as in
    `compare`, also for an architecture with its own extent size (GreenDM's es=64KiB)."""
    archs = ["cache:mode=write-back", "greendm-tiering"]
    sw = tierwise.sweep([MSR], archs, ["10%", "25%"], out=tmp_path / "s", executor="processes", model={"timing": "closed:32"})
    cmp = tierwise.compare(MSR, archs=archs, ssd=["10%", "25%"], timing="closed:32")
    for spec in archs:
        for size in ["10%", "25%"]:
            a = sw[(sw.spec == spec) & (sw.ssd == size)].iloc[0]
            b = cmp[(cmp.arch == spec) & (cmp.size_label == size)].iloc[0]
            assert (a.ssd_bytes, a.iops, a["latency.p99_us"]) == (b.ssd_bytes, b.iops, b["latency.p99_us"]), (spec, size)


def test_replicates_of_a_seeded_workload_give_confidence_intervals(tmp_path: Path) -> None:
    workload = "zipf:requests=6000,objects=2000,alpha=0.9,write_fraction=0.2,rate=500"
    out = tmp_path / "out"
    args = dict(
        traces=[workload], archs=["hdd-only", "cache:mode=write-back"], ssd=["10%", "25%"], out=out,
        executor="processes", workers=2, replicates=5, seed=7, model={"timing": "closed:8"}, progress=False,
    )
    df = tierwise.sweep(**args)
    assert len(df) == 20 and sorted(set(df["seed"])) == [7, 8, 9, 10, 11]
    assert (df["workload"] == workload).all() and sorted(set(df["replicate"])) == [0, 1, 2, 3, 4]
    s = df.attrs["summary"]
    assert len(s) == 4 and (s["n"] == 5).all()
    # The interval is Student's t over the five replicates: t(0.975, 4) = 2.7764.
    for _, row in s.iterrows():
        runs = df[(df["spec"] == row["spec"]) & (df["ssd"] == row["ssd"])]["iops"]
        half = 2.7764451 * runs.std(ddof=1) / len(runs) ** 0.5
        assert row["iops.mean"] == pytest.approx(runs.mean())
        assert row["iops.ci_high"] - row["iops.mean"] == pytest.approx(half, rel=1e-6)
        assert row["iops.ci_low"] < row["iops.mean"] < row["iops.ci_high"], "seeds that gave identical runs"
    cached = s[s["spec"] == "cache:mode=write-back"].set_index("ssd")
    assert cached.loc["25%", "miss_ratio.ci_high"] < cached.loc["10%", "miss_ratio.ci_low"], "a larger cache misses less"
    assert pd.read_parquet(out / "summary.parquet").shape == s.shape
    aggregates = load(out / "sweep.json")["aggregates"]
    assert len(aggregates) == 4 and aggregates[0]["metrics"]["iops"]["ci_low"] is not None
    # The same seeds write the same traces: a rerun reuses every job.
    again = tierwise.sweep(**args)
    assert (again.attrs["sweep"].cached, again.attrs["sweep"].ran) == (20, 0)
    # The report: a section per workload with mean ± half-width cells and error bars.
    html = tmp_path / "r.html"
    tierwise.report([out], html)
    page = html.read_text()
    assert "(replicates)" in page and " ± " in page and "95 % confidence interval" in page
    assert page.count("<svg") >= 3 and page.count("zipf-") < 10, "one comparison per replicate was drawn"


def test_replicates_need_a_seeded_workload(tmp_path: Path) -> None:
    with pytest.raises(tierwise.SpecError, match="replicates need a seeded workload"):
        tierwise.sweep([MSR], ["cache"], ["10%"], out=tmp_path / "out", replicates=3)
    with pytest.raises(tierwise.SpecError, match="alfa"):
        tierwise.sweep(["zipf:alfa=1"], ["cache"], ["10%"], out=tmp_path / "out2", replicates=3)
    assert not (tmp_path / "out").exists() and not (tmp_path / "out2").exists()


def test_a_script_without_a_main_guard_is_told_what_to_do(tmp_path: Path) -> None:
    script = tmp_path / "unguarded.py"
    script.write_text(
        "import tierwise\n"
        f"tierwise.sweep([{str(MSR)!r}], ['cache'], ['10%'], out={str(tmp_path / 'out')!r}, "
        "executor='processes', workers=1, retries=0, progress=False)\n"
    )
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert r.returncode != 0
    assert 'under `if __name__ == "__main__":`' in r.stderr and "every worker process died" in r.stderr, r.stderr


def test_a_numeric_knob_gets_a_response_curve(tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    df = tierwise.sweep(
        [MSR],
        ["bcache-like:cache-mode=writeback", "dm-cache-smq-like"],
        ["10%"],
        knobs={"writeback-percent": [5, 10, 20, 40], "promote-hits": [1, 4, 16]},
        out=out,
        executor="processes",
        workers=1,
        model={"timing": "closed:8"},
    )
    assert len(df) == 4 + 3
    html = tmp_path / "r.html"
    tierwise.report([out], html)
    page = html.read_text()
    for knob in ("writeback-percent", "promote-hits"):
        section = page.split(f"Sweep — {knob} on msr_hm_0.excerpt1000.csv</h2>")[1].split("</section>")[0]
        assert section.count("<svg") == 1 and f"Throughput against {knob}" in section, knob
    # One line per spec without the knob: the curve of bcache-like's write-back share.
    curve = page.split("Sweep — writeback-percent on msr_hm_0.excerpt1000.csv</h2>")[1].split("</section>")[0]
    assert "bcache-like:cache-mode=writeback @ 10%" in curve and curve.count("<tr>") >= 5


def test_model_options_are_sweep_axes(tmp_path: Path) -> None:
    """A model option given as a list is an axis: every value runs, rows carry it among their
    knobs, each timing × queue is its own comparison, and a numeric axis gets its curve."""
    out = tmp_path / "sweep"
    df = tierwise.sweep(
        [MSR],
        ["hdd-only", "cache:mode=write-back"],
        ["10%"],
        out=out,
        executor="processes",
        workers=1,
        model={"timing": ["closed:1", "closed:4", "closed:16"], "hdd_queue": ["mq-deadline", "fifo"]},
    )
    assert len(df) == 2 * 3 * 2 and df["key"].is_unique
    knobs = [json.loads(k) for k in df["knobs"]]
    assert {(k["model.timing"], k["model.hdd_queue"]) for k in knobs} == {
        (t, q) for t in ("closed:1", "closed:4", "closed:16") for q in ("mq-deadline", "fifo")
    }
    # The options reached the simulator: a deeper queue gives the HDD more to reorder.
    hdd = df[df["spec"] == "hdd-only"]
    by_variant = {tuple(sorted(json.loads(k).values())): v for k, v in zip(hdd["knobs"], hdd["iops"])}
    iops = {t: by_variant[tuple(sorted([t, "mq-deadline"]))] for t in ("closed:1", "closed:16")}
    assert iops["closed:1"] < iops["closed:16"], iops
    # A rerun reuses every variant; a new value of an axis adds only its own jobs.
    again = tierwise.sweep(
        [MSR], ["hdd-only", "cache:mode=write-back"], ["10%"], out=out, executor="processes", workers=1,
        model={"timing": ["closed:1", "closed:4", "closed:16", "closed:32"], "hdd_queue": ["mq-deadline", "fifo"]},
    )
    assert (again.attrs["sweep"].cached, again.attrs["sweep"].ran) == (12, 4)
    html = tmp_path / "r.html"
    tierwise.report([out], html)
    page = html.read_text()
    assert "Sweep — msr_hm_0.excerpt1000.csv (hdd_queue=fifo, timing=closed:4)</h2>" in page
    curve = page.split("Sweep — model.timing on msr_hm_0.excerpt1000.csv</h2>")[1].split("</section>")[0]
    assert "queue depth (timing closed:N)" in curve and "hdd-only [hdd_queue=fifo] @ 10%" in curve
    with pytest.raises(tierwise.SpecError, match="model.timing=bogus"):
        tierwise.sweep([MSR], ["hdd-only"], ["10%"], out=tmp_path / "bad", model={"timing": ["closed:1", "bogus"]})
