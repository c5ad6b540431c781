//! Per-thread state: the re-entrancy guard, counters, size-class histograms and the
//! site table.
//!
//! The hot path reaches it through one `const`-initialised thread-local without a
//! destructor (a plain `fs:`-relative access, no lazy-init check). The state itself is
//! created by the thread's first recorded allocation, in cold code, under the guard;
//! a second thread-local, which does have a destructor, merges and frees it when the
//! thread exits (or a pthread key's destructor, for a thread that made its state
//! after its thread-locals' destructors ran). A report also reads the states of
//! threads still running (see `registry`). The main thread's destructors run only
//! if it calls `exit` (returning from `main` does), before the `atexit` handlers:
//! what those allocate afterwards counts as late.

use super::control::MAX_PHASES;
use super::door::Door;
use super::log_linear::SIZE_BUCKETS;
use super::site_table::SiteTable;
use super::size_class::{NUM_CLASSES, Request, SMALL_REQUEST_MAX, SMALL_REQUESTS};
use std::cell::Cell;
use std::ptr::{self, null_mut};
use std::sync::atomic::{
    AtomicPtr, AtomicU64, AtomicUsize,
    Ordering::{AcqRel, Acquire, Relaxed, Release},
};

/// Initial number of slots in a thread's site table.
pub const INITIAL_SLOTS: usize = 256;
/// Largest site table; when it fills up its contents go to the global table.
pub const MAX_SLOTS: usize = 1 << 16;
const MAX_RETIRED: usize = 16;

/// Class slots of the per-class arrays: class indices are stored as `u8`, so with 256
/// slots every index is in bounds by construction (only the first
/// [`NUM_CLASSES`] are ever counted).
pub const CLASS_SLOTS: usize = 256;
const _: () = assert!(NUM_CLASSES <= CLASS_SLOTS);

/// Counters of one phase on one thread, together so that one base address serves an
/// allocation's or free's counters. Allocation and free counts and the bytes of small
/// blocks are per class (or per requested size) only: totals follow from them.
pub struct PhaseCounters {
    /// Allocations (`alloc`, `alloc_zeroed`) per size class, but for those counted
    /// in `small_allocs`.
    pub allocs: [AtomicU64; CLASS_SLOTS],
    /// Frees per size class.
    pub freed: [AtomicU64; CLASS_SLOTS],
    /// Requested bytes of allocations and reallocs (new size), but for those counted
    /// in `small_allocs`.
    pub bytes_requested: AtomicU64,
    /// Blocks freed before this thread's next allocation.
    pub temporaries: AtomicU64,
    /// Real bytes of large blocks (above 14336 bytes) allocated.
    pub large_bytes_allocated: AtomicU64,
    /// Real bytes of large blocks freed.
    pub large_bytes_freed: AtomicU64,
    /// `realloc` calls.
    pub reallocs: AtomicU64,
    /// Real bytes of the new blocks of reallocs.
    pub realloc_bytes_allocated: AtomicU64,
    /// Real bytes of the old blocks of reallocs.
    pub realloc_bytes_freed: AtomicU64,
    /// Stacks captured in `sample` mode.
    pub sampled: AtomicU64,
    /// Allocations of small requests (`small_request`: 8 to 1024 bytes, aligned to
    /// at most 8; nearly all of them) per requested size. One counter per
    /// allocation instead of three: their size class, requested-size bucket and
    /// requested bytes follow from the size (`SMALL_REQUESTS`), so they are not
    /// counted again in `allocs`, `bytes_requested` or `ThreadState::requested`.
    pub small_allocs: [AtomicU64; SMALL_REQUEST_MAX + 1],
}

/// The tracer's own allocations, made under the re-entrancy guard and not recorded
/// as the program's. Kept so that totals can be reconciled with jemalloc's.
pub struct OwnCounters {
    /// Allocations (and moving reallocs) by the tracer.
    pub allocs: AtomicU64,
    /// Their requested bytes.
    pub bytes: AtomicU64,
    /// Their size classes.
    pub classes: [AtomicU64; NUM_CLASSES],
}

