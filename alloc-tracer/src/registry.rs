//! Cold path: the list of live thread states, and the global tables that exited
//! threads merge into.
//!
//! Every function here runs under the re-entrancy guard (its allocations are the
//! tracer's own), but `forget_latest_blocks`, which allocates nothing, and may block
//! on the registry lock; none runs per allocation. The
//! lock makes thread exit, table flushes and snapshots mutually exclusive, so a
//! snapshot counts every thread exactly once: either live (read in place) or merged.

use crate::hot::caller;
use crate::hot::control::MAX_PHASES;
use crate::hot::live;
use crate::hot::log_linear::{self, SIZE_BUCKETS, SIZE_SUB_BITS};
use crate::hot::site_table::{SiteTable, Slot};
use crate::hot::size_class::{LAST_SMALL, NUM_CLASSES, SMALL_REQUESTS, class_bytes};
use crate::hot::thread::{PhaseCounters, ThreadState};
use crate::site_map::SiteMap;
pub use crate::site_map::{FOLDED_FRAME, SiteId};
use alloc_tracer_format::manifest::MemoryParts;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{LazyLock, Mutex, MutexGuard};

/// Counters of one site, weighted as recorded (see `hot::site_table::Slot`): in
/// `sample` mode, each sampled stack counts for the allocations it stands for.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct SiteCounts {
    /// Allocations.
    pub allocs: u64,
    /// Reallocs.
    pub reallocs: u64,
    /// Requested bytes.
    pub bytes_requested: u64,
    /// Real block bytes.
    pub bytes_allocated: u64,
    /// Blocks freed before their thread's next allocation.
    pub temporaries: u64,
    /// Stacks sampled in `sample` mode (raw; 0 where every stack was recorded).
    pub samples: u64,
}

impl SiteCounts {
    /// Adds another thread's (or stack's) counts of the same site.
    pub(crate) fn add(&mut self, o: &SiteCounts) {
        self.allocs += o.allocs;
        self.reallocs += o.reallocs;
        self.bytes_requested += o.bytes_requested;
        self.bytes_allocated += o.bytes_allocated;
        self.temporaries += o.temporaries;
        self.samples += o.samples;
    }

    /// The stacks recorded here: every call's where none was sampled (`sites`
    /// mode), else the samples (in a row recorded in both modes, a run switched
    /// between them, the samples only).
    pub fn stacks(&self) -> u64 {
        if self.samples > 0 {
            self.samples
        } else {
            self.allocs + self.reallocs
        }
    }
}

/// Totals of one phase.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct PhaseTotals {
    /// `alloc` and `alloc_zeroed` calls.
    pub allocs: u64,
    /// `dealloc` calls.
    pub frees: u64,
    /// `realloc` calls.
    pub reallocs: u64,
    /// Requested bytes of allocations and reallocs.
    pub bytes_requested: u64,
    /// Size-class bytes of allocations and reallocs.
    pub bytes_allocated: u64,
    /// Size-class bytes freed (frees and the old block of reallocs).
    pub bytes_freed: u64,
    /// Blocks freed before their thread's next allocation: exact in `sites` mode;
    /// in `sample:N` an estimate, each sampled one counted for the blocks it
    /// stands for (N, or 1 in the classes recorded whole); 0 in `count` mode.
    pub temporaries: u64,
    /// Stacks captured in `sample` mode (drawn, and the blocks of the classes it
    /// records whole).
    pub sampled: u64,
}

impl PhaseTotals {
    const ZERO: PhaseTotals = PhaseTotals {
        allocs: 0,
        frees: 0,
        reallocs: 0,
        bytes_requested: 0,
        bytes_allocated: 0,
        bytes_freed: 0,
        temporaries: 0,
        sampled: 0,
    };

