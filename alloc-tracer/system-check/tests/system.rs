//! alloc-tracer over `std::alloc::System`: exact counts and a report with the
//! documented tables and columns.

mod common;

use alloc_tracer::TracingAllocator;

#[global_allocator]
static GLOBAL: TracingAllocator<std::alloc::System> = TracingAllocator::new(std::alloc::System);

#[test]
fn reports_over_the_system_allocator() {
    common::report_has_the_schema("system");
}
