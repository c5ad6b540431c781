//! `ALLOC_TRACE_REPORT` writes the report at exit however the mode was chosen (from
//! `ALLOC_TRACE` or in code), says why when tracing never came on, and bad settings
//! are named.

mod common;

use alloc_tracer::{Mode, Settings, TracingAllocator};
use std::hint::black_box;
use std::path::Path;
use std::process::{Command, Output};

#[global_allocator]
static GLOBAL: TracingAllocator<tikv_jemallocator::Jemalloc> =
    TracingAllocator::new(tikv_jemallocator::Jemalloc);

/// Allocations the child makes once tracing is on.
const ALLOCS: usize = 1000;

/// Run as a child by the tests below: chooses `count` mode in code when
/// `ALLOC_TRACER_TEST_CHILD` is `apply`, then allocates. Ignored, so that a plain
/// `cargo test` does not count it as a test that passed.
#[test]
#[ignore = "run as a child by the tests of this file"]
fn child_allocates() {
    let Some(how) = std::env::var_os("ALLOC_TRACER_TEST_CHILD") else {
        return;
    };
    if how == "apply" {
        Settings {
            mode: Mode::Count,
            ..Default::default()
        }
        .apply();
    }
    for i in 0..ALLOCS {
        black_box(vec![0u8; 64 + i % 64]);
    }
}

/// The child, with `ALLOC_TRACE_REPORT` set to `dir` and `env` added.
fn child(how: &str, dir: &Path, env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--ignored",
        "--exact",
        "child_allocates",
        "--test-threads=1",
    ])
    .env("ALLOC_TRACER_TEST_CHILD", how)
    .env("ALLOC_TRACE_REPORT", dir)
    .env_remove("ALLOC_TRACE");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{out:?}");
    out
}

#[test]
fn a_mode_chosen_in_code_is_reported_at_exit() {
    let dir = common::scratch("exit-apply").join("report");
    let out = child("apply", &dir, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("alloc-tracer: report written to "),
        "{stderr}"
    );
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["mode"], "count");
    assert!(manifest["totals"]["alloc_count"].as_u64().unwrap() >= ALLOCS as u64);
}

#[test]
fn a_report_asked_for_with_tracing_never_on_says_why_there_is_none() {
    let dir = common::scratch("exit-never").join("report");
    let out = child("idle", &dir, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("ALLOC_TRACE_REPORT is set, but tracing was never on"),
        "{stderr}"
    );
    assert!(!dir.exists());
    // Chosen off: nothing to say.
    let out = child("idle", &dir, &[("ALLOC_TRACE", "off")]);
    assert!(!String::from_utf8_lossy(&out.stderr).contains("alloc-tracer"));
    assert!(!dir.exists());
}

#[test]
fn a_bad_setting_is_named_with_its_value() {
    let dir = common::scratch("exit-bad").join("report");
    for (name, value) in [
        ("ALLOC_TRACE", "site"),
        ("ALLOC_TRACE_HEAP", "1MB"),
        ("ALLOC_TRACE_DEPTH", "99"),
    ] {
        let out = child("idle", &dir, &[(name, value)]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let line = format!("alloc-tracer: ignoring invalid {name}={value} (expected ");
        assert!(stderr.contains(&line), "{stderr}");
        assert!(stderr.contains("); tracing is off\n"), "{stderr}");
        assert!(!dir.exists());
    }
}
