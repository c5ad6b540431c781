//! What alloc-tracer writes and its readers rely on, without the tracer itself (so
//! that readers such as the analyzer do not build jemalloc): the report schema and
//! its typed manifest (with the one schema-version check), the size-class grid, the
//! rules that name a site and match it across reports (`site`, over the frame
//! conventions of `frames`; `jobs` for the part of a stack a thread pool's work
//! stealing leaves the same), how the host is described, and how bytes are printed
//! (`units`).
#![forbid(unsafe_code)]

pub mod frames;
pub mod host;
pub mod jobs;
pub mod manifest;
pub mod schema;
pub mod site;
pub mod size_class;
pub mod units;