    /// Adds one thread's counters of one phase, deriving counts and small-block
    /// bytes from its per-class counts.
    fn add_live(&mut self, c: &PhaseCounters) {
        let (n, small_bytes) = class_totals(&c.allocs[..NUM_CLASSES]);
        self.allocs += n;
        self.bytes_allocated += small_bytes
            + c.large_bytes_allocated.load(Relaxed)
            + c.realloc_bytes_allocated.load(Relaxed);
        let (n, small_bytes) = class_totals(&c.freed[..NUM_CLASSES]);
        self.frees += n;
        self.bytes_freed +=
            small_bytes + c.large_bytes_freed.load(Relaxed) + c.realloc_bytes_freed.load(Relaxed);
        self.reallocs += c.reallocs.load(Relaxed);
        self.bytes_requested += c.bytes_requested.load(Relaxed);
        self.temporaries += c.temporaries.load(Relaxed);
        self.sampled += c.sampled.load(Relaxed);
    }
}

/// Count over all classes, and bytes over the small ones (large blocks are
/// page-rounded, so their bytes are counted apart).
fn class_totals(counts: &[AtomicU64]) -> (u64, u64) {
    counts
        .iter()
        .enumerate()
        .fold((0, 0), |(n, bytes), (k, c)| {
            let c = c.load(Relaxed);
            let small = if k <= LAST_SMALL {
                c * class_bytes(k) as u64
            } else {
                0
            };
            (n + c, bytes + small)
        })
}

/// Every counter of the tracer, summed over threads. Plain arrays, no heap, so a
/// program can take one without allocating.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Counts {
    /// Totals per phase id.
    pub phases: [PhaseTotals; MAX_PHASES],
    /// Allocations (`alloc`, `alloc_zeroed`) per phase id and size-class index.
    pub classes: [[u64; NUM_CLASSES]; MAX_PHASES],
    /// Reallocs that moved the block, per size-class index of the new block.
    pub moved: [u64; NUM_CLASSES],
    /// Allocations and reallocs per requested-size bucket; [`Counts::requested_sizes`]
    /// gives each bucket's sizes.
    pub requested: [u64; SIZE_BUCKETS],
    /// The tracer's own allocations (moving reallocs included).
    pub own_allocs: u64,
    /// Their requested bytes.
    pub own_bytes: u64,
    /// Their size classes.
    pub own_classes: [u64; NUM_CLASSES],
    /// Allocations made by threads after their state was merged at exit (by other
    /// thread-local destructors); counted here only.
    pub late_allocs: u64,
    /// Frees made after the thread's state was merged at exit.
    pub late_frees: u64,
    /// Threads that recorded anything.
    pub threads: u64,
    /// Stack walks made off the thread's known stack (recorded without frames).
    pub foreign_walks: u64,
    /// The highest global live bytes so far, as the report's `peak_live_bytes` gives
    /// them: exact to within 256 KiB a thread recording at once (each publishes its
    /// drift past that).
    pub peak_live_bytes: i64,
}

impl Default for Counts {
    fn default() -> Self {
        Counts::ZERO
    }
}

impl Counts {
    /// All zeros, built at compile time: a static of it needs no initialising code,
    /// which would build its tens of kilobytes on some thread's stack.
    const ZERO: Counts = Counts {
        phases: [PhaseTotals::ZERO; MAX_PHASES],
        classes: [[0; NUM_CLASSES]; MAX_PHASES],
        moved: [0; NUM_CLASSES],
        requested: [0; SIZE_BUCKETS],
        own_allocs: 0,
        own_bytes: 0,
        own_classes: [0; NUM_CLASSES],
        late_allocs: 0,
        late_frees: 0,
        threads: 0,
        foreign_walks: 0,
        peak_live_bytes: 0,
    };

    fn add_live(&mut self, st: &ThreadState) {
        for (p, c) in st.phases.iter().enumerate() {
            self.phases[p].add_live(c);
            add_all(&mut self.classes[p], &c.allocs);
            self.add_small_allocs(p, c);
        }
        add_all(&mut self.moved, &st.moved);
        add_all(&mut self.requested, &st.requested);
        self.own_allocs += st.own.allocs.load(Relaxed);
        self.own_bytes += st.own.bytes.load(Relaxed);
        add_all(&mut self.own_classes, &st.own.classes);
        self.threads += 1;
        self.foreign_walks += st.foreign_walks.load(Relaxed);
    }

