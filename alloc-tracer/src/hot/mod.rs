//! The hot path: the `GlobalAlloc` implementation and everything it runs per call.
//!
//! # Rules
//!
//! Code in this module tree runs inside every allocation of the traced program, on
//! every thread, hundreds of millions of times a synthesis. It must:
//!
//! 1. **Never allocate** through the global allocator outside the re-entrancy guard.
//!    Growing a site table, creating a thread's state and following a sampled block
//!    happen in `#[cold]` functions that set the guard first; the tracer's own
//!    allocations then pass straight through and are counted apart (`own_*`).
//! 2. **Never block** and never take a lock on the recording path. The cold paths
//!    above may take the registry or a shard lock (once per thread, per table growth,
//!    per sampled block), never one a recording thread could be waiting on while
//!    holding it.
//! 3. **Never do I/O, symbolize or panic.** No `unwrap`, no indexing that can fail
//!    (indices are clamped by construction), no formatting.
//! 4. **No shared atomic read-modify-write per call.** Counters are per thread,
//!    updated with a relaxed load and store (no `lock` prefix) so that the report can
//!    read live threads; the only shared RMW happens when a thread's net live bytes
//!    have drifted by [`LIVE_PUBLISH_BYTES`], when a sampled block is followed, and
//!    in cold paths.
//! 5. **Never change the layout** passed to the inner allocator: no headers, so the
//!    size class recorded is the one jemalloc really uses. `realloc`,
//!    `alloc_zeroed`, over-aligned layouts and null returns pass through with
//!    exactly the inner allocator's semantics; a null return is not recorded, but
//!    for a small request in `count` mode or not sampled in `sample` mode, which is
//!    recorded before a tail call to the inner allocator and so never sees its
//!    result (see the crate's "What is exact").
//!
//! `tests/hot_path.rs` checks rules 1, 2 and 5 with a counting inner allocator and a
//! held registry lock.

pub mod control;
pub mod log_linear;
pub mod site_table;
pub mod size_class;
pub mod stack;
pub mod thread;

use control::{Control, MODE_SITES};
use site_table::{Lookup, SiteKey, Slot, bump, pack_meta};
use size_class::{LAST_SMALL, SMALL_REQUEST_MAX, SMALL_REQUESTS};
use stack::{Frames, MAX_DEPTH, Walk};
use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicI64, Ordering::Relaxed};
use thread::{DEAD, Local, ThreadState, with_local};

/// A `GlobalAlloc` that records every call before handing it to `A`.
///
/// ```no_run
/// #[global_allocator]
/// static GLOBAL: alloc_tracer::TracingAllocator<tikv_jemallocator::Jemalloc> =
///     alloc_tracer::TracingAllocator::new(tikv_jemallocator::Jemalloc);
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

/// Bound on a thread's unpublished net live bytes: the global live and peak bytes are
/// exact to within threads x this (256 KiB).
///
/// A thread keeps its net bytes since it last published in a 16-bit counter of
/// [`LIVE_UNIT`]s (`ThreadState::live_units`): a small block's allocation or free adds
/// or subtracts its units in one instruction, and publishes only when the counter
/// overflows, that is when the net reaches this bound either way. Larger blocks and
/// reallocs fold their bytes into the counter the same way (`live_bytes`), publishing
/// at once what does not fit.
pub const LIVE_PUBLISH_BYTES: i64 = (i16::MAX as i64 + 1) * LIVE_UNIT as i64;

/// Bytes per unit of the live-bytes counter: every size class is a multiple of it.
pub const LIVE_UNIT: usize = 8;

/// Global live bytes, as published by threads.
pub(crate) static LIVE_BYTES: AtomicI64 = AtomicI64::new(0);
/// Highest value `LIVE_BYTES` reached.
pub(crate) static PEAK_BYTES: AtomicI64 = AtomicI64::new(0);

