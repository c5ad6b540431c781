//! `sample:N` mode: every allocation counted; the sampled ones attributed to the
//! right site with the right frames; per-site figures unbiased. One test: the global
//! allocator is shared state.

mod common;

use alloc_tracer::{Mode, Settings, TracingAllocator};
use std::hint::black_box;

#[global_allocator]
static GLOBAL: TracingAllocator<tikv_jemallocator::Jemalloc> =
    TracingAllocator::new(tikv_jemallocator::Jemalloc);

const N_EXACT: usize = 1000;
const N_ESTIMATED: usize = 80_000;
const INTERVAL: u64 = 8;

/// 160-byte blocks, each freed before the next allocation: all temporaries.
#[inline(never)]
fn sampled_temporaries(n: usize) {
    for _ in 0..n {
        let v: Vec<u64> = Vec::with_capacity(20);
        black_box(&v);
    }
}

/// 48-byte blocks, for the estimate.
#[inline(never)]
fn sampled_now_and_then(n: usize) {
    for _ in 0..n {
        let v: Vec<u8> = Vec::with_capacity(48);
        black_box(&v);
    }
}

/// The first block of a pair, freed after the second was allocated: never a
/// temporary.
#[inline(never)]
fn first_of_pair() -> Vec<u64> {
    black_box(Vec::with_capacity(24))
}

/// The second block of a pair, freed just after the first, before any other
/// allocation: always a temporary.
#[inline(never)]
fn second_of_pair() -> Vec<u64> {
    black_box(Vec::with_capacity(28))
}

#[inline(never)]
fn sampled_pairs(n: usize) {
    for _ in 0..n {
        let first = first_of_pair();
        let second = second_of_pair();
        drop(first);
        drop(second);
    }
}

fn settings(mode: Mode) -> Settings {
    Settings {
        mode,
        depth: alloc_tracer::MAX_DEPTH,
        lifetime_interval: 0,
        ..Default::default()
    }
}

#[test]
fn sampled_stacks_name_their_site_and_estimate_its_counts() {
    // One in 1: every allocation takes the sampled path, so its counts are exact.
    settings(Mode::Sample(1)).apply();
    let d = common::change_during(|| sampled_temporaries(N_EXACT));
    assert_eq!(d(|p| p.allocs), N_EXACT as u64);
    assert_eq!(d(|p| p.frees), N_EXACT as u64);
    assert_eq!(d(|p| p.temporaries), N_EXACT as u64);
    assert_eq!(d(|p| p.bytes_requested), 160 * N_EXACT as u64);

    let dir_scratch = common::scratch("sampled");

    let dir = dir_scratch.join("every");
    alloc_tracer::write_report(&dir).unwrap();
    let sum = |f: &str, col: &str| common::sum_for_function(&dir, f, col);
    assert_eq!(sum("sampled_temporaries", "alloc_count"), N_EXACT as u64);
    assert_eq!(sum("sampled_temporaries", "sampled_count"), N_EXACT as u64);
    assert_eq!(
        sum("sampled_temporaries", "temporary_count"),
        N_EXACT as u64
    );
    // The tracer's own frames are not in the stacks, and no frame of the program
    // was skipped: the innermost frame is the allocator's caller (inside Vec).
    let functions = common::site_functions(&dir);
    for frames in functions.values() {
        assert!(
            !frames.iter().any(|f| f.contains("alloc_tracer::")),
            "tracer frames in {frames:?}"
        );
    }
    let site = functions
        .values()
        .find(|fs| fs.iter().any(|f| f.contains("sampled_temporaries")))
        .unwrap();
    assert!(
        !site[0].contains("sampled_temporaries"),
        "the allocation's own frames were skipped: {site:?}"
    );

    // One in 8: all counted, about one in 8 sampled, and the estimate within 5 %
    // (the number of samples is binomial: sd sqrt(10,000 x 7/8) = 94 samples, 0.94 %
    // of the expected 10,000, so 5 % is over 5 sd).
    settings(Mode::Sample(INTERVAL)).apply();
    let d = common::change_during(|| sampled_now_and_then(N_ESTIMATED));
    assert_eq!(d(|p| p.allocs), N_ESTIMATED as u64);
    let sampled = d(|p| p.sampled);
    // Temporaries are counted among sampled blocks, all temporaries here, each for
    // the N blocks it stands for.
    assert_eq!(d(|p| p.temporaries), sampled * INTERVAL);
    let expected = N_ESTIMATED as u64 / INTERVAL;
    assert!(
        sampled.abs_diff(expected) * 20 < expected,
        "{sampled} sampled of {N_ESTIMATED}, expected about {expected}"
    );

    let dir_scratch = common::scratch("sampled");

    let dir = dir_scratch.join("one-in-8");
    let counted_temporaries: u64 = alloc_tracer::counts()
        .phases
        .iter()
        .map(|p| p.temporaries)
        .sum();
    alloc_tracer::write_report(&dir).unwrap();
    // Reports give them as counted, weighted like the per-site figures.
    let phase_temporaries: u64 = common::read_table(&dir, "phases.parquet")
        .iter()
        .map(|r| common::u64_of(r, "temporary_count"))
        .sum();
    assert_eq!(phase_temporaries, counted_temporaries);
    let sum = |f: &str, col: &str| common::sum_for_function(&dir, f, col);
    let samples = sum("sampled_now_and_then", "sampled_count");
    assert_eq!(samples, sampled, "every sample has the function's site");
    let estimate = sum("sampled_now_and_then", "alloc_count");
    assert_eq!(estimate, samples * INTERVAL);
    assert!(
        estimate.abs_diff(N_ESTIMATED as u64) * 20 < N_ESTIMATED as u64,
        "estimated {estimate} allocations of {N_ESTIMATED}"
    );

    // A sampled block is a temporary only if its thread allocated nothing before
    // freeing it, sampled or not: the first of each pair never is, the second
    // always. (About one pair in 8 has its first block sampled and its second not,
    // so a check that missed the allocation in between would count hundreds.)
    let d = common::change_during(|| sampled_pairs(N_ESTIMATED / 2));
    let dir_scratch = common::scratch("sampled");
    let dir = dir_scratch.join("pairs");
    alloc_tracer::write_report(&dir).unwrap();
    let sum = |f: &str, col: &str| common::sum_for_function(&dir, f, col);
    let (first, second) = (
        sum("first_of_pair", "sampled_count"),
        sum("second_of_pair", "sampled_count"),
    );
    assert!(first > 0 && second > 0, "{first} and {second} sampled");
    assert_eq!(sum("first_of_pair", "temporary_count"), 0);
    assert_eq!(sum("second_of_pair", "temporary_count"), second * INTERVAL);
    assert_eq!(d(|p| p.temporaries), second * INTERVAL);
}
