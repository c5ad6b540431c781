//! Frees a thread makes after its state was merged at exit (its thread-locals'
//! destructors, run after the tracer's exit hook) are not recorded, but a followed
//! block freed there still stops being followed: left followed, it would stay live
//! in the report for good. One test: the mode is process-wide.

mod common;

use alloc_tracer::{Mode, Settings, TracingAllocator};
use std::cell::RefCell;
use std::hint::black_box;

#[global_allocator]
static GLOBAL: TracingAllocator<tikv_jemallocator::Jemalloc> =
    TracingAllocator::new(tikv_jemallocator::Jemalloc);

const N: usize = 200;

/// Separate blocks, each followed.
type Blocks = Vec<Box<[u8; 56]>>;

thread_local! {
    /// Blocks freed by this thread-local's destructor at thread exit.
    static KEPT: RefCell<Blocks> = const { RefCell::new(Vec::new()) };
}

#[inline(never)]
fn kept_until_thread_exit() {
    KEPT.with(|k| {
        let mut k = k.borrow_mut();
        k.reserve(N);
        for i in 0..N {
            k.push(black_box(Box::new([i as u8; 56])));
        }
    });
}

/// The thread: registers `KEPT`'s destructor before its first allocation registers
/// the tracer's exit hook. Destructors run last registered first, so the hook
/// merges the thread's state, then `KEPT` frees its blocks.
extern "C" fn keep_until_exit(_: *mut libc::c_void) -> *mut libc::c_void {
    KEPT.with(|k| black_box(k.borrow().len()));
    kept_until_thread_exit();
    std::ptr::null_mut()
}

#[test]
fn followed_blocks_freed_after_the_thread_state_merged_end() {
    Settings {
        mode: Mode::Sites,
        lifetime_interval: 1,
        heap_interval: Some(1),
        ..Default::default()
    }
    .apply();
    let late_before = alloc_tracer::counts().late_frees;
    // A thread of the C library's own: a thread spawned by `std` allocates before it
    // runs its closure, and that first allocation registers the tracer's exit hook.
    let mut thread = std::mem::MaybeUninit::<libc::pthread_t>::uninit();
    // SAFETY: `thread` is written by `pthread_create`; the start routine takes and
    // returns nothing that outlives it; the thread is joined before returning.
    unsafe {
        assert_eq!(
            libc::pthread_create(
                thread.as_mut_ptr(),
                std::ptr::null(),
                keep_until_exit,
                std::ptr::null_mut()
            ),
            0
        );
        assert_eq!(
            libc::pthread_join(thread.assume_init(), std::ptr::null_mut()),
            0
        );
    }
    let late = alloc_tracer::counts().late_frees - late_before;
    assert!(
        late > N as u64,
        "{late} late frees: the blocks were freed before the thread's state merged"
    );

    let dir_scratch = common::scratch("late-frees");

    let dir = dir_scratch.join("report");
    alloc_tracer::write_report(&dir).unwrap();
    Settings::default().apply();
    let sum = |col| common::sum_for_function(&dir, "kept_until_thread_exit", col);
    assert_eq!(sum("alloc_count"), N as u64 + 1, "the blocks and the Vec");
    assert_eq!(
        sum("followed_count"),
        N as u64 + 1,
        "followed at interval 1"
    );
    assert_eq!(sum("followed_freed_count"), N as u64 + 1, "every one freed");
    assert_eq!(sum("live_bytes_estimate"), 0, "none is live");
    let sampled_live = common::sum_for_function_in(
        &dir,
        "heap_end.parquet",
        "kept_until_thread_exit",
        "sampled_count",
    );
    assert_eq!(sampled_live, 0, "none is sampled live");
}
