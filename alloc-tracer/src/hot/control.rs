//! The one word every allocation reads: mode, stack depth, pause flag, heap sampling
//! flag and phase.
//!
//! Packing them into a single `AtomicU64` costs one relaxed load (a plain `mov` on
//! x86_64) per allocation. Writers (mode changes, phase guards, pause) are rare and
//! use read-modify-write; no allocation ever writes it. Writers also keep derived
//! bits ([`RECORDING`], [`UNINIT`], [`STACKS`], [`NEEDS_WORK`], [`COUNTS`],
//! [`COUNT_ONLY`]), so that the hot path decides between pass-through, recording and
//! stack walks with one bit test each, and the current phase's counter offset.

use std::sync::atomic::{
    AtomicU64,
    Ordering::{Acquire, Relaxed, Release},
};

/// Nothing decided yet: the first allocation reads the environment.
pub const MODE_UNINIT: u8 = 0;
/// Pure pass-through.
pub const MODE_OFF: u8 = 1;
/// Totals and size-class histograms.
pub const MODE_COUNT: u8 = 2;
/// `MODE_COUNT` plus every allocation attributed to its call stack.
pub const MODE_SITES: u8 = 3;
/// `MODE_COUNT` plus one allocation in N (on average) attributed to its call stack.
pub const MODE_SAMPLE: u8 = 4;

/// Phases that can be told apart; later names share the last slot.
pub const MAX_PHASES: usize = 16;
const _: () = assert!(MAX_PHASES.is_power_of_two());

// The word: bits 0 to 31 the fields (mode bits 0-7, depth 8-15, pause 16, heap
// sampling 23, phase 24-27, as below) and the derived bits, each tested alone with a `test` and an
// immediate (which fuses with the branch after it; a `bt` of a bit above 31 would
// not); bits 32 to 63 a derived field, the byte offset of the current phase's
// counters in `ThreadState` (the offset of `phases` plus the phase's element), so
// that the hot path finds them with a shift and an add.
const OFFSET_SHIFT: u32 = 32;

/// Derived bit: mode is `count` or above and recording is not paused.
pub const RECORDING: u64 = 1 << 17;
/// Derived bit: no mode chosen yet (the first allocation reads the environment).
pub const UNINIT: u64 = 1 << 18;
/// Derived bit: mode is `sites` or `sample`, so stacks may be walked.
pub const STACKS: u64 = 1 << 19;
/// Derived bit: `RECORDING` or `UNINIT`, so an allocation cannot just pass through.
pub const NEEDS_WORK: u64 = 1 << 20;
/// Derived bit: mode is `count` or `sample` (read), so an allocation's stack is
/// walked only when sampled.
pub const COUNTS: u64 = 1 << 21;
/// Derived bit: mode is `count`.
pub const COUNT_ONLY: u64 = 1 << 22;
/// Field bit: heap sampling is on (blocks sampled by bytes, `heap`).
const HEAP: u64 = 1 << 23;
/// Derived bit: blocks may be followed to their free (`STACKS`, or `HEAP` in a
/// recording mode), so a free must look its block up in `followed`.
pub const FOLLOWS: u64 = 1 << 28;
/// Derived bit: mode is `sites`, so every allocation's stack is walked and every
/// recorded free checks for a temporary on its common path (`sample` mode checks
/// only its followed blocks' frees, on their cold path).
pub const EVERY_STACK: u64 = 1 << 29;
/// Derived bit: `FOLLOWS` without `EVERY_STACK` (`sample`, `count` with heap
/// sampling): a recorded free looks its block up in `followed` and checks for
/// nothing else. Its own bit, so that the free's entry reaches these modes' path
/// with one test.
pub const FOLLOWS_ONLY: u64 = 1 << 30;
const DERIVED: u64 = RECORDING
    | UNINIT
    | STACKS
    | NEEDS_WORK
    | COUNTS
    | COUNT_ONLY
    | FOLLOWS
    | EVERY_STACK
    | FOLLOWS_ONLY;

