//! What every front end does around the engine's answers, written once (the front-end driver,
//! growing): decisions that the simulator and the mount must make identically, or the
//! simulator's prediction stops being about the mount.

use crate::{Level, Op, Placement, Request, Served};

/// Whether the answer `served` to `req`, given before the access waited for work, is still
/// safe to act on with the object now at `now`. A write must reach every valid copy, or one
/// goes stale behind the engine's back (say a write-back of the file ran while the write
/// waited, and the engine now believes the HDD copy current): then the front end asks again
/// with [`crate::Engine::access_again`], which does not count the access twice. Reads and
/// truncates (which cut every copy) are always safe, as is anything on an untracked object.
pub fn still_valid(req: &Request, served: &Served, now: &Placement) -> bool {
    if req.op != Op::Write || !now.tracked {
        return true;
    }
    let fast_valid = now.on_fast;
    let slow_valid = now.on_slow && !(now.dirty && now.on_fast);
    (!fast_valid || served.touches.contains(Level::Fast)) && (!slow_valid || served.touches.contains(Level::Slow))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Levels, ObjectId};

    fn placed(on_fast: bool, on_slow: bool, dirty: bool) -> Placement {
        Placement { tracked: true, on_fast, on_slow, dirty, ..Placement::default() }
    }

    #[test]
    fn a_write_that_would_miss_a_valid_copy_is_asked_again() {
        let write = Request::write(ObjectId(1), 0, 4096);
        let to_ssd = Served::by(Level::Fast);
        // Dirty on the SSD: the HDD copy is old, writing the SSD alone is right.
        assert!(still_valid(&write, &to_ssd, &placed(true, true, true)));
        // Cleaned meanwhile: the HDD copy counts as current, the SSD-only write would leave it stale.
        assert!(!still_valid(&write, &to_ssd, &placed(true, true, false)));
        // Written through both: always right.
        let both = Served::written_to(Levels::one(Level::Fast).with(Level::Slow));
        assert!(still_valid(&write, &both, &placed(true, true, false)));
        // Moved to the HDD meanwhile and the write was meant for the HDD.
        assert!(still_valid(&write, &Served::by(Level::Slow), &placed(false, true, false)));
        // Reads are served from whichever copy is valid now.
        assert!(still_valid(&Request::read(ObjectId(1), 0, 4096), &to_ssd, &placed(false, true, false)));
        // Untracked objects (the baselines) have no copies to keep in step.
        assert!(still_valid(&write, &to_ssd, &Placement::default()));
    }
}
