//! Bad reports (issue 13): whatever is in a report folder, the analyzer answers with
//! its result or one line and exit 2, never a panic or a hang.
//!
//! The regression tests replay what was seen failing; `damaged_reports_are_contained`
//! is a fuzz suite: proptest damages copies of the fixture report at random
//! (truncations, flipped bytes in data pages and in footers, a table in place of
//! another, columns dropped, renamed, retyped or nulled, counts near `u64::MAX`, a
//! manifest of garbage, cut short or with wrong-typed keys, missing files, a FIFO, a
//! directory or a device in place of a file), runs the library's load and every
//! analysis on each copy, and on every other copy one of the CLI's commands. Each
//! case must finish within [`BOUND`]. The seed is fixed, so CI runs the same cases
//! every time; `BAD_REPORTS_CASES` (default 1000) and `BAD_REPORTS_SEED` run others:
//!
//! `BAD_REPORTS_CASES=20000 cargo test --release -p analyzer --test bad_reports`

use alloc_tracer_format::schema;
use analyzer::calibrate::Calibration;
use analyzer::export::{self, Weight};
use analyzer::memory::{self, Moment};
use analyzer::rank::{self, RankBy};
use analyzer::render::{self, Format};
use analyzer::report::{self, Report};
use analyzer::{categories, cost, diff};
use polars::prelude::*;
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestCaseError, TestRunner};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use test_scratch::Scratch;

/// The most one case may take, load, analyses and CLI run together. A case takes
/// milliseconds; this only tells a hang from a slow machine.
const BOUND: Duration = Duration::from_secs(20);

/// The report the regression tests replay their damage on (at fixed offsets).
fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/demo-report")
}

/// The report the fuzz suite damages: every table of the schema, the memory tables
/// included.
fn fuzz_fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/memory-report")
}

fn calibration() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/calibration.json")
}

/// A fresh folder, removed when the test passes.
fn scratch(name: &str) -> Scratch {
    Scratch::new(&format!("analyzer-bad-{name}"))
}

/// A copy of the fixture report.
fn copy_fixture(name: &str) -> Scratch {
    copy_report(&fixture(), name)
}

/// A copy of the report at `from`.
fn copy_report(from: &Path, name: &str) -> Scratch {
    let dir = scratch(name);
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), dir.join(e.file_name())).unwrap();
    }
    dir
}

/// What the CLI did, or `None` when it ran past `bound` (it is killed).
fn run_cli(args: &[&str], bound: Duration) -> Option<std::process::Output> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_analyzer"))
        .args(args)
        .env("ALLOC_PROFILER_CALIBRATION", calibration())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > bound {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Some(child.wait_with_output().unwrap())
}

/// Checks the CLI's answer: success, or exit 2 with one line on standard error.
fn check_cli(args: &[&str]) -> Result<std::process::Output, String> {
    let out = run_cli(args, BOUND).ok_or_else(|| format!("{args:?} ran past {BOUND:?}"))?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    match out.status.code() {
        Some(0) if stderr.lines().count() <= 1 => Ok(out),
        Some(2) if stderr.lines().count() == 1 && stderr.starts_with("analyzer: ") => Ok(out),
        code => {
            let head: String = stderr.lines().take(8).collect::<Vec<_>>().join("\n");
            Err(format!("{args:?}: exit {code:?}, stderr begins:\n{head}"))
        }
    }
}

/// `analyzer top DIR` fails with one line naming `file`, within [`BOUND`].
fn assert_top_refuses(dir: &Path, file: &str) -> String {
    let out = check_cli(&["top", dir.to_str().unwrap()]).unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(file), "{stderr}");
    assert!(out.stdout.is_empty());
    stderr
}

/// Flips bytes of `file` in `dir`: `(offset, mask)`.
fn flip(dir: &Path, file: &str, flips: &[(usize, u8)]) {
    let path = dir.join(file);
    let mut bytes = std::fs::read(&path).unwrap();
    for &(at, mask) in flips {
        bytes[at] ^= mask;
    }
    std::fs::write(&path, bytes).unwrap();
}

