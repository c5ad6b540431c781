//! Temporaries (blocks freed before their thread's next allocation): exact in the
//! phase totals in `sites` mode and in `sample:1` (every block sampled), counted
//! among sampled blocks only in `sample:N`, not counted in `count` mode; and a block
//! that was the latest before a stretch in `count` mode (which does not keep the
//! latest block) or a pause (which records nothing) is not taken for a temporary
//! after it. (`sampled_stacks.rs` checks
//! the estimate at N = 8.) One test: the mode is process-wide state.

mod common;

use alloc_tracer::{Mode, Settings, TracingAllocator};
use std::hint::black_box;

#[global_allocator]
static GLOBAL: TracingAllocator<tikv_jemallocator::Jemalloc> =
    TracingAllocator::new(tikv_jemallocator::Jemalloc);

fn temporaries() -> u64 {
    alloc_tracer::counts()
        .phases
        .iter()
        .map(|p| p.temporaries)
        .sum()
}

fn apply(mode: Mode) {
    Settings {
        mode,
        ..Default::default()
    }
    .apply();
}

fn block(fill: u8) -> Box<[u8; 100]> {
    black_box(Box::new([fill; 100]))
}

/// 200 temporaries and 100 blocks that are not.
fn workload() {
    for i in 0..100u8 {
        // Freed right away: a temporary.
        drop(block(i));
        // `a` is freed after `b` was allocated: not a temporary; `b` then is one
        // (a free is not an allocation).
        let a = block(i);
        let b = block(i);
        drop(a);
        drop(b);
    }
}

#[test]
fn temporaries_by_mode() {
    // Another thread's temporaries would count in the windows.
    common::wait_until_quiet();
    counted_in_sites_and_sample_modes_only();
    a_stretch_in_count_mode_ends_the_latest_block();
    a_pause_ends_the_latest_block();
    // Last: a thread keeps the countdown to its next sample across a change of
    // interval, so after this one `sample:1` would sample nothing for a long while.
    counted_among_sampled_blocks_only();
}

fn counted_in_sites_and_sample_modes_only() {
    for (mode, expected) in [(Mode::Sites, 200), (Mode::Sample(1), 200), (Mode::Count, 0)] {
        apply(mode);
        drop(block(0));
        let before = temporaries();
        workload();
        assert_eq!(temporaries() - before, expected, "{mode:?}");
    }
    apply(Mode::Off);
}

fn a_stretch_in_count_mode_ends_the_latest_block() {
    for stacks in [Mode::Sample(1), Mode::Sites] {
        apply(stacks);
        // The latest block when the mode changes.
        let kept = block(1);
        apply(Mode::Count);
        let other = block(2);
        drop(other);
        apply(stacks);
        let before = temporaries();
        // `other` was allocated after `kept`: freeing `kept` now is not a temporary's.
        drop(kept);
        assert_eq!(temporaries() - before, 0, "{stacks:?}");
    }
    apply(Mode::Off);
}

fn a_pause_ends_the_latest_block() {
    for stacks in [Mode::Sample(1), Mode::Sites] {
        apply(stacks);
        let kept = block(1);
        {
            let _paused = alloc_tracer::pause();
            drop(block(2));
        }
        let before = temporaries();
        drop(kept);
        assert_eq!(temporaries() - before, 0, "{stacks:?}");
    }
    apply(Mode::Off);
}

fn counted_among_sampled_blocks_only() {
    apply(Mode::Sample(1 << 40));
    // The first allocation may take a countdown left from `sample:1`; after it, not
    // one of these 300 blocks is sampled.
    drop(block(0));
    let before = temporaries();
    workload();
    assert_eq!(temporaries() - before, 0);
    apply(Mode::Off);
}
