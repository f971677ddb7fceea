#!/usr/bin/env bash
# Runs every trace-reader fuzz target for SECONDS each (default 60), seeded from the bundled
# traces. Needs a nightly toolchain and cargo-fuzz (installed here if missing).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
rustup toolchain list | grep -q nightly || rustup toolchain install nightly --profile minimal
command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz --locked
seed() { mkdir -p "fuzz/corpus/$1"; [ -e "fuzz/corpus/$1/seed" ] || cat > "fuzz/corpus/$1/seed"; }
head -50 data/traces/msr_hm_0.excerpt1000.csv | seed msr
zcat data/traces/cloudphysics_libcachesim.sample.vscsi.gz | head -c 3200 | seed vscsi
head -40 crates/sim/tests/fixtures/websearch_head300.trace | seed mqsim
zcat data/traces/systor17_vdi.sample1000.csv.gz | head -30 | seed systor
head -30 crates/sim/tests/fixtures/cloudphysics_head200.csv | seed csv
head -30 crates/sim/tests/fixtures/arc_oltp_head500.lis | seed arc_lis
cat data/traces/msr_hm_0.excerpt1000.csv | head -20 | seed detect
printf '# tierwise file trace v1\ntime_ns,op,path,offset,length,path2\n0,mkdir,/d,0,0,\n1,create,/d/f,0,0,\n2,write,/d/f,0,4096,\n3,rename,/d/f,0,0,/d/g\n' | seed file_trace
cd fuzz
for t in msr spc fiu blkparse vscsi oracle_general csv mqsim arc_lis systor detect file_trace; do
  echo "== $t ($secs s)"
  cargo +nightly fuzz run "$t" -- -max_total_time="$secs" -max_len=4096
done
