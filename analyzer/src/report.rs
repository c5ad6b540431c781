//! Loading a report directory: the manifest, checked, and the tables as plain rows.
//! The module that reads with polars (`export` writes the named-sites table with it).

use crate::{Error, SUPPORTED_SCHEMA_VERSION};
use alloc_tracer_format::manifest::{Manifest, ManifestError};
use polars::prelude::*;
use std::path::{Path, PathBuf};

/// One row of `sites.parquet`.
#[derive(Clone, Debug, PartialEq)]
pub struct SiteRow {
    /// Call stack.
    pub site_id: u64,
    /// Phase at allocation.
    pub phase: String,
    /// jemalloc size class.
    pub size_class_bytes: u64,
    /// Allocations.
    pub alloc_count: u64,
    /// Reallocs.
    pub realloc_count: u64,
    /// Requested bytes.
    pub bytes_requested: u64,
    /// Real block bytes.
    pub bytes_allocated: u64,
    /// Temporaries.
    pub temporary_count: u64,
    /// Median lifetime of followed blocks.
    pub lifetime_ns_median: Option<u64>,
    /// Followed blocks freed.
    pub followed_freed_count: u64,
}

/// One row of `frames.parquet`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrameRow {
    /// The site.
    pub site_id: u64,
    /// Position, innermost first.
    pub frame_index: u32,
    /// Position of its return address in the captured stack, innermost first.
    pub stack_index: u32,
    /// Return address (shared by the frames inlined at it).
    pub address: u64,
    /// Function name.
    pub function: String,
    /// Source file.
    pub file: Option<String>,
    /// Source line.
    pub line: Option<u32>,
}

impl FrameRow {
    /// A frame of site 0 at index 0, for unit tests.
    #[cfg(test)]
    pub(crate) fn test(function: &str, file: &str, line: Option<u32>) -> FrameRow {
        FrameRow {
            site_id: 0,
            frame_index: 0,
            stack_index: 0,
            address: 0,
            function: function.into(),
            file: Some(file.into()),
            line,
        }
    }
}

/// A loaded report.
#[derive(Debug)]
pub struct Report {
    /// The report directory.
    pub dir: PathBuf,
    /// `manifest.json`.
    pub manifest: Manifest,
    /// `sites.parquet`.
    pub sites: Vec<SiteRow>,
    /// `frames.parquet`, ordered by site and frame index.
    pub frames: Vec<FrameRow>,
    /// `phases.parquet`.
    pub phases: Vec<PhaseRow>,
}

/// One row of `phases.parquet` (the columns the analyzer uses).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PhaseRow {
    /// Phase name.
    pub phase: String,
    /// Time inside the phase, nested phases included.
    pub wall_ns: u64,
    /// Allocations.
    pub alloc_count: u64,
}

impl Report {
    /// The rows of `sites.parquet` allocated in `phase`, or all of them when `None`:
    /// the one place the analyzer's commands apply `--phase`.
    pub fn rows<'a>(&'a self, phase: Option<&'a str>) -> impl Iterator<Item = &'a SiteRow> {
        self.sites
            .iter()
            .filter(move |r| phase.is_none_or(|p| r.phase == p))
    }

    /// Wall time of `phase` in seconds, or of the whole traced run when `None`.
    pub fn wall_s(&self, phase: Option<&str>) -> Option<f64> {
        match phase {
            Some(p) => self
                .phases
                .iter()
                .find(|r| r.phase == p)
                .map(|r| r.wall_ns as f64 * 1e-9),
            None => Some(self.manifest.duration_s),
        }
    }

    /// The manifest's `host` and `cpu` (`unknown` where empty).
    pub fn host(&self) -> (String, String) {
        let or_unknown = |s: &str| {
            if s.is_empty() {
                "unknown".to_owned()
            } else {
                s.to_owned()
            }
        };
        (
            or_unknown(&self.manifest.host),
            or_unknown(&self.manifest.cpu),
        )
    }
}

