//! One site heap-sampled at two intervals: its row's `live_bytes_stddev` sums each
//! sampled block's variance at its own sampling probability, so it gives the spread
//! the estimate really has. (A share pooled over the row, as readers took before,
//! was that of the dense sampling alone: several times too small.)

mod common;

use alloc_tracer::{Mode, Settings, TracingAllocator};
use std::hint::black_box;

#[global_allocator]
static GLOBAL: TracingAllocator<tikv_jemallocator::Jemalloc> =
    TracingAllocator::new(tikv_jemallocator::Jemalloc);

/// 256-byte blocks per call.
const BLOCKS: usize = 204_800;

/// `BLOCKS` blocks of 256 bytes kept: one site, whatever the interval.
#[inline(never)]
#[allow(clippy::vec_box)] // each box is a block of its own, the subject here
fn held() -> Vec<Box<[u8; 256]>> {
    (0..BLOCKS).map(|_| Box::new([4u8; 256])).collect()
}

/// The variance of a heap-sampling estimate of `n` blocks of `s` bytes at a mean
/// interval of `mean` bytes: each sampled with `p = 1 - (1 - 1/mean)^s` and counted
/// `s/p` bytes.
fn variance(n: usize, s: f64, mean: f64) -> f64 {
    let p = 1.0 - (1.0 - 1.0 / mean).powf(s);
    n as f64 * s * s * (1.0 - p) / p
}

#[test]
fn a_row_sampled_at_two_intervals_states_its_own_spread() {
    let mut kept = vec![];
    // Stacks of two frames: the blocks' site is the same from either call.
    for interval in black_box(vec![1u64 << 20, 1024]) {
        Settings {
            mode: Mode::Count,
            depth: 2,
            heap_interval: Some(interval),
            ..Settings::default()
        }
        .apply();
        kept.push(held());
    }
    let scratch = common::scratch("heap-two-intervals");
    let dir = scratch.join("report");
    alloc_tracer::write_report(&dir).unwrap();
    let rows = common::rows_of(&dir, "heap_end.parquet", "held", Some(256));
    assert_eq!(rows.len(), 1, "one row: one site, phase and class");
    let (estimate, stddev) = (
        common::u64_of(&rows[0], "live_bytes_estimate") as f64,
        common::u64_of(&rows[0], "live_bytes_stddev") as f64,
    );
    // About 7.4 MB, nearly all from the blocks sampled at 1 MiB (about 50 of them:
    // estimated from so few, it is within a factor of 2 far beyond 4 standard
    // deviations). The dense sampling alone would give 0.2 MB.
    let expected =
        (variance(BLOCKS, 256.0, (1 << 20) as f64) + variance(BLOCKS, 256.0, 1024.0)).sqrt();
    assert!(
        stddev > expected / 2.0 && stddev < expected * 2.0,
        "stddev {stddev}, expected about {expected}"
    );
    let truth = (2 * BLOCKS * 256) as f64;
    assert!(
        (estimate - truth).abs() < 4.0 * expected,
        "{estimate} estimated of {truth}"
    );
    black_box(kept);
}
