//! A run that changes the stack depth while it records sites: the report lists the
//! depths, counts the stacks cut at the smaller one as cut (not as stacks that end
//! early, which would blame missing frame pointers), and warns that they are. One
//! test: the settings are process-wide.

mod common;

use alloc_tracer::{Mode, Settings, TracingAllocator};
use alloc_tracer_format::manifest::Manifest;
use std::hint::black_box;

#[global_allocator]
static GLOBAL: TracingAllocator<tikv_jemallocator::Jemalloc> =
    TracingAllocator::new(tikv_jemallocator::Jemalloc);

/// `n` blocks, each freed at once, three calls down from the test.
#[inline(never)]
fn outer(n: usize) {
    middle(n);
    black_box(());
}

#[inline(never)]
fn middle(n: usize) {
    inner(n);
    black_box(());
}

#[inline(never)]
fn inner(n: usize) {
    for _ in 0..n {
        black_box(Vec::<u8>::with_capacity(100));
    }
}

fn at_depth(depth: usize) {
    Settings {
        mode: Mode::Sites,
        depth,
        lifetime_interval: 0,
        heap_interval: Some(0),
        ..Settings::current()
    }
    .apply();
}

#[test]
fn stacks_cut_at_an_earlier_depth_are_cut_not_ending_early() {
    let scratch = common::scratch("depth-change");
    at_depth(2);
    outer(30_000);
    at_depth(alloc_tracer::MAX_DEPTH);
    outer(10_000);
    let dir = scratch.join("report");
    let summary = alloc_tracer::write_report(&dir).unwrap();
    let m = Manifest::from_json(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(m.stack_depth, alloc_tracer::MAX_DEPTH);
    assert_eq!(m.stack_depths, vec![2, alloc_tracer::MAX_DEPTH]);
    let d = &m.dropped;
    // The 30,000 walked at 2 frames are cut; those at 62 reach the test's thread.
    assert!(
        (30_000..31_000).contains(&d.stacks_at_depth_limit_alloc_count),
        "{d:?}"
    );
    assert_eq!(d.stacks_ending_early_alloc_count, 0, "{d:?}");
    // Three in four allocations at cut stacks: said, with the depth that cut them.
    let w = summary.setup_warning.expect("a warning");
    assert!(w.contains("cut at the depth limit (2 frames)"), "{w}");
    assert!(!w.contains("force-frame-pointers"), "{w}");

    // No part of the run was in `count` mode: none counted without a stack, though
    // reports written while another thread allocates read its sites and its totals
    // a moment apart.
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                outer(100);
            }
        });
        for i in 0..20 {
            let busy = scratch.join(format!("busy-{i}"));
            alloc_tracer::write_report(&busy).unwrap();
            let m = Manifest::from_json(&std::fs::read(busy.join("manifest.json")).unwrap());
            assert_eq!(m.unwrap().allocs_without_stacks, Some(0), "report {i}");
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
    });
}
