#!/usr/bin/env python3
"""Speed of the researcher's workbench, each figure a ratio measured in one run:

1. the Python API against the CLI on the same simulation (target: at most 5 % slower);
2. a sweep on a 2-worker Dask LocalCluster against 1 worker (target: at least 1.7x faster),
   with the scheduling overhead per job.

Usage: target/py-venv/bin/python scripts/bench-workbench.py [--reps 7] [--json out.json]
(needs `pip install './python[dask]'` and `cargo build --release -p tierwise`)."""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import tierwise

REPO = Path(__file__).resolve().parents[1]
CLI = REPO / "target" / "release" / "tierwise"
TRACES = REPO / "data" / "traces"
JOBS = [
    (TRACES / "arc_OLTP.lis.zst", "cache:mode=write-back,collector=arc", "10%"),
    (TRACES / "cloudphysics_libcachesim.sample.vscsi.gz", "dm-cache-smq-like", "10%"),
]


def api_overhead(reps: int) -> list[dict]:
    rows = []
    for trace, arch, ssd in JOBS:
        cli_s, py_s = [], []
        with tempfile.TemporaryDirectory() as d:
            for _ in range(reps):  # alternate, so drifting machine load hits both alike
                t = time.perf_counter()
                subprocess.run([CLI, "-q", "sim", trace, "--arch", arch, "--ssd", ssd, "--timing", "closed:32", "--json", f"{d}/r.json"], check=True, capture_output=True)
                cli_s.append(time.perf_counter() - t)
                t = time.perf_counter()
                tierwise.sim(trace, arch, ssd, timing="closed:32", progress=False)
                py_s.append(time.perf_counter() - t)
        c, p = statistics.median(cli_s), statistics.median(py_s)
        rows.append({"trace": trace.name, "arch": arch, "cli_s": c, "python_s": p, "ratio": p / c})
        print(f"  {trace.name:<45} CLI {c:.3f} s  Python {p:.3f} s  Python/CLI {p / c:.3f}")
    return rows


TRACES_SWEPT = [JOBS[0][0], JOBS[1][0]]
ARCHS = ["cache:mode=write-through", "cache:mode=write-back", "bcache-like", "dm-cache-smq-like", "open-cas-like"]
SIZES = ["2%", "5%", "10%", "25%", "50%"]


def cli_ceiling() -> dict:
    """The same 50 simulations as CLI processes, one and two at a time: what two cores of this
    machine give two independent simulations, without Python or Dask."""
    from concurrent.futures import ThreadPoolExecutor

    cmds = [
        [CLI, "-q", "sim", t, "--arch", a, "--ssd", s, "--timing", "closed:32"]
        for t in TRACES_SWEPT
        for a in ARCHS
        for s in SIZES
    ]
    out = {}
    for n in (1, 2):
        t = time.perf_counter()
        with ThreadPoolExecutor(n) as pool:
            list(pool.map(lambda c: subprocess.run(c, check=True, capture_output=True), cmds))
        out[n] = time.perf_counter() - t
    out["speedup"] = out[1] / out[2]
    print(f"  CLI processes, no Dask: 1 at a time {out[1]:.2f} s, 2 at a time {out[2]:.2f} s: {out['speedup']:.2f}x (the machine's ceiling)")
    return out


def sweep_scaling() -> dict:
    traces, archs, ssd = TRACES_SWEPT, ARCHS, SIZES
    out = {}
    for workers in (1, 2):
        d = Path(tempfile.mkdtemp(prefix=f"tierwise-bench-{workers}-"))
        t = time.perf_counter()
        df = tierwise.sweep(traces, archs, ssd, out=d, executor="dask", workers=workers, model={"timing": "closed:32"}, progress=False)
        wall = time.perf_counter() - t
        s = df.attrs["sweep"]
        out[workers] = {"jobs": len(df), "wall_s": wall, "compute_s": s.compute_s, "overhead_per_job_s": s.overhead_per_job_s}
        print(f"  {workers} worker(s): {len(df)} jobs in {wall:.2f} s (simulating {s.compute_s:.2f} s, overhead {s.overhead_per_job_s * 1e3:.0f} ms/job)")
        shutil.rmtree(d)
    out["speedup"] = out[1]["wall_s"] / out[2]["wall_s"]
    print(f"  speed-up 2 workers / 1: {out['speedup']:.2f}x")
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--json")
    a = ap.parse_args()
    print("Python API against the CLI (median of alternating runs):")
    api = api_overhead(a.reps)
    print("Sweep on a Dask LocalCluster:")
    sw = sweep_scaling()
    ceiling = cli_ceiling()
    if a.json:
        Path(a.json).write_text(json.dumps({"api": api, "sweep": sw, "cli_ceiling": ceiling}, indent=2))


if __name__ == "__main__":
    main()
