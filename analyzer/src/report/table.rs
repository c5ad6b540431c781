//! One table of a report read into a polars frame, checked before and after its rows
//! are decoded, a panic of the parquet reader turned into an error; and its columns
//! as plain vectors.

use crate::Error;
use alloc_tracer_format::manifest::Manifest;
use alloc_tracer_format::schema;
use polars::prelude::*;
use std::cell::Cell;
use std::io::Read;
use std::path::Path;
use std::sync::Once;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The most bytes of a `manifest.json` the analyzer reads: a report's is a few KiB
/// (more with long labels or command lines), and the file is read whole into memory.
pub(super) const MANIFEST_MAX_BYTES: u64 = 256 << 20;

/// The bytes of a report's manifest: [`open_regular`]'s file, refused past
/// [`MANIFEST_MAX_BYTES`].
pub(super) fn read_manifest(path: &Path) -> Result<Vec<u8>, Error> {
    let (f, len) = open_regular(path)?;
    if len > MANIFEST_MAX_BYTES {
        return Err(Error::Corrupt {
            path: path.to_owned(),
            reason: format!(
                "{len} bytes, more than the analyzer reads of a manifest ({} MiB at most)",
                MANIFEST_MAX_BYTES >> 20
            ),
        });
    }
    read_whole(path, f)
}

/// The bytes of a parquet table: [`open_regular`]'s file, refused before it is read
/// unless it begins and ends with parquet's `PAR1`, so that a file cut short or a
/// huge file of something else is named as such and never read into memory.
fn read_parquet(path: &Path) -> Result<Vec<u8>, Error> {
    let (f, len) = open_regular(path)?;
    let corrupt = |reason: String| Error::Corrupt {
        path: path.to_owned(),
        reason,
    };
    if len < 12 {
        return Err(corrupt(format!(
            "not a parquet file: {len} bytes, fewer than any (cut short?)"
        )));
    }
    let (mut head, mut tail) = ([0u8; 4], [0u8; 4]);
    let at = |buf: &mut [u8; 4], offset: u64| {
        std::os::unix::fs::FileExt::read_exact_at(&f, buf, offset).map_err(io_at(path))
    };
    at(&mut head, 0)?;
    at(&mut tail, len - 4)?;
    if &head != b"PAR1" || &tail != b"PAR1" {
        let end = if &head == b"PAR1" {
            "does not end with parquet's PAR1 (cut short, or added to?)"
        } else {
            "does not begin with parquet's PAR1"
        };
        return Err(corrupt(format!(
            "not a parquet file: {len} bytes that {end}"
        )));
    }
    read_whole(path, f)
}

/// `path` opened for reading, and its length. Anything but a regular file is
/// refused: reading a FIFO blocks until some writer comes, and a device may never
/// end.
fn open_regular(path: &Path) -> Result<(std::fs::File, u64), Error> {
    let io = io_at(path);
    let not_regular = |t: std::fs::FileType| Error::Corrupt {
        path: path.to_owned(),
        reason: format!("not a regular file ({})", file_kind(t)),
    };
    let meta = std::fs::metadata(path).map_err(io)?;
    if !meta.is_file() {
        return Err(not_regular(meta.file_type()));
    }
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    // Should the file become a FIFO between the check and the open, the open must
    // not wait for a writer; the check on the open file below then refuses it.
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NONBLOCK);
    let f = options.open(path).map_err(io)?;
    let meta = f.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(not_regular(meta.file_type()));
    }
    Ok((f, meta.len()))
}

/// The rest of `f`, read whole rather than mapped: a mapped file that shrinks under
/// the reader kills it with SIGBUS, which nothing can catch.
fn read_whole(path: &Path, mut f: std::fs::File) -> Result<Vec<u8>, Error> {
    let mut bytes = Vec::new();
    f.read_to_end(&mut bytes).map_err(io_at(path))?;
    Ok(bytes)
}

