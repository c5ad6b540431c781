//! The public counters read as a program reads them: a phase's totals by its id, and
//! allocations by requested size.

use alloc_tracer::{Mode, Settings, TracingAllocator};
use std::alloc::{GlobalAlloc, Layout};

#[global_allocator]
static GLOBAL: TracingAllocator<tikv_jemallocator::Jemalloc> =
    TracingAllocator::new(tikv_jemallocator::Jemalloc);

/// Sizes no test harness or std path asks for, so their buckets count only ours.
const ODD: [(usize, u64); 3] = [(43, 5), (12_345, 3), (777_777, 2)];

/// The count in the bucket of `size`, with the bucket's bounds.
fn bucket_of(size: usize) -> (u64, u64, u64) {
    let size = size as u64;
    alloc_tracer::counts()
        .requested_sizes()
        .find(|&(low, high, _)| low <= size && size <= high)
        .unwrap_or((size, size, 0))
}

#[test]
fn phases_by_id_and_allocations_by_requested_size() {
    Settings {
        mode: Mode::Count,
        ..Default::default()
    }
    .apply();
    let id = alloc_tracer::phase_id("counts-api");
    let names = alloc_tracer::phases();
    assert_eq!(names[id.index()].name, "counts-api");

    let before: Vec<_> = ODD.iter().map(|&(size, _)| bucket_of(size)).collect();
    let phase_before = alloc_tracer::counts().phases[id.index()].allocs;
    {
        let _in = id.enter();
        for &(size, n) in &ODD {
            let layout = Layout::from_size_align(size, 8).unwrap();
            for _ in 0..n {
                // SAFETY: a non-zero layout, freed at once with the same layout.
                unsafe { GLOBAL.dealloc(std::hint::black_box(GLOBAL.alloc(layout)), layout) };
            }
        }
    }
    let phase_after = alloc_tracer::counts().phases[id.index()].allocs;
    // The harness's own thread may allocate in the phase too (phases are
    // process-wide): at least ours.
    let ours: u64 = ODD.iter().map(|&(_, n)| n).sum();
    assert!(
        phase_after - phase_before >= ours,
        "{phase_before} -> {phase_after}"
    );

    for (&(size, n), (low, high, was)) in ODD.iter().zip(before) {
        let (l, h, now) = bucket_of(size);
        assert!(l <= size as u64 && size as u64 <= h, "{size} in {l}..={h}");
        assert_eq!(now - was, n, "bucket {low}..={high} of {size} bytes");
        if size < 64 {
            assert_eq!((l, h), (size as u64, size as u64), "exact below 64 bytes");
        } else {
            assert!(((h - l + 1) as f64) < 0.032 * size as f64, "{l}..={h}");
        }
    }
    let sizes: Vec<_> = alloc_tracer::counts().requested_sizes().collect();
    assert!(
        sizes.windows(2).all(|w| w[0].1 < w[1].0),
        "smallest first, apart"
    );
}
