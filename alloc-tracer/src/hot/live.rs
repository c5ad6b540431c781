//! Live bytes: each thread's net size-class bytes, published to one global count
//! (and its peak) only when they drift far enough.

use super::thread::ThreadState;
use std::sync::atomic::{AtomicI64, Ordering::Relaxed};

/// Bound on a thread's unpublished net live bytes: the global live and peak bytes are
/// exact to within threads x this (256 KiB).
///
/// A thread keeps its net bytes since it last published in a 16-bit counter of
/// [`LIVE_UNIT`]s (`ThreadState::live_units`): a small block's allocation or free adds
/// or subtracts its units in one instruction, and publishes only when the counter
/// overflows, that is when the net reaches this bound either way. Larger blocks and
/// reallocs fold their bytes into the counter the same way ([`add_bytes`]),
/// publishing at once what does not fit.
pub const LIVE_PUBLISH_BYTES: i64 = (i16::MAX as i64 + 1) * LIVE_UNIT as i64;

/// Bytes per unit of the live-bytes counter: every size class is a multiple of it.
pub const LIVE_UNIT: usize = 8;

/// Global live bytes, as published by threads.
static LIVE_BYTES: AtomicI64 = AtomicI64::new(0);
/// Highest value `LIVE_BYTES` reached.
static PEAK_BYTES: AtomicI64 = AtomicI64::new(0);

/// The highest global live bytes published so far.
pub fn peak_bytes() -> i64 {
    PEAK_BYTES.load(Relaxed)
}

/// Which way a thread's 16-bit counter overflowed.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Overflow {
    /// An allocation took it past `i16::MAX`.
    Up,
    /// A free took it below `i16::MIN`.
    Down,
}

/// Adds a small block's live units to this thread's net; true when the 16-bit
/// counter overflowed (then `publish_overflow(st, Overflow::Up)` must run).
#[inline(always)]
pub fn small_alloc(st: &ThreadState, units: i16) -> bool {
    let (net, wrapped) = st.live_units.get().overflowing_add(units);
    st.live_units.set(net);
    wrapped
}

/// Takes a small block's live units from this thread's net; true when the 16-bit
/// counter overflowed (then `publish_overflow(st, Overflow::Down)` must run).
#[inline(always)]
pub fn small_free(st: &ThreadState, units: i16) -> bool {
    let (net, wrapped) = st.live_units.get().overflowing_sub(units);
    st.live_units.set(net);
    wrapped
}

/// Publishes this thread's net live bytes after its counter overflowed: the net is
/// then 2^16 units from what the counter holds.
#[cold]
#[inline(never)]
pub fn publish_overflow(st: &ThreadState, way: Overflow) {
    let held = st.live_units.replace(0) as i64;
    let units = match way {
        Overflow::Up => held + (1 << 16),
        Overflow::Down => held - (1 << 16),
    };
    publish(units * LIVE_UNIT as i64);
}

/// Adds `bytes` (a large block's, or a realloc's change; a multiple of
/// [`LIVE_UNIT`]) to this thread's net live bytes, publishing the net if it reaches
/// [`LIVE_PUBLISH_BYTES`].
#[inline(never)]
pub fn add_bytes(st: &ThreadState, bytes: i64) {
    let net = st.live_units.get() as i64 * LIVE_UNIT as i64 + bytes;
    if net.unsigned_abs() < LIVE_PUBLISH_BYTES as u64 {
        // Fits: under 2^15 units.
        st.live_units.set((net / LIVE_UNIT as i64) as i16);
    } else {
        st.live_units.set(0);
        publish(net);
    }
}

/// Adds a thread's net live bytes to the global count and raises the peak. Also for
/// the cold side, when it merges an exiting thread's state.
pub fn publish(net: i64) {
    let live = LIVE_BYTES.fetch_add(net, Relaxed) + net;
    PEAK_BYTES.fetch_max(live, Relaxed);
}