/// An I/O failure on `path`, as the error naming it.
fn io_at(path: &Path) -> impl Fn(std::io::Error) -> Error + Copy + '_ {
    move |cause| Error::Io {
        path: path.to_owned(),
        cause,
    }
}

/// What a file that is not a regular file is, in words.
pub(super) fn file_kind(t: std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return "a FIFO";
        }
        if t.is_socket() {
            return "a socket";
        }
        if t.is_block_device() || t.is_char_device() {
            return "a device";
        }
    }
    if t.is_dir() {
        "a directory"
    } else {
        "a regular file"
    }
}

/// `text` on one line: its runs of whitespace, line breaks included, as one space.
pub(super) fn one_line(text: impl std::fmt::Display) -> String {
    text.to_string()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// The rows `manifest` lists for `table`, or `None` where it lists no such table and
/// `dir` holds none (a report from before the table existed). A table in `dir` that
/// the manifest does not list is an error: the two disagree, and which to believe
/// is unknown.
pub(crate) fn listed(
    dir: &Path,
    manifest: &Manifest,
    table: &schema::Table,
) -> Result<Option<usize>, Error> {
    if let Some(t) = manifest.tables.iter().find(|t| t.file == table.file) {
        return Ok(Some(t.rows));
    }
    if std::fs::symlink_metadata(dir.join(table.file)).is_ok() {
        return Err(Error::Corrupt {
            path: dir.join(table.file),
            reason: format!("not among the tables {} lists", schema::MANIFEST),
        });
    }
    Ok(None)
}

/// Reads `columns` of `table` in `dir` into rows, checking first that the file
/// holds the rows `manifest` lists for it (a table it does not list is refused), that the columns
/// are there with the schema's types, and that their page headers are sound (see
/// `pages`). Every failure, a panic of the parquet reader included, is
/// [`Error::Corrupt`] naming the file.
pub(crate) fn read<T>(
    dir: &Path,
    manifest: &Manifest,
    table: &schema::Table,
    columns: &[&str],
    rows: impl Fn(&DataFrame) -> Result<Vec<T>, String>,
) -> Result<Vec<T>, Error> {
    read_with_later(dir, manifest, table, columns, &[], rows)
}

/// [`read`], where the columns in `later` (added to the table after reports were
/// first written, so absent from older ones) may be missing: the frame `rows` gets
/// then lacks them. Present, they are checked like the others.
pub(crate) fn read_with_later<T>(
    dir: &Path,
    manifest: &Manifest,
    table: &schema::Table,
    columns: &[&str],
    later: &[&str],
    rows: impl Fn(&DataFrame) -> Result<Vec<T>, String>,
) -> Result<Vec<T>, Error> {
    let path = dir.join(table.file);
    let listed = match listed(dir, manifest, table)? {
        Some(rows) => rows,
        None => {
            return Err(Error::Corrupt {
                path: dir.join(schema::MANIFEST),
                reason: format!("its tables do not list {}", table.file),
            });
        }
    };
    let bytes = read_parquet(&path)?;
    let mut wanted: Vec<&schema::Column> = table
        .columns
        .iter()
        .filter(|c| columns.contains(&c.name) || later.contains(&c.name))
        .collect();
    let df = contained(|| {
        let mut reader = ParquetReader::new(std::io::Cursor::new(bytes.as_slice()));
        let metadata = reader.get_metadata().map_err(one_line)?.clone();
        if listed != metadata.num_rows {
            return Err(format!(
                "{} {}, the manifest says {listed}",
                metadata.num_rows,
                if metadata.num_rows == 1 {
                    "row"
                } else {
                    "rows"
                }
            ));
        }
        let in_groups = metadata
            .row_groups
            .iter()
            .map(|g| g.num_rows())
            .fold(0usize, usize::saturating_add);
        if in_groups != metadata.num_rows {
            return Err(format!(
                "row groups of {in_groups} rows in all, the footer says {}",
                metadata.num_rows
            ));
        }
        let found = reader.schema().map_err(one_line)?;
        wanted.retain(|c| !later.contains(&c.name) || found.get(c.name).is_some());
        for c in &wanted {
            let Some(field) = found.get(c.name) else {
                return Err(format!(
                    "no column `{}` (the schema's {})",
                    c.name,
                    c.ty.polars_name()
                ));
            };
            if !holds(&field.dtype, c.ty) {
                return Err(format!(
                    "column `{}` is {}, the schema says {}",
                    c.name,
                    arrow_name(&field.dtype),
                    c.ty.polars_name()
                ));
            }
        }
        for group in &metadata.row_groups {
            for c in &wanted {
                for chunk in group.columns_under_root_iter(c.name).into_iter().flatten() {
                    crate::pages::check_chunk(
                        &bytes,
                        chunk.byte_range(),
                        chunk.num_values(),
                        group.num_rows(),
                    )
                    .map_err(|e| format!("column `{}`: {e}", c.name))?;
                }
            }
        }
        let df = reader
            .with_columns(Some(wanted.iter().map(|c| c.name.to_owned()).collect()))
            .finish()
            .map_err(one_line)?;
        for c in wanted.iter().filter(|c| !c.nullable) {
            let nulls = df.column(c.name).map_err(one_line)?.null_count();
            if nulls > 0 {
                return Err(format!(
                    "column `{}` has {nulls} nulls, the schema says it has none",
                    c.name
                ));
            }
        }
        rows(&df)
    });
    df.map_err(|reason| Error::Corrupt { path, reason })
}

/// The schema's type of a column the file gives as `found`, if it is one. Checked
/// on the file's own type, before polars converts it: a type polars was built
/// without (a struct, a decimal) would otherwise fail with polars' advice to enable
/// a feature.
fn schema_type(found: &ArrowDataType) -> Option<schema::ColumnType> {
    use ArrowDataType as A;
    use schema::ColumnType as C;
    match found {
        A::UInt64 => Some(C::UInt64),
        A::Int64 => Some(C::Int64),
        A::UInt32 => Some(C::UInt32),
        A::Boolean => Some(C::Boolean),
        A::Utf8 | A::LargeUtf8 | A::Utf8View => Some(C::String),
        _ => None,
    }
}

/// Whether a column the file gives as `found` holds the schema's type `t`.
fn holds(found: &ArrowDataType, t: schema::ColumnType) -> bool {
    schema_type(found) == Some(t)
}

/// A file's column type in the schema's words where it has them (`Int64`), else
/// as arrow names it.
fn arrow_name(t: &ArrowDataType) -> String {
    schema_type(t).map_or_else(|| format!("{t:?}"), |c| c.polars_name().to_owned())
}

thread_local! {
    /// Whether this thread is inside [`contained`].
    static CONTAINING: Cell<bool> = const { Cell::new(false) };
}

/// How many threads are inside [`contained`].
static CONTAINED: AtomicUsize = AtomicUsize::new(0);

/// Runs `read`, a read of damaged bytes by polars, turning a panic into an error.
///
/// polars' parquet decoder trusts the sizes and offsets in data pages: damaged pages
/// make it index out of bounds or unwrap an error, on this thread or on one of its
/// worker threads (named `polars-N`, or after `POLARS_THREAD_NAME`), whose panic
/// rayon carries back here. The hook installed once below keeps those panics quiet,
/// so that the user sees the one-line error and not a backtrace; any other panic
/// goes to the hook that was there before.
fn contained<T>(read: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let workers = format!(
            "{}-",
            std::env::var("POLARS_THREAD_NAME").unwrap_or_else(|_| "polars".to_owned())
        );
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let containing = CONTAINING.try_with(Cell::get).unwrap_or(false)
                || (CONTAINED.load(Ordering::Relaxed) > 0
                    && std::thread::current()
                        .name()
                        .is_some_and(|n| n.starts_with(&workers)));
            if !containing {
                previous(info);
            }
        }));
    });
    CONTAINED.fetch_add(1, Ordering::Relaxed);
    CONTAINING.set(true);
    // Unwind safety: what `read` touches is its own or read-only, and nothing it
    // built survives a panic but the message.
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(read));
    CONTAINING.set(false);
    CONTAINED.fetch_sub(1, Ordering::Relaxed);
    result.unwrap_or_else(|panic| {
        let message = panic
            .downcast_ref::<&str>()
            .copied()
            .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
            .unwrap_or("no message");
        Err(one_line(format!("the parquet reader failed: {message}")))
    })
}

