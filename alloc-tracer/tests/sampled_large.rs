//! `sample:N` mode records every block of the classes it records whole
//! (`SAMPLE_ALL_FROM_BYTES` and up) once, between its draws: allocations, reallocs
//! and temporaries, in the counters and the report, and none of the class below. One
//! test: the global allocator is shared state.

mod common;

use alloc_tracer::{Mode, Settings, TracingAllocator};
use std::hint::black_box;

#[global_allocator]
static GLOBAL: TracingAllocator<tikv_jemallocator::Jemalloc> =
    TracingAllocator::new(tikv_jemallocator::Jemalloc);

fn settings(mode: Mode) -> Settings {
    Settings {
        mode,
        lifetime_interval: 0,
        ..Default::default()
    }
}

/// Blocks of `SAMPLE_ALL_FROM_BYTES` and more: each allocated, grown by a realloc,
/// and freed before the next allocation (a temporary).
#[inline(never)]
fn large_blocks(n: usize) {
    for _ in 0..n {
        let mut v: Vec<u8> = Vec::with_capacity(LARGE);
        black_box(&mut v);
        v.reserve_exact(2 * LARGE);
        black_box(&v);
    }
}

/// The smallest request recorded whole: in the 256 KiB class.
const LARGE: usize = 224 * 1024 + 1;

#[test]
fn sampled_mode_records_every_large_block_once() {
    // One in 2^40: no small block is drawn, and every large one is recorded, each
    // counted once, its realloc and its temporary too.
    settings(Mode::Sample(1 << 40)).apply();
    let d = common::change_during(|| large_blocks(50));
    assert_eq!(d(|p| p.allocs), 50);
    assert_eq!(d(|p| p.reallocs), 50);
    assert_eq!(d(|p| p.sampled), 100);
    assert_eq!(d(|p| p.temporaries), 50);
    let dir_scratch = common::scratch("sampled-large");
    let dir = dir_scratch.join("report");
    alloc_tracer::write_report(&dir).unwrap();
    let sum = |col: &str| common::sum_for_function(&dir, "large_blocks", col);
    assert_eq!(sum("alloc_count"), 50);
    assert_eq!(sum("realloc_count"), 50);
    assert_eq!(sum("sampled_count"), 100);
    assert_eq!(sum("bytes_requested"), 50 * (LARGE + 2 * LARGE) as u64);
    assert_eq!(sum("temporary_count"), 50);
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(
        manifest["sample_all_from_bytes"],
        alloc_tracer_format::size_class::SAMPLE_ALL_FROM_BYTES as u64
    );
    // One byte less, and the class below: sampled one in N as before, so none here.
    settings(Mode::Sample(1 << 40)).apply();
    let d = common::change_during(|| {
        for _ in 0..50 {
            black_box(Vec::<u8>::with_capacity(LARGE - 1));
        }
    });
    assert_eq!(d(|p| p.allocs), 50);
    assert_eq!(d(|p| p.sampled), 0);
    settings(Mode::Off).apply();
}
