#!/usr/bin/env bash
# Real applications on a tierwise mount whose files migrate (a 24 MiB SSD quota for a ~60 MB
# database, moves rate-limited so that kills land inside them), with the mount daemon killed -9 mid-run:
#   - PostgreSQL: pgbench runs; the daemon is killed; PostgreSQL is killed (its files are on a
#     dead mount); the mount is remounted (its recovery finishes or rolls back the move that was
#     in flight); PostgreSQL restarts and replays its WAL; pgbench's invariant must hold: the sum
#     of the account, teller and branch balances each equals the sum of the history deltas.
#   - SQLite: transfers between accounts in transactions (the total never changes) and a
#     history row per transfer; killed the same way; then PRAGMA integrity_check must say ok and
#     the total and the history must agree.
#   - git: a clone of this repository onto the mount, then git fsck --full.
# Usage: [QUOTA=24MiB] ./scripts/apps-on-mount.sh [TRIALS] [POLICY]   (root, /dev/fuse; default 10
# trials under hycache, whose files move in every trial: created on the SSD, evicted at 90 %,
# moved back when opened)
# Installs postgresql, sqlite3 and git when missing (Debian/Ubuntu).
set -euo pipefail
cd "$(dirname "$0")/.."
trials=${1:-10}
policy=${2:-hycache}
# Smaller than the database (about 60 MB at pgbench scale 2 with its WAL): files keep moving.
quota=${QUOTA:-24MiB}
repo=$PWD

need=()
command -v git >/dev/null || need+=(git)
command -v sqlite3 >/dev/null || need+=(sqlite3)
pgbin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
[ -n "$pgbin" ] || need+=(postgresql postgresql-contrib)
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}"
  pgbin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
fi
# The Debian package starts a cluster of its own; ours runs on the mount, on another port.
# TIERWISE_BIN: a binary already built (the test suite's); else this builds one.
profile=${TIERWISE_PROFILE:-release}
if [ -z "${TIERWISE_BIN:-}" ]; then cargo build --profile "$profile" --locked -q -p tierwise -p tierwise-testkit; fi
bin=${TIERWISE_BIN:-$repo/target/$profile/tierwise}
# The shared test teardown (crates/testkit/src/teardown.rs).
teardown=$(dirname "$bin")/tierwise-teardown
[ -x "$teardown" ] || cargo build --profile "$profile" --locked -q -p tierwise-testkit

mkdir -p "${TIERWISE_TEST_ROOT:-/tmp}"
work=$(mktemp -d "${TIERWISE_TEST_ROOT:-/tmp}/tierwise-apps.XXXXXX")
chmod 755 "$work"
mnt=$work/mnt
sock=$work/sock
mkdir -p "$work/root/ssd" "$work/root/hdd" "$mnt" "$sock" "$work/log"
chown postgres "$sock" "$work/log"
daemon=""
export PGHOST=$sock PGPORT=5499 PGUSER=postgres PGDATABASE=postgres

say() { printf '\n== %s\n' "$*"; }
# Every call that can reach the mount has a deadline: a stuck mount fails the run, never hangs it.
pg() { timeout -k 5 120 su postgres -c "$*"; }
psql() { timeout -k 5 60 "$(type -P psql)" "$@"; }
pg_isready() { timeout -k 5 10 "$(type -P pg_isready)" "$@"; }

mount_fs() {
  local out
  # Moves at 20 MB/s: a table file takes a second or more, so kills land inside moves.
  out=$("$bin" mount --ssd-quota "$quota" --pin-reserve 0 --move-rate 20 --policy "$policy" --allow-other \
    "$work/root" "$mnt")
  daemon=$(sed -n 's/.*(pid \([0-9]*\)).*/\1/p' <<<"$out")
  [ -n "$daemon" ] || { echo "no daemon pid in: $out" >&2; exit 1; }
}

# The crash: kill -9 of the daemon (what the trial is about), then the shared teardown of the
# dead mount: its connection aborted, everything that had files open on it killed, detached.
crash() {
  kill -9 "$daemon" 2>/dev/null || true
  "$teardown" --mount "$mnt" >/dev/null || true
}

cleanup() {
  pg "$pgbin/pg_ctl -D $mnt/pg/data -m immediate stop" >/dev/null 2>&1 || true
  crash
  "$teardown" "$work" || true
  wait 2>/dev/null || true
  rm -rf --one-file-system "$work"
}
trap cleanup EXIT

# PostgreSQL runs as a child of this script (not daemonized by pg_ctl), so that a killed
# postmaster is reaped here: a zombie left to an init that does not reap (as in some
# containers) keeps its PID alive and the restarted server would refuse the stale lock file.
pg_pid=""
pg_start() {
  su postgres -c "exec $pgbin/postgres -D $mnt/pg/data -k $sock -p $PGPORT -c listen_addresses=" \
    >>"$work/log/pg.log" 2>&1 &
  pg_pid=$!
  for _ in $(seq 600); do
    pg_isready -q && return 0
    kill -0 "$pg_pid" 2>/dev/null || return 1
    sleep 0.2
  done
  return 1
}
pg_stop() {
  pg "$pgbin/pg_ctl -D $mnt/pg/data -m fast -w stop" >/dev/null 2>&1 || true
  wait "$pg_pid" 2>/dev/null || true
}