/// The values of column `name`, one per row of `df`: a damaged file can give a
/// column fewer values than the frame has rows.
fn values<T>(
    df: &DataFrame,
    name: &str,
    get: impl FnOnce(&polars::prelude::Column) -> PolarsResult<Vec<T>>,
) -> Result<Vec<T>, String> {
    let v = df.column(name).and_then(get).map_err(one_line)?;
    if v.len() != df.height() {
        return Err(format!(
            "column `{name}` has {} values for {} rows",
            v.len(),
            df.height()
        ));
    }
    Ok(v)
}

pub(crate) fn i64s(df: &DataFrame, name: &str) -> Result<Vec<i64>, String> {
    values(df, name, |c| {
        Ok(c.i64()?.iter().map(|v| v.unwrap_or(0)).collect())
    })
}

pub(crate) fn u64s(df: &DataFrame, name: &str) -> Result<Vec<u64>, String> {
    values(df, name, |c| {
        Ok(c.u64()?.iter().map(|v| v.unwrap_or(0)).collect())
    })
}

pub(super) fn opt_u64s(df: &DataFrame, name: &str) -> Result<Vec<Option<u64>>, String> {
    values(df, name, |c| Ok(c.u64()?.iter().collect()))
}

pub(super) fn u32s(df: &DataFrame, name: &str) -> Result<Vec<u32>, String> {
    values(df, name, |c| {
        Ok(c.u32()?.iter().map(|v| v.unwrap_or(0)).collect())
    })
}

