//! Surviving `fork()`: the tracer's locks are never inherited held.
//!
//! A child of a multithreaded process has only the thread that forked; a lock that
//! another thread held at that moment stays held forever in the child, and the
//! child's next allocation that needs it (a followed block's free, a new thread's
//! registration, a report) would hang. So, like jemalloc, the tracer registers
//! `pthread_atfork` handlers: before the fork the forking thread takes every lock of
//! the cold side, in the order the code takes them elsewhere; after it, parent and
//! child each release their copy. The recording path takes no lock, so threads keep
//! allocating meanwhile. The handlers are registered at the process's first
//! allocation, after the inner allocator served it: an allocator that registers its
//! own handlers on its first call has done so by then, and since `prepare` handlers
//! run in the reverse of their registration, the tracer's run first, taking its
//! locks while a thread that holds one can still reach the allocator's. The
//! `backtrace` crate's lock, which symbolizing takes, is covered by one of the
//! tracer's held around every use of it (`symbolize::resolve_all`). A report
//! being written holds a `flock` on its folder's parent through a descriptor, and a
//! lock lasts until every copy of it is closed:
//! the child closes its copies (never unlocking), so that its own report there does
//! not wait forever.
//!
//! One-time setup is fork-safe the same way or has none to catch: the tables made
//! lazily (`LazyLock`s of the registry, lifetimes, heap sampling, site numbering) are
//! all locked by `prepare`, which waits for any first use in progress to finish; the
//! handlers' registration here, the timeline's start and the threads' exit key are
//! atomics, not `Once`s. (The exit report's working directory is a `OnceLock` set at
//! the first allocation, before any thread exists, and only read after a fork.)
//!
//! What the child inherits is a copy of the parent's counters: a report written by
//! the child counts what the parent recorded before the fork too. Its exit report
//! goes where `ALLOC_TRACE_REPORT` says only when the path holds `%p` (see
//! `session`); otherwise the child writes none, so it never replaces the parent's.

use std::cell::RefCell;
use std::sync::MutexGuard;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Release};

/// Every cold lock, held by the forking thread from `prepare` to `parent`/`child`.
struct Held {
    // Fields drop in declaration order, releasing in the reverse of taking.
    _symbolizing: MutexGuard<'static, ()>,
    report_locks: MutexGuard<'static, Vec<std::os::fd::RawFd>>,
    _session: crate::session::HeldForFork,
    _phases: MutexGuard<'static, Vec<crate::phase::PhaseTime>>,
    _allocator_name: MutexGuard<'static, Option<&'static str>>,
    _labels: MutexGuard<'static, std::collections::BTreeMap<String, String>>,
    _timeline: crate::timeline::HeldForFork,
    _heap: crate::heap::HeldForFork,
    _lifetimes: crate::lifetimes::HeldForFork,
    _registry: crate::registry::HeldForFork,
    _pauses: MutexGuard<'static, usize>,
    _applying: MutexGuard<'static, ()>,
}

thread_local! {
    static HELD: RefCell<Option<Held>> = const { RefCell::new(None) };
}

/// 0 until the handlers are registered; then the process id of the one registering
/// them, shifted left by one, with bit 0 set once they are. Not a `Once`: a fork
/// that catches a `Once` mid-call leaves it running in the child, whose next `arm`
/// would wait on it for good. Here a claim by another process (the parent, caught
/// by the fork) is one whose registration the child lacks, since `child` marks it
/// done whenever the handlers ran.
static ARMED: AtomicU64 = AtomicU64::new(0);

/// Yields `arm` waits for another thread's registration before taking it for stale
/// (tens of milliseconds on an idle machine; a registration takes microseconds).
const ARM_PATIENCE: u32 = 100_000;

/// Registers the fork handlers, once per process. Cold; returns once they are
/// registered.
pub fn arm() {
    let me = u64::from(std::process::id()) << 1;
    let mut waited = 0u32;
    loop {
        let seen = ARMED.load(Acquire);
        if seen & 1 == 1 {
            return;
        }
        if seen == me && waited < ARM_PATIENCE {
            // Another thread of this process is registering them (microseconds). A
            // claim that stays longer is a stale one with this process's id (ids are
            // reused, and a new pid namespace starts at 1): registered anew then;
            // registering twice is harmless, as the handlers do nothing the second
            // time round.
            waited += 1;
            std::thread::yield_now();
            continue;
        }
        if seen == me || ARMED.compare_exchange(seen, me, AcqRel, Acquire).is_ok() {
            // SAFETY: the three handlers are plain `extern "C"` functions that never
            // unwind (they only take and drop locks, under the re-entrancy guard).
            unsafe { libc::pthread_atfork(Some(prepare), Some(release), Some(child)) };
            ARMED.store(me | 1, Release);
            return;
        }
    }
}

extern "C" fn prepare() {
    crate::lineage::forking();
    // Registered twice (see `arm`), the handlers run twice a fork: the second time
    // the locks are held already, by this thread, and taking them again would wait
    // for good.
    if HELD.try_with(|h| h.borrow().is_some()).unwrap_or(false) {
        return;
    }
    crate::hot::thread::guarded(|| {
        // Before the rest: `Settings::apply` holds it while it takes the registry's
        // and the timeline's.
        let applying = crate::weights::applying();
        // Before the registry's: a pause guard's drop holds it while it takes those.
        let pauses = crate::phase::hold_pauses_for_fork();
        let registry = crate::registry::hold_for_fork();
        let lifetimes = crate::lifetimes::hold_for_fork();
        let heap = crate::heap::hold_for_fork();
        let timeline = crate::timeline::hold_for_fork();
        let labels = crate::labels::hold_for_fork();
        // A leaf: never held while another lock is taken.
        let allocator_name = crate::report::manifest::hold_for_fork();
        let phases = crate::phase::hold_for_fork();
        let session = crate::session::hold_for_fork();
        // A leaf too: held only to open a folder and list it.
        let report_locks = crate::report::directory::hold_for_fork();
        // A leaf: the `backtrace` crate's lock is taken only under it.
        let symbolizing = crate::symbolize::hold_for_fork();
        let _ = HELD.try_with(|h| {
            *h.borrow_mut() = Some(Held {
                _symbolizing: symbolizing,
                report_locks,
                _session: session,
                _phases: phases,
                _lifetimes: lifetimes,
                _heap: heap,
                _timeline: timeline,
                _labels: labels,
                _allocator_name: allocator_name,
                _registry: registry,
                _pauses: pauses,
                _applying: applying,
            })
        });
    });
}

/// True on the forking thread between `prepare` and the fork: the tracer's locks
/// are held for it.
pub(crate) fn prepared() -> bool {
    HELD.try_with(|h| h.try_borrow().is_ok_and(|h| h.is_some()))
        .unwrap_or(false)
}

/// After the fork, in the parent.
extern "C" fn release() {
    crate::hot::thread::guarded(|| {
        let _ = HELD.try_with(|h| h.borrow_mut().take());
    });
}

/// After the fork, in the child: closes its copies of the report folders' locks
/// (`report::directory`), then releases like the parent.
extern "C" fn child() {
    // These handlers ran, so they are registered here, whatever state the fork
    // caught `arm` in.
    ARMED.fetch_or(1, Release);
    crate::lineage::forked();
    crate::hot::thread::guarded(|| {
        let _ = HELD.try_with(|h| {
            if let Some(held) = h.borrow_mut().as_mut() {
                crate::report::directory::close_in_child(&mut held.report_locks);
            }
        });
    });
    release();
}
