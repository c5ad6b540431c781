//! Call sites: the stack of an allocation in `sites` mode (every one) and `sample`
//! mode (one in N), its counters in this thread's site table, and now and then the
//! block followed to its free.

use super::control::{Control, MODE_SITES};
use super::countdown;
use super::door::{Door, SiteRef, Stack};
use super::entry::no_tail_call;
use super::predict;
use super::site_table::{Lookup, SiteKey, SiteMeta, Slot, bump, key_hash};
use super::size_class::SAMPLE_ALL_FROM_CLASS;
use super::stack::{self, MAX_DEPTH, Start};
use super::thread::{self, ThreadState};
use super::trail::{self, Walk};
use std::sync::atomic::Ordering::Relaxed;

/// Return addresses of the tracer's own frames at the start of a stack, at most.
pub const OWN_FRAMES: usize = 2;

/// For `REALLOC` below: the call is an allocation.
pub const ALLOC: bool = false;
/// For `REALLOC` below: the call is a realloc.
pub const REALLOC: bool = true;

/// The site of an allocation (or, `REALLOC`, a realloc) recorded after the inner
/// allocator returned, and the thread's latest block, by mode: `count` keeps
/// neither; `sites` records both; `sample` records both for the one allocation in N
/// whose stack is sampled (temporaries are counted for sampled blocks only; see
/// `ThreadState::sampled_left`).
#[inline(always)]
pub fn site_and_latest<D: Door, const REALLOC: bool>(
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
        record_site::<D, REALLOC>(st, ctl, ptr, size, usable, class);
        no_tail_call();
    } else if sample_due(st) {
        st.last_block.store(ptr as usize, Relaxed);
        sample::<D, REALLOC, true>(st, ctl, ptr, size, usable, class);
        no_tail_call();
    } else if class >= SAMPLE_ALL_FROM_CLASS {
        // A block this large is recorded whole (counted once, not N times), between
        // draws: the countdown goes on.
        st.last_block.store(ptr as usize, Relaxed);
        sample::<D, REALLOC, false>(st, ctl, ptr, size, usable, class);
        no_tail_call();
    }
}

/// `sample` mode, for an allocation not walked otherwise: counts down to the next
/// sampled stack; true when this allocation is the one. (A block not sampled has no
/// site.)
#[inline(always)]
pub fn sample_due(st: &ThreadState) -> bool {
    let left = st.sample_countdown.get().wrapping_sub(1);
    st.sample_countdown.set(left);
    left == 0 && countdown::sample_chunk_done(st)
}

/// Every call in `sites` mode: the stack, its site's counters, and now and then a
/// block followed to its free. Inlined into the recording function (`alloc_recorded`,
/// `alloc_any`, `record_first_alloc`, `record_realloc`), which has a frame of its own
/// anyway (for its call to `A`, or, in the last two, as an out-of-line function
/// called after `A` returned); the walk starts at that frame. (Out of line, its own
/// call, frame and saved registers cost about 30 instructions an allocation more.)
/// Only the guess is inlined: a refused one calls `walked_slot`, which walks from
/// the recording function's frame.
#[inline(always)]
fn record_site<D: Door, const REALLOC: bool>(
    st: &ThreadState,
    ctl: Control,
    ptr: *mut u8,
    size: usize,
    usable: usize,
    class: usize,
) {
    let slot = site_slot::<D, 0>(st, ctl, class);
    count_in_slot::<REALLOC>(slot, size, usable, 1);
    st.last_slot.set(slot);
    let left = st.lifetime_countdown.get().wrapping_sub(1);
    st.lifetime_countdown.set(left);
    if left == 0 && countdown::lifetime_chunk_done(st) {
        let weight = st.lifetime_drawn.get();
        follow_block::<D>(st, ctl, ptr, usable, class, weight, true);
    }
}

