//! Where a front end records a move before it starts, so that recovery after a crash finds the
//! moves that were under way and finishes or undoes each.

/// A journal of moves. The record is the front end's own: the mount's names the file, its
/// size and modification time; the block device needs none (it commits checkpoints on FLUSH,
/// and a copy maps its slot only once written).
pub trait MoveJournal {
    /// What is recorded of one move.
    type Record;
    /// Why the journal failed.
    type Error;
    /// Records `record` durably before the move's first byte is copied; returns its id.
    fn begin(&self, record: &Self::Record) -> Result<u64, Self::Error>;
    /// The move `id` is over, whatever its outcome.
    fn end(&self, id: u64) -> Result<(), Self::Error>;
    /// The moves begun and not ended: what a crash interrupted.
    fn unfinished(&self) -> Result<Vec<Self::Record>, Self::Error>;
}

/// Runs a move journalled: recorded before `run`, cleared after it whatever its outcome. A
/// journal that cannot record does not stop the move, nor does `record` being `None` (nothing
/// known to record): the front end's recovery must cope with an unrecorded move (the mount's
/// does, since the source stays whole until the copy is complete).
pub fn journalled<J: MoveJournal, T>(journal: &J, record: Option<J::Record>, run: impl FnOnce() -> T) -> T {
    let id = record.and_then(|r| journal.begin(&r).ok());
    let out = run();
    if let Some(id) = id {
        // A record left behind is a move recovery finds finished: harmless.
        let _ = journal.end(id);
    }
    out
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use super::*;

    /// An in-memory journal that can be told to fail.
    #[derive(Default)]
    struct Memory {
        open: RefCell<Vec<(u64, &'static str)>>,
        next: RefCell<u64>,
        broken: bool,
    }

    impl MoveJournal for Memory {
        type Record = &'static str;
        type Error = ();
        fn begin(&self, record: &&'static str) -> Result<u64, ()> {
            if self.broken {
                return Err(());
            }
            let mut n = self.next.borrow_mut();
            *n += 1;
            self.open.borrow_mut().push((*n, record));
            Ok(*n)
        }
        fn end(&self, id: u64) -> Result<(), ()> {
            self.open.borrow_mut().retain(|&(i, _)| i != id);
            Ok(())
        }
        fn unfinished(&self) -> Result<Vec<&'static str>, ()> {
            Ok(self.open.borrow().iter().map(|&(_, r)| r).collect())
        }
    }

    #[test]
    fn a_move_is_on_record_while_it_runs_and_off_it_after_whatever_the_outcome() {
        let j = Memory::default();
        let seen = journalled(&j, Some("f"), || j.unfinished());
        assert_eq!(seen, Ok(vec!["f"]), "recorded before the move ran");
        assert_eq!(j.unfinished(), Ok(vec![]));
        let failed: Result<(), &str> = journalled(&j, Some("g"), || Err("EIO"));
        assert!(failed.is_err());
        assert_eq!(j.unfinished(), Ok(vec![]), "cleared after a failed move too");
    }

    #[test]
    fn a_journal_that_cannot_record_does_not_stop_the_move() {
        let j = Memory { broken: true, ..Memory::default() };
        assert_eq!(journalled(&j, Some("f"), || 7), 7);
        assert_eq!(journalled(&Memory::default(), None, || 8), 8, "nothing to record");
    }
}