// SAFETY: every method forwards to `A` with the caller's arguments unchanged and
// returns `A`'s result unchanged; recording only reads the arguments and the result.
// So the GlobalAlloc contract holds exactly as far as it holds for `A`.
unsafe impl<A: GlobalAlloc> GlobalAlloc for TracingAllocator<A> {
    // The entry points are one load and one bit test in front of `A`; when there is
    // nothing to record they end in a tail call to `A`, and otherwise in one to the
    // recording function, chosen by one or two more bit tests (`count`, `sample`,
    // the rest; with stacks or without), which then calls `A` itself. Each mode gets
    // its own copy of the recording path, with no mode tests inside. So `off` saves no
    // registers and adds no frame. The recording functions take the layout's size and
    // alignment where the compiler's `__rust_alloc` and `__rust_dealloc` (which is
    // what these entry points become, out of line, for code compiled outside the
    // crate that declares the global allocator) receive them, control word next,
    // inner allocator last: the entry's jump then moves no argument.

    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller upholds `alloc`'s contract for `layout`.
        unsafe { entry_alloc::<A, false>(&self.inner, layout) }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller upholds `alloc_zeroed`'s contract for `layout`.
        unsafe { entry_alloc::<A, true>(&self.inner, layout) }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let ctl = control::load();
        if ctl.recording() {
            if ctl.stacks() {
                // SAFETY: the caller upholds `dealloc`'s contract.
                return unsafe {
                    dealloc_recorded::<A, true>(
                        ptr,
                        layout.size(),
                        layout.align(),
                        ctl,
                        &self.inner,
                    )
                };
            }
            // SAFETY: as above.
            return unsafe {
                dealloc_recorded::<A, false>(ptr, layout.size(), layout.align(), ctl, &self.inner)
            };
        }
        // SAFETY: as above.
        unsafe { self.inner.dealloc(ptr, layout) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let ctl = control::load();
        if ctl.recording() && ctl.stacks() && lifetimes_maybe(ptr) {
            end_followed(ptr);
        }
        // SAFETY: the caller upholds `realloc`'s contract.
        let new = unsafe { self.inner.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            on_realloc(ptr, layout, new, new_size);
        }
        new
    }
}

/// The entry point of `alloc` and (`ZEROED`) `alloc_zeroed`: the control word's
/// test, then the recording function of the mode, or `A`.
///
/// # Safety
/// The caller upholds `GlobalAlloc::alloc`'s contract for `layout`.
#[inline(always)]
unsafe fn entry_alloc<A: GlobalAlloc, const ZEROED: bool>(inner: &A, layout: Layout) -> *mut u8 {
    let ctl = control::load();
    let (size, align) = (layout.size(), layout.align());
    if ctl.alloc_needs_work() {
        if ctl.count_only() {
            // SAFETY: forwarded contract.
            return unsafe { alloc_counting::<A, ZEROED, false>(size, align, ctl, inner) };
        }
        if ctl.counts_without_walk() {
            // SAFETY: forwarded contract.
            return unsafe { alloc_counting::<A, ZEROED, true>(size, align, ctl, inner) };
        }
        // SAFETY: forwarded contract.
        return unsafe { alloc_walked::<A, ZEROED>(size, align, ctl, inner) };
    }
    // SAFETY: forwarded contract.
    unsafe { inner_alloc::<A, ZEROED>(inner, layout) }
}

#[inline(always)]
fn lifetimes_maybe(ptr: *mut u8) -> bool {
    crate::lifetimes::maybe_followed(ptr)
}

/// Keeps the call before it from becoming a tail call. The stack walk passes over
/// exactly one frame of the tracer's, the recording function's: a stack part reached
/// by a jump instead of a call would make it pass over one of the program's.
#[inline(always)]
fn no_tail_call() {
    // SAFETY: an empty instruction sequence: no memory access, no effect.
    unsafe { std::arch::asm!("", options(nomem, nostack, preserves_flags)) }
}

/// The state of the current thread, creating it if needed; `None` when the call must
/// not be recorded as the program's (guard set: the tracer's own; or thread exited).
#[inline(always)]
fn state(local: &Local, layout: Layout, own_alloc: bool) -> Option<&ThreadState> {
    match local.recording_state() {
        Some(st) => Some(st),
        None => unusual_state(local, layout.size(), layout.align(), own_alloc),
    }
}

