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
# TIERWISE_BIN runs another build (a baseline) for the serving, replay and prediction.
# Usage: [TIERWISE_BIN=path] [HEAD=10000] [ARCHS="hdd-only cache:mode=write-back ..."]
#        [TRACES="file ..."] [OUT=target/validate-serve.tsv]
#        [NBD_CORES=n] [DIRECT=1 [HDD_DIR=dir] [PRESETS=file] [REQUEST_COST=duration]]
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
  for f in "$base"/*/*.pid; do [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null || true; done
  sleep 0.3; rm -rf "$base"
}
trap cleanup EXIT
direct=${DIRECT:-0}
serve_flags=(--emulate-hdd wd5000aaks --emulate-ssd vertex3)
replay_flags=()
if [ "$direct" = 1 ]; then
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
    mkdir -p "$base/mem" && "$tw" calibrate -q "$base/mem" --kind ssd --size 1GiB --name memory -o "$base/memory.toml" > "$base/memory.txt"
    cat "$base/disk.toml" "$base/memory.toml" > "$presets"
    cp "$base/disk.txt" "${out%.tsv}-disk-calibration.txt"
  fi
  if grep -q '^\[hdd.disk\]' "$presets"; then slow=disk; else slow=ssd:disk; fi
  serve_flags=(--direct)
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
    kill "$(cat "$fe/ssd.img.sock.control.pid")" 2>/dev/null || true
    cost=$(python3 -c "import json; r = json.load(open('$fe/replay.json')); print(max(0, round(r['measured']['p50_us'] - r['predicted']['latency']['p50_us'])))")us
  fi
  replay_flags=(--devices "$presets" --hdd "$slow" --ssd-model memory --hdd-queue "$queue" --nbd-request-cost "$cost")
  echo "direct I/O: the NBD path's own time per request $cost (measured in memory, QD1 4 KiB reads)" >&2
  echo "direct I/O: HDD image on $dev ($queue), presets $presets (slow level: $slow)" >&2
fi
# NBD_CORES: the prediction's --nbd-cores (default: this host's cores).
if [ -n "${NBD_CORES:-}" ]; then replay_flags+=(--nbd-cores "$NBD_CORES"); fi
# Reads, writes, sectors, and the milliseconds they spent in the block layer and the disk.
disk_stat() { awk '{print $1, $5, $3 + $7, $4 + $8}' "/sys/block/$dev/stat"; }
printf 'trace\tarch\tmeasured_iops\tpredicted_iops\tmeasured_ssd_read\tpredicted_ssd_read\tmeasured_hdd_cmds\tpredicted_hdd_cmds\tmeasured_hdd_mb\tpredicted_hdd_mb\tmeasured_hdd_await_us\tpredicted_hdd_await_us\n' > "$out"
for t in $traces; do
  name=$(basename "$t"); name=${name%%.*}
  slice=$base/$name.spc
  "$slicer" trace merge -q "$t" --head "$head_n" -o "$slice" >/dev/null
  fp=$("$slicer" trace stat "$slice" --json | python3 -c "import json,sys; print(json.load(sys.stdin)['footprint_bytes'])")
  ssd_mib=$(( (fp / 4 + (1 << 20) - 1) >> 20 ))
  [ "$ssd_mib" -ge 2 ] || ssd_mib=2
  for a in $archs; do
    d=$base/${a//[^a-zA-Z0-9-]/_}-$name
    mkdir -p "$d"
    if [ "$direct" = 1 ]; then
      # The data image adopted in place: its length back to the data, the metadata gone.
      truncate -s $((4 << 30)) "$data"
      "$tw" serve --create --ssd "$d/ssd.img" --hdd "$data" --ssd-size ${ssd_mib}MiB --policy "$a" "${serve_flags[@]}" >/dev/null
    else
      "$tw" serve --create --ssd "$d/ssd.img" --hdd "$d/hdd.img" --ssd-size ${ssd_mib}MiB --hdd-size 8GiB --policy "$a" \
        "${serve_flags[@]}" >/dev/null
    fi
    ctl=$d/ssd.img.sock.control
    "$tw" stats "$ctl" --json > "$d/before.json"
    [ "$direct" = 1 ] && disk_stat > "$d/disk-before"
    "$tw" replay -q --nbd "nbd+unix:///?socket=$d/ssd.img.sock" "$slice" --workers 4 --json "$d/replay.json" \
      "${replay_flags[@]}" >/dev/null
    [ "$direct" = 1 ] && disk_stat > "$d/disk-after"
    "$tw" stats "$ctl" --json > "$d/after.json"
    pid=$(cat "$ctl.pid"); kill "$pid" 2>/dev/null || true
    while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
    python3 - "$d" "$name" "$a" >> "$out" <<'PY'
import json, sys
d, name, arch = sys.argv[1:]
r = json.load(open(f"{d}/replay.json"))
b, a = json.load(open(f"{d}/before.json")), json.load(open(f"{d}/after.json"))
import os
def hdd(s, side):
    disk = f"{d}/disk-{side}"
    if os.path.exists(disk):  # the real disk's kernel counters: reads, writes, sectors, ms
        r, w, sectors, ms = map(int, open(disk).read().split())
        return r + w, sectors * 512, ms
    e = next(x["stats"] for x in s["emulated_devices"] if x["label"].startswith("hdd"))
    return e["reads"] + e["writes"], e["read_bytes"] + e["write_bytes"], None
(c0, b0, t0), (c1, b1, t1) = hdd(b, "before"), hdd(a, "after")
m, p = r["measured"], r["predicted"] or {}
ph = p.get("hdd", {})
pc = ph.get("reads", 0) + ph.get("writes", 0)
# Mean time per disk command, queueing included: the kernel's (iostat's await) and the model's.
await_meas = round((t1 - t0) * 1e3 / max(c1 - c0, 1), 1) if t0 is not None else 0
await_pred = round(ph.get("response_ns", 0) / 1e3 / max(pc, 1), 1)
print("\t".join(str(x) for x in [
    name, arch, round(m["iops"], 1), round(p.get("iops", 0), 1),
    round(m["ssd_read_share"] * 100, 1), round(p.get("read_hit", {}).get("ssd", 0) * 100, 1),
    c1 - c0, pc,
    round((b1 - b0) / 1e6, 1), round((ph.get("read_bytes", 0) + ph.get("write_bytes", 0)) / 1e6, 1),
    await_meas, await_pred]))
PY
    tail -1 "$out"
  done
done
if [ "$direct" = 1 ]; then
  # The same image measured again (reads only): how far the disk moved during the runs.
  "$tw" calibrate -q "$data" --name disk-after > "${out%.tsv}-disk-calibration-after.txt" 2>/dev/null || true
  grep -E '^randread' "${out%.tsv}-disk-calibration-after.txt" | sed 's/^/after the runs: /' >&2 || true
fi
python3 - "$out" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
f = lambda r, k: float(r[k])
print("\n| trace | architecture | IOPS measured | predicted | ratio | SSD read % meas/pred | HDD cmds meas/pred | HDD MB meas/pred | HDD µs/cmd meas/pred |")
print("|---|---|---|---|---|---|---|---|---|")
for r in rows:
    ratio = f(r, "measured_iops") / max(f(r, "predicted_iops"), 1e-9)
    cmds = f(r, "measured_hdd_cmds") / max(f(r, "predicted_hdd_cmds"), 1)
    mb = f(r, "measured_hdd_mb") / max(f(r, "predicted_hdd_mb"), 1e-9)
    print(f"| {r['trace']} | {r['arch']} | {f(r,'measured_iops'):.0f} | {f(r,'predicted_iops'):.0f} | {ratio:.2f} | "
          f"{f(r,'measured_ssd_read'):.1f} / {f(r,'predicted_ssd_read'):.1f} | {r['measured_hdd_cmds']} / {r['predicted_hdd_cmds']} ({cmds:.2f}) | "
          f"{f(r,'measured_hdd_mb'):.1f} / {f(r,'predicted_hdd_mb'):.1f} ({mb:.2f}) | "
          f"{f(r,'measured_hdd_await_us') or '-'} / {f(r,'predicted_hdd_await_us')} |")
print("\nranking by IOPS (measured | predicted):")
for t in dict.fromkeys(r["trace"] for r in rows):
    rs = [r for r in rows if r["trace"] == t]
    meas = [r["arch"] for r in sorted(rs, key=lambda r: -f(r, "measured_iops"))]
    pred = [r["arch"] for r in sorted(rs, key=lambda r: -f(r, "predicted_iops"))]
    print(f"  {t}: {' > '.join(meas)} | {' > '.join(pred)}{'' if meas == pred else '   (differs)'}")
PY
