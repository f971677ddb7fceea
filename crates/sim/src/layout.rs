//! Where the volumes of a multi-volume block trace sit on the one simulated HDD.
//!
//! Pieces and moves carry *logical* addresses: `volume << 48 | byte offset` (see
//! [`tierwise_core::ObjectId::logical_addr`]). The HDD model needs physical ones, and a host lays
//! its volumes out one after another (LVM's linear volumes, partitions): volume by volume in id
//! order, each as long as the highest byte the trace touches on it, rounded up to 1 MiB. Before
//! this, volumes sat 1 TiB apart and the model wrapped addresses modulo its capacity, so volumes
//! aliased pseudo-randomly (issue 35).
//!
//! Extents an architecture keeps outside every volume (GreenDM's reserved spares, in volume
//! [`SPARE_VOLUME`]) go after the last volume. A volume the layout does not know (a trace read
//! without the footprint pass) also starts there.

use serde::{Deserialize, Serialize};
use tierwise_core::ObjectId;

/// The volume architectures use for HDD space outside the trace's volumes.
pub const SPARE_VOLUME: u64 = ObjectId::SPARE_VOLUME;

const REGION_ALIGN: u64 = 1 << 20;

/// Base address of each volume on the HDD.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VolumeLayout {
    /// (volume, base), sorted by volume.
    bases: Vec<(u64, u64)>,
    /// Bytes of all volumes: where spares and unknown volumes start.
    end: u64,
}

impl VolumeLayout {
    /// Builds the layout from the highest byte touched on each volume (any order; a volume
    /// may appear more than once).
    pub fn from_extents(extents: impl IntoIterator<Item = (u64, u64)>) -> VolumeLayout {
        let mut high: std::collections::BTreeMap<u64, u64> = std::collections::BTreeMap::new();
        for (volume, end) in extents {
            let e = high.entry(volume & 0xFFFF).or_insert(0);
            *e = (*e).max(end);
        }
        let mut bases = Vec::with_capacity(high.len());
        let mut next = 0u64;
        for (volume, end) in high {
            bases.push((volume, next));
            next = next.saturating_add(end.max(1).div_ceil(REGION_ALIGN).saturating_mul(REGION_ALIGN));
        }
        VolumeLayout { bases, end: next }
    }

    /// Bytes the volumes take on the HDD.
    pub fn bytes(&self) -> u64 {
        self.end
    }

    /// How many volumes the layout places.
    pub fn volumes(&self) -> usize {
        self.bases.len()
    }

    /// The physical HDD address of a logical one. An empty layout (nothing known) keeps volume
    /// 0 at 0 and puts every other volume after it 1 TiB apart, as before layouts existed.
    #[inline]
    pub fn physical(&self, logical: u64) -> u64 {
        let volume = logical >> ObjectId::VOLUME_SHIFT;
        let offset = logical & ObjectId::BLOCK_MASK;
        if volume == 0 && self.bases.first().is_none_or(|&(v, _)| v == 0) {
            return offset;
        }
        let base = match self.bases.binary_search_by_key(&volume, |&(v, _)| v) {
            Ok(i) => self.bases[i].1,
            Err(_) if self.bases.is_empty() => volume << 40,
            Err(_) => self.end,
        };
        base.wrapping_add(offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn volumes_are_concatenated_in_id_order() {
        let l = VolumeLayout::from_extents([(7, 5 << 20), (0, 3 << 20), (7, 2 << 20), (2, 1)]);
        assert_eq!(l.volumes(), 3);
        assert_eq!(l.physical(ObjectId::block_of(0, 0).logical_addr(4096) + 100), 100);
        assert_eq!(l.physical(ObjectId::block_of(2, 1).logical_addr(4096)), (3 << 20) + 4096);
        assert_eq!(l.physical(ObjectId::block_of(7, 0).logical_addr(4096)), 4 << 20);
        assert_eq!(l.bytes(), 9 << 20);
        // Spares and unknown volumes after the last volume.
        assert_eq!(l.physical(ObjectId::block_of(SPARE_VOLUME, 2).logical_addr(4096)), (9 << 20) + 8192);
        assert_eq!(l.physical(ObjectId::block_of(5, 0).logical_addr(4096)), 9 << 20);
    }

    #[test]
    fn an_empty_layout_keeps_one_volume_where_it_is() {
        let l = VolumeLayout::default();
        assert_eq!(l.physical(123_456), 123_456);
        assert_eq!(l.physical((1 << 48) | 5), (1 << 40) + 5);
    }
}
