//! A draw that falls due just after `Settings::apply` is taken, at its weight: each
//! thread's countdowns to its next sampled stack, followed block and heap-sampled
//! block were drawn before the settings changed, and the first chunk that ends after
//! the change may end its draw. Redrawn instead, that sample stood for nothing, nor
//! did the allocations its draw passed over: with many threads that each take a
//! sample or two between changes, most were lost. But a countdown drawn under
//! settings that sample nothing is no draw. One test: the mode is process-wide.

mod common;

use alloc_tracer::{Mode, Settings, TracingAllocator};
use std::hint::black_box;
use std::sync::Barrier;

#[global_allocator]
static GLOBAL: TracingAllocator<tikv_jemallocator::Jemalloc> =
    TracingAllocator::new(tikv_jemallocator::Jemalloc);

const THREADS: usize = 200;

fn apply(settings: Settings) {
    Settings {
        depth: alloc_tracer::MAX_DEPTH,
        timeline_ms: 0,
        ..settings
    }
    .apply();
}

/// Starts `THREADS` threads under `first`, each with its countdowns drawn (its first
/// allocation), then applies `then`, then lets each run `work`; returns what they
/// kept.
fn after_applying<T: Send>(first: Settings, then: Settings, work: impl Fn() -> T + Sync) -> Vec<T> {
    apply(first);
    let (started, applied) = (Barrier::new(THREADS + 1), Barrier::new(THREADS + 1));
    std::thread::scope(|s| {
        let threads: Vec<_> = (0..THREADS)
            .map(|_| {
                s.spawn(|| {
                    black_box(Box::new(1u64));
                    started.wait();
                    applied.wait();
                    work()
                })
            })
            .collect();
        started.wait();
        apply(then);
        applied.wait();
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    })
}

/// `n` 8-byte blocks, each freed at once.
#[inline(never)]
fn sampled_after(n: usize) {
    for i in 0..n {
        black_box(Box::new(i));
    }
}

/// `n` 100-byte blocks kept.
#[allow(clippy::vec_box)] // each box is a block of its own, the subject here
#[inline(never)]
fn followed_after(n: usize) -> Vec<Box<[u8; 100]>> {
    (0..n).map(|_| Box::new([2u8; 100])).collect()
}

/// `n` 64 KiB blocks kept.
#[inline(never)]
fn heap_sampled_after(n: usize) -> Vec<Vec<u8>> {
    (0..n).map(|_| Vec::with_capacity(64 << 10)).collect()
}

/// `actual` within `share` of `expected`.
fn near(actual: f64, expected: f64, share: f64) -> bool {
    (actual - expected).abs() <= share * expected
}

/// One 8-byte block, freed at once.
#[inline(never)]
fn allocated_once() {
    black_box(Box::new(3u64));
}

#[test]
fn draws_due_after_new_settings_are_taken() {
    let scratch = common::scratch("due-draws");

    // Threads that drew under `count`, which samples nothing, then allocate once
    // under `sample:1000000000`: their countdowns of 1 were no draw, so nothing is
    // sampled (taken as due, each thread's one allocation was).
    let count = Settings {
        mode: Mode::Count,
        heap_interval: Some(0),
        ..Settings::default()
    };
    let rare = Settings {
        mode: Mode::Sample(1_000_000_000),
        ..count
    };
    after_applying(count, rare, allocated_once);
    let dir = scratch.join("none");
    alloc_tracer::write_report(&dir).unwrap();
    // No stack sampled in the run so far, that one's or any other.
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(
        manifest["totals"]["sampled_count"], 0,
        "{}",
        manifest["totals"]
    );
    assert_eq!(
        common::sum_for_function(&dir, "allocated_once", "sampled_count"),
        0
    );

    // The same settings applied again below: their intervals' epoch moves on, as
    // with any change. One in 1,000, 1,000 allocations a thread: about 200 samples
    // (spread 7 %).
    // Redrawn, each thread whose first draw fell within them lost it: about a
    // third were left.
    let base = Settings {
        mode: Mode::Sample(1000),
        lifetime_interval: 0,
        heap_interval: Some(0),
        ..Settings::default()
    };
    after_applying(base, base, || sampled_after(1000));
    let dir = scratch.join("sampled");
    alloc_tracer::write_report(&dir).unwrap();
    let estimate = common::sum_for_function(&dir, "sampled_after", "alloc_count") as f64;
    let made = (THREADS * 1000) as f64;
    assert!(near(estimate, made, 0.3), "{estimate} estimated of {made}");

    // One block in 64 followed, 100 kept a thread: about 312 (spread 6 %).
    // Redrawn: about half.
    let sites = Settings {
        mode: Mode::Sites,
        lifetime_interval: 64,
        ..base
    };
    let kept = after_applying(sites, sites, || followed_after(100));
    let dir = scratch.join("followed");
    alloc_tracer::write_report(&dir).unwrap();
    let (followed, live): (u64, u64) =
        common::rows_of(&dir, "sites.parquet", "followed_after", Some(112))
            .iter()
            .map(|r| {
                (
                    common::u64_of(r, "followed_count"),
                    common::u64_of(r, "live_bytes_estimate"),
                )
            })
            .fold((0, 0), |(a, b), (c, d)| (a + c, b + d));
    let blocks = (THREADS * 100) as f64;
    assert!(
        near(followed as f64, blocks / 64.0, 0.3),
        "{followed} followed"
    );
    assert!(
        near(live as f64, blocks * 112.0, 0.3),
        "{live} live bytes estimated of {}",
        blocks * 112.0
    );
    drop(kept);

    // Heap sampling at 1 MiB, eight 64 KiB blocks a thread: each sampled with
    // probability 6 %, about 97 in all (spread 10 %). Redrawn: few, as every
    // draw that fell within a thread's 512 KiB fell due in its first chunk.
    let heap = Settings {
        mode: Mode::Count,
        heap_interval: Some(1 << 20),
        ..base
    };
    let kept = after_applying(heap, heap, || heap_sampled_after(8));
    let dir = scratch.join("heap");
    alloc_tracer::write_report(&dir).unwrap();
    let live = common::sum_for_function_in(
        &dir,
        "heap_end.parquet",
        "heap_sampled_after",
        "live_bytes_estimate",
    ) as f64;
    let held = (THREADS * 8 * (64 << 10)) as f64;
    assert!(
        near(live, held, 0.4),
        "{live} live bytes estimated of {held}"
    );
    drop(kept);
}
