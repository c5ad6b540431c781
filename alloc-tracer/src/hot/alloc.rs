//! Allocation paths: what each mode records for `alloc` and `alloc_zeroed`.

use super::caller::{Call, state, unusual_state};
use super::control::{self, Control};
use super::countdown;
use super::door::Door;
use super::entry::{inner_alloc, no_tail_call, small_request};
use super::heap;
use super::live::{self, LIVE_UNIT, Overflow};
use super::log_linear;
use super::site_table::bump;
use super::sites::{ALLOC, sample, site_and_latest};
use super::size_class::{self, LAST_SMALL, SMALL_REQUEST_MAX, SMALL_REQUESTS};
use super::thread::{self, ThreadState, with_local};
use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::Ordering::Relaxed;

/// Allocation in mode `count` or (`SAMPLING`) `sample`, mode read, recording, for
/// everything but a sampled stack; `HEAP`: small blocks count against the heap
/// countdown (`count` mode without heap sampling skips it). Out of line, so that the
/// entry point stays a load, two tests and a jump. A small request (`small_request`,
/// nearly all of them) is recorded, then handed to `A` by a tail call: nothing is
/// done after `A` returns, so this function saves no register and sets up no frame,
/// and a request `A` refuses stays counted. When the sample countdown's chunk runs
/// out (`sample` mode) the allocation goes on to `alloc_chunk_done`, which finds
/// whether it is the one in N whose stack is sampled (then `alloc_sampled` calls `A`
/// and records the site); when the heap countdown's does, to
/// `alloc_heap_chunk_done`, which finds whether heap sampling samples it (then
/// `alloc_heap_sampled`); anything not small, the thread's first call and the
/// tracer's own go to `alloc_recorded`; all by tail calls.
///
/// # Safety
/// The caller upholds `GlobalAlloc::alloc`'s contract for the layout of `size` and
/// `align`.
#[inline(never)]
pub unsafe fn alloc_without_stack<
    A: GlobalAlloc,
    D: Door,
    const ZEROED: bool,
    const SAMPLING: bool,
    const HEAP: bool,
>(
    size: usize,
    align: usize,
    ctl: Control,
    inner: &A,
) -> *mut u8 {
    // SAFETY: `size` and `align` are those of the caller's `Layout`.
    let layout = unsafe { Layout::from_size_align_unchecked(size, align) };
    let st = match thread::current().recording_state() {
        Some(st) if small_request(size, align) => st,
        // SAFETY: forwarded contract.
        _ => return unsafe { alloc_recorded::<A, D, ZEROED>(size, align, ctl, inner) },
    };
    let r = st.small_requests[size];
    // `count`, or `sample` for all but one allocation in N: nothing to record once `A`
    // has returned, so `A` is reached by a tail call. The branch that publishes live
    // bytes makes a call instead, not a tail call: with a branch that needs a frame,
    // the compiler sets one up in that branch only, and the common path goes without
    // (see `free::dealloc_recorded`). The end of a sampling countdown's chunk goes on
    // by a tail call too, and so does the end of a heap countdown's; each counts the
    // allocation itself, so that the common path counts it after them and has no
    // use for the control word afterwards (else it keeps a copy for their calls).
    if SAMPLING {
        let left = st.sample_countdown.get().wrapping_sub(1);
        st.sample_countdown.set(left);
        if left == 0 {
            // SAFETY: forwarded contract.
            return unsafe { alloc_chunk_done::<A, D, ZEROED>(size, align, ctl, inner) };
        }
    }
    if HEAP && heap::chunk_ran_out(st, r.usable()) {
        // SAFETY: forwarded contract.
        return unsafe { alloc_heap_chunk_done::<A, D, ZEROED>(size, align, ctl, inner) };
    }
    count_small_alloc(st, ctl, size);
    if live::small_alloc(st, r.units as i16) {
        // SAFETY: forwarded contract.
        let ptr = unsafe { publish_then_alloc::<A, D, ZEROED>(size, align, inner) };
        no_tail_call();
        return ptr;
    }
    // SAFETY: forwarded contract.
    unsafe { inner_alloc::<A, ZEROED>(inner, layout) }
}

