#!/usr/bin/env python3
"""Metadata speed of `tierwise mount`: per-operation wall time (create+write, stat, open+read,
rename, rename over (write a temporary file and rename it over a name, the editor's save),
unlink of N files three directories deep) and the daemon's CPU time, for one or more
tierwise binaries mounted in turn, alternating over rounds so that all see the same machine.

    scripts/bench-metadata.py [--files 2000] [--rounds 3] [--policy dynamic-hot-dst]
                              [--mount-flag=--no-passthrough ...] BIN [BIN...]

Compare a build with an earlier one (built in a git worktree with its own target directory):
the ratio of the daemon CPU times is the figure to quote, since wall times on a shared machine
are noisy. Needs root and /dev/fuse.
"""
import argparse
import os
import shutil
import subprocess
import tempfile
import time


def workload(root, n):
    d = os.path.join(root, "a", "b", "c")
    os.makedirs(d, exist_ok=True)
    res = {}

    def phase(name, fn):
        t = time.perf_counter()
        fn()
        res[name] = (time.perf_counter() - t) * 1e6 / n

    def create():
        for i in range(n):
            with open(os.path.join(d, f"f{i}"), "wb") as f:
                f.write(b"x" * 4096)

    def stat():
        for i in range(n):
            os.stat(os.path.join(d, f"f{i}"))

    def read():
        for i in range(n):
            with open(os.path.join(d, f"f{i}"), "rb") as f:
                f.read()

    def rename():
        for i in range(n):
            os.rename(os.path.join(d, f"f{i}"), os.path.join(d, f"g{i}"))

    def rename_over():
        for i in range(n):
            tmp = os.path.join(d, "saving")
            with open(tmp, "wb") as f:
                f.write(b"y" * 4096)
            os.replace(tmp, os.path.join(d, f"g{i}"))

    def unlink():
        for i in range(n):
            os.unlink(os.path.join(d, f"g{i}"))

    for name, fn in [("create+write", create), ("stat", stat), ("open+read", read), ("rename", rename),
                     ("rename over", rename_over), ("unlink", unlink)]:
        phase(name, fn)
    return res


def cpu_ms(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(") ", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 // os.sysconf("SC_CLK_TCK")


def run(binary, n, policy, flags):
    work = tempfile.mkdtemp(prefix="tw-bench-meta-")
    try:
        for sub in ("ssd", "hdd", "m"):
            os.mkdir(os.path.join(work, sub))
        m = os.path.join(work, "m")
        subprocess.run([binary, "mount", "--ssd", os.path.join(work, "ssd"), "--hdd", os.path.join(work, "hdd"), m,
                        "--policy", policy, "--ssd-quota", "1GiB", *flags], check=True, stdout=subprocess.DEVNULL)
        pid = int(subprocess.run(["pgrep", "-f", f"mount --ssd {work}/ssd"], capture_output=True,
                                 text=True).stdout.split()[0])
        c0 = cpu_ms(pid)
        res = workload(m, n)
        res["daemon cpu ms"] = cpu_ms(pid) - c0
        subprocess.run([binary, "umount", m], check=True, stdout=subprocess.DEVNULL)
        return res
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("binaries", nargs="+")
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--policy", default="dynamic-hot-dst")
    ap.add_argument("--mount-flag", action="append", default=[],
                    help="an extra flag for `tierwise mount` (repeatable; write --mount-flag=--no-passthrough)")
    a = ap.parse_args()
    totals = {b: [] for b in a.binaries}
    for r in range(a.rounds):
        for b in a.binaries:
            res = run(b, a.files, a.policy, a.mount_flag)
            totals[b].append(res)
            print(f"round {r + 1} {b}: " + ", ".join(
                f"{k} {v:.0f}" + ("" if k.endswith("ms") else " us") for k, v in res.items()), flush=True)
    keys = list(totals[a.binaries[0]][0].keys())
    print(f"\nmedians over {a.rounds} rounds, {a.files} files:")
    print(f"{'':<24}" + "".join(f"{os.path.basename(os.path.dirname(os.path.dirname(b)))[:20]:>22}" for b in a.binaries))
    for k in keys:
        row = [sorted(x[k] for x in totals[b])[len(totals[b]) // 2] for b in a.binaries]
        print(f"{k:<24}" + "".join(f"{v:>22.1f}" for v in row))
    if len(a.binaries) > 1:
        base = sorted(x["daemon cpu ms"] for x in totals[a.binaries[0]])[a.rounds // 2]
        for b in a.binaries[1:]:
            v = sorted(x["daemon cpu ms"] for x in totals[b])[a.rounds // 2]
            print(f"daemon CPU {b} / {a.binaries[0]}: {v / max(base, 1):.2f}x")


if __name__ == "__main__":
    main()
