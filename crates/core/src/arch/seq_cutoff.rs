//! Sequential-stream detection for caches that let large sequential I/O bypass the SSD
//! (bcache's `sequential_cutoff`, Open-CAS's sequential cutoff). Not an architecture itself.
//!
//! A small table remembers where recent streams ended. An access that starts where a stream
//! ended continues it and adds its bytes; any other access starts a new stream, replacing the
//! least recently used one. A stream whose byte count reaches the threshold is sequential: its
//! accesses bypass the cache until it breaks. Because the engine sees a large request as its
//! blocks, one after the other, a request's own blocks continue one stream.

/// One remembered stream.
#[derive(Clone, Copy, Debug, Default)]
struct Stream {
    /// Object (variable-size objects) or 0 (block address space).
    file: u64,
    /// Byte position where the stream's last access ended.
    end: u64,
    /// Bytes accessed sequentially so far.
    bytes: u64,
    /// Last use, for replacement.
    stamp: u64,
}

/// The detector.
#[derive(Clone, Debug)]
pub(super) struct SeqCutoff {
    streams: Vec<Stream>,
    threshold: u64,
    clock: u64,
}

impl SeqCutoff {
    /// Remembers `streams` streams; `threshold` bytes make a stream sequential (0 = never).
    pub(super) fn new(streams: usize, threshold: u64) -> SeqCutoff {
        SeqCutoff { streams: vec![Stream::default(); streams.max(1)], threshold, clock: 0 }
    }

    /// Records an access of `len` bytes at `pos` within `file`; returns whether it belongs to
    /// a sequential stream (and should bypass the cache).
    pub(super) fn access(&mut self, file: u64, pos: u64, len: u64) -> bool {
        self.clock += 1;
        let end = pos.saturating_add(len);
        let mut oldest = 0;
        for i in 0..self.streams.len() {
            let s = &mut self.streams[i];
            if s.stamp != 0 && s.file == file && s.end == pos {
                s.end = end;
                s.bytes = s.bytes.saturating_add(len);
                s.stamp = self.clock;
                return self.threshold != 0 && s.bytes >= self.threshold;
            }
            if s.stamp < self.streams[oldest].stamp {
                oldest = i;
            }
        }
        self.streams[oldest] = Stream { file, end, bytes: len, stamp: self.clock };
        self.threshold != 0 && len >= self.threshold
    }

    /// Heap bytes held.
    pub(super) fn memory_bytes(&self) -> usize {
        self.streams.capacity() * std::mem::size_of::<Stream>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_becomes_sequential_at_the_threshold_and_interleaving_does_not_break_it() {
        let mut d = SeqCutoff::new(4, 16 << 10);
        assert!(!d.access(0, 0, 4096));
        assert!(!d.access(0, 1 << 30, 4096), "another stream");
        assert!(!d.access(0, 4096, 4096));
        assert!(!d.access(0, 8192, 4096));
        assert!(d.access(0, 12288, 4096), "16 KiB in sequence");
        assert!(!d.access(0, 1 << 30 | 4096, 4096), "the other stream continues, short");
        assert!(!d.access(0, 100, 4096), "a jump starts a new stream");
        assert!(!d.access(7, 16384, 4096), "same position, other file");
    }

    #[test]
    fn the_least_recently_used_stream_is_forgotten() {
        let mut d = SeqCutoff::new(2, 8192);
        d.access(0, 0, 4096);
        d.access(0, 1 << 20, 4096);
        d.access(0, 2 << 20, 4096); // replaces the stream at 0
        assert!(!d.access(0, 4096, 4096), "forgotten: starts over");
        assert!(d.access(0, (2 << 20) + 4096, 4096));
        let mut never = SeqCutoff::new(2, 0);
        assert!(!never.access(0, 0, 1 << 30));
    }
}