/// The start of each cold path that `alloc_without_stack` reaches by a tail call:
/// the request's layout and this thread's state, which the caller found recording.
/// `Err` (not reached) carries the block from `A`, allocated unrecorded.
///
/// # Safety
/// As for `alloc_without_stack`.
#[inline(always)]
unsafe fn cold_state<'t, A: GlobalAlloc, const ZEROED: bool>(
    size: usize,
    align: usize,
    inner: &A,
) -> Result<(Layout, &'t ThreadState), *mut u8> {
    // SAFETY: `size` and `align` are those of the caller's `Layout`.
    let layout = unsafe { Layout::from_size_align_unchecked(size, align) };
    match thread::current().recording_state() {
        Some(st) => Ok((layout, st)),
        // SAFETY: forwarded contract.
        None => Err(unsafe { inner_alloc::<A, ZEROED>(inner, layout) }),
    }
}

/// Counts a small request of `size` bytes in the phase's per-size counter.
#[inline(always)]
fn count_small_alloc(st: &ThreadState, ctl: Control, size: usize) {
    bump(&st.phase(ctl).small_allocs[size], 1);
}

/// `alloc_without_stack` when the heap countdown's chunk ran out: counts the
/// allocation, then it is either a heap-sampled allocation, which goes on to `alloc_heap_sampled`,
/// or one like the others, with the next chunk set. Reached by a tail call, so that
/// `alloc_without_stack` itself makes no call on its common path (a call there would
/// give every allocation the frame it needs).
///
/// # Safety
/// As for `alloc_without_stack`.
#[cold]
#[inline(never)]
unsafe fn alloc_heap_chunk_done<A: GlobalAlloc, D: Door, const ZEROED: bool>(
    size: usize,
    align: usize,
    ctl: Control,
    inner: &A,
) -> *mut u8 {
    // SAFETY: forwarded contract.
    let (layout, st) = match unsafe { cold_state::<A, ZEROED>(size, align, inner) } {
        Ok(found) => found,
        Err(ptr) => return ptr,
    };
    count_small_alloc(st, ctl, size);
    if heap::due_after_chunk(st) {
        // SAFETY: forwarded contract.
        return unsafe { alloc_heap_sampled::<A, D, ZEROED>(size, align, ctl, inner) };
    }
    // SAFETY: forwarded contract.
    unsafe { count_live_then_alloc::<A, D, ZEROED>(st, size, layout, inner) }
}

/// The end of a cold path for a small allocation not sampled: counts its live
/// bytes (publishing on overflow), then calls `A`.
///
/// # Safety
/// As for `alloc_without_stack`; `layout` is the request's, of `size` bytes.
#[inline(always)]
unsafe fn count_live_then_alloc<A: GlobalAlloc, D: Door, const ZEROED: bool>(
    st: &ThreadState,
    size: usize,
    layout: Layout,
    inner: &A,
) -> *mut u8 {
    if live::small_alloc(st, SMALL_REQUESTS[size].units as i16) {
        live::publish_overflow::<D>(st, Overflow::Up);
    }
    // SAFETY: forwarded contract.
    unsafe { inner_alloc::<A, ZEROED>(inner, layout) }
}

