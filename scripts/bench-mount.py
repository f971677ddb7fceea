#!/usr/bin/env python3
"""fio on tierwise mounts and on mergerfs, against the plain backing directory, in one run.

Every tier and the plain directory are tmpfs, so each FUSE round trip shows (the harshest
baseline). Each round measures the plain directory and then every configuration, so a ratio
compares figures taken seconds apart on this shared machine; the table gives the median ratio
of --repeat rounds. Then it times migrations (pins move files synchronously) in MB/s.

Usage: scripts/bench-mount.py [--policy SPEC] [--seconds 4] [--repeat 3] [--only a,b] [--out DIR]
Needs root, /dev/fuse, fio and mergerfs (apt-get install fio mergerfs).
"""

import argparse
import csv
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BIN = REPO / "target" / "release" / "tierwise"

# name, fio --rw, block size, extra fio arguments
JOBS = [
    ("seq-read 1M", "read", "1m", []),
    ("seq-write 1M", "write", "1m", []),
    ("rand-read 4K", "randread", "4k", []),
    ("rand-write 4K", "randwrite", "4k", []),
    ("rand-read 4K x4 jobs", "randread", "4k", ["--numjobs=4"]),
]


def configs(policy):
    """name -> (kind, extra arguments). `tierwise` is the mount with default options (the
    default policy, on-demand caching, and the default data path, passthrough)."""
    return {
        "tierwise": ("tierwise", []),
        f"tierwise {policy}": ("tierwise", ["--policy", policy]),
        "tierwise --no-passthrough": ("tierwise", ["--no-passthrough"]),
        "tierwise --direct-io": ("tierwise", ["--no-passthrough", "--direct-io"]),
        "tierwise --kernel-cache": ("tierwise", ["--no-passthrough", "--kernel-cache"]),
        "mergerfs": ("mergerfs", ["cache.files=off"]),
        "mergerfs cache": ("mergerfs", ["cache.files=auto-full", "cache.writeback=true"]),
    }


def sh(*cmd, **kw):
    return subprocess.run(cmd, check=True, **kw)


def fio(directory, rw, bs, extra, seconds):
    """Bytes per second of one fio job (all its threads) in `directory`."""
    out = subprocess.run(
        ["fio", f"--name=bench-{rw}-{bs}", f"--directory={directory}", f"--rw={rw}", f"--bs={bs}",
         "--size=256m", f"--runtime={seconds}", "--time_based", "--ioengine=psync",
         # Page-aligned buffers: an unaligned buffer makes the copy itself 3-4x slower, on plain
         # and mounted files alike, and fio's default alignment varies between runs.
         "--iomem_align=4096", "--group_reporting", "--output-format=json", *extra],
        check=True, capture_output=True, text=True).stdout
    j = json.loads(out[out.index("{"):])["jobs"][0]
    return j["read"]["bw_bytes"] + j["write"]["bw_bytes"]


