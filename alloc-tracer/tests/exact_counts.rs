//! Exact counts per site and in total, across an inlined helper in a closure, a rayon
//! pool and many short-lived threads. One test: the global allocator is shared state.

mod common;

use alloc_tracer::{Mode, Settings, TracingAllocator};
use rayon::prelude::*;
use std::hint::black_box;

#[global_allocator]
static GLOBAL: TracingAllocator<tikv_jemallocator::Jemalloc> =
    TracingAllocator::new(tikv_jemallocator::Jemalloc);

const N_PLAIN: usize = 1000;
const N_CLOSURE: usize = 7;
const N_RAYON: usize = 3000;
const N_THREADS: usize = 64;
const PER_THREAD: usize = 5;

/// 160-byte blocks, each freed before the next allocation: all temporaries.
#[inline(never)]
fn plain_temporaries(n: usize) {
    for _ in 0..n {
        let v: Vec<u64> = Vec::with_capacity(20);
        black_box(&v);
    }
}

#[inline(always)]
fn inlined_helper() -> Vec<u8> {
    Vec::with_capacity(48)
}

#[inline(never)]
fn closure_caller() -> Vec<Vec<u8>> {
    let make = |k: usize| {
        (0..k)
            .map(|_| black_box(inlined_helper()))
            .collect::<Vec<_>>()
    };
    make(N_CLOSURE)
}

#[inline(never)]
fn rayon_work(i: usize) -> usize {
    let b = black_box(Box::new([i as u8; 24]));
    b.len()
}

#[inline(never)]
fn thread_work() -> usize {
    let kept: Vec<Box<[u8; 1000]>> = Vec::with_capacity(PER_THREAD - 1);
    let mut kept = black_box(kept);
    for _ in 0..PER_THREAD - 1 {
        kept.push(Box::new([1; 1000]));
    }
    kept.len()
}

#[test]
fn exact_counts_per_site_and_in_total() {
    Settings {
        mode: Mode::Sites,
        depth: alloc_tracer::MAX_DEPTH,
        lifetime_interval: 0,
        ..Default::default()
    }
    .apply();
    // Totals over a window with nothing else allocating.
    common::wait_until_quiet();
    let before = alloc_tracer::counts();
    plain_temporaries(N_PLAIN);
    let after = alloc_tracer::counts();
    let d = |f: fn(&alloc_tracer::PhaseTotals) -> u64| after.total(f) - before.total(f);
    assert_eq!(d(|p| p.allocs), N_PLAIN as u64);
    assert_eq!(d(|p| p.frees), N_PLAIN as u64);
    assert_eq!(d(|p| p.reallocs), 0);
    assert_eq!(d(|p| p.bytes_requested), 160 * N_PLAIN as u64);
    assert_eq!(d(|p| p.bytes_allocated), 160 * N_PLAIN as u64);
    assert_eq!(d(|p| p.temporaries), N_PLAIN as u64);
    let class_160 = (0..alloc_tracer::NUM_CLASSES)
        .find(|&k| alloc_tracer::class_bytes(k) == 160)
        .unwrap();
    assert_eq!(
        after.classes[0][class_160] - before.classes[0][class_160],
        N_PLAIN as u64
    );

    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(3)
        .build()
        .unwrap();
    let kept = closure_caller();
    assert_eq!(kept.len(), N_CLOSURE);
    let sum: usize = pool.install(|| (0..N_RAYON).into_par_iter().map(rayon_work).sum());
    assert_eq!(sum, 24 * N_RAYON);
    for _ in 0..N_THREADS / 8 {
        let handles: Vec<_> = (0..8).map(|_| std::thread::spawn(thread_work)).collect();
        for h in handles {
            assert_eq!(h.join().unwrap(), PER_THREAD - 1);
        }
    }
    drop(kept);

    let dir_scratch = common::scratch("exact");

    let dir = dir_scratch.join("report");
    let summary = alloc_tracer::write_report(&dir).unwrap();
    assert!(summary.stacks > 0);

    let allocs = |f: &str| common::sum_for_function(&dir, f, "alloc_count");
    assert_eq!(allocs("plain_temporaries"), N_PLAIN as u64);
    assert_eq!(
        common::sum_for_function(&dir, "plain_temporaries", "temporary_count"),
        N_PLAIN as u64
    );
    assert_eq!(
        common::sum_for_function(&dir, "plain_temporaries", "bytes_requested"),
        160 * N_PLAIN as u64
    );
    // The inlined helper is named through the inlined-frame expansion, and the
    // closure's caller too. (`collect` into a Vec of known length adds one more.)
    assert_eq!(allocs("inlined_helper"), N_CLOSURE as u64);
    assert_eq!(
        common::sum_for_function(&dir, "closure_caller", "alloc_count"),
        N_CLOSURE as u64 + 1
    );
    assert_eq!(allocs("rayon_work"), N_RAYON as u64);
    // Each thread: the Vec, then PER_THREAD - 1 boxes; all merged at thread exit.
    assert_eq!(allocs("thread_work"), (N_THREADS * PER_THREAD) as u64);

    // The tracer's own frames are not in the stacks, and no frame of the program
    // was skipped: the innermost frame of a site is the allocator's caller.
    let functions = common::site_functions(&dir);
    for frames in functions.values() {
        assert!(
            !frames
                .iter()
                .any(|f| f.contains("alloc_tracer::") || f.contains("record_alloc")),
            "tracer frames in {frames:?}"
        );
    }
    let plain = functions
        .values()
        .find(|fs| fs.iter().any(|f| f.contains("plain_temporaries")))
        .unwrap();
    assert!(
        !plain[0].contains("plain_temporaries"),
        "the allocation's own frames were skipped: {plain:?}"
    );

    // The report's totals are the tracer's totals.
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    let total_rows: u64 = common::read_table(&dir, "sites.parquet")
        .iter()
        .map(|r| common::u64_of(r, "alloc_count"))
        .sum();
    assert_eq!(
        manifest["totals"]["alloc_count"].as_u64().unwrap(),
        total_rows
    );
    assert_eq!(manifest["mode"], "sites");
    assert_eq!(manifest["schema_version"], alloc_tracer::SCHEMA_VERSION);
}