const PHASES_OFFSET: u64 = std::mem::offset_of!(super::thread::ThreadState, phases) as u64;
const PHASE_STRIDE: u64 = size_of::<super::thread::PhaseCounters>() as u64;
const _: () = assert!(PHASES_OFFSET + MAX_PHASES as u64 * PHASE_STRIDE <= u32::MAX as u64);

/// The control word for the fields `w` (bits 0-31: mode, depth, pause, heap, phase),
/// with the derived bits and the phase offset.
const fn with_derived(w: u64) -> u64 {
    let w = w & !DERIVED & ((1 << OFFSET_SHIFT) - 1);
    let phase = (w >> 24) & (MAX_PHASES as u64 - 1);
    let phase_offset = PHASES_OFFSET + phase * PHASE_STRIDE;
    let mode = w as u8;
    let recording = if mode >= MODE_COUNT && (w >> 16) & 1 == 0 {
        RECORDING
    } else {
        0
    };
    let uninit = if mode == MODE_UNINIT { UNINIT } else { 0 };
    let stacks = if mode == MODE_SITES || mode == MODE_SAMPLE {
        STACKS
    } else {
        0
    };
    let needs_work = if recording != 0 || uninit != 0 {
        NEEDS_WORK
    } else {
        0
    };
    let counts = if mode == MODE_COUNT || mode == MODE_SAMPLE {
        COUNTS
    } else {
        0
    };
    let count_only = if mode == MODE_COUNT { COUNT_ONLY } else { 0 };
    let every_stack = if mode == MODE_SITES { EVERY_STACK } else { 0 };
    let follows = if stacks != 0 || (mode >= MODE_COUNT && w & HEAP != 0) {
        FOLLOWS
    } else {
        0
    };
    let follows_only = if follows != 0 && every_stack == 0 {
        FOLLOWS_ONLY
    } else {
        0
    };
    w | recording
        | follows
        | uninit
        | stacks
        | needs_work
        | counts
        | count_only
        | every_stack
        | follows_only
        | (phase_offset << OFFSET_SHIFT)
}

static CONTROL: AtomicU64 = AtomicU64::new(with_derived(0));
/// Mean interval, in allocations, between sampled stacks (`sample` mode, which
/// follows each sampled block to its free).
static SAMPLE_INTERVAL: AtomicU64 = AtomicU64::new(0);
/// Mean interval, in allocations, between blocks followed to their free for
/// lifetimes (`sites` mode; 0: none).
static LIFETIME_INTERVAL: AtomicU64 = AtomicU64::new(0);
/// Mean interval, in bytes, between sampled bytes of heap sampling (0: off).
static HEAP_INTERVAL: AtomicU64 = AtomicU64::new(0);

/// A decoded copy of the control word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Control(u64);