/// Reads the report at `dir`, checking its schema version.
pub fn load(dir: &Path) -> Result<Report, Error> {
    let manifest_path = dir.join("manifest.json");
    if !dir.is_dir() {
        return Err(Error::Io {
            path: dir.to_owned(),
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "no such report directory"),
        });
    }
    let text = std::fs::read(&manifest_path).map_err(|source| Error::Io {
        path: manifest_path.clone(),
        source,
    })?;
    let manifest = Manifest::from_json(&text).map_err(|e| match e {
        ManifestError::Version { found } => Error::SchemaVersion {
            path: manifest_path.clone(),
            found: found.to_string(),
            supported: SUPPORTED_SCHEMA_VERSION,
        },
        ManifestError::NoVersion => Error::SchemaVersion {
            path: manifest_path.clone(),
            found: "missing".to_owned(),
            supported: SUPPORTED_SCHEMA_VERSION,
        },
        ManifestError::Json(e) => Error::Corrupt {
            path: manifest_path.clone(),
            reason: format!("not a report manifest: {e}"),
        },
    })?;
    let sites = read(dir, "sites.parquet", site_rows)?;
    let mut frames = read(dir, "frames.parquet", frame_rows)?;
    frames.sort_by_key(|f| (f.site_id, f.frame_index));
    let phases = read(dir, "phases.parquet", phase_rows)?;
    Ok(Report {
        dir: dir.to_owned(),
        manifest,
        sites,
        frames,
        phases,
    })
}

fn read<T>(
    dir: &Path,
    file: &str,
    rows: impl Fn(&DataFrame) -> PolarsResult<Vec<T>>,
) -> Result<Vec<T>, Error> {
    let path = dir.join(file);
    let corrupt = |e: PolarsError| Error::Corrupt {
        path: path.clone(),
        reason: e.to_string(),
    };
    let f = std::fs::File::open(&path).map_err(|source| Error::Io {
        path: path.clone(),
        source,
    })?;
    let df = ParquetReader::new(f).finish().map_err(corrupt)?;
    rows(&df).map_err(corrupt)
}

fn u64s(df: &DataFrame, name: &str) -> PolarsResult<Vec<u64>> {
    Ok(df
        .column(name)?
        .u64()?
        .iter()
        .map(|v| v.unwrap_or(0))
        .collect())
}

fn opt_u64s(df: &DataFrame, name: &str) -> PolarsResult<Vec<Option<u64>>> {
    Ok(df.column(name)?.u64()?.iter().collect())
}

fn strings(df: &DataFrame, name: &str) -> PolarsResult<Vec<Option<String>>> {
    Ok(df
        .column(name)?
        .str()?
        .iter()
        .map(|v| v.map(str::to_owned))
        .collect())
}

fn site_rows(df: &DataFrame) -> PolarsResult<Vec<SiteRow>> {
    let site_id = u64s(df, "site_id")?;
    let phase = strings(df, "phase")?;
    let class = u64s(df, "size_class_bytes")?;
    let allocs = u64s(df, "alloc_count")?;
    let reallocs = u64s(df, "realloc_count")?;
    let requested = u64s(df, "bytes_requested")?;
    let allocated = u64s(df, "bytes_allocated")?;
    let temporaries = u64s(df, "temporary_count")?;
    let median = opt_u64s(df, "lifetime_ns_median")?;
    let freed = u64s(df, "followed_freed_count")?;
    Ok((0..df.height())
        .map(|i| SiteRow {
            site_id: site_id[i],
            phase: phase[i].clone().unwrap_or_default(),
            size_class_bytes: class[i],
            alloc_count: allocs[i],
            realloc_count: reallocs[i],
            bytes_requested: requested[i],
            bytes_allocated: allocated[i],
            temporary_count: temporaries[i],
            lifetime_ns_median: median[i],
            followed_freed_count: freed[i],
        })
        .collect())
}

fn u32s(df: &DataFrame, name: &str) -> PolarsResult<Vec<u32>> {
    Ok(df
        .column(name)?
        .u32()?
        .iter()
        .map(|v| v.unwrap_or(0))
        .collect())
}

fn phase_rows(df: &DataFrame) -> PolarsResult<Vec<PhaseRow>> {
    let phase = strings(df, "phase")?;
    let wall = u64s(df, "wall_ns")?;
    let allocs = u64s(df, "alloc_count")?;
    Ok((0..df.height())
        .map(|i| PhaseRow {
            phase: phase[i].clone().unwrap_or_default(),
            wall_ns: wall[i],
            alloc_count: allocs[i],
        })
        .collect())
}

fn frame_rows(df: &DataFrame) -> PolarsResult<Vec<FrameRow>> {
    let site_id = u64s(df, "site_id")?;
    let index = u32s(df, "frame_index")?;
    let stack_index = u32s(df, "stack_index")?;
    let address = u64s(df, "address")?;
    let function = strings(df, "function")?;
    let file = strings(df, "file")?;
    let line: Vec<Option<u32>> = df.column("line")?.u32()?.iter().collect();
    Ok((0..df.height())
        .map(|i| FrameRow {
            site_id: site_id[i],
            frame_index: index[i],
            stack_index: stack_index[i],
            address: address[i],
            function: function[i].clone().unwrap_or_default(),
            file: file[i].clone(),
            line: line[i],
        })
        .collect())
}
