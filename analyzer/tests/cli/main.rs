//! The CLI on a small fixture report (written by alloc-tracer's demo example) and a
//! fixture calibration (written by `analyzer calibrate` on the development machine):
//! snapshot tests of each output format, exports read back by independent readers,
//! and one-line errors for bad input. One binary (each test file linked against
//! polars would cost CI a link of its own); one module per family of commands, the
//! fixtures and helpers they share here.
//! `UPDATE_SNAPSHOTS=1 cargo test --workspace --release` rewrites the snapshots.

use std::path::{Path, PathBuf};
use std::process::Command;
use test_scratch::{Scratch, ScratchFile};

mod budgets;
mod check;
mod diff;
mod diff_flame;
mod errors;
mod exports;
mod gates;
mod info;
mod memory;
mod ranking;
mod sampled;

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/demo-report")
}

/// The demo example's report with heap sampling every 4 KiB and a timeline
/// (`alloc-tracer/examples/demo.rs`).
fn memory_fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/memory-report")
}

fn calibration() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/calibration.json")
}

/// Runs the analyzer with the fixture calibration as the stored one.
fn analyzer(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_analyzer"))
        .args(args)
        .env("ALLOC_PROFILER_CALIBRATION", calibration())
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
    // Only `UPDATE_SNAPSHOTS=1` rewrites, and says so: any value at all would make
    // every snapshot test compare its output with itself.
    if std::env::var("UPDATE_SNAPSHOTS").as_deref() == Ok("1")
        && std::fs::read_to_string(&path).ok().as_deref() != Some(&*got)
    {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &got).unwrap();
        eprintln!("snapshot {} rewritten", path.display());
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (UPDATE_SNAPSHOTS=1 writes it)", path.display()));
    assert_eq!(got, want, "{name} differs from its snapshot");
}

fn copy_fixture(name: &str) -> Scratch {
    copy_report(&fixture(), name)
}

/// A copy of the report at `from`, in a folder named after `name`, removed when the
/// test passes.
fn copy_report(from: &Path, name: &str) -> Scratch {
    let dir = Scratch::new(&format!("analyzer-{name}"));
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), dir.join(e.file_name())).unwrap();
    }
    dir
}

/// The analyzer run as on a machine whose home (and cache) is `home`, with no
/// calibration named in the environment.
fn analyzer_at_home(args: &[&str], home: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_analyzer"))
        .args(args)
        .env_remove("ALLOC_PROFILER_CALIBRATION")
        .env("XDG_CACHE_HOME", home)
        .env("HOME", home)
        .output()
        .unwrap()
}

/// The `phase` column of a table, row by row.
fn phase_column(df: &polars::prelude::DataFrame) -> Vec<String> {
    df.column("phase")
        .unwrap()
        .str()
        .unwrap()
        .iter()
        .map(|p| p.unwrap_or_default().to_owned())
        .collect()
}

/// Edits the manifest of a copied report.
fn edit_manifest(dir: &Path, edit: impl FnOnce(&mut serde_json::Value)) {
    let path = dir.join("manifest.json");
    let mut m: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    edit(&mut m);
    std::fs::write(&path, serde_json::to_vec(&m).unwrap()).unwrap();
}

/// Rewrites one table of a copied report.
fn edit_table(
    dir: &Path,
    file: &str,
    edit: impl FnOnce(polars::prelude::DataFrame) -> polars::prelude::DataFrame,
) {
    use polars::prelude::*;
    let path = dir.join(file);
    let df = ParquetReader::new(std::fs::File::open(&path).unwrap())
        .finish()
        .unwrap();
    let mut df = edit(df);
    ParquetWriter::new(std::fs::File::create(&path).unwrap())
        .finish(&mut df)
        .unwrap();
}

/// The analyzer's exit code and standard error, run with its standard output a pipe
/// whose reader left before it wrote (`| head`), and with `both`, its standard error
/// too (`2>&1 | head`; then nothing is read from it).
fn with_readers_gone(args: &[&str], both: bool) -> (Option<i32>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_analyzer"))
        .args(args)
        .env("ALLOC_PROFILER_CALIBRATION", calibration())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    if both {
        drop(child.stderr.take());
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn assert_one_line_error(args: &[&str], expected: &str) {
    let out = analyzer(args);
    assert_eq!(out.status.code(), Some(2), "{args:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains(expected), "{stderr}");
    assert!(out.stdout.is_empty());
}

/// A `count` report: a copy of the report at `from` with no site rows and its mode
/// changed.
fn count_copy(from: &Path, name: &str) -> Scratch {
    let dir = copy_report(from, name);
    edit_table(&dir, "sites.parquet", |df| df.head(Some(0)));
    edit_manifest(&dir, |m| {
        m["mode"] = "count".into();
        for t in m["tables"].as_array_mut().unwrap() {
            if t["file"] == "sites.parquet" {
                t["rows"] = 0.into();
            }
        }
    });
    dir
}

/// Writes `text` as a budget file of its own.
fn budget_file(name: &str, text: &str) -> ScratchFile {
    let path = Scratch::new("analyzer-budget").holding(&format!("{name}.toml"));
    std::fs::write(&*path, text).unwrap();
    path
}

/// The fixture's `build` phase: 85 726 allocations and reallocs, 2 793 080 requested
/// bytes, 80 357 temporaries, every site unmatched by the built-in rules, 12 of them at
/// `build (demo.rs:21)`.
const FIXTURE_BUILD_BUDGET: &str = r#"
peak_live_bytes = 1_000_000
[phase.build]
allocs = 85_726
bytes = 2_793_080
temporaries = 80_357
category."other (no rule matched)".share = 1.0
category."density trackers".share = 0.0
site."demo.rs:21".allocs = 12
"#;
