//! `--allocator`: the same synthesis over each inner allocator writes a report whose
//! manifest and summary name that allocator, with the same exact counts of the
//! synthesis (the program allocates alike whatever serves it). That a run whose
//! allocator, fixed at start, differs from the parsed command line is refused is
//! tested in `src/allocator.rs`: no command line clap accepts makes them differ.

mod common;
use common::driver;

/// Runs a traced 2-block SHA-256 chain over `allocator` (`None`: the default) and
/// returns its iteration line, summary and manifest.
fn traced_run(
    allocator: Option<&str>,
    dir: &std::path::Path,
) -> (serde_json::Value, String, serde_json::Value) {
    let report = dir.join(allocator.unwrap_or("default"));
    let mut cmd = driver();
    if let Some(a) = allocator {
        cmd.args(["--allocator", a]);
    }
    let out = cmd
        .args(["--trace", "count", "--json", "--report"])
        .arg(&report)
        .args(["sha256", "--blocks", "2"])
        .output()
        .unwrap();
    let summary = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{allocator:?}: {summary}");
    let line = serde_json::from_slice(out.stdout.split(|&b| b == b'\n').next().unwrap()).unwrap();
    let manifest =
        serde_json::from_slice(&std::fs::read(report.join("manifest.json")).unwrap()).unwrap();
    (line, summary, manifest)
}

#[test]
fn each_allocator_is_named_in_the_output_and_the_report() {
    let dir = std::env::temp_dir().join(format!("synth-driver-allocators-{}", std::process::id()));
    let (line, summary, manifest) = traced_run(None, &dir);
    assert_eq!(line["allocator"], "jemalloc");
    assert_eq!(manifest["allocator"], "jemalloc");
    assert!(
        summary.contains("mode count over jemalloc, whole run:"),
        "{summary}"
    );
    // The synthesis's own allocations: the whole run's totals vary by one or two
    // between runs (thread start-up), the synthesis's do not.
    let allocs = line["allocs"].as_u64().unwrap();
    assert!(allocs > 100_000, "{allocs}");
    assert!(manifest["totals"]["alloc_count"].as_u64().unwrap() >= allocs);

    for allocator in ["jemalloc", "system", "mimalloc"] {
        let (line, summary, manifest) = traced_run(Some(allocator), &dir);
        assert_eq!(line["allocator"], allocator);
        assert_eq!(manifest["allocator"], allocator);
        assert!(
            summary.contains(&format!("mode count over {allocator}, whole run:")),
            "{summary}"
        );
        assert_eq!(line["allocs"].as_u64(), Some(allocs), "{allocator}");
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn the_flag_is_read_in_either_spelling_and_position() {
    let spellings: [&[&str]; 2] = [
        &["--allocator=system", "--json", "sha256", "--blocks", "1"],
        &["--json", "sha256", "--allocator", "system", "--blocks", "1"],
    ];
    for args in spellings {
        let line = common::run_json(args);
        assert_eq!(line["allocator"], "system", "{args:?}");
    }
}

#[test]
fn an_unknown_allocator_is_a_usage_error() {
    let out = driver()
        .args(["--allocator", "tcmalloc", "sha256"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("[possible values: jemalloc, system, mimalloc]"),
        "{stderr}"
    );
}
