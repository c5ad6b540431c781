//! A program that uses alloc-tracer over the system allocator, with the tracer's
//! default features off: it builds no jemalloc (`cargo tree -p
//! alloc-tracer-system-check -e normal` shows none, which `.ci/run` checks), and its
//! reports have the documented schema (`tests/report.rs`).
#![forbid(unsafe_code)]
