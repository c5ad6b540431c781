//! What the system-allocator and mimalloc checks share: a report of a known workload
//! checked against the documented schema.
#![allow(dead_code)]

use alloc_tracer::{Mode, Settings};
use alloc_tracer_format::manifest::Manifest;
use alloc_tracer_format::schema::{self, ColumnType};
use parquet::basic::{LogicalType, Type as Physical};
use parquet::file::reader::{FileReader, SerializedFileReader};
use std::hint::black_box;

const N: usize = 5000;

#[inline(never)]
fn work() {
    for i in 0..N {
        black_box(Box::new([i as u64; 20]));
    }
}

/// Records `work` in `sites` mode, writes a report and checks it: counts, and every
/// table with the documented columns, types and row counts.
/// `name` is the inner allocator's: the manifest and the summary must name it.
pub fn report_has_the_schema(name: &'static str) {
    alloc_tracer::set_allocator_name(name);
    Settings {
        mode: Mode::Sites,
        ..Default::default()
    }
    .apply();
    // Exact over this inner allocator: each of `work`'s boxes once, allocated and
    // freed.
    let ((), m) = alloc_tracer::measure(work);
    assert_eq!(
        (m.allocs, m.frees, m.reallocs),
        (N as u64, N as u64, 0),
        "{m:?}"
    );
    assert_eq!(m.bytes, (N * 160) as u64);

    let dir = test_scratch::Scratch::new(&format!("alloc-tracer-{name}"));
    let summary = alloc_tracer::write_report(&dir.join("report")).unwrap();
    Settings::default().apply();
    let printed = summary.to_string();
    let report = summary.dir;
    let manifest =
        Manifest::from_json(&std::fs::read(report.join(schema::MANIFEST)).unwrap()).unwrap();
    assert!(manifest.is_alloc_tracer());
    assert_eq!(manifest.mode, "sites");
    assert_eq!(manifest.allocator.as_deref(), Some(name));
    assert!(
        printed.contains(&format!("mode sites over {name}, whole run:")),
        "{printed}"
    );
    for table in schema::TABLES {
        let f = std::fs::File::open(report.join(table.file)).unwrap();
        let reader = SerializedFileReader::new(f).unwrap();
        let fields = reader
            .metadata()
            .file_metadata()
            .schema_descr()
            .columns()
            .to_vec();
        let names: Vec<&str> = fields.iter().map(|c| c.name()).collect();
        let want: Vec<&str> = table.columns.iter().map(|c| c.name).collect();
        assert_eq!(names, want, "{}", table.file);
        for (c, col) in fields.iter().zip(table.columns) {
            let integer = |bits: i8, signed: bool| {
                matches!(c.logical_type_ref(), Some(LogicalType::Integer(i))
                    if i.bit_width == bits && i.is_signed == signed)
            };
            let ok = match col.ty {
                ColumnType::UInt64 => c.physical_type() == Physical::INT64 && integer(64, false),
                ColumnType::Int64 => c.physical_type() == Physical::INT64 && integer(64, true),
                ColumnType::UInt32 => c.physical_type() == Physical::INT32 && integer(32, false),
                ColumnType::Boolean => c.physical_type() == Physical::BOOLEAN,
                ColumnType::String => {
                    c.physical_type() == Physical::BYTE_ARRAY
                        && c.logical_type_ref() == Some(&LogicalType::String)
                }
            };
            assert!(ok, "{}.{}", table.file, col.name);
        }
        let rows = manifest
            .tables
            .iter()
            .find(|t| t.file == table.file)
            .map(|t| t.rows)
            .unwrap();
        assert_eq!(reader.metadata().file_metadata().num_rows() as usize, rows);
    }
}