/// A sampled call in `sample` mode: stack, site counters, and the block followed;
/// `DRAWN`: the countdown chose it (then the next one is drawn), else it is a block
/// recorded whole (`SAMPLE_ALL_FROM_CLASS`) between draws. Its counts weigh the
/// interval its countdown was drawn with (`sample_drawn`: N, whatever the mode
/// when the report is written), or 1 in a class recorded whole (by class: a drawn
/// block of such a class counts once too). Out of line (it is rare), called from
/// the recording function, never jumped to: its walk passes over its own frame.
#[cold]
#[inline(never)]
pub fn sample<D: Door, const REALLOC: bool, const DRAWN: bool>(
    st: &ThreadState,
    ctl: Control,
    ptr: *mut u8,
    size: usize,
    usable: usize,
    class: usize,
) {
    // (A draw made under settings that sample nothing, taken as they change to
    // `sample`, is one of 1: this allocation stands for itself.)
    let weight = if class >= SAMPLE_ALL_FROM_CLASS {
        1
    } else {
        st.sample_drawn.get().max(1)
    };
    let slot = site_slot::<D, 1>(st, ctl, class);
    count_in_slot::<REALLOC>(slot, size, usable, weight);
    slot.count_sample();
    bump(&st.phase(ctl).sampled, 1);
    st.last_slot.set(slot);
    st.sampled_weight.set(weight);
    // The lifetime countdown is left as drawn: `sample` mode does not count it
    // down, and a switch to `sites` redraws it (set to none here, it would outlast
    // a switch made just as this sample was taken: no block followed after it).
    follow_block::<D>(st, ctl, ptr, usable, class, weight, false);
    if DRAWN {
        countdown::next_sample(st);
    }
    // Drawn again or not, the countdown as it stands: a free of this block while it
    // is unchanged (no allocation since) is a temporary's.
    st.sampled_left.set(countdown::sample_left(st));
}

/// Counts a call in its slot as `weight` calls (1 in `sites` mode, where this is
/// inlined with the constant and multiplies nothing).
#[inline(always)]
fn count_in_slot<const REALLOC: bool>(slot: &Slot, size: usize, usable: usize, weight: u64) {
    bump(
        if REALLOC {
            &slot.reallocs
        } else {
            &slot.allocs
        },
        weight,
    );
    bump(&slot.bytes_requested, (size as u64).wrapping_mul(weight));
    bump(&slot.bytes_allocated, (usable as u64).wrapping_mul(weight));
}

/// Walks the stack and returns its slot in this thread's table. `SKIP`: frames of
/// the tracer's to pass over before the recording function's (0 when this is
/// inlined into it, 1 from a function it calls). Where this is inlined (`SKIP` 0,
/// every call in `sites` mode) the predictor's guess comes first: the site that
/// followed the thread's latest one, taken when the stack still holds its walk.
#[inline(always)]
fn site_slot<D: Door, const SKIP: usize>(st: &ThreadState, ctl: Control, class: usize) -> &Slot {
    let seed = SiteMeta::new(ctl.phase(), class, 0);
    // The innermost return addresses are the tracer's own: from a function the
    // recording function (`alloc_recorded`, `alloc_sampled`, `alloc_any` or
    // `record_realloc`) called, the one into it, walked over here (`SKIP`); and the
    // one into the allocator entry point, unless that entry was inlined into the
    // program's code or reached the recording function by a jump, so it is kept and
    // the report drops it if it is all tracer.
    let depth = (ctl.depth() + OWN_FRAMES - 1).min(MAX_DEPTH);
    let key = predict::key(seed.bits(), depth);
    // SAFETY: `st.stack` is this thread's stack, found when its state was made.
    let start = unsafe { stack::start(SKIP, st.stack) };
    if SKIP == 0
        && let Start::Frames { fp, .. } = start
    {
        // SAFETY: `fp` is where this walk starts, under the thread's bounds, which
        // every walk the predictor kept was made with.
        if let Some(slot) = unsafe { st.predictor.guess(fp, key) } {
            return slot;
        }
    }
    // SAFETY: `start` is this thread's, found just now in this frame (or, `SKIP`
    // 1, in the recording function's that called it), which stays live while the
    // walk reads from it outward.
    unsafe { walked_slot::<D>(st, start, seed, depth, key, SKIP == 0) }
}

