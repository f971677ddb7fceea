#!/usr/bin/env bash
# Does the simulator predict the served device? For each bundled real block trace (a slice of
# HEAD requests) and each architecture: `tierwise serve` on emulated devices (wd5000aaks HDD
# behind mq-deadline, vertex3 SSD; images in /dev/shm), the SSD at 25 % of the slice's
# footprint, `tierwise replay --nbd` with 4 workers beside the simulator's prediction of the
# same requests. Prints, per run: IOPS measured/predicted, SSD share of reads, and the HDD's
# commands and bytes as the emulated disk counted them against the prediction's; then the
# ranking per trace. The emulated HDD is the simulator's own model, so this tests the device's
# I/O pattern and the simulator's account of it, not the model (docs/PERFORMANCE.md).
#
# DIRECT=1 is the check that is not circular: no emulation; the HDD image on the disk under
# HDD_DIR (default target/validate-direct; filled with random data once, so that reads reach
# the disk, and adopted in place by each run), the SSD image in /dev/shm, both served with
# --direct; the disk and the memory are calibrated first (`tierwise calibrate`, or PRESETS=
# a file with [*.disk] and [ssd.memory]) and the prediction uses those presets, the disk's
# own scheduler, and the disk's kernel counters (/sys/block/DEV/stat, all I/O on it) for HDD
# commands, bytes and time per command. The NBD path's own time per request is measured first
# with both images in memory (or REQUEST_COST).
#
# DEVICE=nbdkit is the second device model, one the simulator shares no code with: the HDD
# image (in /dev/shm) behind nbdkit's file plugin under its noparallel, delay and rate filters
# (NBDKIT_HDD, default "delay-read=4ms delay-write=2ms rate=800M": one request at a time, a
# fixed access time, a token-bucket bandwidth), reached through nbdfuse, served with --direct.
# Nothing about those settings reaches the prediction: `tierwise calibrate --kind ssd` measures
# the throttled device through the same path and the prediction uses that preset as the slow
# level (`--hdd ssd:throttled`, queue fifo: FUSE has no scheduler). HDD commands, bytes and
# time per command come from nbdkit's stats filter. The ranking must survive it (issue 35).
#
# TIERWISE_BIN runs another build (a baseline) for the serving, replay and prediction.
# Usage: [TIERWISE_BIN=path] [HEAD=10000] [ARCHS="hdd-only cache:mode=write-back ..."]
#        [TRACES="file ..."] [OUT=target/validate-serve.tsv] [NBD_CORES=n]
#        [DIRECT=1 [HDD_DIR=dir] | DEVICE=nbdkit [NBDKIT_HDD="filter params"]]
#        [PRESETS=file] [REQUEST_COST=duration] [EMULATE_HDD=wd5000aaks[:field=value,...]]
#        ./scripts/validate-serve.sh
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${TIERWISE_BIN:-}" ]; then cargo build --release --locked --quiet -p tierwise -p tierwise-nbd; fi
tw=${TIERWISE_BIN:-$PWD/target/release/tierwise}
# Slices are cut by this build (`trace merge`), whichever build serves and predicts.
slicer=$PWD/target/release/tierwise
[ -x "$slicer" ] || cargo build --release --locked --quiet -p tierwise
command -v nbdkit >/dev/null || { echo "error: nbdkit is missing (apt-get install nbdkit)" >&2; exit 1; }
head_n=${HEAD:-10000}
archs=${ARCHS:-"hdd-only cache:mode=write-back bcache-like dm-cache-smq-like open-cas-like greendm-tiering"}
traces=${TRACES:-"data/traces/cloudphysics_libcachesim.sample.vscsi.gz data/traces/msr_hm_0.excerpt1000.csv data/traces/arc_OLTP.lis.zst data/traces/systor17_vdi.sample1000.csv.gz data/traces/umass_websearch.mqsim_ascii.trace.gz data/traces/tpcc_unverified.mqsim_ascii.trace"}
out=${OUT:-$PWD/target/validate-serve.tsv}
base=$(mktemp -d /dev/shm/tierwise-validate.XXXXXX)
cleanup() {
  for m in "$base"/*/mnt; do [ -d "$m" ] && fusermount3 -u "$m" 2>/dev/null || true; done
  for f in "$base"/*/*.pid; do [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null || true; done
  sleep 0.3; rm -rf "$base"
}
trap cleanup EXIT
device=${DEVICE:-emulated}
# The emulated HDD and the prediction's: a preset with knobs (wd5000aaks:write_cache=off).
emulate_hdd=${EMULATE_HDD:-wd5000aaks}
[ "${DIRECT:-0}" = 1 ] && device=disk
case $device in emulated | disk | nbdkit) ;; *) echo "error: DEVICE=$device: emulated, disk (DIRECT=1) or nbdkit" >&2; exit 2 ;; esac
nbdkit_hdd=${NBDKIT_HDD:-"delay-read=4ms delay-write=2ms rate=800M"}
# The throttled device: IMAGE behind nbdkit (one request at a time, then the delay, then the
# bandwidth; the stats filter outermost, so its times include the wait for the device), as the
# file DIR/mnt/nbd. throttle_down unmounts it, and nbdkit writes DIR/nbdkit-stats.txt as it exits.
throttle_up() {
  local image=$1 dir=$2
  # shellcheck disable=SC2086 # the filters' parameters are words
  nbdkit -U "$dir/hdd.sock" -P "$dir/nbdkit.pid" --filter=stats --filter=noparallel --filter=delay --filter=rate \
    file "$image" serialize=all-requests statsfile="$dir/nbdkit-stats.txt" $nbdkit_hdd
  mkdir -p "$dir/mnt"
  nbdfuse "$dir/mnt/nbd" --unix "$dir/hdd.sock" &
  echo $! > "$dir/nbdfuse.pid"
  for _ in $(seq 100); do [ -f "$dir/mnt/nbd" ] && return 0; sleep 0.05; done
  echo "error: nbdfuse did not mount $dir/mnt" >&2; exit 1
}
throttle_down() {
  local dir=$1 pid
  fusermount3 -u "$dir/mnt"
  pid=$(cat "$dir/nbdkit.pid"); kill "$pid" 2>/dev/null || true
  while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
  rm -f "$dir/nbdkit.pid" "$dir/nbdfuse.pid"
}
stop_serve() {
  local pid
  pid=$(cat "$1.pid"); kill "$pid" 2>/dev/null || true
  while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
}
serve_flags=(--emulate-hdd "$emulate_hdd" --emulate-ssd vertex3)
replay_flags=(--hdd "$emulate_hdd")
if [ "$device" = nbdkit ]; then
  command -v nbdfuse >/dev/null || { echo "error: nbdfuse is missing (apt-get install libnbd-bin)" >&2; exit 1; }
  serve_flags=(--direct)
  presets=${PRESETS:-$base/presets.toml}
  if [ -z "${PRESETS:-}" ]; then
    cal=$base/throttled-calibration; mkdir -p "$cal"
    truncate -s 1GiB "$cal/image"
    throttle_up "$cal/image" "$cal"
    "$tw" calibrate -q "$cal/mnt/nbd" --overwrite --kind ssd --name throttled -o "$base/throttled.toml" > "$base/throttled.txt"
    throttle_down "$cal"
    rm -f "$cal/image"
    cp "$base/throttled.txt" "${out%.tsv}-nbdkit-calibration.txt"
  fi
  slow=ssd:throttled queue=fifo