class Setup:
    """tmpfs tiers and a plain tmpfs directory under one temporary root."""

    def __init__(self, size="3g"):
        self.root = Path(tempfile.mkdtemp(prefix="tierwise-bench-"))
        self.tmpfs = []
        for d in ("ssd", "hdd", "plain"):
            p = self.root / d
            p.mkdir()
            sh("mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(p))
            self.tmpfs.append(p)
        self.mnt = self.root / "mnt"
        self.mnt.mkdir()

    def clear_tiers(self):
        for d in ("ssd", "hdd"):
            for e in (self.root / d).iterdir():
                if e.is_dir():
                    shutil.rmtree(e)
                else:
                    e.unlink()

    def mount(self, kind, extra):
        self.clear_tiers()
        if kind == "tierwise":
            sh(str(BIN), "mount", "--ssd", str(self.root / "ssd"), "--hdd", str(self.root / "hdd"), str(self.mnt),
               "--ssd-quota", "2GiB", *extra, stdout=subprocess.DEVNULL)
        else:
            opts = ",".join(["category.create=ff", "minfreespace=16M", "allow_other", *extra])
            sh("mergerfs", "-o", opts, f"{self.root / 'ssd'}:{self.root / 'hdd'}", str(self.mnt))

    def umount(self):
        for _ in range(50):
            if subprocess.run(["umount", str(self.mnt)], capture_output=True).returncode == 0:
                return
            time.sleep(0.1)
        subprocess.run(["umount", "-l", str(self.mnt)], capture_output=True)

    def close(self):
        self.umount()
        for p in self.tmpfs:
            subprocess.run(["umount", "-l", str(p)])
        shutil.rmtree(self.root, ignore_errors=True)


def create_files(directory, n=2000):
    """Seconds to create `n` files of 4 KiB in a new directory (open, write, close each)."""
    d = Path(directory) / f"creates-{time.monotonic_ns()}"
    d.mkdir()
    block = b"x" * 4096
    t = time.perf_counter()
    for i in range(n):
        with open(d / f"f{i}", "wb") as f:
            f.write(block)
    elapsed = time.perf_counter() - t
    shutil.rmtree(d)
    return elapsed


def migration(setup, files=8, size_mb=64):
    """Pins `files` files of `size_mb` MiB to the SSD and back; MB/s of each direction."""
    setup.mount("tierwise", ["--pin-reserve", "50%", "--policy", "dynamic-hot-dst:sieve=0"])
    names = []
    for i in range(files):
        p = setup.mnt / f"m{i}"
        with open(p, "wb") as f:
            f.write(os.urandom(1 << 20) * size_mb)
        names.append(str(p))
    out = {}
    for tier in ("ssd", "hdd"):
        t = time.perf_counter()
        sh(str(BIN), "pin", tier, *names, stdout=subprocess.DEVNULL)
        out[f"to {tier}"] = files * size_mb * (1 << 20) / (time.perf_counter() - t)
    setup.umount()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--policy", default="dynamic-hot-dst:sieve=0",
                    help="a second tierwise policy, measured beside the default one [%(default)s]")
    ap.add_argument("--seconds", type=int, default=4, help="each fio job runs this long [%(default)s]")
    ap.add_argument("--repeat", type=int, default=3, help="rounds; the median ratio is reported [%(default)s]")
    ap.add_argument("--only", help="comma-separated configuration names")
    ap.add_argument("--out", default=str(REPO / "out" / "bench-mount"), help="JSON and CSV prefix [%(default)s]")
    a = ap.parse_args()
    for tool in ("fio", "mergerfs"):
        if not shutil.which(tool):
            sys.exit(f"{tool} is not installed: apt-get install {tool}")
    sh("cargo", "build", "--release", "-q", "-p", "tierwise", cwd=REPO)
    cfgs = configs(a.policy)
    if a.only:
        cfgs = {k: v for k, v in cfgs.items() if k in a.only.split(",")}
    setup = Setup()
    rows = []
    try:
        for job, rw, bs, extra in JOBS:
            ratios = {name: [] for name in cfgs}
            speeds = {name: [] for name in ["plain", *cfgs]}
            for _ in range(a.repeat):
                plain = fio(setup.root / "plain", rw, bs, extra, a.seconds)
                speeds["plain"].append(plain)
                for name, (kind, opts) in cfgs.items():
                    setup.mount(kind, opts)
                    try:
                        v = fio(setup.mnt, rw, bs, extra, a.seconds)
                    finally:
                        setup.umount()
                    speeds[name].append(v)
                    ratios[name].append(v / plain)
            row = {"job": job, "plain_MBps": statistics.median(speeds["plain"]) / 1e6}
            for name in cfgs:
                row[f"{name} MBps"] = statistics.median(speeds[name]) / 1e6
                row[f"{name} ratio"] = statistics.median(ratios[name])
            rows.append(row)
            cells = "  ".join(f"{n}: {row[f'{n} MBps']:,.0f} ({row[f'{n} ratio']:.2f}x)" for n in cfgs)
            print(f"{job:<22} plain {row['plain_MBps']:,.0f} MB/s  {cells}", flush=True)
        creates = {name: [] for name in ["plain", *cfgs]}
        for _ in range(a.repeat):
            creates["plain"].append(create_files(setup.root / "plain"))
            for name, (kind, opts) in cfgs.items():
                setup.mount(kind, opts)
                try:
                    creates[name].append(create_files(setup.mnt))
                finally:
                    setup.umount()
        creates = {k: statistics.median(v) for k, v in creates.items()}
        print("2,000 creates (s): " + ", ".join(f"{k}: {v:.3f}" for k, v in creates.items()), flush=True)
        moves = migration(setup)
    finally:
        setup.close()
    print()
    head = "| job | plain MB/s | " + " | ".join(cfgs) + " |"
    print(head)
    print("|" + "---|" * (2 + len(cfgs)))
    for r in rows:
        cells = " | ".join(f"{r[f'{n} MBps']:,.0f} ({r[f'{n} ratio']:.2f}×)" for n in cfgs)
        print(f"| {r['job']} | {r['plain_MBps']:,.0f} | {cells} |")
    print()
    print("migration (tmpfs to tmpfs, 8 x 64 MiB, journalled copy + fsync + rename): "
          + ", ".join(f"{k}: {v / 1e6:,.0f} MB/s" for k, v in moves.items()))
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    print("| 2,000 creates (s) | " + f"{creates['plain']:.3f} | "
          + " | ".join(f"{creates[n]:.3f} ({creates[n] / creates['plain']:.1f}×)" for n in cfgs) + " |")
    meta = {"policy": a.policy, "seconds": a.seconds, "repeat": a.repeat, "creates_s": creates, "migration_MBps":
            {k: v / 1e6 for k, v in moves.items()}, "rows": rows}
    out.with_suffix(".json").write_text(json.dumps(meta, indent=2))
    with out.with_suffix(".csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(rows)
    print(f"wrote {out}.json and {out}.csv")


if __name__ == "__main__":
    main()
