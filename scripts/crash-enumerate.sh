#!/usr/bin/env bash
# The full crash-state enumeration of both front ends: every operation alone and every ordered
# pair (ACE's seq-1 and seq-2), a kill -9 after every call the daemon makes on the tiers and
# power cuts keeping every prefix of each tier's calls since its last sync (the mount), and a
# kill -9 and power cuts after every image write and sync (the served device, every servable
# architecture). Prints the states tried and the violations found (both must be 0 violations).
# CI runs a bounded sample of the same tests (about 2,000 mount states and 19,000 device states).
# Usage: ./scripts/crash-enumerate.sh [mount|block]   (root, /dev/fuse; hours on 2 cores)
# TIERWISE_CRASH_SHARD=i/n runs every n-th mount workload from the i-th.
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-all}
if [ "$what" = all ] || [ "$what" = mount ]; then
  TIERWISE_CRASH_SCOPE=full cargo test --profile "${TIERWISE_PROFILE:-ci}" --locked -p tierwise-fs --test crash_states -- --nocapture 2>&1 \
    | grep -E '^\[|VIOLATION|^mount:|test result'
fi
if [ "$what" = all ] || [ "$what" = block ]; then
  TIERWISE_CRASH_SCOPE=full cargo test --profile "${TIERWISE_PROFILE:-ci}" --locked -p tierwise-block --test crash_states -- --nocapture 2>&1 \
    | grep -E 'crash states|VIOLATION|^block device:|test result'
fi