/// `state` for a first call on a thread, a call from the tracer itself, or a call
/// after thread exit.
#[cold]
#[inline(never)]
fn unusual_state(
    local: &Local,
    size: usize,
    align: usize,
    own_alloc: bool,
) -> Option<&ThreadState> {
    let mut st = local.state();
    if local.guard() {
        if own_alloc {
            record_own(st, size, align);
        }
        return None;
    }
    if st.is_null() {
        st = thread::init(local);
    } else if st == DEAD {
        late(own_alloc);
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
        if let Some(c) = crate::registry::EARLY_OWN.get(class) {
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
fn late(alloc: bool) {
    let counter = if alloc {
        &crate::registry::LATE_ALLOCS
    } else {
        &crate::registry::LATE_FREES
    };
    counter.fetch_add(1, Relaxed);
}

/// Marks the branch that calls it as unlikely, like `std::hint::cold_path` (stable
/// only since Rust 1.95, above this workspace's `rust-version`).
#[cold]
#[inline(always)]
fn unlikely_path() {}

/// True for the requests classified by one lookup in [`SMALL_REQUESTS`]: at least 8
/// and at most [`SMALL_REQUEST_MAX`] bytes, aligned to at most 8. (Then also
/// `align <= size`, which lets the compiler drop tikv-jemallocator's test for
/// `mallocx` flags from the inlined inner call.)
#[inline(always)]
fn small_request(size: usize, align: usize) -> bool {
    // Two branches, marked unlikely to fail, rather than two flags and an `or`.
    if size.wrapping_sub(8) > SMALL_REQUEST_MAX - 8 || align > 8 {
        unlikely_path();
        return false;
    }
    true
}

/// `A`'s allocation, zeroed or not.
///
/// # Safety
/// The caller upholds `GlobalAlloc::alloc`'s contract for `layout`.
#[inline(always)]
unsafe fn inner_alloc<A: GlobalAlloc, const ZEROED: bool>(inner: &A, layout: Layout) -> *mut u8 {
    // SAFETY: forwarded contract.
    unsafe {
        if ZEROED {
            inner.alloc_zeroed(layout)
        } else {
            inner.alloc(layout)
        }
    }
}

/// Allocation in mode `count` or (`SAMPLE`) `sample`, mode read, recording. Out of
/// line, so that the entry point stays a load, two tests and a jump. A small request
/// (`small_request`, nearly all of them) is recorded, then handed to `A` by a tail
/// call: nothing is done after `A` returns, so this function saves no register and
/// sets up no frame, and a request `A` refuses stays counted. In `sample` mode the
/// one allocation in N whose stack is sampled goes on to `alloc_sampled`, which
/// calls `A` and records the site; anything not small, the thread's first call and
/// the tracer's own go to `alloc_walked`; both by tail calls.
///
/// # Safety
/// The caller upholds `GlobalAlloc::alloc`'s contract for `layout`.
#[inline(never)]
unsafe fn alloc_counting<A: GlobalAlloc, const ZEROED: bool, const SAMPLE: bool>(
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
        _ => return unsafe { alloc_walked::<A, ZEROED>(size, align, ctl, inner) },
    };
    let r = st.small_requests[size];
    bump(&st.phase(ctl).small_allocs[size], 1);
    if !SAMPLE || !sample_due(st) {
        // `count`, or `sample` for all but one allocation in N: nothing to record
        // once `A` has returned, so `A` is reached by a tail call. The branch that
        // publishes live bytes makes a call instead, not a tail call: with a branch
        // that needs a frame, the compiler sets one up in that branch only, and the
        // common path goes without (see `dealloc_recorded`).
        if SAMPLE {
            // The latest block is now one without a site: freeing the one before
            // is not a temporary's. (`count` keeps no latest block.)
            st.last_block.store(0, Relaxed);
        }
        if live_small_alloc(st, r.units as i16) {
            // SAFETY: forwarded contract.
            let ptr = unsafe { alloc_count_wrapped::<A, ZEROED>(size, align, inner) };
            no_tail_call();
            return ptr;
        }
        // SAFETY: forwarded contract.
        return unsafe { inner_alloc::<A, ZEROED>(inner, layout) };
    }
    // `sample`, the allocation whose stack is sampled.
    st.pending_size.set(size);
    st.pending_ctl.set(ctl);
    let wrapped = live_small_alloc(st, r.units as i16);
    // SAFETY: forwarded contract.
    unsafe { alloc_sampled::<A, ZEROED>(size, align, ctl, inner, wrapped) }
}

/// `alloc_counting` in `count` mode when the live-bytes counter overflowed: publishes,
/// then allocates.
///
/// # Safety
/// As for `alloc_counting`.
#[cold]
#[inline(never)]
unsafe fn alloc_count_wrapped<A: GlobalAlloc, const ZEROED: bool>(
    size: usize,
    align: usize,
    inner: &A,
) -> *mut u8 {
    if let Some(st) = thread::current().recording_state() {
        live_wrapped(st, true);
    }
    // SAFETY: forwarded contract; `size` and `align` are those of the caller's
    // `Layout`.
    unsafe { inner_alloc::<A, ZEROED>(inner, Layout::from_size_align_unchecked(size, align)) }
}

/// `sample` mode, for an allocation not walked otherwise: counts down to the next
/// sampled stack; true when this allocation is the one. (A block not sampled has no
/// site.)
#[inline(always)]
fn sample_due(st: &ThreadState) -> bool {
    let left = st.sample_countdown.get().wrapping_sub(1);
    st.sample_countdown.set(left);
    left == 0
}

/// `alloc_counting` in `sample` mode for the allocation whose stack is sampled, its
/// counters already recorded (and live bytes to publish when `wrapped`: the counter
/// overflowed). Calls `A`, then records the site, the latest block and, on a null
/// return, takes the counters back. Reached by a tail call, so `sample` finds the
/// same one frame of the tracer's below it as from `alloc_walked`.
///
/// # Safety
/// As for `alloc_counting`.
#[cold]
#[inline(never)]
unsafe fn alloc_sampled<A: GlobalAlloc, const ZEROED: bool>(
    size: usize,
    align: usize,
    ctl: Control,
    inner: &A,
    wrapped: bool,
) -> *mut u8 {
    // SAFETY: `size` and `align` are those of the caller's `Layout`.
    let layout = unsafe { Layout::from_size_align_unchecked(size, align) };
    let Some(st) = thread::current().recording_state() else {
        // Not reached: `alloc_counting` found this thread recording.
        // SAFETY: forwarded contract.
        return unsafe { inner_alloc::<A, ZEROED>(inner, layout) };
    };
    if wrapped {
        // Before `A`: `unrecord_small` needs a counter that has not wrapped.
        live_wrapped(st, true);
    }
    // SAFETY: forwarded contract.
    let ptr = unsafe { inner_alloc::<A, ZEROED>(inner, layout) };
    if ptr.is_null() {
        // The sample passes to the next allocation (the countdown, now 0, would
        // otherwise wrap).
        st.sample_countdown.set(1);
        return unrecord_small();
    }
    st.last_block.store(ptr as usize, Relaxed);
    let r = SMALL_REQUESTS[size];
    sample::<false>(st, ctl, ptr, size, r.usable(), r.class as usize);
    no_tail_call();
    ptr
}

/// Takes back what `alloc_counting` recorded (`pending_size`, `pending_ctl`) for a
/// small request that `A` refused; returns null.
#[cold]
#[inline(never)]
fn unrecord_small() -> *mut u8 {
    if let Some(st) = thread::current().recording_state() {
        let size = st.pending_size.get().min(SMALL_REQUEST_MAX);
        bump(&st.phase(st.pending_ctl.get()).small_allocs[size], u64::MAX);
        live_bytes(st, -(SMALL_REQUESTS[size].usable() as i64));
    }
    std::ptr::null_mut()
}

/// Allocation with a stack walk (`sites`), or a request `alloc_counting` does not
/// take: not small, the thread's first or the tracer's own, or the first of the
/// process (mode not read yet). The small ones are classified by one table lookup;
/// anything else goes on to `alloc_general`.
///
/// # Safety
/// As for `alloc_counting`.
#[inline(never)]
unsafe fn alloc_walked<A: GlobalAlloc, const ZEROED: bool>(
    size: usize,
    align: usize,
    ctl: Control,
    inner: &A,
) -> *mut u8 {
    // SAFETY: `size` and `align` are those of the caller's `Layout`.
    let layout = unsafe { Layout::from_size_align_unchecked(size, align) };
    if !ctl.recording() || !small_request(size, align) {
        // SAFETY: forwarded contract.
        return unsafe { alloc_general::<A, ZEROED>(inner, ctl, layout) };
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
        None => match unusual_state(thread::current(), size, 1, true) {
            Some(st) => st,
            None => return ptr,
        },
    };
    let r = SMALL_REQUESTS[size];
    bump(&st.phase(ctl).small_allocs[size], 1);
    record_alloc(st, ctl, ptr, size, r.class, r.usable(), r.units as i16)
}

/// `alloc_walked` for the other requests: larger, or more aligned, or the first
/// of the process (mode not read yet).
///
/// # Safety
/// As for `alloc_counting`.
#[inline(never)]
unsafe fn alloc_general<A: GlobalAlloc, const ZEROED: bool>(
    inner: &A,
    ctl: Control,
    layout: Layout,
) -> *mut u8 {
    if !ctl.recording() {
        // SAFETY: forwarded contract.
        return unsafe { alloc_mode_unread::<A, ZEROED>(inner, layout) };
    }
    // SAFETY: forwarded contract.
    let ptr = unsafe { inner_alloc::<A, ZEROED>(inner, layout) };
    if !ptr.is_null() {
        record_alloc_general(ctl, ptr, layout);
    }
    ptr
}

/// The first allocation of the process (mode not read yet): reads the settings, then
/// allocates and records as they say.
///
/// # Safety
/// As for `alloc_counting`.
#[cold]
#[inline(never)]
unsafe fn alloc_mode_unread<A: GlobalAlloc, const ZEROED: bool>(
    inner: &A,
    layout: Layout,
) -> *mut u8 {
    // Allocations made while reading the settings arrive here again; the guard makes
    // them pass through.
    if !with_local(|l| l.guard()) {
        thread::guarded(crate::config::init_from_env);
    }
    // SAFETY: forwarded contract.
    let ptr = unsafe { inner_alloc::<A, ZEROED>(inner, layout) };
    let ctl = control::load();
    if !ptr.is_null() && ctl.recording() {
        record_alloc_outlined(ctl, ptr, layout);
    }
    ptr
}

#[inline(never)]
fn record_alloc_outlined(ctl: Control, ptr: *mut u8, layout: Layout) {
    record_alloc_general(ctl, ptr, layout);
}

/// Records an allocation of any size and alignment.
#[inline(always)]
fn record_alloc_general(ctl: Control, ptr: *mut u8, layout: Layout) {
    let Some(st) = state(thread::current(), layout, true) else {
        return;
    };
    let size = layout.size();
    bump(&st.requested[log_linear::size_bucket(size)], 1);
    let class = size_class::index_of(size, layout.align());
    let usable = size_class::usable(class, size);
    let p = st.phase(ctl);
    bump(&p.allocs[class as u8 as usize], 1);
    bump(&p.bytes_requested, size as u64);
    let mut units = 0;
    if class > LAST_SMALL {
        bump(&p.large_bytes_allocated, usable as u64);
        live_bytes(st, usable as i64);
    } else {
        units = (usable / LIVE_UNIT) as i16;
    }
    record_alloc(st, ctl, ptr, size, class as u8, usable, units);
}

/// Records an allocation, its counts and large bytes aside (the caller's), and
/// returns `ptr`: inlined into `alloc_walked` or `alloc_general`, whose frame is
/// the one the stack walk passes over. `units`: the live units of a small block (0
/// for a large one, whose bytes the caller counts).
#[inline(always)]
fn record_alloc(
    st: &ThreadState,
    ctl: Control,
    ptr: *mut u8,
    size: usize,
    class: u8,
    usable: usize,
    units: i16,
) -> *mut u8 {
    let check = live_small_alloc(st, units);
    site_and_latest::<false>(st, ctl, ptr, size, usable, class as usize);
    if check {
        // Last, so that nothing is kept across the call.
        return live_wrapped_then(st, ptr);
    }
    ptr
}

#[cold]
#[inline(never)]
fn live_wrapped_then(st: &ThreadState, ptr: *mut u8) -> *mut u8 {
    live_wrapped(st, true);
    ptr
}

/// Adds a small block's live units to this thread's net; true when the 16-bit
/// counter overflowed (then `live_wrapped(st, true)` must run).
#[inline(always)]
fn live_small_alloc(st: &ThreadState, units: i16) -> bool {
    let (net, wrapped) = st.live_units.get().overflowing_add(units);
    st.live_units.set(net);
    wrapped
}

/// Takes a small block's live units from this thread's net; true when the 16-bit
/// counter overflowed (then `live_wrapped(st, false)` must run).
#[inline(always)]
fn live_small_free(st: &ThreadState, units: i16) -> bool {
    let (net, wrapped) = st.live_units.get().overflowing_sub(units);
    st.live_units.set(net);
    wrapped
}

/// Publishes this thread's net live bytes after its counter overflowed, upwards
/// (`added`) or downwards: the net is then 2^16 units from what the counter holds.
#[cold]
#[inline(never)]
fn live_wrapped(st: &ThreadState, added: bool) {
    let held = st.live_units.replace(0) as i64;
    let units = if added {
        held + (1 << 16)
    } else {
        held - (1 << 16)
    };
    publish_live(units * LIVE_UNIT as i64);
}

/// Adds `bytes` (a large block's, or a realloc's change; a multiple of
/// [`LIVE_UNIT`]) to this thread's net live bytes, publishing the net if it reaches
/// [`LIVE_PUBLISH_BYTES`].
#[inline(never)]
fn live_bytes(st: &ThreadState, bytes: i64) {
    let net = st.live_units.get() as i64 * LIVE_UNIT as i64 + bytes;
    if net.unsigned_abs() < LIVE_PUBLISH_BYTES as u64 {
        // Fits: under 2^15 units.
        st.live_units.set((net / LIVE_UNIT as i64) as i16);
    } else {
        st.live_units.set(0);
        publish_live(net);
    }
}

/// Adds a thread's net live bytes to the global count and raises the peak.
pub(crate) fn publish_live(net: i64) {
    let live = LIVE_BYTES.fetch_add(net, Relaxed) + net;
    PEAK_BYTES.fetch_max(live, Relaxed);
}

#[inline(always)]
fn on_realloc(old: *mut u8, layout: Layout, new: *mut u8, new_size: usize) {
    let ctl = control::load();
    if ctl.recording() {
        record_realloc(ctl, old, layout, new, new_size);
    }
}

#[inline(never)]
fn record_realloc(ctl: Control, old: *mut u8, layout: Layout, new: *mut u8, new_size: usize) {
    let local = thread::current();
    let moved = old != new;
    let new_layout = Layout::from_size_align(new_size, layout.align()).unwrap_or(layout);
    let Some(st) = state(local, new_layout, moved) else {
        return;
    };
    let class = size_class::index_of(new_size, layout.align());
    let old_class = size_class::index_of(layout.size(), layout.align());
    let p = st.phase(ctl);
    bump(&p.reallocs, 1);
    bump(&p.bytes_requested, new_size as u64);
    let usable = size_class::usable(class, new_size);
    let old_usable = size_class::usable(old_class, layout.size());
    bump(&p.realloc_bytes_allocated, usable as u64);
    bump(&p.realloc_bytes_freed, old_usable as u64);
    if moved {
        // A moving realloc is a request jemalloc serves from the new class.
        if let Some(c) = st.moved.get(class) {
            bump(c, 1);
        }
    }
    bump(&st.requested[log_linear::size_bucket(new_size)], 1);
    live_bytes(st, usable as i64 - old_usable as i64);
    site_and_latest::<true>(st, ctl, new, new_size, usable, class);
}

/// The site of an allocation or realloc recorded out of `alloc_counting`, and the
/// thread's latest block, by mode: `count` keeps neither; `sites` records both;
/// `sample` records both for the one allocation in N whose stack is sampled, and
/// for any other forgets the latest block (temporaries are counted for sampled
/// blocks only).
#[inline(always)]
fn site_and_latest<const REALLOC: bool>(
    st: &ThreadState,
    ctl: Control,
    ptr: *mut u8,
    size: usize,
    usable: usize,
    class: usize,
) {
    if !ctl.stacks() {
        return;
    }
    if ctl.mode() == MODE_SITES {
        st.last_block.store(ptr as usize, Relaxed);
        record_site::<REALLOC>(st, ctl, ptr, size, usable, class);
        no_tail_call();
    } else if sample_due(st) {
        st.last_block.store(ptr as usize, Relaxed);
        sample::<REALLOC>(st, ctl, ptr, size, usable, class);
        no_tail_call();
    } else {
        st.last_block.store(0, Relaxed);
    }
}

/// Free with recording. Out of line; ends in a tail call to `A`, as do its rare
/// branches, so that its common path saves no registers.
///
/// # Safety
/// The caller upholds `GlobalAlloc::dealloc`'s contract.
#[inline(never)]
unsafe fn dealloc_recorded<A: GlobalAlloc, const STACKS: bool>(
    ptr: *mut u8,
    size: usize,
    align: usize,
    ctl: Control,
    inner: &A,
) {
    // SAFETY: `size` and `align` are those of the caller's `Layout`.
    let layout = unsafe { Layout::from_size_align_unchecked(size, align) };
    let Some(st) = thread::current().recording_state() else {
        // A call, not a tail call: the one branch with a frame. Frame pointers make
        // the compiler set up a frame in every function that has none, at its entry,
        // unless some branch needs one anyway; then it sets it up in that branch
        // only, and the common path of this function goes without.
        // SAFETY: forwarded contract.
        unsafe { dealloc_unusual(ptr, size, align, ctl, inner) };
        no_tail_call();
        return;
    };
    if small_request(size, align) {
        let r = st.small_requests[size];
        let check = record_free(ctl, STACKS, st, ptr, r.class, r.units as i16);
        // Its own copy of the rest, where the compiler knows the request is small.
        // SAFETY: forwarded contract.
        return unsafe { finish_free(inner, STACKS, st, ptr, layout, check) };
    }
    if align > 16 {
        // SAFETY: forwarded contract.
        return unsafe { dealloc_general(ptr, size, align, ctl, inner, st) };
    }
    let class = size_class::index_of(size, align);
    if class > LAST_SMALL {
        // SAFETY: forwarded contract.
        return unsafe { dealloc_general(ptr, size, align, ctl, inner, st) };
    }
    let units = (size_class::usable(class, size) / LIVE_UNIT) as i16;
    let check = record_free(ctl, STACKS, st, ptr, class as u8, units);
    // SAFETY: forwarded contract.
    unsafe { finish_free(inner, STACKS, st, ptr, layout, check) }
}

/// The end of a recorded free: live bytes to publish or the lifetime filter when due
/// (cold, tail calls), else the tail call to `A`. `stacks`: as for `record_free`.
///
/// # Safety
/// As for `dealloc_recorded`.
#[inline(always)]
unsafe fn finish_free<A: GlobalAlloc>(
    inner: &A,
    stacks: bool,
    st: &ThreadState,
    ptr: *mut u8,
    layout: Layout,
    check: bool,
) {
    if check {
        let followed = stacks && lifetimes_maybe(ptr);
        // SAFETY: forwarded contract.
        return unsafe {
            dealloc_then(
                ptr,
                layout.size(),
                layout.align(),
                inner,
                st,
                true,
                followed,
            )
        };
    }
    if stacks && lifetimes_maybe(ptr) {
        // SAFETY: forwarded contract.
        return unsafe { dealloc_then(ptr, layout.size(), layout.align(), inner, st, false, true) };
    }
    // SAFETY: forwarded contract.
    unsafe { inner.dealloc(ptr, layout) }
}

/// Records a free of a block of class `class` and, if small, `units` live units (0
/// for a large block, whose bytes the caller counts); true when the net live bytes
/// are to be published (`live_wrapped(st, false)`). `stacks`: `ctl.stacks()`, or a
/// constant where the caller knows it.
#[inline(always)]
fn record_free(
    ctl: Control,
    stacks: bool,
    st: &ThreadState,
    ptr: *mut u8,
    class: u8,
    units: i16,
) -> bool {
    let p = st.phase(ctl);
    bump(&p.freed[class as usize], 1);
    // `count` mode (no stacks) does not keep the latest block: it hands the
    // allocation to `A` by a tail call (`alloc_counting`). Nor does `sample` but for
    // sampled blocks, so a temporary there is a sampled one.
    if stacks && st.last_block.load(Relaxed) == ptr as usize {
        bump(&p.temporaries, 1);
        let slot = st.last_slot.get();
        if !slot.is_null() {
            // SAFETY: `last_slot` points into this thread's current table; it is
            // reset whenever the table is grown or flushed.
            bump(unsafe { &(*slot).temporaries }, 1);
        }
        st.last_block.store(0, Relaxed);
    }
    live_small_free(st, units)
}

/// Records a free of any size and alignment, and all that may follow it. Cold.
#[cold]
#[inline(never)]
fn record_free_general(ctl: Control, st: &ThreadState, ptr: *mut u8, layout: Layout) {
    let size = layout.size();
    let class = size_class::index_of(size, layout.align());
    let usable = size_class::usable(class, size);
    let mut units = 0;
    if class > LAST_SMALL {
        bump(&st.phase(ctl).large_bytes_freed, usable as u64);
        live_bytes(st, -(usable as i64));
    } else {
        units = (usable / LIVE_UNIT) as i16;
    }
    if record_free(ctl, ctl.stacks(), st, ptr, class as u8, units) {
        live_wrapped(st, false);
    }
    if ctl.stacks() && lifetimes_maybe(ptr) {
        end_followed(ptr);
    }
}

/// A free that `dealloc_recorded` does not record itself: the tracer's own, the first
/// call on a thread, or one after thread exit.
///
/// # Safety
/// As for `dealloc_recorded`.
#[cold]
#[inline(never)]
unsafe fn dealloc_unusual<A: GlobalAlloc>(
    ptr: *mut u8,
    size: usize,
    align: usize,
    ctl: Control,
    inner: &A,
) {
    // SAFETY: `size` and `align` are those of the caller's `Layout`.
    let layout = unsafe { Layout::from_size_align_unchecked(size, align) };
    if let Some(st) = state(thread::current(), layout, false) {
        record_free_general(ctl, st, ptr, layout);
    }
    // SAFETY: forwarded contract.
    unsafe { inner.dealloc(ptr, layout) }
}

/// A free with an alignment above 16 (classes found out of line) or of a large
/// block.
///
/// # Safety
/// As for `dealloc_recorded`.
#[cold]
#[inline(never)]
unsafe fn dealloc_general<A: GlobalAlloc>(
    ptr: *mut u8,
    size: usize,
    align: usize,
    ctl: Control,
    inner: &A,
    st: &ThreadState,
) {
    // SAFETY: `size` and `align` are those of the caller's `Layout`.
    let layout = unsafe { Layout::from_size_align_unchecked(size, align) };
    record_free_general(ctl, st, ptr, layout);
    // SAFETY: forwarded contract.
    unsafe { inner.dealloc(ptr, layout) }
}

/// The rest of a recorded free, when it has more to do than hand the block to `A`:
/// publish the net live bytes, or stop following the block before `A` can hand its
/// address out again.
///
/// # Safety
/// As for `dealloc_recorded`.
#[cold]
#[inline(never)]
unsafe fn dealloc_then<A: GlobalAlloc>(
    ptr: *mut u8,
    size: usize,
    align: usize,
    inner: &A,
    st: &ThreadState,
    check: bool,
    followed: bool,
) {
    // SAFETY: `size` and `align` are those of the caller's `Layout`.
    let layout = unsafe { Layout::from_size_align_unchecked(size, align) };
    if check {
        live_wrapped(st, false);
    }
    if followed {
        end_followed(ptr);
    }
    // SAFETY: forwarded contract.
    unsafe { inner.dealloc(ptr, layout) }
}

#[cold]
fn end_followed(ptr: *mut u8) {
    thread::guarded(|| crate::lifetimes::end(ptr));
}

/// Return addresses of the tracer's own frames at the start of a stack, at most.
pub const OWN_FRAMES: usize = 2;

/// Every call in `sites` mode: the stack, its site's counters, and now and then a
/// block followed to its free. Called, never jumped to, from the function whose
/// frame the walk passes over (see `no_tail_call`).
#[inline(never)]
fn record_site<const REALLOC: bool>(
    st: &ThreadState,
    ctl: Control,
    ptr: *mut u8,
    size: usize,
    usable: usize,
    class: usize,
) {
    let slot = site_slot(st, ctl, class);
    count_in_slot::<REALLOC>(slot, size, usable);
    st.last_slot.set(slot);
    let left = st.lifetime_countdown.get().wrapping_sub(1);
    st.lifetime_countdown.set(left);
    if left == 0 {
        let site = slot_site(ctl, class, st);
        follow_block(st, ptr, usable, site, control::lifetime_interval());
    }
}

#[inline(always)]
fn count_in_slot<const REALLOC: bool>(slot: &Slot, size: usize, usable: usize) {
    bump(
        if REALLOC {
            &slot.reallocs
        } else {
            &slot.allocs
        },
        1,
    );
    bump(&slot.bytes_requested, size as u64);
    bump(&slot.bytes_allocated, usable as u64);
}

/// Walks the stack and returns its slot in this thread's table.
#[inline(always)]
fn site_slot(st: &ThreadState, ctl: Control, class: usize) -> &Slot {
    let seed = pack_meta(ctl.phase(), class, 0);
    // The innermost return addresses are the tracer's own: the one into the
    // recording function (`alloc_walked`, `alloc_sampled`, `alloc_general` or `record_realloc`),
    // always, so it is walked over here; and the one into the allocator entry point,
    // unless that entry was inlined into the program's code or reached the recording
    // function by a jump, so it is kept and the report drops it if it is all tracer.
    let depth = ctl.depth() + OWN_FRAMES - 1;
    let walk = stack::walk(1, depth, st.stack_top, seed);
    let meta = seed | pack_meta(0, 0, walk.n);
    match st.table().find(walk.hash, meta) {
        Some(slot) => slot,
        None => new_site(st, &walk, meta),
    }
}

/// Inserts a site not in the table yet: reads its frames again, then grows or
/// flushes a full table. Cold, under the guard.
#[cold]
#[inline(never)]
fn new_site<'t>(st: &'t ThreadState, walk: &Walk, meta: u64) -> &'t Slot {
    let mut raw = stack::raw_frames();
    // SAFETY: `walk` was made by our caller, `site_slot` inlined into the recording
    // function, which is still running.
    let frames = unsafe { stack::frames_of(walk, &mut raw) };
    let key = SiteKey {
        meta,
        frames,
        hash: walk.hash,
    };
    if let Lookup::Slot(slot) = st.table().lookup(&key) {
        return slot;
    }
    let local = thread::current();
    let was = local.replace_guard(true);
    let mut grow = true;
    let slot = loop {
        if grow && st.grow_table() {
            grow = false;
        } else {
            // At the size cap: hand the contents to the global table. An empty table
            // of at least two slots always has room, so the next lookup succeeds.
            crate::registry::flush_table(st);
        }
        st.last_slot.set(std::ptr::null());
        if let Lookup::Slot(slot) = st.table().lookup(&key) {
            break slot;
        }
    };
    local.set_guard(was);
    slot
}