elif [ "$device" = disk ]; then
  hdd_dir=${HDD_DIR:-$PWD/target/validate-direct}
  mkdir -p "$hdd_dir"
  src=$(df --output=source "$hdd_dir" | tail -1)
  dev=$(lsblk -no PKNAME "$src" 2>/dev/null | head -1); [ -n "$dev" ] || dev=$(basename "$src")
  queue=$(sed -n 's/.*\[\(.*\)\].*/\1/p' "/sys/block/$dev/queue/scheduler")
  [ "$queue" = none ] || [ "$queue" = mq-deadline ] || queue=none
  data=$hdd_dir/hdd-data.img
  if [ ! -f "$data.ready" ]; then
    echo "filling $data (4 GiB of random data, once)" >&2
    head -c $((4 << 30)) /dev/urandom > "$data" && sync && touch "$data.ready"
  fi
  presets=${PRESETS:-$base/presets.toml}
  if [ -z "${PRESETS:-}" ]; then
    # The data image itself, not a fresh scratch file: a virtual disk's host answers what was
    # just written from its cache, which the runs' reads of older data do not see.
    truncate -s $((4 << 30)) "$data"
    "$tw" calibrate -q "$data" --overwrite --name disk -o "$base/disk.toml" --json "$base/disk.json" > "$base/disk.txt"
    cp "$base/disk.txt" "${out%.tsv}-disk-calibration.txt"
  fi
  serve_flags=(--direct)
  echo "direct I/O: HDD image on $dev ($queue)" >&2
