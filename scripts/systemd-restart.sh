#!/usr/bin/env bash
# The shipped way to run a mount under systemd (Type=notify, Restart=on-failure, as
# contrib/systemd/tierwise@.service) brings the mount back after its daemon is killed -9.
# Where systemd is not the init (containers, CI), a systemd of its own runs as PID 1 in private
# PID, mount and cgroup namespaces, with private /run, /tmp and /var/tmp, starting only the test
# unit (no sysinit: nothing of the host's is touched). Checks: the unit mounts, a file written
# through the mount survives kill -9 of the daemon, systemd restarts the unit, and the same
# ExecStart mounts again over the dead mount (its stale endpoint detached).
# Usage: ./scripts/systemd-restart.sh   (root)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --profile "${TIERWISE_PROFILE:-ci}" --locked --quiet -p tierwise
tw=$PWD/target/${TIERWISE_PROFILE:-ci}/tierwise
systemd=/usr/lib/systemd/systemd
[ -x "$systemd" ] || { echo "error: $systemd is missing (apt-get install systemd)" >&2; exit 1; }
mkdir -p target
# Outside /tmp: the namespace mounts its own /tmp over the host's.
log=$(mktemp -p "$PWD/target")
unit_dir=$(mktemp -d -p "$PWD/target")
cat > "$unit_dir/tierwise-test.service" <<UNIT
[Unit]
Description=tierwise test mount
DefaultDependencies=no
[Service]
Type=notify
NotifyAccess=main
ExecStart=$tw mount --foreground --policy file-write-back /run/tw/root /run/tw/mnt
KillMode=mixed
Restart=on-failure
RestartSec=1s
StandardOutput=append:/run/tw/daemon.log
StandardError=append:/run/tw/daemon.log
UNIT
cat > "$unit_dir/tw-test.target" <<UNIT
[Unit]
Description=tierwise restart test
DefaultDependencies=no
Wants=tierwise-test.service
UNIT
# PID 1 of its own namespaces; /run, /tmp, /var/tmp private tmpfs.
unshare --pid --fork --mount --mount-proc --cgroup --propagation private sh -c "
  mount -t tmpfs tmpfs /run && mount -t tmpfs tmpfs /tmp && mount -t tmpfs tmpfs /var/tmp &&
  mount -t cgroup2 cgroup2 /sys/fs/cgroup 2>/dev/null;
  mkdir -p /run/systemd/system /run/tw/root/ssd /run/tw/root/hdd /run/tw/mnt &&
  cp $unit_dir/* /run/systemd/system/ &&
  exec $systemd --system --unit=tw-test.target --log-target=console --log-level=warning" >"$log" 2>&1 &
ushare=$!
cleanup() {
  [ -n "${pid1:-}" ] && kill -9 "$pid1" 2>/dev/null || true
  kill "$ushare" 2>/dev/null || true
  rm -rf "$unit_dir" "$log"
}
trap cleanup EXIT
pid1=""
for _ in $(seq 100); do
  pid1=$(pgrep -f -n "^$systemd --system --unit=tw-test.target" || true)
  [ -n "$pid1" ] && break
  sleep 0.1
done
[ -n "$pid1" ] || { echo "FAIL: systemd did not start"; cat "$log"; exit 1; }
inside() { nsenter -t "$pid1" -m -p -- "$@"; }
wait_active() {
  for _ in $(seq 150); do
    if inside systemctl is-active --quiet tierwise-test.service 2>/dev/null && inside stat -f /run/tw/mnt 2>/dev/null | grep -q fuseblk\\\|fuse; then
      return 0
    fi
    sleep 0.1
  done
  return 1
}
wait_active || { echo "FAIL: the unit did not mount"; inside systemctl status tierwise-test.service || true; cat "$log"; exit 1; }
echo "mounted by systemd: $(inside systemctl show -p MainPID tierwise-test.service)"
inside sh -c 'echo survives > /run/tw/mnt/kept && sync /run/tw/mnt/kept'
main=$(inside systemctl show -p MainPID --value tierwise-test.service)
inside kill -9 "$main"
echo "killed the daemon (pid $main in the namespace) with SIGKILL"
sleep 0.5
wait_active || { echo "FAIL: systemd did not bring the mount back"; inside systemctl status tierwise-test.service || true; inside cat /run/tw/daemon.log || true; exit 1; }
again=$(inside systemctl show -p MainPID --value tierwise-test.service)
restarts=$(inside systemctl show -p NRestarts --value tierwise-test.service)
got=$(inside cat /run/tw/mnt/kept)
echo "restarted: new pid $again, NRestarts=$restarts, kept reads '$got'"
[ "$again" != "$main" ] && [ "$got" = survives ] && [ "$restarts" -ge 1 ] || { echo FAIL; exit 1; }
echo PASS
