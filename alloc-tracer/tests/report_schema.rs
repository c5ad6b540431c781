//! The written report matches `docs/report-schema.md` and `schema.rs`, table by table
//! and column by column; directory replacement is atomic and careful.

mod common;

use alloc_tracer::schema::{self, ColumnType};
use alloc_tracer::{Mode, Settings, TracingAllocator};
use parquet::basic::{LogicalType, Repetition, Type as Physical};
use parquet::file::reader::{FileReader, SerializedFileReader};
use std::collections::BTreeMap;
use std::hint::black_box;
use std::path::Path;

#[global_allocator]
static GLOBAL: TracingAllocator<tikv_jemallocator::Jemalloc> =
    TracingAllocator::new(tikv_jemallocator::Jemalloc);

type Doc = BTreeMap<String, Vec<(String, String, bool)>>;

/// Tables and columns as the schema document lists them.
fn documented() -> Doc {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/report-schema.md");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut doc = Doc::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        if let Some(h) = line.strip_prefix("### `") {
            current = Some(h.trim_end_matches('`').to_owned());
            doc.insert(current.clone().unwrap(), vec![]);
        } else if let Some(table) = &current
            && line.starts_with("| `")
        {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let name = cells[1].trim_matches('`').to_owned();
            let nullable = match cells[3] {
                "yes" => true,
                "no" => false,
                other => panic!("{table}.{name}: nullable is {other:?}"),
            };
            doc.get_mut(table)
                .unwrap()
                .push((name, cells[2].to_owned(), nullable));
        } else if line.starts_with("## ") {
            current = None;
        }
    }
    doc
}

fn parquet_type_name(physical: Physical, logical: Option<&LogicalType>) -> &'static str {
    let unsigned = |bits| matches!(logical, Some(LogicalType::Integer(i)) if i.bit_width == bits && !i.is_signed);
    let signed = |bits| matches!(logical, Some(LogicalType::Integer(i)) if i.bit_width == bits && i.is_signed);
    match (physical, logical) {
        (Physical::INT64, _) if unsigned(64) => "UInt64",
        (Physical::INT64, _) if signed(64) => "Int64",
        (Physical::INT32, _) if unsigned(32) => "UInt32",
        (Physical::BOOLEAN, None) => "Boolean",
        (Physical::BYTE_ARRAY, Some(LogicalType::String)) => "String",
        other => panic!("unexpected parquet type {other:?}"),
    }
}

#[inline(never)]
fn workload() -> Vec<Vec<u8>> {
    let _p = alloc_tracer::phase("build");
    // Live bytes pass 1 MiB, so that a peak is kept.
    let mut kept = vec![black_box(vec![1u8; 2 << 20])];
    for i in 0..5000 {
        let t = black_box(vec![0u8; 100 + i % 300]);
        if i % 10 == 0 {
            kept.push(t);
        }
    }
    kept
}

