#!/usr/bin/env bash
# Speed of `tierwise serve` against nbdkit's own file plugin, in the same run, on images in
# tmpfs (warm "page cache"): nbdcopy sequential read and write of the whole device, fio's nbd
# engine at 4 KiB random, depth 16. Ours runs with everything on one tier: hdd-only (every
# block on the HDD image) and a warm write-back cache whose SSD holds the whole device, at
# 4 KiB and at 64 KiB blocks.
# Then the tiering gain with an emulated HDD: a Zipf block trace replayed by `tierwise replay
# --nbd` under HDD-only and two caches, each beside the simulator's prediction, with the HDD
# behind mq-deadline and NCQ (the default) and then served in arrival order (fifo); and every
# request on an emulated SSD at 1-16 outstanding, which is how `--nbd-request-cost auto` was
# calibrated (the difference at 1 and 2 outstanding; docs/PERFORMANCE.md, stop 29).
#
# IMAGES_DIR puts the images (every server's and the file plugin's) on another file system than
# tmpfs, e.g. ext4 with a warm page cache: each write then costs the plugin more, and the fixed
# per-write cost of our policy state weighs less.
#
# Usage: [ROUNDS=3] [COPIES=4] [IMAGES_DIR=/dev/shm] ./scripts/bench-serve.sh [SIZE_MIB=1024] [SECONDS=10]
set -euo pipefail
cd "$(dirname "$0")/.."
size_mib=${1:-1024}
secs=${2:-10}
copies=${COPIES:-4}
rounds=${ROUNDS:-3}
for t in nbdkit nbdcopy fio; do command -v $t >/dev/null || { echo "error: $t is missing (apt-get install nbdkit libnbd-bin fio)" >&2; exit 1; }; done
cargo build --release --locked --quiet -p tierwise -p tierwise-nbd
tw=$PWD/target/release/tierwise
base=$(mktemp -d "${IMAGES_DIR:-/dev/shm}/tierwise-bench.XXXXXX")
# Every server writes a pid file under $base (those started inside $(...) cannot add to a list
# of the parent shell): stopping them all is killing every pid found there.
cleanup() {
  for f in "$base"/*.pid "$base"/*/*.pid; do [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null || true; done
  sleep 0.5; rm -rf "$base"
}
trap cleanup EXIT

# Writes every block of a device once, untimed: no image is sparse (nbdcopy skips holes it is
# told of), and tmpfs has allocated every page (a first touch costs 0.3-1 GB/s, varying from
# run to run, for nbdkit's file plugin as for us: not the steady state).
prewrite() { # uri [control socket]
  nbdcopy "$base/src.img" "$1"
  [ -z "${2:-}" ] || "$tw" flush "$2" >/dev/null
}

# One round of measurements of one device: prints "name MB/s-or-IOPS".
measure() { # uri [control socket: written back between the phases, untimed]
  local uri=$1 control=${2:-}
  local t0 t1
  # Several whole-device copies per figure: one copy of 1 GiB takes ~0.3 s, and single copies
  # swung 1.7-3.9 GB/s for the file plugin alone from one to the next.
  t0=$(date +%s.%N); for _ in $(seq "$copies"); do nbdcopy "$base/src.img" "$uri"; done; t1=$(date +%s.%N)
  echo "seq-write-MBps $(echo "$copies * $size_mib * 1.048576 / ($t1 - $t0)" | bc -l)"
  [ -z "$control" ] || "$tw" flush "$control" >/dev/null
  t0=$(date +%s.%N); for _ in $(seq "$copies"); do nbdcopy "$uri" null:; done; t1=$(date +%s.%N)
  echo "seq-read-MBps $(echo "$copies * $size_mib * 1.048576 / ($t1 - $t0)" | bc -l)"
  for rw in randread randwrite; do
    local iops
    iops=$(fio --name=x --ioengine=nbd --uri="$uri" --rw=$rw --bs=4k --iodepth=16 --runtime="$secs" --time_based \
             --output-format=json 2>/dev/null | sed -n '/^{/,$p' | python3 -c "import json,sys; j=json.load(sys.stdin)['jobs'][0]; print(j['read']['iops']+j['write']['iops'])")
    echo "$rw-4k-IOPS $iops"
    [ -z "$control" ] || "$tw" flush "$control" >/dev/null
  done
}

start_file_plugin() {
  local img=$base/plain.img
  truncate -s ${size_mib}M "$img"
  nbdkit --unix "$base/plain.sock" --pidfile "$base/plain.pid" file "$img"
  while [ ! -s "$base/plain.pid" ]; do sleep 0.05; done
}

# A policy's directory: its name without the characters an NBD URI cannot carry.
dir_of() { echo "$base/${1//[^a-zA-Z0-9-]/_}"; }

start_ours() { # name policy ssd_size [block size]
  local d
  d=$(dir_of "$1")
  mkdir -p "$d"
  "$tw" serve --create --ssd "$d/ssd.img" --hdd "$d/hdd.img" --ssd-size "$3" --hdd-size ${size_mib}MiB --policy "$2" \
    ${4:+--block-size "$4"} >/dev/null
  echo "nbd+unix:///?socket=$d/ssd.img.sock"
}

echo "== steady state, ${size_mib} MiB device in $(stat -f -c %T "$base"), $rounds rounds (each: $copies nbdcopy copies, fio ${secs}s runs)"
head -c $((size_mib << 20)) /dev/urandom > "$base/src.img"
# Every device is served at once and each round measures them one after another, so a ratio
# compares figures taken within a minute of each other (this machine's speed drifts between
# runs by more than the differences measured).
names=(file hdd-only cache ssd-tier ssd-tier-64k)
declare -A uri control
start_file_plugin
uri[file]="nbd+unix:///?socket=$base/plain.sock"; control[file]=""
uri[hdd-only]=$(start_ours hdd-only hdd-only 64MiB); control[hdd-only]=""
# Warm caches whose SSD holds the whole device: every block written (absorbed by the SSD) and
# written back, so the cache is full and clean when measuring starts. "cache" cleans what the
# random writes dirty (its cleaner keeps dirty data under 20 %, so the HDD image works too);
# "ssd-tier" is the same cache with cleaning held off (dirty up to 100 %): everything on one tier.
# "ssd-tier-64k" is that cache with 64 KiB blocks (lvmcache's default chunk; dm-cache's smallest
# is 32 KiB) instead of 4 KiB: a sixteenth of the per-block state for the policy to look up.
for name in cache ssd-tier ssd-tier-64k; do
  pol=cache:mode=write-back bs=""
  [ $name != cache ] && pol="cache:mode=write-back,dirty-high=100%,dirty-low=95%"
  [ $name = ssd-tier-64k ] && bs=64KiB
  uri[$name]=$(start_ours "$name" "$pol" $((size_mib + size_mib / 8 + 64))MiB $bs)
  control[$name]="$(dir_of "$name")/ssd.img.sock.control"
done
for name in "${names[@]}"; do prewrite "${uri[$name]}" "${control[$name]}"; done
declare -A r
for round in $(seq "$rounds"); do
  for name in "${names[@]}"; do
    while read -r k v; do r["$name,$k,$round"]=$v; done < <(measure "${uri[$name]}" "${control[$name]}")
  done
  echo "round $round of $rounds measured" >&2
done
# Per job and device: the ratio to the file plugin in each round, as median (min-max).
ratios() { # name job
  for round in $(seq "$rounds"); do echo "${r["$1,$2,$round"]} / ${r["file,$2,$round"]}" | bc -l; done |
    sort -g | awk '{v[NR]=$1} END {m=(NR%2)?v[(NR+1)/2]:(v[NR/2]+v[NR/2+1])/2; if (NR>1) printf "%.2f (%.2f-%.2f)", m, v[1], v[NR]; else printf "%.2f", m}'
}
median_of() { # name job
  for round in $(seq "$rounds"); do echo "${r["$1,$2,$round"]}"; done | sort -g |
    awk '{v[NR]=$1} END {printf "%.0f", (NR%2)?v[(NR+1)/2]:(v[NR/2]+v[NR/2+1])/2}'
}
printf '%-18s %12s %20s %20s %20s %20s\n' job file-plugin "hdd-only ratio" "warm-cache ratio" "ssd-tier ratio" "ssd-tier-64k ratio"
for k in seq-write-MBps seq-read-MBps randread-4k-IOPS randwrite-4k-IOPS; do
  printf '%-18s %12s %20s %20s %20s %20s\n' "$k" "$(median_of file "$k")" "$(ratios hdd-only "$k")" "$(ratios cache "$k")" \
    "$(ratios ssd-tier "$k")" "$(ratios ssd-tier-64k "$k")"
done

echo
echo "== tiering gain on an emulated HDD (wd5000aaks) and SSD (vertex3): Zipf 1.0, 6,000 requests, 20% writes, depth 4"
echo "   (the HDD behind mq-deadline with NCQ, the default, then one request at a time in arrival order)"
"$tw" trace gen -q -o "$base/zipf.mqsim" --requests 6000 --objects 20000 --alpha 1.0 --write-fraction 0.2 >/dev/null
for queue in mq-deadline fifo; do
  for pol in hdd-only cache:mode=write-back dm-cache-smq-like; do
    d=$base/emu-$queue-${pol//[:=]/-}
    mkdir -p "$d"
    "$tw" serve --create --ssd "$d/ssd.img" --hdd "$d/hdd.img" --ssd-size 16MiB --hdd-size 256MiB --policy "$pol" \
       --emulate-hdd wd5000aaks --hdd-queue $queue --emulate-ssd vertex3 >/dev/null
    echo "-- $pol, $queue"
    "$tw" replay -q --nbd "nbd+unix:///?socket=$d/ssd.img.sock" "$base/zipf.mqsim" --workers 4 | tail -7
  done
done

echo
echo "== every request on an emulated SSD (vertex3): linear over a 256 MiB SSD, Zipf 1.0, 20,000 requests; measured / predicted"
"$tw" trace gen -q -o "$base/zipf20k.mqsim" --requests 20000 --objects 20000 --alpha 1.0 --write-fraction 0.2 >/dev/null
d=$base/emu-ssd
mkdir -p "$d"
"$tw" serve --create --ssd "$d/ssd.img" --hdd "$d/hdd.img" --ssd-size 256MiB --hdd-size 256MiB --policy linear \
   --emulate-hdd wd5000aaks --emulate-ssd vertex3 >/dev/null
printf '%-12s %-24s %-24s %-24s %s\n' outstanding "IOPS (cost auto)" "p50 us (cost auto)" "IOPS (cost 0)" "p50 us (cost 0)"
for w in 1 2 4 8 16; do
  auto=$("$tw" replay -q --nbd "nbd+unix:///?socket=$d/ssd.img.sock" "$base/zipf20k.mqsim" --workers "$w")
  none=$("$tw" replay -q --nbd "nbd+unix:///?socket=$d/ssd.img.sock" "$base/zipf20k.mqsim" --workers "$w" --nbd-request-cost 0)
  row() { awk '/^IOPS/{i=$2"/"$3" ("$4")"} /^p50/{p=$4"/"$5" ("$6")"} END{printf "%-24s %-24s", i, p}'; }
  printf '%-12s %s %s\n' "$w" "$(echo "$auto" | row)" "$(echo "$none" | row)"
done
