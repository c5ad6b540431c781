//! fork() while other threads record in `sites` mode, every block followed to its
//! free, one names the allocator again and again and another applies settings
//! again and again: each child allocates, frees, starts a thread, enters a phase,
//! names the allocator and applies settings, and must finish. Without
//! fork handlers, a child inherits a tracer lock held by another thread and hangs.
//! One test: the mode is process-wide.

mod common;

use alloc_tracer::{Mode, Settings, TracingAllocator};
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::Duration;

#[global_allocator]
static GLOBAL: TracingAllocator<tikv_jemallocator::Jemalloc> =
    TracingAllocator::new(tikv_jemallocator::Jemalloc);

const CHILDREN: usize = 40;

fn churn(n: usize) {
    let mut v: Vec<Box<[u8; 160]>> = Vec::new();
    for i in 0..n {
        v.push(Box::new([i as u8; 160]));
        if v.len() > 64 {
            v.clear();
        }
    }
    black_box(v);
}

fn child() -> i32 {
    // The child's counts start as a copy of the parent's: what it records is the
    // growth from here.
    let before = alloc_tracer::counts().total(|p| p.allocs);
    churn(2000);
    let _p = alloc_tracer::phase("child");
    let t = std::thread::spawn(|| churn(500));
    if t.join().is_err() {
        return 3;
    }
    // Takes the name's lock, which the thread naming it in the parent may have held
    // at the fork.
    alloc_tracer::set_allocator_name("jemalloc");
    // And `Settings::apply`'s, likewise.
    sites().apply();
    // Each churn allocates at least its boxes: 2,000 here, 500 on the thread.
    let recorded = alloc_tracer::counts().total(|p| p.allocs) - before;
    if recorded < 2500 { 4 } else { 0 }
}

fn sites() -> Settings {
    Settings {
        mode: Mode::Sites,
        lifetime_interval: 1,
        ..Default::default()
    }
}

#[test]
fn forked_children_never_hang() {
    sites().apply();
    let stop = AtomicBool::new(false);
    let mut hung = 0;
    let mut failed = 0;
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                while !stop.load(Relaxed) {
                    churn(100);
                }
            });
        }
        s.spawn(|| {
            while !stop.load(Relaxed) {
                alloc_tracer::set_allocator_name("jemalloc");
            }
        });
        s.spawn(|| {
            while !stop.load(Relaxed) {
                sites().apply();
            }
        });
        for _ in 0..CHILDREN {
            // The child runs only `child` (allocating, a thread, a phase).
            match common::in_child(Duration::from_secs(20), child) {
                Some(0) => {}
                Some(_) => failed += 1,
                None => hung += 1,
            }
        }
        stop.store(true, Relaxed);
    });
    assert_eq!(
        (hung, failed),
        (0, 0),
        "of {CHILDREN} children: (hung, failed)"
    );
}
