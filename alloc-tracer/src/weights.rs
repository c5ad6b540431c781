//! Whether the weights of what was recorded changed during the run. Each site count
//! is weighted as it is recorded (1 in `sites`, the interval its sample was drawn
//! with in `sample:N`), so the estimates stand; but the analyzer takes sampling's
//! spread from the report's one `sample_interval`, and heap sampling's from its one
//! `heap_interval`: a report whose stacks, or heap samples, were taken under two
//! says so (`stack_weights_changed`, `heap_intervals_changed` in its manifest).
//!
//! A weight counts as used once the program allocated while it was in force, so
//! that settings applied one after the other, with nothing allocated between, mix
//! nothing. Allocations are counted over the whole process (the registry's running
//! totals), read when settings are applied and when a report is taken; so are those
//! counted in `count` mode, which recorded no stack (`allocs_without_stacks`): a run
//! that records sites for one part and only counts the rest says how much its site
//! rows leave out.

use crate::Mode;
use std::sync::atomic::{
    AtomicBool, AtomicU64,
    Ordering::{Acquire, Relaxed, Release},
};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// One kind of weight: the stacks' (see [`stack_weight`]) or heap sampling's
/// interval; 0 where nothing is recorded.
struct Weight {
    /// Set once `Settings::apply` first noted the weight in force.
    noted: AtomicBool,
    /// The weight in force.
    latest: AtomicU64,
    /// The process's allocations and reallocs when it came into force.
    since: AtomicU64,
    /// The latest weight the program allocated under (0: none yet).
    used: AtomicU64,
    /// Set once it allocated under two.
    changed: AtomicBool,
    /// What of a value is the weight (two values of one weight mix nothing).
    weight_of: fn(u64) -> u64,
}

impl Weight {
    const fn new(weight_of: fn(u64) -> u64) -> Weight {
        Weight {
            noted: AtomicBool::new(false),
            latest: AtomicU64::new(0),
            since: AtomicU64::new(0),
            used: AtomicU64::new(0),
            changed: AtomicBool::new(false),
            weight_of,
        }
    }

    /// `to` replaces `from`, `calls` allocations into the run (`from` was in force
    /// since the start if this is the first switch).
    fn switch(&self, from: u64, to: u64, calls: u64) {
        if !self.noted.swap(true, Relaxed) {
            self.latest.store(from, Relaxed);
        }
        self.settle(calls);
        // `since` first: a report that settles between the two stores sees the
        // old weight since now, and marks it used only if the program allocated
        // after, as it still may have under it.
        self.since.store(calls, Relaxed);
        self.latest.store(to, Release);
    }

    /// Notes the weight in force as used if the program allocated since it came in.
    fn settle(&self, calls: u64) {
        let latest = self.latest.load(Acquire);
        if latest != 0 && calls > self.since.load(Relaxed) {
            let used = self.used.swap(latest, Relaxed);
            if used != 0 && (self.weight_of)(used) != (self.weight_of)(latest) {
                self.changed.store(true, Relaxed);
            }
        }
    }
}

/// Held through `Settings::apply`'s switch ([`applying`]): two applied at once
/// would each take the other's settings for those it replaces, and leave this
/// record of the weights apart from the mode in force.
static APPLYING: Mutex<()> = Mutex::new(());

/// Takes [`APPLYING`]: for `Settings::apply`, and across a fork (`fork::prepare`,
/// before every other lock: an apply in progress takes the registry's and the
/// timeline's under it).
pub(crate) fn applying() -> MutexGuard<'static, ()> {
    APPLYING.lock().unwrap_or_else(PoisonError::into_inner)
}

static STACKS: Weight = Weight::new(|v| v >> 1);

/// Allocations and reallocs counted in `count` mode before its latest stretch (the
/// one in force, if it is, runs from `STACKS.since`).
static UNSTACKED: AtomicU64 = AtomicU64::new(0);

/// The depths (1 to 62, a bit each) stacks were walked at before the latest switch:
/// those in force while the program allocated with a mode that records stacks, or
/// with heap sampling on.
static DEPTHS: AtomicU64 = AtomicU64::new(0);

static HEAP: Weight = Weight::new(|v| v);

/// Set once heap sampling was turned on while the program held at least
/// [`LATE_BYTES`] allocated with it off.
static HEAP_LATE: AtomicBool = AtomicBool::new(false);

/// Live bytes at which blocks left out of heap sampling are worth a word: a
/// program's start (argument parsing, thread pools) holds less.
const LATE_BYTES: i64 = 1 << 20;

/// A mode that records stacks as its weight (bits 1-63) and whether it samples
/// (bit 0): `sites` and `sample:1` weigh alike, but are told apart at the report.
/// 0: none recorded.
fn stack_weight(mode: Mode) -> u64 {
    match mode {
        Mode::Sites => 1 << 1,
        Mode::Sample(n) => n.min(u64::MAX >> 1) << 1 | 1,
        _ => 0,
    }
}

