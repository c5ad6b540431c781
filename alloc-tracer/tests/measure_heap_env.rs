//! `measure` turns an off tracer to `count` with heap sampling as the environment sets
//! it (`ALLOC_TRACE_HEAP`), as `ALLOC_TRACE=count` would: the settings in force read
//! heap sampling as off while the mode is. One test in its own binary: it sets an
//! environment variable, and the mode is process-wide.

use alloc_tracer::{Mode, Settings, TracingAllocator, measure};

#[global_allocator]
static GLOBAL: TracingAllocator<tikv_jemallocator::Jemalloc> =
    TracingAllocator::new(tikv_jemallocator::Jemalloc);

#[test]
fn measure_keeps_the_environments_heap_sampling() {
    assert_eq!(
        Settings::current().mode,
        Mode::Off,
        "run without ALLOC_TRACE"
    );
    // SAFETY: the only test of this binary, and no thread of its own reads the
    // environment meanwhile (the tracer reads it at the first allocation, long done,
    // and in `measure`, below, on this thread).
    unsafe { std::env::set_var("ALLOC_TRACE_HEAP", "64KiB") };
    let (v, m) = measure(|| vec![1u8; 100]);
    assert_eq!((v.len(), m.allocs), (100, 1));
    let now = Settings::current();
    assert_eq!(now.mode, Mode::Count);
    assert_eq!(now.heap_interval, Some(64 << 10));
}