# pgbench's invariant: every balance column sums to the history's deltas.
pg_check() {
  local q="select (select sum(abalance) from pgbench_accounts) = (select coalesce(sum(delta),0) from pgbench_history)
    and (select sum(tbalance) from pgbench_tellers) = (select coalesce(sum(delta),0) from pgbench_history)
    and (select sum(bbalance) from pgbench_branches) = (select coalesce(sum(delta),0) from pgbench_history)
    and (select count(*) from pgbench_accounts) = 200000"
  [ "$(psql -qtA -c "$q")" = t ]
}

sqlite_work() {
  python3 - "$mnt/sqlite/bank.db" <<'PY'
import random, sqlite3, sys
db = sqlite3.connect(sys.argv[1], timeout=30)
db.execute("pragma journal_mode=wal")
db.execute("create table if not exists accounts(id integer primary key, bal integer not null)")
db.execute("create table if not exists history(id integer primary key, a integer, b integer, amount integer, pad blob)")
if db.execute("select count(*) from accounts").fetchone()[0] == 0:
    with db:
        db.executemany("insert into accounts values (?, 1000)", [(i,) for i in range(2000)])
while True:
    a, b = random.randrange(2000), random.randrange(2000)
    n = random.randrange(1, 50)
    with db:
        db.execute("update accounts set bal = bal - ? where id = ?", (n, a))
        db.execute("update accounts set bal = bal + ? where id = ?", (n, b))
        db.execute("insert into history(a, b, amount, pad) values (?, ?, ?, randomblob(2000))", (a, b, n))
PY
}

sqlite_check() {
  python3 - "$mnt/sqlite/bank.db" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
ok = db.execute("pragma integrity_check").fetchone()[0]
total = db.execute("select sum(bal), count(*) from accounts").fetchone()
rows = db.execute("select count(*) from history").fetchone()[0]
print(f"integrity_check={ok} total={total[0]} accounts={total[1]} transfers={rows}")
sys.exit(0 if ok == "ok" and total == (2_000_000, 2000) else 1)
PY
}

say "setup: $policy, SSD quota $quota, moves at 20 MB/s, PostgreSQL $("$pgbin/postgres" --version | awk '{print $3}')"
mount_fs
mkdir -p "$mnt/pg" "$mnt/sqlite"
chown postgres "$mnt/pg"
pg "$pgbin/initdb -D $mnt/pg/data -A trust -U postgres" >/dev/null
pg_start
timeout -k 5 300 pgbench -i -s 2 -q >/dev/null 2>&1
pg_check || { echo "pgbench invariant fails before any crash" >&2; exit 1; }
pg_stop

say "git clone + fsck on the mount"
timeout -k 5 300 git clone -q --no-hardlinks "$repo" "$mnt/repo"
timeout -k 5 300 git -C "$mnt/repo" fsck --full --no-progress --no-dangling && echo "git fsck: ok"
rm -rf "$mnt/repo"

failures=0
for t in $(seq 1 "$trials"); do
  pg_start
  timeout -k 5 150 pgbench -c 4 -j 2 -T 120 -n >/dev/null 2>&1 &
  bench=$!
  sqlite_work >/dev/null 2>&1 &
  lite=$!
  # Kill at a random moment 3-8 s in, while pages move between the tiers.
  sleep "$((3 + RANDOM % 6)).$((RANDOM % 10))"
  moves=$("$bin" stats "$mnt" 2>/dev/null |
    awk '/^promotions/ {n+=$2} /^demotions/ {n+=$2} /^copies into SSD/ {n+=$4} /^write-backs/ {n+=$2} END {print n}')
  crash
  wait "$pg_pid" 2>/dev/null || true
  wait "$bench" 2>/dev/null || true
  kill -9 "$lite" 2>/dev/null || true
  wait "$lite" 2>/dev/null || true
  mount_fs
  result="ok"
  if ! pg_start; then
    result="PostgreSQL did not restart (tail of its log below)"
    tail -5 "$work/log/pg.log"
  elif ! pg_check; then
    result="pgbench invariant BROKEN"
  fi
  txns=$(psql -qtA -c "select count(*) from pgbench_history" 2>/dev/null || echo "?")
  if ! lite_out=$(timeout -k 5 120 bash -c "$(declare -f sqlite_check); mnt='$mnt' sqlite_check"); then
    result="$result; SQLite BROKEN ($lite_out)"
  fi
  pg_stop
  printf 'trial %2d: killed after %s moves; pgbench transactions so far %s; %s; sqlite %s\n' \
    "$t" "${moves:-?}" "$txns" "$result" "$lite_out"
  [ "$result" = ok ] || failures=$((failures + 1))
  "$bin" umount "$mnt" >/dev/null 2>&1 || crash
  mount_fs
done

say "$trials trials, $failures with lost or corrupted data"
[ "$failures" -eq 0 ]
