//! A program that uses alloc-tracer over an allocator other than jemalloc, with the
//! tracer's default features off: it builds no jemalloc (`cargo tree -p
//! alloc-tracer-system-check -e normal` shows none, which `.ci/run` checks), and its
//! reports over the system allocator (`tests/system.rs`) and mimalloc
//! (`tests/mimalloc.rs`) have the documented schema. Its `frame-pointer-probe`
//! binary is the setup check's real program: built with and without frame pointers,
//! its reports must and must not warn (`tests/frame_pointers.rs`).
#![forbid(unsafe_code)]
