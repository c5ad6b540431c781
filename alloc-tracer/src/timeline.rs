//! Cold path: the live-bytes timeline, sampled by a thread of the tracer's own.
//!
//! Every `ALLOC_TRACE_TIMELINE_MS` (10 ms by default) the sampler reads the global
//! live bytes (one atomic load), the current phase (the control word), the
//! running allocation count and bytes (summed over threads under the registry lock,
//! which the recording path never waits on) and the process's resident set size
//! (`/proc/self/statm`, a few microseconds on the sampler's thread). Recording threads are never stopped or
//! slowed but for the cache lines the sampler reads.
//!
//! The sampler is a bare `pthread` started when tracing starts (at the first
//! allocation, or `Settings::apply`) with an interval other than 0: creating it
//! allocates nothing through the global allocator, so it is safe from inside the
//! first allocation, and it runs with the re-entrancy guard set, so what it
//! allocates is the tracer's own. With `ALLOC_TRACE_TIMELINE_MS=0` no thread is
//! started, so a traced program stays single-threaded if it was (which
//! `unshare(CLONE_NEWUSER)`, for one, requires). A forked child has no sampler: its
//! timeline stops at the fork, but for the closing point its report takes.

use crate::hot::clock;
use crate::hot::control;
use crate::hot::live;
use crate::hot::thread::with_local;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

/// One sample of the timeline.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Point {
    /// Nanoseconds after tracing started.
    pub time_ns: u64,
    /// Phase id in force.
    pub phase: usize,
    /// Global live bytes (exact to within the peak's stated error).
    pub live_bytes: i64,
    /// Allocations and reallocs so far.
    pub alloc_count: u64,
    /// Their real bytes so far.
    pub bytes_allocated: u64,
    /// The process's resident set size (0 where unknown).
    pub rss_bytes: u64,
}

/// Most points kept: past it every other point is dropped and the sampler keeps one
/// tick in twice as many, so a run of any length keeps a bounded, even timeline
/// (about 2.9 hours at 10 ms before the first halving).
const MAX_POINTS: usize = 1 << 20;

struct Timeline {
    points: Vec<Point>,
    /// Ticks per kept point.
    stride: u64,
    ticks: u64,
}

static TIMELINE: Mutex<Timeline> = Mutex::new(Timeline {
    points: Vec::new(),
    stride: 1,
    ticks: 0,
});
/// Default interval of the timeline, in milliseconds.
pub const DEFAULT_INTERVAL_MS: u64 = 10;

static INTERVAL_MS: AtomicU64 = AtomicU64::new(DEFAULT_INTERVAL_MS);
/// Set once tracing has been on (a mode other than `off` chosen).
static STARTED: AtomicBool = AtomicBool::new(false);
/// Set by the caller that starts the sampler. A flag, not a `Once`: a `Once` that
/// a fork catches mid-start stays running in the child, and every later start there
/// (a `Settings::apply`) would wait on it for good. The child has no sampler either
/// way (threads do not survive a fork).
static SAMPLER: AtomicBool = AtomicBool::new(false);

fn timeline() -> MutexGuard<'static, Timeline> {
    TIMELINE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Sets the sampling interval in milliseconds (0: no samples).
pub(crate) fn set_interval_ms(ms: u64) {
    INTERVAL_MS.store(ms, Relaxed);
}

/// The sampling interval in milliseconds (0: no samples).
pub fn interval_ms() -> u64 {
    INTERVAL_MS.load(Relaxed)
}

/// True once [`start`] has run: tracing was on at some point in this process (the
/// timeline starts with the first mode other than `off`, from the environment or
/// `Settings::apply`).
pub(crate) fn started() -> bool {
    STARTED.load(Relaxed)
}

