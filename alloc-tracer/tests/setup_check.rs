//! The report says when stacks end before main or a thread's start, as they do in
//! code built without frame pointers: here, an allocating function called with a
//! frame pointer of 0, which ends every walk at it. Stacks of code built with frame
//! pointers reach a thread's start and raise no warning. One test: the mode is
//! process-wide.
#![cfg(target_arch = "x86_64")]

use alloc_tracer::{Mode, Settings, TracingAllocator};
use alloc_tracer_format::manifest::Manifest;
use std::hint::black_box;

#[global_allocator]
static GLOBAL: TracingAllocator<tikv_jemallocator::Jemalloc> =
    TracingAllocator::new(tikv_jemallocator::Jemalloc);

const N: usize = 20_000;

extern "C" fn allocate() {
    for i in 0..N {
        black_box(Box::new([i as u64; 8]));
    }
}

/// Calls `f` with the frame pointer zeroed, as a caller without frame pointers may
/// leave it: a walk from inside `f` ends at `f`'s frame.
fn call_without_frame_pointer(f: extern "C" fn()) {
    // SAFETY: the frame pointer is kept in a callee-saved register across the call
    // and restored after it; `f` follows the C ABI, does not unwind, and gets a stack
    // aligned as any call from Rust code gets it.
    unsafe {
        std::arch::asm!(
            "mov r12, rbp",
            "xor ebp, ebp",
            "call rax",
            "mov rbp, r12",
            in("rax") f,
            out("r12") _,
            clobber_abi("C"),
        );
    }
}

fn report(name: &str, work: impl FnOnce() + Send + 'static) -> (Manifest, String) {
    Settings {
        mode: Mode::Sites,
        depth: 30,
        ..Default::default()
    }
    .apply();
    // A thread of its own, so that earlier threads' stacks are not in the picture
    // more than they must be: the report covers the whole process.
    std::thread::spawn(work).join().unwrap();
    let dir =
        std::env::temp_dir().join(format!("alloc-tracer-setup-{name}-{}", std::process::id()));
    let summary = alloc_tracer::write_report(&dir).unwrap();
    let manifest = Manifest::from_json(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    (manifest, summary.to_string())
}

#[test]
fn stacks_that_end_early_are_reported_with_the_fix() {
    let (complete, summary) = report("with", || allocate());
    assert!(
        complete.setup_warning().is_none(),
        "{:?}\n{summary}",
        complete.dropped
    );
    assert!(!summary.contains("force-frame-pointers"), "{summary}");

    let (early, summary) = report("without", || call_without_frame_pointer(allocate));
    assert!(
        early.dropped.stacks_ending_early >= 1,
        "{:?}",
        early.dropped
    );
    assert!(
        early.stacks_ending_early_share() > 0.2,
        "{:?}",
        early.dropped
    );
    let warning = early.setup_warning().unwrap();
    assert!(warning.contains("-C force-frame-pointers=yes"), "{warning}");
    assert!(summary.contains(&warning), "{summary}");
    Settings::default().apply();
}
