//! Writes one [`schema::Table`] as a parquet file with the low-level parquet API (no
//! arrow: the tracer is linked into every traced program and should build quickly).
//!
//! There are no floating-point columns: this writer marks them with the
//! IEEE-754 total column order, which older readers (polars 1.x) reject outright.
//! Times are integer nanoseconds instead.

use super::schema::{ColumnType, Table};
use crate::Error;
use crate::fast_hash::FastBuild;
use parquet::basic::Compression;
use parquet::data_type::{BoolType, ByteArray, ByteArrayType, Int32Type, Int64Type};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::parser::parse_message_type;
use std::borrow::Cow;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

/// The values of one column, in the variant its declared type needs. Strings may be
/// borrowed from the snapshot: the frames table repeats each frame's names once per
/// site that holds it, and owned copies of them were most of a report's memory.
pub enum Values<'a> {
    /// For `UInt64` columns.
    U64(Vec<u64>),
    /// For nullable `UInt64` columns.
    OptU64(Vec<Option<u64>>),
    /// For `Int64` columns.
    I64(Vec<i64>),
    /// For `UInt32` columns.
    U32(Vec<u32>),
    /// For nullable `UInt32` columns.
    OptU32(Vec<Option<u32>>),
    /// For `Boolean` columns.
    Bool(Vec<bool>),
    /// For `String` columns.
    Str(Vec<Cow<'a, str>>),
    /// For nullable `String` columns.
    OptStr(Vec<Option<Cow<'a, str>>>),
}

/// Strings handed to the column writer at a time: each batch is copied into the
/// writer's own byte arrays, so a batch, not the column, bounds that copy.
const STRING_BATCH: usize = 4096;

impl Values<'_> {
    fn len(&self) -> usize {
        match self {
            Values::U64(v) => v.len(),
            Values::OptU64(v) => v.len(),
            Values::I64(v) => v.len(),
            Values::U32(v) => v.len(),
            Values::OptU32(v) => v.len(),
            Values::Bool(v) => v.len(),
            Values::Str(v) => v.len(),
            Values::OptStr(v) => v.len(),
        }
    }

    fn fits(&self, ty: ColumnType, nullable: bool) -> bool {
        matches!(
            (self, ty, nullable),
            (Values::U64(_), ColumnType::UInt64, false)
                | (Values::OptU64(_), ColumnType::UInt64, true)
                | (Values::I64(_), ColumnType::Int64, false)
                | (Values::U32(_), ColumnType::UInt32, false)
                | (Values::OptU32(_), ColumnType::UInt32, true)
                | (Values::Bool(_), ColumnType::Boolean, false)
                | (Values::Str(_), ColumnType::String, false)
                | (Values::OptStr(_), ColumnType::String, true)
        )
    }
}

fn message_type(table: &Table) -> String {
    let mut s = String::from("message report {\n");
    for c in table.columns {
        let rep = if c.nullable { "OPTIONAL" } else { "REQUIRED" };
        let ty = match c.ty {
            ColumnType::UInt64 => "INT64 %s (INTEGER(64,false))",
            ColumnType::Int64 => "INT64 %s (INTEGER(64,true))",
            ColumnType::UInt32 => "INT32 %s (INTEGER(32,false))",
            ColumnType::Boolean => "BOOLEAN %s",
            ColumnType::String => "BYTE_ARRAY %s (STRING)",
        };
        s += &format!("  {rep} {};\n", ty.replace("%s", c.name));
    }
    s + "}"
}

/// Splits optional values into definition levels and the present values.
fn levels<T: Clone>(v: &[Option<T>]) -> (Vec<i16>, Vec<T>) {
    let defs = v.iter().map(|x| x.is_some() as i16).collect();
    let present = v.iter().flatten().cloned().collect();
    (defs, present)
}

/// Hands `v` to `write` [`STRING_BATCH`] values at a time; returns how many there
/// were.
fn in_batches<T, E>(v: &[T], mut write: impl FnMut(&[T]) -> Result<usize, E>) -> Result<usize, E> {
    v.chunks(STRING_BATCH)
        .try_for_each(|chunk| write(chunk).map(drop))
        .map(|()| v.len())
}

