//! Stress: thousands of short-lived threads and a rayon pool allocate while other
//! threads write reports; afterwards the counts of the known sites are exact, and
//! the per-site figures sum to the totals. One test: the mode is process-wide.

mod common;

use alloc_tracer::{Mode, Settings, TracingAllocator};
use alloc_tracer_format::manifest::Manifest;
use rayon::prelude::*;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

#[global_allocator]
static GLOBAL: TracingAllocator<tikv_jemallocator::Jemalloc> =
    TracingAllocator::new(tikv_jemallocator::Jemalloc);

const THREADS: usize = 3000;
const PER_THREAD: usize = 40;
const RAYON_TASKS: usize = 200_000;
const REPORTS: usize = 6;

#[inline(never)]
fn short_thread_work() {
    for i in 0..PER_THREAD {
        black_box(Box::new([i as u64; 12]));
    }
}

#[inline(never)]
fn rayon_task_work(i: usize) {
    black_box(Box::new([i as u32; 20]));
}

#[test]
fn exact_under_thread_churn_pools_and_concurrent_reports() {
    Settings {
        mode: Mode::Sites,
        ..Default::default()
    }
    .apply();
    let root = common::scratch("stress");
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        // Reports written while the others allocate.
        let writer = s.spawn(|| {
            let mut written = 0;
            while !done.load(Relaxed) || written == 0 {
                let dir = root.join(format!("during-{}", written % REPORTS));
                alloc_tracer::write_report(&dir).unwrap();
                written += 1;
            }
            written
        });
        s.spawn(|| {
            for batch in 0..THREADS / 50 {
                let handles: Vec<_> = (0..50)
                    .map(|_| std::thread::spawn(short_thread_work))
                    .collect();
                for h in handles {
                    h.join().unwrap();
                }
                black_box(batch);
            }
        });
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(4)
            .build()
            .unwrap();
        pool.install(|| (0..RAYON_TASKS).into_par_iter().for_each(rayon_task_work));
        drop(pool);
        // The writer stops once the pool is done; the scope then waits for the
        // thread churn.
        done.store(true, Relaxed);
        assert!(writer.join().unwrap() >= 1);
    });
    let dir = root.join("after");
    alloc_tracer::write_report(&dir).unwrap();
    Settings::default().apply();

    assert_eq!(
        common::sum_for_function(&dir, "short_thread_work", "alloc_count"),
        (THREADS * PER_THREAD) as u64
    );
    assert_eq!(
        common::sum_for_function(&dir, "rayon_task_work", "alloc_count"),
        RAYON_TASKS as u64
    );
    let manifest = Manifest::from_json(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    let sites = common::read_table(&dir, "sites.parquet");
    let per_site: u64 = sites.iter().map(|r| common::u64_of(r, "alloc_count")).sum();
    assert_eq!(per_site, manifest.totals.alloc_count);
    let per_site: u64 = sites
        .iter()
        .map(|r| common::u64_of(r, "bytes_requested"))
        .sum();
    // Requested bytes count allocations and reallocs, as the totals do.
    assert_eq!(per_site, manifest.totals.bytes_requested);
    assert!(manifest.threads as usize >= THREADS);
    std::fs::remove_dir_all(root).unwrap();
}
