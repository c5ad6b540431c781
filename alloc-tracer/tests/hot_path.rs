//! The recording path allocates nothing and blocks on nothing: after a thread's
//! state and its site exist, N allocations reach the inner allocator as exactly N
//! calls from that thread (the tracer's own allocations would be more), and they
//! complete while another thread holds the registry lock that every cold path takes.
//!
//! Only the worker thread's calls are counted: other threads of the test process
//! (libtest's main thread frees its thread names late on a busy machine, which creates
//! that thread's state) may allocate at any time.

use alloc_tracer::{Mode, Settings, TracingAllocator};
use std::alloc::{GlobalAlloc, Layout};
use std::cell::Cell;
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::mpsc;
use std::time::Duration;

/// jemalloc, counting the calls that reach it from threads that asked to be counted.
struct Counting;

static INNER_ALLOCS: AtomicU64 = AtomicU64::new(0);
/// Frees of 16 or 32 KiB from counted threads: a site table's slots of 256 or 512
/// (64-byte slots).
static SMALL_TABLE_FREES: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// Whether this thread's calls are counted (const, no destructor: reading it
    /// never allocates).
    static COUNTED: Cell<bool> = const { Cell::new(false) };
}

// SAFETY: forwards every call unchanged to jemalloc.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if COUNTED.with(Cell::get) {
            INNER_ALLOCS.fetch_add(1, Relaxed);
        }
        // SAFETY: forwarded contract.
        unsafe { tikv_jemallocator::Jemalloc.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        if COUNTED.with(Cell::get) && matches!(l.size(), 16384 | 32768) {
            SMALL_TABLE_FREES.fetch_add(1, Relaxed);
        }
        // SAFETY: forwarded contract.
        unsafe { tikv_jemallocator::Jemalloc.dealloc(p, l) }
    }
}

#[global_allocator]
static GLOBAL: TracingAllocator<Counting> = TracingAllocator::new(Counting);

#[inline(never)]
fn same_site(n: usize) {
    for _ in 0..n {
        black_box(Vec::<u64>::with_capacity(20));
    }
}

#[test]
fn recording_neither_allocates_nor_blocks() {
    // `count` and `sample` take their own copy of the recording path (recorded
    // before the inner call); `sites` the walking one. The sample interval is so long
    // that no allocation here is sampled, and heap sampling is off: a sampled one is
    // cold and may allocate under the guard.
    for mode in [Mode::Count, Mode::Sample(1 << 62), Mode::Sites] {
        check(mode);
    }
    grow_while_locked();
}

/// A thread meeting new sites grows its table (cold, under the guard), and frees
/// the tables it replaced only when no reader holds the registry lock: it never
/// waits for the lock. Those it could not free then it frees at its next new site.
fn grow_while_locked() {
    Settings {
        mode: Mode::Sites,
        depth: alloc_tracer::MAX_DEPTH,
        lifetime_interval: 0,
        heap_interval: Some(0),
        ..Default::default()
    }
    .apply();
    let (ready_tx, ready_rx) = mpsc::channel::<()>();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let (again_tx, again_rx) = mpsc::channel::<()>();
    let (freed_tx, freed_rx) = mpsc::channel::<u64>();
    let worker = std::thread::spawn(move || {
        black_box(vec![0u8; 1]); // creates this thread's state
        ready_tx.send(()).unwrap();
        go_rx.recv().unwrap();
        // About 340 sites (16 stacks, 21 size classes): the table of 256 slots
        // grows twice (it grows when half full).
        for depth in 0..16 {
            for size in (8..=4096).step_by(64) {
                nest(depth, size);
            }
        }
        done_tx.send(()).unwrap();
        // The lock released: a new site (a few, should another thread of the test
        // process hold the lock just then).
        again_rx.recv().unwrap();
        COUNTED.with(|c| c.set(true));
        for size in [8, 16, 32, 48, 64, 80, 96, 112] {
            nest(20, size);
            if SMALL_TABLE_FREES.load(Relaxed) == 2 {
                break;
            }
        }
        COUNTED.with(|c| c.set(false));
        freed_tx.send(SMALL_TABLE_FREES.load(Relaxed)).unwrap();
    });
    ready_rx.recv().unwrap();
    // Failing, the lock is released before the test says so.
    let waited = alloc_tracer::with_registry_locked(|| {
        go_tx.send(()).unwrap();
        done_rx.recv_timeout(Duration::from_secs(20)).is_err()
    });
    again_tx.send(()).unwrap();
    let freed = freed_rx.recv().unwrap();
    worker.join().unwrap();
    assert!(
        !waited,
        "a thread growing its site table waited for the registry lock"
    );
    assert_eq!(
        freed, 2,
        "the tables of 256 and 512 slots replaced under the lock, freed at a new site after"
    );
}

/// Allocates `size` bytes `depth` calls down: a stack per depth.
#[inline(never)]
fn nest(depth: usize, size: usize) {
    if depth == 0 {
        black_box(Vec::<u8>::with_capacity(size));
    } else {
        nest(depth - 1, size);
        black_box(depth);
    }
}

fn check(mode: Mode) {
    Settings {
        mode,
        depth: alloc_tracer::MAX_DEPTH,
        lifetime_interval: 0,
        heap_interval: Some(0),
        ..Default::default()
    }
    .apply();
    let (go_tx, go_rx) = mpsc::channel::<(usize, bool)>();
    let (ready_tx, ready_rx) = mpsc::channel::<()>();
    let (done_tx, done_rx) = mpsc::channel::<u64>();
    // One call of `same_site`, run once per message, so that every round allocates
    // at one stack: the first creates this thread's state, the site's slot and its
    // interned stack (cold, under the guard); the second is counted.
    let worker = std::thread::spawn(move || {
        for (n, counted) in go_rx {
            COUNTED.with(|c| c.set(counted));
            let before = INNER_ALLOCS.load(Relaxed);
            same_site(n);
            let after = INNER_ALLOCS.load(Relaxed);
            COUNTED.with(|c| c.set(false));
            if counted {
                done_tx.send(after - before).unwrap();
            }
            ready_tx.send(()).unwrap();
        }
    });
    go_tx.send((10, false)).unwrap();
    // Creating a thread's state takes the lock once (a cold path): let that happen.
    ready_rx.recv().unwrap();
    // Hold the registry lock (a report snapshot holds it too) while the worker records.
    let mut result = None;
    alloc_tracer::with_registry_locked(|| {
        // The worker reports only after the lock is released, so watch its
        // allocations arrive at the inner allocator instead.
        let start = INNER_ALLOCS.load(Relaxed);
        go_tx.send((100_000, true)).unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while INNER_ALLOCS.load(Relaxed) - start < 100_000 {
            assert!(
                std::time::Instant::now() < deadline,
                "{mode:?}: recording blocked while the registry lock was held ({} of 100000)",
                INNER_ALLOCS.load(Relaxed) - start
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        result = Some(());
    });
    assert!(result.is_some());
    let inner_calls = done_rx.recv_timeout(Duration::from_secs(20)).unwrap();
    drop(go_tx);
    worker.join().unwrap();
    assert_eq!(
        inner_calls, 100_000,
        "{mode:?}: the tracer allocated on the recording path (its own allocations \
         reach the inner allocator on the worker thread too)"
    );
}
