//! analyzer: ranks, classifies, prices and diffs alloc-tracer reports.
//!
//! Not built yet (see the project's issue for the analyzer). Until then, reports are
//! read with polars or DuckDB directly (README, "Reading reports"), and alloc-tracer
//! prints a summary of the top sites when it writes a report.
#![forbid(unsafe_code)]

/// The report schema version this crate will read.
pub const SUPPORTED_SCHEMA_VERSION: u32 = 1;
