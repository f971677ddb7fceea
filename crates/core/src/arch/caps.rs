//! What front ends may assume of an architecture, declared once per architecture and read from
//! the registry wherever code would otherwise match names or help text: which traces and front
//! ends it runs on, whether the SSD holds copies, whether it must see every I/O, whether a
//! mount may serve its files by passthrough, and which devices a deployment of it buys.

/// What an architecture places.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Granularity {
    /// Blocks or extents of a block device (block traces, the NBD front end).
    Block,
    /// Whole files (file traces, the FUSE front end).
    File,
    /// Everything on one device: runs at any granularity (the single-device baselines).
    Device,
}

/// How many copies of an object the tiers hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Copies {
    /// One copy, which moves (tiering, and the baselines).
    One,
    /// The HDD holds everything; the SSD holds copies (caching).
    SsdCopies,
    /// Decided per volume by the architectures the spec names (type-aware).
    PerVolume,
}

/// Which devices a deployment buys (cost figures).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CostClass {
    /// The whole data set on SSDs.
    SsdOnly,
    /// The whole data set on HDDs.
    HddOnly,
    /// The HDD holds the data set, plus an SSD of the configured size.
    Hybrid,
}

/// Where a block front end puts an object's bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Addressing {
    /// The front end decides: the HDD holds the virtual device at its own addresses and the
    /// SSD copy (or the single SSD copy) is in a slot the front end allocates. Addresses in
    /// the engine's answers only feed the simulator's seek model.
    FrontEnd,
    /// The SSD and the HDD are one address space, SSD first; the addresses in the engine's
    /// answers are where the bytes are (the Linear baseline).
    Concatenated,
}

/// What an architecture keeps in RAM that a block front end must hold for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RamLevel {
    /// Nothing.
    None,
    /// An object's bytes while a move of it runs: accesses answered [`crate::Level::Ram`] use
    /// that copy (writes included), the move's destination gets it on success and its source
    /// on failure (GreenDM's promotion copy).
    MoveCopies,
    /// A RAM cache level: a read answered with `keep_in_ram` leaves the whole object in RAM,
    /// later reads are answered from it, writes go through it to the HDD, work from
    /// [`crate::Level::Ram`] writes it to the SSD, and an invalidation from RAM drops it
    /// (HCA's L1 and transient buffer, ZFS's ARC).
    Cache,
    /// A buffer of newer sectors kept while an object moves, merged into its home at the end
    /// (OTF-AST's temporary buffer).
    WriteBuffer,
}

/// Which object sizes an architecture can place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ObjectSizes {
    /// Any: fixed-size blocks, or variable-size objects (files, libCacheSim-style requests).
    Any,
    /// Fixed-size blocks only (it maps addresses or slots of one size).
    Fixed,
    /// Fixed-size extents whose size this knob sets (with a size as its default): front ends
    /// split requests at that size.
    Extent(&'static str),
}

/// An architecture's capabilities.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Capabilities {
    /// What it places.
    pub granularity: Granularity,
    /// Copies or a single copy.
    pub copies: Copies,
    /// It must be told every I/O with its offset and length; otherwise opens, closes and
    /// namespace operations are enough (a front end may then serve data without telling it).
    pub per_io_bytes: bool,
    /// A file front end may serve its files by passthrough (the kernel does the I/O on the
    /// tier file): read-write where one copy exists, read-only to the SSD copy of a file with
    /// two (the front end then writes both), so no copy goes stale behind the policy.
    pub passthrough: bool,
    /// Which devices a deployment buys.
    pub cost: CostClass,
    /// What it keeps in RAM that a block front end must hold for it.
    pub ram_level: RamLevel,
    /// Where a block front end puts the bytes.
    pub addressing: Addressing,
    /// Which object sizes it can place.
    pub objects: ObjectSizes,
}