/// `alloc_without_stack` in `sample` mode when the countdown's chunk ran out: counts
/// the small allocation, then it is either the sampled allocation, which goes on to
/// `alloc_sampled` (by a tail call, like the one from `alloc_without_stack` it
/// stands for), or one like the others, with the next chunk set. Its bytes count
/// against the heap countdown here, as in `alloc_without_stack`.
///
/// # Safety
/// As for `alloc_without_stack`.
#[cold]
#[inline(never)]
unsafe fn alloc_chunk_done<A: GlobalAlloc, D: Door, const ZEROED: bool>(
    size: usize,
    align: usize,
    ctl: Control,
    inner: &A,
) -> *mut u8 {
    // SAFETY: forwarded contract.
    let (layout, st) = match unsafe { cold_state::<A, ZEROED>(size, align, inner) } {
        Ok(found) => found,
        Err(ptr) => return ptr,
    };
    count_small_alloc(st, ctl, size);
    let r = SMALL_REQUESTS[size];
    // The sample's chunk first, then the heap's: each countdown redraws on its own
    // at its chunk end under new intervals, and counts the allocation (or the
    // block's bytes) against its new draw.
    let sampled = countdown::sample_chunk_done(st);
    let heap = heap::due(st, r.usable());
    if sampled {
        st.pending_size.set(size);
        st.pending_ctl.set(ctl);
        let overflowed = live::small_alloc(st, r.units as i16);
        // SAFETY: forwarded contract.
        return unsafe { alloc_sampled::<A, D, ZEROED>(size, align, ctl, inner, overflowed, heap) };
    }
    if heap {
        // SAFETY: forwarded contract.
        return unsafe { alloc_heap_sampled::<A, D, ZEROED>(size, align, ctl, inner) };
    }
    // SAFETY: forwarded contract.
    unsafe { count_live_then_alloc::<A, D, ZEROED>(st, size, layout, inner) }
}

/// `alloc_without_stack` when the live-bytes counter overflowed upwards: publishes,
/// then allocates.
///
/// # Safety
/// As for `alloc_without_stack`.
#[cold]
#[inline(never)]
unsafe fn publish_then_alloc<A: GlobalAlloc, D: Door, const ZEROED: bool>(
    size: usize,
    align: usize,
    inner: &A,
) -> *mut u8 {
    if let Some(st) = thread::current().recording_state() {
        live::publish_overflow::<D>(st, Overflow::Up);
    }
    // SAFETY: forwarded contract; `size` and `align` are those of the caller's
    // `Layout`.
    unsafe { inner_alloc::<A, ZEROED>(inner, Layout::from_size_align_unchecked(size, align)) }
}

/// `alloc_chunk_done` in `sample` mode for the allocation whose stack is sampled,
/// its counters already recorded (and live bytes to publish when `overflowed`).
/// Calls `A`, then records the site, the latest block, the heap sample when `heap`
/// and, on a null return, takes the counters back. Reached by a tail call, so
/// `sample` finds the same one frame of the tracer's below it as from
/// `alloc_recorded`.
///
/// # Safety
/// As for `alloc_without_stack`.
#[cold]
#[inline(never)]
unsafe fn alloc_sampled<A: GlobalAlloc, D: Door, const ZEROED: bool>(
    size: usize,
    align: usize,
    ctl: Control,
    inner: &A,
    overflowed: bool,
    heap: bool,
) -> *mut u8 {
    // SAFETY: forwarded contract.
    let (layout, st) = match unsafe { cold_state::<A, ZEROED>(size, align, inner) } {
        Ok(found) => found,
        Err(ptr) => return ptr,
    };
    if overflowed {
        // Before `A`: `take_back_refused` needs a counter that has not overflowed.
        live::publish_overflow::<D>(st, Overflow::Up);
    }
    // SAFETY: forwarded contract.
    let ptr = unsafe { inner_alloc::<A, ZEROED>(inner, layout) };
    if ptr.is_null() {
        // The sample passes to the next allocation (the countdown, now 0, would
        // otherwise wrap).
        st.sample_countdown.set(1);
        if heap {
            countdown::next_heap(st);
        }
        return take_back_refused::<D>();
    }
    st.last_block.store(ptr as usize, Relaxed);
    let r = SMALL_REQUESTS[size];
    sample::<D, ALLOC, true>(st, ctl, ptr, size, r.usable(), r.class as usize);
    if heap {
        heap::sample_block::<D>(st, ctl, ptr, r.usable(), r.class as usize);
    }
    no_tail_call();
    ptr
}

