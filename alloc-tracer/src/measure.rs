//! Allocation budgets in tests: what the calling thread allocated during a closure,
//! exactly, whatever other threads do meanwhile.
//!
//! The counts come from the thread's own counters, read before and after the
//! closure: no global reset, so any number of tests can measure at once on their
//! threads (as `cargo test` runs them). Work the closure hands to other threads (a
//! rayon pool) is not counted by [`measure`]; [`measure_process`] counts every thread
//! of the process instead, for tests that run alone.

use crate::config::{Mode, Settings};
use crate::door::Cold;
use crate::hot::live;
use crate::hot::thread::{self, DEAD, ThreadState};
use crate::registry::{self, PhaseTotals};
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::Ordering::Relaxed;

/// What one thread allocated during [`measure`]'s closure, or every thread during
/// [`measure_process`]'s.
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
    /// Size-class bytes freed: by `dealloc`, and the old blocks a `realloc` let go
    /// (so they can be above 0 with `frees` at 0).
    pub bytes_freed: u64,
    /// Blocks freed before the thread's next allocation: exact in `sites` mode; in
    /// `sample:N` an estimate, each sampled one counted for the N it stands for
    /// (once in the classes recorded whole, `size_class::SAMPLE_ALL_FROM_BYTES`);
    /// none counted in `count` mode.
    pub temporaries: u64,
    /// Whether `temporaries` counts every temporary: the tracer was in `sites` mode.
    /// [`assert_allocs!`](crate::assert_allocs) refuses a budget on temporaries
    /// otherwise (it would pass on zeros).
    pub temporaries_exact: bool,
    /// The most size-class bytes held at once during the closure, above what was
    /// held when it started (allocated minus freed). [`measure`]: exact, of what this
    /// thread allocated and freed: a block it hands to another thread that frees it
    /// meanwhile still counts as held, and one it frees for another thread counts
    /// against it (for work that moves blocks between threads, [`measure_process`]).
    /// [`measure_process`]: the process's live bytes as threads publish them, exact
    /// to within 256 KiB per thread (`LIVE_PUBLISH_BYTES`).
    pub peak_bytes: u64,
}

/// Runs `f` and returns its result with what this thread allocated meanwhile. If
/// the tracer is off, it is switched to `count` first (process-wide, and left so,
/// with heap sampling as `ALLOC_TRACE_HEAP` sets it; that starts the tracer's
/// timeline thread, and `count` counts no temporaries).
///
/// # Panics
/// When nothing would be counted: `TracingAllocator` is not this binary's
/// `#[global_allocator]` (each `tests/*.rs` file is a binary of its own and needs
/// its own), recording is paused ([`pause`](crate::pause), process-wide), or it is
/// called inside [`untraced`](crate::untraced). A budget checked against zeros would
/// pass whatever the code does.
///
/// ```no_run
/// let (v, m) = alloc_tracer::measure(|| vec![1u8; 100]);
/// assert_eq!(v.len(), 100);
/// alloc_tracer::assert_allocs!(m, allocs <= 1, bytes <= 100);
/// ```
pub fn measure<R>(f: impl FnOnce() -> R) -> (R, Measured) {
    counting();
    if crate::hot::control::load().paused() || thread::with_local(|l| l.guard()) {
        nothing_counted("measure");
    }
    // First: on a thread with no state yet, this makes it by an allocation, which
    // must not count as the closure's.
    let watch = with_state(live::watch_start);
    if watch.is_none() {
        nothing_counted("measure");
    }
    let stacks = crate::hot::control::load().stacks();
    // The sites' counts before, made under the guard and freed under it (`Own`),
    // even should `f` panic: made uncounted, their frees would count.
    let sites_before = Own(if stacks {
        this_thread_sites()
    } else {
        HashMap::new()
    });
    let before = this_thread();
    let r = f();
    let peak_bytes = watch.map_or(0, |start| {
        this_state(|st| live::watch_end::<Cold>(st, start)).unwrap_or(0)
    });
    let after = this_thread();
    if stacks {
        thread::guarded(|| {
            let mut grown: Vec<(Vec<usize>, u64)> = this_thread_sites()
                .into_iter()
                .filter_map(|(stack, n)| {
                    let d = n.saturating_sub(sites_before.0.get(&stack).copied().unwrap_or(0));
                    (d > 0).then_some((stack, d))
                })
                .collect();
            grown.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
            grown.truncate(TOP_SITES);
            LAST_SITES.with(|l| *l.borrow_mut() = grown);
        });
    } else {
        thread::guarded(|| LAST_SITES.with(|l| l.borrow_mut().clear()));
    }
    drop(sites_before);
    (
        r,
        Measured {
            peak_bytes,
            ..difference(&before, &after)
        },
    )
}

