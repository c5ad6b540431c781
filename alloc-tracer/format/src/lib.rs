//! What alloc-tracer writes and its readers rely on, without the tracer itself (so
//! that readers such as the analyzer do not build jemalloc): the report schema and
//! its typed manifest (with the one schema-version check), the size-class grid, and
//! the conventions for naming sites by their frames and for describing the host.
#![forbid(unsafe_code)]

pub mod frames;
pub mod host;
pub mod manifest;
pub mod schema;
pub mod size_class;
