//! End to end: a SHA-256 chain synthesized by the stock bellperson prover under
//! `--trace sites`; the report's top sites are bellpepper-core LinearCombination code.

mod common;
use common::driver;

#[test]
fn sha256_under_sites_names_linear_combination_frames() {
    let dir = std::env::temp_dir().join(format!("synth-driver-e2e-{}", std::process::id()));
    let report = dir.join("report");
    let out = driver()
        .args(["--trace", "sites", "--json", "--report"])
        .arg(&report)
        .args(["sha256", "--blocks", "2"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line: serde_json::Value =
        serde_json::from_slice(out.stdout.split(|&b| b == b'\n').next().unwrap()).unwrap();
    // 2 blocks of ~26 k constraints, counted independently of the traced run.
    let rows = line["rows"].as_u64().unwrap();
    assert!((50_000..56_000).contains(&rows), "rows {rows}");
    let allocs = line["allocs"].as_u64().unwrap();
    assert!(allocs > rows);
    // Reallocs apart, as the analyzer's alloc+realloc columns add them.
    let reallocs = line["reallocs"].as_u64().unwrap();
    assert!(reallocs > 0 && reallocs < allocs, "{line}");
    // The summary goes to stderr with --json; its top site is LinearCombination code.
    let summary = String::from_utf8_lossy(&out.stderr);
    let top = summary
        .lines()
        .skip_while(|l| !l.contains("top sites"))
        .nth(2)
        .unwrap_or_default();
    assert!(
        top.contains("lc.rs"),
        "top site is not bellpepper-core's lc.rs: {summary}"
    );
    let manifest = common::manifest(&report);
    assert_eq!(manifest["mode"], "sites");
    assert_eq!(
        manifest["lifetime_interval"],
        alloc_tracer::DEFAULT_LIFETIME_INTERVAL
    );
    assert!(lifetime_rows(&manifest) > 0, "{manifest}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn lifetimes_option_reaches_the_tracer() {
    let dir = std::env::temp_dir().join(format!("synth-driver-lifetimes-{}", std::process::id()));
    let report = dir.join("report");
    common::run_json(&[
        "--trace",
        "sites",
        "--lifetimes",
        "0",
        "--json",
        "--report",
        report.to_str().unwrap(),
        "sha256",
        "--blocks",
        "1",
    ]);
    let manifest = common::manifest(&report);
    assert_eq!(manifest["lifetime_interval"], 0);
    assert_eq!(lifetime_rows(&manifest), 0, "{manifest}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn the_tracers_variables_set_what_their_options_do() {
    // ALLOC_TRACE_HEAP and friends are the options' defaults; an option given wins.
    let dir = std::env::temp_dir().join(format!("synth-driver-env-{}", std::process::id()));
    for (i, (extra, heap, timeline)) in [(&[][..], 65536, 50), (&["--heap-sample", "0"][..], 0, 50)]
        .into_iter()
        .enumerate()
    {
        let report = dir.join(format!("report-{i}"));
        let out = driver()
            .env("ALLOC_TRACE_HEAP", "64KiB")
            .env("ALLOC_TRACE_TIMELINE_MS", "50")
            .env("ALLOC_TRACE_DEPTH", "7")
            .env("ALLOC_TRACE_LIFETIMES", "0")
            .args(["--trace", "sites", "--json", "--report"])
            .arg(&report)
            .args(extra)
            .args(["sha256", "--blocks", "1"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let m = common::manifest(&report);
        assert_eq!(m["heap_interval"], heap, "{extra:?}");
        assert_eq!(m["timeline_interval_ms"], timeline);
        assert_eq!(m["stack_depth"], 7);
        assert_eq!(m["lifetime_interval"], 0);
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn an_option_given_replaces_a_malformed_variable() {
    // clap parsed the variable at the level where the option was not given (before
    // or after the subcommand) and refused the run, naming the variable.
    let dir = std::env::temp_dir().join(format!("synth-driver-env-bad-{}", std::process::id()));
    for (i, args) in [
        &["--depth", "8", "sha256", "--blocks", "1"][..],
        &["sha256", "--blocks", "1", "--depth", "8"][..],
    ]
    .into_iter()
    .enumerate()
    {
        let report = dir.join(format!("report-{i}"));
        let out = driver()
            .env("ALLOC_TRACE_DEPTH", "99")
            .args(["--trace", "sites", "--json", "--report"])
            .arg(&report)
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {out:?}");
        assert_eq!(common::manifest(&report)["stack_depth"], 8, "{args:?}");
    }
    // Not given, the variable is still refused.
    let out = driver()
        .env("ALLOC_TRACE_DEPTH", "99")
        .args(["--trace", "sites", "sha256", "--blocks", "1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("ALLOC_TRACE_DEPTH"),
        "{out:?}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn the_driver_leaves_nothing_of_its_own_live() {
    // The stock prover's shape is counted on a circuit of its own: made and freed
    // untraced. Made traced and freed untraced, its message bits (32 KiB at 64
    // blocks) stayed live in the report: live bytes at the end, the peak and the
    // timeline. What is left is frees of blocks made before tracing began (the
    // command line's), a few KiB below zero.
    let dir = std::env::temp_dir().join(format!("synth-driver-live-{}", std::process::id()));
    let report = dir.join("report");
    common::run_json(&[
        "--trace",
        "count",
        "--json",
        "--report",
        report.to_str().unwrap(),
        "sha256",
        "--blocks",
        "64",
    ]);
    let manifest = common::manifest(&report);
    let live = manifest["totals"]["live_bytes_end"].as_i64().unwrap();
    assert!(live.abs() < 16 << 10, "{live} bytes live at the end");
    let _ = std::fs::remove_dir_all(dir);
}

/// Rows of the report's lifetimes table, as its manifest lists them.
fn lifetime_rows(manifest: &serde_json::Value) -> u64 {
    manifest["tables"]
        .as_array()
        .and_then(|t| t.iter().find(|t| t["file"] == "lifetimes.parquet"))
        .and_then(|t| t["rows"].as_u64())
        .expect("lifetimes.parquet in the manifest's tables")
}

#[test]
fn bad_input_is_one_line_and_exit_code_2() {
    let out = driver().args(["sha256", "--blocks", "0"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = driver()
        .args([
            "--trace",
            "count",
            "--report",
            "/proc/no/such/dir",
            "sha256",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("synth-driver: "), "{stderr}");
    assert!(stderr.contains("/proc/no/such/dir"), "{stderr}");
}

#[test]
fn progress_bar_stays_off_pipes() {
    // Long enough (about 3 s) for the bar to appear on a terminal; stderr is a pipe
    // here, so it must carry nothing, and stdout only the iteration lines.
    let out = driver()
        .args(["--json", "sha256", "--blocks", "32", "-i", "4"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(stdout.lines().count(), 4);
    assert!(
        stdout
            .lines()
            .all(|l| l.starts_with('{') && !l.contains('\u{1b}'))
    );
}