/// `alloc_heap_chunk_done` (or `alloc_chunk_done`) for a small block that heap
/// sampling samples, its allocation counted: counts its live bytes, calls `A`, then
/// hands the block to heap sampling, or on a null return takes the counters back.
/// Reached by a tail call, so that the stack walk finds one frame of the tracer's,
/// as from `alloc_recorded`.
///
/// # Safety
/// As for `alloc_without_stack`.
#[cold]
#[inline(never)]
unsafe fn alloc_heap_sampled<A: GlobalAlloc, D: Door, const ZEROED: bool>(
    size: usize,
    align: usize,
    ctl: Control,
    inner: &A,
) -> *mut u8 {
    // SAFETY: forwarded contract.
    let (layout, st) = match unsafe { cold_state::<A, ZEROED>(size, align, inner) } {
        Ok(found) => found,
        Err(ptr) => return ptr,
    };
    let r = SMALL_REQUESTS[size];
    if live::small_alloc(st, r.units as i16) {
        live::publish_overflow::<D>(st, Overflow::Up);
    }
    // SAFETY: forwarded contract.
    let ptr = unsafe { inner_alloc::<A, ZEROED>(inner, layout) };
    if ptr.is_null() {
        countdown::next_heap(st);
        st.pending_size.set(size);
        st.pending_ctl.set(ctl);
        return take_back_refused::<D>();
    }
    heap::sample_block::<D>(st, ctl, ptr, r.usable(), r.class as usize);
    no_tail_call();
    ptr
}

/// Takes back the counts of a small request that `A` refused, recorded before the
/// call by `alloc_chunk_done` or `alloc_heap_sampled`, which left its size and
/// control word in `pending_size` and `pending_ctl`; returns null.
#[cold]
#[inline(never)]
fn take_back_refused<D: Door>() -> *mut u8 {
    if let Some(st) = thread::current().recording_state() {
        let size = st.pending_size.get().min(SMALL_REQUEST_MAX);
        bump(&st.phase(st.pending_ctl.get()).small_allocs[size], u64::MAX);
        live::add_bytes::<D>(st, -(SMALL_REQUESTS[size].usable() as i64));
    }
    std::ptr::null_mut()
}

/// Allocation recorded after `A` returns: every small request in `sites` mode (with
/// its stack walked), and what `alloc_without_stack` does not take: requests that are
/// not small, the thread's first call, the tracer's own, and the first of the
/// process (mode not read yet). The small ones are classified by one table lookup;
/// anything else goes on to `alloc_any`.
///
/// # Safety
/// As for `alloc_without_stack`.
#[inline(never)]
pub unsafe fn alloc_recorded<A: GlobalAlloc, D: Door, const ZEROED: bool>(
    size: usize,
    align: usize,
    ctl: Control,
    inner: &A,
) -> *mut u8 {
    // SAFETY: `size` and `align` are those of the caller's `Layout`.
    let layout = unsafe { Layout::from_size_align_unchecked(size, align) };
    if !ctl.recording() || !small_request(size, align) {
        // SAFETY: forwarded contract.
        return unsafe { alloc_any::<A, D, ZEROED>(inner, ctl, layout) };
    }
    // SAFETY: forwarded contract.
    let ptr = unsafe { inner_alloc::<A, ZEROED>(inner, layout) };
    if ptr.is_null() {
        return ptr;
    }
    // (Alignment 1 stands for this request's: at most 8, it does not change the
    // class. Then the alignment need not be kept across the call to `A`.)
    let st = match thread::current().recording_state() {
        Some(st) => st,
        None => match unusual_state::<D>(thread::current(), size, 1, Call::Alloc) {
            Some(st) => st,
            None => return ptr,
        },
    };
    let r = SMALL_REQUESTS[size];
    bump(&st.phase(ctl).small_allocs[size], 1);
    record_alloc::<D>(st, ctl, ptr, size, r.class, r.usable(), r.units as i16)
}

/// `alloc_recorded` for the other requests: larger, or more aligned, or the first
/// of the process (mode not read yet).
///
/// # Safety
/// As for `alloc_without_stack`.
#[inline(never)]
unsafe fn alloc_any<A: GlobalAlloc, D: Door, const ZEROED: bool>(
    inner: &A,
    ctl: Control,
    layout: Layout,
) -> *mut u8 {
    if !ctl.recording() {
        // SAFETY: forwarded contract.
        return unsafe { alloc_first::<A, D, ZEROED>(inner, layout) };
    }
    // SAFETY: forwarded contract.
    let ptr = unsafe { inner_alloc::<A, ZEROED>(inner, layout) };
    if !ptr.is_null() {
        record_any_alloc::<D>(ctl, ptr, layout);
    }
    ptr
}

