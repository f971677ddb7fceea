//! Fuzzes the blkparse reader: any bytes must give records or errors, never a panic or a hang.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tierwise_sim::trace::{OpenOptions, TraceRecord, open_bytes};

fuzz_target!(|data: &[u8]| {
    for skip_bad_lines in [false, true] {
        let opts = OpenOptions { format: Some("blkparse".to_string()), skip_bad_lines };
        if let Ok(mut t) = open_bytes("fuzz", data.to_vec(), &opts) {
            let mut r = TraceRecord::default();
            let mut batch = Vec::new();
            while let Ok(true) = t.next(&mut r) {}
            let _ = t.next_batch(&mut batch, 64);
        }
    }
});
