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

# --- checks --------------------------------------------------------------------------------
say "format"
cargo fmt --all -- --check

say "clippy (warnings are errors)"
cargo clippy --workspace --all-targets --release --locked -- -D warnings

say "the nbdkit plugin (loads in nbdkit; binds only symbols nbdkit exports)"
cargo build --release --locked -p tierwise-nbd
plugin=target/release/libtierwise_nbd.so
missing=$(comm -23 <(nm -D --undefined-only "$plugin" | awk '{print $2}' | grep '^nbdkit_' | sort -u) \
                   <(nm -D --defined-only "$(command -v nbdkit)" | awk '{print $3}' | grep '^nbdkit_' | sort -u))
if [ -n "$missing" ]; then echo "error: the plugin needs symbols nbdkit lacks: $missing" >&2; exit 1; fi
dump=$(nbdkit --dump-plugin "$plugin")
grep -q '^thread_model=parallel$' <<<"$dump" || { echo "error: nbdkit does not load the plugin as parallel:" >&2; echo "$dump" >&2; exit 1; }

say "tests (release build: the differential and property tests replay real traces)"
cargo test --workspace --release --locked

say "collectors against libCacheSim (PyPI libcachesim, every bundled trace, object and byte mode)"
# In a virtual environment of its own: Debian's system Python refuses pip installs (PEP 668).
venv=target/py-venv
if [ ! -x "$venv/bin/python" ]; then
  if ! python3 -m venv "$venv" >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-venv
    rm -rf "$venv"
    python3 -m venv "$venv"
  fi
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check 'libcachesim==0.3.5'
"$venv/bin/python" scripts/libcachesim_diff.py target/release/tierwise | tail -1

say "the Python package: API against the CLI, sweeps on Dask and local processes, the report in Chromium"
# pip builds the PyO3 module with maturin (release, abi3) from this checkout.
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check './python[dask,polars,test]'
TIERWISE_BIN=target/release/tierwise "$venv/bin/python" -m pytest -q -p no:cacheprovider python/tests

say "real applications on a migrating mount, daemon killed -9 (PostgreSQL, SQLite, git; 2 trials)"
# The full run is ten trials or more per policy: ./scripts/apps-on-mount.sh 10 POLICY.
# A missing prerequisite fails the run (as every test does; see crates/testkit).
if [ ! -e /dev/fuse ] && [ "${TIERWISE_ALLOW_SKIP:-}" != 1 ]; then
  echo "error: /dev/fuse is missing; the mount tests need FUSE (TIERWISE_ALLOW_SKIP=1 skips them)" >&2
  exit 1
elif [ -e /dev/fuse ]; then
  ./scripts/apps-on-mount.sh 2 hycache | tail -4
else
  echo "SKIPPED (TIERWISE_ALLOW_SKIP=1): /dev/fuse is missing"
fi

say "a served write-back device whose HDD fills up: back-off, DEGRADED with the reason, reads served, write-back resumes"
./scripts/serve-faults.sh

say "all tests passed"
