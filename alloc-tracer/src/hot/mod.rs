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
//!    drift by [`LIVE_PUBLISH_BYTES`], when a sampled block is followed, and in cold
//!    paths.
//! 5. **Never change the layout** passed to the inner allocator: no headers, so the
//!    size class recorded is the one jemalloc really uses. `realloc`,
//!    `alloc_zeroed`, over-aligned layouts and null returns pass through with
//!    exactly the inner allocator's semantics; a null return is not recorded.
//!
//! `tests/hot_path.rs` checks rules 1, 2 and 5 with a counting inner allocator and a
//! held registry lock.

pub mod control;
pub mod log_linear;
pub mod site_table;
pub mod size_class;
pub mod stack;
pub mod thread;

use control::{Control, MODE_SAMPLE, MODE_SITES, MODE_UNINIT};
use site_table::{Lookup, SiteKey, Slot, bump, pack_meta};
use stack::{Frames, MAX_DEPTH};
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

/// A thread publishes its net live bytes to the global estimate when they drift this
/// far; the global live and peak bytes are exact to within threads x this.
pub const LIVE_PUBLISH_BYTES: i64 = 1 << 20;

/// Global live bytes, as published by threads.
pub(crate) static LIVE_BYTES: AtomicI64 = AtomicI64::new(0);
/// Highest value `LIVE_BYTES` reached.
pub(crate) static PEAK_BYTES: AtomicI64 = AtomicI64::new(0);

