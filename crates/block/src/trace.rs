//! A diagnostic trace of blocks' histories (tests turn it on; off otherwise).

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

static ON: AtomicBool = AtomicBool::new(false);
static EVENTS: Mutex<Vec<(u64, String)>> = Mutex::new(Vec::new());

/// Turns the trace on or off, clearing it.
pub fn enable(on: bool) {
    ON.store(on, Ordering::Relaxed);
    EVENTS.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clear();
}

/// The trace of `block`, with every event not tied to a block.
pub fn events(block: u64) -> Vec<String> {
    let g = EVENTS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    g.iter().filter(|(b, _)| *b == block || *b == u64::MAX).map(|(_, e)| e.clone()).collect()
}

pub(crate) fn note(block: u64, what: impl FnOnce() -> String) {
    if ON.load(Ordering::Relaxed) {
        EVENTS.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push((block, what()));
    }
}

/// Notes an event of no particular block (a test's step, a commit).
pub fn note_test(what: impl FnOnce() -> String) {
    note(u64::MAX, what);
}
