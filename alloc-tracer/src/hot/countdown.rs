//! Countdowns to the next sampled stack and the next followed block (in
//! allocations), and to the next sampled byte of heap sampling (in bytes), drawn
//! from a geometric distribution and counted down in chunks.
//!
//! The hot path decrements a chunk of at most [`CHUNK`] allocations, or
//! [`HEAP_CHUNK`] bytes (a plain subtraction from a thread-local field), and comes
//! here only when it reaches 0. Here the rest of the countdown, if any, becomes the
//! next chunk; and when the intervals changed since the countdown was drawn
//! (`control::interval_epoch`, kept per countdown), it is redrawn under the new
//! ones. So a new interval, or following blocks again after none were followed,
//! takes effect on every thread within `CHUNK` of its allocations (`HEAP_CHUNK` of
//! its bytes for heap sampling), without any other thread writing this one's state. The geometric
//! distribution has no memory, so redrawing keeps the estimates unbiased, provided
//! the allocation (or the bytes of the block) that ended the chunk counts against
//! the new draw like every later one (else it, a block however large, could not be
//! sampled at all), and provided a draw that fell due is taken: a chunk that ends
//! its draw's count picks its allocation (or block), which the old draw chose and
//! weighs (`ThreadState::sample_drawn`, `lifetime_drawn`, `heap_drawn`). Redrawn
//! instead, it would stand for nothing, nor would the allocations the draw passed
//! over before it: a thread that takes a few samples between switches would lose
//! most of them.

use super::control;
use super::thread::{ThreadState, geometric};

/// Most allocations between two visits of a thread to this module.
pub const CHUNK: u64 = 1024;

/// Most bytes between two visits of a thread to this module for heap sampling.
pub const HEAP_CHUNK: u64 = 1 << 20;

/// The rest of a countdown that never ends (no blocks followed, heap sampling off).
const NEVER: u64 = u64::MAX;

/// Sets the sampling countdown to `total` allocations.
fn set_sample(st: &ThreadState, total: u64) {
    let chunk = total.clamp(1, CHUNK);
    st.sample_countdown.set(chunk);
    st.sample_rest.set(total.saturating_sub(chunk));
}

/// Sets the lifetime countdown to `total` allocations (`NEVER`: none followed).
fn set_lifetime(st: &ThreadState, total: u64) {
    let chunk = total.clamp(1, CHUNK);
    st.lifetime_countdown.set(chunk);
    st.lifetime_rest
        .set(if total == NEVER { NEVER } else { total - chunk });
}

/// Sets the heap countdown to `total` bytes (`NEVER`: heap sampling off).
fn set_heap(st: &ThreadState, total: u64) {
    let chunk = total.clamp(1, HEAP_CHUNK);
    st.heap_countdown.set(chunk as i64);
    st.heap_rest
        .set(if total == NEVER { NEVER } else { total - chunk });
}

/// The whole countdown to the next sampled stack: it falls by one at each
/// allocation (a chunk's end passes the rest on whole), until drawn again.
pub fn sample_left(st: &ThreadState) -> u64 {
    st.sample_countdown.get() + st.sample_rest.get()
}

/// Draws every countdown under the intervals in force. Cold.
pub fn redraw(st: &ThreadState) {
    redraw_sample(st);
    next_lifetime(st);
    next_heap(st);
}

/// Draws the sampling countdown again under the intervals in force.
fn redraw_sample(st: &ThreadState) {
    // A new draw may add up to what an earlier one did: the latest sampled block
    // can no longer be told to be the latest allocation.
    st.sampled_left.set(0);
    next_sample(st);
}

/// Draws the countdown to the next sampled byte (each byte sampled with
/// probability 1 / `control::heap_interval()`), from the end of the latest block.
pub fn next_heap(st: &ThreadState) {
    // The epoch before the interval: an interval published meanwhile is redrawn.
    st.heap_epoch.set(control::interval_epoch());
    let interval = control::heap_interval();
    st.heap_drawn.set(interval);
    let total = match interval {
        0 => NEVER,
        mean => geometric(st.next_random(), mean),
    };
    set_heap(st, total);
}

/// Draws the countdown to the next sampled stack, after one was taken (under
/// settings that sample no stacks, a countdown of 1 drawn under none: see
/// [`sample_chunk_done`]).
pub fn next_sample(st: &ThreadState) {
    st.sample_epoch.set(control::interval_epoch());
    let interval = control::sample_interval_published();
    st.sample_drawn.set(interval);
    set_sample(st, geometric(st.next_random(), interval.max(1)));
}

