//! The entry points: what `alloc`, `alloc_zeroed`, `dealloc` and `realloc` do before
//! anything else, and the small helpers every path shares.
//!
//! Each entry point is one load of the control word and one bit test in front of the
//! inner allocator `A`; when there is nothing to record it ends in a tail call to `A`,
//! and otherwise in one to the recording function of the mode, chosen by one or two
//! more bit tests, which then calls `A` itself. Each mode gets its own copy of the
//! recording path, with no mode tests inside, so `off` saves no registers and adds no
//! frame. The recording functions take the layout's size and alignment where the
//! compiler's `__rust_alloc` and `__rust_dealloc` receive them (these entry points
//! become those functions, out of line, for code compiled outside the crate that
//! declares the global allocator), control word next, inner allocator last: the
//! entry's jump then moves no argument.

use super::alloc::{alloc_recorded, alloc_without_stack};
use super::control;
use super::door::Door;
use super::free::{EVERY_STACK, FOLLOWED, NO_STACKS, UNFOLLOWED, dealloc_recorded, end_following};
use super::realloc::record_realloc;
use std::alloc::{GlobalAlloc, Layout};

/// `alloc` (`ZEROED` false) and `alloc_zeroed` (true): the control word's test, then
/// the recording function of the mode, or `A`.
///
/// # Safety
/// The caller upholds `GlobalAlloc::alloc`'s contract for `layout`.
#[inline(always)]
pub unsafe fn alloc<A: GlobalAlloc, D: Door, const ZEROED: bool>(
    inner: &A,
    layout: Layout,
) -> *mut u8 {
    let ctl = control::load();
    let (size, align) = (layout.size(), layout.align());
    if ctl.alloc_needs_work() {
        if ctl.count_only() {
            if ctl.heap() {
                // SAFETY: forwarded contract.
                return unsafe {
                    alloc_without_stack::<A, D, ZEROED, COUNT, HEAP>(size, align, ctl, inner)
                };
            }
            // SAFETY: forwarded contract.
            return unsafe {
                alloc_without_stack::<A, D, ZEROED, COUNT, NO_HEAP>(size, align, ctl, inner)
            };
        }
        if ctl.counts_without_walk() {
            // SAFETY: forwarded contract.
            return unsafe {
                alloc_without_stack::<A, D, ZEROED, SAMPLE, HEAP>(size, align, ctl, inner)
            };
        }
        // SAFETY: forwarded contract.
        return unsafe { alloc_recorded::<A, D, ZEROED>(size, align, ctl, inner) };
    }
    // SAFETY: forwarded contract.
    unsafe { inner_alloc::<A, ZEROED>(inner, layout) }
}

/// `alloc_without_stack`'s `SAMPLING` in `count` mode.
const COUNT: bool = false;
/// `alloc_without_stack`'s `SAMPLING` in `sample` mode.
const SAMPLE: bool = true;
/// `alloc_without_stack`'s `HEAP`: blocks count against the heap countdown.
const HEAP: bool = true;
/// `alloc_without_stack`'s `HEAP` in `count` mode without heap sampling: `count`
/// does no more per small request than before heap sampling existed. (`sample`
/// mode keeps the countdown either way: its default is on, and a countdown with
/// heap sampling off never ends.)
const NO_HEAP: bool = false;

/// `dealloc`: the control word's test, then the recording function (`sites` mode's,
/// which checks every free for a temporary; one that looks up followed blocks only,
/// as `sample` mode and heap sampling need; or neither), or `A`.
///
/// # Safety
/// The caller upholds `GlobalAlloc::dealloc`'s contract.
#[inline(always)]
pub unsafe fn dealloc<A: GlobalAlloc, D: Door>(inner: &A, ptr: *mut u8, layout: Layout) {
    let ctl = control::load();
    if ctl.recording() {
        let (size, align) = (layout.size(), layout.align());
        // `sample` (and `count` with heap sampling) first: one test. `sites` mode's
        // second test is nothing beside its walk.
        if ctl.follows_only() {
            // SAFETY: forwarded contract.
            return unsafe {
                dealloc_recorded::<A, D, NO_STACKS, FOLLOWED>(ptr, size, align, ctl, inner)
            };
        }
        if ctl.every_stack() {
            // SAFETY: forwarded contract.
            return unsafe {
                dealloc_recorded::<A, D, EVERY_STACK, FOLLOWED>(ptr, size, align, ctl, inner)
            };
        }
        // SAFETY: forwarded contract.
        return unsafe {
            dealloc_recorded::<A, D, NO_STACKS, UNFOLLOWED>(ptr, size, align, ctl, inner)
        };
    }
    // SAFETY: forwarded contract.
    unsafe { inner.dealloc(ptr, layout) }
}

/// `realloc`: a followed block stops being followed before `A` may move it; the
/// realloc is recorded after `A` returns, if it succeeded.
///
/// # Safety
/// The caller upholds `GlobalAlloc::realloc`'s contract.
#[inline(always)]
pub unsafe fn realloc<A: GlobalAlloc, D: Door>(
    inner: &A,
    ptr: *mut u8,
    layout: Layout,
    new_size: usize,
) -> *mut u8 {
    let ctl = control::load();
    if ctl.recording() && ctl.follows() && super::followed::maybe(ptr) {
        end_following::<D>(ptr);
    }
    // SAFETY: the caller upholds `realloc`'s contract.
    let new = unsafe { inner.realloc(ptr, layout, new_size) };
    if !new.is_null() {
        let ctl = control::load();
        if ctl.recording() {
            record_realloc::<D>(ctl, ptr, layout, new, new_size);
        }
    }
    new
}

/// `A`'s allocation, zeroed or not.
///
/// # Safety
/// The caller upholds `GlobalAlloc::alloc`'s contract for `layout`.
#[inline(always)]
pub unsafe fn inner_alloc<A: GlobalAlloc, const ZEROED: bool>(
    inner: &A,
    layout: Layout,
) -> *mut u8 {
    // SAFETY: forwarded contract.
    unsafe {
        if ZEROED {
            inner.alloc_zeroed(layout)
        } else {
            inner.alloc(layout)
        }
    }
}

/// True for the requests classified by one lookup in
/// [`SMALL_REQUESTS`](super::size_class::SMALL_REQUESTS): at least 8 and at most
/// [`SMALL_REQUEST_MAX`](super::size_class::SMALL_REQUEST_MAX) bytes, aligned to at
/// most 8. (Then also `align <= size`, which lets the compiler drop
/// tikv-jemallocator's test for `mallocx` flags from the inlined inner call.)
#[inline(always)]
pub fn small_request(size: usize, align: usize) -> bool {
    use super::size_class::SMALL_REQUEST_MAX;
    // Two branches, marked unlikely to fail, rather than two flags and an `or`.
    if size.wrapping_sub(8) > SMALL_REQUEST_MAX - 8 || align > 8 {
        unlikely_path();
        return false;
    }
    true
}

/// Marks the branch that calls it as unlikely, like `std::hint::cold_path` (stable
/// only since Rust 1.95, above this workspace's `rust-version`).
#[cold]
#[inline(always)]
pub fn unlikely_path() {}

/// Keeps the call before it from becoming a tail call. A walk made in a function the
/// recording function calls passes over that function's own frame, one: reached by a
/// jump instead of a call, it would pass over the frame of the recording function's
/// caller instead, one of the program's.
#[inline(always)]
pub fn no_tail_call() {
    // SAFETY: an empty instruction sequence: no memory access, no effect.
    unsafe { std::arch::asm!("", options(nomem, nostack, preserves_flags)) }
}
