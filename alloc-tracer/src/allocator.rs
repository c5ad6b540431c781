//! [`TracingAllocator`]: the `GlobalAlloc` a program declares, wiring the hot path's
//! entry points to the tracer's cold side.

use crate::door::Cold;
use crate::hot::entry;
use std::alloc::{GlobalAlloc, Layout};

/// A `GlobalAlloc` that records every call before handing it to `A`.
///
/// ```no_run
/// #[global_allocator]
/// static GLOBAL: alloc_tracer::TracingAllocator<alloc_tracer::Jemalloc> =
///     alloc_tracer::TracingAllocator::new(alloc_tracer::Jemalloc);
/// ```
///
/// All state is process-wide (there is one global allocator), so only one instance
/// should record; see the crate documentation for modes and reports.
pub struct TracingAllocator<A> {
    inner: A,
}

impl<A> TracingAllocator<A> {
    /// Wraps `inner`.
    pub const fn new(inner: A) -> Self {
        TracingAllocator { inner }
    }

    /// The wrapped allocator.
    pub fn inner(&self) -> &A {
        &self.inner
    }
}

/// For `entry::alloc`'s `ZEROED`.
const ZEROED: bool = true;
const NOT_ZEROED: bool = false;

// SAFETY: every method forwards to `A` with the caller's arguments unchanged and
// returns `A`'s result unchanged; recording only reads the arguments and the result.
// So the GlobalAlloc contract holds exactly as far as it holds for `A`.
unsafe impl<A: GlobalAlloc> GlobalAlloc for TracingAllocator<A> {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller upholds `alloc`'s contract for `layout`.
        unsafe { entry::alloc::<A, Cold, NOT_ZEROED>(&self.inner, layout) }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller upholds `alloc_zeroed`'s contract for `layout`.
        unsafe { entry::alloc::<A, Cold, ZEROED>(&self.inner, layout) }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller upholds `dealloc`'s contract.
        unsafe { entry::dealloc::<A, Cold>(&self.inner, ptr, layout) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller upholds `realloc`'s contract.
        unsafe { entry::realloc::<A, Cold>(&self.inner, ptr, layout, new_size) }
    }
}