/// Draws the countdown to the next followed block under the lifetime interval in
/// force (0: none).
pub fn next_lifetime(st: &ThreadState) {
    st.lifetime_epoch.set(control::interval_epoch());
    let interval = control::lifetime_interval();
    st.lifetime_drawn.set(interval);
    let total = if interval == 0 {
        NEVER
    } else {
        geometric(st.next_random(), interval)
    };
    set_lifetime(st, total);
}

/// The sampling countdown's chunk reached 0: true when the sample is due now;
/// otherwise the next chunk (or a redraw) is set.
#[cold]
#[inline(never)]
pub fn sample_chunk_done(st: &ThreadState) -> bool {
    if st.sample_epoch.get() != control::interval_epoch() {
        // Due under the draw in force (one made while stacks were sampled): taken,
        // at its weight, whatever the intervals now; the caller draws the next.
        if st.sample_rest.get() == 0 && st.sample_drawn.get() != 0 {
            return true;
        }
        redraw_sample(st);
        return counted_down(&st.sample_countdown) && sample_chunk_done(st);
    }
    match st.sample_rest.get() {
        0 => true,
        rest => {
            set_sample(st, rest);
            false
        }
    }
}

/// Counts the allocation that ended a chunk against a countdown just redrawn, as
/// the hot path counts every allocation: true when that ends the new chunk too.
fn counted_down(countdown: &std::cell::Cell<u64>) -> bool {
    let left = countdown.get() - 1;
    countdown.set(left);
    left == 0
}

/// The lifetime countdown's chunk reached 0: true when the block is to be followed
/// now; otherwise the next chunk (or a redraw) is set.
#[cold]
#[inline(never)]
pub fn lifetime_chunk_done(st: &ThreadState) -> bool {
    if st.lifetime_epoch.get() != control::interval_epoch() {
        // As in `sample_chunk_done` (a draw made under none never ends).
        if st.lifetime_rest.get() == 0 {
            return true;
        }
        next_lifetime(st);
        return counted_down(&st.lifetime_countdown) && lifetime_chunk_done(st);
    }
    match st.lifetime_rest.get() {
        0 => true,
        rest => {
            set_lifetime(st, rest);
            false
        }
    }
}

