//! Whether the weights of what was recorded changed during the run. Each site count
//! is weighted as it is recorded (1 in `sites`, the interval its sample was drawn
//! with in `sample:N`), so the estimates stand; but the analyzer takes sampling's
//! spread from the report's one `sample_interval`, and heap sampling's from its one
//! `heap_interval`: a report whose stacks, or heap samples, were taken under two
//! says so (`stack_weights_changed`, `heap_intervals_changed` in its manifest).

use crate::Mode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

/// The weight of the latest mode that records stacks, 0 before any.
static STACK_WEIGHT: AtomicU64 = AtomicU64::new(0);

/// Whether the latest mode that records stacks was `sites` (else `sample:N`).
static LATEST_SITES: AtomicBool = AtomicBool::new(false);

/// Set once stacks were recorded under two weights.
static STACKS_CHANGED: AtomicBool = AtomicBool::new(false);

/// The latest heap sampling interval in force (0 before any).
static HEAP_INTERVAL: AtomicU64 = AtomicU64::new(0);

/// Set once heap samples were taken at two intervals.
static HEAP_CHANGED: AtomicBool = AtomicBool::new(false);

/// Notes that `mode` is (or was) in force (`Settings::apply` notes the mode it
/// replaces and the new one).
pub(crate) fn note_mode(mode: Mode) {
    let weight = match mode {
        Mode::Sites => 1,
        Mode::Sample(n) => n,
        _ => return,
    };
    LATEST_SITES.store(mode == Mode::Sites, Relaxed);
    note(&STACK_WEIGHT, &STACKS_CHANGED, weight);
}

/// Notes that heap sampling at `interval` bytes is (or was) in force (0: off, which
/// samples nothing).
pub(crate) fn note_heap(interval: u64) {
    if interval > 0 {
        note(&HEAP_INTERVAL, &HEAP_CHANGED, interval);
    }
}

fn note(latest: &AtomicU64, changed: &AtomicBool, value: u64) {
    let old = latest.swap(value, Relaxed);
    if old != 0 && old != value {
        changed.store(true, Relaxed);
    }
}

/// The mode the latest stacks were recorded in: `mode`, the one in force, if it
/// records stacks, else the latest one that did (`mode` if none ever did), so that
/// a `sample:N` run switched to `count` or `off` before its report still says its
/// sites' figures are estimates of one in N.
pub(crate) fn stack_mode(mode: Mode) -> Mode {
    match (mode, STACK_WEIGHT.load(Relaxed)) {
        (Mode::Sites | Mode::Sample(_), _) | (_, 0) => mode,
        _ if LATEST_SITES.load(Relaxed) => Mode::Sites,
        (_, n) => Mode::Sample(n),
    }
}

/// Whether stacks were recorded under more than one weight this run.
pub(crate) fn stacks_changed() -> bool {
    STACKS_CHANGED.load(Relaxed)
}

/// Whether heap samples were taken at more than one interval this run.
pub(crate) fn heap_changed() -> bool {
    HEAP_CHANGED.load(Relaxed)
}
