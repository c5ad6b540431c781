//! Live bytes: each thread's net size-class bytes, published to one global count
//! (and its peak) only when they drift far enough; the marks at which a rising
//! peak has the cold side keep what is live (`Door::new_peak`); and, while
//! `measure` runs on a thread, that thread's exact peak ([`Watch`]).

use super::control::{self, MAX_PHASES};
use super::door::Door;
use super::thread::{self, ThreadState};
use std::cell::Cell;
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
/// Highest value `LIVE_BYTES` reached while each phase was the innermost in force
/// (the phase of the control word when a rise was published, or the live bytes as
/// the phase came into force): which phase holds the peak. Every rise is published
/// in some phase, so the run's peak is the highest of them.
static PHASE_PEAKS: [AtomicI64; MAX_PHASES] = [const { AtomicI64::new(0) }; MAX_PHASES];
/// Live bytes at or above which the next peak is kept (`Door::new_peak`).
static PEAK_MARK: AtomicI64 = AtomicI64::new(PEAK_STEP_MIN);

/// The highest global live bytes published while each phase was the innermost in
/// force.
pub fn phase_peak_bytes() -> [i64; MAX_PHASES] {
    std::array::from_fn(|p| PHASE_PEAKS[p].load(Relaxed))
}

/// Raises `phase`'s peak to the live bytes now, as it comes into force (entered, or
/// resumed when a phase inside it ends): what is live when it begins counts in it.
/// A load and a compare when nothing rose, for quick guards entered per enforce.
#[inline]
pub fn phase_entered(phase: usize) {
    if let Some(peak) = PHASE_PEAKS.get(phase) {
        let live = LIVE_BYTES.load(Relaxed);
        if live > peak.load(Relaxed) {
            peak.fetch_max(live, Relaxed);
        }
    }
}

/// The global live bytes published so far.
pub fn live_bytes() -> i64 {
    LIVE_BYTES.load(Relaxed)
}

/// A kept peak is followed by the next one only once live bytes have risen
/// 1/`PEAK_STEP` of it above it (and at least [`PEAK_STEP_MIN`]): so the last one
/// kept is within 1/128 (0.8 %) of the highest peak or 1 MiB, whichever is larger,
/// and a run that grows to `P` bytes keeps about 128 ln(P / 1 MiB) of them (under
/// 1,800 for 1 TiB).
pub const PEAK_STEP: i64 = 128;
/// The smallest rise between two kept peaks.
pub const PEAK_STEP_MIN: i64 = 1 << 20;