impl Control {
    /// The fields (bits 0-31: mode, depth, pause, heap, phase) and derived bits.
    #[inline(always)]
    fn fields(self) -> u64 {
        self.0 & ((1 << OFFSET_SHIFT) - 1)
    }
    /// True when the derived bit `bit` is set: a one-bit test of the word.
    #[inline(always)]
    fn has(self, bit: u64) -> bool {
        self.0 & bit != 0
    }
    /// The tracing mode (`MODE_*`).
    #[inline(always)]
    pub fn mode(self) -> u8 {
        self.fields() as u8
    }
    /// Stack depth for `sites` and `sample` modes.
    #[inline(always)]
    pub fn depth(self) -> usize {
        ((self.fields() >> 8) & 0xff) as usize
    }
    /// True while recording is paused.
    #[inline(always)]
    pub fn paused(self) -> bool {
        (self.fields() >> 16) & 1 == 1
    }
    /// The current phase id.
    #[inline(always)]
    pub fn phase(self) -> usize {
        // Masked so that indexing per-phase arrays never needs a bounds check.
        ((self.fields() >> 24) as usize) & (MAX_PHASES - 1)
    }
    /// Byte offset of the current phase's counters in `ThreadState`: always the
    /// offset of `phases` plus `phase() * size_of::<PhaseCounters>()`, as every writer
    /// goes through `with_derived`.
    #[inline(always)]
    pub fn phase_offset(self) -> usize {
        (self.0 >> OFFSET_SHIFT) as usize
    }
    /// True when allocations must be recorded now.
    #[inline(always)]
    pub fn recording(self) -> bool {
        self.has(RECORDING)
    }
    /// True in `sites` and `sample` modes.
    #[inline(always)]
    pub fn stacks(self) -> bool {
        self.has(STACKS)
    }
    /// True in `sites` mode: every allocation's stack is walked, and every recorded
    /// free checks whether it frees the thread's latest block (a temporary).
    #[inline(always)]
    pub fn every_stack(self) -> bool {
        self.has(EVERY_STACK)
    }
    /// True when blocks may be followed to their free: a recorded free must then
    /// look its block up in `followed` (`sites` and `sample` modes, and `count`
    /// with heap sampling).
    #[inline(always)]
    pub fn follows(self) -> bool {
        self.has(FOLLOWS)
    }
    /// True when blocks may be followed and not every stack is walked: `follows`
    /// and not `every_stack`.
    #[inline(always)]
    pub fn follows_only(self) -> bool {
        self.has(FOLLOWS_ONLY)
    }
    /// True when heap sampling is on.
    #[inline(always)]
    pub fn heap(self) -> bool {
        self.has(HEAP)
    }
    /// For a word that [`alloc_needs_work`](Self::alloc_needs_work): true when the
    /// call is recorded without a stack walk, except in `sample` mode when one is
    /// due (modes `count` and `sample`, mode read).
    #[inline(always)]
    pub fn counts_without_walk(self) -> bool {
        self.has(COUNTS)
    }
    /// For a word that [`alloc_needs_work`](Self::alloc_needs_work): true in `count`
    /// mode.
    #[inline(always)]
    pub fn count_only(self) -> bool {
        self.has(COUNT_ONLY)
    }
    /// True when an allocation cannot simply pass through: it must be recorded, or
    /// the mode must be read from the environment first.
    #[inline(always)]
    pub fn alloc_needs_work(self) -> bool {
        self.has(NEEDS_WORK)
    }
}

/// The control word as of now.
#[inline(always)]
pub fn load() -> Control {
    Control(CONTROL.load(Relaxed))
}

/// Changes the fields (`f` gets and returns bits 0-31: mode, depth, pause, heap,
/// phase)
/// and derives the rest. Returns the previous word.
fn update(f: impl Fn(u64) -> u64) -> Control {
    let old = CONTROL
        .fetch_update(Relaxed, Relaxed, |w| {
            Some(with_derived(f(Control(w).fields())))
        })
        .unwrap_or_else(|w| w);
    Control(old)
}

/// The fields set by [`set_mode`] and [`init_mode`]: mode, depth and heap flag.
fn mode_fields(f: u64, mode: u8, depth: usize, heap: bool) -> u64 {
    let depth = depth.min(super::stack::MAX_DEPTH - super::sites::OWN_FRAMES) as u64;
    (f & !0xffff & !HEAP) | mode as u64 | (depth << 8) | if heap { HEAP } else { 0 }
}

/// Sets mode, depth and heap sampling, keeping pause and phase. Returns the
/// previous word.
pub fn set_mode(mode: u8, depth: usize, heap: bool) -> Control {
    update(|w| mode_fields(w, mode, depth, heap))
}

/// Sets mode, depth and heap sampling only if no mode was chosen yet; true when it
/// did.
pub fn init_mode(mode: u8, depth: usize, heap: bool) -> bool {
    CONTROL
        .fetch_update(Relaxed, Relaxed, |w| {
            let f = Control(w).fields();
            (f as u8 == MODE_UNINIT).then_some(with_derived(mode_fields(f, mode, depth, heap)))
        })
        .is_ok()
}

/// Sets the pause flag. Returns the previous word.
pub fn set_paused(paused: bool) -> Control {
    update(|w| (w & !(1 << 16)) | ((paused as u64) << 16))
}

/// Sets the current phase id. Returns the previous word.
pub fn set_phase(phase: usize) -> Control {
    let phase = phase.min(MAX_PHASES - 1) as u64;
    update(|w| (w & !(0xf << 24)) | (phase << 24))
}

