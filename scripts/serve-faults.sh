#!/usr/bin/env bash
# A served write-back device whose HDD fills up (ENOSPC), for real: the HDD image lives on a
# small tmpfs that another file fills after the device holds dirty data. Checks what an admin
# needs: after 10 s the server uses < 10 % of a core (failing write-backs are retried with
# back-off, not in a loop), `status` says DEGRADED with the reason, and reads are served.
# Then the space comes back and the dirty data is written back.
# Usage: ./scripts/serve-faults.sh   (root: it mounts a tmpfs)
set -euo pipefail
cd "$(dirname "$0")/.."
# TIERWISE_BIN: a binary already built (the test suite's); else this builds one.
profile=${TIERWISE_PROFILE:-release}
if [ -z "${TIERWISE_BIN:-}" ]; then cargo build --profile "$profile" --locked --quiet -p tierwise -p tierwise-nbd -p tierwise-testkit; fi
tw=${TIERWISE_BIN:-target/$profile/tierwise}
teardown=$(dirname "$tw")/tierwise-teardown
[ -x "$teardown" ] || cargo build --profile "$profile" --locked --quiet -p tierwise-testkit
mkdir -p "${TIERWISE_TEST_ROOT:-/tmp}"
work=$(mktemp -d "${TIERWISE_TEST_ROOT:-/tmp}/tierwise-serve-faults.XXXXXX")
hddfs="$work/hddfs"
mkdir -p "$hddfs"
mount -t tmpfs -o size=40m tmpfs "$hddfs"
# The shared teardown: the server (nbdkit and the plugin), the tmpfs, anything else in $work.
cleanup() {
  "$teardown" "$work" >/dev/null || true
  rm -rf --one-file-system "$work"
}
trap cleanup EXIT
$tw serve --create --ssd "$work/ssd.img" --ssd-size 24MiB --hdd "$hddfs/hdd.img" --hdd-size 32MiB \
  --policy cache:mode=write-back >/dev/null
pid=$(cat "$work/ssd.img.sock.control.pid")
uri="nbd+unix:///?socket=$work/ssd.img.sock"
timeout -k 5 120 qemu-io -f raw "$uri" -c 'write -P 0x5a 0 16M' -c flush >/dev/null
# The HDD's file system fills up: every write-back of the 16 MiB of dirty data now fails.
dd if=/dev/zero of="$hddfs/filler" bs=1M 2>/dev/null || true
timeout 60 $tw flush "$work/ssd.img.sock.control" || true
ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
hz=$(getconf CLK_TCK)
sleep 10
t0=$(ticks); sleep 10; t1=$(ticks)
cpu=$(awk -v d=$((t1 - t0)) -v hz="$hz" 'BEGIN { printf "%.1f", 100 * d / hz / 10 }')
status=$($tw status "$work/ssd.img.sock.control")
echo "$status" | grep -E '^(health|io errors|ssd) ' || true
echo "server CPU over 10 s, after 10 s of failing write-backs: ${cpu} % of a core"
fail=0
awk -v c="$cpu" 'BEGIN { exit !(c < 10) }' || { echo "FAIL: the server uses ${cpu} % of a core (limit 10 %)"; fail=1; }
echo "$status" | grep -q 'health     DEGRADED: HDD image writes fail' || { echo "FAIL: status does not say DEGRADED with the reason"; fail=1; }
timeout -k 5 120 qemu-io -f raw "$uri" -c 'read -P 0x5a 0 16M' | grep -q 'read 16777216' || { echo "FAIL: reads are not served"; fail=1; }
echo "reads of the dirty data served"
# Space comes back: the dirty data reaches the HDD.
rm -f "$hddfs/filler"
timeout -k 5 120 $tw flush "$work/ssd.img.sock.control" >/dev/null || { echo "FAIL: write-back did not resume"; fail=1; }
$tw status "$work/ssd.img.sock.control" | grep -E '^ssd ' || true
[ "$fail" = 0 ] && echo "PASS"
exit "$fail"
