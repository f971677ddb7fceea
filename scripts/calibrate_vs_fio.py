#!/usr/bin/env python3
"""`tierwise calibrate` against fio on the same file, interleaved (calibrate, fio, calibrate).

fio is the reference every storage engineer trusts; calibrate's tests are fio's jobs: psync
threads with one request each (numjobs = queue depth), direct I/O, 4 KiB random and 1 MiB
sequential, O_DSYNC writes. Prints each test's IOPS from both tools and their ratio.

Usage: scripts/calibrate_vs_fio.py [--dir DIR] [--size 2GiB] [--seconds 5] [--depths 1,4,32]
Needs fio (apt-get install fio) and a built tierwise (TIERWISE_BIN, default target/release).
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def fio(path, size, seconds, name, rw, bs, depth, sync=False):
    cmd = [
        "fio", f"--name={name}", f"--filename={path}", f"--size={size}", f"--rw={rw}", f"--bs={bs}",
        "--direct=1", "--ioengine=psync", "--thread", f"--numjobs={depth}", "--group_reporting",
        f"--runtime={seconds}", "--time_based", "--output-format=json", "--randrepeat=0",
    ]
    if sync:
        cmd.append("--sync=dsync")
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    job = json.loads(out[out.index("{"):])["jobs"][0]
    side = job["read"] if rw in ("read", "randread") else job["write"]
    return side["iops"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default=os.path.join(ROOT, "target"), help="a directory on the disk to measure")
    ap.add_argument("--size", default="2GiB")
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--depths", default="1,4,32")
    ap.add_argument("--json", help="write the rows here")
    a = ap.parse_args()
    if not shutil.which("fio"):
        sys.exit("error: fio is missing (apt-get install fio)")
    tw = os.environ.get("TIERWISE_BIN", os.path.join(ROOT, "target/release/tierwise"))
    depths = [int(d) for d in a.depths.split(",")]
    with tempfile.TemporaryDirectory(dir=a.dir) as tmp:
        path = os.path.join(tmp, "calibrate-vs-fio.img")
        size = a.size.replace("iB", "").replace("B", "")  # fio: 2G means 2 GiB
        print(f"filling {path} ({a.size}) with fio", file=sys.stderr)
        subprocess.run(["fio", "--name=fill", f"--filename={path}", f"--size={size}", "--rw=write", "--bs=1M",
                        "--direct=1", "--output-format=json"], check=True, capture_output=True)

        def calibrate(i):
            print(f"calibrate, run {i}", file=sys.stderr)
            out = os.path.join(tmp, f"cal{i}.json")
            subprocess.run([tw, "--quiet", "calibrate", path, "--overwrite", "--kind", "ssd", "--seconds",
                            str(a.seconds), "--depths", a.depths, "--json", out], check=True, capture_output=True)
            with open(out) as f:
                return {m["name"]: m["iops"] for m in json.load(f)["tests"]}

        first = calibrate(1)
        tests = [("seqread", "read", "1M", 1, False), ("seqwrite", "write", "1M", 1, False)]
        tests += [(f"randread-qd{d}", "randread", "4k", d, False) for d in depths]
        tests += [(f"randwrite-qd{d}", "randwrite", "4k", d, False) for d in depths]
        tests += [("randwrite-sync-qd1", "randwrite", "4k", 1, True)]
        ref = {}
        for name, rw, bs, depth, sync in tests:
            print(f"fio {name}", file=sys.stderr)
            ref[name] = fio(path, size, a.seconds, name, rw, bs, depth, sync)
        second = calibrate(2)
    rows = []
    print(f"{'test':<20} {'calibrate 1':>12} {'fio':>10} {'calibrate 2':>12} {'calibrate / fio':>16}")
    for name, *_ in tests:
        mean = (first[name] + second[name]) / 2
        ratio = mean / ref[name] if ref[name] else float("nan")
        rows.append({"test": name, "calibrate": [first[name], second[name]], "fio": ref[name], "ratio": ratio})
        print(f"{name:<20} {first[name]:>12.0f} {ref[name]:>10.0f} {second[name]:>12.0f} {ratio:>16.2f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
