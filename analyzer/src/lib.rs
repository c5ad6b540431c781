//! analyzer: ranks, classifies and (later) prices and diffs alloc-tracer reports.
//!
//! Library first: [`report::load`] reads a report directory (polars), [`rank::top`]
//! ranks its call sites, [`categories::totals`] sorts allocations into categories from
//! rules. Everything returns plain data; [`render`] turns it into tables, JSON or
//! CSV. The `analyzer` binary is a thin CLI over these.
//!
//! Not yet here (see the analyzer issue): the cost model (`calibrate`, `cost`),
//! `diff`, flame graphs and pprof export.
#![forbid(unsafe_code)]

pub mod categories;
pub mod error;
pub mod naming;
pub mod rank;
pub mod render;
pub mod report;

pub use error::Error;

/// The report schema version this crate reads.
pub const SUPPORTED_SCHEMA_VERSION: u64 = 1;
