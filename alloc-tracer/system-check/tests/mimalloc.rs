//! alloc-tracer over mimalloc: exact counts and a report with the documented tables
//! and columns.

mod common;

use alloc_tracer::TracingAllocator;

#[global_allocator]
static GLOBAL: TracingAllocator<mimalloc::MiMalloc> = TracingAllocator::new(mimalloc::MiMalloc);

#[test]
fn reports_over_mimalloc() {
    common::report_has_the_schema("mimalloc");
}
