//! The on-disk format: a superblock on each image that pairs them, and the metadata checkpoint
//! (the cache-entry table: which SSD slot holds which block, dirty, which sectors are valid),
//! kept in two alternating copies on the SSD image and replicated on the HDD image, as GreenDM
//! replicates its mapping table.
//!
//! ```text
//! SSD image: [superblock 4 KiB][checkpoint copy 0][checkpoint copy 1][pad][slot 0][slot 1]...
//! HDD image: [the virtual device, at its own addresses][checkpoint copy 0][copy 1][superblock 4 KiB]
//! ```
//!
//! The HDD's metadata sits after the data, as md's 1.0 superblock does, so an existing image
//! with a file system on it is adopted in place: its bytes stay where they are and the image
//! grows by the tail. Every structure ends with a CRC-32 of its bytes; a checkpoint carries a
//! sequence number, and recovery takes the newest copy whose checksum holds.

use crate::error::FormatError;

/// The sector: the unit of validity inside a slot (a partial write absorbed by a write-back
/// cache holds only the sectors it wrote).
pub const SECTOR: u64 = 512;
/// Bytes of a superblock.
pub const SUPER_LEN: u64 = 4096;
const MAGIC: &[u8; 8] = b"TIERWISE";
const META_MAGIC: &[u8; 8] = b"TWMETA01";
const FORMAT_VERSION: u32 = 1;
const MAX_SPEC: usize = 2048;
const META_HEADER: usize = 48;
/// The largest block size a device may have (64 MiB, as `--create` allows).
const MAX_BLOCK: u64 = 64 << 20;

/// Which image a superblock belongs to (so swapped images are recognised).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// The fast image.
    Ssd = 1,
    /// The slow image.
    Hdd = 2,
}

/// How the virtual device maps onto the images (see [`tierwise_core::arch::Addressing`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// The HDD image holds the virtual device at its own addresses; SSD slots hold copies or
    /// moved blocks.
    Identity = 1,
    /// The SSD's slots then the HDD, one address space (Linear).
    Concatenated = 2,
}

/// Geometry and identity, the same on both images but for the role.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Superblock {
    /// Which image this is.
    pub role: Role,
    /// How the virtual device is laid out.
    pub layout: Layout,
    /// Random identity shared by the two images of one device.
    pub uuid: u128,
    /// Bytes per block (the engine's object).
    pub block_size: u64,
    /// SSD data slots.
    pub slots: u64,
    /// Bytes of one checkpoint copy.
    pub meta_len: u64,
    /// Bytes of the HDD region that holds data (the virtual device for [`Layout::Identity`]).
    pub hdd_data: u64,
    /// The architecture spec the device was created with (informational).
    pub spec: String,
}

impl Superblock {
    /// Bytes of checkpoint copy space needed for `slots` slots of `block_size` bytes.
    pub fn meta_len_for(slots: u64, block_size: u64) -> u64 {
        // Saturating: a damaged superblock's fields must give an error, not an overflow.
        let entry = 16 + 8 * words_per_slot(block_size) as u64;
        (META_HEADER as u64)
            .saturating_add(slots.saturating_mul(entry))
            .saturating_add(4)
            .div_ceil(4096)
            .saturating_mul(4096)
    }
    /// Where the SSD's slots start.
    pub fn ssd_data_start(&self) -> u64 {
        let end = SUPER_LEN.saturating_add(self.meta_len.saturating_mul(2));
        end.div_ceil(self.block_size.max(4096)).saturating_mul(self.block_size.max(4096))
    }
    /// The SSD image's length.
    pub fn ssd_len(&self) -> u64 {
        self.ssd_data_start().saturating_add(self.slots.saturating_mul(self.block_size))
    }
    /// The HDD image's length.
    pub fn hdd_len(&self) -> u64 {
        self.hdd_data.saturating_add(self.meta_len.saturating_mul(2)).saturating_add(SUPER_LEN)
    }
    /// Where the superblock is on its image.
    pub fn offset(&self) -> u64 {
        match self.role {
            Role::Ssd => 0,
            Role::Hdd => self.hdd_len() - SUPER_LEN,
        }
    }
    /// Where checkpoint copy `i` (0 or 1) is on this image.
    pub fn meta_offset(&self, i: u64) -> u64 {
        match self.role {
            Role::Ssd => SUPER_LEN + i * self.meta_len,
            Role::Hdd => self.hdd_data + i * self.meta_len,
        }
    }
    /// The size of the exported device.
    pub fn virtual_size(&self) -> u64 {
        match self.layout {
            Layout::Identity => self.hdd_data,
            Layout::Concatenated => self.slots * self.block_size + self.hdd_data,
        }
    }