#[test]
fn report_matches_the_documented_schema() {
    let started = std::time::Instant::now();
    Settings {
        mode: Mode::Sites,
        depth: 16,
        lifetime_interval: 4,
        // Every table gets rows: heap sampling samples nearly every block of the
        // workload, and the timeline samples every millisecond.
        heap_interval: Some(64),
        timeline_ms: 1,
    }
    .apply();
    let kept = workload();
    {
        let _p = alloc_tracer::phase("churn");
        let mut v: Vec<u64> = Vec::new();
        for i in 0..10_000 {
            v.push(i);
        }
        black_box(v);
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    {
        // A phase that only frees: its peak is what was live as it began.
        let _p = alloc_tracer::phase("release");
        drop(kept);
    }
    // Live at the report: a row of `heap_end.parquet`.
    let still_live = black_box(vec![2u8; 4096]);
    let root = common::scratch("schema");
    let dir = root.join("report");
    let ran = started.elapsed().as_secs_f64();
    alloc_tracer::write_report(&dir).unwrap();
    let writing = started.elapsed().as_secs_f64() - ran;
    drop(still_live);
    // The kernel's high-water mark read here, apart from the tracer: at least what it
    // was when the report was taken.
    let hwm_after = std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap()
        * 1024;

    // The document and the code agree.
    let doc = documented();
    let code: Doc = schema::TABLES
        .iter()
        .map(|t| {
            let cols = t
                .columns
                .iter()
                .map(|c| (c.name.to_owned(), c.ty.polars_name().to_owned(), c.nullable))
                .collect();
            (t.file.to_owned(), cols)
        })
        .collect();
    assert_eq!(doc, code, "docs/report-schema.md and schema.rs differ");

    // The files carry exactly that schema, and the manifest lists them.
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join(schema::MANIFEST)).unwrap()).unwrap();
    assert_eq!(manifest["schema_version"], schema::SCHEMA_VERSION);
    // The run ends when the report is taken: the time symbolizing and writing take
    // (the first report's symbols: tens of milliseconds) is not the run's.
    let duration = manifest["duration_s"].as_f64().unwrap();
    assert!(
        duration >= 0.02 && duration <= ran + writing / 2.0,
        "duration_s {duration}: the run took {ran} s, writing its report {writing} s"
    );
    for key in [
        "command_line",
        "host",
        "cpu",
        "start_unix_s",
        "end_unix_s",
        "mode",
        "stack_depth",
        "sample_interval",
        "totals",
        "dropped",
        "tracer",
        "tables",
    ] {
        assert!(!manifest[key].is_null(), "manifest lacks {key}");
    }
    for table in schema::TABLES {
        let f = std::fs::File::open(dir.join(table.file)).unwrap();
        let reader = SerializedFileReader::new(f).unwrap();
        let meta = reader.metadata().file_metadata();
        let rows = meta.num_rows() as u64;
        let listed = manifest["tables"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["file"] == table.file)
            .unwrap_or_else(|| panic!("manifest lacks {}", table.file));
        assert_eq!(listed["rows"].as_u64().unwrap(), rows, "{}", table.file);
        assert!(rows > 0, "{} is empty", table.file);
        let fields = meta.schema_descr().root_schema().get_fields().to_vec();
        assert_eq!(fields.len(), table.columns.len(), "{}", table.file);
        for (field, col) in fields.iter().zip(table.columns) {
            let info = field.get_basic_info();
            assert_eq!(info.name(), col.name, "{}", table.file);
            let ty = parquet_type_name(field.get_physical_type(), info.logical_type_ref());
            assert_eq!(ty, col.ty.polars_name(), "{}.{}", table.file, col.name);
            let nullable = info.repetition() == Repetition::OPTIONAL;
            assert_eq!(nullable, col.nullable, "{}.{}", table.file, col.name);
        }
    }
    assert_eq!(ColumnType::UInt64.polars_name(), "UInt64");

    // Phases are separate, and lifetimes were measured.
    let phases: Vec<String> = common::read_table(&dir, schema::PHASES.file)
        .iter()
        .map(|r| common::str_of(r, "phase").to_owned())
        .collect();
    for p in ["main", "build", "churn"] {
        assert!(phases.iter().any(|x| x == p), "{p} missing from {phases:?}");
    }
    // Each phase's peak: `build` held the 2 MiB block, and the run's peak is the
    // highest of them.
    let peaks: Vec<(String, i64)> = common::read_table(&dir, schema::PHASES.file)
        .iter()
        .map(|r| {
            let peak = match &r["peak_live_bytes"] {
                parquet::record::Field::Long(v) => *v,
                other => panic!("peak_live_bytes: {other:?}"),
            };
            (common::str_of(r, "phase").to_owned(), peak)
        })
        .collect();
    let of = |phase: &str| peaks.iter().find(|(p, _)| p == phase).unwrap().1;
    assert!(of("build") >= 2 << 20, "{peaks:?}");
    assert!(of("release") >= 2 << 20, "{peaks:?}");
    let run_peak = manifest["totals"]["peak_live_bytes"].as_i64().unwrap();
    assert_eq!(
        peaks.iter().map(|(_, b)| *b).max(),
        Some(run_peak),
        "{peaks:?}"
    );

    // The timeline samples resident memory in bytes: never 0 where /proc exists, at
    // least the megabyte any test process has resident (not pages or KiB). The
    // report's peak is never below a size it shows, and not far above the kernel's
    // high-water mark read after it (no unit counted twice; the kernel's per-thread
    // counts can lag each other by a little).
    let rss: Vec<u64> = common::read_table(&dir, schema::TIMELINE.file)
        .iter()
        .map(|r| common::u64_of(r, "rss_bytes"))
        .collect();
    let max_rss = manifest["totals"]["max_rss_bytes"].as_u64().unwrap();
    assert!(rss.iter().all(|&b| b >= 1 << 20), "{rss:?}");
    assert!(rss.iter().all(|&b| b <= max_rss), "{rss:?} above {max_rss}");
    assert!(
        max_rss <= hwm_after + (16 << 20),
        "max_rss_bytes {max_rss}, VmHWM {hwm_after}"
    );
    // And at the report's moment, in the manifest: `still_live`'s process.
    let end = manifest["totals"]["rss_bytes_end"].as_u64().unwrap();
    assert!(
        end >= 1 << 20 && end <= max_rss,
        "rss_bytes_end {end}, {max_rss}"
    );

    // The tracer's own memory, by part: the parts sum to it, and a `sites` run holds
    // each of these.
    let parts = &manifest["tracer"]["memory_parts"];
    let part = |k: &str| {
        parts[k]
            .as_u64()
            .unwrap_or_else(|| panic!("memory_parts.{k}"))
    };
    let names = [
        "thread_states",
        "site_tables",
        "kept_walks",
        "stacks",
        "merged_sites",
        "lifetimes",
        "heap",
        "timeline",
    ];
    assert_eq!(
        names.iter().map(|k| part(k)).sum::<u64>(),
        manifest["tracer"]["memory_bytes"].as_u64().unwrap()
    );
    for k in ["thread_states", "site_tables", "kept_walks", "stacks"] {
        assert!(part(k) > 0, "memory_parts.{k} is 0");
    }
    assert_eq!(parts.as_object().unwrap().len(), names.len(), "{parts}");

    // Writing again replaces the report; a directory that is not a report is refused.
    alloc_tracer::write_report(&dir).unwrap();
    assert!(dir.join(schema::MANIFEST).exists());
    let leftovers: Vec<_> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(leftovers, vec![std::ffi::OsString::from("report")]);
    let other = root.join("not-a-report");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("precious.txt"), "keep me").unwrap();
    let err = alloc_tracer::write_report(&other).unwrap_err();
    let err = err.to_string();
    assert!(
        err.contains("precious.txt") && err.contains("not replacing"),
        "{err}"
    );
    assert!(other.join("precious.txt").exists());
}
