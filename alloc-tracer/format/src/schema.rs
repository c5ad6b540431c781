//! The report's tables and columns: the code side of `docs/report-schema.md`.
//!
//! `tests/report_schema.rs` checks that the document lists exactly these tables and
//! columns with these types, and that written files carry them, so the two cannot
//! drift apart. Change both together and bump [`SCHEMA_VERSION`] when a reader would
//! have to change.

/// Version of the report layout. Readers refuse versions they do not know.
pub const SCHEMA_VERSION: u32 = 1;

/// Name of the manifest file in a report directory.
pub const MANIFEST: &str = "manifest.json";

/// A column's logical type, named as polars names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColumnType {
    /// Unsigned 64-bit integer (parquet INT64, INTEGER(64, false)).
    UInt64,
    /// Signed 64-bit integer (parquet INT64, INTEGER(64, true)).
    Int64,
    /// Unsigned 32-bit integer (parquet INT32, INTEGER(32, false)).
    UInt32,
    /// Boolean (parquet BOOLEAN).
    Boolean,
    /// UTF-8 string (parquet BYTE_ARRAY, STRING).
    String,
}

impl ColumnType {
    /// The polars name of the type, as written in the schema document.
    pub fn polars_name(self) -> &'static str {
        match self {
            ColumnType::UInt64 => "UInt64",
            ColumnType::Int64 => "Int64",
            ColumnType::UInt32 => "UInt32",
            ColumnType::Boolean => "Boolean",
            ColumnType::String => "String",
        }
    }
}

/// One column of a table.
#[derive(Clone, Copy, Debug)]
pub struct Column {
    /// Column name; a unit suffix (`_bytes`, `_ns`, `_count`, `_s`) says the unit.
    pub name: &'static str,
    /// Logical type.
    pub ty: ColumnType,
    /// True when the column may hold nulls.
    pub nullable: bool,
}

const fn col(name: &'static str, ty: ColumnType) -> Column {
    Column {
        name,
        ty,
        nullable: false,
    }
}

const fn opt(name: &'static str, ty: ColumnType) -> Column {
    Column {
        name,
        ty,
        nullable: true,
    }
}

/// One parquet file of the report.
#[derive(Clone, Copy, Debug)]
pub struct Table {
    /// File name inside the report directory.
    pub file: &'static str,
    /// Columns, in file order.
    pub columns: &'static [Column],
}

use ColumnType::*;

/// One row per (call stack, phase, size class).
pub const SITES: Table = Table {
    file: "sites.parquet",
    columns: &[
        col("site_id", UInt64),
        col("phase", String),
        col("size_class_bytes", UInt64),
        col("alloc_count", UInt64),
        col("realloc_count", UInt64),
        col("bytes_requested", UInt64),
        col("bytes_allocated", UInt64),
        col("temporary_count", UInt64),
        col("sampled_count", UInt64),
        col("followed_count", UInt64),
        col("followed_freed_count", UInt64),
        opt("lifetime_ns_median", UInt64),
        opt("lifetime_ns_mean", UInt64),
        col("live_bytes_estimate", UInt64),
    ],
};

/// One row per frame of each site's stack, innermost first, inlined frames expanded.
pub const FRAMES: Table = Table {
    file: "frames.parquet",
    columns: &[
        col("site_id", UInt64),
        col("frame_index", UInt32),
        col("stack_index", UInt32),
        col("address", UInt64),
        col("function", String),
        opt("file", String),
        opt("line", UInt32),
        col("inlined", Boolean),
    ],
};

/// One row per (phase, size class) with allocations.
pub const SIZE_CLASSES: Table = Table {
    file: "size_classes.parquet",
    columns: &[
        col("phase", String),
        col("size_class_bytes", UInt64),
        col("alloc_count", UInt64),
    ],
};

/// One row per requested-size bucket with allocations.
pub const REQUESTED_SIZES: Table = Table {
    file: "requested_sizes.parquet",
    columns: &[
        col("size_bytes_low", UInt64),
        col("size_bytes_high", UInt64),
        col("alloc_count", UInt64),
    ],
};

/// One row per phase.
pub const PHASES: Table = Table {
    file: "phases.parquet",
    columns: &[
        col("phase_id", UInt32),
        col("phase", String),
        col("entry_count", UInt64),
        opt("first_start_ns", UInt64),
        col("wall_ns", UInt64),
        col("alloc_count", UInt64),
        col("free_count", UInt64),
        col("realloc_count", UInt64),
        col("bytes_requested", UInt64),
        col("bytes_allocated", UInt64),
        col("bytes_freed", UInt64),
        col("temporary_count", UInt64),
        col("peak_live_bytes", Int64),
    ],
};

/// One row per (site, phase, size class, lifetime bucket) of followed blocks.
pub const LIFETIMES: Table = Table {
    file: "lifetimes.parquet",
    columns: &[
        col("site_id", UInt64),
        col("phase", String),
        col("size_class_bytes", UInt64),
        col("lifetime_ns_low", UInt64),
        col("lifetime_ns_high", UInt64),
        col("freed_count", UInt64),
    ],
};

/// What heap sampling's blocks said was live at the kept peak, per (site, phase,
/// size class).
pub const HEAP_PEAK: Table = Table {
    file: "heap_peak.parquet",
    columns: HEAP_COLUMNS,
};

/// What heap sampling's blocks say is live when the report is taken, per (site,
/// phase, size class).
pub const HEAP_END: Table = Table {
    file: "heap_end.parquet",
    columns: HEAP_COLUMNS,
};

const HEAP_COLUMNS: &[Column] = &[
    col("site_id", UInt64),
    col("phase", String),
    col("size_class_bytes", UInt64),
    col("sampled_count", UInt64),
    col("live_bytes_estimate", UInt64),
    col("live_blocks_estimate", UInt64),
    col("live_bytes_stddev", UInt64),
];

/// Live bytes, running allocation totals and resident memory sampled over time.
pub const TIMELINE: Table = Table {
    file: "timeline.parquet",
    columns: &[
        col("time_ns", UInt64),
        col("phase", String),
        col("live_bytes", Int64),
        col("alloc_count", UInt64),
        col("bytes_allocated", UInt64),
        col("rss_bytes", UInt64),
    ],
};

/// Every table, in the order the schema document lists them.
pub const TABLES: [Table; 9] = [
    SITES,
    FRAMES,
    SIZE_CLASSES,
    REQUESTED_SIZES,
    PHASES,
    LIFETIMES,
    HEAP_PEAK,
    HEAP_END,
    TIMELINE,
];

/// True for the names of files a report folder may hold: the manifest and the
/// tables above. A report writer replaces a folder only when it holds nothing else,
/// so that a folder that merely looks like a report is never destroyed.
pub fn is_report_file(name: &str) -> bool {
    name == MANIFEST || TABLES.iter().any(|t| t.file == name)
}
