//! Blocks are followed again after a switch to `sites`, on a thread whose countdown
//! was drawn while none were followed: one that sampled under `sample:N` (sampling
//! follows its sampled blocks, not a countdown), and one that started while the
//! lifetime interval was 0, and one that allocates on while another thread changes
//! the interval. One test: the mode is process-wide.

mod common;

use alloc_tracer::{Mode, Settings, TracingAllocator};
use std::hint::black_box;

#[global_allocator]
static GLOBAL: TracingAllocator<tikv_jemallocator::Jemalloc> =
    TracingAllocator::new(tikv_jemallocator::Jemalloc);

const N: usize = 2000;
/// Allocations after the switch: a thread takes up new intervals within 1024 of its
/// allocations, so at least 90 % of these are followed.
const AFTER: usize = 20_000;

#[inline(never)]
fn before_switch() {
    for i in 0..N {
        black_box(Box::new([i as u8; 48]));
    }
}

// Each function allocates its own size, so that the linker cannot fold them into
// one (identical code folding would give the three one name).
#[inline(never)]
fn after_switch_from_sample() {
    for i in 0..AFTER {
        black_box(Box::new([i as u8; 56]));
    }
}

#[inline(never)]
fn after_switch_from_none() {
    for i in 0..AFTER {
        black_box(Box::new([i as u8; 64]));
    }
}

#[inline(never)]
fn after_switch_by_another() {
    for i in 0..AFTER {
        black_box(Box::new([i as u8; 72]));
    }
}

fn sites(lifetime_interval: u64) -> Settings {
    Settings {
        mode: Mode::Sites,
        lifetime_interval,
        ..Default::default()
    }
}

#[test]
fn following_resumes_after_mode_and_interval_changes() {
    // A thread that sampled (every allocation: sample:1), then `sites` following
    // every block.
    let from_sample = std::thread::spawn(|| {
        Settings {
            mode: Mode::Sample(1),
            ..Default::default()
        }
        .apply();
        before_switch();
        sites(1).apply();
        after_switch_from_sample();
    });
    from_sample.join().unwrap();

    // A thread that started while no blocks were followed, then interval 1.
    let from_none = std::thread::spawn(|| {
        sites(0).apply();
        before_switch();
        sites(1).apply();
        after_switch_from_none();
    });
    from_none.join().unwrap();

    // A thread that drew its countdown while none were followed, and another thread
    // sets interval 1: it takes that up at its next visit to the cold side.
    sites(0).apply();
    let turns = std::sync::Arc::new(std::sync::Barrier::new(2));
    let by_another = std::thread::spawn({
        let turns = turns.clone();
        move || {
            before_switch();
            turns.wait();
            turns.wait();
            after_switch_by_another();
        }
    });
    turns.wait();
    sites(1).apply();
    turns.wait();
    by_another.join().unwrap();

    let dir_scratch = common::scratch("resume");

    let dir = dir_scratch.join("report");
    alloc_tracer::write_report(&dir).unwrap();
    Settings::default().apply();
    for f in [
        "after_switch_from_sample",
        "after_switch_from_none",
        "after_switch_by_another",
    ] {
        let allocs = common::sum_for_function(&dir, f, "alloc_count");
        let followed = common::sum_for_function(&dir, f, "followed_count");
        assert_eq!(allocs, AFTER as u64, "{f}");
        // Every block is followed (interval 1), but for those before the thread took
        // up the new interval, and those whose entry in the table of followed blocks
        // another one held.
        assert!(
            followed * 10 >= allocs * 9,
            "{f}: {followed} of {allocs} followed"
        );
    }
}