fi
if [ "$device" != emulated ]; then
  if [ -z "${PRESETS:-}" ]; then
    mkdir -p "$base/mem" && "$tw" calibrate -q "$base/mem" --kind ssd --size 1GiB --name memory -o "$base/memory.toml" > "$base/memory.txt"
    for f in disk throttled memory; do [ ! -f "$base/$f.toml" ] || cat "$base/$f.toml"; done > "$presets"
  fi
  if [ "$device" = disk ]; then
    if grep -q '^\[hdd.disk\]' "$presets"; then slow=disk; else slow=ssd:disk; fi
  fi
  # The NBD path's own time per request on this host (REQUEST_COST, or measured here): served
  # hdd-only with both images in memory, QD1 random 4 KiB reads, measured p50 less the
  # prediction's with no front end. A workload of its own, not one of the traces.
  cost=${REQUEST_COST:-}
  if [ -z "$cost" ]; then
    fe=$base/front-end; mkdir -p "$fe"
    python3 -c "
import random
random.seed(1)
for i in range(5000):
    print(f'{128166372000000000 + i * 10000},h,0,Read,{random.randrange(1 << 18) * 4096},4096,100')" > "$fe/reads.csv"
    "$tw" serve --create --ssd "$fe/ssd.img" --hdd "$fe/hdd.img" --ssd-size 64MiB --hdd-size 1GiB --policy hdd-only --direct >/dev/null
    "$tw" replay -q --nbd "nbd+unix:///?socket=$fe/ssd.img.sock" "$fe/reads.csv" --workers 1 --nbd-request-cost 0 \
      --devices "$presets" --hdd ssd:memory --ssd-model memory --json "$fe/replay.json" >/dev/null
    stop_serve "$fe/ssd.img.sock.control"
    cost=$(python3 -c "import json; r = json.load(open('$fe/replay.json')); print(max(0, round(r['measured']['p50_us'] - r['predicted']['latency']['p50_us'])))")us
  fi
  replay_flags=(--devices "$presets" --hdd "$slow" --ssd-model memory --hdd-queue "$queue" --nbd-request-cost "$cost")
  echo "$device: the NBD path's own time per request $cost (measured in memory, QD1 4 KiB reads)" >&2
  echo "$device: presets $presets (slow level: $slow, queue $queue)" >&2