/// Damaged data pages, footer intact: the parquet reader panicked inside
/// polars-parquet (exit 101 and a backtrace); and a page that decodes to fewer
/// values than the footer's row count made the analyzer index out of bounds.
#[test]
fn issue_13_damaged_data_pages_are_one_line_not_a_panic() {
    let cases: [(&str, &[(usize, u8)]); 3] = [
        ("sites.parquet", &[(719, 73), (267, 161)]),
        ("frames.parquet", &[(284, 232), (2584, 94)]),
        ("phases.parquet", &[(118, 201)]),
    ];
    for (file, flips) in cases {
        let dir = copy_fixture("pages");
        flip(&dir, file, flips);
        let err = report::load(&dir).unwrap_err().to_string();
        assert!(err.contains(file), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert_top_refuses(&dir, file);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

/// A page header whose value count reads as negative: polars-parquet made it a
/// 2^61-byte bitmap, the allocation failed and the process aborted, which no
/// `catch_unwind` can contain.
#[test]
fn issue_13_a_negative_page_count_is_refused_not_an_abort() {
    let dir = copy_fixture("count");
    flip(&dir, "sites.parquet", &[(1162, 73)]);
    let err = assert_top_refuses(&dir, "sites.parquet");
    assert!(err.contains("-51 values"), "{err}");
    let err = report::load(&dir).unwrap_err().to_string();
    assert!(err.contains("sites.parquet"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A FIFO in place of `sites.parquet` made `analyzer top` wait for a writer forever.
#[test]
fn issue_13_a_fifo_or_a_device_in_place_of_a_table_is_refused() {
    let dir = copy_fixture("fifo");
    let sites = dir.join("sites.parquet");
    std::fs::remove_file(&sites).unwrap();
    make_fifo(&sites);
    let err = assert_top_refuses(&dir, "sites.parquet");
    assert!(err.contains("FIFO"), "{err}");
    std::fs::remove_file(&sites).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &sites).unwrap();
    let err = assert_top_refuses(&dir, "sites.parquet");
    assert!(err.contains("device"), "{err}");
    std::fs::remove_file(&sites).unwrap();
    std::fs::create_dir(&sites).unwrap();
    let err = assert_top_refuses(&dir, "sites.parquet");
    assert!(err.contains("directory"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

fn make_fifo(path: &Path) {
    let status = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(status.success(), "mkfifo {}", path.display());
}

/// Reads a fixture table.
fn read_table(path: &Path) -> DataFrame {
    ParquetReader::new(std::fs::File::open(path).unwrap())
        .finish()
        .unwrap()
}

fn write_table(path: &Path, mut df: DataFrame) {
    let f = std::fs::File::create(path).unwrap();
    ParquetWriter::new(f).finish(&mut df).unwrap();
}

/// Required columns and their types are checked before any row is read, and the
/// error names the file and the column.
#[test]
fn missing_and_mistyped_columns_are_named() {
    let dir = copy_fixture("columns");
    let sites = dir.join("sites.parquet");
    let original = read_table(&sites);
    let df = original.drop("alloc_count").unwrap();
    write_table(&sites, df);
    let err = assert_top_refuses(&dir, "sites.parquet");
    assert!(err.contains("`alloc_count`"), "{err}");
    let mut df = original.clone();
    let n = df.height();
    df.with_column(Column::new("alloc_count".into(), vec![1i64; n]))
        .unwrap();
    write_table(&sites, df);
    let err = assert_top_refuses(&dir, "sites.parquet");
    assert!(err.contains("`alloc_count` is Int64"), "{err}");
    let mut df = original;
    df.with_column(Column::full_null(
        "alloc_count".into(),
        n,
        &DataType::UInt64,
    ))
    .unwrap();
    write_table(&sites, df);
    let err = assert_top_refuses(&dir, "sites.parquet");
    assert!(err.contains("nulls"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A table cut short, or a file that is no parquet at all, is named as such before
/// it is read into memory (its first and last four bytes are read, not the rest);
/// a manifest larger than any report's is refused unread.
#[test]
fn files_that_are_no_parquet_or_too_large_are_refused_unread() {
    let dir = copy_fixture("not-parquet");
    let sites = dir.join("sites.parquet");
    let whole = std::fs::read(&sites).unwrap();
    std::fs::write(&sites, &whole[..whole.len() - 100]).unwrap();
    let err = assert_top_refuses(&dir, "sites.parquet");
    assert!(
        err.contains("not a parquet file") && err.contains("does not end with parquet's PAR1"),
        "{err}"
    );
    // Zeros where the table was, as a disk that lost it leaves them.
    std::fs::write(&sites, vec![0u8; 1 << 20]).unwrap();
    let err = assert_top_refuses(&dir, "sites.parquet");
    assert!(err.contains("does not begin with parquet's PAR1"), "{err}");
    std::fs::write(&sites, b"PAR1").unwrap();
    let err = assert_top_refuses(&dir, "sites.parquet");
    assert!(err.contains("4 bytes, fewer than any"), "{err}");
    std::fs::write(&sites, &whole).unwrap();
    // A sparse manifest of 257 MiB.
    let manifest = dir.join("manifest.json");
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&manifest)
        .unwrap();
    f.set_len(257 << 20).unwrap();
    let err = assert_top_refuses(&dir, "manifest.json");
    assert!(
        err.contains("more than the analyzer reads of a manifest"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The manifest's list of tables and the folder's files must agree: a table the
/// manifest does not list is refused, whether the analyzer always reads it or reads
/// it only where listed (the memory tables of reports from before them).
#[test]
fn tables_the_manifest_does_not_list_are_refused() {
    let edit_tables = |dir: &Path, keep: &dyn Fn(&str) -> bool| {
        let path = dir.join("manifest.json");
        let mut m: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        m["tables"]
            .as_array_mut()
            .unwrap()
            .retain(|t| keep(t["file"].as_str().unwrap()));
        std::fs::write(&path, m.to_string()).unwrap();
    };
    let dir = copy_fixture("unlisted");
    edit_tables(&dir, &|f| f != "sites.parquet");
    let err = assert_top_refuses(&dir, "sites.parquet");
    assert!(
        err.contains("not among the tables manifest.json lists"),
        "{err}"
    );
    // Gone too: a table every report holds, which this one's manifest leaves out.
    std::fs::remove_file(dir.join("sites.parquet")).unwrap();
    let err = assert_top_refuses(&dir, "manifest.json");
    assert!(
        err.contains("its tables do not list sites.parquet"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();

    let dir = copy_report(&fuzz_fixture(), "unlisted-timeline");
    edit_tables(&dir, &|f| f != "timeline.parquet");
    let d = dir.to_str().unwrap();
    let svg = dir.join("t.svg");
    let out = check_cli(&["timeline", d, "-o", svg.to_str().unwrap()]).unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("timeline.parquet: not among the tables manifest.json lists"),
        "{err}"
    );
    // Without the file too, it is a report from before timelines: said as such.
    std::fs::remove_file(dir.join("timeline.parquet")).unwrap();
    let out = check_cli(&["timeline", d, "-o", svg.to_str().unwrap()]).unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("no timeline: the report lists no timeline table"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A manifest that is a JSON array, or has no version, is not a report manifest;
/// free text with line breaks or terminal escapes is printed escaped, on one line.
#[test]
fn manifests_are_objects_and_their_text_is_printed_escaped() {
    let dir = copy_fixture("manifest-shape");
    let path = dir.join("manifest.json");
    let original: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let fields: Vec<_> = original.as_object().unwrap().values().cloned().collect();
    std::fs::write(&path, serde_json::to_vec(&fields).unwrap()).unwrap();
    let err = assert_top_refuses(&dir, "manifest.json");
    assert!(
        err.contains("not a report manifest: not a JSON object"),
        "{err}"
    );
    let mut unversioned = original.clone();
    unversioned
        .as_object_mut()
        .unwrap()
        .remove("schema_version");
    std::fs::write(&path, unversioned.to_string()).unwrap();
    let err = assert_top_refuses(&dir, "manifest.json");
    assert!(
        err.contains("no schema_version: not a report manifest"),
        "{err}"
    );

    let mut m = original;
    m["host"] = "host\nsecond line".into();
    m["incomplete"] = "SIGINT\nsecond line".into();
    m["command_line"] = serde_json::json!(["prog", "\u{1b}[31mred"]);
    std::fs::write(&path, m.to_string()).unwrap();
    let d = dir.to_str().unwrap();
    for args in [&["top", d][..], &["info", d], &["diff", d, d]] {
        // Notes on standard error: more than one line here.
        let out = run_cli(args, BOUND).unwrap();
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!text.contains('\u{1b}'), "{args:?}: a raw escape: {text}");
        assert!(
            !text.lines().any(|l| l.starts_with("second line")),
            "{args:?}: a manifest's line break printed: {text}"
        );
    }
    let info = run_cli(&["info", d], BOUND).unwrap();
    assert!(String::from_utf8_lossy(&info.stdout).contains("\\u{1b}[31mred"));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The tables' text (phase names, functions, files) is printed escaped like the
/// manifest's, and the same way: `--phase` takes a phase named with a line break
/// and a terminal escape as `info` prints it, in the sites' tables and the heap
/// samples' alike.
#[test]
fn table_text_is_printed_escaped_as_the_manifests() {
    let dir = copy_report(&fuzz_fixture(), "table-text");
    let odd = |v: &str| format!("{v}\u{1b}[31m\nsecond line");
    for e in std::fs::read_dir(&dir).unwrap() {
        let path = e.unwrap().path();
        if path.extension().is_none_or(|x| x != "parquet") {
            continue;
        }
        let mut df = read_table(&path);
        let mut changed = false;
        for name in ["phase", "function", "file"] {
            let Ok(c) = df.column(name) else { continue };
            let values: Vec<Option<String>> = c.str().unwrap().iter().map(|v| v.map(odd)).collect();
            df.with_column(Column::new(name.into(), values)).unwrap();
            changed = true;
        }
        if changed {
            write_table(&path, df);
        }
    }
    let path = dir.join("manifest.json");
    let mut m: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let peak_phase = m["heap_peak"]["phase"].as_str().unwrap().to_owned();
    m["heap_peak"]["phase"] = odd(&peak_phase).into();
    std::fs::write(&path, m.to_string()).unwrap();

    let d = dir.to_str().unwrap();
    let escaped = format!("{peak_phase}\\u{{1b}}[31m\\nsecond line");
    let runs: [&[&str]; 8] = [
        &["top", d],
        &["info", d],
        &["categories", d],
        &["peak", d],
        &["leaks", d],
        &["export", "--format", "folded", d],
        &["top", d, "--phase", &escaped],
        &["peak", d, "--phase", &escaped],
    ];
    for args in runs {
        let out = run_cli(args, BOUND).unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(out.status.code(), Some(0), "{args:?}: {text}");
        assert!(!text.contains('\u{1b}'), "{args:?}: a raw escape: {text}");
        assert!(
            !text.lines().any(|l| l.starts_with("second line")),
            "{args:?}: a table's line break printed: {text}"
        );
    }
    let info = run_cli(&["info", d], BOUND).unwrap();
    assert!(
        String::from_utf8_lossy(&info.stdout).contains(&escaped),
        "info does not name the phase {escaped}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Two phases whose names escape alike without the backslash escaped (a real line
/// break, and a backslash before an `n`) stay two phases: each prints as its own
/// name, and `--phase` picks each alone.
#[test]
fn names_that_differ_stay_apart_once_escaped() {
    let dir = copy_report(&fuzz_fixture(), "escape-apart");
    let rename = |v: &str| match v {
        "build" => "x\ny".to_owned(),
        "combine" => "x\\ny".to_owned(),
        other => other.to_owned(),
    };
    for e in std::fs::read_dir(&dir).unwrap() {
        let path = e.unwrap().path();
        if path.extension().is_none_or(|x| x != "parquet") {
            continue;
        }
        let mut df = read_table(&path);
        let Ok(c) = df.column("phase") else { continue };
        let values: Vec<Option<String>> = c.str().unwrap().iter().map(|v| v.map(rename)).collect();
        df.with_column(Column::new("phase".into(), values)).unwrap();
        write_table(&path, df);
    }
    let d = dir.to_str().unwrap();
    // As printed: `x\ny` for the line break, `x\\ny` for the backslash.
    let (line_break, backslash) = ("x\\ny", "x\\\\ny");
    let info = run_cli(&["info", d], BOUND).unwrap();
    let text = String::from_utf8_lossy(&info.stdout);
    for name in [line_break, backslash] {
        assert!(
            text.lines().any(|l| l.starts_with(&format!("{name} "))),
            "info has no phase {name}: {text}"
        );
    }
    let sites_of = |phase: &str| {
        let out = run_cli(&["top", d, "--phase", phase, "--format", "csv"], BOUND).unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert_eq!(
            out.status.code(),
            Some(0),
            "top --phase {phase}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        text
    };
    assert_ne!(sites_of(line_break), sites_of(backslash));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Counts whose sums pass `u64::MAX` saturate instead of wrapping to small numbers.
#[test]
fn sums_of_huge_counts_saturate() {
    let dir = copy_fixture("huge");
    let sites = dir.join("sites.parquet");
    let mut df = read_table(&sites);
    let n = df.height();
    for name in [
        "alloc_count",
        "realloc_count",
        "bytes_requested",
        "bytes_allocated",
        "temporary_count",
    ] {
        df.with_column(Column::new(name.into(), vec![u64::MAX / 2 + 1; n]))
            .unwrap();
    }
    write_table(&sites, df);
    // The phase totals too, which `diff` compares.
    let phases = dir.join("phases.parquet");
    let mut df = read_table(&phases);
    assert!(df.height() > 1, "the fixture has several phases");
    let n = df.height();
    df.with_column(Column::new("alloc_count".into(), vec![u64::MAX / 2 + 1; n]))
        .unwrap();
    write_table(&phases, df);
    let r = report::load(&dir).unwrap();
    let mut rows_per_site = std::collections::HashMap::<u64, usize>::new();
    for row in &r.sites {
        *rows_per_site.entry(row.site_id).or_default() += 1;
    }
    let (&site, _) = rows_per_site
        .iter()
        .find(|(_, n)| **n > 1)
        .expect("the fixture has a site with rows in two phases or size classes");
    let top = rank::top(&r, RankBy::Count, usize::MAX, None, None);
    let s = top.iter().find(|s| s.site_id == site).unwrap();
    assert_eq!(s.alloc_count, u64::MAX);
    assert_eq!(s.bytes_requested, u64::MAX);
    let cats = analyzer::category_totals::totals(&r, &categories::default_rules(), None);
    assert!(cats.iter().any(|c| c.alloc_count == u64::MAX));
    let named = export::named_sites(&r, &categories::default_rules(), None);
    assert!(named.iter().all(|s| s.alloc_count > u64::MAX / 2));
    let folded = export::folded(&r, Weight::Count, None);
    assert!(
        folded
            .iter()
            .any(|l| l.ends_with(&format!(" {}", u64::MAX)))
    );
    let base = report::load(&fixture()).unwrap();
    let d = diff::diff(
        &base,
        &r,
        diff::Pricing::default(),
        &categories::default_rules(),
        None,
        diff::Measured::default(),
        10,
    );
    assert_eq!(d.change.alloc_count, u64::MAX);
    assert!(d.categories.iter().any(|c| c.delta_alloc_count == i64::MAX));
    // The table's first line too.
    let mut text = Vec::new();
    render::diff_totals(&mut text, &d).unwrap();
    let text = String::from_utf8(text).unwrap();
    assert!(text.contains(&format!("({:+})", i64::MAX)), "{text}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The files of a report: the manifest, then the tables.
fn report_files() -> Vec<&'static str> {
    std::iter::once(schema::MANIFEST)
        .chain(schema::TABLES.iter().map(|t| t.file))
        .collect()
}

/// Where in a parquet file to flip bytes.
#[derive(Clone, Copy, Debug)]
enum Region {
    /// Between the leading magic and the footer: the data pages.
    Pages,
    /// The footer (thrift metadata, its length and the trailing magic).
    Footer,
    /// Anywhere.
    Anywhere,
}

/// What to do to one column of a table.
#[derive(Clone, Copy, Debug)]
enum ColumnChange {
    Drop,
    Rename,
    /// The same values as strings.
    Strings,
    /// Signed 64-bit values.
    Signed,
    /// Floating point values.
    Float,
    /// All null, of the schema's type.
    Nulls,
    /// Values near `u64::MAX` (unsigned columns; strings elsewhere).
    Huge,
}

/// What to do to the manifest.
#[derive(Clone, Debug)]
enum ManifestChange {
    /// Replaced by these bytes.
    Garbage(Vec<u8>),
    /// A key given a value of the wrong type (key index, value choice).
    Retype(usize, usize),
    /// A key removed.
    Remove(usize),
}

/// One damage to a report; positions are fractions of the file or region, so that
/// they stay meaningful whatever the sizes.
#[derive(Clone, Debug)]
enum Damage {
    Truncate {
        file: usize,
        at: f64,
    },
    Flip {
        file: usize,
        region: Region,
        flips: Vec<(f64, u8)>,
    },
    /// `file` replaced by a copy of `with`.
    Swap {
        file: usize,
        with: usize,
    },
    Missing {
        file: usize,
    },
    Fifo {
        file: usize,
    },
    Directory {
        file: usize,
    },
    Device {
        file: usize,
    },
    Column {
        table: usize,
        column: usize,
        change: ColumnChange,
    },
    Manifest(ManifestChange),
}

/// A report file, mostly one the analyzer reads.
fn any_file() -> impl Strategy<Value = usize> {
    let files = report_files();
    let read: Vec<usize> = files
        .iter()
        .enumerate()
        .filter(|(_, f)| {
            [
                schema::MANIFEST,
                schema::SITES.file,
                schema::FRAMES.file,
                schema::PHASES.file,
                schema::LIFETIMES.file,
            ]
            .contains(f)
        })
        .map(|(i, _)| i)
        .collect();
    prop_oneof![
        4 => proptest::sample::select(read),
        1 => 0..files.len(),
    ]
}

fn damage() -> impl Strategy<Value = Damage> {
    let region = prop_oneof![
        Just(Region::Pages),
        Just(Region::Footer),
        Just(Region::Anywhere)
    ];
    let change = prop_oneof![
        Just(ColumnChange::Drop),
        Just(ColumnChange::Rename),
        Just(ColumnChange::Strings),
        Just(ColumnChange::Signed),
        Just(ColumnChange::Float),
        Just(ColumnChange::Nulls),
        Just(ColumnChange::Huge),
    ];
    let manifest = prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..64).prop_map(ManifestChange::Garbage),
        (0..64usize, 0..4usize).prop_map(|(k, v)| ManifestChange::Retype(k, v)),
        (0..64usize).prop_map(ManifestChange::Remove),
    ];
    prop_oneof![
        3 => (any_file(), 0.0..1.0f64).prop_map(|(file, at)| Damage::Truncate { file, at }),
        6 => (
            any_file(),
            region,
            proptest::collection::vec((0.0..1.0f64, 1..=255u8), 1..8)
        )
            .prop_map(|(file, region, flips)| Damage::Flip { file, region, flips }),
        1 => (any_file(), any_file()).prop_map(|(file, with)| Damage::Swap { file, with }),
        1 => any_file().prop_map(|file| Damage::Missing { file }),
        1 => any_file().prop_map(|file| Damage::Fifo { file }),
        1 => any_file().prop_map(|file| Damage::Directory { file }),
        1 => any_file().prop_map(|file| Damage::Device { file }),
        4 => (0..schema::TABLES.len(), 0..16usize, change)
            .prop_map(|(table, column, change)| Damage::Column { table, column, change }),
        2 => manifest.prop_map(Damage::Manifest),
    ]
}

/// The footer's start in a parquet file, if its trailer is intact.
fn footer_start(bytes: &[u8]) -> Option<usize> {
    let n = bytes.len();
    if n < 12 || &bytes[n - 4..] != b"PAR1" {
        return None;
    }
    let len = u32::from_le_bytes(bytes[n - 8..n - 4].try_into().unwrap()) as usize;
    (n - 8).checked_sub(len).filter(|s| *s >= 4)
}

/// Replaces `path` by nothing: a missing path is left missing.
fn clear(path: &Path) {
    if path.is_dir() {
        let _ = std::fs::remove_dir_all(path);
    } else {
        let _ = std::fs::remove_file(path);
    }
}

/// Applies `d` to the report in `dir`; a damage to a file that is gone or no longer
/// a regular file does nothing.
fn apply(dir: &Path, d: &Damage) {
    let files = report_files();
    let regular = |file: usize| {
        let p = dir.join(files[file]);
        std::fs::symlink_metadata(&p)
            .is_ok_and(|m| m.is_file())
            .then_some(p)
    };
    match d {
        Damage::Truncate { file, at } => {
            if let Some(p) = regular(*file) {
                let bytes = std::fs::read(&p).unwrap();
                let keep = (bytes.len() as f64 * at) as usize;
                std::fs::write(&p, &bytes[..keep.min(bytes.len())]).unwrap();
            }
        }
        Damage::Flip {
            file,
            region,
            flips,
        } => {
            if let Some(p) = regular(*file) {
                let mut bytes = std::fs::read(&p).unwrap();
                let footer = footer_start(&bytes);
                let (lo, hi) = match (region, footer) {
                    (Region::Pages, Some(f)) => (4, f),
                    (Region::Footer, Some(f)) => (f, bytes.len()),
                    _ => (0, bytes.len()),
                };
                if hi > lo {
                    for &(at, mask) in flips {
                        let i = lo + ((hi - lo) as f64 * at) as usize;
                        bytes[i.min(hi - 1)] ^= mask;
                    }
                }
                std::fs::write(&p, bytes).unwrap();
            }
        }
        Damage::Swap { file, with } => {
            if let Some(src) = regular(*with) {
                let bytes = std::fs::read(src).unwrap();
                let p = dir.join(files[*file]);
                clear(&p);
                std::fs::write(&p, bytes).unwrap();
            }
        }
        Damage::Missing { file } => clear(&dir.join(files[*file])),
        Damage::Fifo { file } => {
            let p = dir.join(files[*file]);
            clear(&p);
            make_fifo(&p);
        }
        Damage::Directory { file } => {
            let p = dir.join(files[*file]);
            clear(&p);
            std::fs::create_dir(&p).unwrap();
        }
        Damage::Device { file } => {
            let p = dir.join(files[*file]);
            clear(&p);
            std::os::unix::fs::symlink("/dev/zero", &p).unwrap();
        }
        Damage::Column {
            table,
            column,
            change,
        } => {
            // From the fixture: the test's own read must not meet earlier damage.
            let table = &schema::TABLES[*table];
            let df = read_table(&fuzz_fixture().join(table.file));
            let names: Vec<String> = df
                .get_column_names()
                .iter()
                .map(|n| n.to_string())
                .collect();
            let name = names[column % names.len()].as_str();
            if let Some(df) = change_column(df, name, *change) {
                let p = dir.join(table.file);
                clear(&p);
                write_table(&p, df);
            }
        }
        Damage::Manifest(change) => {
            let p = dir.join(schema::MANIFEST);
            if let ManifestChange::Garbage(bytes) = change {
                clear(&p);
                std::fs::write(&p, bytes).unwrap();
                return;
            }
            // Only a regular file: earlier damage can have made it a FIFO or a device.
            let Some(mut m) = regular(0) // the manifest
                .and_then(|p| std::fs::read(p).ok())
                .and_then(|t| serde_json::from_slice::<serde_json::Value>(&t).ok())
                .filter(|m| m.is_object())
            else {
                return;
            };
            let obj = m.as_object_mut().unwrap();
            let keys: Vec<String> = obj.keys().cloned().collect();
            match change {
                ManifestChange::Retype(k, v) => {
                    let wrong = [
                        serde_json::json!("x"),
                        serde_json::json!(-1),
                        serde_json::json!(null),
                        serde_json::json!([1, 2]),
                    ];
                    obj.insert(keys[k % keys.len()].clone(), wrong[v % wrong.len()].clone());
                }
                ManifestChange::Remove(k) => {
                    obj.remove(&keys[k % keys.len()]);
                }
                ManifestChange::Garbage(_) => unreachable!(),
            }
            std::fs::write(&p, serde_json::to_vec_pretty(&m).unwrap()).unwrap();
        }
    }
}

/// `df` with column `name` changed so.
fn change_column(mut df: DataFrame, name: &str, change: ColumnChange) -> Option<DataFrame> {
    let n = df.height();
    let col = df.column(name).ok()?.clone();
    let replaced = match change {
        ColumnChange::Drop => return df.drop(name).ok(),
        ColumnChange::Rename => {
            df.rename(name, format!("{name}_renamed").into()).ok()?;
            return Some(df);
        }
        ColumnChange::Strings => col.cast(&DataType::String).ok()?,
        ColumnChange::Signed => Column::new(name.into(), vec![-1i64; n]),
        ColumnChange::Float => Column::new(name.into(), vec![0.5f64; n]),
        ColumnChange::Nulls => Column::full_null(name.into(), n, col.dtype()),
        ColumnChange::Huge => match col.dtype() {
            DataType::UInt64 => Column::new(
                name.into(),
                (0..n as u64).map(|i| u64::MAX - i).collect::<Vec<u64>>(),
            ),
            DataType::UInt32 => Column::new(name.into(), vec![u32::MAX; n]),
            _ => Column::new(name.into(), vec!["\u{0}\n;<>&\u{202e}"; n]),
        },
    };
    df.with_column(replaced).ok()?;
    Some(df)
}

/// Runs every analysis on a loaded report, the way the CLI's commands do, rendering
/// each result in every format.
fn analyze(r: &Report, base: &Report, cal: &Calibration) {
    let rules = categories::default_rules();
    let phases: Vec<Option<&str>> = std::iter::once(None)
        .chain(r.sites.first().map(|s| Some(s.phase.as_str())))
        .collect();
    let formats = [Format::Table, Format::Json, Format::Csv];
    for phase in phases {
        let mut out = Vec::new();
        let costs: std::collections::HashMap<u64, f64> =
            cost::per_site(r, cal, &rules, phase, None)
                .into_iter()
                .map(|(site, p)| (site, p.cost.total() * 1e-9))
                .collect();
        for by in [
            RankBy::Count,
            RankBy::Bytes,
            RankBy::Temporaries,
            RankBy::Cost,
        ] {
            let sites = rank::top(r, by, 10, phase, Some(&costs));
            let table = render::SitesTable {
                rows: "site",
                sampled: r.manifest.sample_interval > 1,
            };
            for f in formats {
                render::sites(&mut out, &sites, table, f).unwrap();
            }
        }
        let cats = analyzer::category_totals::totals(r, &rules, phase);
        let est = cost::estimate(r, cal, &rules, phase, 10);
        let d = diff::diff(
            base,
            r,
            diff::Pricing {
                cal: Some(cal),
                recycled: true,
            },
            &rules,
            phase,
            diff::Measured::default(),
            10,
        );
        for f in formats {
            render::categories(&mut out, &cats, f).unwrap();
            render::cost(&mut out, &est, f).unwrap();
            render::diff(&mut out, &d, &[], f).unwrap();
        }
        for by in [Weight::Count, Weight::Bytes] {
            export::folded(r, by, phase);
            // An empty selection or odd names are inferno's errors, not panics.
            let _ = export::flamegraph(r, by, phase, &mut out);
        }
        export::pprof(r, phase, &[], &mut out).unwrap();
        let named = export::named_sites(r, &rules, phase);
        export::named_sites_parquet(&named, &mut out).unwrap();
        // The memory tables are read on demand: damaged ones are an error, not a
        // panic.
        if let Ok(m) = memory::load(r) {
            for moment in [Moment::Peak, Moment::End] {
                let held = memory::held(r, &m, moment, &rules, phase, 10);
                for f in formats {
                    memory::render::held(&mut out, &held, f).unwrap();
                }
                let _ = memory::flamegraph(r, &m, moment, phase, &mut out);
            }
            let _ = memory::svg::timeline(r, &m);
            export::pprof(r, phase, &memory::in_use(&m), &mut out).unwrap();
        }
    }
}

/// The CLI commands tried, one per other case in turn.
fn cli_args(n: usize, dir: &str, base: &str) -> Vec<String> {
    let args: &[&str] = match n % 8 {
        0 => &["top", dir, "--limit", "5"],
        1 => &["categories", dir, "--format", "json"],
        2 => &["cost", dir, "--format", "csv"],
        3 => &["diff", base, dir],
        4 => &["peak", dir],
        5 => &["leaks", dir, "--format", "json"],
        6 => &["timeline", dir, "-o", "/dev/null"],
        _ => &["export", dir, "--format", "pprof", "-o", "/dev/null"],
    };
    args.iter().map(|a| a.to_string()).collect()
}

/// How the library answered a case.
enum Answer {
    /// Loaded, and every analysis ran.
    Analysed,
    /// Refused with one line.
    Refused,
}

/// Runs one case on another thread, so that a hang is reported as one rather than
/// stalling the suite: the library's answer must come within [`BOUND`].
fn check_library(dir: &Path) -> Result<Answer, String> {
    let (tx, rx) = std::sync::mpsc::channel();
    let dir = dir.to_owned();
    let worker = std::thread::spawn(move || {
        let answer = match report::load(&dir) {
            Ok(r) => {
                let base = report::load(&fuzz_fixture()).unwrap();
                let cal = Calibration::load(&calibration()).unwrap();
                analyze(&r, &base, &cal);
                Ok(Answer::Analysed)
            }
            Err(e) => {
                let e = e.to_string();
                if std::env::var_os("BAD_REPORTS_DUMP").is_some() {
                    eprintln!("REFUSED {e}");
                }
                if e.lines().count() == 1 {
                    Ok(Answer::Refused)
                } else {
                    Err(format!("an error of {} lines: {e}", e.lines().count()))
                }
            }
        };
        let _ = tx.send(answer);
    });
    match rx.recv_timeout(BOUND) {
        Ok(answer) => {
            worker.join().unwrap();
            answer
        }
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            Err(format!("the library ran past {BOUND:?}"))
        }
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
            let panic = worker.join().unwrap_err();
            let message = panic
                .downcast_ref::<&str>()
                .copied()
                .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
                .unwrap_or("no message");
            Err(format!("the library panicked: {message}"))
        }
    }
}

#[test]
fn damaged_reports_are_contained() {
    let env = |name: &str, default: u64| {
        std::env::var(name)
            .ok()
            .map(|v| {
                v.parse()
                    .unwrap_or_else(|_| panic!("{name}={v}: not a number"))
            })
            .unwrap_or(default)
    };
    let cases = env("BAD_REPORTS_CASES", 1000) as u32;
    let seed = env("BAD_REPORTS_SEED", 13);
    let mut runner = TestRunner::new(Config {
        cases,
        rng_seed: RngSeed::Fixed(seed),
        failure_persistence: None,
        // A failing case shrinks for at most this long; hangs make each try slow.
        max_shrink_time: 120_000,
        ..Config::default()
    });
    let case = AtomicUsize::new(0);
    let analysed = AtomicUsize::new(0);
    let cli_runs = AtomicUsize::new(0);
    let base = fuzz_fixture();
    let started = Instant::now();
    let result = runner.run(&proptest::collection::vec(damage(), 1..=3), |damages| {
        let n = case.fetch_add(1, Ordering::Relaxed);
        let dir = copy_report(&base, "case");
        for d in &damages {
            apply(&dir, d);
        }
        let start = Instant::now();
        let mut verdict = check_library(&dir).map(|answer| {
            if matches!(answer, Answer::Analysed) {
                analysed.fetch_add(1, Ordering::Relaxed);
            }
        });
        if verdict.is_ok() && n.is_multiple_of(2) {
            let args = cli_args(n / 2, dir.to_str().unwrap(), base.to_str().unwrap());
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            verdict = check_cli(&args).map(|_| ());
            cli_runs.fetch_add(1, Ordering::Relaxed);
        }
        if verdict.is_ok() && start.elapsed() > BOUND {
            verdict = Err(format!("the case took {:?}", start.elapsed()));
        }
        // A hung reader may still hold a FIFO open: leave the folder then.
        if verdict.is_ok() {
            let _ = std::fs::remove_dir_all(&dir);
        }
        verdict.map_err(|e| TestCaseError::fail(format!("{}: {e}", dir.display())))
    });
    let n = case.load(Ordering::Relaxed);
    let analysed = analysed.load(Ordering::Relaxed);
    eprintln!(
        "bad_reports: {n} cases (seed {seed}) in {:.1} s: {analysed} analysed, {} refused; {} CLI runs",
        started.elapsed().as_secs_f64(),
        n - analysed,
        cli_runs.load(Ordering::Relaxed),
    );
    if let Err(e) = result {
        panic!("{e}");
    }
    assert!(n >= cases as usize, "{n} cases run of {cases}");
    // Damage that the analyzer survives (a table it does not read, counts near
    // u64::MAX) and damage it refuses must both occur, or the suite tests one path.
    assert!(
        analysed > 0 && analysed < n,
        "{analysed} of {n} cases analysed"
    );
}

/// `timeline.parquet`'s `rss_bytes` came after the table: a report without it loads
/// (resident memory unknown), one with it is read and its type checked.
#[test]
fn the_timelines_resident_memory_is_read_where_present_and_checked() {
    let dir = copy_report(&fuzz_fixture(), "rss");
    let path = dir.join(schema::TIMELINE.file);
    let original = read_table(&path);
    assert!(
        original.column("rss_bytes").is_err(),
        "the fixture predates rss_bytes"
    );
    let r = report::load(&dir).unwrap();
    assert!(
        memory::load(&r)
            .unwrap()
            .timeline
            .iter()
            .all(|p| p.rss_bytes == 0)
    );
    // Present: read, and the kept peak's point found.
    let n = original.height();
    let rss: Vec<u64> = (0..n as u64).map(|i| (100 + i) << 20).collect();
    let mut df = original.clone();
    df.with_column(Column::new("rss_bytes".into(), rss.clone()))
        .unwrap();
    write_table(&path, df);
    let m = memory::load(&r).unwrap();
    let got: Vec<u64> = m.timeline.iter().map(|p| p.rss_bytes).collect();
    // (`load` sorts by time; the fixture's points are in time order already.)
    assert_eq!(got, rss);
    let peak_ns = r.manifest.heap_peak.as_ref().unwrap().time_ns;
    let times = original_times(&original);
    let nearest = (0..n).min_by_key(|&i| times[i].abs_diff(peak_ns)).unwrap();
    let held = memory::held(&r, &m, Moment::Peak, &categories::default_rules(), None, 5);
    assert_eq!(held.rss_bytes, rss[nearest]);
    // Present with another type: refused, naming the column.
    let mut df = original;
    df.with_column(Column::new("rss_bytes".into(), vec![1i64; n]))
        .unwrap();
    write_table(&path, df);
    let err = memory::load(&r).unwrap_err().to_string();
    assert!(err.contains("`rss_bytes` is Int64"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

fn original_times(df: &DataFrame) -> Vec<u64> {
    df.column("time_ns")
        .unwrap()
        .u64()
        .unwrap()
        .into_no_null_iter()
        .collect()
}
