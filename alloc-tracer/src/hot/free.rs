//! Frees: what each mode records for `dealloc`.

use super::caller::{Call, state};
use super::control::{self, Control, MODE_SAMPLE};
use super::countdown;
use super::door::Door;
use super::entry::{no_tail_call, small_request};
use super::followed;
use super::live::{self, LIVE_UNIT, Overflow};
use super::site_table::bump;
use super::size_class::{self, LAST_SMALL};
use super::thread::{self, PhaseCounters, ThreadState};
use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::Ordering::Relaxed;

/// For `dealloc_recorded`'s `STACKS`: every allocation's stack is recorded
/// (`sites`), so every free checks for a temporary.
pub const EVERY_STACK: bool = true;
/// For `dealloc_recorded`'s `STACKS`: not (`count`; `sample`, whose temporaries are
/// sampled blocks, checked on the cold path their frees take as followed blocks).
pub const NO_STACKS: bool = false;
/// For `dealloc_recorded`'s `FOLLOWS`: blocks may be followed to their free
/// (`control::Control::follows`), so the free looks its block up in `followed`.
pub const FOLLOWED: bool = true;
/// For `dealloc_recorded`'s `FOLLOWS`: none are (`count` without heap sampling).
pub const UNFOLLOWED: bool = false;

/// What a recorded free must do besides handing the block to `A`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Pending {
    /// Publish the thread's net live bytes (its counter overflowed downwards).
    Publish,
    /// Stop following the block (the followed-block table says it may be followed).
    EndFollowing,
    /// Publish, then stop following the block if the table says it may be followed:
    /// the table is read here, off the common path, so that the common path does not
    /// compute its answer before the branch on the overflow (nor keep the overflow
    /// in a register across it).
    PublishThenMaybeEnd,
}

/// Free with recording, `STACKS` when the mode records every stack (and so checks
/// every free for a temporary), `FOLLOWS` when blocks may be followed. Out of line;
/// ends in a tail call to `A`, as do its rare branches but one (no thread state: a
/// call to `dealloc_unusual`), so that its common path saves no registers.
///
/// # Safety
/// The caller upholds `GlobalAlloc::dealloc`'s contract for the layout of `size` and
/// `align`.
#[inline(never)]
pub unsafe fn dealloc_recorded<A: GlobalAlloc, D: Door, const STACKS: bool, const FOLLOWS: bool>(
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
        unsafe { dealloc_unusual::<A, D>(ptr, size, align, ctl, inner) };
        no_tail_call();
        return;
    };
    if small_request(size, align) {
        let r = st.small_requests[size];
        let overflowed = record_free(ctl, STACKS, st, ptr, r.class, r.units as i16);
        // Its own copy of the rest, where the compiler knows the request is small.
        // SAFETY: forwarded contract.
        return unsafe { finish_free::<A, D, FOLLOWS>(inner, st, ptr, layout, overflowed) };
    }
    if align > 16 {
        // SAFETY: forwarded contract.
        return unsafe { dealloc_any::<A, D>(ptr, size, align, ctl, inner, st) };
    }
    let class = size_class::index_of(size, align);
    if class > LAST_SMALL {
        // SAFETY: forwarded contract.
        return unsafe { dealloc_any::<A, D>(ptr, size, align, ctl, inner, st) };
    }
    let units = (size_class::usable(class, size) / LIVE_UNIT) as i16;
    let overflowed = record_free(ctl, STACKS, st, ptr, class as u8, units);
    // SAFETY: forwarded contract.
    unsafe { finish_free::<A, D, FOLLOWS>(inner, st, ptr, layout, overflowed) }
}

/// The end of a recorded free: live bytes to publish (`overflowed`), or a block that
/// may be followed (for lifetimes or heap sampling: `followed::maybe`) to end, both
/// cold, by tail calls; else the tail call to `A`.
///
/// # Safety
/// As for `dealloc_recorded`.
#[inline(always)]
unsafe fn finish_free<A: GlobalAlloc, D: Door, const FOLLOWS: bool>(
    inner: &A,
    st: &ThreadState,
    ptr: *mut u8,
    layout: Layout,
    overflowed: bool,
) {
    if overflowed {
        let pending = if FOLLOWS {
            Pending::PublishThenMaybeEnd
        } else {
            Pending::Publish
        };
        // SAFETY: forwarded contract.
        return unsafe {
            dealloc_pending::<A, D>(ptr, layout.size(), layout.align(), inner, st, pending)
        };
    }
    if FOLLOWS && followed::maybe(ptr) {
        // SAFETY: forwarded contract.
        return unsafe {
            dealloc_pending::<A, D>(
                ptr,
                layout.size(),
                layout.align(),
                inner,
                st,
                Pending::EndFollowing,
            )
        };
    }
    // SAFETY: forwarded contract.
    unsafe { inner.dealloc(ptr, layout) }
}

/// Records a free of a block of class `class` and, if small, `units` live units (0
/// for a large block, whose bytes the caller counts); true when the live-bytes
/// counter overflowed downwards. `every_stack`: `ctl.every_stack()`, or a constant
/// where the caller knows it.
#[inline(always)]
fn record_free(
    ctl: Control,
    every_stack: bool,
    st: &ThreadState,
    ptr: *mut u8,
    class: u8,
    units: i16,
) -> bool {
    let p = st.phase(ctl);
    bump(&p.freed[class as usize], 1);
    // `count` mode does not keep the latest block: it hands the allocation to `A`
    // by a tail call (`alloc::alloc_without_stack`). `sample` keeps the latest
    // sampled one, and checks it in `sampled_temporary`.
    if every_stack && st.last_block.load(Relaxed) == ptr as usize {
        count_temporary(st, p, 1);
    }
    live::small_free(st, units)
}

