#!/usr/bin/env bash
# kill -9 of the mount daemon while three writers save files the way editors, git and databases
# do (write a temporary, fsync, rename over the target, fsync the directory), TRIALS times
# (default 200) for each policy family (caching, DST, write-back, HyCache) with passthrough on
# and off; then a `git commit` loop killed -9 GIT_TRIALS times (default 50), each repository
# checked with `git fsck`. Prints lost targets and broken repositories (both must be 0).
# Usage: ./scripts/rename-crash.sh [TRIALS] [GIT_TRIALS]   (root, /dev/fuse; TIERWISE_BIN=path:
# the same trials against another build)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --profile "${TIERWISE_PROFILE:-ci}" --locked --quiet -p tierwise
TIERWISE_RENAME_TRIALS=${1:-200} cargo test --profile "${TIERWISE_PROFILE:-ci}" --locked -p tierwise --test mount_rename_crash -- --nocapture 2>&1 \
  | grep -E 'passthrough|test result|panicked|lost|wrong'
TIERWISE_GIT_TRIALS=${2:-50} ./scripts/git-crash.sh
