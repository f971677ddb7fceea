#!/usr/bin/env bash
# kill -9 of `tierwise serve` while blocks move, TRIALS times (default 100): each trial writes
# and flushes through qemu-io on a 512 KiB SSD (copies, evictions and write-backs all the time),
# kills the server at a random moment, restarts it and checks that every byte written and
# flushed before the kill reads back. CI runs 10 trials (the `serve` test).
# Usage: ./scripts/serve-crash.sh [TRIALS]
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --profile "${TIERWISE_PROFILE:-ci}" --locked --quiet -p tierwise -p tierwise-nbd
TIERWISE_SERVE_CRASH_TRIALS=${1:-100} cargo test --profile "${TIERWISE_PROFILE:-ci}" --locked -p tierwise --test serve -- --exact \
  kill_9_while_blocks_move_loses_no_flushed_byte --nocapture