fn byte_array(s: &str) -> ByteArray {
    ByteArray::from(s.as_bytes())
}

/// Byte arrays of borrowed strings, made once per string: the frames table repeats
/// each frame's names on every row that holds the frame, and a byte array's clone
/// shares its bytes (copying each row's was most of a large report's writing time).
/// Keyed by address and length, which no other string shares while these live.
#[derive(Default)]
struct SharedBytes(HashMap<(usize, usize), ByteArray, FastBuild>);

impl SharedBytes {
    /// The bytes of `s`: shared when borrowed (names repeated row after row), copied
    /// when owned (made for its row). (A `Cow`, not a `&str`: whether it borrows is
    /// what decides.)
    #[allow(clippy::ptr_arg)]
    fn get(&mut self, s: &Cow<'_, str>) -> ByteArray {
        let Cow::Borrowed(b) = *s else {
            return byte_array(s);
        };
        self.0
            .entry((b.as_ptr().addr(), b.len()))
            .or_insert_with(|| byte_array(b))
            .clone()
    }
}

/// Writes `columns` (in the table's order) to `path`, as one row group.
pub fn write(path: &Path, table: &Table, columns: Vec<Values<'_>>) -> Result<(), Error> {
    let mut file = TableFile::create(path, table)?;
    file.write_group(columns)?;
    file.close()
}

/// A table's file being written one row group at a time, so that a large table's
/// columns need not be held whole (see `tables::write_frames`).
pub struct TableFile<'t> {
    path: &'t Path,
    table: &'t Table,
    writer: SerializedFileWriter<std::fs::File>,
}

impl<'t> TableFile<'t> {
    /// Creates `path` for `table`'s rows.
    pub fn create(path: &'t Path, table: &'t Table) -> Result<TableFile<'t>, Error> {
        let schema =
            Arc::new(parse_message_type(&message_type(table)).map_err(parquet_error(path))?);
        let props = Arc::new(
            WriterProperties::builder()
                .set_compression(Compression::SNAPPY)
                .set_created_by(format!("alloc-tracer {}", env!("CARGO_PKG_VERSION")))
                .build(),
        );
        let file = std::fs::File::create(path).map_err(|cause| Error::Io {
            path: path.to_owned(),
            cause,
        })?;
        let writer = SerializedFileWriter::new(file, schema, props).map_err(parquet_error(path))?;
        Ok(TableFile {
            path,
            table,
            writer,
        })
    }

    /// Writes `columns` (in the table's order, all of one length) as a row group.
    pub fn write_group(&mut self, columns: Vec<Values<'_>>) -> Result<(), Error> {
        let (path, table) = (self.path, self.table);
        let err = parquet_error(path);
        assert_eq!(
            columns.len(),
            table.columns.len(),
            "{}: column count",
            table.file
        );
        let rows = columns.first().map_or(0, Values::len);
        for (c, v) in table.columns.iter().zip(&columns) {
            assert!(
                v.fits(c.ty, c.nullable),
                "{}: {} has the wrong variant",
                table.file,
                c.name
            );
            assert_eq!(
                v.len(),
                rows,
                "{}: {} has the wrong length",
                table.file,
                c.name
            );
        }
        let mut group = self.writer.next_row_group().map_err(err)?;
        let mut values = columns.into_iter();
        while let Some(mut col) = group.next_column().map_err(err)? {
            let v = values.next().expect("one value vector per column");
            let written = match v {
                Values::U64(v) => {
                    let v: Vec<i64> = v.into_iter().map(|x| x as i64).collect();
                    col.typed::<Int64Type>().write_batch(&v, None, None)
                }
                Values::OptU64(v) => {
                    let (d, v) = levels(&v);
                    let v: Vec<i64> = v.into_iter().map(|x| x as i64).collect();
                    col.typed::<Int64Type>().write_batch(&v, Some(&d), None)
                }
                Values::I64(v) => col.typed::<Int64Type>().write_batch(&v, None, None),
                Values::U32(v) => {
                    let v: Vec<i32> = v.into_iter().map(|x| x as i32).collect();
                    col.typed::<Int32Type>().write_batch(&v, None, None)
                }
                Values::OptU32(v) => {
                    let (d, v) = levels(&v);
                    let v: Vec<i32> = v.into_iter().map(|x| x as i32).collect();
                    col.typed::<Int32Type>().write_batch(&v, Some(&d), None)
                }
                Values::Bool(v) => col.typed::<BoolType>().write_batch(&v, None, None),
                Values::Str(v) => {
                    let w = col.typed::<ByteArrayType>();
                    let mut shared = SharedBytes::default();
                    in_batches(&v, |chunk| {
                        let bytes: Vec<ByteArray> = chunk.iter().map(|s| shared.get(s)).collect();
                        w.write_batch(&bytes, None, None)
                    })
                }
                Values::OptStr(v) => {
                    let w = col.typed::<ByteArrayType>();
                    let mut shared = SharedBytes::default();
                    in_batches(&v, |chunk| {
                        let defs: Vec<i16> = chunk.iter().map(|s| s.is_some() as i16).collect();
                        let bytes: Vec<ByteArray> =
                            chunk.iter().flatten().map(|s| shared.get(s)).collect();
                        w.write_batch(&bytes, Some(&defs), None)
                    })
                }
            };
            written.map_err(err)?;
            col.close().map_err(err)?;
        }
        group.close().map_err(err)?;
        Ok(())
    }

    /// Writes the footer.
    pub fn close(self) -> Result<(), Error> {
        self.writer.close().map_err(parquet_error(self.path))?;
        Ok(())
    }
}

