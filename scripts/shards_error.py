#!/usr/bin/env python3
"""SHARDS error table: every bundled trace × collector, the exact curve once and a sampled
curve per seed, and the error of each sample against the exact curve (max and mean |Δ miss
ratio| over the sizes). Prints a Markdown table (docs/MODELS.md).

Usage: scripts/shards_error.py [TIERWISE_BINARY] [--rate 0.01] [--seeds 5] [--points 16] [--collectors lru,arc]
       [--traces msr,systor]
"""

import argparse
import json
import subprocess
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TRACES = sorted(p for p in (ROOT / "data/traces").iterdir() if not p.name.endswith(".md"))


def curve(binary: str, trace: Path, collector: str, rate: float, seed: int, points: int, tmp: Path) -> dict:
    out = tmp / f"{trace.name}-{collector}-{rate}-{seed}"
    args = [binary, "-q", "mrc", str(trace), "--collector", collector, "--sample", str(rate), "--seed", str(seed),
            "--points", str(points), "--out", str(out)]
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode != 0 and "no size on the curve" in r.stderr:
        return None
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed:\n{r.stderr}")
    return json.loads((out / "mrc.json").read_text())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("binary", nargs="?", default=str(ROOT / "target/release/tierwise"))
    ap.add_argument("--rate", type=float, default=0.01)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--points", type=int, default=16)
    ap.add_argument("--collectors", default="lru,arc,s3fifo,fifo,clock,lfu")
    ap.add_argument("--traces", default="", help="comma-separated parts of bundled trace names (default: every one)")
    a = ap.parse_args()
    traces = [t for t in TRACES if not a.traces or any(part in t.name for part in a.traces.split(","))]
    print(f"| trace | objects | sampled objects | sizes on the curve | collector | max abs error: mean over {a.seeds} seeds | worst seed | mean abs error |")
    print("|---|---:|---:|---:|---|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for trace in traces:
            for collector in a.collectors.split(","):
                exact = curve(a.binary, trace, collector, 1.0, 1, a.points, tmp)
                maxes, means, sampled, kept = [], [], [], 0
                for seed in range(1, a.seeds + 1):
                    s = curve(a.binary, trace, collector, a.rate, seed, a.points, tmp)
                    if s is None:
                        # The sample is smaller than the policy needs at every size asked.
                        continue
                    # Over the sizes the sample can tell (its scaled cache holds an object or more).
                    by_size = {q["size_bytes"]: q["miss_ratio"] for q in exact["points"]}
                    diffs = [abs(p["miss_ratio"] - by_size[p["size_bytes"]]) for p in s["points"]]
                    maxes.append(max(diffs))
                    means.append(sum(diffs) / len(diffs))
                    sampled.append(s["sampling"]["sampled_objects"])
                    kept = len(s["points"])
                if not maxes:
                    print(f"| {trace.name} | {exact['objects']:,} | – | 0 of {len(exact['points'])} | {collector} | – | – | – |")
                    continue
                print(
                    f"| {trace.name} | {exact['objects']:,} | {sum(sampled) / len(sampled):,.0f} | {kept} of {len(exact['points'])} | {collector} | "
                    f"{sum(maxes) / len(maxes):.4f} | {max(maxes):.4f} | {sum(means) / len(means):.4f} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