fi
# NBD_CORES: the prediction's --nbd-cores (default: this host's cores).
if [ -n "${NBD_CORES:-}" ]; then replay_flags+=(--nbd-cores "$NBD_CORES"); fi
# Reads, writes, sectors, and the milliseconds they spent in the block layer and the disk.
disk_stat() { awk '{print $1, $5, $3 + $7, $4 + $8}' "/sys/block/$dev/stat"; }
printf 'trace\tarch\tmeasured_iops\tpredicted_iops\tmeasured_ssd_read\tpredicted_ssd_read\tmeasured_hdd_cmds\tpredicted_hdd_cmds\tmeasured_hdd_mb\tpredicted_hdd_mb\tmeasured_hdd_await_us\tpredicted_hdd_await_us\tmeasured_hdd_flushes\tpredicted_hdd_flushes\n' > "$out"
for t in $traces; do
  name=$(basename "$t"); name=${name%%.*}
  slice=$base/$name.spc
  "$slicer" trace merge -q "$t" --head "$head_n" -o "$slice" >/dev/null
  fp=$("$slicer" trace stat "$slice" --json | python3 -c "import json,sys; print(json.load(sys.stdin)['footprint_bytes'])")
  ssd_mib=$(( (fp / 4 + (1 << 20) - 1) >> 20 ))
  [ "$ssd_mib" -ge 2 ] || ssd_mib=2
  for a in $archs; do
    # Numbered, not named after the spec: a Unix socket's path has at most 107 bytes.
    run_n=$(( ${run_n:-0} + 1 ))
    d=$base/$run_n
    mkdir -p "$d"
    ctl=$d/ssd.img.sock.control
    case $device in
      disk)
        # The data image adopted in place: its length back to the data, the metadata gone.
        truncate -s $((4 << 30)) "$data"
        "$tw" serve --create --ssd "$d/ssd.img" --hdd "$data" --ssd-size ${ssd_mib}MiB --policy "$a" "${serve_flags[@]}" >/dev/null
        ;;
      nbdkit)
        # Made on the plain image (the throttled file cannot grow by the metadata), then served
        # again with the HDD image behind the throttle. nbdkit counts this serve from start to
        # stop: the run, and a few commands of start-up reads and the final checkpoint.
        "$tw" serve --create --ssd "$d/ssd.img" --hdd "$d/hdd.img" --ssd-size ${ssd_mib}MiB --hdd-size 4GiB --policy "$a" >/dev/null
        stop_serve "$ctl"
        throttle_up "$d/hdd.img" "$d"
        "$tw" serve --ssd "$d/ssd.img" --hdd "$d/mnt/nbd" "${serve_flags[@]}" >/dev/null
        ;;
      *)
        "$tw" serve --create --ssd "$d/ssd.img" --hdd "$d/hdd.img" --ssd-size ${ssd_mib}MiB --hdd-size 8GiB --policy "$a" \
          "${serve_flags[@]}" >/dev/null
        ;;
    esac
    "$tw" stats "$ctl" --json > "$d/before.json"
    [ "$device" = disk ] && disk_stat > "$d/disk-before"
    "$tw" replay -q --nbd "nbd+unix:///?socket=$d/ssd.img.sock" "$slice" --workers 4 --json "$d/replay.json" \
      "${replay_flags[@]}" >/dev/null
    [ "$device" = disk ] && disk_stat > "$d/disk-after"
    "$tw" stats "$ctl" --json > "$d/after.json"
    stop_serve "$ctl"
    if [ "$device" = nbdkit ]; then throttle_down "$d"; rm -f "$d/hdd.img"; fi
    python3 - "$d" "$name" "$a" >> "$out" <<'PY'
import json, sys
d, name, arch = sys.argv[1:]
r = json.load(open(f"{d}/replay.json"))
b, a = json.load(open(f"{d}/before.json")), json.load(open(f"{d}/after.json"))
import os, re
def nbdkit_stats(path):
    """Read and write commands, bytes and milliseconds from nbdkit's stats filter."""
    units = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}
    cmds = size = ms = 0
    for line in open(path):
        m = re.match(r"(read|write): (\d+) ops, ([\d.]+) s, ([\d.]+) (B|KiB|MiB|GiB|TiB)", line)
        if m:
            cmds += int(m[2]); ms += float(m[3]) * 1e3; size += float(m[4]) * units[m[5]]
    return cmds, round(size), ms
def emulated_hdd(s):
    """The emulated HDD's counters in a `stats --json` answer (None on other devices)."""
    return next((x["stats"] for x in s.get("emulated_devices", []) if x["label"].startswith("hdd")), None)
def hdd(s, side):
    disk = f"{d}/disk-{side}"
    if os.path.exists(disk):  # the real disk's kernel counters: reads, writes, sectors, ms
        r, w, sectors, ms = map(int, open(disk).read().split())
        return r + w, sectors * 512, ms
    throttled = f"{d}/nbdkit-stats.txt"
    if os.path.exists(throttled):  # nbdkit's stats filter, written as it exited: the whole serve
        if side == "before":
            return 0, 0, 0
        return nbdkit_stats(throttled)
    e = emulated_hdd(s)
    return e["reads"] + e["writes"], e["read_bytes"] + e["write_bytes"], None
def flushes(s):
    """FLUSH CACHE commands the emulated HDD counted (None on other devices)."""
    e = emulated_hdd(s)
    return None if e is None else e.get("flushes", 0)
(c0, b0, t0), (c1, b1, t1) = hdd(b, "before"), hdd(a, "after")
f0, f1 = flushes(b), flushes(a)
def split(s):
    """The emulated HDD's reads and writes (commands), or None on other devices."""
    e = emulated_hdd(s)
    return None if e is None else (e["reads"], e["writes"])
