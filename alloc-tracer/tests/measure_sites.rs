//! In `sites` mode a failed `assert_allocs!` names the sites that allocated most
//! during the measured closure, as reports name them. Tests in their own binary:
//! the mode is process-wide.

use alloc_tracer::{Mode, Settings, TracingAllocator, assert_allocs, measure};
use std::hint::black_box;

#[global_allocator]
static GLOBAL: TracingAllocator<tikv_jemallocator::Jemalloc> =
    TracingAllocator::new(tikv_jemallocator::Jemalloc);

#[inline(never)]
fn allocates_a_lot() {
    for i in 0..100u64 {
        black_box(Box::new([i; 4]));
    }
}

#[inline(never)]
fn allocates_a_little() {
    black_box(vec![1u8; 10]);
}

/// One allocation. Its callers call it in a loop of unknown length (not unrolled
/// into several call sites) and do something after each call (no tail call, which
/// would leave the caller's frame off the stack).
#[inline(never)]
fn helper() {
    black_box(Box::new([7u64; 3]));
}

#[inline(never)]
fn caller_a() {
    for _ in 0..black_box(2) {
        helper();
        black_box(());
    }
}

#[inline(never)]
fn caller_b() {
    for _ in 0..black_box(4) {
        helper();
        black_box(());
    }
    black_box(());
}

/// The message of a failed budget check.
fn failure_of(check: impl FnOnce() + std::panic::UnwindSafe) -> String {
    let failed = std::panic::catch_unwind(check).unwrap_err();
    failed.downcast_ref::<String>().cloned().unwrap_or_default()
}

/// The sites a failure message names, as it lists them.
fn named_sites(text: &str) -> &str {
    text.split("most allocations at: ")
        .nth(1)
        .unwrap_or_else(|| panic!("{text}"))
}

#[test]
fn sites_that_read_the_same_are_told_apart() {
    Settings {
        mode: Mode::Sites,
        ..Default::default()
    }
    .apply();
    let ((), m) = measure(|| {
        caller_a();
        caller_b();
    });
    assert_eq!(m.allocs, 6);
    let text = failure_of(|| assert_allocs!(m, allocs <= 1));
    let sites: Vec<&str> = named_sites(&text).split("; ").collect();
    // One helper, reached from two callers in this file: a report tells them apart
    // by the first frame where their stacks differ, and so does the message.
    assert_eq!(sites.len(), 2, "{text}");
    assert!(
        sites[0].starts_with("4 at helper") && sites[0].contains("[via caller_b"),
        "{text}"
    );
    assert!(
        sites[1].starts_with("2 at helper") && sites[1].contains("[via caller_a"),
        "{text}"
    );
    // The tracer's own `measure` is no one's caller.
    assert!(!text.contains("measure ("), "{text}");
}

#[test]
fn a_failed_budget_names_the_sites() {
    Settings {
        mode: Mode::Sites,
        ..Default::default()
    }
    .apply();
    // Before: this thread's site table already holds both sites, so the message
    // must come from what changed during the closure, not from the table's contents.
    allocates_a_lot();
    allocates_a_little();
    let ((), m) = measure(|| {
        allocates_a_lot();
        allocates_a_little();
    });
    assert_eq!(m.allocs, 101);
    let text = failure_of(|| assert_allocs!(m, allocs <= 50));
    assert!(text.contains("allocs = 101 (budget 50)"), "{text}");
    let sites = named_sites(&text);
    let first = sites.split("; ").next().unwrap();
    assert!(
        first.starts_with("100 at ") && first.contains("allocates_a_lot"),
        "{text}"
    );
    assert!(
        sites.contains("1 at ") && sites.contains("allocates_a_little"),
        "{text}"
    );
    // Within budget, nothing to say.
    assert_allocs!(m, allocs <= 101);
}