/// The first allocation of the process (mode not read yet): allocates, has the
/// settings read, and records as they say.
///
/// # Safety
/// As for `alloc_without_stack`.
#[cold]
#[inline(never)]
unsafe fn alloc_first<A: GlobalAlloc, D: Door, const ZEROED: bool>(
    inner: &A,
    layout: Layout,
) -> *mut u8 {
    // The inner allocator first: one that sets itself up on its first call (its
    // fork handlers among it) has then done so before the tracer registers its own,
    // whose `prepare` thus runs before the allocator's and takes the tracer's locks
    // while the allocator's are still free to the threads that hold them.
    // SAFETY: forwarded contract.
    let ptr = unsafe { inner_alloc::<A, ZEROED>(inner, layout) };
    // Allocations made while reading the settings arrive here again; the guard makes
    // them pass through.
    if !with_local(|l| l.guard()) {
        thread::guarded(D::first_allocation);
    }
    let ctl = control::load();
    if !ptr.is_null() && ctl.recording() {
        record_first_alloc::<D>(ctl, ptr, layout);
    }
    ptr
}

/// `record_any_alloc` out of line: the first allocation is recorded like any other,
/// from a frame of its own, as the stack walk expects.
#[inline(never)]
fn record_first_alloc<D: Door>(ctl: Control, ptr: *mut u8, layout: Layout) {
    record_any_alloc::<D>(ctl, ptr, layout);
}

/// Records an allocation of any size and alignment.
#[inline(always)]
fn record_any_alloc<D: Door>(ctl: Control, ptr: *mut u8, layout: Layout) {
    let Some(st) = state::<D>(thread::current(), layout, Call::Alloc) else {
        return;
    };
    let size = layout.size();
    bump(&st.requested[log_linear::size_bucket(size)], 1);
    let class = size_class::index_of(size, layout.align());
    let usable = size_class::usable(class, size);
    let p = st.phase(ctl);
    bump(&p.allocs[class as u8 as usize], 1);
    bump(&p.bytes_requested, size as u64);
    if class > LAST_SMALL {
        bump(&p.large_bytes_allocated, usable as u64);
        record_alloc::<D>(st, ctl, ptr, size, class as u8, usable, 0);
        // After the block's heap sample, so that a peak its bytes make is kept
        // with the block in it.
        live::add_bytes::<D>(st, usable as i64);
    } else {
        let units = (usable / LIVE_UNIT) as i16;
        record_alloc::<D>(st, ctl, ptr, size, class as u8, usable, units);
    }
}

/// Records an allocation, its counts and large bytes aside (the caller's), its site
/// and heap sample as the mode says, and returns `ptr`: inlined into
/// `alloc_recorded` or `alloc_any`, whose frame is where the stack walks start (the
/// return address in it is into the allocator entry point or the program).
/// `units`: the live units of a small block (0 for a large one, whose bytes the
/// caller counts).
#[inline(always)]
fn record_alloc<D: Door>(
    st: &ThreadState,
    ctl: Control,
    ptr: *mut u8,
    size: usize,
    class: u8,
    usable: usize,
    units: i16,
) -> *mut u8 {
    let overflowed = live::small_alloc(st, units);
    site_and_latest::<D, ALLOC>(st, ctl, ptr, size, usable, class as usize);
    if heap::due(st, usable) {
        heap::sample_block::<D>(st, ctl, ptr, usable, class as usize);
        no_tail_call();
    }
    if overflowed {
        // Last, so that nothing is kept across the call.
        return publish_then_return::<D>(st, ptr);
    }
    ptr
}

#[cold]
#[inline(never)]
fn publish_then_return<D: Door>(st: &ThreadState, ptr: *mut u8) -> *mut u8 {
    live::publish_overflow::<D>(st, Overflow::Up);
    ptr
}