/// A value the tracer made under its guard, freed under it when dropped (taken
/// there; the default left behind, an empty map, owns no block).
struct Own<T: Default>(T);

impl<T: Default> Drop for Own<T> {
    fn drop(&mut self) {
        thread::guarded(|| drop(std::mem::take(&mut self.0)));
    }
}

/// Sites a failed [`assert_allocs!`](crate::assert_allocs) names.
const TOP_SITES: usize = 3;

thread_local! {
    /// The stacks that allocated most during this thread's latest [`measure`], with
    /// their allocations and reallocs (raw addresses: symbolized only if a budget
    /// fails). Empty when the mode records no stacks.
    static LAST_SITES: RefCell<Vec<(Vec<usize>, u64)>> = const { RefCell::new(Vec::new()) };
}

/// Allocations and reallocs per stack in this thread's site table (`sites` and
/// `sample:N` modes; in `sample:N`, estimates: each sample counts for the
/// allocations it stands for).
fn this_thread_sites() -> HashMap<Vec<usize>, u64> {
    this_state(|st| {
        let mut out: HashMap<Vec<usize>, u64> = HashMap::new();
        st.table().for_each_site(|slot, _, frames| {
            let n = slot.allocs.load(Relaxed) + slot.reallocs.load(Relaxed);
            *out.entry(frames.to_vec()).or_default() += n;
        });
        out
    })
    .unwrap_or_default()
}

/// The sites that allocated most during this thread's latest [`measure`], named as
/// reports name them, with their allocations (for [`assert_allocs!`]'s message; empty
/// when the mode records no stacks).
#[doc(hidden)]
pub fn last_top_sites() -> Vec<(String, u64)> {
    crate::session::answered_elsewhere();
    crate::handed::handed_out(thread::guarded(|| {
        let grown = LAST_SITES.with(|l| l.borrow().clone());
        let symbols =
            crate::symbolize::resolve_all(grown.iter().flat_map(|(s, _)| s.iter().copied()));
        // Without the tracer's frames further out too (`measure` itself, which would
        // read as every site's caller).
        let stacks: Vec<Vec<crate::symbolize::Frame>> = grown
            .iter()
            .map(|(stack, _)| {
                crate::report::snapshot::user_frames(stack, &symbols)
                    .into_iter()
                    .map(|(_, _, f)| f)
                    .filter(|f| !crate::report::summary::is_tracer(f))
                    .cloned()
                    .collect()
            })
            .collect();
        crate::report::summary::site_names(&stacks, stacks.len())
            .into_iter()
            .zip(grown.iter().map(|(_, n)| *n))
            .collect()
    }))
}

/// [`measure`] over every thread of the process, exited ones included: for work the
/// closure hands to other threads (a rayon pool, spawned threads). Exact, but it
/// counts whatever any other thread allocates meanwhile, so a test that uses it
/// should run alone (a test binary of its own, or `--test-threads=1`). As
/// [`measure`], it switches a tracer that is off to `count` (process-wide, and left
/// so).
///
/// # Panics
/// As [`measure`]: when nothing would be counted (`TracingAllocator` is not this
/// binary's `#[global_allocator]`, recording is paused, or it is called inside
/// [`untraced`](crate::untraced)).
pub fn measure_process<R>(f: impl FnOnce() -> R) -> (R, Measured) {
    counting();
    if crate::hot::control::load().paused()
        || thread::with_local(|l| l.guard())
        || with_state(|_| ()).is_none()
    {
        nothing_counted("measure_process");
    }
    // Its failures name no sites: none from an earlier `measure`.
    thread::guarded(|| LAST_SITES.with(|l| l.borrow_mut().clear()));
    let before = crate::counts().all_phases();
    // An enclosing call's peak so far, which this one's reset lowers: raised back
    // after, so that a nested call does not hide what the outer one saw.
    let enclosing = live::watched_peak();
    let live_before = live::reset_watched_peak();
    let r = f();
    let peak = live::watched_peak();
    live::raise_watched_peak(enclosing);
    let peak_bytes = (peak - live_before).max(0) as u64;
    let after = crate::counts().all_phases();
    (
        r,
        Measured {
            peak_bytes,
            ..difference(&before, &after)
        },
    )
}