/// Sampling intervals: stacks (`sample` mode, allocations), lifetimes
/// (allocations) and heap sampling (bytes, 0: off).
pub fn set_intervals(sample: u64, lifetime: u64, heap: u64) {
    SAMPLE_INTERVAL.store(sample, Relaxed);
    LIFETIME_INTERVAL.store(lifetime, Relaxed);
    HEAP_INTERVAL.store(heap, Relaxed);
    // Release: a thread that sees the new epoch (Acquire) sees these intervals.
    INTERVAL_EPOCH.fetch_add(1, Release);
}

/// Bumped whenever the intervals are set: a thread whose countdowns were drawn under
/// another epoch redraws them (`countdown`).
static INTERVAL_EPOCH: AtomicU64 = AtomicU64::new(0);

/// The current interval epoch.
#[inline]
pub fn interval_epoch() -> u64 {
    INTERVAL_EPOCH.load(Acquire)
}

/// Mean allocations between sampled stacks in `sample` mode.
#[inline]
pub fn sample_interval() -> u64 {
    SAMPLE_INTERVAL.load(Relaxed).max(1)
}

/// The sample interval as published: 0 when the settings published with it sample
/// no stacks (`off`, `count`, `sites`), so that a countdown drawn then is told from
/// one drawn under `sample:1`.
#[inline]
pub fn sample_interval_published() -> u64 {
    SAMPLE_INTERVAL.load(Relaxed)
}

/// Mean allocations between blocks followed to their free; 0 = none followed.
#[inline]
pub fn lifetime_interval() -> u64 {
    LIFETIME_INTERVAL.load(Relaxed)
}

/// Mean bytes between sampled bytes of heap sampling; 0 = off.
#[inline]
pub fn heap_interval() -> u64 {
    HEAP_INTERVAL.load(Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_round_trip() {
        let w = Control(with_derived(
            MODE_SITES as u64 | (16 << 8) | (1 << 16) | (5 << 24),
        ));
        assert_eq!(w.mode(), MODE_SITES);
        assert_eq!(w.depth(), 16);
        assert!(w.paused());
        assert_eq!(w.phase(), 5);
        assert!(!w.recording());
    }

    #[test]
    fn derived_bits_follow_the_fields() {
        let w = Control(with_derived(
            MODE_SITES as u64 | (16 << 8) | (1 << 16) | (5 << 24),
        ));
        assert!(!w.recording());
        assert!(!w.alloc_needs_work());
        assert!(w.stacks() && w.every_stack() && !w.follows_only());
        let w = Control(with_derived(w.fields() & !(1 << 16)));
        assert!(w.recording() && w.alloc_needs_work() && !w.counts_without_walk());
        for mode in [MODE_COUNT, MODE_SAMPLE] {
            let w = Control(with_derived(mode as u64));
            assert!(w.alloc_needs_work() && w.counts_without_walk());
            assert_eq!(w.count_only(), mode == MODE_COUNT);
            assert_eq!(w.stacks(), mode == MODE_SAMPLE);
            assert!(!w.every_stack());
            assert_eq!(w.follows_only(), mode == MODE_SAMPLE);
            assert_eq!(w.follows(), mode == MODE_SAMPLE);
            let heap = Control(with_derived(mode_fields(0, mode, 16, true)));
            assert!(heap.heap() && heap.follows() && heap.follows_only() && heap.depth() == 16);
            assert_eq!(heap.mode(), mode);
        }
        assert!(!Control(with_derived(mode_fields(0, MODE_OFF, 16, true))).follows());
        assert!(!Control(with_derived(MODE_UNINIT as u64)).counts_without_walk());
        let w = Control(with_derived(MODE_OFF as u64));
        assert!(!w.recording() && !w.alloc_needs_work() && !w.stacks() && !w.every_stack());
        assert!(Control(with_derived(0)).alloc_needs_work());
        for phase in 0..MAX_PHASES as u64 {
            let w = Control(with_derived(MODE_COUNT as u64 | (phase << 24)));
            assert_eq!(
                w.phase_offset(),
                (PHASES_OFFSET + w.phase() as u64 * PHASE_STRIDE) as usize
            );
        }
    }
}