    /// Allocations of small requests, counted per requested size by the hot path:
    /// to their phase's totals, their size classes and requested-size buckets.
    fn add_small_allocs(&mut self, phase: usize, c: &PhaseCounters) {
        for (size, n) in c.small_allocs.iter().enumerate() {
            let n = n.load(Relaxed);
            if n == 0 {
                continue;
            }
            let r = SMALL_REQUESTS[size];
            let t = &mut self.phases[phase];
            t.allocs += n;
            t.bytes_requested += n * size as u64;
            t.bytes_allocated += n * r.usable() as u64;
            self.classes[phase][r.class as usize] += n;
            self.requested[r.bucket as usize] += n;
        }
    }

    /// Allocations and reallocs by requested size: each bucket of `requested` that
    /// counted any, as (smallest size, largest size, count), smallest first. Sizes
    /// below 64 bytes have a bucket each; above, a power of two is split in 32
    /// buckets (under 3.2 % wide); the last bucket holds every size from 63 x 2^42
    /// (just under 2^48) up.
    pub fn requested_sizes(&self) -> impl Iterator<Item = (u64, u64, u64)> + '_ {
        let low = |b: usize| log_linear::bucket_low(b, SIZE_SUB_BITS);
        self.requested
            .iter()
            .enumerate()
            .filter(|&(_, &n)| n > 0)
            .map(move |(b, &n)| {
                let high = if b + 1 == SIZE_BUCKETS {
                    u64::MAX
                } else {
                    low(b + 1) - 1
                };
                (low(b), high, n)
            })
    }

    /// Every field summed over all phases.
    pub fn all_phases(&self) -> PhaseTotals {
        let mut t = PhaseTotals::default();
        for p in &self.phases {
            t.allocs += p.allocs;
            t.frees += p.frees;
            t.reallocs += p.reallocs;
            t.bytes_requested += p.bytes_requested;
            t.bytes_allocated += p.bytes_allocated;
            t.bytes_freed += p.bytes_freed;
            t.temporaries += p.temporaries;
            t.sampled += p.sampled;
        }
        t
    }

    /// Sum of a field over all phases.
    pub fn total(&self, field: impl Fn(&PhaseTotals) -> u64) -> u64 {
        self.phases.iter().map(field).sum()
    }
}

fn add_all(dst: &mut [u64], src: &[AtomicU64]) {
    for (d, s) in dst.iter_mut().zip(src) {
        *d += s.load(Relaxed);
    }
}

/// One thread's totals over all phases, from its own counters.
pub(crate) fn thread_totals(st: &ThreadState) -> PhaseTotals {
    let mut c = Box::new(Counts::default());
    c.add_live(st);
    c.all_phases()
}

/// Live thread states, as addresses (a `*mut` is not `Send`).
static LIVE: Mutex<Vec<usize>> = Mutex::new(Vec::new());

/// Exited threads' counts. Not lazy: an exiting thread may be the first to reach
/// it, on a stack too small for a `Counts` (tens of kilobytes) built in place.
static MERGED_COUNTS: Mutex<Counts> = Mutex::new(Counts::ZERO);
/// Exited threads' and flushed tables' sites. Every use that takes a shard's lock
/// holds the live list's lock ([`live`]), so no thread ever waits on a shard: a
/// fork's `prepare` (which takes the live list first) finds them all free, and the
/// child's unlock (`SiteMap::unlock_all`) takes its fast path, never reaching the
/// parking lot's process-wide table, whose locks a thread that did not come along
/// may have held.
static MERGED_SITES: LazyLock<SiteMap<SiteCounts>> = LazyLock::new(SiteMap::new);

fn live() -> MutexGuard<'static, Vec<usize>> {
    // A panic while holding the lock cannot leave the list inconsistent (push and
    // swap_remove are the only mutations), so poisoning is ignored.
    LIVE.lock().unwrap_or_else(|e| e.into_inner())
}

/// The most thread states live at once so far: a thread that exits publishes what
/// it had not, so only threads recording at the same moment add to the error of the
/// published live bytes.
static MOST_LIVE: AtomicU64 = AtomicU64::new(0);

