//! Allocation budgets in tests: what the calling thread allocated during a closure,
//! exactly, whatever other threads do meanwhile.
//!
//! The counts come from the thread's own counters, read before and after the
//! closure: no global reset, so any number of tests can measure at once on their
//! threads (as `cargo test` runs them). Work the closure hands to other threads (a
//! rayon pool) is not counted by [`measure`]; [`measure_process`] counts every thread
//! of the process instead, for tests that run alone.

use crate::config::{Mode, Settings};
use crate::hot::thread::{self, DEAD};
use crate::registry::{self, PhaseTotals};

/// What one thread allocated during [`measure`]'s closure.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Measured {
    /// `alloc` and `alloc_zeroed` calls.
    pub allocs: u64,
    /// `realloc` calls.
    pub reallocs: u64,
    /// `dealloc` calls.
    pub frees: u64,
    /// Requested bytes of allocations and reallocs.
    pub bytes: u64,
    /// Size-class bytes of allocations and reallocs.
    pub bytes_allocated: u64,
    /// Size-class bytes freed.
    pub bytes_freed: u64,
    /// Blocks freed before the thread's next allocation: exact in `sites` mode, the
    /// sampled ones in `sample:N`, none counted in `count` mode.
    pub temporaries: u64,
}

/// Runs `f` and returns its result with what this thread allocated meanwhile. If
/// the tracer is off, it is switched to `count` first (process-wide, and left so).
///
/// ```no_run
/// let (v, m) = alloc_tracer::measure(|| vec![1u8; 100]);
/// assert_eq!(v.len(), 100);
/// alloc_tracer::assert_allocs!(m, allocs <= 1, bytes <= 100);
/// ```
pub fn measure<R>(f: impl FnOnce() -> R) -> (R, Measured) {
    counting();
    let before = this_thread();
    let r = f();
    let after = this_thread();
    (r, difference(&before, &after))
}

/// [`measure`] over every thread of the process, exited ones included: for work the
/// closure hands to other threads (a rayon pool, spawned threads). Exact, but it
/// counts whatever any other thread allocates meanwhile, so a test that uses it
/// should run alone (a test binary of its own, or `--test-threads=1`).
pub fn measure_process<R>(f: impl FnOnce() -> R) -> (R, Measured) {
    counting();
    let before = crate::counts().all_phases();
    let r = f();
    let after = crate::counts().all_phases();
    (r, difference(&before, &after))
}

/// Switches the tracer to `count` if it is off (process-wide, and left so).
fn counting() {
    let current = Settings::current();
    if current.mode == Mode::Off {
        Settings {
            mode: Mode::Count,
            ..current
        }
        .apply();
    }
}

fn difference(before: &PhaseTotals, after: &PhaseTotals) -> Measured {
    let d = |f: fn(&PhaseTotals) -> u64| f(after).wrapping_sub(f(before));
    Measured {
        allocs: d(|t| t.allocs),
        reallocs: d(|t| t.reallocs),
        frees: d(|t| t.frees),
        bytes: d(|t| t.bytes_requested),
        bytes_allocated: d(|t| t.bytes_allocated),
        bytes_freed: d(|t| t.bytes_freed),
        temporaries: d(|t| t.temporaries),
    }
}

/// This thread's totals over all phases (zeros before its first recorded call).
fn this_thread() -> PhaseTotals {
    thread::guarded(|| {
        let st = thread::with_local(|l| l.state());
        if st.is_null() || st == DEAD {
            return PhaseTotals::default();
        }
        // SAFETY: a live state pointer of this thread, valid until its exit, and only
        // its atomic counters are read.
        registry::thread_totals(unsafe { &*st })
    })
}

/// Fails the test when a [`Measured`] field exceeds its budget, printing every
/// breach and the whole measurement:
/// `assert_allocs!(m, allocs <= 12, bytes <= 4096)`.
#[macro_export]
macro_rules! assert_allocs {
    ($measured:expr, $($field:ident <= $limit:expr),+ $(,)?) => {{
        let m: &$crate::Measured = &$measured;
        let mut breaches: ::std::vec::Vec<::std::string::String> = ::std::vec::Vec::new();
        $(
            if m.$field > $limit {
                breaches.push(::std::format!(
                    "{} = {} (budget {})",
                    ::std::stringify!($field),
                    m.$field,
                    $limit
                ));
            }
        )+
        if !breaches.is_empty() {
            ::std::panic!(
                "allocation budget exceeded: {}; measured {:?}",
                breaches.join(", "),
                m
            );
        }
    }};
}
