//! Fuzzes the block device's on-disk decoders, which recovery runs on whatever the images hold:
//! any bytes give a superblock or checkpoint that re-encodes to itself, or a clear error; never
//! a panic, and never a table naming a slot the SSD does not have.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tierwise_block::format::{Checkpoint, Superblock};

/// `data` made to pass the magic and checksum checks, so the fields behind them are fuzzed too:
/// the magic written at the start, `len` bytes, the CRC-32 of the body at `crc_at` (the body
/// length field, when given, set to `crc_at`).
fn sealed(data: &[u8], magic: &[u8], len: usize, crc_at: usize, body_len_at: Option<usize>) -> Vec<u8> {
    let mut b = data.to_vec();
    b.resize(len.max(crc_at + 4), 0);
    b[..magic.len()].copy_from_slice(magic);
    if let Some(at) = body_len_at {
        b[at..at + 4].copy_from_slice(&(crc_at as u32).to_le_bytes());
    }
    let crc = crc32fast::hash(&b[..crc_at]);
    b[crc_at..crc_at + 4].copy_from_slice(&crc.to_le_bytes());
    b
}

fuzz_target!(|data: &[u8]| {
    // The same bytes as they come, and sealed (right magic and checksum, the version kept).
    let sb_sealed = sealed(data, b"TIERWISE", 4096, 4092, None);
    for bytes in [data, &sb_sealed[..]] {
        if let Ok(sb) = Superblock::decode(bytes) {
            let again = Superblock::decode(&sb.encode()).expect("an encoded superblock decodes");
            assert_eq!(again, sb, "a superblock round trip changed it");
        }
    }
    if let Ok(sb) = Superblock::decode(data) {
        let again = Superblock::decode(&sb.encode()).expect("an encoded superblock decodes");
        assert_eq!(again, sb, "a superblock round trip changed it");
    }
    // The geometry the checkpoint is read with, from the first bytes.
    let Some((head, body)) = data.split_first_chunk::<3>() else { return };
    let slots = u64::from(u16::from_le_bytes([head[0], head[1]])) + 1;
    let bs = 512u64 << (head[2] % 10);
    let uuid = 0x7465_7374_7569_6400_0000_0000_0000_0001u128;
    // Sealed: magic, this device's identity, the body's length and checksum right.
    let mut cp_sealed = body.to_vec();
    cp_sealed.resize(cp_sealed.len().max(48), 0);
    cp_sealed[16..32].copy_from_slice(&uuid.to_le_bytes());
    let body_end = cp_sealed.len();
    let cp_sealed = sealed(&cp_sealed, b"TWMETA01", body_end + 4, body_end, Some(44));
    for bytes in [body, &cp_sealed[..]] {
        if let Ok(cp) = Checkpoint::decode(bytes, uuid, bs, slots) {
            assert!(cp.entries.iter().all(|e| u64::from(e.slot) < slots), "a slot beyond the SSD was accepted");
            let again =
                Checkpoint::decode(&cp.encode(uuid, bs), uuid, bs, slots).expect("an encoded checkpoint decodes");
            assert_eq!(again, cp, "a checkpoint round trip changed it");
        }
    }
});