pub(super) fn opt_u32s(df: &DataFrame, name: &str) -> Result<Vec<Option<u32>>, String> {
    values(df, name, |c| Ok(c.u32()?.iter().collect()))
}

/// A string column's values, their control characters and backslashes escaped
/// (`escape_controls_in`).
pub(crate) fn strings(df: &DataFrame, name: &str) -> Result<Vec<Option<String>>, String> {
    values(df, name, |c| {
        Ok(c.str()?
            .iter()
            .map(|v| {
                v.map(|v| {
                    let mut v = v.to_owned();
                    super::escape_controls_in(&mut v);
                    v
                })
            })
            .collect())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn column_types_are_checked_on_the_files_own_type() {
        use schema::ColumnType as C;
        for (t, found) in [
            (C::UInt64, ArrowDataType::UInt64),
            (C::Int64, ArrowDataType::Int64),
            (C::UInt32, ArrowDataType::UInt32),
            (C::Boolean, ArrowDataType::Boolean),
            (C::String, ArrowDataType::Utf8View),
            (C::String, ArrowDataType::LargeUtf8),
        ] {
            assert!(holds(&found, t), "{found:?} holds {t:?}");
        }
        // Types polars was built without are named, not converted: a decimal, a
        // struct; and plain mismatches in the schema's words.
        let decimal = ArrowDataType::Decimal(38, 0);
        let field = ArrowField::new("x".into(), ArrowDataType::Int64, false);
        let structure = ArrowDataType::Struct(vec![field]);
        for (found, name) in [
            (decimal, "Decimal(38, 0)"),
            (structure, "Struct"),
            (ArrowDataType::Int64, "Int64"),
            (ArrowDataType::Float64, "Float64"),
        ] {
            assert!(!holds(&found, C::UInt64), "{found:?}");
            assert!(
                arrow_name(&found).starts_with(name),
                "{}",
                arrow_name(&found)
            );
        }
    }
}
