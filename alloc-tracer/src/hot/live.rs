//! Live bytes: each thread's net size-class bytes, published to one global count
//! (and its peak) only when they drift far enough; and the marks at which a rising
//! peak has the cold side keep what is live (`Door::new_peak`).

use super::door::Door;
use super::thread::{self, ThreadState};
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
/// Live bytes at or above which the next peak is kept (`Door::new_peak`).
static PEAK_MARK: AtomicI64 = AtomicI64::new(PEAK_STEP_MIN);

/// The highest global live bytes published so far.
pub fn peak_bytes() -> i64 {
    PEAK_BYTES.load(Relaxed)
}

/// The global live bytes published so far.
pub fn live_bytes() -> i64 {
    LIVE_BYTES.load(Relaxed)
}

/// A kept peak is followed by the next one only once live bytes have risen
/// 1/`PEAK_STEP` of it above it (and at least [`PEAK_STEP_MIN`]): so the last one
/// kept is within 1/128 (0.8 %) of the highest peak, and a run that grows to `P`
/// bytes keeps about 128 ln(P / 1 MiB) of them (under 1,800 for 1 TiB).
pub const PEAK_STEP: i64 = 128;
/// The smallest rise between two kept peaks.
pub const PEAK_STEP_MIN: i64 = 1 << 20;

/// True when `live` bytes (just published) pass the peak mark and this call moved
/// the mark up: the caller then has the cold side keep what is live
/// ([`new_peak`]). One thread wins each mark.
#[inline]
pub fn peak_mark_due(live: i64) -> bool {
    let mark = PEAK_MARK.load(Relaxed);
    live >= mark
        && PEAK_MARK
            .compare_exchange(
                mark,
                live + (live / PEAK_STEP).max(PEAK_STEP_MIN),
                Relaxed,
                Relaxed,
            )
            .is_ok()
}

/// Has the cold side keep what is live at a new peak of `live` bytes.
#[cold]
#[inline(never)]
pub fn new_peak<D: Door>(live: i64) {
    thread::guarded(|| D::new_peak(live));
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
pub fn publish_overflow<D: Door>(st: &ThreadState, way: Overflow) {
    let held = st.live_units.replace(0) as i64;
    let units = match way {
        Overflow::Up => held + (1 << 16),
        Overflow::Down => held - (1 << 16),
    };
    publish::<D>(units * LIVE_UNIT as i64);
}

/// Adds `bytes` (a large block's, or a realloc's change; a multiple of
/// [`LIVE_UNIT`]) to this thread's net live bytes, publishing the net if it reaches
/// [`LIVE_PUBLISH_BYTES`].
#[inline(never)]
pub fn add_bytes<D: Door>(st: &ThreadState, bytes: i64) {
    let net = st.live_units.get() as i64 * LIVE_UNIT as i64 + bytes;
    if net.unsigned_abs() < LIVE_PUBLISH_BYTES as u64 {
        // Fits: under 2^15 units.
        st.live_units.set((net / LIVE_UNIT as i64) as i16);
    } else {
        st.live_units.set(0);
        publish::<D>(net);
    }
}

/// Adds a thread's net live bytes to the global count, raises the peak, and has the
/// cold side keep what is live at a new peak mark.
pub fn publish<D: Door>(net: i64) {
    let live = add_to_global(net);
    if net > 0 && peak_mark_due(live) {
        new_peak::<D>(live);
    }
}

/// Publishes an exiting thread's last net live bytes (under
/// [`LIVE_PUBLISH_BYTES`]), for the cold side as it merges the thread's state. No
/// peak is kept here: a mark passed by so little is kept at the next publish.
pub fn publish_at_exit(net: i64) {
    add_to_global(net);
}

fn add_to_global(net: i64) -> i64 {
    let live = LIVE_BYTES.fetch_add(net, Relaxed) + net;
    PEAK_BYTES.fetch_max(live, Relaxed);
    live
}
