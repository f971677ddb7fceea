//! Errors of the block device, each saying what is wrong and what was left untouched.

use std::io;

/// A structure on an image is not what it should be.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FormatError {
    /// No tierwise magic.
    #[error("no tierwise superblock")]
    NotTierwise,
    /// A checksum does not hold (a torn or damaged write).
    #[error("the {0}'s checksum does not match (damaged)")]
    Checksum(&'static str),
    /// Written by another format version.
    #[error("format version {0}, this build reads version 1")]
    Version(u32),
    /// A field is out of range.
    #[error("invalid {0}: {1}")]
    Field(&'static str, u64),
    /// A checkpoint of another device.
    #[error("the checkpoint belongs to another device")]
    ForeignCheckpoint,
}

/// Opening, creating or serving a device failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DeviceError {
    /// An image could not be opened, read or written.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The OS error.
        source: io::Error,
    },
    /// The images are not a pair this build can serve (wrong size, swapped, foreign, damaged).
    #[error("{0}")]
    Images(String),
    /// Another server holds an image.
    #[error("{0} is in use by another tierwise server (its lock is held); nothing was changed")]
    InUse(String),
    /// The architecture spec is wrong or not servable.
    #[error("{0}")]
    Spec(String),
    /// The images hold a device run with another policy, and changing it was not asked for.
    #[error(
        "these images hold a device served with the policy `{stored}`, not `{asked}`: serve them without --policy to keep it, or add --force-policy to change it (its dirty blocks are written back to the HDD first); nothing was changed"
    )]
    PolicyMismatch {
        /// The policy recorded in the superblock.
        stored: String,
        /// The policy asked for.
        asked: String,
    },
    /// No metadata checkpoint could be read.
    #[error(
        "no valid metadata checkpoint on either image ({0}); refusing to serve: the SSD may hold \
         dirty data whose place is recorded only there. Nothing was changed"
    )]
    NoCheckpoint(String),
    /// Only the HDD's replica of the table could be read, after a crash.
    #[error(
        "the SSD's metadata checkpoints cannot be read ({0}) and the HDD's replica was written \
         before an unclean stop: commits the SSD alone recorded after it (slot-pressure commits) \
         may have reused slots it names, so it cannot say where dirty data is. Refusing to \
         serve; nothing was changed (docs/BLOCK.md, \"Crash safety\")"
    )]
    ReplicaOnly(String),
    /// A request lies outside the device.
    #[error("request at {offset} of {len} bytes is beyond the device's {size} bytes")]
    OutOfRange {
        /// Byte offset.
        offset: u64,
        /// Byte length.
        len: u64,
        /// Device size.
        size: u64,
    },
    /// The device was shut down.
    #[error("the device is shutting down")]
    ShuttingDown,
}

impl DeviceError {
    /// An I/O error with what was being done.
    pub fn io(what: impl Into<String>, source: io::Error) -> DeviceError {
        DeviceError::Io { what: what.into(), source }
    }
    /// The errno a block protocol should answer with.
    pub fn errno(&self) -> i32 {
        match self {
            DeviceError::Io { source, .. } => source.raw_os_error().unwrap_or(5),
            DeviceError::OutOfRange { .. } => 22,
            DeviceError::ShuttingDown => 108, // ESHUTDOWN
            _ => 5,
        }
    }
}
