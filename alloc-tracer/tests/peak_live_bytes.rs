//! The report's peak of live bytes is exact to within the bound it states
//! (`peak_live_bytes_error_bytes`: threads recording at once x 256 KiB), though threads publish their
//! net live bytes only when they drift that far: small blocks, large blocks and a
//! realloc build the peak, then frees and temporaries must not move it.

mod common;

use alloc_tracer::{Mode, Settings, TracingAllocator};
use std::hint::black_box;

#[global_allocator]
static GLOBAL: TracingAllocator<tikv_jemallocator::Jemalloc> =
    TracingAllocator::new(tikv_jemallocator::Jemalloc);

/// Size-class bytes allocated minus freed since recording began, from the counters.
fn live() -> i64 {
    let c = alloc_tracer::counts();
    c.total(|p| p.bytes_allocated) as i64 - c.total(|p| p.bytes_freed) as i64
}

#[test]
fn peak_is_within_its_stated_bound() {
    Settings {
        mode: Mode::Count,
        depth: alloc_tracer::DEFAULT_DEPTH,
        lifetime_interval: 0,
        ..Default::default()
    }
    .apply();
    // 20 MiB of 160-byte blocks, 4 MiB of large ones and a growing buffer, all live
    // at once: the peak.
    let small: Vec<Box<[u8; 160]>> = (0..131_072).map(|_| Box::new([0u8; 160])).collect();
    let large: Vec<Vec<u8>> = (0..4).map(|_| Vec::with_capacity(1 << 20)).collect();
    let mut grown = vec![0u8; 100_000];
    grown.resize(3_000_000, 1);
    let at_peak = live();
    black_box((&small, &large, &grown));
    drop(small);
    drop(large);
    drop(grown);
    // Frees only lower the live bytes; temporaries leave them as they are.
    for _ in 0..100_000 {
        black_box(Box::new([0u8; 160]));
    }
    assert!(live() < at_peak - (20 << 20));

    let dir_scratch = common::scratch("peak");

    let dir = dir_scratch.join("report");
    alloc_tracer::write_report(&dir).unwrap();
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    let totals = &manifest["totals"];
    let peak = totals["peak_live_bytes"].as_i64().unwrap();
    let bound = totals["peak_live_bytes_error_bytes"].as_i64().unwrap();
    // At least this thread's share, and a multiple of it.
    assert!(
        bound >= 256 << 10 && bound % (256 << 10) == 0,
        "bound {bound}"
    );
    // The test harness's own threads may allocate a little meanwhile.
    let slack = 256 << 10;
    assert!(
        peak >= at_peak - bound && peak <= at_peak + bound + slack,
        "peak {peak}, live at the peak {at_peak}, bound {bound}"
    );
    // `counts()` gives the same peak while the program runs (what synth-driver
    // prints after each iteration).
    assert_eq!(alloc_tracer::counts().peak_live_bytes, peak);
    // The kernel's resident peak held the 20 MiB of small blocks written above (the
    // large ones were never touched).
    let rss = totals["max_rss_bytes"].as_u64().unwrap();
    assert!(rss >= 20 << 20, "max_rss_bytes {rss}");

    // Threads that exited published all they held back: 16 threads, one after
    // another, widen the bound by the threads recording at once, not by 16.
    for _ in 0..16 {
        std::thread::spawn(|| black_box(vec![0u8; 100_000]))
            .join()
            .unwrap();
    }
    alloc_tracer::write_report(&dir).unwrap();
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    let totals = &manifest["totals"];
    let threads = manifest["threads"].as_u64().unwrap_or(0);
    let bound = totals["peak_live_bytes_error_bytes"].as_u64().unwrap();
    // This thread, one worker, and the harness's and the timeline's threads at most.
    assert!(
        bound <= 4 * (256 << 10),
        "bound {bound} with {threads} threads recorded"
    );
}
