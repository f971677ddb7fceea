#!/usr/bin/env python3
"""Differential test of tierwise's collectors against libCacheSim (PyPI `libcachesim`).

Every bundled trace is converted once to libCacheSim's oracleGeneral format by
`tierwise trace convert` (libCacheSim-compatible mapping: one request = one object, writes as
reads, empty requests dropped). Then LRU, FIFO, ARC, LFU, CLOCK and S3-FIFO run on that same request
stream in both simulators, in object mode (every object of size 1) and in byte mode, at
several cache sizes; their miss counts must be equal. Belady's MIN (`tierwise mrc --belady`,
offline) is checked the same way against libCacheSim's `Belady`.

ARC in byte mode is reported but excepted: libCacheSim adapts ARC's target p by
max(|B2|/|B1|, 1) *bytes* per ghost hit, so in byte mode p barely moves; tierwise scales the
paper's step by the object's size (docs/MODELS.md). Python models of both rules reproduce
the gap (MSR sample, 80 KB: 907 vs 884 misses; libCacheSim 904, tierwise 881).

Usage: scripts/libcachesim_diff.py [TIERWISE_BINARY]  (exit status 1 on any other difference)
"""

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import libcachesim as lcs

ROOT = Path(__file__).resolve().parent.parent
TRACES = sorted(p for p in (ROOT / "data/traces").iterdir() if not p.name.endswith(".md"))
COLLECTORS = {
    "lru": "LRU", "fifo": "FIFO", "arc": "ARC", "lfu": "LFU", "clock": "Clock", "s3fifo": "S3FIFO", "belady": "Belady",
}
SHARES = (0.01, 0.1, 0.5)


def tierwise(binary, *args):
    out = subprocess.run([binary, *args], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"tierwise {' '.join(args)} failed:\n{out.stderr}")
    return out.stdout


def lcs_misses(og, collector, size, ignore_size):
    params = lcs.ReaderInitParam()
    params.ignore_obj_size = ignore_size
    reader = lcs.TraceReader(str(og), trace_type=lcs.TraceType.ORACLE_GENERAL_TRACE, reader_init_params=params)
    cache = getattr(lcs, COLLECTORS[collector])(cache_size=size)
    ratio, _ = cache.process_trace(reader)
    return ratio


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else str(ROOT / "target/release/tierwise")
    failures, checks, excepted = [], 0, 0
    with tempfile.TemporaryDirectory() as tmp:
        for trace in TRACES:
            og = Path(tmp) / (trace.name + ".oracleGeneral")
            tierwise(binary, "trace", "convert", str(trace), "-o", str(og), "--objects", "lcs")
            stat = json.loads(tierwise(binary, "trace", "stat", str(og), "--objects", "lcs", "--json"))
            n, objects, footprint = stat["requests"], stat["objects"], stat["footprint_bytes"]
            for ignore_size, unit_total, mode in ((True, objects, "lcs:ignore-size"), (False, footprint, "lcs")):
                for share in SHARES:
                    size = max(int(unit_total * share), 1)
                    for collector in COLLECTORS:
                        if collector == "s3fifo" and int(size * 0.1) == 0:
                            # libCacheSim aborts the process on an empty small queue.
                            continue
                        if collector == "belady":
                            # Offline: the reference line of `tierwise mrc`, not a collector.
                            out = Path(tmp) / "mrc"
                            tierwise(binary, "-q", "mrc", str(og), "--objects", mode, "--sizes", str(size), "--belady",
                                     "--out", str(out))
                            ours = json.loads((out / "mrc.json").read_text())["belady"][0]["misses"]
                        else:
                            report = Path(tmp) / "r.json"
                            tierwise(
                                binary, "sim", str(og), "--arch", f"cache:mode=read-only,collector={collector}",
                                "--ssd", str(size), "--objects", mode, "--timing", "none", "--json", str(report),
                            )
                            ours = json.loads(report.read_text())["request_misses"]
                        theirs = round(lcs_misses(og, collector, size, ignore_size) * n)
                        checks += 1
                        line = f"{trace.name:45} {mode:15} {size:>12} {collector:5} ours {ours:>8} libCacheSim {theirs:>8}"
                        if ours != theirs and collector == "arc" and not ignore_size:
                            excepted += 1
                            print("excepted (byte-mode ARC adaptation) " + line, flush=True)
                        elif ours != theirs:
                            failures.append(line)
                            print("DIFF " + line, flush=True)
                        else:
                            print("same " + line, flush=True)
    print(f"{checks - len(failures) - excepted} of {checks} equal, {excepted} excepted (byte-mode ARC), {len(failures)} different")
    if failures:
        sys.exit(1)


if __name__ == "__main__":
    main()