/// True when `live` bytes (just published) pass the peak mark and this call moved
/// the mark up: the caller then has the cold side keep what is live
/// ([`new_peak`]). One thread wins each mark; a thread that loses one to another
/// tries again against the mark the winner set, so a publish that passes that too
/// is kept (else a higher peak published at the same moment would be lost).
#[inline]
pub fn peak_mark_due(live: i64) -> bool {
    let mut mark = PEAK_MARK.load(Relaxed);
    while live >= mark {
        let next = live + (live / PEAK_STEP).max(PEAK_STEP_MIN);
        match PEAK_MARK.compare_exchange_weak(mark, next, Relaxed, Relaxed) {
            Ok(_) => return true,
            Err(now) => mark = now,
        }
    }
    false
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
/// then 2^16 units from what the counter holds (counted from the watch's base).
#[cold]
#[inline(never)]
pub fn publish_overflow<D: Door>(st: &ThreadState, way: Overflow) {
    let base = st.watch.base.get();
    let held = st.live_units.replace(base) as i64 - base as i64;
    let units = match way {
        Overflow::Up => held + (1 << 16),
        Overflow::Down => held - (1 << 16),
    };
    net_changed::<D>(st, units * LIVE_UNIT as i64);
}

/// Adds `bytes` (a large block's, or a realloc's change; a multiple of
/// [`LIVE_UNIT`]) to this thread's net live bytes, publishing the net if it reaches
/// [`LIVE_PUBLISH_BYTES`].
#[inline(never)]
pub fn add_bytes<D: Door>(st: &ThreadState, bytes: i64) {
    let base = st.watch.base.get();
    let net = (st.live_units.get() as i64 - base as i64) * LIVE_UNIT as i64 + bytes;
    let units = base as i64 + net / LIVE_UNIT as i64;
    // Fits: under 2^15 units either way. (While watched, a rise never fits.)
    if net.unsigned_abs() < LIVE_PUBLISH_BYTES as u64 && units <= i16::MAX as i64 {
        st.live_units.set(units as i16);
    } else {
        st.live_units.set(base);
        net_changed::<D>(st, net);
    }
}

/// What a thread holds and has not published: its counter's units (from the watch's
/// base) and, while watched, what the watch keeps back.
pub fn unpublished_bytes(st: &ThreadState) -> i64 {
    (st.live_units.get() as i64 - st.watch.base.get() as i64) * LIVE_UNIT as i64
        + st.watch.pending.get()
}

/// Publishes `net` bytes that left a thread's counter; while the thread is watched,
/// first follows its peak, and keeps the bytes back until they reach
/// [`LIVE_PUBLISH_BYTES`] either way, as the counter would have.
fn net_changed<D: Door>(st: &ThreadState, net: i64) {
    let w = &st.watch;
    if w.base.get() == 0 {
        return publish::<D>(net);
    }
    w.net.set(w.net.get() + net);
    w.peak.set(w.peak.get().max(w.net.get()));
    let pending = w.pending.get() + net;
    if pending.unsigned_abs() < LIVE_PUBLISH_BYTES as u64 {
        w.pending.set(pending);
    } else {
        w.pending.set(0);
        publish::<D>(pending);
    }
}

/// A thread's exact peak of net live bytes while `measure` runs on it, at no cost
/// to any other thread or time: the counter then rests at `i16::MAX` units instead
/// of 0, so that every allocation that raises the thread's net overflows it into
/// [`publish_overflow`] (or [`add_bytes`]), which sees the net and keeps its
/// highest. An allocation that does not overflow it leaves the net at or below the
/// last one seen, so no peak is missed. Frees overflow it only after 2^16 units
/// down, as always. All zeros: not watched.
#[derive(Default)]
pub struct Watch {
    /// Where the counter rests: 0, or `i16::MAX` while watched.
    base: Cell<i16>,
    /// Net bytes since the watch started (while watched).
    net: Cell<i64>,
    /// The highest `net` (while watched).
    peak: Cell<i64>,
    /// Bytes seen but not published yet (while watched).
    pending: Cell<i64>,
}

/// Where an outer watch stood when an inner one started, for [`watch_end`].
#[derive(Clone, Copy, Debug)]
pub struct WatchStart {
    net: i64,
    outer_peak: Option<i64>,
}

/// Starts following this thread's peak (nested calls follow their own and leave the
/// outer one's intact).
pub fn watch_start(st: &ThreadState) -> WatchStart {
    let w = &st.watch;
    let outer_peak = (w.base.get() != 0).then(|| w.peak.get());
    if outer_peak.is_none() {
        // What the counter held moves aside, so that it can rest at its new base.
        w.pending.set(st.live_units.get() as i64 * LIVE_UNIT as i64);
        w.net.set(0);
        w.base.set(i16::MAX);
        st.live_units.set(i16::MAX);
    }
    w.peak.set(w.net.get());
    WatchStart {
        net: w.net.get(),
        outer_peak,
    }
}

/// Ends the watch `start` began and returns the highest the thread's net live bytes
/// rose above where they stood at its start (0 if they never did).
pub fn watch_end<D: Door>(st: &ThreadState, start: WatchStart) -> u64 {
    let w = &st.watch;
    let rise = (w.peak.get() - start.net).max(0) as u64;
    match start.outer_peak {
        Some(outer) => w.peak.set(outer.max(w.peak.get())),
        None => {
            let held = unpublished_bytes(st);
            w.base.set(0);
            w.pending.set(0);
            st.live_units.set(0);
            add_bytes::<D>(st, held);
        }
    }
    rise
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
/// [`LIVE_PUBLISH_BYTES`]), for the cold side as it merges the thread's state; true
/// when they passed the peak mark, so that the cold side keeps the peak once it
/// has let go of the registry's lock (threads that each held back under 256 KiB
/// and handed their blocks on as they exited can make the run's peak, with no
/// publish after them).
pub fn publish_at_exit(net: i64) -> Option<i64> {
    let live = add_to_global(net);
    (net > 0 && peak_mark_due(live)).then_some(live)
}

fn add_to_global(net: i64) -> i64 {
    let live = LIVE_BYTES.fetch_add(net, Relaxed) + net;
    // Only a rise can make a peak.
    if net > 0 {
        WATCHED_PEAK.fetch_max(live, Relaxed);
        if let Some(peak) = PHASE_PEAKS.get(control::load().phase()) {
            peak.fetch_max(live, Relaxed);
        }
    }
    live
}

/// Like the run's peak (the highest of [`phase_peak_bytes`]), but lowered at will
/// by [`reset_watched_peak`]: the process's peak during a `measure_process`.
static WATCHED_PEAK: AtomicI64 = AtomicI64::new(0);

/// Lowers [`watched_peak`] to the live bytes now, and returns them.
pub fn reset_watched_peak() -> i64 {
    let live = LIVE_BYTES.load(Relaxed);
    WATCHED_PEAK.store(live, Relaxed);
    live
}

/// Raises [`watched_peak`] to `bytes` if below: an enclosing `measure_process`'s
/// peak, kept across a nested one that lowered it.
pub fn raise_watched_peak(bytes: i64) {
    WATCHED_PEAK.fetch_max(bytes, Relaxed);
}

/// The highest published live bytes since [`reset_watched_peak`].
pub fn watched_peak() -> i64 {
    WATCHED_PEAK.load(Relaxed)
}
