//! Heap sampling by bytes: which blocks are sampled for the live-heap tables.
//!
//! Every allocated byte is sampled independently with probability 1 / mean
//! (`control::heap_interval`), as jemalloc's and tcmalloc's heap profilers do; a
//! block is sampled when it holds at least one sampled byte, so a block of `s` bytes
//! with probability `1 - (1 - 1/mean)^s`: large blocks nearly always, small ones in
//! proportion to their size. The hot path only subtracts each block's bytes from a
//! per-thread countdown (`countdown`); a sampled block gets its stack walked here
//! and is handed to the cold side (the door's `heap_sampled`), which follows it to
//! its free through `followed` and weights it by the inverse of its probability.

use super::control::Control;
use super::countdown;
use super::door::{Door, SiteRef, Stack};
use super::site_table::SiteMeta;
use super::sites::OWN_FRAMES;
use super::stack::raw_frames;
use super::thread::{self, ThreadState};
use super::trail;

/// Counts a block of `usable` bytes against the heap countdown: true when the block
/// is sampled (then [`sample_block`] must follow, once the block exists).
#[inline(always)]
pub fn due(st: &ThreadState, usable: usize) -> bool {
    chunk_ran_out(st, usable) && due_after_chunk(st)
}

/// The first half of [`due`], for a path that goes on in cold code when it is true
/// (so that the common path needs no call, nor the frame a call needs): counts the
/// block's bytes, and says whether the countdown's chunk ran out.
#[inline(always)]
pub fn chunk_ran_out(st: &ThreadState, usable: usize) -> bool {
    let before = st.heap_countdown.get();
    st.heap_countdown.set(before.wrapping_sub(usable as i64));
    // `before - usable <= 0` (a chunk is at most `countdown::HEAP_CHUNK`, so the
    // subtraction does not overflow), written as the comparison the subtraction's
    // own flags give: one subtraction in memory and a branch, no separate test.
    before <= usable as i64
}

/// The second half of [`due`], once [`chunk_ran_out`] said so: true when the block
/// is sampled.
#[inline(always)]
pub fn due_after_chunk(st: &ThreadState) -> bool {
    countdown::heap_chunk_done(st, st.heap_countdown.get().unsigned_abs())
}

/// Hands the sampled block at `ptr` (`usable` bytes of class `class`) to the cold
/// side with its stack, and draws the next countdown. Called, never jumped to, from
/// the recording function: its walk passes over its own frame and starts at the
/// recording function's, as `sites`' walk does.
#[cold]
#[inline(never)]
pub fn sample_block<D: Door>(
    st: &ThreadState,
    ctl: Control,
    ptr: *mut u8,
    usable: usize,
    class: usize,
) {
    // The interval that sampled it weighs it; the next draw is the new one's.
    let interval = st.heap_drawn.get();
    countdown::next_heap(st);
    let depth = ctl.depth() + OWN_FRAMES - 1;
    // Seeded as the site tables seed their walks, so that the hash is the slot key's.
    let seed = SiteMeta::new(ctl.phase(), class, 0);
    // SAFETY: `st.stack` is this thread's stack, found when its state was made, and
    // `st.trail` this thread's trail, only ever walked with those bounds.
    let walk = unsafe { trail::walk(&st.trail, 1, depth, st.stack, seed.bits()) };
    // The site's slot in this thread's table, if its stacks are counted there (as
    // every allocation's are in `sites` mode): the slot keeps the site's number, so
    // that numbering it takes no lock.
    let table = st.table();
    let meta = seed.with_depth(walk.n);
    if let Some(slot) = table.find(walk.hash, meta) {
        let site = SiteRef {
            meta,
            hash: walk.hash,
            stack: Stack::Slot(table, slot),
        };
        thread::guarded(|| D::heap_sampled(ptr, site, usable as u64, interval));
        return;
    }
    let mut raw = raw_frames();
    let frames = trail::frames(&st.trail, &walk, &mut raw);
    let site = SiteRef {
        meta: seed.with_depth(frames.len()),
        hash: walk.hash,
        stack: Stack::Frames(frames),
    };
    thread::guarded(|| D::heap_sampled(ptr, site, usable as u64, interval));
}