/// The stack of the current call as a site id (for a followed block). Cold.
#[cold]
fn slot_site(ctl: Control, class: usize, st: &ThreadState) -> crate::registry::SiteId {
    let slot = st.last_slot.get();
    let mut frames: Frames = [0; MAX_DEPTH];
    // SAFETY: `last_slot` was set just before from this thread's current table.
    let meta = unsafe { &*slot }
        .read_key(&mut frames)
        .unwrap_or(pack_meta(ctl.phase(), class, 0));
    let depth = site_table::unpack_meta(meta).2;
    crate::registry::SiteId {
        meta,
        frames: thread::guarded(|| frames[..depth].into()),
    }
}

#[cold]
#[inline(never)]
fn follow_block(
    st: &ThreadState,
    ptr: *mut u8,
    usable: usize,
    site: crate::registry::SiteId,
    interval: u64,
) {
    thread::guarded(|| crate::lifetimes::follow(ptr, site, usable as u64));
    st.lifetime_countdown.set(if interval == 0 {
        u64::MAX
    } else {
        st.geometric(interval)
    });
}

/// A sampled call in `sample` mode: stack, site counters, and the block followed.
/// Called like `record_site`, never jumped to.
#[cold]
#[inline(never)]
fn sample<const REALLOC: bool>(
    st: &ThreadState,
    ctl: Control,
    ptr: *mut u8,
    size: usize,
    usable: usize,
    class: usize,
) {
    let slot = site_slot(st, ctl, class);
    count_in_slot::<REALLOC>(slot, size, usable);
    bump(&st.phase(ctl).sampled, 1);
    st.last_slot.set(slot);
    let site = slot_site(ctl, class, st);
    follow_block(st, ptr, usable, site, 0);
    st.sample_countdown
        .set(st.geometric(control::sample_interval()));
}