    /// The superblock's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(SUPER_LEN as usize);
        b.extend_from_slice(MAGIC);
        b.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        b.push(self.role as u8);
        b.push(self.layout as u8);
        b.extend_from_slice(&[0, 0]);
        b.extend_from_slice(&self.uuid.to_le_bytes());
        for v in [self.block_size, self.slots, self.meta_len, self.hdd_data] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        // At most MAX_SPEC bytes, cut at a character boundary (decoding checks it is UTF-8).
        let mut end = self.spec.len().min(MAX_SPEC);
        while !self.spec.is_char_boundary(end) {
            end -= 1;
        }
        let spec = &self.spec.as_bytes()[..end];
        b.extend_from_slice(&(spec.len() as u32).to_le_bytes());
        b.extend_from_slice(spec);
        b.resize(SUPER_LEN as usize - 4, 0);
        let crc = crc32fast::hash(&b);
        b.extend_from_slice(&crc.to_le_bytes());
        b
    }

    /// Reads a superblock, checking its magic, version and checksum.
    pub fn decode(b: &[u8]) -> Result<Superblock, FormatError> {
        if b.len() < SUPER_LEN as usize || &b[..8] != MAGIC {
            return Err(FormatError::NotTierwise);
        }
        let body = &b[..SUPER_LEN as usize - 4];
        let crc = u32::from_le_bytes(le4(b, SUPER_LEN as usize - 4));
        if crc32fast::hash(body) != crc {
            return Err(FormatError::Checksum("superblock"));
        }
        let version = u32::from_le_bytes(le4(b, 8));
        if version != FORMAT_VERSION {
            return Err(FormatError::Version(version));
        }
        let role = match b[12] {
            1 => Role::Ssd,
            2 => Role::Hdd,
            r => return Err(FormatError::Field("role", u64::from(r))),
        };
        let layout = match b[13] {
            1 => Layout::Identity,
            2 => Layout::Concatenated,
            l => return Err(FormatError::Field("layout", u64::from(l))),
        };
        let uuid = u128::from_le_bytes(b[16..32].try_into().unwrap_or_default());
        let at = |i: usize| u64::from_le_bytes(le8(b, 32 + 8 * i));
        let (block_size, slots, meta_len, hdd_data) = (at(0), at(1), at(2), at(3));
        let spec_len = u32::from_le_bytes(le4(b, 64)) as usize;
        if spec_len > MAX_SPEC {
            return Err(FormatError::Field("spec length", spec_len as u64));
        }
        // Written from a Rust string: bytes that are not UTF-8 are damage.
        let spec = String::from_utf8(b[68..68 + spec_len].to_vec())
            .map_err(|_| FormatError::Field("spec", spec_len as u64))?;
        if block_size < SECTOR || !block_size.is_power_of_two() || block_size > MAX_BLOCK {
            return Err(FormatError::Field("block size", block_size));
        }
        // A slot number is 32 bits in a checkpoint; sizes past 2^62 bytes are damage.
        if slots > u64::from(u32::MAX) {
            return Err(FormatError::Field("slots", slots));
        }
        if meta_len < Superblock::meta_len_for(slots, block_size) || meta_len > 1 << 40 {
            return Err(FormatError::Field("checkpoint length", meta_len));
        }
        if !hdd_data.is_multiple_of(block_size) || hdd_data > 1 << 62 {
            return Err(FormatError::Field("HDD data length", hdd_data));
        }
        Ok(Superblock { role, layout, uuid, block_size, slots, meta_len, hdd_data, spec })
    }
}

/// Sector-bitmap words per slot.
pub fn words_per_slot(block_size: u64) -> usize {
    (block_size / SECTOR).div_ceil(64) as usize
}

/// One row of the cache-entry table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The block (the engine's object).
    pub block: u64,
    /// The SSD slot holding it.
    pub slot: u32,
    /// The SSD copy is newer than the HDD's.
    pub dirty: bool,
    /// Which sectors of the slot are valid; `None` when all are.
    pub partial: Option<Vec<u64>>,
}

/// A checkpoint: the table as of one commit.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Checkpoint {
    /// Commit number; the newest valid copy wins.
    pub seq: u64,
    /// The device was shut down cleanly after this commit (no write can have reached a slot
    /// since).
    pub clean: bool,
    /// The mapped slots.
    pub entries: Vec<Entry>,
}

impl Checkpoint {
    /// The copy's bytes (at most `meta_len`).
    pub fn encode(&self, uuid: u128, block_size: u64) -> Vec<u8> {
        let words = words_per_slot(block_size);
        let mut b = Vec::with_capacity(META_HEADER + self.entries.len() * 16 + 4);
        b.extend_from_slice(META_MAGIC);
        b.extend_from_slice(&self.seq.to_le_bytes());
        b.extend_from_slice(&uuid.to_le_bytes());
        b.extend_from_slice(&u32::from(self.clean).to_le_bytes());
        b.extend_from_slice(&(self.entries.len() as u32).to_le_bytes());
        b.extend_from_slice(&(words as u32).to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes()); // body length, patched below
        for e in &self.entries {
            b.extend_from_slice(&e.block.to_le_bytes());
            b.extend_from_slice(&e.slot.to_le_bytes());
            let flags = u32::from(e.dirty) | (u32::from(e.partial.is_some()) << 1);
            b.extend_from_slice(&flags.to_le_bytes());
            if let Some(bits) = &e.partial {
                for w in 0..words {
                    b.extend_from_slice(&bits.get(w).copied().unwrap_or(0).to_le_bytes());
                }
            }
        }
        let body = b.len() as u32;
        b[44..48].copy_from_slice(&body.to_le_bytes());
        let crc = crc32fast::hash(&b);
        b.extend_from_slice(&crc.to_le_bytes());
        b
    }