/// Everything one thread records.
#[repr(C)]
pub struct ThreadState {
    // Owner-only fields, first: they share a cache line.
    /// The block of this thread's latest allocation, until freed or superseded, in
    /// `sites` mode; in `sample` mode, the latest sampled block, which is the latest
    /// allocation while `sampled_left` says so, so that temporaries are counted among
    /// sampled blocks. Not kept in `count` mode. Written by the owner
    /// with relaxed stores (plain moves), and cleared by the cold side from another
    /// thread when the mode changes or recording resumes (a block recorded before a
    /// stretch in `count` mode, which does not keep it, is no longer the latest).
    pub last_block: AtomicUsize,
    /// The site of `last_block`, if stacks are recorded.
    pub last_slot: Cell<*const super::site_table::Slot>,
    /// Size-class bytes allocated minus freed since last published to the global
    /// live-bytes estimate, in units of [`LIVE_UNIT`](super::live::LIVE_UNIT) bytes. 16
    /// bits, so that a small block's call adds or subtracts in one instruction and
    /// the overflow flag tells when to publish (see
    /// [`LIVE_PUBLISH_BYTES`](super::live::LIVE_PUBLISH_BYTES)).
    pub live_units: Cell<i16>,
    /// This thread's exact peak while `measure` runs on it.
    pub watch: super::live::Watch,
    /// Allocations left in the current chunk of the countdown to the next sampled
    /// stack (`sample` mode); never 0. See `countdown`.
    pub sample_countdown: Cell<u64>,
    /// The rest of that countdown after this chunk.
    pub sample_rest: Cell<u64>,
    /// The sample interval that countdown was drawn with: how many allocations the
    /// stack it picks stands for (the interval in force then; a new one takes
    /// over with the next draw). 0: drawn under settings that sample no stacks.
    pub sample_drawn: Cell<u64>,
    /// `sample` mode: the whole countdown (`countdown::sample_left`) just after
    /// `last_block` was sampled, or 0. Every allocation and realloc takes one from
    /// it, so while it is unchanged the thread has allocated nothing since, and a
    /// free of `last_block` is a temporary's: checked on the free's cold path, which
    /// a sampled block's free takes anyway (it is followed), so that other frees
    /// and allocations pay nothing for temporaries.
    pub sampled_left: Cell<u64>,
    /// `sample` mode: how many allocations `last_block`'s temporary stands for, in
    /// its phase's count and its site's (the interval its sample was drawn with,
    /// or 1 for a block of a class recorded whole).
    pub sampled_weight: Cell<u64>,
    /// The size of the small request being handed to the inner allocator after it
    /// was recorded (`count` and `sample` modes), to take it back if refused.
    pub pending_size: Cell<usize>,
    /// The control word it was recorded under (its phase).
    pub pending_ctl: Cell<super::control::Control>,
    /// Allocations left in the current chunk of the countdown to the next block
    /// followed to its free; never 0. See `countdown`.
    pub lifetime_countdown: Cell<u64>,
    /// The rest of that countdown after this chunk (`u64::MAX`: none followed).
    pub lifetime_rest: Cell<u64>,
    /// The lifetime interval that countdown was drawn with: how many blocks the
    /// block it picks stands for (0: none followed).
    pub lifetime_drawn: Cell<u64>,
    /// Bytes left in the current chunk of the countdown to the next sampled byte of
    /// heap sampling: a block that takes it to 0 or below may hold that byte. See
    /// `countdown`.
    pub heap_countdown: Cell<i64>,
    /// The rest of that countdown after this chunk (`u64::MAX`: heap sampling off).
    pub heap_rest: Cell<u64>,
    /// The heap sampling interval that countdown was drawn with, which weighs the
    /// block it samples (0: off).
    pub heap_drawn: Cell<u64>,
    /// The interval epoch (`control::interval_epoch`) the sampling countdown was
    /// drawn in; each countdown is redrawn on its own once the epoch moves on.
    pub sample_epoch: Cell<u64>,
    /// The same for the lifetime countdown.
    pub lifetime_epoch: Cell<u64>,
    /// The same for the heap countdown.
    pub heap_epoch: Cell<u64>,
    /// This thread's stack (zeros: no stacks on this thread).
    pub stack: super::stack::StackBounds,
    /// This thread's latest stack walk, which the next one reuses.
    pub trail: super::trail::Trail,
    /// The walks of this thread's sites and the order they came in: the next
    /// site, guessed and checked before any walk.
    pub predictor: super::predict::Predictor,
    /// Stack walks that found the stack pointer outside `stack` (a signal handler on
    /// its own stack, a coroutine): recorded without frames.
    pub foreign_walks: AtomicU64,
    /// This thread's copy of [`SMALL_REQUESTS`]: the hot path, inlined into the
    /// program's crate, reaches that static (another crate's) through the GOT, one
    /// more load per call than reaching the copy from the state pointer it holds.
    pub small_requests: [Request; SMALL_REQUEST_MAX + 1],
    /// xorshift state for the geometric sampling intervals.
    pub rng: Cell<u64>,
    retired: [Cell<*mut SiteTable>; MAX_RETIRED],
    retired_len: Cell<usize>,
    /// Slots of the `retired` tables, for [`ThreadState::table_bytes`] from other
    /// threads (written by the owner only).
    retired_slots: AtomicUsize,

