//! A run that records sites for one part and only counts another: the report says
//! which mode its stacks were recorded in, and how many allocations `count` mode
//! counted with no stack (in no site row). One test: the mode is process-wide.

mod common;

use alloc_tracer::{Mode, Settings, TracingAllocator};
use alloc_tracer_format::manifest::Manifest;
use std::hint::black_box;
use std::path::Path;

#[global_allocator]
static GLOBAL: TracingAllocator<tikv_jemallocator::Jemalloc> =
    TracingAllocator::new(tikv_jemallocator::Jemalloc);

/// `n` 100-byte blocks, each freed before the next allocation.
#[inline(never)]
fn made(n: usize) {
    for _ in 0..n {
        black_box(Vec::<u8>::with_capacity(100));
    }
}

fn apply(mode: Mode) {
    Settings {
        mode,
        ..Settings::current()
    }
    .apply();
}

fn manifest(dir: &Path) -> Manifest {
    Manifest::from_json(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap()
}

/// Allocations and reallocs `work` made, as the tracer counted them.
fn counted(work: impl FnOnce()) -> u64 {
    let d = common::change_during(work);
    d(|p| p.allocs) + d(|p| p.reallocs)
}

#[test]
fn allocations_counted_without_stacks_are_told_apart() {
    let scratch = common::scratch("count-part");

    // `count` from the start, then `sites`, then `count` again.
    apply(Mode::Count);
    let first = counted(|| made(3_000));
    let count_only = scratch.join("count-only");
    alloc_tracer::write_report(&count_only).unwrap();
    apply(Mode::Sites);
    made(20_000);
    let sites_only = scratch.join("sites-now");
    alloc_tracer::write_report(&sites_only).unwrap();
    apply(Mode::Count);
    let second = counted(|| made(5_000));
    let count_now = scratch.join("count-now");
    alloc_tracer::write_report(&count_now).unwrap();
    apply(Mode::Off);
    let off_now = scratch.join("off-now");
    alloc_tracer::write_report(&off_now).unwrap();

    // Every allocation is in a site or counted without a stack, none in both: the
    // sites' calls and those add up to the totals, exactly (one thread allocates).
    let parts = |dir: &Path| {
        let m = manifest(dir);
        let in_sites: u64 = common::read_table(dir, "sites.parquet")
            .iter()
            .map(|r| common::u64_of(r, "alloc_count") + common::u64_of(r, "realloc_count"))
            .sum();
        let total = m.totals.alloc_count + m.totals.realloc_count;
        (m, in_sites, total)
    };
    // So far, no stack: every allocation is counted without one.
    let (m, in_sites, total) = parts(&count_only);
    assert_eq!(m.stacks_mode, None);
    assert_eq!((in_sites, m.allocs_without_stacks), (0, Some(total)));

    let (m, in_sites, total) = parts(&sites_only);
    assert_eq!(m.stacks_mode.as_deref(), Some("sites"));
    let without = m.allocs_without_stacks.unwrap();
    assert_eq!(in_sites + without, total);
    // The first stretch: the window's 3,000, and the few the test made about it in
    // `count` mode (its wait for quiet, before `apply` ended the stretch).
    assert!(
        (first..first + 100).contains(&without),
        "{without} counted without stacks, {first} made in count mode"
    );
    // Written in `count` and then `off`: the stacks are still `sites`', and the
    // second stretch is added; `off` counts nothing more.
    for dir in [&count_now, &off_now] {
        let (m, in_sites, total) = parts(dir);
        assert_eq!(m.stacks_mode.as_deref(), Some("sites"), "{}", dir.display());
        let all_without = m.allocs_without_stacks.unwrap();
        assert_eq!(in_sites + all_without, total, "{}", dir.display());
        let more = all_without - without;
        assert!(
            (second..second + 100).contains(&more),
            "{more} more counted without stacks, {second} made in count mode"
        );
        // None of them is in a site: `made`'s rows hold the 20,000 alone.
        assert_eq!(
            common::sum_for_function(dir, "made", "alloc_count"),
            20_000,
            "{}",
            dir.display()
        );
    }
    assert_eq!(manifest(&count_now).mode, "count");
    assert_eq!(manifest(&off_now).mode, "off");

    // Threads that allocate while another switches between `sites` and `count` over
    // and over: each allocation is in a site or counted without a stack, whichever
    // mode it saw, and the report, written once they are joined, adds them up.
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        for _ in 0..3 {
            s.spawn(|| {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    made(100);
                }
            });
        }
        for i in 0..200 {
            apply(if i % 2 == 0 { Mode::Sites } else { Mode::Count });
            made(50);
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    let busy = scratch.join("busy");
    alloc_tracer::write_report(&busy).unwrap();
    let (m, in_sites, total) = parts(&busy);
    assert_eq!(m.stacks_mode.as_deref(), Some("sites"));
    assert_eq!(in_sites + m.allocs_without_stacks.unwrap(), total);
    // Both kinds were made (how many of each depends on the threads' timing).
    let without = m.allocs_without_stacks.unwrap();
    assert!(
        in_sites > 0 && without > 0,
        "{in_sites} in sites, {without} without"
    );
}
