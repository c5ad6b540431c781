//! Mode switches while another thread follows and frees blocks: `sites` (every block
//! followed for lifetimes and sampled for the heap) and `off` (frees unseen) taking
//! turns every few hundred microseconds. Each switch to `off` drops the followed
//! blocks while the other thread is between allocating, following and freeing them;
//! none may stay followed once all are freed (a block left behind by a switch is
//! live in the report for good), and nothing may deadlock. One test: the mode is
//! process-wide.

mod common;

use alloc_tracer::{Mode, Settings, TracingAllocator};
use alloc_tracer_format::manifest::Manifest;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

#[global_allocator]
static GLOBAL: TracingAllocator<tikv_jemallocator::Jemalloc> =
    TracingAllocator::new(tikv_jemallocator::Jemalloc);

static STOP: AtomicBool = AtomicBool::new(false);

/// Allocates and frees blocks until told to stop.
#[inline(never)]
fn churn() {
    let mut blocks: Vec<Box<[u8; 88]>> = Vec::with_capacity(32);
    while !STOP.load(Relaxed) {
        for i in 0..32 {
            blocks.push(black_box(Box::new([i as u8; 88])));
        }
        blocks.clear();
    }
}

fn sites() -> Settings {
    Settings {
        mode: Mode::Sites,
        lifetime_interval: 1,
        heap_interval: Some(1),
        ..Default::default()
    }
}

#[test]
fn blocks_followed_across_mode_switches_end_or_are_dropped() {
    sites().apply();
    let worker = std::thread::spawn(churn);
    let end = Instant::now() + Duration::from_millis(400);
    let mut switches = 0;
    while Instant::now() < end {
        Settings::default().apply();
        std::thread::sleep(Duration::from_micros(200));
        sites().apply();
        std::thread::sleep(Duration::from_micros(300));
        switches += 1;
    }
    STOP.store(true, Relaxed);
    worker.join().unwrap();

    let dir_scratch = common::scratch("followed-mode-race");

    let dir = dir_scratch.join("report");
    alloc_tracer::write_report(&dir).unwrap();
    Settings::default().apply();
    let manifest = Manifest::from_json(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    assert!(switches > 10, "{switches} switches");
    assert!(
        common::sum_for_function(&dir, "churn", "followed_freed_count") > 0,
        "blocks were followed to their free between switches"
    );
    assert!(
        manifest.dropped.followed_dropped > 0,
        "switches dropped blocks"
    );
    assert_eq!(
        common::sum_for_function(&dir, "churn", "live_bytes_estimate"),
        0,
        "every block was freed: none is followed"
    );
    let sampled_live =
        common::sum_for_function_in(&dir, "heap_end.parquet", "churn", "sampled_count");
    assert_eq!(
        sampled_live, 0,
        "every block was freed: none is sampled live"
    );
}
