#!/usr/bin/env python3
"""Hit-counting speed of tierwise's collectors against libCacheSim (PyPI `libcachesim`), on the
same oracleGeneral trace, alternating the two, best of N runs each. Both read the binary
trace; libCacheSim's time is its `process_trace` call, tierwise's is its own wall time for the
simulation (`wall_s` in its JSON report, trace reading included).

Usage: scripts/bench-libcachesim.py TRACE.oracleGeneral [TIERWISE_BINARY] [RUNS]
"""

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import libcachesim as lcs

COLLECTORS = {"lru": "LRU", "fifo": "FIFO", "arc": "ARC", "lfu": "LFU", "clock": "Clock"}


def main():
    og = sys.argv[1]
    binary = sys.argv[2] if len(sys.argv) > 2 else "target/release/tierwise"
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    with tempfile.TemporaryDirectory() as tmp:
        stat = json.loads(subprocess.check_output([binary, "trace", "stat", og, "--objects", "lcs", "--json"]))
        n, objects = stat["requests"], stat["objects"]
        size = max(objects // 10, 1)
        print(f"{og}: {n} requests, {objects} objects; cache of {size} objects (10 %), best of {runs}")
        print(f"{'collector':10} {'tierwise req/s':>15} {'libCacheSim req/s':>18} {'ratio':>6}  misses equal")
        for name, cls in COLLECTORS.items():
            ours_best, theirs_best, ours_m, theirs_m = 0.0, 0.0, None, None
            for _ in range(runs):
                report = Path(tmp) / "r.json"
                subprocess.run(
                    [binary, "sim", og, "--arch", f"cache:mode=read-only,collector={name}", "--ssd", str(size),
                     "--objects", "lcs:ignore-size", "--timing", "none", "--json", str(report)],
                    check=True, capture_output=True,
                )
                r = json.loads(report.read_text())
                ours_best = max(ours_best, n / r["wall_s"])
                ours_m = r["request_misses"]
                params = lcs.ReaderInitParam()
                params.ignore_obj_size = True
                reader = lcs.TraceReader(og, trace_type=lcs.TraceType.ORACLE_GENERAL_TRACE, reader_init_params=params)
                cache = getattr(lcs, cls)(cache_size=size)
                t0 = time.perf_counter()
                ratio, _ = cache.process_trace(reader)
                theirs_best = max(theirs_best, n / (time.perf_counter() - t0))
                theirs_m = round(ratio * n)
            print(f"{name:10} {ours_best:>15,.0f} {theirs_best:>18,.0f} {ours_best / theirs_best:>6.2f}  {ours_m == theirs_m}")


if __name__ == "__main__":
    main()
