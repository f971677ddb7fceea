#!/usr/bin/env bash
# The Zipf web-server workload on EMULATED tiers (--emulate-hdd wd5000aaks, --emulate-ssd
# vertex3: the simulator's device models delay each tier's I/O), three ways: HDD only, SSD only,
# and a hybrid policy with the SSD quota at 25 % of the working set. Prints ops/s of each, the
# ratios the issue sets targets for (hybrid >= 5x HDD-only, >= 0.5x SSD-only), and for each run
# the simulator's prediction of the same run beside the measurement.
# The fileset is created first and not measured (replay --measure-from auto), as Filebench
# reports its flows; ITERATIONS sets the length of the measured run (default: the generator's,
# 20,000 at scale 1; 10 whole-file reads and one 16 KiB log append each).
# The emulated HDD sits behind mq-deadline with NCQ (the mount's default); HDD_QUEUE=fifo serves
# it one request at a time in arrival order, as before stop 31.
# Usage: [SSD_QUOTA=BYTES] [HDD_QUEUE=mq-deadline|none|fifo] ./scripts/bench-webserver.sh [POLICY] [SCALE] [ITERATIONS]
#        (needs root and /dev/fuse)
set -euo pipefail
cd "$(dirname "$0")/.."
policy="${1:-on-demand-caching}"
scale="${2:-0.02}"
iterations="${3:-}"
workers=4
cargo build --release -q -p tierwise
bin=$PWD/target/release/tierwise
root=$(mktemp -d)
cleanup() {
  "$bin" umount "$root/mnt" 2>/dev/null || true
  rm -rf "$root"
}
trap cleanup EXIT
mkdir -p "$root/mnt"
gen=(trace gen-files webserver-zipf --scale "$scale" -o "$root/web.csv" -q)
[ -n "$iterations" ] && gen+=(--iterations "$iterations")
"$bin" "${gen[@]}" | sed 's/^/  /'
# The working set: bytes the trace creates and writes.
ws_bytes=$(python3 - "$root/web.csv" <<'PY'
import sys
size = {}
for line in open(sys.argv[1]):
    if line.startswith('#') or line.startswith('time_ns'):
        continue
    t, op, path, off, length, path2 = line.rstrip('\n').split(',')
    off, length = int(off), int(length)
    if op == 'write':
        size[path] = max(size.get(path, 0), off + length)
    elif op == 'append':
        size[path] = size.get(path, 0) + length
print(sum(size.values()))
PY
)
quota=$((ws_bytes / 4))
echo "working set $((ws_bytes / 1048576)) MiB; hybrid SSD quota $((quota / 1048576)) MiB (25 %)"
# SSD_QUOTA=BYTES sizes the hybrid's SSD otherwise (e.g. 25 % of the fileset alone).
if [ -n "${SSD_QUOTA:-}" ]; then quota=$SSD_QUOTA; echo "hybrid SSD quota set to $((quota / 1048576)) MiB (SSD_QUOTA)"; fi
run() { # label policy quota
  rm -rf "$root/ssd" "$root/hdd"; mkdir -p "$root/ssd" "$root/hdd"
  # Regular FUSE I/O: the file simulator's prediction tells the policy every read and write, as
  # this data path does (passthrough, the default, tells it opens as whole-file reads).
  "$bin" mount --ssd "$root/ssd" --hdd "$root/hdd" "$root/mnt" --policy "$2" --ssd-quota "$3" --pin-reserve 0 \
    --no-passthrough --emulate-hdd wd5000aaks ${HDD_QUEUE:+--hdd-queue "$HDD_QUEUE"} --emulate-ssd vertex3 >/dev/null
  "$bin" replay -q --fs "$root/mnt" "$root/web.csv" --workers "$workers" --json "$root/$1.json" > "$root/$1.txt"
  "$bin" umount "$root/mnt" >/dev/null
  echo "--- $1 ($2)"; cat "$root/$1.txt"
}
run hdd-only hdd-only "$quota"
run ssd-only ssd-only "$((ws_bytes * 2))"
run hybrid "$policy" "$quota"
mkdir -p out
python3 - "$root" "out/bench-webserver${iterations:+-$iterations}${SSD_QUOTA:+-q$SSD_QUOTA}.json" <<'PY'
import json, sys
r = {k: json.load(open(f"{sys.argv[1]}/{k}.json")) for k in ("hdd-only", "ssd-only", "hybrid")}
m = {k: v["measured"]["ops_per_s"] for k, v in r.items()}
s = {k: (v["simulated"] or {}).get("iops", 0.0) for k, v in r.items()}
print()
print(f"{'run':<10} {'measured ops/s':>15} {'simulated ops/s':>16} {'measured/sim':>13}")
for k in r:
    print(f"{k:<10} {m[k]:15.0f} {s[k]:16.0f} {m[k] / s[k] if s[k] else 0:13.2f}")
# The mount issue's targets (docs/PERFORMANCE.md, "Zipf web server"): >= 5x is met on a long
# run (4,000 measured iterations), not on the default short one, which first reads every file
# from the HDD; >= 0.5x of SSD-only is out of reach for this workload on this HDD.
print(f"hybrid / hdd-only = {m['hybrid'] / m['hdd-only']:.2f}  (mount issue's target >= 5, for a long run)")
print(f"hybrid / ssd-only = {m['hybrid'] / m['ssd-only']:.2f}  (mount issue's target >= 0.5, not reachable here)")
print(f"simulated: hybrid / hdd-only = {s['hybrid'] / s['hdd-only']:.2f}, hybrid / ssd-only = {s['hybrid'] / s['ssd-only']:.2f}")
out = {"runs": r, "measured_ops_per_s": m, "simulated_ops_per_s": s}
json.dump(out, open(f"{sys.argv[2]}", "w"), indent=2)
print(f"wrote {sys.argv[2]}")
PY