/// The heap countdown's chunk ended inside the block just counted, `overshoot`
/// bytes before the block's end: true when the sampled byte lies in the block (then
/// the caller samples it and draws the next countdown with [`next_heap`]);
/// otherwise the countdown goes on from the block's end.
///
/// Counting from the end of a sampled block instead of from its sampled byte
/// changes nothing: bytes are sampled independently, so the bytes after the
/// sampled one hold other sampled bytes or not whatever the countdown says, and
/// only whether a block holds at least one matters.
#[cold]
#[inline(never)]
pub fn heap_chunk_done(st: &ThreadState, overshoot: u64) -> bool {
    if st.heap_epoch.get() != control::interval_epoch() {
        // As in `sample_chunk_done`: a sampled byte the draw put inside this block
        // samples it (a draw made with heap sampling off never ends).
        if st.heap_rest.get() <= overshoot {
            return true;
        }
        next_heap(st);
        // The block's bytes past the old chunk's end count against the new draw.
        let left = st.heap_countdown.get().saturating_sub_unsigned(overshoot);
        st.heap_countdown.set(left);
        return left <= 0 && heap_chunk_done(st, left.unsigned_abs());
    }
    match st.heap_rest.get() {
        NEVER => {
            set_heap(st, NEVER);
            false
        }
        // The sampled byte is the chunk's last plus `rest`: inside the block.
        rest if rest <= overshoot => true,
        rest => {
            set_heap(st, rest - overshoot);
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_add_up_to_the_draw() {
        let st = ThreadState::new_for_tests();
        for total in [1, 5, CHUNK, CHUNK + 1, 10 * CHUNK + 7] {
            set_sample(&st, total);
            st.sample_epoch.set(control::interval_epoch());
            let mut n = 0;
            loop {
                // What the hot path does per allocation.
                let left = st.sample_countdown.get() - 1;
                st.sample_countdown.set(left);
                n += 1;
                if left == 0 && sample_chunk_done(&st) {
                    break;
                }
            }
            assert_eq!(n, total);
        }
    }

    /// What the hot path does per block: true when the block is sampled.
    fn heap_block(st: &ThreadState, bytes: u64) -> bool {
        let left = st.heap_countdown.get() - bytes as i64;
        st.heap_countdown.set(left);
        if left <= 0 && heap_chunk_done(st, left.unsigned_abs()) {
            next_heap(st);
            return true;
        }
        false
    }

    #[test]
    fn heap_samples_the_block_holding_the_drawn_byte() {
        let st = ThreadState::new_for_tests();
        st.heap_epoch.set(control::interval_epoch());
        // A draw of `total`: the block holding byte `total` (from 1) is sampled, by
        // blocks of 1000 bytes, across chunks.
        for total in [
            1,
            999,
            1000,
            1001,
            HEAP_CHUNK,
            HEAP_CHUNK + 1,
            3 * HEAP_CHUNK + 5,
        ] {
            set_heap(&st, total);
            let mut n = 0u64;
            while !heap_block(&st, 1000) {
                n += 1;
            }
            assert_eq!(n, (total - 1) / 1000, "draw {total}");
        }
        // Off: never, however many bytes.
        set_heap(&st, NEVER);
        for _ in 0..10 {
            assert!(!heap_block(&st, HEAP_CHUNK));
        }
    }

    #[test]
    fn the_allocation_that_meets_new_intervals_is_drawn_under_them() {
        // The intervals in force in these tests sample every allocation (none set:
        // a published 0, drawn as 1).
        assert_eq!(control::sample_interval(), 1);
        let st = ThreadState::new_for_tests();
        // Drawn under another epoch, with more of the draw to come when the hot
        // path's decrement reached 0: the allocation is sampled, as every one is
        // under the new interval.
        for _ in 0..3 {
            st.sample_epoch
                .set(control::interval_epoch().wrapping_sub(1));
            st.sample_countdown.set(0);
            st.sample_rest.set(5000);
            assert!(sample_chunk_done(&st));
            assert_eq!(st.sample_epoch.get(), control::interval_epoch());
            assert_eq!(st.sample_drawn.get(), control::sample_interval_published());
        }
        // Under the same epoch it would have been too (a draw of 1).
        st.sample_countdown.set(0);
        assert!(sample_chunk_done(&st));
    }

    #[test]
    fn a_draw_due_under_old_intervals_is_taken_at_its_weight() {
        let st = ThreadState::new_for_tests();
        let (old, now) = (
            control::interval_epoch().wrapping_sub(1),
            control::interval_epoch(),
        );
        for epoch in [&st.sample_epoch, &st.lifetime_epoch, &st.heap_epoch] {
            epoch.set(old);
        }
        // The chunk that ended was the draw's last: its allocation is the one,
        // weighed by the interval it was drawn at, and nothing is redrawn (the
        // caller draws the next under the new intervals). So the latest sampled
        // block's temporary is still told, and a refused allocation passes the
        // sample on whole.
        st.sample_drawn.set(1000);
        st.sample_countdown.set(0);
        st.sample_rest.set(0);
        st.sampled_left.set(77);
        assert!(sample_chunk_done(&st));
        assert_eq!((st.sample_drawn.get(), st.sample_epoch.get()), (1000, old));
        // The heap countdown, its chunk ended and its byte not in the block, is
        // redrawn alone: not the sample's draw, nor the latest sampled block.
        st.heap_rest.set(NEVER);
        assert!(!heap_chunk_done(&st, 10));
        assert_eq!(st.heap_epoch.get(), now);
        assert_eq!((st.sample_drawn.get(), st.sampled_left.get()), (1000, 77));
        // A countdown of 1 drawn under settings that sample no stacks is no
        // draw: redrawn under the new intervals.
        st.sample_drawn.set(0);
        st.sample_countdown.set(0);
        st.sample_rest.set(0);
        let _ = sample_chunk_done(&st);
        assert_eq!(st.sample_epoch.get(), now);
        // Likewise a followed block's draw, and a heap sample whose byte lies in
        // the block just counted (200 bytes past the chunk's end, the byte 150 in).
        st.lifetime_drawn.set(64);
        st.lifetime_countdown.set(0);
        st.lifetime_rest.set(0);
        assert!(lifetime_chunk_done(&st));
        assert_eq!(
            (st.lifetime_drawn.get(), st.lifetime_epoch.get()),
            (64, old)
        );
        st.heap_epoch.set(old);
        st.heap_drawn.set(1 << 20);
        st.heap_rest.set(150);
        assert!(heap_chunk_done(&st, 200));
        assert_eq!((st.heap_drawn.get(), st.heap_epoch.get()), (1 << 20, old));
        // Its byte past the block: the rest counts against a new draw.
        st.heap_rest.set(250);
        let _ = heap_chunk_done(&st, 200);
        assert_eq!(st.heap_epoch.get(), now);
    }

    #[test]
    fn never_stays_never_until_the_intervals_change() {
        let st = ThreadState::new_for_tests();
        st.lifetime_epoch.set(control::interval_epoch());
        set_lifetime(&st, NEVER);
        for _ in 0..3 {
            st.lifetime_countdown.set(1);
            assert!(!lifetime_chunk_done(&st));
            assert_eq!(st.lifetime_rest.get(), NEVER);
        }
    }
}
