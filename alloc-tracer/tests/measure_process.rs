//! `measure_process` counts what a rayon pool allocates for the closure, which
//! `measure` (the calling thread only) does not see. One test in its own binary: the
//! process-wide count would take in other tests' allocations.

use alloc_tracer::{TracingAllocator, measure, measure_process};
use rayon::prelude::*;
use std::hint::black_box;

#[global_allocator]
static GLOBAL: TracingAllocator<tikv_jemallocator::Jemalloc> =
    TracingAllocator::new(tikv_jemallocator::Jemalloc);

const TASKS: usize = 64;
const BOXES: usize = 1000;

/// `TASKS` x `BOXES` boxes allocated and freed on the pool's threads.
fn on_the_pool(pool: &rayon::ThreadPool) {
    pool.install(|| {
        (0..TASKS).into_par_iter().for_each(|t| {
            for i in 0..BOXES {
                black_box(Box::new(t * BOXES + i));
            }
        })
    });
}

#[test]
fn counts_what_the_pool_allocates() {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .unwrap();
    // The pool's threads start and make their states before anything is measured.
    on_the_pool(&pool);
    let ((), everyone) = measure_process(|| on_the_pool(&pool));
    let ((), caller) = measure(|| on_the_pool(&pool));
    let boxes = (TASKS * BOXES) as u64;
    // rayon's own bookkeeping may allocate a little besides the boxes.
    assert!(
        (boxes..boxes + 64).contains(&everyone.allocs),
        "{everyone:?}"
    );
    assert!(everyone.frees >= boxes, "{everyone:?}");
    assert!(everyone.bytes >= boxes * 8, "{everyone:?}");
    // The calling thread only waits: it allocates almost none of it.
    assert!(caller.allocs < boxes / 2, "{caller:?}");
    // Each box is freed at once: the pool holds little at any time, far from the
    // 64 000 boxes' 1 MB (within 256 KiB a thread of what threads publish).
    assert!(everyone.peak_bytes < 4 * 256 * 1024, "{everyone:?}");
    // A block of 8 MiB held on a pool thread is in the process's peak.
    let ((), held) = measure_process(|| {
        pool.install(|| black_box(vec![1u8; 8 << 20]));
    });
    assert!(
        ((8 << 20)..(8 << 20) + 4 * 256 * 1024).contains(&held.peak_bytes),
        "{held:?}"
    );
    // Nested: the inner call's reset of the process's peak does not hide the 8 MiB
    // the outer one saw before it (its peak read 0).
    let ((), outer) = measure_process(|| {
        pool.install(|| black_box(vec![1u8; 8 << 20]));
        let ((), inner) = measure_process(|| ());
        assert!(inner.peak_bytes < 4 * 256 * 1024, "{inner:?}");
    });
    assert!(
        ((8 << 20)..(8 << 20) + 4 * 256 * 1024).contains(&outer.peak_bytes),
        "{outer:?}"
    );
}
