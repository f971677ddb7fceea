#!/usr/bin/env bash
# fio on a tierwise mount whose tiers are tmpfs, against the backing directory in the same run
# (ratios, not absolute figures: this machine is shared). Usage: ./scripts/bench-mount.sh [POLICY]
# Needs root, /dev/fuse and fio (apt-get install fio).
set -euo pipefail
cd "$(dirname "$0")/.."
policy="${1:-on-demand-caching}"
command -v fio >/dev/null || { echo "fio is not installed: apt-get install fio" >&2; exit 1; }
cargo build --release -q -p tierwise
bin=target/release/tierwise
root=$(mktemp -d)
mkdir -p "$root/ssd" "$root/hdd" "$root/mnt" "$root/plain"
for d in ssd hdd plain; do mount -t tmpfs -o size=3g tmpfs "$root/$d"; done
cleanup() {
  "$bin" umount "$root/mnt" 2>/dev/null || umount -l "$root/mnt" 2>/dev/null || true
  for d in ssd hdd plain; do umount -l "$root/$d" 2>/dev/null || true; done
  rm -rf "$root"
}
trap cleanup EXIT
# PASSTHROUGH=1 mounts with --passthrough (DST policies only, e.g. dynamic-hot-dst:sieve=0).
extra=(); [ "${PASSTHROUGH:-0}" = 1 ] && extra+=(--passthrough)
"$bin" mount --ssd "$root/ssd" --hdd "$root/hdd" "$root/mnt" --policy "$policy" --ssd-quota 2GiB "${extra[@]}" >/dev/null
run() { # dir name rw bs
  fio --name="$2" --directory="$1" --rw="$3" --bs="$4" --size=256m --runtime=10 --time_based \
      --ioengine=psync --numjobs=1 --group_reporting --output-format=json 2>/dev/null |
    python3 -c 'import json,sys; j=json.load(sys.stdin)["jobs"][0]; print(j["read"]["bw_bytes"]+j["write"]["bw_bytes"])'
}
printf '%-22s %14s %14s %7s\n' job "plain MB/s" "tierwise MB/s" ratio
for spec in "seq-read read 1m" "seq-write write 1m" "rand-read randread 4k" "rand-write randwrite 4k"; do
  set -- $spec
  p=$(run "$root/plain" "$1" "$2" "$3"); t=$(run "$root/mnt" "$1" "$2" "$3")
  python3 -c "print(f'{\"$1\":<22} {$p/1e6:14.1f} {$t/1e6:14.1f} {$t/$p:7.2f}')"
done