/// Marks tracing as started and, unless the interval is 0, starts the sampler
/// thread, once per process. Allocation-free.
///
/// The thread starts with every signal blocked (a new thread inherits its creator's
/// mask; the creator's is restored at once): a signal sent to the process is then
/// never delivered to it, so the program's own handling (a thread that waits for
/// SIGINT with the signal blocked everywhere else, say) works as without the tracer.
pub(crate) fn start() {
    STARTED.store(true, Relaxed);
    if interval_ms() == 0 {
        return;
    }
    if SAMPLER.swap(true, Relaxed) {
        return;
    }
    {
        // SAFETY: the sigset_t values are initialised by sigfillset and by
        // pthread_sigmask before they are read; a zeroed `pthread_t` is a valid place
        // for `pthread_create` to write to; `run` is an `extern "C"` function that
        // never returns or unwinds.
        unsafe {
            let mut all: libc::sigset_t = std::mem::zeroed();
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::sigfillset(&mut all);
            libc::pthread_sigmask(libc::SIG_BLOCK, &all, &mut old);
            let mut t: libc::pthread_t = std::mem::zeroed();
            if libc::pthread_create(&mut t, std::ptr::null(), run, std::ptr::null_mut()) == 0 {
                libc::pthread_detach(t);
            }
            libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        }
    }
}

extern "C" fn run(_: *mut libc::c_void) -> *mut libc::c_void {
    with_local(|l| l.set_guard(true));
    loop {
        let ms = interval_ms();
        std::thread::sleep(Duration::from_millis(if ms == 0 { 100 } else { ms }));
        if ms != 0 && control::load().recording() {
            // A panic here would unwind out of an `extern "C"` function: the sampler
            // stops instead.
            if std::panic::catch_unwind(tick).is_err() {
                break;
            }
        }
    }
    std::ptr::null_mut()
}

fn tick() {
    let due = {
        let mut t = timeline();
        t.ticks += 1;
        t.ticks.is_multiple_of(t.stride)
    };
    if !due {
        return;
    }
    // Not under the timeline's lock: no lock is ever taken while holding it.
    let point = now();
    let mut t = timeline();
    if t.points.len() >= MAX_POINTS {
        let kept: Vec<Point> = t.points.iter().step_by(2).copied().collect();
        t.points = kept;
        t.stride *= 2;
    }
    t.points.push(point);
}

/// A point taken now. Takes the registry's lock: never called under the
/// timeline's.
fn now() -> Point {
    let (alloc_count, bytes_allocated) = crate::registry::running_totals(crate::phase::used());
    Point {
        time_ns: clock::now_ns().saturating_sub(clock::start_ns()),
        phase: control::load().phase(),
        live_bytes: live::live_bytes(),
        alloc_count,
        bytes_allocated,
        rss_bytes: crate::rss::current_bytes(),
    }
}

/// The timeline so far.
pub fn points() -> Vec<Point> {
    timeline().points.clone()
}

/// The timeline so far and a closing point taken now, for a report: so that it
/// reaches the report's moment, and a run shorter than the interval has a point.
/// Not kept: a later report takes its own. Just the points where the timeline is
/// off (an interval of 0) or tracing never started.
pub fn points_to_now() -> Vec<Point> {
    let mut all = points();
    if interval_ms() == 0 || !started() {
        return all;
    }
    // Taken after the points read: a tick between the two cannot land after it.
    let mut last = now();
    if let Some(p) = all.last() {
        last.time_ns = last.time_ns.max(p.time_ns);
    }
    all.push(last);
    all
}

/// About how many bytes the timeline takes.
pub fn memory_bytes() -> u64 {
    (timeline().points.capacity() * size_of::<Point>()) as u64
}

/// The timeline's lock, held across a `fork()` (see `fork`).
pub(crate) struct HeldForFork {
    _timeline: MutexGuard<'static, Timeline>,
}

/// Takes the timeline's lock (never held while another is taken).
pub(crate) fn hold_for_fork() -> HeldForFork {
    HeldForFork {
        _timeline: timeline(),
    }
}
