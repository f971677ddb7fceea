#!/usr/bin/env bash
# What crash-atomic renames cost: saves by rename-over (write a temporary, fsync it, rename it
# over the target) and creates of new files on a mount, per policy family, on this build and,
# with BASELINE=path-to-another-tierwise, on that one in the same run, alternating rounds.
# Prints operations per second for each and the ratio to the baseline.
# Usage: ./scripts/bench-rename.sh [OPS] [ROUNDS]   (root, /dev/fuse; tiers under target/)
set -euo pipefail
cd "$(dirname "$0")/.."
ops=${1:-1000}
rounds=${2:-3}
cargo build --release --locked --quiet -p tierwise
new=$PWD/target/release/tierwise
base=${BASELINE:-}
work=$(mktemp -d -p "$PWD/target" bench-rename.XXXX)
trap 'umount -l "$work/mnt" 2>/dev/null || true; rm -rf "$work"' EXIT

# One measurement: prints "saves/s creates/s".
measure() {
  local tw=$1 policy=$2
  rm -rf "$work/root" && mkdir -p "$work/root/ssd" "$work/root/hdd" "$work/mnt"
  $tw mount "$work/root" "$work/mnt" --policy "$policy" --no-passthrough >/dev/null
  python3 - "$work/mnt" "$ops" <<'PY'
import os, sys, time
mnt, n = sys.argv[1], int(sys.argv[2])
d = os.path.join(mnt, "d"); os.mkdir(d)
data = os.urandom(8192)
for i in range(8):
    with open(os.path.join(d, f"t{i}"), "wb") as f: f.write(data)
for i in range(8):  # a read: caching policies copy the targets to the SSD (renames touch both tiers)
    with open(os.path.join(d, f"t{i}"), "rb") as f: f.read()
time.sleep(0.5)
t0 = time.perf_counter()
for i in range(n):
    tmp = os.path.join(d, f".t{i % 8}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, data); os.fsync(fd); os.close(fd)
    os.rename(tmp, os.path.join(d, f"t{i % 8}"))
saves = n / (time.perf_counter() - t0)
t0 = time.perf_counter()
for i in range(n):
    fd = os.open(os.path.join(d, f"n{i}"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644); os.close(fd)
creates = n / (time.perf_counter() - t0)
print(f"{saves:.0f} {creates:.0f}")
PY
  $tw umount "$work/mnt" >/dev/null 2>&1 || umount -l "$work/mnt" 2>/dev/null || true
}

printf '%-26s %-9s %10s %10s\n' policy build saves/s creates/s
for policy in on-demand-caching dynamic-hot-dst:sieve=0 file-write-back:sieve=0 hycache; do
  for r in $(seq "$rounds"); do
    read -r s c < <(measure "$new" "$policy")
    printf '%-26s %-9s %10s %10s\n' "$policy" "this" "$s" "$c"
    if [ -n "$base" ]; then
      read -r bs bc < <(measure "$base" "$policy")
      printf '%-26s %-9s %10s %10s   ratio %.2f %.2f (round %s)\n' "$policy" "baseline" "$bs" "$bc" \
        "$(echo "$s / $bs" | bc -l)" "$(echo "$c / $bc" | bc -l)" "$r"
    fi
  done
done
