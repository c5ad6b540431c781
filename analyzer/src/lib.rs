//! analyzer: ranks, classifies, prices and diffs alloc-tracer reports.
//!
//! Library first: [`report::load`] reads a report directory (polars), [`info::info`]
//! describes it (mode, phases, threads, peak, what was dropped), [`rank::top`]
//! ranks its call sites, [`category_totals::totals`] sorts allocations into categories from
//! rules, [`calibrate::Calibration`] reads what allocations cost on a machine,
//! [`cost::estimate`] prices sites and categories with it, [`diff::diff`] compares two
//! reports, [`budget`] checks a report against a budget file and a diff against
//! `--fail-if` conditions, and [`export`] writes folded stacks, flame graphs and pprof profiles.
//! Everything returns plain data; [`render`] turns it into tables, JSON or CSV. The
//! `analyzer` binary is a thin CLI over these, plus the calibration's measurement,
//! which needs jemalloc as the global allocator and bellpepper-core's types: the
//! library links neither (the default `calibrate` feature builds the binary; depend
//! on the library with `default-features = false`).
#![forbid(unsafe_code)]

pub mod budget;
pub mod calibrate;
pub mod categories;
pub mod category_totals;
pub mod cost;
pub mod diff;
pub mod error;
pub mod export;
pub mod fail_if;
pub mod id_map;
pub mod info;
pub mod matching;
pub mod memory;
pub mod naming;
mod pages;
pub mod rank;
pub mod render;
pub mod report;
pub mod sampling_noise;
pub mod units;

pub use error::Error;

/// The report schema version this crate reads.
pub const SUPPORTED_SCHEMA_VERSION: u64 = alloc_tracer_format::schema::SCHEMA_VERSION as u64;
