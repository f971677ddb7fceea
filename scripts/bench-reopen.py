#!/usr/bin/env python3
"""Per-file costs of `tierwise mount` that the data benchmarks miss, for one or more tierwise
binaries mounted in turn, alternating over rounds so that all see the same machine:

- open+read+close of a 3 KB file (200 files, 50 passes): what dropping cached pages at an
  open costs;
- write a 3 KB temporary file and rename it over a name (2,000 times): the editor's way to save.

    scripts/bench-reopen.py [--rounds 5] [--policy hdd-only] [--mount-flag=--no-passthrough ...] BIN [BIN...]

hdd-only by default: no background moves, so the figures are the request path's. Needs root
and /dev/fuse. Medians of the rounds, in microseconds per operation.
"""
import argparse
import os
import shutil
import subprocess
import tempfile
import time


def reopen(m):
    for i in range(200):
        with open(f"{m}/f{i}", "wb") as f:
            f.write(b"x" * 3000)
    t = time.perf_counter()
    for _ in range(50):
        for i in range(200):
            with open(f"{m}/f{i}", "rb") as f:
                f.read()
    return (time.perf_counter() - t) * 1e6 / 10000


def rename_over(m):
    p = f"{m}/saved"
    with open(p, "wb") as f:
        f.write(b"x" * 3000)
    t = time.perf_counter()
    for _ in range(2000):
        with open(p + ".tmp", "wb") as f:
            f.write(b"y" * 3000)
        os.replace(p + ".tmp", p)
    return (time.perf_counter() - t) * 1e6 / 2000


def run(binary, policy, flags):
    work = tempfile.mkdtemp(prefix="tw-bench-reopen-")
    try:
        for sub in ("ssd", "hdd", "m"):
            os.mkdir(os.path.join(work, sub))
        m = os.path.join(work, "m")
        subprocess.run([binary, "mount", "--ssd", f"{work}/ssd", "--hdd", f"{work}/hdd", m, "--policy", policy,
                        *flags], check=True, stdout=subprocess.DEVNULL)
        try:
            return {"open+read+close": reopen(m), "write temp + rename over": rename_over(m)}
        finally:
            subprocess.run([binary, "umount", m], check=True, stdout=subprocess.DEVNULL)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("binaries", nargs="+")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--policy", default="hdd-only")
    ap.add_argument("--mount-flag", action="append", default=[],
                    help="an extra flag for `tierwise mount` (repeatable; write --mount-flag=--no-passthrough)")
    a = ap.parse_args()
    results = {b: [] for b in a.binaries}
    for r in range(a.rounds):
        for b in a.binaries:
            res = run(b, a.policy, a.mount_flag)
            results[b].append(res)
            print(f"round {r + 1} {b}: " + ", ".join(f"{k} {v:.1f} us" for k, v in res.items()), flush=True)
    print(f"\nmedians over {a.rounds} rounds (us per operation):")
    for k in results[a.binaries[0]][0]:
        base = sorted(x[k] for x in results[a.binaries[0]])[a.rounds // 2]
        cells = []
        for b in a.binaries:
            v = sorted(x[k] for x in results[b])[a.rounds // 2]
            cells.append(f"{b}: {v:.1f}" + ("" if b == a.binaries[0] else f" ({v / base:.2f}x)"))
        print(f"  {k:<26} " + "   ".join(cells))


if __name__ == "__main__":
    main()
