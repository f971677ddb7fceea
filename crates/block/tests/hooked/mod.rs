//! An in-memory backend that calls a hook before each read and write (a slow disk, a gate, a
//! counter), for the block device's integration tests.

use std::sync::Arc;

use tierwise_block::backend::Dev;
use tierwise_block::{Backend, MemBackend};

/// One image access, as the hook sees it.
#[derive(Clone, Copy, Debug)]
pub struct Access {
    pub dev: Dev,
    pub write: bool,
    pub off: u64,
}

/// [`MemBackend`] with a hook before each read and write.
pub struct Hooked {
    pub inner: MemBackend,
    hook: Box<dyn Fn(Access) + Send + Sync>,
}

impl Hooked {
    pub fn new(inner: MemBackend, hook: impl Fn(Access) + Send + Sync + 'static) -> Arc<Hooked> {
        Arc::new(Hooked { inner, hook: Box::new(hook) })
    }
}

impl Backend for Hooked {
    fn read(&self, dev: Dev, buf: &mut [u8], off: u64) -> std::io::Result<()> {
        (self.hook)(Access { dev, write: false, off });
        self.inner.read(dev, buf, off)
    }
    fn write(&self, dev: Dev, buf: &[u8], off: u64) -> std::io::Result<()> {
        (self.hook)(Access { dev, write: true, off });
        self.inner.write(dev, buf, off)
    }
    fn sync(&self, dev: Dev) -> std::io::Result<()> {
        self.inner.sync(dev)
    }
    fn discard(&self, dev: Dev, off: u64, len: u64) -> std::io::Result<()> {
        self.inner.discard(dev, off, len)
    }
    fn len(&self, dev: Dev) -> std::io::Result<u64> {
        self.inner.len(dev)
    }
    fn grow(&self, dev: Dev, len: u64) -> std::io::Result<()> {
        self.inner.grow(dev, len)
    }
    fn is_hole(&self, dev: Dev, off: u64, len: u64) -> std::io::Result<bool> {
        self.inner.is_hole(dev, off, len)
    }
}
