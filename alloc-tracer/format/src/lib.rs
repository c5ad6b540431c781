//! What alloc-tracer writes and its readers rely on, without the tracer itself (so
//! that readers such as the analyzer do not build jemalloc): the report schema, and
//! the conventions for naming sites by their frames and for describing the host.
#![forbid(unsafe_code)]

pub mod frames;
pub mod host;
pub mod schema;
