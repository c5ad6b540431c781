//! Which process wrote a report: for a forked child, the process it was forked
//! from, whose counts before the fork its own include. Set by the fork handlers
//! (`fork`), read by the manifest (`report`).

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering::Acquire, Ordering::Release};

/// The process that forks, set before each fork.
static FORKING_PID: AtomicU32 = AtomicU32::new(0);
/// In a forked child, the process it was forked from: `FORKING_PID` as the child
/// found it, kept apart so that a fork of its own does not change it.
static PARENT_PID: AtomicU32 = AtomicU32::new(0);
/// Set in a forked child: `PARENT_PID` is its parent's.
static FORKED: AtomicBool = AtomicBool::new(false);

/// Before a fork, in the process that forks. Allocation-free.
pub(crate) fn forking() {
    FORKING_PID.store(std::process::id(), Release);
}

/// After a fork, in the child. Allocation-free.
pub(crate) fn forked() {
    PARENT_PID.store(FORKING_PID.load(Acquire), Release);
    FORKED.store(true, Release);
}

/// The process this one was forked from, if it is a forked child (the latest
/// fork's parent).
pub(crate) fn forked_from() -> Option<u32> {
    FORKED.load(Acquire).then(|| PARENT_PID.load(Acquire))
}