    // Fields other threads read (only while holding the registry lock).
    /// The current site table.
    pub table: AtomicPtr<SiteTable>,
    /// Per-phase counters.
    pub phases: [PhaseCounters; MAX_PHASES],
    /// Reallocs that moved the block, per size class of the new block (jemalloc
    /// counts those as requests in the new class).
    pub moved: [AtomicU64; NUM_CLASSES],
    /// Allocations per requested-size bucket, but for those counted in
    /// `PhaseCounters::small_allocs`.
    pub requested: [AtomicU64; SIZE_BUCKETS],
    /// The tracer's own allocations on this thread.
    pub own: OwnCounters,
}

/// The one thread-local the hot path touches: this thread's state pointer with the
/// re-entrancy guard in its top bit, so that one load and one signed comparison tell
/// the hot path whether to record.
///
/// The guard is set while tracer code runs on this thread: allocations made then are
/// the tracer's own and pass straight through. This is what keeps `backtrace`,
/// `dashmap` and report writing from recursing into the recorder. The state pointer
/// is null before the first recorded allocation and [`DEAD`] after thread exit. (User
/// space addresses never have the top bit set on the 64-bit targets supported.)
pub struct Local {
    word: Cell<*mut ThreadState>,
}

const _: () = assert!(usize::BITS == 64, "the guard bit needs 64-bit addresses");
const GUARD: usize = 1 << 63;

impl Local {
    /// This thread's state when the current call is the program's and must be
    /// recorded: neither null nor DEAD, and the guard not set.
    #[inline(always)]
    pub fn recording_state(&self) -> Option<&ThreadState> {
        let w = self.word.get();
        // Signed: the guard bit makes the word negative; null and DEAD are 0 and 1.
        if (w.addr() as isize) > DEAD.addr() as isize {
            // SAFETY: a live state pointer (not null, not DEAD, guard clear) was set by
            // `thread::init` on this thread and stays valid until this thread's exit
            // hook marks it DEAD.
            Some(unsafe { &*w })
        } else {
            None
        }
    }

    /// True while the tracer's own code runs on this thread.
    #[inline]
    pub fn guard(&self) -> bool {
        self.word.get().addr() & GUARD != 0
    }

    /// Sets or clears the guard; returns its previous value.
    #[inline]
    pub fn replace_guard(&self, on: bool) -> bool {
        let w = self.word.get();
        self.word
            .set(w.map_addr(|a| (a & !GUARD) | if on { GUARD } else { 0 }));
        w.addr() & GUARD != 0
    }

    /// Sets or clears the guard.
    #[inline]
    pub fn set_guard(&self, on: bool) {
        self.replace_guard(on);
    }

    /// This thread's state pointer: null, [`DEAD`] or a live state.
    #[inline]
    pub fn state(&self) -> *mut ThreadState {
        self.word.get().map_addr(|a| a & !GUARD)
    }

    /// Replaces the state pointer, keeping the guard.
    fn set_state(&self, st: *mut ThreadState) {
        let guard = self.word.get().addr() & GUARD;
        self.word.set(st.map_addr(|a| a | guard));
    }
}