impl Capabilities {
    /// A block-level tiering architecture.
    pub const BLOCK_TIERING: Capabilities = Capabilities {
        granularity: Granularity::Block,
        copies: Copies::One,
        per_io_bytes: true,
        passthrough: false,
        cost: CostClass::Hybrid,
        ram_level: RamLevel::None,
        addressing: Addressing::FrontEnd,
        objects: ObjectSizes::Any,
    };
    /// A block-level cache.
    pub const BLOCK_CACHING: Capabilities = Capabilities { copies: Copies::SsdCopies, ..Capabilities::BLOCK_TIERING };
    /// A file-level architecture that moves files (one copy): told at open and close, so a
    /// mount may pass its data through.
    pub const FILE_TIERING: Capabilities = Capabilities {
        granularity: Granularity::File,
        copies: Copies::One,
        per_io_bytes: false,
        passthrough: true,
        cost: CostClass::Hybrid,
        ram_level: RamLevel::None,
        addressing: Addressing::FrontEnd,
        objects: ObjectSizes::Any,
    };
    /// A file-level read cache (writes go to the HDD copy, and through or around the SSD
    /// copy): told at open and close, so a mount may pass data through, read-only to a cached
    /// file's SSD copy (the front end keeps both copies in step for writes meanwhile), and
    /// read-write to a file with one copy.
    pub const FILE_READ_CACHING: Capabilities = Capabilities {
        copies: Copies::SsdCopies,
        per_io_bytes: false,
        passthrough: true,
        ..Capabilities::FILE_TIERING
    };
    /// A file-level write-back cache: writes are absorbed by the SSD copy, so every write must
    /// be seen.
    pub const FILE_CACHING: Capabilities = Capabilities {
        copies: Copies::SsdCopies,
        per_io_bytes: true,
        passthrough: false,
        ..Capabilities::FILE_TIERING
    };
    /// A single-device baseline.
    pub const fn baseline(cost: CostClass) -> Capabilities {
        Capabilities {
            granularity: Granularity::Device,
            copies: Copies::One,
            per_io_bytes: false,
            passthrough: true,
            cost,
            ram_level: RamLevel::None,
            addressing: Addressing::FrontEnd,
            objects: ObjectSizes::Any,
        }
    }

    /// Whether it runs on file traces and the file front end.
    pub const fn runs_on_files(&self) -> bool {
        matches!(self.granularity, Granularity::File | Granularity::Device)
    }

    /// Whether it runs on block traces and the block front end.
    pub const fn runs_on_blocks(&self) -> bool {
        matches!(self.granularity, Granularity::Block | Granularity::Device)
    }

    /// Placing only the object sizes given.
    pub const fn with_objects(self, objects: ObjectSizes) -> Capabilities {
        Capabilities { objects, ..self }
    }

    /// Whether it runs with variable-size objects.
    pub const fn takes_variable_objects(&self) -> bool {
        matches!(self.objects, ObjectSizes::Any)
    }

    /// With a RAM level the front end must hold.
    pub const fn with_ram_level(self, ram_level: RamLevel) -> Capabilities {
        Capabilities { ram_level, ..self }
    }

    /// One line for `tierwise list`.
    pub fn describe(&self) -> String {
        let granularity = match self.granularity {
            Granularity::Block => "block",
            Granularity::File => "file",
            Granularity::Device => "block or file",
        };
        let copies = match self.copies {
            Copies::One => "one copy",
            Copies::SsdCopies => "SSD holds copies",
            Copies::PerVolume => "copies per volume",
        };
        let cost = match self.cost {
            CostClass::SsdOnly => "SSDs only",
            CostClass::HddOnly => "HDDs only",
            CostClass::Hybrid => "HDD + SSD",
        };
        format!(
            "{granularity}, {copies}, {}, passthrough {}, buys {cost}{}{}",
            if self.per_io_bytes { "sees every I/O" } else { "told at open/close" },
            if self.passthrough { "allowed" } else { "no" },
            match self.ram_level {
                RamLevel::None => "",
                RamLevel::MoveCopies => ", RAM copies during moves",
                RamLevel::Cache => ", RAM cache level",
                RamLevel::WriteBuffer => ", RAM write buffer during moves",
            },
            if self.addressing == Addressing::Concatenated { ", SSD and HDD concatenated" } else { "" },
        )
    }
}
