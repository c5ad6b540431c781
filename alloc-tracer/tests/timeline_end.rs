//! A report's timeline ends at the report: a run shorter than the interval still has
//! a point, taken when the report was, with the run's counts.

mod common;

use alloc_tracer::{Mode, Settings, TracingAllocator};
use std::hint::black_box;

#[global_allocator]
static GLOBAL: TracingAllocator<tikv_jemallocator::Jemalloc> =
    TracingAllocator::new(tikv_jemallocator::Jemalloc);

#[test]
fn a_run_shorter_than_the_interval_has_its_closing_point() {
    Settings {
        mode: Mode::Count,
        timeline_ms: 60_000,
        ..Settings::default()
    }
    .apply();
    let mut kept = Vec::new();
    for i in 0..1000 {
        kept.push(black_box(vec![0u8; 64 + i]));
    }
    let root = common::scratch("timeline-end");
    let dir = root.join("report");
    alloc_tracer::write_report(&dir).unwrap();
    drop(kept);
    let points = common::read_table(&dir, alloc_tracer::schema::TIMELINE.file);
    assert_eq!(points.len(), 1, "{points:?}");
    let p = &points[0];
    assert!(common::u64_of(p, "alloc_count") >= 1000, "{p:?}");
    let parquet::record::Field::Long(live) = p["live_bytes"] else {
        panic!("live_bytes: {p:?}")
    };
    assert!(live >= 64 * 1000, "{p:?}");
    // Taken at the report's moment, which ends the run.
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join(alloc_tracer::schema::MANIFEST)).unwrap())
            .unwrap();
    let end_s = manifest["duration_s"].as_f64().unwrap();
    let at_s = common::u64_of(p, "time_ns") as f64 * 1e-9;
    assert!(
        (at_s - end_s).abs() < 0.05,
        "point at {at_s} s, run ended at {end_s} s"
    );
    // A second report takes its own closing point; the first one's was not kept.
    let again = root.join("again");
    alloc_tracer::write_report(&again).unwrap();
    let points = common::read_table(&again, alloc_tracer::schema::TIMELINE.file);
    assert_eq!(points.len(), 1, "{points:?}");
    let _ = std::fs::remove_dir_all(root);
}