/// Marks a thread whose state was merged and freed at exit.
pub const DEAD: *mut ThreadState = ptr::without_provenance_mut(1);

thread_local! {
    static LOCAL: Local = const { Local { word: Cell::new(null_mut()) } };
    static EXIT_HOOK: ExitHook = const { ExitHook { exited: Cell::new(None) } };
}

/// Runs `f` with this thread's [`Local`].
#[inline(always)]
pub fn with_local<R>(f: impl FnOnce(&Local) -> R) -> R {
    f(current())
}

/// This thread's [`Local`]. The reference must not leave the current call: the hot
/// path uses it for the duration of one allocator call. (Taking the address this way,
/// instead of running the recorder inside `LocalKey::with`, lets the whole recording
/// path inline into the allocator entry points.)
#[inline(always)]
pub fn current<'a>() -> &'a Local {
    let p = LOCAL.with(|l| l as *const Local);
    // SAFETY: `LOCAL` is a `const`-initialised thread-local without a destructor, so
    // its storage lives as long as the thread, and the caller uses it only within the
    // current allocator call on this thread.
    unsafe { &*p }
}

/// Runs `f` with the re-entrancy guard set: every allocation `f` makes is the
/// tracer's own. Nests.
pub fn guarded<R>(f: impl FnOnce() -> R) -> R {
    struct Reset(bool);
    impl Drop for Reset {
        fn drop(&mut self) {
            with_local(|l| l.set_guard(self.0));
        }
    }
    let _reset = Reset(with_local(|l| l.replace_guard(true)));
    f()
}

/// Hands the thread's state to the cold side when the thread exits: the door's
/// `thread_exited`, set by `init`.
struct ExitHook {
    exited: Cell<Option<unsafe fn(*mut ThreadState)>>,
}

impl Drop for ExitHook {
    fn drop(&mut self) {
        if let Some(exited) = self.exited.get() {
            with_local(|local| exit_state(local, exited));
        }
    }
}

/// The door's `thread_exited` (null until the first thread's `init`), for
/// [`exit_by_key`]: one door per program. Atomics, not `OnceLock`s, here and in
/// [`EXIT_KEY`]: a fork that catches a `OnceLock` mid-set in another thread leaves it
/// set-in-progress in the child, whose next thread would wait on it for good.
static EXITED: AtomicPtr<()> = AtomicPtr::new(null_mut());

/// The door's `thread_exited`, once a thread has set it.
fn exited() -> Option<unsafe fn(*mut ThreadState)> {
    let f = EXITED.load(Acquire);
    // SAFETY: only `init` stores here, a `unsafe fn(*mut ThreadState)` cast to a
    // pointer; function and data pointers have one size on every target this runs on.
    (!f.is_null())
        .then(|| unsafe { std::mem::transmute::<*mut (), unsafe fn(*mut ThreadState)>(f) })
}

/// A pthread key whose value is the thread's state until it is handed over: the
/// net under the exit hook. A state made after the thread's thread-local destructors
/// ran (its first call a free in some pthread key's destructor, say) registers the
/// hook too late for it to run; pthread key destructors still run after that, in
/// rounds, and this one hands the state over. 0 until made; then the key plus 1, or
/// `NO_KEY` if none could be made (the process ran out of keys).
static EXIT_KEY: AtomicU64 = AtomicU64::new(0);
const NO_KEY: u64 = u64::MAX;

/// The exit key as [`EXIT_KEY`] holds it.
fn decode_key(word: u64) -> Option<libc::pthread_key_t> {
    (word != 0 && word != NO_KEY).then(|| (word - 1) as libc::pthread_key_t)
}

/// The exit key, made by the first caller. Two threads that race both make one, and
/// the loser deletes its own.
fn exit_key() -> Option<libc::pthread_key_t> {
    let seen = EXIT_KEY.load(Acquire);
    if seen != 0 {
        return decode_key(seen);
    }
    let mut key: libc::pthread_key_t = 0;
    // SAFETY: `key` is written by the call; `exit_by_key` never unwinds.
    let made = unsafe { libc::pthread_key_create(&mut key, Some(exit_by_key)) } == 0;
    let word = if made { u64::from(key) + 1 } else { NO_KEY };
    match EXIT_KEY.compare_exchange(0, word, AcqRel, Acquire) {
        Ok(_) => made.then_some(key),
        Err(theirs) => {
            if made {
                // SAFETY: the key made above, never set on any thread.
                unsafe { libc::pthread_key_delete(key) };
            }
            decode_key(theirs)
        }
    }
}

