#!/usr/bin/env bash
# The long trials: every kind of test the README suite (scripts/test-all.sh) runs a small real
# instance of, at full size. Run it before resolving an issue that touches their area;
# docs/TESTING.md lists what runs where, and how long it takes.
#
#   ./scripts/test-extended.sh [PART...]     (root, /dev/fuse, nbdkit; hours on 2 cores)
#
# PART: rust (the Rust tests at their extended sizes: TIERWISE_EXTENDED=1), apps (PostgreSQL,
# SQLite and git on a migrating mount, 10 kill -9 trials per policy), serve-crash (100 kill -9
# trials), rename-crash (200 trials per configuration, 50 git trials), crash-enumerate (the
# full crash-state enumeration of both front ends), races (fs-races.py), systemd (restart of the
# shipped unit). Without PART: all of them, in that order. Every part runs under a deadline, in
# a private mount namespace, with the shared teardown before and after.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${TIERWISE_TEST_NAMESPACE:-}" ] && [ "$(id -u)" = 0 ] && command -v unshare >/dev/null 2>&1; then
  export TIERWISE_TEST_NAMESPACE=1
  exec unshare --mount --propagation private "$0" "$@"
fi
profile=${TIERWISE_PROFILE:-ci}
export TIERWISE_PROFILE=$profile TIERWISE_EXTENDED=1
export TIERWISE_TEST_ROOT=${TIERWISE_TEST_ROOT:-/tmp/tierwise-tests-extended}
export TIERWISE_TEST_SHM_ROOT=${TIERWISE_TEST_SHM_ROOT:-/dev/shm/tierwise-tests-extended}
cargo build --workspace --profile "$profile" --locked
export TIERWISE_BIN=$PWD/target/$profile/tierwise
teardown=target/$profile/tierwise-teardown
"$teardown" "$TIERWISE_TEST_ROOT" "$TIERWISE_TEST_SHM_ROOT" || true
trap '"$teardown" "$TIERWISE_TEST_ROOT" "$TIERWISE_TEST_SHM_ROOT" || true' EXIT
mkdir -p "$TIERWISE_TEST_ROOT"

parts=("$@")
[ ${#parts[@]} -gt 0 ] || parts=(rust apps serve-crash rename-crash crash-enumerate races systemd)
times=()
for part in "${parts[@]}"; do
  printf '\n== extended: %s\n' "$part"
  t0=$(date +%s)
  case $part in
    # The tests that scale with TIERWISE_EXTENDED (tierwise_testkit::trials), at full size,
    # each under a 2-hour deadline.
    rust) ./scripts/run-tests.py --profile "$profile" --jobs 2 --deadline 7200 \
            --root "$TIERWISE_TEST_ROOT/rust" --shm-root "$TIERWISE_TEST_SHM_ROOT/rust" \
            mount_crash:: serve::kill_9 serve::a_hundred_thousand mount_rename_crash:: mount_security::a_racing_user \
            tierwise-block/differential::a_power_cut tierwise-block/subluns::a_power_cut ;;
    apps) for policy in hycache dynamic-hot-dst:sieve=0 file-write-back:sieve=0; do
            timeout -k 10 7200 ./scripts/apps-on-mount.sh 10 "$policy"
          done ;;
    serve-crash) timeout -k 10 7200 ./scripts/serve-crash.sh 100 ;;
    rename-crash) timeout -k 10 14400 ./scripts/rename-crash.sh 200 50 ;;
    crash-enumerate) timeout -k 10 36000 ./scripts/crash-enumerate.sh ;;
    races) timeout -k 10 3600 python3 scripts/fs-races.py --tierwise "$TIERWISE_BIN" ;;
    systemd) timeout -k 10 1800 ./scripts/systemd-restart.sh ;;
    *) echo "error: unknown part $part (allowed: rust apps serve-crash rename-crash crash-enumerate races systemd)" >&2; exit 2 ;;
  esac
  times+=("$(printf '%7d s  %s' $(($(date +%s) - t0)) "$part")")
done
printf '\n== time per part\n'
printf '%s\n' "${times[@]}"
