#!/usr/bin/env bash
# Runs every fuzz target for SECONDS each (default 60): the trace readers, seeded from the
# bundled traces, and the block device's on-disk decoders (checkpoint, device_open). Needs a nightly toolchain and cargo-fuzz (installed here if missing).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
rustup toolchain list | grep -q nightly || rustup toolchain install nightly --profile minimal
command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz --locked
# A seed already there is kept; its input is still read to the end, or the writer would die of
# SIGPIPE and end the script (a second run used to stop here silently).
seed() {
  mkdir -p "fuzz/corpus/$1"
  if [ -e "fuzz/corpus/$1/seed" ]; then cat > /dev/null; else cat > "fuzz/corpus/$1/seed"; fi
}
# The start of a file, compressed or not. The reader is cut off once head has enough, and dies
# of SIGPIPE (status 141): under pipefail that would end the script, so its status is ignored.
start() { { zcat -f "$1" 2>/dev/null || true; } | head "${@:2}"; }
start data/traces/msr_hm_0.excerpt1000.csv -n 50 | seed msr
start data/traces/cloudphysics_libcachesim.sample.vscsi.gz -c 3200 | seed vscsi
start crates/sim/tests/fixtures/websearch_head300.trace -n 40 | seed mqsim
start data/traces/systor17_vdi.sample1000.csv.gz -n 30 | seed systor
start crates/sim/tests/fixtures/cloudphysics_head200.csv -n 30 | seed csv
start crates/sim/tests/fixtures/arc_oltp_head500.lis -n 30 | seed arc_lis
start data/traces/msr_hm_0.excerpt1000.csv -n 20 | seed detect
printf '# tierwise file trace v1\ntime_ns,op,path,offset,length,path2\n0,mkdir,/d,0,0,\n1,create,/d/f,0,0,\n2,write,/d/f,0,4096,\n3,rename,/d/f,0,0,/d/g\n' | seed file_trace
cd fuzz
targets=${FUZZ_TARGETS:-msr spc fiu blkparse vscsi oracle_general csv mqsim arc_lis systor detect file_trace checkpoint device_open}
for t in $targets; do
  echo "== $t ($secs s)"
  cargo +nightly fuzz run "$t" -- -max_total_time="$secs" -max_len=4096
done