/// Hands `local`'s state, if live, to `exited` and marks the thread DEAD. Once per
/// thread, from whichever of the exit hook and the key's destructor comes first.
fn exit_state(local: &Local, exited: unsafe fn(*mut ThreadState)) {
    let state = local.state();
    if state.is_null() || state == DEAD {
        return;
    }
    local.set_guard(true);
    if let Some(key) = decode_key(EXIT_KEY.load(Acquire)) {
        // SAFETY: a key made by `pthread_key_create`; a null value runs no destructor.
        unsafe { libc::pthread_setspecific(key, ptr::null()) };
    }
    // Marked DEAD first: the tracer's own allocations while the state is merged and
    // freed count as a stateless thread's, not in the state being handed over (the
    // cold side owns it from here, and its counts are read before it is freed).
    local.set_state(DEAD);
    // SAFETY: `state` came from `Box::into_raw` in `init` on this thread and was
    // passed to the door's `thread_started`; it is handed over only here, once,
    // and the thread, marked DEAD, never touches it again.
    unsafe { exited(state) };
    local.set_guard(false);
}

/// The exit key's destructor: the thread exits with its state not handed over.
extern "C" fn exit_by_key(_state: *mut libc::c_void) {
    if let Some(exited) = exited() {
        with_local(|local| exit_state(local, exited));
    }
}

/// Sets the exit key of this thread to its new `state`, making the key first.
fn set_exit_key(state: *mut ThreadState) {
    if let Some(key) = exit_key() {
        // SAFETY: a key made by `pthread_key_create` above.
        unsafe { libc::pthread_setspecific(key, state.cast()) };
    }
}

impl ThreadState {
    /// The counters of the current phase.
    #[inline(always)]
    pub fn phase(&self, ctl: super::control::Control) -> &PhaseCounters {
        let offset = ctl.phase_offset();
        debug_assert_eq!(
            offset,
            std::mem::offset_of!(ThreadState, phases) + ctl.phase() * size_of::<PhaseCounters>()
        );
        // SAFETY: the control word's writers set `phase_offset` to the offset of
        // `phases` plus `phase()` (less than MAX_PHASES) times the size of
        // `PhaseCounters`: the offset of an element of `phases` in `ThreadState`.
        unsafe {
            &*std::ptr::from_ref(self)
                .byte_add(offset)
                .cast::<PhaseCounters>()
        }
    }

    /// A state of no thread, for unit tests of what reads and writes one.
    #[cfg(test)]
    pub fn new_for_tests() -> Box<ThreadState> {
        ThreadState::new(Default::default(), 0x1234_5678)
    }

    fn new(stack: super::stack::StackBounds, seed: u64) -> Box<ThreadState> {
        // Zeroed in place: the state is ~210 KiB (`state_size`), too big for the
        // stack of whatever thread happens to allocate first.
        // SAFETY: every field is an integer, a raw pointer, a `Control` (a u64), a
        // `Request` (three u8), a `Trail` (Cells of integers and a bool), or a Cell
        // or atomic of one, or an array of those; all-zero bytes are a valid value
        // for each (an empty trail).
        let mut st = unsafe { Box::<ThreadState>::new_zeroed().assume_init() };
        st.stack = stack;
        st.rng = Cell::new(seed | 1);
        st.small_requests = SMALL_REQUESTS;
        // A word from `control`, so that `phase` finds counters even in this one
        // (`phase` trusts the word's phase offset).
        st.pending_ctl = Cell::new(super::control::load());
        st.table = AtomicPtr::new(Box::into_raw(SiteTable::with_capacity(INITIAL_SLOTS)));
        st
    }

