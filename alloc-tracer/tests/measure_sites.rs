//! In `sites` mode a failed `assert_allocs!` names the sites that allocated most
//! during the measured closure, as reports name them. One test in its own binary:
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
    let failed = std::panic::catch_unwind(|| assert_allocs!(m, allocs <= 50)).unwrap_err();
    let text = failed.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(text.contains("allocs = 101 (budget 50)"), "{text}");
    let sites = text
        .split("most allocations at: ")
        .nth(1)
        .unwrap_or_else(|| panic!("{text}"));
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
