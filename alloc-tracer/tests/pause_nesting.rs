//! Pause guards nest in any order, on one thread or several: recording resumes when
//! the last one is dropped, not when the first one made is. One test: pausing is
//! process-wide.

use alloc_tracer::{Mode, Settings, TracingAllocator};
use std::hint::black_box;

#[global_allocator]
static GLOBAL: TracingAllocator<tikv_jemallocator::Jemalloc> =
    TracingAllocator::new(tikv_jemallocator::Jemalloc);

/// Allocations this process has recorded so far.
fn recorded() -> u64 {
    alloc_tracer::counts().total(|p| p.allocs)
}

/// Whether an allocation made now is recorded.
fn recording() -> bool {
    let before = recorded();
    black_box(vec![0u8; 100]);
    recorded() > before
}

#[test]
fn recording_resumes_with_the_last_guard() {
    Settings {
        mode: Mode::Count,
        ..Default::default()
    }
    .apply();
    assert!(recording());
    // Dropped out of order on one thread.
    let first = alloc_tracer::pause();
    let second = alloc_tracer::pause();
    drop(first);
    assert!(!recording(), "resumed while a guard was alive");
    // measure would count nothing now, on a thread that has recorded before: it
    // says so rather than pass every budget.
    let paused = std::panic::catch_unwind(|| alloc_tracer::measure(|| vec![1u8; 10]));
    assert!(paused.is_err(), "measure returned while paused");
    drop(second);
    assert!(recording());
    // Two threads' guards, the first thread's dropped first.
    let mine = alloc_tracer::pause();
    let (made, made_rx) = std::sync::mpsc::channel();
    let (release, release_rx) = std::sync::mpsc::channel::<()>();
    let other = std::thread::spawn(move || {
        let theirs = alloc_tracer::pause();
        made.send(()).unwrap();
        release_rx.recv().unwrap();
        drop(theirs);
    });
    made_rx.recv().unwrap();
    drop(mine);
    assert!(
        !recording(),
        "resumed while another thread's guard was alive"
    );
    release.send(()).unwrap();
    other.join().unwrap();
    assert!(recording());
}
