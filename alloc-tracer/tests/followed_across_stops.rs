//! Blocks followed when recording of frees stops (a switch to a mode that follows
//! nothing, or a pause) are dropped, not left followed: their frees go unseen, so a
//! block left followed would stay "live" in the report for good, and a later free of
//! another block at its address would end it, giving the old site a lifetime that
//! is not one. One test: the mode is process-wide.

mod common;

use alloc_tracer::{Mode, Settings, TracingAllocator};
use alloc_tracer_format::manifest::Manifest;
use std::hint::black_box;

#[global_allocator]
static GLOBAL: TracingAllocator<tikv_jemallocator::Jemalloc> =
    TracingAllocator::new(tikv_jemallocator::Jemalloc);

const N: usize = 500;

type Blocks = Vec<Box<[u8; 72]>>;

// Each function allocates its own value, so that the linker cannot fold them.
#[inline(never)]
fn kept_across_switch(blocks: &mut Blocks) {
    for i in 0..N {
        blocks.push(Box::new([i as u8; 72]));
    }
}

#[inline(never)]
fn kept_across_pause(blocks: &mut Blocks) {
    for i in 0..N {
        blocks.push(Box::new([(i + 1) as u8; 72]));
    }
}

/// Blocks of the same size, freed at once: they take the freed blocks' addresses.
#[inline(never)]
fn reusing_addresses(blocks: &mut Blocks) {
    for i in 0..N {
        blocks.push(Box::new([(i + 2) as u8; 72]));
    }
    blocks.clear();
}

fn settings(mode: Mode, lifetime_interval: u64) -> Settings {
    Settings {
        mode,
        lifetime_interval,
        heap_interval: Some(0),
        ..Default::default()
    }
}

#[test]
fn blocks_followed_when_frees_stop_being_recorded_are_dropped() {
    // One thread does it all: the thread that applies settings takes up their
    // intervals at once.
    std::thread::spawn(|| {
        let mut blocks = Blocks::with_capacity(N);
        let mut reuse = Blocks::with_capacity(N);
        // A switch to `count` (no heap sampling): nothing followed any more.
        settings(Mode::Sites, 1).apply();
        kept_across_switch(black_box(&mut blocks));
        settings(Mode::Count, 1).apply();
        blocks.clear();
        // Back in `sites`, following nothing new; frees look followed blocks up.
        settings(Mode::Sites, 0).apply();
        reusing_addresses(black_box(&mut reuse));
        // A pause.
        settings(Mode::Sites, 1).apply();
        kept_across_pause(black_box(&mut blocks));
        let paused = alloc_tracer::pause();
        blocks.clear();
        drop(paused);
        settings(Mode::Sites, 0).apply();
        reusing_addresses(black_box(&mut reuse));
    })
    .join()
    .unwrap();

    let dir_scratch = common::scratch("followed-across-stops");

    let dir = dir_scratch.join("report");
    alloc_tracer::write_report(&dir).unwrap();
    Settings::default().apply();
    for f in ["kept_across_switch", "kept_across_pause"] {
        let sum = |col| common::sum_for_function(&dir, f, col);
        assert_eq!(sum("alloc_count"), N as u64, "{f}");
        assert_eq!(
            sum("followed_count"),
            N as u64,
            "{f}: followed at interval 1"
        );
        assert_eq!(
            sum("followed_freed_count"),
            0,
            "{f}: no free of these was seen"
        );
        assert_eq!(sum("live_bytes_estimate"), 0, "{f}: none is live");
    }
    let manifest = Manifest::from_json(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    assert!(
        manifest.dropped.followed_dropped >= 2 * N as u64,
        "{} dropped",
        manifest.dropped.followed_dropped
    );
}
