//! The tables' columns the analyzer reads, and their frames decoded into plain rows.

use super::table::{i64s, opt_u32s, opt_u64s, strings, u32s, u64s};
use super::{FrameRow, LifetimeRow, PhaseRow, SiteRow};
use polars::prelude::DataFrame;

/// The columns of `sites.parquet` the analyzer reads.
pub(super) const SITE_COLUMNS: &[&str] = &[
    "site_id",
    "phase",
    "size_class_bytes",
    "alloc_count",
    "realloc_count",
    "bytes_requested",
    "bytes_allocated",
    "temporary_count",
    "lifetime_ns_median",
    "followed_freed_count",
    "followed_count",
];

/// The columns of `lifetimes.parquet` the analyzer reads (all of them).
pub(super) const LIFETIME_COLUMNS: &[&str] = &[
    "site_id",
    "phase",
    "size_class_bytes",
    "lifetime_ns_low",
    "lifetime_ns_high",
    "freed_count",
];

/// The columns of `frames.parquet` the analyzer reads.
pub(super) const FRAME_COLUMNS: &[&str] = &[
    "site_id",
    "frame_index",
    "stack_index",
    "address",
    "function",
    "file",
    "line",
];

/// The columns of `phases.parquet` the analyzer reads.
pub(super) const PHASE_COLUMNS: &[&str] = &[
    "phase",
    "entry_count",
    "wall_ns",
    "alloc_count",
    "realloc_count",
    "bytes_requested",
    "temporary_count",
];

pub(super) fn site_rows(df: &DataFrame) -> Result<Vec<SiteRow>, String> {
    let site_id = u64s(df, "site_id")?;
    let mut phase = strings(df, "phase")?;
    let class = u64s(df, "size_class_bytes")?;
    let allocs = u64s(df, "alloc_count")?;
    let reallocs = u64s(df, "realloc_count")?;
    let requested = u64s(df, "bytes_requested")?;
    let allocated = u64s(df, "bytes_allocated")?;
    let temporaries = u64s(df, "temporary_count")?;
    let median = opt_u64s(df, "lifetime_ns_median")?;
    let freed = u64s(df, "followed_freed_count")?;
    let followed = u64s(df, "followed_count")?;
    Ok((0..df.height())
        .map(|i| SiteRow {
            site_id: site_id[i],
            phase: phase[i].take().unwrap_or_default(),
            size_class_bytes: class[i],
            alloc_count: allocs[i],
            realloc_count: reallocs[i],
            bytes_requested: requested[i],
            bytes_allocated: allocated[i],
            temporary_count: temporaries[i],
            lifetime_ns_median: median[i],
            followed_freed_count: freed[i],
            followed_count: followed[i],
        })
        .collect())
}

pub(super) fn lifetime_rows(df: &DataFrame) -> Result<Vec<LifetimeRow>, String> {
    let site_id = u64s(df, "site_id")?;
    let mut phase = strings(df, "phase")?;
    let class = u64s(df, "size_class_bytes")?;
    let low = u64s(df, "lifetime_ns_low")?;
    let high = u64s(df, "lifetime_ns_high")?;
    let freed = u64s(df, "freed_count")?;
    Ok((0..df.height())
        .map(|i| LifetimeRow {
            site_id: site_id[i],
            phase: phase[i].take().unwrap_or_default(),
            size_class_bytes: class[i],
            low_ns: low[i],
            high_ns: high[i],
            freed_count: freed[i],
        })
        .collect())
}

pub(super) fn phase_rows(df: &DataFrame) -> Result<Vec<PhaseRow>, String> {
    let mut phase = strings(df, "phase")?;
    let wall = u64s(df, "wall_ns")?;
    let entries = u64s(df, "entry_count")?;
    let allocs = u64s(df, "alloc_count")?;
    let reallocs = u64s(df, "realloc_count")?;
    let requested = u64s(df, "bytes_requested")?;
    let temporaries = u64s(df, "temporary_count")?;
    let peaks = match df.column("peak_live_bytes") {
        Ok(_) => i64s(df, "peak_live_bytes")?.into_iter().map(Some).collect(),
        Err(_) => vec![None; df.height()],
    };
    Ok((0..df.height())
        .map(|i| PhaseRow {
            phase: phase[i].take().unwrap_or_default(),
            wall_ns: wall[i],
            entry_count: entries[i],
            alloc_count: allocs[i],
            realloc_count: reallocs[i],
            bytes_requested: requested[i],
            temporary_count: temporaries[i],
            peak_live_bytes: peaks[i],
        })
        .collect())
}

pub(super) fn frame_rows(df: &DataFrame) -> Result<Vec<FrameRow>, String> {
    let site_id = u64s(df, "site_id")?;
    let index = u32s(df, "frame_index")?;
    let stack_index = u32s(df, "stack_index")?;
    let address = u64s(df, "address")?;
    let mut function = strings(df, "function")?;
    let mut file = strings(df, "file")?;
    let line = opt_u32s(df, "line")?;
    Ok((0..df.height())
        .map(|i| FrameRow {
            site_id: site_id[i],
            frame_index: index[i],
            stack_index: stack_index[i],
            address: address[i],
            function: function[i].take().unwrap_or_default(),
            file: file[i].take(),
            line: line[i],
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc_tracer_format::schema;

    #[test]
    fn the_columns_read_are_in_the_schema() {
        for (table, columns) in [
            (schema::SITES, SITE_COLUMNS),
            (schema::FRAMES, FRAME_COLUMNS),
            (schema::PHASES, PHASE_COLUMNS),
            (schema::LIFETIMES, LIFETIME_COLUMNS),
        ] {
            for name in columns {
                assert!(
                    table.columns.iter().any(|c| c.name == *name),
                    "{}: {name}",
                    table.file
                );
            }
        }
    }
}
