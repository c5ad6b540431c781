//! A panic does not lose the report: a `Session` writes it while unwinding, and the
//! `ALLOC_TRACE_REPORT` exit hook writes it when a panic ends the process.

mod common;

use alloc_tracer::{Mode, Session, Settings, TracingAllocator};
use std::hint::black_box;
use std::process::Command;

#[global_allocator]
static GLOBAL: TracingAllocator<tikv_jemallocator::Jemalloc> =
    TracingAllocator::new(tikv_jemallocator::Jemalloc);

#[test]
fn session_writes_while_unwinding() {
    Settings {
        mode: Mode::Sites,
        ..Default::default()
    }
    .apply();
    let dir_scratch = common::scratch("unwind");
    let dir = dir_scratch.join("report");
    let d = dir.clone();
    let r = std::panic::catch_unwind(move || {
        let _session = Session::new(d);
        black_box(vec![1u8; 1000]);
        panic!("traced code failed");
    });
    assert!(r.is_err());
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    // The work the session covered stopped short: the report says so.
    assert_eq!(manifest["incomplete"], "panic");
}

/// Run as a child by the test below: panics with the environment asking for a
/// report at exit. Ignored, so that a plain `cargo test` does not count it as a
/// test that passed.
#[test]
#[ignore = "run as a child by exit_hook_writes_after_a_panic"]
fn child_panics_with_exit_report() {
    if std::env::var_os("ALLOC_TRACER_TEST_CHILD").is_none() {
        return;
    }
    black_box(vec![1u8; 1000]);
    panic!("the child fails on purpose");
}

#[test]
fn exit_hook_writes_after_a_panic() {
    let dir_scratch = common::scratch("exit");
    let dir = dir_scratch.join("report");
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "child_panics_with_exit_report",
            "--test-threads=1",
        ])
        .env("ALLOC_TRACER_TEST_CHILD", "1")
        .env("ALLOC_TRACE", "sites")
        .env("ALLOC_TRACE_REPORT", &dir)
        .output()
        .unwrap();
    assert!(!out.status.success(), "the child should have failed");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("alloc-tracer: report written to "),
        "{stderr}"
    );
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["mode"], "sites");
    assert!(manifest["totals"]["alloc_count"].as_u64().unwrap() > 0);
    // The test harness exits with 101 after a failed test.
    assert_eq!(manifest["incomplete"], "exit status 101");
}

#[test]
fn bad_settings_are_reported_not_fatal() {
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_panics_with_exit_report"])
        .env("ALLOC_TRACE", "sample:zero")
        .output()
        .unwrap();
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("ignoring invalid ALLOC_TRACE"), "{stderr}");
}
