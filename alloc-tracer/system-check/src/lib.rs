//! A program that uses alloc-tracer over an allocator other than jemalloc, with the
//! tracer's default features off: it builds no jemalloc (`cargo tree -p
//! alloc-tracer-system-check -e normal` shows none, which `.ci/run` checks), and its
//! reports over the system allocator (`tests/system.rs`) and mimalloc
//! (`tests/mimalloc.rs`) have the documented schema.
#![forbid(unsafe_code)]