// SAFETY: every method forwards to `A` with the caller's arguments unchanged and
// returns `A`'s result unchanged; recording only reads the arguments and the result.
// So the GlobalAlloc contract holds exactly as far as it holds for `A`.
unsafe impl<A: GlobalAlloc> GlobalAlloc for TracingAllocator<A> {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller upholds `alloc`'s contract for `layout`.
        let ptr = unsafe { self.inner.alloc(layout) };
        if !ptr.is_null() {
            on_alloc(ptr, layout);
        }
        ptr
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for `alloc`.
        let ptr = unsafe { self.inner.alloc_zeroed(layout) };
        if !ptr.is_null() {
            on_alloc(ptr, layout);
        }
        ptr
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // Recorded first: a followed block must stop being followed before its
        // address can be handed out again.
        on_dealloc(ptr, layout);
        // SAFETY: the caller upholds `dealloc`'s contract.
        unsafe { self.inner.dealloc(ptr, layout) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let ctl = control::load();
        if ctl.recording() && ctl.mode() >= MODE_SITES && lifetimes_maybe(ptr) {
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

#[inline(always)]
fn lifetimes_maybe(ptr: *mut u8) -> bool {
    crate::lifetimes::maybe_followed(ptr)
}

/// The state of the current thread, creating it if needed; `None` when the call must
/// not be recorded as the program's (guard set: the tracer's own; or thread exited).
#[inline(always)]
fn state(local: &Local, layout: Layout, own_alloc: bool) -> Option<&ThreadState> {
    let st = local.state.get();
    if local.guard.get() || st.is_null() || st == DEAD {
        return unusual_state(local, layout, own_alloc);
    }
    // SAFETY: a non-null, non-DEAD state pointer was set by `thread::init` on this
    // thread and stays valid until this thread's exit hook marks it DEAD.
    Some(unsafe { &*st })
}

/// `state` for a first call on a thread, a call from the tracer itself, or a call
/// after thread exit.
#[cold]
#[inline(never)]
fn unusual_state(local: &Local, layout: Layout, own_alloc: bool) -> Option<&ThreadState> {
    let mut st = local.state.get();
    if local.guard.get() {
        if own_alloc {
            record_own(st, layout);
        }
        return None;
    }
    if st.is_null() {
        st = thread::init(local);
    } else if st == DEAD {
        late(own_alloc);
        return None;
    }
    // SAFETY: as in `state`.
    Some(unsafe { &*st })
}

#[cold]
fn record_own(st: *mut ThreadState, layout: Layout) {
    let class = size_class::index_of(layout.size(), layout.align());
    if st.is_null() || st == DEAD {
        crate::registry::EARLY_OWN[class].fetch_add(1, Relaxed);
        return;
    }
    // SAFETY: as in `state`.
    let st = unsafe { &*st };
    bump(&st.own.allocs, 1);
    bump(&st.own.bytes, layout.size() as u64);
    bump(&st.own.classes[class], 1);
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

#[cold]
fn init_mode_then_retry(ptr: *mut u8, layout: Layout) {
    // Allocations made while reading the settings arrive here again; the guard makes
    // them pass through.
    if with_local(|l| l.guard.get()) {
        return;
    }
    thread::guarded(crate::config::init_from_env);
    if control::load().mode() != MODE_UNINIT {
        on_alloc(ptr, layout);
    }
}

/// The part of every allocation that is inlined into the allocator entry point: one
/// load and a branch, so that `off` costs next to nothing and the recording body
/// (out of line) does not make every call save registers.
#[inline(always)]
fn on_alloc(ptr: *mut u8, layout: Layout) {
    let ctl = control::load();
    if ctl.recording() {
        record_alloc(ctl, ptr, layout);
    } else if ctl.mode() == MODE_UNINIT {
        init_mode_then_retry(ptr, layout);
    }
}

#[inline(never)]
fn record_alloc(ctl: Control, ptr: *mut u8, layout: Layout) {
    let local = thread::current();
    let Some(st) = state(local, layout, true) else {
        return;
    };
    let size = layout.size();
    let class = size_class::index_of(size, layout.align());
    let phase = ctl.phase();
    let p = &st.phases[phase];
    bump(&st.classes[phase][class], 1);
    bump(&p.bytes_requested, size as u64);
    bump(&st.requested[log_linear::size_bucket(size)], 1);
    let usable = if class <= size_class::LAST_SMALL {
        size_class::class_bytes(class)
    } else {
        let usable = size_class::usable(class, size);
        bump(&p.large_bytes_allocated, usable as u64);
        usable
    };
    track_live(st, usable as i64);
    st.last_block.set(ptr as usize);
    st.last_slot.set(std::ptr::null());
    record_stack(
        local,
        st,
        ctl,
        Block {
            ptr,
            size,
            usable,
            class,
            realloc: false,
        },
    );
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
    let p = &st.phases[ctl.phase()];
    bump(&p.reallocs, 1);
    bump(&p.bytes_requested, new_size as u64);
    let usable = size_class::usable(class, new_size);
    let old_usable = size_class::usable(old_class, layout.size());
    bump(&p.realloc_bytes_allocated, usable as u64);
    bump(&p.realloc_bytes_freed, old_usable as u64);
    if moved {
        // A moving realloc is a request jemalloc serves from the new class.
        bump(&st.moved[class], 1);
    }
    bump(&st.requested[log_linear::size_bucket(new_size)], 1);
    track_live(st, usable as i64 - old_usable as i64);
    st.last_block.set(new as usize);
    st.last_slot.set(std::ptr::null());
    record_stack(
        local,
        st,
        ctl,
        Block {
            ptr: new,
            size: new_size,
            usable,
            class,
            realloc: true,
        },
    );
}

#[inline(always)]
fn on_dealloc(ptr: *mut u8, layout: Layout) {
    let ctl = control::load();
    if ctl.recording() {
        record_dealloc(ctl, ptr, layout);
    }
}

#[inline(never)]
fn record_dealloc(ctl: Control, ptr: *mut u8, layout: Layout) {
    let local = thread::current();
    let Some(st) = state(local, layout, false) else {
        return;
    };
    let size = layout.size();
    let class = size_class::index_of(size, layout.align());
    let phase = ctl.phase();
    bump(&st.freed[phase][class], 1);
    let usable = if class <= size_class::LAST_SMALL {
        size_class::class_bytes(class)
    } else {
        let usable = size_class::usable(class, size);
        bump(&st.phases[phase].large_bytes_freed, usable as u64);
        usable
    };
    track_live(st, -(usable as i64));
    if st.last_block.get() == ptr as usize {
        bump(&st.phases[phase].temporaries, 1);
        let slot = st.last_slot.get();
        if !slot.is_null() {
            // SAFETY: `last_slot` points into this thread's current table; it is
            // reset whenever the table is grown or flushed.
            bump(unsafe { &(*slot).temporaries }, 1);
        }
        st.last_block.set(0);
    }
    if ctl.mode() >= MODE_SITES && lifetimes_maybe(ptr) {
        end_followed(ptr);
    }
}

#[cold]
fn end_followed(ptr: *mut u8) {
    thread::guarded(|| crate::lifetimes::end(ptr));
}

#[inline(always)]
fn track_live(st: &ThreadState, delta: i64) {
    let net = st.net_bytes.get() + delta;
    if net.unsigned_abs() >= LIVE_PUBLISH_BYTES as u64 {
        publish_live(net);
        st.net_bytes.set(0);
    } else {
        st.net_bytes.set(net);
    }
}

#[cold]
fn publish_live(net: i64) {
    let live = LIVE_BYTES.fetch_add(net, Relaxed) + net;
    PEAK_BYTES.fetch_max(live, Relaxed);
}

/// Return addresses of the tracer's own frames at the start of a stack, at most.
pub const OWN_FRAMES: usize = 2;

/// One recorded block, as the stack part of recording needs it.
#[derive(Clone, Copy)]
struct Block {
    ptr: *mut u8,
    size: usize,
    usable: usize,
    class: usize,
    realloc: bool,
}

/// The stack part of recording: every call in `sites` mode, sampled ones in `sample`
/// mode. Inlined: the `count` and `sample` cases are a branch and a countdown; the
/// `sites` case is out of line.
#[inline(always)]
fn record_stack(local: &Local, st: &ThreadState, ctl: Control, block: Block) {
    match ctl.mode() {
        MODE_SITES => record_site(local, st, ctl, block),
        MODE_SAMPLE => {
            let left = st.sample_countdown.get();
            if left <= 1 {
                sample(local, st, ctl, block);
            } else {
                st.sample_countdown.set(left - 1);
            }
        }
        _ => {}
    }
}

/// Every call in `sites` mode: the stack, its site's counters, and now and then a
/// block followed to its free.
#[inline(never)]
fn record_site(local: &Local, st: &ThreadState, ctl: Control, block: Block) {
    let slot = site_slot(local, st, ctl, block.class);
    count_in_slot(slot, block);
    st.last_slot.set(slot);
    let left = st.lifetime_countdown.get();
    if left <= 1 {
        let site = slot_site(ctl, block.class, st);
        follow_block(local, st, block, site, control::lifetime_interval());
    } else {
        st.lifetime_countdown.set(left - 1);
    }
}

#[inline(always)]
fn count_in_slot(slot: &Slot, block: Block) {
    let count = if block.realloc {
        &slot.reallocs
    } else {
        &slot.allocs
    };
    bump(count, 1);
    bump(&slot.bytes_requested, block.size as u64);
    bump(&slot.bytes_allocated, block.usable as u64);
}

/// Captures the stack and returns its slot in this thread's table.
#[inline(always)]
fn site_slot<'t>(local: &Local, st: &'t ThreadState, ctl: Control, class: usize) -> &'t Slot {
    let mut raw = stack::raw_frames();
    let seed = pack_meta(ctl.phase(), class, 0);
    // The innermost return addresses are the tracer's own: the one into
    // `record_alloc` (or `record_realloc`), always, so it is walked over here; and
    // the one into the allocator entry point, unless that entry was inlined into the
    // program's code, so it is kept and the report drops it if it is all tracer.
    let depth = ctl.depth() + OWN_FRAMES - 1;
    let (n, hash) = stack::capture(&mut raw, 1, depth, st.stack_top, seed);
    let key = SiteKey {
        meta: seed | pack_meta(0, 0, n),
        frames: stack::captured(&raw, n),
        hash,
    };
    match st.table().lookup(&key) {
        Lookup::Slot(slot) => slot,
        Lookup::Full => make_room(local, st, &key),
    }
}

/// Grows or flushes a full table, then inserts `key`. Cold, under the guard.
#[cold]
#[inline(never)]
fn make_room<'t>(local: &Local, st: &'t ThreadState, key: &SiteKey<'_>) -> &'t Slot {
    let was = local.guard.replace(true);
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
        if let Lookup::Slot(slot) = st.table().lookup(key) {
            break slot;
        }
    };
    local.guard.set(was);
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
    local: &Local,
    st: &ThreadState,
    block: Block,
    site: crate::registry::SiteId,
    interval: u64,
) {
    let was = local.guard.replace(true);
    crate::lifetimes::follow(block.ptr, site, block.usable as u64);
    st.lifetime_countdown.set(if interval == 0 {
        u64::MAX
    } else {
        st.geometric(interval)
    });
    local.guard.set(was);
}

/// A sampled call in `sample` mode: stack, site counters, and the block followed.
#[cold]
#[inline(never)]
fn sample(local: &Local, st: &ThreadState, ctl: Control, block: Block) {
    let slot = site_slot(local, st, ctl, block.class);
    count_in_slot(slot, block);
    bump(&st.phases[ctl.phase()].sampled, 1);
    st.last_slot.set(slot);
    let site = slot_site(ctl, block.class, st);
    follow_block(local, st, block, site, 0);
    st.sample_countdown
        .set(st.geometric(control::sample_interval()));
}
