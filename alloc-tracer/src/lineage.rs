//! Which process wrote a report: for a forked child, the process it was forked
//! from, whose counts before the fork its own include. Set by the fork handlers
//! (`fork`), read by the manifest (`report`).

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering::Acquire, Ordering::Release};

/// The process that forked, set before each fork; in a child, its parent.
static FORKING_PID: AtomicU32 = AtomicU32::new(0);
/// Set in a forked child: `FORKING_PID` is its parent's.
static FORKED: AtomicBool = AtomicBool::new(false);

/// Before a fork, in the process that forks. Allocation-free.
pub(crate) fn forking() {
    FORKING_PID.store(std::process::id(), Release);
}

/// After a fork, in the child. Allocation-free.
pub(crate) fn forked() {
    FORKED.store(true, Release);
}

/// The process this one was forked from, if it is a forked child (the latest
/// fork's parent).
pub(crate) fn forked_from() -> Option<u32> {
    FORKED.load(Acquire).then(|| FORKING_PID.load(Acquire))
}
