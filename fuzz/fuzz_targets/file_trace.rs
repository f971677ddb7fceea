//! Fuzzes the file-trace reader: any bytes must give operations or errors, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tierwise_sim::filetrace::FileTraceReader;

fuzz_target!(|data: &[u8]| {
    for op in FileTraceReader::from_bytes("fuzz", data.to_vec()) {
        if op.is_err() {
            break;
        }
    }
});