    /// The current site table.
    #[inline(always)]
    pub fn table(&self) -> &SiteTable {
        // SAFETY: `table` always points to a live table: it is replaced only by
        // `grow_table`, which retires the old one (freed by `free_retired` once no
        // other thread can be reading it; the owner reads only the current one),
        // and freed only by `free_tables` when the state itself goes away.
        // `Acquire`, pairing with `grow_table`'s `Release`: a reader on another
        // thread sees the new table's contents (a plain load on x86).
        unsafe { &*self.table.load(Acquire) }
    }

    /// Replaces the site table with one twice as large, or returns false when it is
    /// already at [`MAX_SLOTS`] or the retired list is full. Owner thread, under the
    /// guard.
    pub fn grow_table(&self) -> bool {
        let old = self.table();
        let n = self.retired_len.get();
        if old.capacity() >= MAX_SLOTS || n == MAX_RETIRED {
            return false;
        }
        let bigger = SiteTable::with_capacity(old.capacity() * 2);
        old.move_into(&bigger);
        let old_ptr = self
            .table
            .swap(Box::into_raw(bigger), std::sync::atomic::Ordering::Release);
        // A reader may still be walking the old table: keep it until no reader can
        // be (`free_retired`) or the state is freed.
        self.retired[n].set(old_ptr);
        self.retired_len.set(n + 1);
        self.retired_slots
            .store(self.retired_slots.load(Relaxed) + old.capacity(), Relaxed);
        // The last block's slot moved; temporaries are then credited to the phase only.
        self.last_slot.set(ptr::null());
        true
    }

    /// How many bytes this thread's site tables take, current and retired (each
    /// table is twice the one it replaced, so the retired ones hold fewer slots
    /// together than the current one). For the cold side's account of the tracer's
    /// memory, from any thread under the registry lock (the owner's `retired` list is
    /// not read).
    pub fn table_bytes(&self) -> usize {
        SiteTable::bytes(self.table().capacity() + self.retired_slots.load(Relaxed))
    }

    /// True when tables [`grow_table`](ThreadState::grow_table) replaced are not
    /// freed yet. Owner thread.
    pub fn has_retired(&self) -> bool {
        self.retired_len.get() != 0
    }

    /// Frees the tables [`grow_table`](ThreadState::grow_table) replaced. Owner thread.
    ///
    /// # Safety
    /// No other thread may be reading this state's tables, or start to before the
    /// call returns: the registry lock, which every reader holds, must be held.
    pub unsafe fn free_retired(&self) {
        for t in &self.retired[..self.retired_len.get()] {
            // SAFETY: each came from `Box::into_raw` in `grow_table` and appears once;
            // the owner reads only the current table, and the caller rules out
            // every other reader.
            drop(unsafe { Box::from_raw(t.replace(null_mut())) });
        }
        self.retired_len.set(0);
        self.retired_slots.store(0, Relaxed);
    }

    /// Frees the current and retired tables.
    ///
    /// # Safety
    /// No other thread may read this state's tables during or after the call (the
    /// registry lock must be held and the state unregistered), and the owner must
    /// not record into it again.
    pub unsafe fn free_tables(&self) {
        // SAFETY: the caller rules out every other reader.
        unsafe { self.free_retired() };
        let current = self.table.swap(null_mut(), Relaxed);
        if !current.is_null() {
            // SAFETY: it came from `Box::into_raw`, and is no longer the table.
            drop(unsafe { Box::from_raw(current) });
        }
        // SAFETY: the owner does not record into this state again.
        unsafe { self.predictor.free() };
    }

    /// The next value of this thread's xorshift64* generator.
    pub fn next_random(&self) -> u64 {
        let mut x = self.rng.get();
        let r = xorshift_step(&mut x);
        self.rng.set(x);
        r
    }
}

/// Advances an xorshift64* state (never 0) and returns its next output.
pub fn xorshift_step(x: &mut u64) -> u64 {
    *x ^= *x >> 12;
    *x ^= *x << 25;
    *x ^= *x >> 27;
    x.wrapping_mul(0x2545_f491_4f6c_dd1d)
}

