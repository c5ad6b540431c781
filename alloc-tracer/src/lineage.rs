//! Which process wrote a report: for a forked child, the process it was forked
//! from, whose counts before the fork its own include; and the traced run, one id
//! for a process and the children forked from it. Set by the fork handlers
//! (`fork`), read by the manifest and the report folder's checks (`report`).

use std::sync::atomic::{
    AtomicBool, AtomicU32, AtomicU64, Ordering::Acquire, Ordering::Relaxed, Ordering::Release,
};

/// The traced run's id (0: not drawn yet). Drawn before the first fork at the
/// latest, so forked children keep their parent's.
static RUN_ID: AtomicU64 = AtomicU64::new(0);

/// The traced run's id: random, drawn on first use, and the same in every process
/// forked from this one after that. Allocation-free.
pub(crate) fn run_id() -> u64 {
    let id = RUN_ID.load(Relaxed);
    if id != 0 {
        return id;
    }
    let mut drawn = 0u64;
    // SAFETY: fills at most the 8 bytes of `drawn`.
    let got = unsafe {
        libc::getrandom(
            (&raw mut drawn).cast(),
            std::mem::size_of::<u64>(),
            libc::GRND_NONBLOCK,
        )
    };
    if got != std::mem::size_of::<u64>() as isize {
        // No entropy this early (or no getrandom): the clock and the process,
        // mixed; ids of two processes then differ by their pids at least.
        let mixed = crate::hot::clock::now_ns() ^ (u64::from(std::process::id()) << 40);
        drawn = mixed.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
    let drawn = drawn.max(1);
    match RUN_ID.compare_exchange(0, drawn, Relaxed, Relaxed) {
        Ok(_) => drawn,
        Err(first) => first,
    }
}

/// The process that forks, set before each fork.
static FORKING_PID: AtomicU32 = AtomicU32::new(0);
/// In a forked child, the process it was forked from: `FORKING_PID` as the child
/// found it, kept apart so that a fork of its own does not change it.
static PARENT_PID: AtomicU32 = AtomicU32::new(0);
/// Set in a forked child: `PARENT_PID` is its parent's.
static FORKED: AtomicBool = AtomicBool::new(false);

/// Before a fork, in the process that forks. Allocation-free.
pub(crate) fn forking() {
    run_id();
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
