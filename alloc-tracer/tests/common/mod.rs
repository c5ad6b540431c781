//! Shared by the integration tests: reading a report back.
#![allow(dead_code)]

use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::record::Field;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// One row as column name -> field.
pub type Row = HashMap<String, Field>;

/// Every row of a report table.
pub fn read_table(dir: &Path, file: &str) -> Vec<Row> {
    let path = dir.join(file);
    let f = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let reader = SerializedFileReader::new(f).unwrap();
    reader
        .get_row_iter(None)
        .unwrap()
        .map(|r| {
            r.unwrap()
                .get_column_iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .collect()
}

pub fn u64_of(row: &Row, col: &str) -> u64 {
    match &row[col] {
        Field::ULong(v) => *v,
        Field::UInt(v) => *v as u64,
        other => panic!("{col}: not an unsigned integer: {other:?}"),
    }
}

pub fn str_of<'a>(row: &'a Row, col: &str) -> &'a str {
    match &row[col] {
        Field::Str(s) => s,
        other => panic!("{col}: not a string: {other:?}"),
    }
}

/// Function names of each site, innermost first.
pub fn site_functions(dir: &Path) -> HashMap<u64, Vec<String>> {
    let mut frames: Vec<(u64, u64, String)> = read_table(dir, "frames.parquet")
        .iter()
        .map(|r| {
            (
                u64_of(r, "site_id"),
                u64_of(r, "frame_index"),
                str_of(r, "function").to_owned(),
            )
        })
        .collect();
    frames.sort();
    let mut out: HashMap<u64, Vec<String>> = HashMap::new();
    for (site, _, f) in frames {
        out.entry(site).or_default().push(f);
    }
    out
}

/// Sum of a `sites.parquet` column over the sites whose frames name `function`.
pub fn sum_for_function(dir: &Path, function: &str, col: &str) -> u64 {
    let functions = site_functions(dir);
    read_table(dir, "sites.parquet")
        .iter()
        .filter(|r| {
            functions
                .get(&u64_of(r, "site_id"))
                .is_some_and(|fs| fs.iter().any(|f| f.contains(function)))
        })
        .map(|r| u64_of(r, col))
        .sum()
}

/// A fresh directory under the target directory for one test's reports.
pub fn scratch(name: &str) -> PathBuf {
    let base = std::env::var_os("CARGO_TARGET_TMPDIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let dir = base.join(format!("alloc-tracer-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs `work` and returns the change of the tracer's totals (over all phases) it
/// saw: `d(|p| p.allocs)` is the allocations recorded meanwhile.
pub fn change_during(work: impl FnOnce()) -> impl Fn(fn(&alloc_tracer::PhaseTotals) -> u64) -> u64 {
    let before = alloc_tracer::counts();
    work();
    let after = alloc_tracer::counts();
    move |f| after.total(f) - before.total(f)
}
