//! Whose call is it? The program's, to be recorded against this thread's state, or
//! one that is not: the tracer's own (the re-entrancy guard is set), a thread's
//! first (no state yet: created here), or one made after the thread's state was
//! merged at exit (counted apart, as late).

use super::door::Door;
use super::site_table::bump;
use super::size_class;
use super::thread::{self, DEAD, Local, ThreadState};
use std::alloc::Layout;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// What kind of call asks for the state: an allocation (or a realloc that moved
/// the block), or a free.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Call {
    /// Allocates a block: the tracer's own are counted as such.
    Alloc,
    /// Frees one (or a realloc that kept its block).
    Free,
}

/// The tracer's own allocations made before its thread's state existed (or after it
/// was merged), per class.
static EARLY_OWN: [AtomicU64; size_class::NUM_CLASSES] =
    [const { AtomicU64::new(0) }; size_class::NUM_CLASSES];
/// Allocations made by threads after their state was merged at exit.
static LATE_ALLOCS: AtomicU64 = AtomicU64::new(0);
/// Frees made by threads after their state was merged at exit.
static LATE_FREES: AtomicU64 = AtomicU64::new(0);

/// Counters kept outside any thread's state, for reports.
#[derive(Clone, Copy, Debug)]
pub struct Stateless {
    /// The tracer's own allocations per class, made with no state to count them in.
    pub own_classes: [u64; size_class::NUM_CLASSES],
    /// Allocations after the thread's state was merged at exit.
    pub late_allocs: u64,
    /// Frees after the thread's state was merged at exit.
    pub late_frees: u64,
}

/// The counters kept outside any thread's state, as of now.
pub fn stateless() -> Stateless {
    Stateless {
        own_classes: std::array::from_fn(|k| EARLY_OWN[k].load(Relaxed)),
        late_allocs: LATE_ALLOCS.load(Relaxed),
        late_frees: LATE_FREES.load(Relaxed),
    }
}

/// The state of the current thread, creating it if needed; `None` when the call must
/// not be recorded as the program's (guard set: the tracer's own; or thread exited).
#[inline(always)]
pub fn state<D: Door>(local: &Local, layout: Layout, call: Call) -> Option<&ThreadState> {
    match local.recording_state() {
        Some(st) => Some(st),
        None => unusual_state::<D>(local, layout.size(), layout.align(), call),
    }
}

/// `state` for a first call on a thread, a call from the tracer itself, or a call
/// after thread exit.
#[cold]
#[inline(never)]
pub fn unusual_state<D: Door>(
    local: &Local,
    size: usize,
    align: usize,
    call: Call,
) -> Option<&ThreadState> {
    let mut st = local.state();
    if local.guard() {
        if call == Call::Alloc {
            record_own(st, size, align);
        }
        return None;
    }
    if st.is_null() {
        st = thread::init::<D>(local);
    } else if st == DEAD {
        late(call);
        return None;
    }
    // SAFETY: a live state pointer (not null, not DEAD) was set by `thread::init` on
    // this thread and stays valid until this thread's exit hook marks it DEAD.
    Some(unsafe { &*st })
}

#[cold]
fn record_own(st: *mut ThreadState, size: usize, align: usize) {
    let class = size_class::index_of(size, align);
    if st.is_null() || st == DEAD {
        if let Some(c) = EARLY_OWN.get(class) {
            c.fetch_add(1, Relaxed);
        }
        return;
    }
    // SAFETY: as in `unusual_state`.
    let st = unsafe { &*st };
    bump(&st.own.allocs, 1);
    bump(&st.own.bytes, size as u64);
    if let Some(c) = st.own.classes.get(class) {
        bump(c, 1);
    }
}

#[cold]
fn late(call: Call) {
    let counter = match call {
        Call::Alloc => &LATE_ALLOCS,
        Call::Free => &LATE_FREES,
    };
    counter.fetch_add(1, Relaxed);
}