    /// Reads one copy, checking its identity and checksum.
    pub fn decode(b: &[u8], uuid: u128, block_size: u64, slots: u64) -> Result<Checkpoint, FormatError> {
        if b.len() < META_HEADER + 4 || &b[..8] != META_MAGIC {
            return Err(FormatError::NotTierwise);
        }
        let body = u32::from_le_bytes(le4(b, 44)) as usize;
        if body < META_HEADER || body + 4 > b.len() {
            return Err(FormatError::Field("checkpoint length", body as u64));
        }
        let crc = u32::from_le_bytes(le4(b, body));
        if crc32fast::hash(&b[..body]) != crc {
            return Err(FormatError::Checksum("checkpoint"));
        }
        let seq = u64::from_le_bytes(le8(b, 8));
        if u128::from_le_bytes(b[16..32].try_into().unwrap_or_default()) != uuid {
            return Err(FormatError::ForeignCheckpoint);
        }
        let clean = u32::from_le_bytes(le4(b, 32)) & 1 == 1;
        let count = u32::from_le_bytes(le4(b, 36)) as u64;
        let words = u32::from_le_bytes(le4(b, 40)) as usize;
        if words != words_per_slot(block_size) || count > slots {
            return Err(FormatError::Field("checkpoint geometry", count));
        }
        let mut entries = Vec::with_capacity(count as usize);
        let mut at = META_HEADER;
        for _ in 0..count {
            if at + 16 > body {
                return Err(FormatError::Field("checkpoint entries", count));
            }
            let block = u64::from_le_bytes(le8(b, at));
            let slot = u32::from_le_bytes(le4(b, at + 8));
            let flags = u32::from_le_bytes(le4(b, at + 12));
            at += 16;
            let partial = if flags & 2 != 0 {
                if at + 8 * words > body {
                    return Err(FormatError::Field("checkpoint entries", count));
                }
                let bits = (0..words).map(|w| u64::from_le_bytes(le8(b, at + 8 * w))).collect();
                at += 8 * words;
                Some(bits)
            } else {
                None
            };
            if u64::from(slot) >= slots {
                return Err(FormatError::Field("slot", u64::from(slot)));
            }
            entries.push(Entry { block, slot, dirty: flags & 1 != 0, partial });
        }
        Ok(Checkpoint { seq, clean, entries })
    }
}

fn le4(b: &[u8], at: usize) -> [u8; 4] {
    b.get(at..at + 4).and_then(|s| s.try_into().ok()).unwrap_or_default()
}

fn le8(b: &[u8], at: usize) -> [u8; 8] {
    b.get(at..at + 8).and_then(|s| s.try_into().ok()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sb(role: Role) -> Superblock {
        Superblock {
            role,
            layout: Layout::Identity,
            uuid: 0x1234_5678_9abc_def0_1122_3344_5566_7788,
            block_size: 4096,
            slots: 100,
            meta_len: Superblock::meta_len_for(100, 4096),
            hdd_data: 1 << 20,
            spec: "cache:mode=write-back".into(),
        }
    }

    #[test]
    fn superblocks_round_trip_and_detect_damage() {
        let s = sb(Role::Hdd);
        let mut b = s.encode();
        assert_eq!(b.len() as u64, SUPER_LEN);
        assert_eq!(Superblock::decode(&b).ok(), Some(s.clone()));
        assert_eq!(s.offset(), s.hdd_len() - SUPER_LEN);
        b[40] ^= 1;
        assert!(matches!(Superblock::decode(&b), Err(FormatError::Checksum(_))));
        assert!(matches!(Superblock::decode(&[0u8; 4096]), Err(FormatError::NotTierwise)));
    }

    #[test]
    fn checkpoints_round_trip_with_partial_slots_and_refuse_another_device() {
        let s = sb(Role::Ssd);
        let cp = Checkpoint {
            seq: 7,
            clean: true,
            entries: vec![
                Entry { block: 5, slot: 0, dirty: true, partial: Some(vec![0b1010]) },
                Entry { block: 9, slot: 99, dirty: false, partial: None },
            ],
        };
        let b = cp.encode(s.uuid, s.block_size);
        assert!(b.len() as u64 <= s.meta_len);
        assert_eq!(Checkpoint::decode(&b, s.uuid, 4096, 100).ok(), Some(cp.clone()));
        assert!(matches!(Checkpoint::decode(&b, s.uuid + 1, 4096, 100), Err(FormatError::ForeignCheckpoint)));
        assert!(Checkpoint::decode(&b, s.uuid, 4096, 50).is_err(), "a slot beyond the SSD is refused");
        for i in 0..b.len() {
            let mut torn = b.clone();
            torn[i] ^= 0x40;
            assert!(Checkpoint::decode(&torn, s.uuid, 4096, 100).is_err(), "byte {i} flipped went unnoticed");
        }
    }
}