/// Adds a new thread state to the live list.
pub(crate) fn register(state: *mut ThreadState) {
    let mut live = live();
    live.push(state as usize);
    MOST_LIVE.fetch_max(live.len() as u64, Relaxed);
}

/// The most threads recording at once so far.
pub(crate) fn most_threads_at_once() -> u64 {
    MOST_LIVE.load(Relaxed)
}

/// Forgets every live thread's latest block (`ThreadState::last_block`) when
/// recording resumes or the mode changes: a pause records nothing, and `count` mode
/// does not keep the latest block, so a block recorded before such a stretch must
/// not count as a temporary after it.
pub(crate) fn forget_latest_blocks() {
    for &p in live().iter() {
        // SAFETY: a registered state stays valid while the lock is held: `retire`
        // unregisters it under the lock before freeing it. `last_block` is atomic.
        unsafe { (*(p as *const ThreadState)).last_block.store(0, Relaxed) };
    }
}

fn merge_table(table: &SiteTable) {
    table.for_each_site(|slot, meta, frames| {
        MERGED_SITES.update(SiteId::of_slot(meta, frames), |c| c.add(&slot_counts(slot)));
    });
}

/// Sites folded so far because the merged table was full, once per thread table
/// merged (see `SiteMap::folded`), or because the threads' shared stacks were at
/// their cap, once per site a thread's table published then (`hot::stacks`).
pub fn folded_sites() -> u64 {
    MERGED_SITES.folded() + crate::hot::stacks::folded_count()
}

/// About how many bytes the tracer holds for the program, in the parts the
/// registry knows: thread states, their site tables (current and retired) and kept
/// walks, the stacks those tables share, and the merged sites. The rest is zero.
pub fn memory_parts() -> MemoryParts {
    let live = live();
    let mut parts = MemoryParts::default();
    for &p in live.iter() {
        // SAFETY: as in `counts`; only the table sizes are read.
        let st = unsafe { &*(p as *const ThreadState) };
        parts.thread_states += size_of::<ThreadState>() as u64;
        parts.site_tables += st.table_bytes() as u64;
        parts.kept_walks += st.predictor.bytes() as u64;
    }
    parts.stacks = crate::hot::stacks::memory_bytes();
    parts.merged_sites = MERGED_SITES.memory_bytes() as u64;
    parts
}

fn slot_counts(slot: &Slot) -> SiteCounts {
    SiteCounts {
        allocs: slot.allocs.load(Relaxed),
        reallocs: slot.reallocs.load(Relaxed),
        bytes_requested: slot.bytes_requested.load(Relaxed),
        bytes_allocated: slot.bytes_allocated.load(Relaxed),
        temporaries: slot.temporaries.load(Relaxed),
        samples: slot.samples(),
    }
}

/// Merges an exiting thread's state into the global tables and frees it.
///
/// # Safety
/// `state` must be a registered state from `Box::into_raw`, owned by the calling
/// thread, which must never touch it again.
pub(crate) unsafe fn retire(state: *mut ThreadState) {
    let mut live = live();
    if let Some(i) = live.iter().position(|&p| p == state as usize) {
        live.swap_remove(i);
    }
    // SAFETY: the caller guarantees `state` is valid and ours; with the lock held and
    // the state unregistered, no reader can reach it.
    let st = unsafe { Box::from_raw(state) };
    // What the thread had not published yet, so that exited threads leave no drift.
    let peak = live::publish_at_exit(live::unpublished_bytes(&st));
    MERGED_COUNTS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .add_live(&st);
    merge_table(st.table());
    // SAFETY: unregistered under the lock, and the owner is exiting.
    unsafe { st.free_tables() };
    drop(live);
    if let Some(bytes) = peak {
        crate::heap::new_peak(bytes);
    }
}

/// Runs `f` with the live list locked if no other thread holds it (every reader of
/// another thread's site table does); otherwise does nothing. Never waits.
pub(crate) fn if_unlocked(f: impl FnOnce()) {
    let _live = match LIVE.try_lock() {
        Ok(live) => live,
        // As in `live`: a panic cannot leave the list inconsistent.
        Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
        Err(std::sync::TryLockError::WouldBlock) => return,
    };
    f();
}

