//! Countdowns to the next sampled stack and the next followed block, drawn from a
//! geometric distribution and counted down in chunks.
//!
//! The hot path decrements a chunk of at most [`CHUNK`] allocations (a plain
//! decrement of a thread-local field) and comes here only when it reaches 0. Here the
//! rest of the countdown, if any, becomes the next chunk; and when the intervals
//! changed since the countdowns were drawn (`control::interval_epoch`), both are
//! redrawn under the new ones. So a new interval, or following blocks again after
//! none were followed, takes effect on every thread within `CHUNK` of its
//! allocations, without any other thread writing this one's state. The geometric
//! distribution has no memory, so redrawing at any moment keeps the estimates
//! unbiased.

use super::control;
use super::thread::{ThreadState, geometric};

/// Most allocations between two visits of a thread to this module.
pub const CHUNK: u64 = 1024;

/// The rest of a lifetime countdown that never ends (no blocks followed).
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

/// Draws both countdowns under the intervals in force. Cold.
pub fn redraw(st: &ThreadState) {
    st.countdown_epoch.set(control::interval_epoch());
    next_sample(st);
    next_lifetime(st, control::lifetime_interval());
}

/// Draws the countdown to the next sampled stack, after one was taken.
pub fn next_sample(st: &ThreadState) {
    set_sample(st, geometric(st.next_random(), control::sample_interval()));
}

/// Draws the countdown to the next followed block for `interval` (0: none).
pub fn next_lifetime(st: &ThreadState, interval: u64) {
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
    if st.countdown_epoch.get() != control::interval_epoch() {
        redraw(st);
        return false;
    }
    match st.sample_rest.get() {
        0 => true,
        rest => {
            set_sample(st, rest);
            false
        }
    }
}

/// The lifetime countdown's chunk reached 0: true when the block is to be followed
/// now; otherwise the next chunk (or a redraw) is set.
#[cold]
#[inline(never)]
pub fn lifetime_chunk_done(st: &ThreadState) -> bool {
    if st.countdown_epoch.get() != control::interval_epoch() {
        redraw(st);
        return false;
    }
    match st.lifetime_rest.get() {
        0 => true,
        rest => {
            set_lifetime(st, rest);
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
            st.countdown_epoch.set(control::interval_epoch());
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

    #[test]
    fn never_stays_never_until_the_intervals_change() {
        let st = ThreadState::new_for_tests();
        st.countdown_epoch.set(control::interval_epoch());
        set_lifetime(&st, NEVER);
        for _ in 0..3 {
            st.lifetime_countdown.set(1);
            assert!(!lifetime_chunk_done(&st));
            assert_eq!(st.lifetime_rest.get(), NEVER);
        }
    }
}