/// The process's allocations and reallocs so far, over the phases in use (under the
/// guard: it takes the registry's lock).
pub(crate) fn calls() -> u64 {
    crate::registry::running_totals(crate::phase::used()).0
}

/// `Settings::apply` replaces `from`'s mode, heap interval (0: off) and depth with
/// `to`'s, `calls` allocations and reallocs into the run, with `live` bytes live.
pub(crate) fn switch(from: (Mode, u64, usize), to: (Mode, u64, usize), calls: u64, live: i64) {
    let since = STACKS.since.load(Relaxed);
    if from.0 == Mode::Count {
        UNSTACKED.fetch_add(calls.saturating_sub(since), Relaxed);
    }
    if walks(from.0, from.1) && calls > since {
        DEPTHS.fetch_or(1 << from.2.min(crate::MAX_DEPTH), Relaxed);
    }
    STACKS.switch(stack_weight(from.0), stack_weight(to.0), calls);
    HEAP.switch(from.1, to.1, calls);
    if from.1 == 0 && to.1 != 0 && live >= LATE_BYTES {
        HEAP_LATE.store(true, Relaxed);
    }
}

/// Whether `mode`, with heap sampling at `heap` (0: off), walks stacks.
fn walks(mode: Mode, heap: u64) -> bool {
    stack_weight(mode) != 0 || (mode == Mode::Count && heap != 0)
}

/// The depths the report's stacks were walked at, ascending: those of earlier
/// stretches, and `depth` where `mode` (heap sampling `heap`) walks them now and the
/// program allocated since it came in force (`calls` into the run).
pub(crate) fn stack_depths(mode: Mode, heap: u64, depth: usize, calls: u64) -> Vec<usize> {
    let mut bits = DEPTHS.load(Relaxed);
    if walks(mode, heap) && (calls > STACKS.since.load(Relaxed) || bits == 0) {
        bits |= 1 << depth.min(crate::MAX_DEPTH);
    }
    (1..=crate::MAX_DEPTH)
        .filter(|d| bits >> d & 1 == 1)
        .collect()
}

/// Whether heap sampling came on while the program held 1 MiB or more allocated
/// with it off: those blocks were never sampled, and are in no heap table.
pub(crate) fn heap_started_late() -> bool {
    HEAP_LATE.load(Relaxed)
}

/// The mode the latest stacks were recorded in: `mode`, the one in force, if it
/// records stacks, else the latest one the program allocated under (`mode` if
/// none), so that a `sample:N` run switched to `count` or `off` before its report
/// still says its sites' figures are estimates of one in N.
pub(crate) fn stack_mode(mode: Mode) -> Mode {
    match (mode, STACKS.used.load(Relaxed)) {
        (Mode::Sites | Mode::Sample(_), _) | (_, 0) => mode,
        (_, v) if v & 1 == 0 => Mode::Sites,
        (_, v) => Mode::Sample(v >> 1),
    }
}

/// The mode the sites' figures were recorded in ([`stack_mode`] of `mode`, the one
/// in force): `None` where no stack was recorded, a `count` run or one switched
/// between `count` and `off`.
pub(crate) fn stacks_recorded_in(mode: Mode) -> Option<Mode> {
    match stack_mode(mode) {
        m @ (Mode::Sites | Mode::Sample(_)) => Some(m),
        Mode::Off | Mode::Count => None,
    }
}

/// Whether the run counted allocations in `count` mode, with no stack: in an
/// earlier stretch, or now, with `mode` in force.
pub(crate) fn counted_without_stacks(mode: Mode) -> bool {
    mode == Mode::Count || UNSTACKED.load(Relaxed) > 0
}

/// Allocations and reallocs counted in `count` mode, with no stack, by `calls` into
/// the run with `mode` in force: all of them in a `count` run. Each stretch is
/// bounded by the running totals read as settings were applied, before the new mode
/// took effect, so allocations of other threads made meanwhile may be counted in a
/// stretch and recorded with a stack too, or neither (the report counts a run whose
/// every stack was recorded in `sites` mode exactly, from its sites instead).
pub(crate) fn allocs_without_stacks(mode: Mode, calls: u64) -> u64 {
    let current = if mode == Mode::Count {
        calls.saturating_sub(STACKS.since.load(Relaxed))
    } else {
        0
    };
    UNSTACKED.load(Relaxed).saturating_add(current)
}

/// Whether the program allocated under more than one stack weight, of those
/// `Settings::apply` set, by `calls` allocations and reallocs into the run.
pub(crate) fn stacks_changed(calls: u64) -> bool {
    STACKS.settle(calls);
    STACKS.changed.load(Relaxed)
}

/// Whether it allocated under more than one heap sampling interval, likewise.
pub(crate) fn heap_changed(calls: u64) -> bool {
    HEAP.settle(calls);
    HEAP.changed.load(Relaxed)
}
