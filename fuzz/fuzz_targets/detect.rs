//! Fuzzes format detection and decompression: arbitrary bytes under names that select each
//! detection path, gzip/zstd magic included.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tierwise_sim::trace::{OpenOptions, TraceRecord, open_bytes};

fuzz_target!(|data: &[u8]| {
    for name in ["x.csv", "x.vscsi", "x.oracleGeneral", "x.lis", "x.spc", "x.blkparse", "x.mqsim", "x.gz", "x"] {
        if let Ok(mut t) = open_bytes(name, data.to_vec(), &OpenOptions { format: None, skip_bad_lines: true }) {
            let mut r = TraceRecord::default();
            let mut n = 0;
            while let Ok(true) = t.next(&mut r) {
                n += 1;
                if n > 100_000 {
                    break;
                }
            }
        }
    }
});
