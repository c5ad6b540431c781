//! Which weights the stacks recorded so far count with in a report (1 in `sites`, N
//! in `sample:N`): a report weighs every site by the mode in force when it is
//! written, so one whose stacks were recorded under two weights says so
//! (`stack_weights_changed` in its manifest).

use crate::Mode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

/// The weight of the latest mode that records stacks, 0 before any.
static WEIGHT: AtomicU64 = AtomicU64::new(0);

/// Set once stacks were recorded under two weights.
static CHANGED: AtomicBool = AtomicBool::new(false);

/// Notes that `mode` is (or was) in force (`Settings::apply` notes the mode it
/// replaces and the new one).
pub(crate) fn note(mode: Mode) {
    let weight = match mode {
        Mode::Sites => 1,
        Mode::Sample(n) => n,
        _ => return,
    };
    let old = WEIGHT.swap(weight, Relaxed);
    if old != 0 && old != weight {
        CHANGED.store(true, Relaxed);
    }
}

/// Whether stacks were recorded under more than one weight this run.
pub(crate) fn changed() -> bool {
    CHANGED.load(Relaxed)
}