/// The slot of a stack the guess did not hold: walked from `start`, looked up (or
/// inserted), and, `learn` (called from the recording function), kept for the next
/// guess. Out of line: the guess takes nearly every allocation in `sites` mode, and
/// the walk's buffers and registers would otherwise cost it a larger frame and
/// spills. Its own frame lies inward of `start`, which the walk begins at.
///
/// # Safety
/// `start` came from `stack::start` with this thread's bounds, in a frame still live.
#[inline(never)]
unsafe fn walked_slot<D: Door>(
    st: &ThreadState,
    start: Start,
    seed: SiteMeta,
    depth: usize,
    key: u64,
    learn: bool,
) -> &Slot {
    let (walk, fp) = match start {
        Start::Frames { fp, limit } => {
            // SAFETY: `start` checked `fp` against the stack's bounds, which give
            // `limit`; `st.trail` is this thread's, only ever walked with them.
            let walk = unsafe { trail::walk_from(&st.trail, fp, limit, depth, seed.bits()) };
            (walk, fp)
        }
        Start::Empty => (trail::empty(seed.bits(), false), 0),
        Start::Foreign => (trail::empty(seed.bits(), true), 0),
    };
    if walk.foreign {
        foreign_walk(st);
    }
    let meta = seed.with_depth(walk.n);
    let slot = match st.table().find(walk.hash, meta) {
        Some(slot) => slot,
        None => new_site::<D>(st, &walk, meta),
    };
    if learn {
        st.predictor
            .learn(slot, st.table().capacity(), &st.trail, &walk, fp, key);
    }
    slot
}

/// Counts a walk that found the stack pointer off this thread's stack.
#[cold]
#[inline(never)]
fn foreign_walk(st: &ThreadState) {
    bump(&st.foreign_walks, 1);
}

/// Inserts a site not in the table yet: takes its frames from the trail, interns
/// them (`stacks`: the first thread to meet a stack allocates its record), then
/// grows or empties a full table. Cold, under the guard.
#[cold]
#[inline(never)]
fn new_site<'t, D: Door>(st: &'t ThreadState, walk: &Walk, meta: SiteMeta) -> &'t Slot {
    let mut raw = stack::raw_frames();
    // `walk` is this thread's latest: made by our caller just before.
    let frames = trail::frames(&st.trail, walk, &mut raw);
    let key = SiteKey {
        meta,
        frames,
        hash: walk.hash,
    };
    let local = thread::current();
    let was = local.replace_guard(true);
    if st.has_retired() {
        // Tables replaced while a reader held the registry: freed at the first new
        // site after, when none does.
        // SAFETY: with the registry lock held, no other thread reads our tables.
        D::if_tables_unread(|| unsafe { st.free_retired() });
    }
    let mut grow = true;
    if let Lookup::Slot(slot) = st.table().lookup(&key) {
        local.set_guard(was);
        return slot;
    }
    let slot = loop {
        if grow && st.grow_table() {
            grow = false;
            // SAFETY: with the registry lock held, no other thread reads our tables.
            D::if_tables_unread(|| unsafe { st.free_retired() });
        } else {
            // At the size cap: the cold side takes the contents. An empty table of
            // at least two slots always has room, so the next lookup succeeds.
            D::table_full(st);
        }
        st.last_slot.set(std::ptr::null());
        // Grown or emptied, the table's slots moved: every kept walk leads nowhere.
        st.predictor.reset();
        if let Lookup::Slot(slot) = st.table().lookup(&key) {
            break slot;
        }
    };
    local.set_guard(was);
    slot
}

/// Follows the block just recorded at `last_slot`'s site to its free, standing for
/// `weight` blocks, and, `next`, draws the countdown to the next one (`sites`
/// mode; `sample` mode follows its sampled blocks instead).
#[cold]
#[inline(never)]
fn follow_block<D: Door>(
    st: &ThreadState,
    ctl: Control,
    ptr: *mut u8,
    usable: usize,
    class: usize,
    weight: u64,
    next: bool,
) {
    let table = st.table();
    // SAFETY: `last_slot` was set just before from this thread's current table.
    let slot = unsafe { &*st.last_slot.get() };
    let site = match table.key(slot) {
        Some((meta, hash)) => SiteRef {
            meta,
            hash,
            stack: Stack::Slot(table, slot),
        },
        None => {
            let meta = SiteMeta::new(ctl.phase(), class, 0);
            SiteRef {
                meta,
                hash: key_hash(meta, &[]),
                stack: Stack::Frames(&[]),
            }
        }
    };
    let live_bytes = (usable as u64).saturating_mul(weight);
    thread::guarded(|| D::block_followed(ptr, site, live_bytes));
    if next {
        countdown::next_lifetime(st);
    }
}