/// Counts a free of the thread's latest block, a temporary, in the phase and in
/// the block's site as `weight` temporaries (weighted as recorded, like the
/// site's other counts), and forgets the block.
#[inline(always)]
fn count_temporary(st: &ThreadState, p: &PhaseCounters, weight: u64) {
    bump(&p.temporaries, weight);
    let slot = st.last_slot.get();
    if !slot.is_null() {
        // SAFETY: `last_slot` points into this thread's current table; it is
        // reset whenever the table is grown or flushed.
        bump(unsafe { &(*slot).temporaries }, weight);
    }
    st.last_block.store(0, Relaxed);
}

/// In `sample` mode, a free of a followed block (every sampled one is): a
/// temporary if it is the latest sampled block and the thread allocated nothing
/// since (`ThreadState::sampled_left`). On the free's cold path, before the block
/// stops being followed. A sampled block that could not be followed (the
/// lifetimes' cap; `followed_skipped` in the manifest) is not seen here.
#[inline(always)]
fn sampled_temporary(st: &ThreadState, ptr: *mut u8) {
    let ctl = control::load();
    if ctl.mode() != MODE_SAMPLE || st.last_block.load(Relaxed) != ptr as usize {
        return;
    }
    if st.sampled_left.get() == countdown::sample_left(st) {
        count_temporary(st, st.phase(ctl), st.sampled_weight.get());
    } else {
        st.last_block.store(0, Relaxed);
    }
}

/// Records a free of any size and alignment, and all that may follow it. Cold.
#[cold]
#[inline(never)]
fn record_any_free<D: Door>(ctl: Control, st: &ThreadState, ptr: *mut u8, layout: Layout) {
    let size = layout.size();
    let class = size_class::index_of(size, layout.align());
    let usable = size_class::usable(class, size);
    let mut units = 0;
    if class > LAST_SMALL {
        bump(&st.phase(ctl).large_bytes_freed, usable as u64);
        live::add_bytes::<D>(st, -(usable as i64));
    } else {
        units = (usable / LIVE_UNIT) as i16;
    }
    if record_free(ctl, ctl.every_stack(), st, ptr, class as u8, units) {
        live::publish_overflow::<D>(st, Overflow::Down);
    }
    if ctl.follows() && followed::maybe(ptr) {
        sampled_temporary(st, ptr);
        end_following::<D>(ptr);
    }
}

/// A free that `dealloc_recorded` does not record itself: the tracer's own, the first
/// call on a thread, or one after thread exit.
///
/// # Safety
/// As for `dealloc_recorded`.
#[cold]
#[inline(never)]
unsafe fn dealloc_unusual<A: GlobalAlloc, D: Door>(
    ptr: *mut u8,
    size: usize,
    align: usize,
    ctl: Control,
    inner: &A,
) {
    // SAFETY: `size` and `align` are those of the caller's `Layout`.
    let layout = unsafe { Layout::from_size_align_unchecked(size, align) };
    match state::<D>(thread::current(), layout, Call::Free) {
        Some(st) => record_any_free::<D>(ctl, st, ptr, layout),
        // Not recorded: the tracer's own free (`end_following` returns at once), or a
        // free after this thread's state was merged at its exit (its thread-local
        // destructors' frees). A followed block freed there still stops being
        // followed, before its address can be handed out again.
        None => {
            if ctl.follows() && followed::maybe(ptr) {
                end_following::<D>(ptr);
            }
        }
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
unsafe fn dealloc_any<A: GlobalAlloc, D: Door>(
    ptr: *mut u8,
    size: usize,
    align: usize,
    ctl: Control,
    inner: &A,
    st: &ThreadState,
) {
    // SAFETY: `size` and `align` are those of the caller's `Layout`.
    let layout = unsafe { Layout::from_size_align_unchecked(size, align) };
    record_any_free::<D>(ctl, st, ptr, layout);
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
unsafe fn dealloc_pending<A: GlobalAlloc, D: Door>(
    ptr: *mut u8,
    size: usize,
    align: usize,
    inner: &A,
    st: &ThreadState,
    pending: Pending,
) {
    // SAFETY: `size` and `align` are those of the caller's `Layout`.
    let layout = unsafe { Layout::from_size_align_unchecked(size, align) };
    let end = match pending {
        Pending::Publish => false,
        Pending::EndFollowing => true,
        Pending::PublishThenMaybeEnd => followed::maybe(ptr),
    };
    if pending != Pending::EndFollowing {
        live::publish_overflow::<D>(st, Overflow::Down);
    }
    if end {
        sampled_temporary(st, ptr);
        end_following::<D>(ptr);
    }
    // SAFETY: forwarded contract.
    unsafe { inner.dealloc(ptr, layout) }
}

/// Stops following `ptr` if it is followed (a free, or a realloc about to move it).
/// Not for the tracer's own calls (the guard is set): its blocks are never followed,
/// and it may hold the very lock the cold side would take (a map growing under its
/// lock reallocs its buffer, whose entry of `followed` another block may share).
#[cold]
pub fn end_following<D: Door>(ptr: *mut u8) {
    if thread::with_local(|l| l.guard()) {
        return;
    }
    thread::guarded(|| D::block_ended(ptr));
}