fn parquet_error(path: &Path) -> impl Fn(parquet::errors::ParquetError) -> Error + Copy + '_ {
    move |cause| Error::Parquet {
        path: path.to_owned(),
        cause,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::schema::{Column, ColumnType};
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use parquet::record::Field;

    const STRINGS: Table = Table {
        file: "strings.parquet",
        columns: &[
            Column {
                name: "name",
                ty: ColumnType::String,
                nullable: false,
            },
            Column {
                name: "file",
                ty: ColumnType::String,
                nullable: true,
            },
        ],
    };

    #[test]
    fn string_columns_longer_than_a_batch_read_back_whole() {
        // More rows than two batches, nulls in every batch, some strings borrowed.
        let n = 2 * STRING_BATCH + 123;
        let kept: Vec<String> = (0..n).map(|i| format!("borrowed {i}")).collect();
        let names: Vec<Cow<'_, str>> = (0..n)
            .map(|i| match i % 2 {
                0 => Cow::Borrowed(kept[i].as_str()),
                _ => Cow::Owned(format!("owned {i}")),
            })
            .collect();
        let files: Vec<Option<Cow<'_, str>>> = (0..n)
            .map(|i| (i % 7 != 3).then(|| Cow::Owned(format!("f{i}.rs"))))
            .collect();
        let dir = std::env::temp_dir().join(format!("alloc-tracer-strings-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(STRINGS.file);
        write(
            &path,
            &STRINGS,
            vec![Values::Str(names), Values::OptStr(files)],
        )
        .unwrap();
        let reader = SerializedFileReader::new(std::fs::File::open(&path).unwrap()).unwrap();
        let rows: Vec<_> = reader
            .get_row_iter(None)
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(rows.len(), n);
        for (i, row) in rows.iter().enumerate() {
            let cols: Vec<_> = row.get_column_iter().map(|(_, v)| v.clone()).collect();
            let name = if i % 2 == 0 {
                format!("borrowed {i}")
            } else {
                format!("owned {i}")
            };
            assert_eq!(cols[0], Field::Str(name), "row {i}");
            let file = if i % 7 == 3 {
                Field::Null
            } else {
                Field::Str(format!("f{i}.rs"))
            };
            assert_eq!(cols[1], file, "row {i}");
        }
    }
}
