//! An inner allocator that registers fork handlers of its own at its first call (as
//! some do, to take their locks before a fork) registers them before the tracer's:
//! the tracer's first allocation reaches the inner allocator before it arms its own.
//! `pthread_atfork` runs `prepare` handlers last registered first, so at a fork the
//! tracer takes its locks first, while the allocator's are still free to any thread
//! that holds one of the tracer's and allocates. Checked from the allocator's
//! `prepare`: the tracer's has run by then.

use alloc_tracer::TracingAllocator;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering::SeqCst};

/// The system allocator, registering a fork handler at its first call.
struct ForkAware;

static REGISTERED: AtomicBool = AtomicBool::new(false);

/// What the allocator's `prepare` saw: 0 not run, 1 the tracer's locks held, 2 not.
static SEEN: AtomicU8 = AtomicU8::new(0);

extern "C" fn allocator_prepare() {
    SEEN.store(if alloc_tracer::fork_prepared() { 1 } else { 2 }, SeqCst);
}

// SAFETY: every block comes from, and goes back to, the system allocator.
unsafe impl GlobalAlloc for ForkAware {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if !REGISTERED.swap(true, SeqCst) {
            // SAFETY: a plain handler that never unwinds.
            unsafe { libc::pthread_atfork(Some(allocator_prepare), None, None) };
        }
        // SAFETY: forwarded contract.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded contract.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: TracingAllocator<ForkAware> = TracingAllocator::new(ForkAware);

#[test]
fn the_inner_allocators_fork_handler_runs_after_the_tracers() {
    assert!(REGISTERED.load(SeqCst), "the process allocated nothing yet");
    // SAFETY: the child only exits.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        // SAFETY: ends the child at once, running nothing of the parent's.
        unsafe { libc::_exit(0) };
    }
    let mut status = 0;
    // SAFETY: waits for our own child.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert_eq!(
        SEEN.load(SeqCst),
        1,
        "the allocator's prepare ran before the tracer's (2) or not at all (0)"
    );
}
