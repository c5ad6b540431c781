//! A run that switches modes: each site's counts keep the weight they were recorded
//! under (1 in `sites`, the interval in `sample:N`), whatever the mode when the
//! report is written; so do followed blocks' live bytes. One test: the mode is
//! process-wide.

mod common;

use alloc_tracer::{Mode, Settings, TracingAllocator};
use std::hint::black_box;

#[global_allocator]
static GLOBAL: TracingAllocator<tikv_jemallocator::Jemalloc> =
    TracingAllocator::new(tikv_jemallocator::Jemalloc);

/// 100-byte blocks, each freed before the next allocation.
#[inline(never)]
fn made_in_sites(n: usize) {
    for _ in 0..n {
        black_box(Vec::<u8>::with_capacity(100));
    }
}

/// The same (101 bytes: a body of its own, never merged with another), made in
/// `sample:10`.
#[inline(never)]
fn made_one_in_ten(n: usize) {
    for _ in 0..n {
        black_box(Vec::<u8>::with_capacity(101));
    }
}

/// The same (102 bytes), made in `sample:1000`.
#[inline(never)]
fn made_one_in_a_thousand(n: usize) {
    for _ in 0..n {
        black_box(Vec::<u8>::with_capacity(102));
    }
}

/// `n` blocks of 100 bytes kept live.
#[inline(never)]
fn kept(n: usize) -> Vec<Vec<u8>> {
    (0..n).map(|_| Vec::with_capacity(100)).collect()
}

fn apply(mode: Mode) {
    Settings {
        mode,
        depth: alloc_tracer::MAX_DEPTH,
        ..Settings::current()
    }
    .apply();
}

/// `actual` within `share` of `expected`.
fn near(actual: u64, expected: u64, share: f64) -> bool {
    (actual as f64 - expected as f64).abs() <= share * expected as f64
}

#[test]
fn each_count_keeps_the_weight_it_was_recorded_under() {
    const SITES: u64 = 20_000;
    const TEN: u64 = 200_000;
    const THOUSAND: u64 = 2_000_000;
    const KEPT: u64 = 50_000;
    let scratch = common::scratch("mixed-weights");

    apply(Mode::Sites);
    made_in_sites(SITES as usize);
    apply(Mode::Sample(10));
    made_one_in_ten(TEN as usize);
    let live = kept(KEPT as usize);
    // About 5,000 followed blocks live, each standing for 10.
    let at_ten = scratch.join("at-ten");
    alloc_tracer::write_report(&at_ten).unwrap();
    apply(Mode::Sample(1000));
    made_one_in_a_thousand(THOUSAND as usize);
    let at_thousand = scratch.join("at-thousand");
    alloc_tracer::write_report(&at_thousand).unwrap();
    apply(Mode::Off);
    let off = scratch.join("off");
    alloc_tracer::write_report(&off).unwrap();

    // Every stack recorded in `sites` mode counts once, whatever the mode when the
    // report is written.
    for dir in [&at_ten, &at_thousand, &off] {
        let sum = |col: &str| common::sum_for_function(dir, "made_in_sites", col);
        assert_eq!(sum("alloc_count"), SITES, "{}", dir.display());
        assert_eq!(sum("sampled_count"), SITES);
        assert_eq!(sum("bytes_requested"), SITES * 100);
        assert_eq!(sum("temporary_count"), SITES);
    }
    for dir in [&at_thousand, &off] {
        let sum = |f: &str, col: &str| common::sum_for_function(dir, f, col);
        let manifest = std::fs::read_to_string(dir.join("manifest.json")).unwrap();
        assert!(
            manifest.contains("\"stack_weights_changed\": true")
                && manifest.contains("\"weighted_as_recorded\": true")
                // Written in `off` mode too: the last stacks' interval.
                && manifest.contains("\"sample_interval\": 1000,"),
            "{manifest}"
        );
        // One in 10: 20,000 samples of 200,000, each counted 10 times, every one a
        // temporary (spread 0.67 %).
        let ten = sum("made_one_in_ten", "alloc_count");
        assert!(near(ten, TEN, 0.05), "{ten} for {TEN}");
        assert_eq!(sum("made_one_in_ten", "temporary_count"), ten);
        assert_eq!(sum("made_one_in_ten", "sampled_count") * 10, ten);
        assert_eq!(sum("made_one_in_ten", "bytes_requested"), ten * 101);
        // One in 1,000: 2,000 samples (spread 2.2 %).
        let thousand = sum("made_one_in_a_thousand", "alloc_count");
        assert!(near(thousand, THOUSAND, 0.12), "{thousand} for {THOUSAND}");
        assert_eq!(
            sum("made_one_in_a_thousand", "sampled_count") * 1000,
            thousand
        );
        assert_eq!(sum("made_one_in_a_thousand", "temporary_count"), thousand);
    }
    // The blocks kept live, followed one in 10, each stood for 10 blocks when
    // followed: the estimate of their live bytes holds whatever the interval now.
    let class_bytes = 112;
    for dir in [&at_ten, &at_thousand] {
        // The blocks' rows, not the vector's that holds them (recorded whole).
        let bytes: u64 = common::rows_of(dir, "sites.parquet", "kept", Some(class_bytes))
            .iter()
            .map(|r| common::u64_of(r, "live_bytes_estimate"))
            .sum();
        assert!(
            near(bytes, KEPT * class_bytes, 0.05),
            "{bytes} live bytes estimated for {} in {}",
            KEPT * class_bytes,
            dir.display()
        );
    }
    black_box(live);

    // `sample:1`, then `count`: the report still reads as sampled (one in 1), not
    // as `sites`, which weighs alike but records large blocks and lifetimes apart.
    apply(Mode::Sample(1));
    black_box(kept(10));
    apply(Mode::Count);
    let after_one = scratch.join("after-sample-1");
    alloc_tracer::write_report(&after_one).unwrap();
    let manifest = std::fs::read_to_string(after_one.join("manifest.json")).unwrap();
    for field in [
        "\"sample_interval\": 1,",
        "\"sample_all_from_bytes\": 262144,",
        "\"lifetime_interval\": 1,",
    ] {
        assert!(manifest.contains(field), "{field} in {manifest}");
    }
}
