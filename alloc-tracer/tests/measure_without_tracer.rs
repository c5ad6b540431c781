//! `measure` in a binary whose global allocator is not `TracingAllocator` (a
//! `tests/*.rs` file that forgot its own `#[global_allocator]`), and while recording
//! is paused: nothing would be counted, so every budget would pass. Both panic
//! saying why. One test: pausing is process-wide.

use std::panic::{AssertUnwindSafe, catch_unwind};

fn panic_text(f: impl FnOnce()) -> String {
    let payload = catch_unwind(AssertUnwindSafe(f)).expect_err("measure did not panic");
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

#[test]
fn measure_refuses_to_count_nothing() {
    let text = panic_text(|| {
        alloc_tracer::measure(|| vec![1u8; 100]);
    });
    assert!(
        text.contains("make TracingAllocator this binary's #[global_allocator]"),
        "{text}"
    );
    let text = panic_text(|| {
        alloc_tracer::measure_process(|| vec![1u8; 100]);
    });
    assert!(text.contains("#[global_allocator]"), "{text}");
    let _paused = alloc_tracer::pause();
    let text = panic_text(|| {
        alloc_tracer::measure(|| vec![1u8; 100]);
    });
    assert!(text.contains("recording is paused"), "{text}");
}