/// Moves a full site table's contents into the global table and empties it. Owner
/// thread, under the guard.
pub(crate) fn flush_table(st: &ThreadState) {
    let _live = live();
    merge_table(st.table());
    st.table().clear();
}

/// Counters of every thread, exited and live.
pub fn counts() -> Counts {
    let live = live();
    let mut c = MERGED_COUNTS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    for &p in live.iter() {
        // SAFETY: registered states stay valid while the lock is held; only their
        // atomic fields are read.
        c.add_live(unsafe { &*(p as *const ThreadState) });
    }
    let stateless = caller::stateless();
    for (d, n) in c.own_classes.iter_mut().zip(stateless.own_classes) {
        *d += n;
        c.own_allocs += n;
    }
    c.late_allocs = stateless.late_allocs;
    c.late_frees = stateless.late_frees;
    c.peak_live_bytes = live::phase_peak_bytes().into_iter().max().unwrap_or(0);
    c
}

/// Allocations (and reallocs) and their real bytes so far, over every thread and
/// the phases below `phases`: what the timeline samples. Lighter than [`counts`]:
/// no copy of the merged tables, only the phases in use.
pub fn running_totals(phases: usize) -> (u64, u64) {
    let phases = phases.min(MAX_PHASES);
    let live = live();
    let mut t = PhaseTotals::default();
    {
        let merged = MERGED_COUNTS.lock().unwrap_or_else(|e| e.into_inner());
        for p in &merged.phases[..phases] {
            t.allocs += p.allocs + p.reallocs;
            t.bytes_allocated += p.bytes_allocated;
        }
    }
    for &p in live.iter() {
        // SAFETY: as in `counts`.
        let st = unsafe { &*(p as *const ThreadState) };
        for c in &st.phases[..phases] {
            let mut one = PhaseTotals::default();
            one.add_live(c);
            t.allocs += one.allocs + one.reallocs;
            t.bytes_allocated += one.bytes_allocated;
            for (size, n) in c.small_allocs.iter().enumerate() {
                let n = n.load(Relaxed);
                if n != 0 {
                    t.allocs += n;
                    t.bytes_allocated += n * SMALL_REQUESTS[size].usable() as u64;
                }
            }
        }
    }
    (t.allocs, t.bytes_allocated)
}

/// Site counters of every thread, exited and live.
pub fn sites() -> HashMap<SiteId, SiteCounts> {
    let live = live();
    let mut all: HashMap<SiteId, SiteCounts> = MERGED_SITES.entries().collect();
    for &p in live.iter() {
        // SAFETY: as in `counts`.
        let st = unsafe { &*(p as *const ThreadState) };
        st.table().for_each_site(|slot, meta, frames| {
            all.entry(SiteId::of_slot(meta, frames))
                .or_default()
                .add(&slot_counts(slot));
        });
    }
    all
}

/// Every lock of the registry, held across a `fork()` (see `fork`): the live list,
/// the merged counts and each shard of the merged sites. Dropping it unlocks them.
pub(crate) struct HeldForFork {
    _live: MutexGuard<'static, Vec<usize>>,
    _counts: MutexGuard<'static, Counts>,
}

/// Takes every registry lock, in the order the registry's own functions take them.
pub(crate) fn hold_for_fork() -> HeldForFork {
    let live = live();
    let counts = MERGED_COUNTS.lock().unwrap_or_else(|e| e.into_inner());
    // Unlocked by `HeldForFork`'s drop.
    MERGED_SITES.lock_all();
    HeldForFork {
        _live: live,
        _counts: counts,
    }
}

impl Drop for HeldForFork {
    fn drop(&mut self) {
        // SAFETY: `hold_for_fork` locked them all; this runs once per
        // `hold_for_fork`, on the thread that took them (or the only thread of the
        // forked child, its copy).
        unsafe { MERGED_SITES.unlock_all() };
    }
}

/// Runs `f` while holding the registry lock (tests: recording must not need it).
pub fn with_locked<R>(f: impl FnOnce() -> R) -> R {
    let _live = live();
    f()
}
