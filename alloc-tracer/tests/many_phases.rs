//! Past the phase names a report tells apart, later names are counted together under
//! `(other phases)`, every allocation still counted, and the program is told so once,
//! when it happens.

mod common;

use alloc_tracer::{Mode, Settings, TracingAllocator};
use std::hint::black_box;
use std::process::Command;

#[global_allocator]
static GLOBAL: TracingAllocator<tikv_jemallocator::Jemalloc> =
    TracingAllocator::new(tikv_jemallocator::Jemalloc);

/// Phase names the child enters, one after another.
const NAMES: usize = 20;

/// The child: enters `NAMES` phases, allocating 100 blocks in each, and writes its
/// report where `ALLOC_TRACER_TEST_REPORT` says.
#[test]
#[ignore = "run by many_phases_are_counted_together_and_said_to_be, in a process of its own"]
fn child_enters_many_phases() {
    let Some(dir) = std::env::var_os("ALLOC_TRACER_TEST_REPORT") else {
        return;
    };
    Settings {
        mode: Mode::Count,
        timeline_ms: 0,
        ..Settings::default()
    }
    .apply();
    for i in 0..NAMES {
        let _p = alloc_tracer::phase(&format!("phase-{i:02}"));
        for _ in 0..100 {
            black_box(vec![0u8; 48]);
        }
    }
    alloc_tracer::write_report(std::path::Path::new(&dir)).unwrap();
}

#[test]
fn many_phases_are_counted_together_and_said_to_be() {
    let root = common::scratch("many-phases");
    let dir = root.join("report");
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "child_enters_many_phases",
            "--nocapture",
        ])
        .env("ALLOC_TRACER_TEST_REPORT", &dir)
        .env_remove("ALLOC_TRACE")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    // Said once, naming the first name past the limit (`main` and 14 of the child's).
    assert_eq!(err.matches("alloc-tracer: phase \"").count(), 1, "{err}");
    assert!(
        err.contains("phase \"phase-14\" is past the 15 names reports tell apart"),
        "{err}"
    );
    let phases = common::read_table(&dir, alloc_tracer::schema::PHASES.file);
    let names: Vec<&str> = phases.iter().map(|r| common::str_of(r, "phase")).collect();
    assert_eq!(names.len(), 16, "{names:?}");
    assert!(
        names.contains(&"(other phases)") && names.contains(&"phase-13"),
        "{names:?}"
    );
    assert!(!names.contains(&"phase-14"), "{names:?}");
    // Every allocation is still counted: the merged phases hold the last 6 names' 600.
    let other = phases
        .iter()
        .find(|r| common::str_of(r, "phase") == "(other phases)")
        .unwrap();
    assert!(common::u64_of(other, "alloc_count") >= 600, "{other:?}");
    let _ = std::fs::remove_dir_all(root);
}