/// Why the calling thread has no state after an allocation, with the tracer on, as
/// `function` (`measure`, `measure_process`) says it.
#[cold]
fn nothing_counted(function: &str) -> ! {
    if thread::with_local(|l| l.guard()) {
        panic!(
            "alloc_tracer::{function}: called inside alloc_tracer::untraced (or the \
             tracer's own code), whose allocations are not counted: nothing would be \
             counted; measure outside it"
        );
    }
    if crate::hot::control::load().paused() {
        panic!(
            "alloc_tracer::{function}: recording is paused (alloc_tracer::pause, \
             process-wide): nothing would be counted"
        );
    }
    panic!(
        "alloc_tracer::{function}: no allocation reaches the tracer: make TracingAllocator \
         this binary's #[global_allocator] (each tests/*.rs file is a binary of its own)"
    );
}

/// Switches the tracer to `count` if it is off (process-wide, and left so).
fn counting() {
    // Its counts are what the program reads: no report is missed.
    crate::session::answered_elsewhere();
    let current = Settings::current();
    if current.mode == Mode::Off {
        // Heap sampling as `ALLOC_TRACE=count` would have it: the settings in force
        // read it as off while the mode is, whatever `ALLOC_TRACE_HEAP` says.
        let heap_interval = Settings::from_env().map_or(current.heap_interval, |e| e.heap_interval);
        Settings {
            mode: Mode::Count,
            heap_interval,
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
        temporaries_exact: Settings::current().mode == Mode::Sites,
        peak_bytes: 0,
    }
}

/// Runs `f` on this thread's state, under the guard (`None` before the thread's
/// first recorded call, or after its exit began).
fn this_state<R>(f: impl FnOnce(&ThreadState) -> R) -> Option<R> {
    thread::guarded(|| {
        let st = thread::with_local(|l| l.state());
        if st.is_null() || st == DEAD {
            return None;
        }
        // SAFETY: a live state pointer of this thread, valid until its exit; only
        // this thread's own fields are touched, between its allocations.
        Some(f(unsafe { &*st }))
    })
}

/// [`this_state`], the state made first if the thread has none yet.
fn with_state<R>(f: impl FnOnce(&ThreadState) -> R) -> Option<R> {
    if thread::with_local(|l| l.state()).is_null() {
        // The thread's first recorded allocation makes its state.
        drop(std::hint::black_box(Box::new(0u8)));
    }
    this_state(f)
}

/// This thread's totals over all phases (zeros before its first recorded call).
fn this_thread() -> PhaseTotals {
    this_state(registry::thread_totals).unwrap_or_default()
}

/// Fails the test when a [`Measured`] field exceeds its budget, printing every
/// breach, the whole measurement and, in `sites` and `sample:N` modes, the three
/// sites that allocated most during the closure (which costs `measure` a read of the
/// thread's site table before and after):
/// `assert_allocs!(m, allocs <= 12, bytes <= 4096)`. A budget on `temporaries`
/// panics unless they were measured in `sites` mode (`Measured::temporaries_exact`).
/// `allocs` counts `alloc` calls only; reallocs are `reallocs`, where the analyzer's
/// `allocs` counts both.
#[macro_export]
macro_rules! assert_allocs {
    ($measured:expr, $($field:ident <= $limit:expr),+ $(,)?) => {{
        let m: &$crate::Measured = &$measured;
        let mut breaches: ::std::vec::Vec<::std::string::String> = ::std::vec::Vec::new();
        $(
            if ::std::stringify!($field) == "temporaries" && !m.temporaries_exact {
                ::std::panic!(
                    "assert_allocs!: a budget on {} needs the tracer in sites mode \
                     (ALLOC_TRACE=sites, or Settings {{ mode: Mode::Sites, .. }}.apply()): \
                     other modes count none or only sampled ones, and the budget would pass",
                    ::std::stringify!($field)
                );
            }
        )+
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
            let sites: ::std::vec::Vec<::std::string::String> = $crate::last_top_sites()
                .into_iter()
                .map(|(name, n)| ::std::format!("{n} at {name}"))
                .collect();
            ::std::panic!(
                "allocation budget exceeded: {}; measured {:?}{}",
                breaches.join(", "),
                m,
                if sites.is_empty() {
                    ::std::string::String::new()
                } else {
                    ::std::format!("; most allocations at: {}", sites.join("; "))
                }
            );
        }
    }};
}
