#!/usr/bin/env python3
"""Readers against concurrent writers, on a mount and on a plain directory beside it: what a
reader sees of a file while another process appends to it, rewrites it in place (open with
O_TRUNC and one write, as `>` or fs::write do), replaces it by rename (write a temporary
file, rename it over the name, as editors and package managers do), or deletes and creates it
again. On a local file system a reader never sees a zero byte (the writers write none), never
fails to open a name that always exists, and never fails to read a file it opened; an open
racing a delete may fail with ENOENT (the plain directory shows that too).

    scripts/fs-races.py [--seconds 8] [--tierwise target/release/tierwise] [--policy hdd-only]
                        [--mount-flag=--no-passthrough ...]

Mounts a fresh `tierwise mount` over temporary tiers and compares it with a temporary plain
directory, one pattern at a time. Needs root and /dev/fuse. Exit status 1 when the mount
shows an anomaly the plain directory does not.
"""
import argparse
import os
import shutil
import subprocess
import tempfile
import threading
import time


def race(d, pattern, seconds):
    p = os.path.join(d, "f")
    with open(p, "wb") as f:
        f.write(b"a" * 20000)
    stop = threading.Event()
    stats = {"reads": 0, "with zeros": 0, "writes": 0}
    errors = {}

    def writer():
        i = 0
        while not stop.is_set():
            i += 1
            data = bytes([97 + i % 26]) * (20000 + (i % 200) * 10)
            if pattern == "append":
                # One open per record, as a logger that reopens its file does.
                with open(p, "ab") as f:
                    f.write(bytes([97 + i % 26]) * (100 + (i * 37) % 300) + b"\n")
            elif pattern == "rewrite":
                with open(p, "wb") as f:
                    f.write(data)
            elif pattern == "recreate":
                os.unlink(p)
                with open(p, "wb") as f:
                    f.write(data)
            else:
                with open(p + ".tmp", "wb") as f:
                    f.write(data)
                os.replace(p + ".tmp", p)
            stats["writes"] += 1

    def reader():
        while not stop.is_set():
            try:
                f = open(p, "rb")
            except OSError as e:
                errors["open: " + e.strerror] = errors.get("open: " + e.strerror, 0) + 1
                continue
            try:
                with f:
                    data = f.read()
            except OSError as e:
                errors["read: " + e.strerror] = errors.get("read: " + e.strerror, 0) + 1
                continue
            stats["reads"] += 1
            if b"\0" in data:
                stats["with zeros"] += 1

    threads = [threading.Thread(target=writer)] + [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join()
    return stats, errors


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=8)
    ap.add_argument("--tierwise", default=os.path.join(os.path.dirname(__file__), "..", "target", "release", "tierwise"))
    ap.add_argument("--policy", default="hdd-only")
    ap.add_argument("--mount-flag", action="append", default=[])
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="tw-races-")
    anomalies = False
    try:
        print(f"{'pattern':<9} {'where':<6} {'reads':>8} {'with zeros':>11} {'writes':>8}  errors")
        for pattern in ("append", "rewrite", "rename", "recreate"):
            rows = {}
            for where in ("plain", "mount"):
                d = os.path.join(work, f"{pattern}-{where}")
                os.makedirs(d)
                if where == "mount":
                    for s in ("ssd", "hdd"):
                        os.mkdir(d + "." + s)
                    subprocess.run([a.tierwise, "mount", "--ssd", d + ".ssd", "--hdd", d + ".hdd", d,
                                    "--policy", a.policy, *a.mount_flag], check=True, stdout=subprocess.DEVNULL)
                try:
                    stats, errors = race(d, pattern, a.seconds)
                finally:
                    if where == "mount":
                        subprocess.run([a.tierwise, "umount", d], check=True, stdout=subprocess.DEVNULL)
                rows[where] = (stats, errors)
                print(f"{pattern:<9} {where:<6} {stats['reads']:>8} {stats['with zeros']:>11} {stats['writes']:>8}  "
                      f"{errors or '-'}", flush=True)
            (ps, pe), (ms, me) = rows["plain"], rows["mount"]
            if (ms["with zeros"] and not ps["with zeros"]) or set(me) - set(pe):
                anomalies = True
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if anomalies else 0


if __name__ == "__main__":
    raise SystemExit(main())
