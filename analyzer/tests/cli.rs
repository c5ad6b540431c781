//! The CLI on a small fixture report (written by alloc-tracer's demo example):
//! snapshot tests of each output format, and one-line errors for bad input.
//! `UPDATE_SNAPSHOTS=1 cargo test -p analyzer` rewrites the snapshots.

use std::path::{Path, PathBuf};
use std::process::Command;

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/demo-report")
}

fn analyzer(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_analyzer"))
        .args(args)
        .output()
        .unwrap()
}

fn snapshot(name: &str, args: &[&str]) {
    let out = analyzer(args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got = String::from_utf8(out.stdout).unwrap();
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/snapshots")
        .join(name);
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&path, &got).unwrap();
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (UPDATE_SNAPSHOTS=1 writes it)", path.display()));
    assert_eq!(got, want, "{name} differs from its snapshot");
}

#[test]
fn top_table_json_csv() {
    let r = fixture();
    let r = r.to_str().unwrap();
    snapshot("top.txt", &["top", r, "--limit", "5"]);
    snapshot(
        "top-build.json",
        &[
            "top", r, "--phase", "build", "--limit", "3", "--format", "json",
        ],
    );
    snapshot(
        "top-bytes.csv",
        &["top", r, "--by", "bytes", "--limit", "3", "--format", "csv"],
    );
}

#[test]
fn categories_table_and_json() {
    let r = fixture();
    let r = r.to_str().unwrap();
    snapshot("categories.txt", &["categories", r]);
    snapshot("categories.json", &["categories", r, "--format", "json"]);
}

#[test]
fn user_rules_claim_sites() {
    let dir = std::env::temp_dir().join(format!("analyzer-rules-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let rules = dir.join("rules.toml");
    std::fs::write(
        &rules,
        "[[category]]\nname = \"demo build\"\nframes = [{ function = \"build\", file = \"demo.rs\" }]\n",
    )
    .unwrap();
    let out = analyzer(&[
        "categories",
        fixture().to_str().unwrap(),
        "--rules",
        rules.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cats: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(cats[0]["category"], "demo build");
    assert!(cats[0]["alloc_count"].as_u64().unwrap() > 0);
    assert_eq!(
        cats.as_array().unwrap().len(),
        2,
        "the rule, then the unmatched"
    );
}

fn copy_fixture(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("analyzer-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for e in std::fs::read_dir(fixture()).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), dir.join(e.file_name())).unwrap();
    }
    dir
}

fn assert_one_line_error(args: &[&str], expected: &str) {
    let out = analyzer(args);
    assert_eq!(out.status.code(), Some(2), "{args:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains(expected), "{stderr}");
    assert!(out.stdout.is_empty());
}

#[test]
fn bad_input_is_one_line_naming_the_file() {
    assert_one_line_error(&["top", "/no/such/report"], "/no/such/report");
    let no_manifest = copy_fixture("no-manifest");
    std::fs::remove_file(no_manifest.join("manifest.json")).unwrap();
    assert_one_line_error(&["top", no_manifest.to_str().unwrap()], "manifest.json");
    let future = copy_fixture("future");
    let m = std::fs::read_to_string(future.join("manifest.json")).unwrap();
    std::fs::write(
        future.join("manifest.json"),
        m.replacen("\"schema_version\": 1", "\"schema_version\": 99", 1),
    )
    .unwrap();
    assert_one_line_error(&["top", future.to_str().unwrap()], "schema version 99");
    let truncated = copy_fixture("truncated");
    let sites = std::fs::read(truncated.join("sites.parquet")).unwrap();
    std::fs::write(truncated.join("sites.parquet"), &sites[..sites.len() / 2]).unwrap();
    assert_one_line_error(&["top", truncated.to_str().unwrap()], "sites.parquet");
}
