#!/usr/bin/env bash
# Runs the whole test suite as CI does, installing what it needs first.
# Usage: ./scripts/test-all.sh
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '\n== %s\n' "$*"; }

# --- toolchain -----------------------------------------------------------------------------
if ! command -v cargo >/dev/null 2>&1; then
  if [ -x "$HOME/.cargo/bin/cargo" ]; then
    export PATH="$HOME/.cargo/bin:$PATH"
  else
    echo "error: Rust is not installed. Install it with rustup (https://rustup.rs), then re-run." >&2
    exit 1
  fi
fi
need="1.90"
have=$(rustc --version | awk '{print $2}')
if [ "$(printf '%s\n%s\n' "$need" "$have" | sort -V | head -1)" != "$need" ]; then
  echo "error: rustc $have is older than $need; run 'rustup update stable'." >&2
  exit 1
fi

# --- system packages (Debian/Ubuntu) -----------------------------------------------------
# The simulator and CLI need only a C compiler (zstd is built from source by its crate). The
# mount tests need FUSE: /dev/fuse and, for unprivileged mounts, fusermount3 (package fuse3);
# they run fio and postmark on the mount.
need_pkgs=()
command -v cc >/dev/null 2>&1 || need_pkgs+=(build-essential)
command -v pkg-config >/dev/null 2>&1 || need_pkgs+=(pkg-config)
command -v fusermount3 >/dev/null 2>&1 || need_pkgs+=(fuse3)
# Real tools run on the mount by the tests: fio (with --verify) and postmark.
command -v fio >/dev/null 2>&1 || need_pkgs+=(fio)
command -v postmark >/dev/null 2>&1 || need_pkgs+=(postmark)
# The race test acts as nobody (setpriv, util-linux); the shipped systemd unit is checked with
# systemd-analyze (package systemd).
command -v setpriv >/dev/null 2>&1 || need_pkgs+=(util-linux)
command -v systemd-analyze >/dev/null 2>&1 || need_pkgs+=(systemd)
# tierwise serve runs under nbdkit; its tests attach qemu-io (qemu-utils) and nbdfuse
# (libnbd-bin), and put ext4 on the device (e2fsprogs).
command -v nbdkit >/dev/null 2>&1 || need_pkgs+=(nbdkit)
command -v qemu-io >/dev/null 2>&1 || need_pkgs+=(qemu-utils)
command -v nbdfuse >/dev/null 2>&1 || need_pkgs+=(libnbd-bin)
command -v mkfs.ext4 >/dev/null 2>&1 || need_pkgs+=(e2fsprogs)
# The HTML report is opened in a real headless browser, with the font its charts name.
command -v chromium-headless-shell >/dev/null 2>&1 || need_pkgs+=(chromium-headless-shell)
[ -e /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] || need_pkgs+=(fonts-dejavu-core)
if [ ${#need_pkgs[@]} -gt 0 ]; then
  say "installing ${need_pkgs[*]}"
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_pkgs[@]}"
fi

rustup component add clippy rustfmt >/dev/null 2>&1 || true

# --- a private mount namespace -------------------------------------------------------------
# Nothing the tests mount can outlive the run or be seen outside it: every mount they make is in
# this namespace, which goes away with its last process (the teardown kills those of the tests).
if [ -z "${TIERWISE_TEST_NAMESPACE:-}" ] && [ "$(id -u)" = 0 ] && command -v unshare >/dev/null 2>&1; then
  export TIERWISE_TEST_NAMESPACE=1
  exec unshare --mount --propagation private "$0" "$@"
fi

# --- every step timed ----------------------------------------------------------------------
profile=ci
bin_dir=target/$profile
tw=$bin_dir/tierwise
teardown=$bin_dir/tierwise-teardown
# Everything the tests and scripts make lives under these two roots (the runner gives each test
# a directory of its own in them); the teardown sweeps them before and after the run.
export TIERWISE_TEST_ROOT=/tmp/tierwise-tests TIERWISE_TEST_SHM_ROOT=/dev/shm/tierwise-tests
export TIERWISE_PROFILE=$profile TIERWISE_BIN=$PWD/$tw
steps=()
run_start=$(date +%s)
step() { # step NAME DEADLINE_S COMMAND...: runs COMMAND under a deadline, records its time
  local name=$1 deadline=$2 t0 rc
  shift 2
  say "$name"
  t0=$(date +%s)
  set +e
  timeout -k 10 "$deadline" "$@"
  rc=$?
  set -e
  steps+=("$(printf '%6d s  %s' $(($(date +%s) - t0)) "$name")")
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    echo "error: step \"$name\" passed its deadline of $deadline s" >&2
  fi
  if [ "$rc" != 0 ]; then
    report
    echo "FAILED: $name (exit $rc)" >&2
    exit "$rc"
  fi
}
report() {
  printf '\n== time per step\n'
  printf '%s\n' "${steps[@]}"
  printf '%6d s  total\n' $(($(date +%s) - run_start))
}
clean_before() { # what earlier runs left under the test roots (by directory, never by process name)
  local said
  said=$("$teardown" "$TIERWISE_TEST_ROOT" "$TIERWISE_TEST_SHM_ROOT") || true
  if [ -n "$said" ]; then echo "removed:"; echo "$said"; else echo "nothing left by an earlier run"; fi
  rm -rf --one-file-system "$TIERWISE_TEST_ROOT" "$TIERWISE_TEST_SHM_ROOT"
}
export -f clean_before; export teardown

# --- checks --------------------------------------------------------------------------------
step "format" 120 cargo fmt --all -- --check
step "clippy (warnings are errors)" 1800 cargo clippy --workspace --all-targets --profile $profile --locked -- -D warnings
# One build of everything in one profile: the CLI, the plugin, the Python module, the tests.
step "build (profile $profile: the CLI, the nbdkit plugin, the Python module, every test binary)" 2400 \
  sh -c "cargo build --workspace --profile $profile --locked && cargo test --workspace --profile $profile --locked --no-run -q"

check_plugin() {
  local plugin=$bin_dir/libtierwise_nbd.so missing dump
  missing=$(comm -23 <(nm -D --undefined-only "$plugin" | awk '{print $2}' | grep '^nbdkit_' | sort -u) \
                     <(nm -D --defined-only "$(command -v nbdkit)" | awk '{print $3}' | grep '^nbdkit_' | sort -u))
  if [ -n "$missing" ]; then echo "error: the plugin needs symbols nbdkit lacks: $missing" >&2; return 1; fi
  dump=$(nbdkit --dump-plugin "$plugin")
  grep -q '^thread_model=parallel$' <<<"$dump" || { echo "error: nbdkit does not load the plugin as parallel:" >&2; echo "$dump" >&2; return 1; }
  echo "loads in nbdkit, thread_model=parallel"
}
export -f check_plugin; export bin_dir
step "the nbdkit plugin (loads in nbdkit; binds only symbols nbdkit exports)" 60 bash -c check_plugin

step "clean before: mounts, loop devices and processes left under the test roots by an earlier run" 120 \
  bash -c clean_before

# Each test in its own process and directories, several at once, 120 s each at most; see
# scripts/run-tests.py. The long trials run in scripts/test-extended.sh (docs/TESTING.md).
step "tests (each under a 120 s deadline, torn down after it)" 2400 \
  ./scripts/run-tests.py --profile $profile --root "$TIERWISE_TEST_ROOT/rust" --shm-root "$TIERWISE_TEST_SHM_ROOT/rust"

hang_check() {
  local out rc
  set +e
  out=$(./scripts/run-tests.py --profile "$TIERWISE_PROFILE" --ignored --deadline 5 --root "$TIERWISE_TEST_ROOT/hang" --results "$TIERWISE_TEST_ROOT/hang.json" \
        --shm-root "$TIERWISE_TEST_SHM_ROOT/hang" tierwise-testkit/lib:tierwise_testkit::tests::hangs_on_purpose 2>&1)
  rc=$?
  set -e
  grep -E '^TIMEOUT|killed -9' <<<"$out" || true
  if [ "$rc" = 0 ] || ! grep -q '^TIMEOUT tierwise-testkit/lib:tierwise_testkit::tests::hangs_on_purpose' <<<"$out" \
     || ! grep -q 'killed -9 pid [0-9]*: sleep 100000' <<<"$out"; then
    echo "error: the hung test was not failed at its deadline and torn down:" >&2; echo "$out" >&2; return 1
  fi
  echo "a hung test fails at its deadline, naming itself, and its helper process is killed"
}
export -f hang_check
step "the runner's deadline: a test that hangs on purpose fails, named, within it" 60 bash -c hang_check
step "doc tests" 600 cargo test --workspace --doc --profile $profile --locked -q

say_tail() { "$@" | tail -1; }
export -f say_tail
# In a virtual environment of its own: Debian's system Python refuses pip installs (PEP 668).
venv=target/py-venv
make_venv() {
  if [ ! -x "$venv/bin/python" ]; then
    if ! python3 -m venv "$venv" >/dev/null 2>&1; then
      if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
      $SUDO apt-get update -qq
      DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-venv
      rm -rf "$venv"
      python3 -m venv "$venv"
    fi
  fi
}
make_venv
step "collectors against libCacheSim (PyPI libcachesim, every bundled trace, object and byte mode)" 900 bash -c "
  '$venv/bin/python' -m pip install --quiet --disable-pip-version-check 'libcachesim==0.3.5' &&
  '$venv/bin/python' scripts/libcachesim_diff.py '$tw' | tail -1"

# maturin builds the wheel in the same target directory and profile as the build above, so it
# links the module compiled there instead of compiling the crates a third time.
step "the Python package: built by maturin, installed by pip" 900 bash -c "
  '$venv/bin/python' -m pip install --quiet --disable-pip-version-check 'maturin>=1.16,<2' &&
  rm -rf target/wheels &&
  '$venv/bin/maturin' build --quiet --profile $profile --locked -m python/Cargo.toml --out target/wheels &&
  '$venv/bin/python' -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps target/wheels/tierwise-*.whl &&
  '$venv/bin/python' -m pip install --quiet --disable-pip-version-check \"\$(ls target/wheels/tierwise-*.whl)[dask,polars,test]\""
mkdir -p "$TIERWISE_TEST_ROOT/python"
step "the Python package: API against the CLI, sweeps on Dask and local processes, the report in Chromium" 900 \
  env TMPDIR="$TIERWISE_TEST_ROOT/python" "$venv/bin/python" -m pytest -q -p no:cacheprovider python/tests

# A missing prerequisite fails the run (as every test does; see crates/testkit).
if [ ! -e /dev/fuse ] && [ "${TIERWISE_ALLOW_SKIP:-}" != 1 ]; then
  echo "error: /dev/fuse is missing; the mount tests need FUSE (TIERWISE_ALLOW_SKIP=1 skips them)" >&2
  exit 1
elif [ -e /dev/fuse ]; then
  # The full run is ten trials or more per policy: ./scripts/apps-on-mount.sh 10 POLICY.
  step "real applications on a migrating mount, daemon killed -9 (PostgreSQL, SQLite, git; 1 trial)" 600 \
    bash -c './scripts/apps-on-mount.sh 1 hycache | tail -4'
else
  echo "SKIPPED (TIERWISE_ALLOW_SKIP=1): /dev/fuse is missing"
fi

step "a served write-back device whose HDD fills up: back-off, DEGRADED with the reason, reads served, write-back resumes" 300 \
  ./scripts/serve-faults.sh

step "clean after: nothing left under the test roots" 120 bash -c "
  if ! '$teardown' --check '$TIERWISE_TEST_ROOT' '$TIERWISE_TEST_SHM_ROOT'; then
    echo 'error: the run left the above; tearing it down' >&2; '$teardown' '$TIERWISE_TEST_ROOT' '$TIERWISE_TEST_SHM_ROOT'; exit 1
  fi
  rm -rf --one-file-system '$TIERWISE_TEST_ROOT' '$TIERWISE_TEST_SHM_ROOT'
  echo 'no mount, loop device or process left'"

report
say "all tests passed"