m, p = r["measured"], r["predicted"] or {}
ph = p.get("hdd", {})
pc = ph.get("reads", 0) + ph.get("writes", 0)
# Mean time per disk command: on the disk, queueing included (the kernel's, as iostat's await,
# and the model's response time); behind nbdkit, the service alone (its stats filter sees a
# command once the one-at-a-time lock is taken, so against the model's busy time).
await_meas = round((t1 - t0) * 1e3 / max(c1 - c0, 1), 1) if t0 is not None else 0
model_ns = ph.get("busy_ns" if os.path.exists(f"{d}/nbdkit-stats.txt") else "response_ns", 0)
await_pred = round(model_ns / 1e3 / max(pc, 1), 1)
if split(a) is not None:
    (r0, w0), (r1, w1) = split(b), split(a)
    print(f"{name} {arch}: HDD reads / writes measured {r1 - r0} / {w1 - w0}, predicted "
          f"{ph.get('reads', 0)} / {ph.get('writes', 0)}", file=sys.stderr)
# Metadata commits (and those forced by slot pressure on the SSD only): the device's `stats`
# against the prediction's note.
dev_b, dev_a = b.get("device", {}), a.get("device", {})
if "commits" in dev_a:
    note = next((n for n in p.get("notes", []) if n.startswith("served device's metadata commits")), "")
    print(f"{name} {arch}: commits measured {dev_a['commits'] - dev_b.get('commits', 0)} "
          f"({dev_a.get('ssd_only_commits', 0) - dev_b.get('ssd_only_commits', 0)} SSD-only), "
          f"predicted {note.split(': ', 1)[-1] or '-'}", file=sys.stderr)
print("\t".join(str(x) for x in [
    name, arch, round(m["iops"], 1), round(p.get("iops", 0), 1),
    round(m["ssd_read_share"] * 100, 1), round(p.get("read_hit", {}).get("ssd", 0) * 100, 1),
    c1 - c0, pc,
    round((b1 - b0) / 1e6, 1), round((ph.get("read_bytes", 0) + ph.get("write_bytes", 0)) / 1e6, 1),
    await_meas, await_pred, "-" if f0 is None else f1 - f0, ph.get("flushes", 0)]))
PY
    tail -1 "$out"
  done
done
if [ "$device" = disk ]; then
  # The same image measured again (reads only): how far the disk moved during the runs.
  "$tw" calibrate -q "$data" --name disk-after > "${out%.tsv}-disk-calibration-after.txt" 2>/dev/null || true
  grep -E '^randread' "${out%.tsv}-disk-calibration-after.txt" | sed 's/^/after the runs: /' >&2 || true
fi
python3 - "$out" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
f = lambda r, k: float(r[k])
print("\n| trace | architecture | IOPS measured | predicted | ratio | SSD read % meas/pred | HDD cmds meas/pred | HDD MB meas/pred | HDD µs/cmd meas/pred | HDD flushes meas/pred |")
print("|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    ratio = f(r, "measured_iops") / max(f(r, "predicted_iops"), 1e-9)
    cmds = f(r, "measured_hdd_cmds") / max(f(r, "predicted_hdd_cmds"), 1)
    mb = f(r, "measured_hdd_mb") / max(f(r, "predicted_hdd_mb"), 1e-9)
    print(f"| {r['trace']} | {r['arch']} | {f(r,'measured_iops'):.0f} | {f(r,'predicted_iops'):.0f} | {ratio:.2f} | "
          f"{f(r,'measured_ssd_read'):.1f} / {f(r,'predicted_ssd_read'):.1f} | {r['measured_hdd_cmds']} / {r['predicted_hdd_cmds']} ({cmds:.2f}) | "
          f"{f(r,'measured_hdd_mb'):.1f} / {f(r,'predicted_hdd_mb'):.1f} ({mb:.2f}) | "
          f"{f(r,'measured_hdd_await_us') or '-'} / {f(r,'predicted_hdd_await_us')} | "
          f"{r['measured_hdd_flushes']} / {r['predicted_hdd_flushes']} |")
print("\nranking by IOPS (measured | predicted):")
for t in dict.fromkeys(r["trace"] for r in rows):
    rs = [r for r in rows if r["trace"] == t]
    meas = [r["arch"] for r in sorted(rs, key=lambda r: -f(r, "measured_iops"))]
    pred = [r["arch"] for r in sorted(rs, key=lambda r: -f(r, "predicted_iops"))]
    print(f"  {t}: {' > '.join(meas)} | {' > '.join(pred)}{'' if meas == pred else '   (differs)'}")
PY
