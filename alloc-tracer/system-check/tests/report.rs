//! alloc-tracer over `std::alloc::System`: exact counts and a report with the
//! documented tables and columns.

use alloc_tracer::{Mode, Settings, TracingAllocator};
use alloc_tracer_format::manifest::Manifest;
use alloc_tracer_format::schema::{self, ColumnType};
use parquet::basic::{LogicalType, Type as Physical};
use parquet::file::reader::{FileReader, SerializedFileReader};
use std::hint::black_box;

#[global_allocator]
static GLOBAL: TracingAllocator<std::alloc::System> = TracingAllocator::new(std::alloc::System);

const N: usize = 5000;

#[inline(never)]
fn work() {
    for i in 0..N {
        black_box(Box::new([i as u64; 20]));
    }
}

#[test]
fn reports_over_the_system_allocator() {
    Settings {
        mode: Mode::Sites,
        ..Default::default()
    }
    .apply();
    let before = alloc_tracer::counts().total(|p| p.allocs);
    work();
    let after = alloc_tracer::counts().total(|p| p.allocs);
    assert!(after - before >= N as u64);

    let dir = std::env::temp_dir().join(format!("alloc-tracer-system-{}", std::process::id()));
    let summary = alloc_tracer::write_report(&dir.join("report")).unwrap();
    Settings::default().apply();
    let report = summary.dir;
    let manifest =
        Manifest::from_json(&std::fs::read(report.join(schema::MANIFEST)).unwrap()).unwrap();
    assert!(manifest.is_alloc_tracer());
    assert_eq!(manifest.mode, "sites");
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
            let ok = match col.ty {
                ColumnType::UInt64 => c.physical_type() == Physical::INT64,
                ColumnType::UInt32 => c.physical_type() == Physical::INT32,
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
    std::fs::remove_dir_all(dir).unwrap();
}
