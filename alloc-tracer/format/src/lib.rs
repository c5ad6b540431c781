//! What alloc-tracer writes and its readers rely on, without the tracer itself (so
//! that readers such as the analyzer do not build jemalloc): the report schema, the
//! rules that name a site and match it across reports (`site`, over the frame
//! conventions of `frames`), and how the host is described.
#![forbid(unsafe_code)]

pub mod frames;
pub mod host;
pub mod schema;
pub mod site;