/// A geometric interval with the given mean (>= 1), from one random word: the
/// number of allocations up to and including the next sampled one, when each is
/// sampled independently with probability 1/mean. This makes every sampled
/// allocation stand for exactly `mean` allocations in expectation, whatever the
/// program's allocation pattern; and since the distribution has no memory, a
/// countdown may be redrawn at any moment without biasing that.
pub fn geometric(random: u64, mean: u64) -> u64 {
    if mean <= 1 {
        return 1;
    }
    // u in (0, 1]
    let u = ((random >> 11) + 1) as f64 / (1u64 << 53) as f64;
    let p = 1.0 / mean as f64;
    (u.ln() / (-p).ln_1p()).ceil().max(1.0) as u64
}

/// Creates this thread's state, hands it to the door's `thread_started` and arms
/// the exit hook. Cold; runs under the guard so that its own allocations pass
/// through.
#[cold]
#[inline(never)]
pub fn init<D: Door>(local: &Local) -> *mut ThreadState {
    let was = local.replace_guard(true);
    let seed = (local as *const Local as u64) ^ super::clock::now_ns().rotate_left(32);
    let state = Box::into_raw(ThreadState::new(super::stack::current_stack_bounds(), seed));
    // SAFETY: `state` was just created and is not shared yet.
    let st = unsafe { &*state };
    super::countdown::redraw(st);
    local.set_state(state);
    // Registering the destructor may allocate (it does not with glibc); the guard
    // makes that harmless. A thread already past its thread-locals' destructors
    // hands its state over from the exit key's instead.
    let _ = EXIT_HOOK.try_with(|h| h.exited.set(Some(D::thread_exited)));
    let exited: unsafe fn(*mut ThreadState) = D::thread_exited;
    EXITED.store(exited as *mut (), Release);
    set_exit_key(state);
    D::thread_started(state);
    local.set_guard(was);
    state
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exit_key_is_one_key_for_every_thread() {
        // Key 0 is a valid key: it is stored as 1, and "none could be made" apart.
        assert_eq!(decode_key(0), None);
        assert_eq!(decode_key(1), Some(0));
        assert_eq!(decode_key(43), Some(42));
        assert_eq!(decode_key(NO_KEY), None);
        let keys: Vec<Option<libc::pthread_key_t>> = (0..8)
            .map(|_| std::thread::spawn(exit_key))
            .collect::<Vec<_>>()
            .into_iter()
            .map(|t| t.join().unwrap())
            .collect();
        assert!(keys[0].is_some());
        assert!(keys.iter().all(|k| *k == keys[0]), "{keys:?}");
        assert_eq!(decode_key(EXIT_KEY.load(Acquire)), keys[0]);
    }

    #[test]
    fn state_size() {
        // What each recording thread costs, as the comment in `ThreadState::new` says.
        let kib = size_of::<ThreadState>() / 1024;
        assert!((200..220).contains(&kib), "{kib} KiB");
    }

    #[test]
    fn replaced_tables_count_until_freed() {
        let st = ThreadState::new_for_tests();
        let bytes = SiteTable::bytes;
        assert_eq!(st.table_bytes(), bytes(INITIAL_SLOTS));
        assert!(st.grow_table() && st.grow_table());
        assert_eq!(st.table().capacity(), 4 * INITIAL_SLOTS);
        assert_eq!(st.table_bytes(), bytes(7 * INITIAL_SLOTS));
        // SAFETY: no other thread knows this state.
        unsafe { st.free_retired() };
        assert_eq!(st.table_bytes(), bytes(4 * INITIAL_SLOTS));
        assert!(st.grow_table());
        assert_eq!(st.table_bytes(), bytes(12 * INITIAL_SLOTS));
        // SAFETY: as above; the state is not recorded into again.
        unsafe { st.free_tables() };
    }

    #[test]
    fn geometric_has_the_right_mean() {
        let st = ThreadState::new_for_tests();
        let n = 200_000u64;
        for mean in [1u64, 7, 64, 1000] {
            let total: u64 = (0..n).map(|_| geometric(st.next_random(), mean)).sum();
            let got = total as f64 / n as f64;
            assert!(
                (got - mean as f64).abs() <= 0.02 * mean as f64 + 0.01,
                "mean {mean}: got {got}"
            );
        }
        // SAFETY: the state is local to this test.
        unsafe { st.free_tables() };
    }
}
