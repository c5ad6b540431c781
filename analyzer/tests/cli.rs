//! The CLI on a small fixture report (written by alloc-tracer's demo example) and a
//! fixture calibration (written by `analyzer calibrate` on the development machine):
//! snapshot tests of each output format, exports read back by independent readers,
//! and one-line errors for bad input.
//! `UPDATE_SNAPSHOTS=1 cargo test --workspace --release` rewrites the snapshots.

use std::path::{Path, PathBuf};
use std::process::Command;
use test_scratch::{Scratch, ScratchFile};

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
fn sites_that_read_the_same_are_named_and_summed_by_callers() {
    // The demo's two sites at `build (demo.rs:21) < main (demo.rs:54)`, apart only
    // inside the standard library (`[in finish_grow ...]`): `top` says so, and
    // `--group-by callers` makes them one row.
    let r = fixture();
    let r = r.to_str().unwrap();
    let out = analyzer(&["top", r, "--limit", "20"]);
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("2 of the sites shown read the same as another shown"),
        "{out:?}"
    );
    let out = analyzer(&["top", r, "--group-by", "callers", "--format", "json"]);
    assert!(out.status.success(), "{out:?}");
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let row = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "build (demo.rs:21)")
        .unwrap();
    assert_eq!(row["callers"], "main (demo.rs:54)");
    assert_eq!(row["sites"], 2);
    let calls = row["alloc_count"].as_u64().unwrap() + row["realloc_count"].as_u64().unwrap();
    assert_eq!(calls, 12, "{row}");
    // Grouped, nothing reads the same: no note.
    let out = analyzer(&["top", r, "--group-by", "callers"]);
    assert!(!String::from_utf8_lossy(&out.stderr).contains("read the same"));
}

#[test]
fn memory_at_the_peak_and_the_end() {
    let r = memory_fixture();
    let r = r.to_str().unwrap();
    snapshot("peak.txt", &["peak", r, "--limit", "5"]);
    snapshot(
        "peak.json",
        &["peak", r, "--limit", "3", "--format", "json"],
    );
    snapshot("leaks.csv", &["leaks", r, "--format", "csv"]);
    // The run's peak resident memory is in leaks' JSON too (it read 0, "unknown"),
    // and in the table beside the peak only.
    let rss = copy_report(&memory_fixture(), "leaks-rss");
    edit_manifest(&rss, |m| m["totals"]["max_rss_bytes"] = 5_000_000.into());
    let json = analyzer(&["leaks", rss.to_str().unwrap(), "--format", "json"]);
    let json: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(json["max_rss_bytes"], 5_000_000);
    let table = analyzer(&["leaks", rss.to_str().unwrap()]);
    assert!(!String::from_utf8_lossy(&table.stdout).contains("peak resident memory"));
    let table = analyzer(&["peak", rss.to_str().unwrap()]);
    assert!(
        String::from_utf8_lossy(&table.stdout)
            .contains("the process's peak resident memory: 4.8 MiB")
    );
    // What the sites account for, in a phase and in all: their bytes' sum (the kept
    // peak's one sampled block is `main`'s, none is `build`'s).
    for (phase, blocks) in [(None, 1), (Some("main"), 1), (Some("build"), 0)] {
        let mut args = vec!["peak", r, "--format", "json"];
        args.extend(phase.iter().flat_map(|p| ["--phase", *p]));
        let out = analyzer(&args);
        let peak: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let sites = peak["sites"].as_array().unwrap();
        let sum: u64 = sites
            .iter()
            .map(|s| s["live_bytes"].as_u64().unwrap())
            .sum();
        assert_eq!(sites.len(), blocks, "{phase:?}");
        assert_eq!(peak["estimated_bytes"].as_u64().unwrap(), sum, "{phase:?}");
        assert_eq!(peak["blocks_of_phase"].as_str(), phase, "{phase:?}");
    }
    // The moment is the run's whatever the phase: the table says whose blocks it
    // holds, alone and against a base.
    let table = analyzer(&["peak", r, "--phase", "main"]);
    assert!(
        String::from_utf8_lossy(&table.stdout)
            .contains("sites below, of blocks allocated in phase main, account for"),
        "{table:?}"
    );
    // So does the flame graph of it: drawn, saying no block of the phase was live.
    let svg = Scratch::new("analyzer-peak-build").holding("graph.svg");
    let out = analyzer(&[
        "flamegraph",
        r,
        "--by",
        "peak-bytes",
        "--phase",
        "build",
        "-o",
        svg.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{out:?}");
    assert!(
        std::fs::read_to_string(&svg)
            .unwrap()
            .contains("none of the sampled blocks live then was allocated in phase build")
    );
    std::fs::remove_file(&svg).unwrap();
    let table = analyzer(&["peak", r, "--base", r, "--phase", "build"]);
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(
        text.contains("heap sampling's estimates of blocks allocated in phase build: 0 B -> 0 B")
            && text.contains("none of the sampled blocks live then in either run was allocated in the phase asked for"),
        "{text}"
    );
    let dir = Scratch::new("analyzer-memory");
    // The timeline: the report's name and mode in the title, the kept peak labelled
    // with its size, time and phase from the manifest, the phases in the legend.
    let svg = dir.join("live.svg");
    let out = analyzer(&["timeline", r, "-o", svg.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&svg).unwrap();
    let m: serde_json::Value =
        serde_json::from_slice(&std::fs::read(Path::new(r).join("manifest.json")).unwrap())
            .unwrap();
    let peak = &m["heap_peak"];
    assert!(
        text.contains("Live bytes over time: memory-report (sites"),
        "{text}"
    );
    let label = format!(
        "kept peak {:.1} MiB at {:.2} s ({})",
        peak["live_bytes"].as_f64().unwrap() / (1u64 << 20) as f64,
        peak["time_ns"].as_f64().unwrap() * 1e-9,
        peak["phase"].as_str().unwrap()
    );
    assert!(text.contains(&label), "no `{label}` in the plot");
    // And the run's exact highest live bytes, which the points can miss.
    let highest = format!(
        "highest live bytes {} (within {}; points {} ms apart",
        analyzer::render::bytes(m["totals"]["peak_live_bytes"].as_f64().unwrap()),
        analyzer::render::bytes(m["totals"]["peak_live_bytes_error_bytes"].as_f64().unwrap()),
        m["timeline_interval_ms"]
    );
    assert!(text.contains(&highest), "no `{highest}` in the plot");
    // (`combine` takes under a millisecond: no point falls in it.)
    for phase in ["build", "main"] {
        assert!(text.contains(&format!("phase {phase}")), "{phase}");
    }
    // An SVG under another image's name is refused, and nothing written.
    let png = dir.join("live.png");
    for command in [
        vec!["timeline", r, "-o", png.to_str().unwrap()],
        vec![
            "flamegraph",
            r,
            "--by",
            "peak-bytes",
            "-o",
            png.to_str().unwrap(),
        ],
    ] {
        let out = analyzer(&command);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{command:?}: {err}");
        assert!(err.contains("this writes SVG, not .png"), "{err}");
        assert!(!png.exists());
    }
    // The flame graph of live bytes at the peak names the buffer that holds them.
    let flame = dir.join("peak.svg");
    let out = analyzer(&[
        "flamegraph",
        r,
        "--by",
        "peak-bytes",
        "-o",
        flame.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&flame).unwrap();
    assert!(text.contains("Live bytes at the kept peak (heap sampling): memory-report"));
    assert!(text.contains("lookup_table"));
}

#[test]
fn folded_stacks_of_live_bytes_add_up_to_the_estimates() {
    let r = memory_fixture();
    let r = r.to_str().unwrap();
    for (by, command) in [("peak-bytes", "peak"), ("end-bytes", "leaks")] {
        let out = analyzer(&["export", r, "--format", "folded", "--by", by]);
        assert!(out.status.success(), "{out:?}");
        let text = String::from_utf8(out.stdout).unwrap();
        let sum: u64 = text
            .lines()
            .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
            .sum();
        let held: serde_json::Value =
            serde_json::from_slice(&analyzer(&[command, r, "--format", "json"]).stdout).unwrap();
        assert!(sum > 0, "{by}");
        assert_eq!(sum, held["estimated_bytes"].as_u64().unwrap(), "{by}");
        // The flame graph draws the same stacks.
        let svg = Scratch::new(&format!("analyzer-{by}")).holding("graph.svg");
        let out = analyzer(&["flamegraph", r, "--by", by, "-o", svg.to_str().unwrap()]);
        assert!(out.status.success(), "{out:?}");
        let drawn = std::fs::read_to_string(&svg).unwrap();
        let title = if by == "peak-bytes" {
            "Live bytes at the kept peak"
        } else {
            "Live bytes at the end of the run"
        };
        assert!(drawn.contains(title), "{by}");
        std::fs::remove_file(&svg).unwrap();
    }
    // A count report has heap samples but no sites: its live stacks, no word of
    // missing sites (the 32 GiB partition's, from the notebooks' data).
    let count = Path::new(env!("CARGO_MANIFEST_DIR")).join("../notebooks/data/porep-32g-count");
    let out = analyzer(&[
        "export",
        count.to_str().unwrap(),
        "--format",
        "folded",
        "--by",
        "peak-bytes",
    ]);
    assert!(out.status.success(), "{out:?}");
    assert!(!out.stdout.is_empty());
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Heap sampling on and nothing live at the end: a drawing that says so, exit 0.
    let clean = copy_report(&memory_fixture(), "nothing-live");
    edit_table(&clean, "heap_end.parquet", |df| df.head(Some(0)));
    edit_manifest(&clean, |m| {
        for t in m["tables"].as_array_mut().unwrap() {
            if t["file"] == "heap_end.parquet" {
                t["rows"] = 0.into();
            }
        }
    });
    let svg = clean.join("end.svg");
    let out = analyzer(&[
        "flamegraph",
        clean.to_str().unwrap(),
        "--by",
        "end-bytes",
        "-o",
        svg.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{out:?}");
    assert!(
        std::fs::read_to_string(&svg)
            .unwrap()
            .contains("no sampled block was live then")
    );
    // No peak kept: there is no moment to draw, an error as ever.
    edit_table(&clean, "heap_peak.parquet", |df| df.head(Some(0)));
    edit_manifest(&clean, |m| {
        m["heap_peak"] = serde_json::Value::Null;
        for t in m["tables"].as_array_mut().unwrap() {
            if t["file"] == "heap_peak.parquet" {
                t["rows"] = 0.into();
            }
        }
    });
    let out = analyzer(&[
        "flamegraph",
        clean.to_str().unwrap(),
        "--by",
        "peak-bytes",
        "-o",
        svg.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    // Nor does the folded export write an empty file for it; at the end, sampled
    // and nothing live, it does, and says so.
    let export = |by: &str| {
        analyzer(&[
            "export",
            clean.to_str().unwrap(),
            "--format",
            "folded",
            "--by",
            by,
        ])
    };
    let out = export("peak-bytes");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("heap sampling did not see that moment"),
        "{out:?}"
    );
    let out = export("end-bytes");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(out.stdout.is_empty());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no live bytes to export"),
        "{out:?}"
    );
    // `peak` says why there is none: this run passed 1 MiB, so the report is of a
    // tracer that kept no peak, not of a small run.
    let out = analyzer(&["peak", clean.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("no peak kept (the run reached 2.3 MiB live, but the tracer"),
        "{stdout}"
    );
    edit_manifest(&clean, |m| {
        m["totals"]["peak_live_bytes"] = 1_000_000.into()
    });
    let out = analyzer(&["peak", clean.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("no peak kept (live bytes never reached 1 MiB)"),
        "{stdout}"
    );
    // Without heap sampling: no answer, as the flame graph of it has none (exit 2,
    // nothing on standard output), and a word on why.
    let demo = fixture();
    let out = analyzer(&[
        "export",
        demo.to_str().unwrap(),
        "--format",
        "folded",
        "--by",
        "end-bytes",
    ]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(out.stdout.is_empty());
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("no live bytes to export: heap sampling did not see that moment (it was off")
    );
}

#[test]
fn peak_against_a_base_report() {
    let r = memory_fixture();
    let r = r.to_str().unwrap();
    // Against itself: every category and site on both sides, nothing changed.
    let out = analyzer(&["peak", r, "--base", r, "--format", "json"]);
    assert!(out.status.success(), "{out:?}");
    let c: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let peak: serde_json::Value =
        serde_json::from_slice(&analyzer(&["peak", r, "--format", "json"]).stdout).unwrap();
    assert_eq!(c["base"]["live_bytes"], peak["live_bytes"]);
    assert_eq!(c["change"]["live_bytes"], peak["live_bytes"]);
    let sites = c["sites"].as_array().unwrap();
    assert_eq!(sites.len(), peak["sites"].as_array().unwrap().len());
    assert!(!c["categories"].as_array().unwrap().is_empty());
    for row in sites.iter().chain(c["categories"].as_array().unwrap()) {
        assert_eq!(row["delta_bytes"], 0, "{row}");
        assert_eq!(row["base_bytes"], row["change_bytes"], "{row}");
    }
    assert!(sites.iter().all(|s| s["matched"] == "stack"));
    assert_eq!(c["base"]["matched_share"], 1.0);
    let out = analyzer(&["peak", r, "--base", r]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains(
            "in sites both reports have: 100.0% of the base's estimates, 100.0% of the change's"
        ),
        "{text}"
    );
    assert!(!text.contains("a fifth or more"), "{text}");
    // Against a report without heap sampling (the demo's): it says so.
    let demo = fixture();
    let out = analyzer(&["peak", r, "--base", demo.to_str().unwrap()]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("base:   no peak kept"), "{text}");
    assert!(
        text.contains("heap sampling was off in the base's run"),
        "{text}"
    );
    // CSV: categories, then sites.
    let out = analyzer(&["leaks", r, "--base", r, "--format", "csv"]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.starts_with("kind,rank,name,callers,distinction,category,matched,base_bytes,change_bytes,delta_bytes,delta_se,within_noise\n"),
        "{text}"
    );
    assert!(text.contains("\nsite,1,"), "{text}");
    // A phase one report lacks is refused.
    let out = analyzer(&["peak", r, "--base", r, "--phase", "nonesuch"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    // Another circuit: compared, with a word.
    let larger = copy_report(&memory_fixture(), "peak-base-rows");
    edit_manifest(&larger, |m| m["labels"]["rows"] = "2687961".into());
    let small = copy_report(&memory_fixture(), "peak-base-rows-small");
    edit_manifest(&small, |m| m["labels"]["rows"] = "106144".into());
    let out = analyzer(&[
        "peak",
        larger.to_str().unwrap(),
        "--base",
        small.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("circuits of different sizes"), "{stderr}");
}

#[test]
fn cost_table_json_csv() {
    let r = fixture();
    let r = r.to_str().unwrap();
    snapshot("cost.txt", &["cost", r, "--limit", "4"]);
    snapshot(
        "cost-build.json",
        &[
            "cost", r, "--phase", "build", "--limit", "2", "--format", "json",
        ],
    );
    snapshot("cost.csv", &["cost", r, "--limit", "3", "--format", "csv"]);
    snapshot("top-cost.txt", &["top", r, "--by", "cost", "--limit", "3"]);
}

#[test]
fn diff_of_a_report_with_itself_changes_nothing() {
    let r = fixture();
    let r = r.to_str().unwrap();
    snapshot(
        "diff-self.txt",
        &[
            "diff",
            r,
            r,
            "--base-seconds",
            "2.0",
            "--change-seconds",
            "1.5",
        ],
    );
    snapshot("diff-self.csv", &["diff", r, r, "--format", "csv"]);
    let out = analyzer(&["diff", r, r, "--format", "json"]);
    assert!(out.status.success());
    let d: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(d["predicted_change_s"], 0.0);
    assert_eq!(d["sites_gone"], 0);
    assert_eq!(d["sites_new"], 0);
    assert!(d["sites_matched"].as_u64().unwrap() > 3);
    assert_eq!(d["sites"].as_array().unwrap().len(), 0);
}

#[test]
fn folded_stacks_and_flamegraph() {
    let r = fixture();
    let r = r.to_str().unwrap();
    snapshot(
        "folded-build.txt",
        &["export", r, "--format", "folded", "--phase", "build"],
    );
    let dir = Scratch::new("analyzer-flame");
    let svg = dir.join("f.svg");
    let out = analyzer(&[
        "flamegraph",
        r,
        "--by",
        "bytes",
        "-o",
        svg.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(
        text.starts_with("<?xml"),
        "{}",
        &text[..100.min(text.len())]
    );
    for f in ["<title>build (", "<title>combine (", "requested bytes"] {
        assert!(text.contains(f), "{f} missing from the SVG");
    }
}

/// profile.proto, the messages we write, for prost to decode.
mod pprof {
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Profile {
        #[prost(message, repeated, tag = "1")]
        pub sample_type: Vec<ValueType>,
        #[prost(message, repeated, tag = "2")]
        pub sample: Vec<Sample>,
        #[prost(message, repeated, tag = "3")]
        pub mapping: Vec<Mapping>,
        #[prost(message, repeated, tag = "4")]
        pub location: Vec<Location>,
        #[prost(message, repeated, tag = "5")]
        pub function: Vec<Function>,
        #[prost(string, repeated, tag = "6")]
        pub string_table: Vec<String>,
        #[prost(int64, tag = "9")]
        pub time_nanos: i64,
        #[prost(int64, tag = "10")]
        pub duration_nanos: i64,
        #[prost(int64, repeated, tag = "13")]
        pub comment: Vec<i64>,
        #[prost(int64, tag = "14")]
        pub default_sample_type: i64,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ValueType {
        #[prost(int64, tag = "1")]
        pub r#type: i64,
        #[prost(int64, tag = "2")]
        pub unit: i64,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Sample {
        #[prost(uint64, repeated, tag = "1")]
        pub location_id: Vec<u64>,
        #[prost(int64, repeated, tag = "2")]
        pub value: Vec<i64>,
        #[prost(message, repeated, tag = "3")]
        pub label: Vec<Label>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Label {
        #[prost(int64, tag = "1")]
        pub key: i64,
        #[prost(int64, tag = "2")]
        pub str: i64,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Mapping {
        #[prost(uint64, tag = "1")]
        pub id: u64,
        #[prost(bool, tag = "7")]
        pub has_functions: bool,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Location {
        #[prost(uint64, tag = "1")]
        pub id: u64,
        #[prost(uint64, tag = "2")]
        pub mapping_id: u64,
        #[prost(uint64, tag = "3")]
        pub address: u64,
        #[prost(message, repeated, tag = "4")]
        pub line: Vec<Line>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Line {
        #[prost(uint64, tag = "1")]
        pub function_id: u64,
        #[prost(int64, tag = "2")]
        pub line: i64,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Function {
        #[prost(uint64, tag = "1")]
        pub id: u64,
        #[prost(int64, tag = "2")]
        pub name: i64,
        #[prost(int64, tag = "3")]
        pub system_name: i64,
        #[prost(int64, tag = "4")]
        pub filename: i64,
    }
}

#[test]
fn a_count_reports_pprof_profile_opens_on_its_live_bytes() {
    use prost::Message;
    use std::io::Read;
    // The 32 GiB partition's count report: no sites, heap samples at the kept peak.
    let r = Path::new(env!("CARGO_MANIFEST_DIR")).join("../notebooks/data/porep-32g-count");
    let file = Scratch::new("analyzer-count").holding("profile.pb.gz");
    // The default sample type of the profile exported with `extra` arguments.
    let default_type = |extra: &[&str]| {
        let mut args = vec!["export", r.to_str().unwrap(), "--format", "pprof"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["-o", file.to_str().unwrap()]);
        let out = analyzer(&args);
        assert!(out.status.success(), "{out:?}");
        let mut raw = Vec::new();
        flate2::read::GzDecoder::new(std::fs::File::open(&file).unwrap())
            .read_to_end(&mut raw)
            .unwrap();
        let p = pprof::Profile::decode(raw.as_slice()).unwrap();
        p.string_table[p.default_sample_type as usize].clone()
    };
    assert_eq!(
        default_type(&[]),
        "inuse_space",
        "alloc_objects is all zeros in a count report"
    );
    // Its heap samples all lie in `synthesize`: a profile of `setup` holds no sample
    // at all, and opens on the usual first type, as the export of a phase does.
    assert_eq!(default_type(&["--phase", "setup"]), "alloc_objects");
    std::fs::remove_file(file).unwrap();
}

#[test]
fn pprof_profile_decodes_and_matches_top() {
    use prost::Message;
    use std::io::Read;
    // A report with heap sampling, for the in-use values.
    let r = memory_fixture();
    let r = r.to_str().unwrap();
    let dir = Scratch::new("analyzer-pprof");
    let file = dir.join("p.pb.gz");
    let out = analyzer(&[
        "export",
        r,
        "--format",
        "pprof",
        "-o",
        file.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&file).unwrap())
        .read_to_end(&mut raw)
        .unwrap();
    let p = pprof::Profile::decode(raw.as_slice()).unwrap();
    let s = |i: i64| p.string_table[i as usize].as_str();
    assert_eq!(s(0), "");
    let types: Vec<(&str, &str)> = p
        .sample_type
        .iter()
        .map(|t| (s(t.r#type), s(t.unit)))
        .collect();
    assert_eq!(
        types,
        [
            ("alloc_objects", "count"),
            ("alloc_space", "bytes"),
            ("temporaries", "count"),
            ("inuse_objects", "count"),
            ("inuse_space", "bytes")
        ]
    );
    // What Go's pprof and Pyroscope show first.
    assert_eq!(s(p.default_sample_type), "alloc_objects");
    // Its comments say which figures are estimates: here heap sampling's.
    let comments: Vec<&str> = p.comment.iter().map(|&c| s(c)).collect();
    assert_eq!(comments.len(), 1, "{comments:?}");
    assert!(
        comments[0].starts_with("inuse_objects and inuse_space are heap sampling's estimates"),
        "{comments:?}"
    );
    // Every reference resolves.
    let locations: std::collections::HashMap<u64, &pprof::Location> =
        p.location.iter().map(|l| (l.id, l)).collect();
    let functions: std::collections::HashMap<u64, &pprof::Function> =
        p.function.iter().map(|f| (f.id, f)).collect();
    assert_eq!(p.mapping.len(), 1);
    assert!(p.mapping[0].has_functions);
    for sample in &p.sample {
        assert_eq!(sample.value.len(), 5);
        assert_eq!(s(sample.label[0].key), "phase");
        for id in &sample.location_id {
            let loc = locations[id];
            assert_eq!(loc.mapping_id, 1);
            assert!(!loc.line.is_empty());
            for line in &loc.line {
                assert!(functions.contains_key(&line.function_id));
            }
        }
    }
    // The total allocation count equals the sum over `top`'s sites.
    let total: i64 = p.sample.iter().map(|x| x.value[0]).sum();
    let top = analyzer(&["top", r, "--limit", "100000", "--format", "json"]);
    let top: serde_json::Value = serde_json::from_slice(&top.stdout).unwrap();
    let want: u64 = top
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["alloc_count"].as_u64().unwrap() + x["realloc_count"].as_u64().unwrap())
        .sum();
    assert_eq!(total as u64, want);
    // In-use bytes are the live bytes `peak` gives at the kept peak.
    let in_use: i64 = p.sample.iter().map(|x| x.value[4]).sum();
    let peak = analyzer(&["peak", r, "--format", "json"]);
    let peak: serde_json::Value = serde_json::from_slice(&peak.stdout).unwrap();
    assert!(in_use > 0);
    assert_eq!(in_use as u64, peak["estimated_bytes"].as_u64().unwrap());
    // The leaf function of the biggest sample's first location names a real function.
    let biggest = p.sample.iter().max_by_key(|x| x.value[0]).unwrap();
    let leaf = locations[&biggest.location_id[0]];
    assert!(!s(functions[&leaf.line[0].function_id].name).is_empty());
    // Names without generic arguments, system names as symbolized: pprof takes a name
    // equal to its system name as still mangled and garbles Rust's with its C++ rules.
    let mut generic = 0;
    for f in &p.function {
        let (name, system) = (s(f.name), s(f.system_name));
        assert_eq!(name, analyzer::naming::without_generics(system), "{system}");
        generic += usize::from(name != system);
    }
    assert!(generic > 0, "the fixture's stacks hold generic functions");
}

/// The named-sites table's columns and types as docs/report-schema.md lists them, types
/// as Rust polars prints them.
fn documented_named_sites() -> Vec<(String, String)> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/report-schema.md");
    let text = std::fs::read_to_string(path).unwrap();
    let section = text
        .split("\n## ")
        .find(|s| s.starts_with("Derived: the named-sites table"))
        .expect("docs/report-schema.md documents the named-sites table");
    let columns: Vec<(String, String)> = section
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            assert_eq!(cells[3], "no", "{l}");
            let dtype = match cells[2] {
                "UInt64" => "u64",
                "UInt32" => "u32",
                "String" => "str",
                other => panic!("{l}: type {other}"),
            };
            (cells[1].trim_matches('`').to_owned(), dtype.to_owned())
        })
        .collect();
    assert!(!columns.is_empty());
    columns
}

#[test]
fn named_sites_table_carries_the_names_categories_and_counts_of_the_other_commands() {
    use polars::prelude::*;
    let r = fixture();
    let r = r.to_str().unwrap();
    let dir = Scratch::new("analyzer-named");
    let file = dir.join("sites.parquet");
    let out = analyzer(&[
        "export",
        r,
        "--format",
        "parquet",
        "-o",
        file.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let df = ParquetReader::new(std::fs::File::open(&file).unwrap())
        .finish()
        .unwrap();
    let schema: Vec<(String, String)> = df
        .schema()
        .iter()
        .map(|(name, dtype)| (name.to_string(), dtype.to_string()))
        .collect();
    assert_eq!(schema, documented_named_sites());
    let strs = |name: &str| -> Vec<String> {
        let c = df.column(name).unwrap().str().unwrap();
        c.iter().map(|v| v.unwrap().to_owned()).collect()
    };
    let u64s = |name: &str| -> Vec<u64> {
        let c = df.column(name).unwrap().u64().unwrap();
        c.iter().map(|v| v.unwrap()).collect()
    };
    let (ids, names, callers) = (u64s("site_id"), strs("name"), strs("callers"));
    let (categories, keys) = (strs("category"), strs("stack_key"));
    let counts: Vec<u64> = u64s("alloc_count")
        .iter()
        .zip(u64s("realloc_count"))
        .map(|(a, r)| a + r)
        .collect();
    // Per site: `top`'s name, callers and count (over all phases).
    let top = analyzer(&["top", r, "--limit", "100000", "--format", "json"]);
    let top: serde_json::Value = serde_json::from_slice(&top.stdout).unwrap();
    let top = top.as_array().unwrap();
    assert!(!top.is_empty());
    for site in top {
        let id = site["site_id"].as_u64().unwrap();
        let rows: Vec<usize> = (0..ids.len()).filter(|&i| ids[i] == id).collect();
        assert!(!rows.is_empty(), "site {id}");
        for &i in &rows {
            assert_eq!(names[i], site["name"].as_str().unwrap(), "site {id}");
            assert_eq!(callers[i], site["callers"].as_str().unwrap(), "site {id}");
            assert!(keys[i].ends_with('\n'), "site {id}: {:?}", keys[i]);
        }
        let n: u64 = rows.iter().map(|&i| counts[i]).sum();
        let want = site["alloc_count"].as_u64().unwrap() + site["realloc_count"].as_u64().unwrap();
        assert_eq!(n, want, "site {id}");
    }
    // Per category: `categories`'s totals.
    let cats = analyzer(&["categories", r, "--format", "json"]);
    let cats: serde_json::Value = serde_json::from_slice(&cats.stdout).unwrap();
    for cat in cats.as_array().unwrap() {
        let name = cat["category"].as_str().unwrap();
        let n: u64 = (0..ids.len())
            .filter(|&i| categories[i] == name)
            .map(|i| counts[i])
            .sum();
        let want = cat["alloc_count"].as_u64().unwrap() + cat["realloc_count"].as_u64().unwrap();
        assert_eq!(n, want, "{name}");
    }
    // A phase keeps its rows only.
    let build = dir.join("build.parquet");
    let out = analyzer(&[
        "export",
        r,
        "--format",
        "parquet",
        "--phase",
        "build",
        "-o",
        build.to_str().unwrap(),
    ]);
    assert!(out.status.success());
    let build = ParquetReader::new(std::fs::File::open(&build).unwrap())
        .finish()
        .unwrap();
    let phases = build.column("phase").unwrap().str().unwrap();
    assert!(build.height() > 0);
    assert!(phases.iter().all(|p| p == Some("build")));
}

#[test]
fn categories_table_json_csv() {
    let r = fixture();
    let r = r.to_str().unwrap();
    snapshot("categories.txt", &["categories", r]);
    snapshot("categories.json", &["categories", r, "--format", "json"]);
    snapshot("categories.csv", &["categories", r, "--format", "csv"]);
}

#[test]
fn user_rules_claim_sites() {
    let dir = Scratch::new("analyzer-rules");
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

/// Edits the manifest of a copied report.
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

#[test]
fn bad_input_is_one_line_naming_the_file() {
    assert_one_line_error(&["top", "/no/such/report"], "/no/such/report");
    // A folder that is not a report says so.
    let empty = Scratch::new("analyzer-empty");
    assert_one_line_error(
        &["info", empty.to_str().unwrap()],
        "not a report: no manifest.json",
    );
    // Usage errors too, their tip and the missing arguments kept.
    assert_one_line_error(&["top"], "not provided: <REPORT>");
    assert_one_line_error(
        &["top", "--formt", "json", "r"],
        "a similar argument exists: '--format'",
    );
    assert_one_line_error(
        &["diff", "a", "b", "--fail-if"],
        "a value is required for '--fail-if <EXPR>'",
    );
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
    let r = fixture();
    let r = r.to_str().unwrap();
    assert_one_line_error(&["diff", r, "/no/such/change"], "/no/such/change");
    // The fixture calibration predates the `recycle` operation.
    assert_one_line_error(&["diff", r, r, "--recycled"], "--recycled");
    let bad_calibration = truncated.join("calibration.json");
    std::fs::write(&bad_calibration, "{\"version\": 1, \"pairs\": 3}").unwrap();
    assert_one_line_error(
        &[
            "cost",
            r,
            "--calibration",
            bad_calibration.to_str().unwrap(),
        ],
        "calibration.json",
    );
    // Figures no measurement gives (priced, they made NaN costs, and a cost gate
    // comparing NaN never failed).
    let fixture_calibration = std::fs::read_to_string(calibration()).unwrap();
    for (field, bad, expected) in [
        (
            "copy_bytes_per_ns",
            "0.0",
            "copy_bytes_per_ns is 0, not a rate above zero",
        ),
        ("ns", "-1.0", "takes -1 ns"),
    ] {
        let at = fixture_calibration.find(&format!("\"{field}\": ")).unwrap();
        let start = at + field.len() + 4;
        let end = start + fixture_calibration[start..].find([',', '\n']).unwrap();
        let text = format!(
            "{}{bad}{}",
            &fixture_calibration[..start],
            &fixture_calibration[end..]
        );
        std::fs::write(&bad_calibration, text).unwrap();
        assert_one_line_error(
            &[
                "cost",
                r,
                "--calibration",
                bad_calibration.to_str().unwrap(),
            ],
            expected,
        );
    }
    assert_one_line_error(
        &[
            "export",
            r,
            "--format",
            "pprof",
            "-o",
            "/no/such/dir/p.pb.gz",
        ],
        "/no/such/dir/p.pb.gz",
    );
    assert_one_line_error(
        &[
            "flamegraph",
            r,
            "--phase",
            "nope",
            "-o",
            "/tmp/analyzer-never.svg",
        ],
        "--phase nope",
    );
}

#[test]
fn an_unknown_phase_is_an_error_listing_the_reports_phases() {
    // issue 16: a misspelled --phase printed an empty table and exited 0.
    let r = fixture();
    let r = r.to_str().unwrap();
    let want = "--phase biuld: ";
    for args in [
        &["top", r, "--phase", "biuld"][..],
        &["categories", r, "--phase", "biuld"],
        &["cost", r, "--phase", "biuld"],
        &["diff", r, r, "--phase", "biuld"],
        &["export", r, "--format", "folded", "--phase", "biuld"],
    ] {
        assert_one_line_error(args, want);
        let stderr = String::from_utf8(analyzer(args).stderr).unwrap();
        assert!(
            stderr.ends_with("has no such phase (its phases: main, build, combine)\n"),
            "{stderr}"
        );
    }
}

#[test]
fn info_of_a_sampled_report_calls_its_temporaries_estimates() {
    let sampled = copy_fixture("info-sampled");
    edit_manifest(&sampled, |m| {
        m["mode"] = "sample:10".into();
        m["sample_interval"] = 10.into();
    });
    let out = analyzer(&["info", sampled.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(
            " temporaries (estimated: each sampled one counted for the 10 it stands for)"
        ),
        "{text}"
    );
    // A tracer that records the largest classes whole says so.
    edit_manifest(&sampled, |m| m["sample_all_from_bytes"] = 262_144.into());
    let out = analyzer(&["info", sampled.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(
            "each stack stands for 10 allocations, but blocks of 256.0 KiB and more, each \
             recorded whole;"
        ),
        "{text}"
    );
    assert!(
        text.contains("the 10 it stands for, or once where recorded whole)"),
        "{text}"
    );
    // A sites report's are exact and say nothing more.
    let out = analyzer(&["info", fixture().to_str().unwrap()]);
    assert!(!String::from_utf8_lossy(&out.stdout).contains("estimated: each sampled"));
}

#[test]
fn info_describes_the_report() {
    let r = fixture();
    let r = r.to_str().unwrap();
    let out = analyzer(&["info", r, "--format", "json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let info: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture().join("manifest.json")).unwrap())
            .unwrap();
    for key in [
        "mode",
        "sample_interval",
        "command_line",
        "host",
        "threads",
        "tables",
    ] {
        assert_eq!(info[key], manifest[key], "{key}");
    }
    // Figures a report without them (as this fixture, from before) reads as 0; a
    // report that has them, as they are.
    let with = copy_fixture("info-rss");
    edit_manifest(&with, |m| {
        m["timeline_interval_ms"] = 10.into();
        m["totals"]["max_rss_bytes"] = 3_000_000.into();
        m["totals"]["rss_bytes_end"] = 2_000_000.into();
    });
    let out = analyzer(&["info", with.to_str().unwrap(), "--format", "json"]);
    let later: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        [
            &info["timeline_interval_ms"],
            &info["max_rss_bytes"],
            &info["rss_bytes_end"]
        ],
        [0, 0, 0]
    );
    assert_eq!(
        [
            &later["timeline_interval_ms"],
            &later["max_rss_bytes"],
            &later["rss_bytes_end"]
        ],
        [10, 3_000_000, 2_000_000]
    );
    // The fixture predates some of `dropped`'s fields: those it has.
    for (key, value) in manifest["dropped"].as_object().unwrap() {
        assert_eq!(&info["dropped"][key], value, "dropped.{key}");
    }
    assert_eq!(
        info["peak_live_bytes"],
        manifest["totals"]["peak_live_bytes"]
    );
    let phases: Vec<&str> = info["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["phase"].as_str().unwrap())
        .collect();
    assert_eq!(phases, ["main", "build", "combine"]);
    // Per phase, the counts `categories --phase` sums; main's wall time is what the
    // named phases leave of the run's.
    let mut named_wall = 0.0;
    for p in info["phases"].as_array().unwrap() {
        let name = p["phase"].as_str().unwrap();
        let cats = analyzer(&["categories", r, "--phase", name, "--format", "json"]);
        let cats: serde_json::Value = serde_json::from_slice(&cats.stdout).unwrap();
        let sum = |field: &str| -> u64 {
            cats.as_array()
                .unwrap()
                .iter()
                .map(|c| c[field].as_u64().unwrap())
                .sum()
        };
        // Allocations and reallocs apart, as the report's totals name them.
        assert_eq!(
            p["alloc_count"].as_u64().unwrap(),
            sum("alloc_count"),
            "{name}"
        );
        assert_eq!(
            p["realloc_count"].as_u64().unwrap(),
            sum("realloc_count"),
            "{name}"
        );
        if name != "main" {
            named_wall += p["wall_s"].as_f64().unwrap();
        }
    }
    let main_wall = info["phases"][0]["wall_s"].as_f64().unwrap();
    let run = manifest["duration_s"].as_f64().unwrap();
    assert!(
        (main_wall - (run - named_wall)).abs() < 1e-9,
        "{main_wall} {run} {named_wall}"
    );
    assert!(main_wall > 0.0);
    // The table names the same things, one per line.
    let out = analyzer(&["info", r]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for line in [
        "report ",
        "mode      sites",
        "command ",
        "host ",
        "not kept ",
        "tables ",
    ] {
        assert!(text.lines().any(|l| l.starts_with(line)), "{line}: {text}");
    }
    assert!(text.lines().any(|l| l.starts_with("build ")), "{text}");
    // A sampling interval below a MiB in the unit that suits it (it read 0.0 MiB).
    let m = memory_fixture();
    let out = analyzer(&["info", m.to_str().unwrap()]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.lines()
            .any(|l| l.starts_with("heap      sampled every 4.0 KiB on average;")),
        "{text}"
    );
}

#[test]
fn errors_say_each_cause_once_and_times_must_be_times() {
    let r = fixture();
    let r = r.to_str().unwrap();
    let out = analyzer(&["diff", r, "/no/such/change"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stderr.matches("no such report directory").count(),
        1,
        "{stderr}"
    );
    let out = analyzer(&["cost", r, "--calibration", "/no/such/calibration.json"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.matches("No such file").count(), 1, "{stderr}");
    for bad in ["-1", "nan", "0", "inf"] {
        let out = analyzer(&[
            "diff",
            r,
            r,
            &format!("--base-seconds={bad}"),
            "--change-seconds=1",
        ]);
        assert_eq!(out.status.code(), Some(2), "{bad}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("is not a time in seconds above 0"),
            "{stderr}"
        );
    }
}

#[test]
fn leaks_of_a_stopped_run_say_so() {
    let dir = copy_fixture("stopped");
    edit_manifest(&dir, |m| m["incomplete"] = "SIGINT".into());
    let out = analyzer(&["leaks", dir.to_str().unwrap()]);
    assert!(out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("the run was stopped (SIGINT)"), "{stderr}");
    let out = analyzer(&["leaks", fixture().to_str().unwrap()]);
    assert!(!String::from_utf8_lossy(&out.stderr).contains("stopped"));
}

#[test]
fn a_phase_never_timed_has_no_wall_time() {
    use polars::prelude::*;
    // `combine` entered only by quick guards (as the mirror prover's `enforce`): the
    // tracer writes 0 entries and 0 ns, which is no measure of its time.
    let dir = copy_fixture("untimed");
    edit_table(&dir, "phases.parquet", |mut df| {
        let quick: Vec<bool> = phase_column(&df).iter().map(|p| p == "combine").collect();
        assert!(quick.contains(&true));
        for name in ["entry_count", "wall_ns"] {
            let values: Vec<u64> = df
                .column(name)
                .unwrap()
                .u64()
                .unwrap()
                .into_no_null_iter()
                .zip(&quick)
                .map(|(v, &q)| if q { 0 } else { v })
                .collect();
            df.replace(name, Column::new(name.into(), values)).unwrap();
        }
        df
    });
    let d = dir.to_str().unwrap();
    let cost = analyzer(&["cost", d, "--phase", "combine", "--format", "json"]);
    let cost: serde_json::Value = serde_json::from_slice(&cost.stdout).unwrap();
    assert!(cost["phase_wall_s"].is_null(), "{cost}");
    let diff = analyzer(&["diff", d, d, "--phase", "combine", "--format", "json"]);
    let diff: serde_json::Value = serde_json::from_slice(&diff.stdout).unwrap();
    assert!(diff["measured_change_s"].is_null(), "{diff}");
    let info = analyzer(&["info", d, "--format", "json"]);
    let info: serde_json::Value = serde_json::from_slice(&info.stdout).unwrap();
    let timed: Vec<(&str, bool)> = info["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["phase"].as_str().unwrap(), p["timed"].as_bool().unwrap()))
        .collect();
    assert_eq!(timed, [("main", true), ("build", true), ("combine", false)]);
    let table = analyzer(&["info", d]);
    let table = String::from_utf8_lossy(&table.stdout);
    let combine = table.lines().find(|l| l.starts_with("combine ")).unwrap();
    assert_eq!(combine.split_whitespace().nth(1), Some("-"), "{table}");
    // A timed phase keeps its time.
    let cost = analyzer(&["cost", d, "--phase", "build", "--format", "json"]);
    let cost: serde_json::Value = serde_json::from_slice(&cost.stdout).unwrap();
    assert!(cost["phase_wall_s"].as_f64().unwrap() > 0.0, "{cost}");
}

#[test]
fn diff_says_when_the_reports_differ_beyond_a_patch() {
    // Of another mode and of a larger circuit: the same sites, other figures.
    let edit = |name: &str, mode: &str, rows: &str| {
        let dir = copy_fixture(name);
        edit_manifest(&dir, |m| {
            m["mode"] = mode.into();
            m["labels"]["rows"] = rows.into();
        });
        dir
    };
    let (a, b) = (
        edit("diff-a", "sites", "1000"),
        edit("diff-b", "sample:100", "2000"),
    );
    edit_manifest(&b, |m| m["sample_interval"] = 100.into());
    let out = analyzer(&["diff", a.to_str().unwrap(), b.to_str().unwrap()]);
    assert!(out.status.success(), "{out:?}");
    // Sampled: the deltas carry their noise.
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("~ marks a change under two standard errors"),
        "{stdout}"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("different modes (sites and sample:100)"),
        "{stderr}"
    );
    assert!(
        stderr.contains("different sizes (rows 1000 and 2000)"),
        "{stderr}"
    );
    let out = analyzer(&["diff", a.to_str().unwrap(), a.to_str().unwrap()]);
    assert!(out.stderr.is_empty(), "{out:?}");
    // One circuit run once and twice: said as such, and a gate refuses it.
    let twice = edit("diff-twice", "sites", "2000");
    for (dir, n) in [(&a, "1"), (&twice, "2")] {
        edit_manifest(dir, |m| {
            m["labels"]["circuit"] = "sha256 --blocks 1".into();
            m["labels"]["iterations"] = n.into();
        });
    }
    let out = analyzer(&["diff", a.to_str().unwrap(), twice.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("of one circuit run 1 and 2 times (rows 1000 and 2000)"),
        "{stderr}"
    );
    assert_one_line_error(
        &[
            "diff",
            a.to_str().unwrap(),
            twice.to_str().unwrap(),
            "--fail-if",
            "allocs>+1%",
        ],
        "of one circuit run 1 and 2 times",
    );
    // Twice, and larger each time (a patch that changed the rows too): sizes.
    edit_manifest(&twice, |m| m["labels"]["rows"] = "3000".into());
    let out = analyzer(&["diff", a.to_str().unwrap(), twice.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("of circuits of different sizes (rows 1000 and 3000)"),
        "{stderr}"
    );
    // Another prover (the mirror's enforce phase is its own), or another circuit:
    // said, and a gate refuses them, whatever the rows.
    for (key, value, said) in [
        (
            "prover",
            "mirror",
            "run by different provers (reference and mirror)",
        ),
        (
            "circuit",
            "poseidon --hashes 1000",
            "of different circuits (sha256 --blocks 1 and poseidon --hashes 1000)",
        ),
    ] {
        for (dir, v) in [(&a, "reference"), (&twice, value)] {
            edit_manifest(dir, |m| {
                m["labels"]["rows"] = "1000".into();
                m["labels"]["iterations"] = "1".into();
                m["labels"]["circuit"] = "sha256 --blocks 1".into();
                m["labels"]["prover"] = "reference".into();
                if key == "prover" || v != "reference" {
                    m["labels"][key] = v.into();
                }
            });
        }
        let out = analyzer(&["diff", a.to_str().unwrap(), twice.to_str().unwrap()]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(said), "{stderr}");
        assert_one_line_error(
            &[
                "diff",
                a.to_str().unwrap(),
                twice.to_str().unwrap(),
                "--fail-if",
                "allocs>+0",
            ],
            said,
        );
    }
    for d in [a, b, twice] {
        let _ = std::fs::remove_dir_all(d);
    }
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

#[test]
fn top_of_a_count_report_says_why_it_has_no_sites() {
    let dir = count_copy(&fixture(), "count-top");
    // It cannot answer: exit 2, as `flamegraph` of it does, not an empty table.
    let out = analyzer(&["top", dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(out.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("no sites to rank: a count-mode report records no sites"),
        "{stderr}"
    );
    // The fixture itself has sites: nothing to explain.
    let out = analyzer(&["top", fixture().to_str().unwrap()]);
    assert!(!String::from_utf8_lossy(&out.stderr).contains("no sites to rank"));
    // Nor does an export: written, empty, and said to be.
    let pb = dir.join("count.pb.gz");
    let pprof = |report: &Path, phase: &[&str]| {
        let mut args = vec!["export", report.to_str().unwrap(), "--format", "pprof"];
        args.extend_from_slice(phase);
        args.extend_from_slice(&["-o", pb.to_str().unwrap()]);
        let out = analyzer(&args);
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let stderr = pprof(&dir, &[]);
    assert!(
        stderr.contains("no allocation sites to export, a count-mode report"),
        "{stderr}"
    );
    assert!(stderr.contains("the profile is empty"), "{stderr}");
    // With heap sampling, what it kept live is in the profile all the same, and the
    // note says so rather than call the profile empty.
    let sampled = count_copy(&memory_fixture(), "count-heap");
    let stderr = pprof(&sampled, &[]);
    assert!(
        stderr.contains("the profile holds only what heap sampling kept live"),
        "{stderr}"
    );
    assert!(
        std::fs::metadata(&pb).unwrap().len() > 100,
        "inuse samples written"
    );
    // Its heap samples all lie in `main`: a profile of another phase is empty.
    let stderr = pprof(&sampled, &["--phase", "build"]);
    assert!(stderr.contains("the profile is empty"), "{stderr}");
    // A sampled report without a site saw none of its allocations sampled, which is
    // not the same as none made.
    let unsampled = count_copy(&fixture(), "unsampled");
    edit_manifest(&unsampled, |m| m["mode"] = "sample:1000000".into());
    let out = analyzer(&["top", unsampled.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no allocation was sampled"), "{stderr}");
    // `info` does not speak of stacks or temporaries it never had.
    let info = analyzer(&["info", dir.to_str().unwrap()]);
    let info = String::from_utf8_lossy(&info.stdout);
    assert!(info.contains("mode      count (totals"), "{info}");
    assert!(info.contains("temporaries not counted"), "{info}");
    assert!(!info.contains("stands for"), "{info}");
    // A diff would read every figure of it as 0 (and a gate would pass): refused.
    assert_one_line_error(
        &["diff", fixture().to_str().unwrap(), dir.to_str().unwrap()],
        "was written in `count` mode, which records no sites",
    );
}

#[test]
fn answers_that_could_mislead_a_user_or_a_gate_say_so() {
    let r = fixture();
    let r = r.to_str().unwrap();
    // A run cut short passes any gate on growth: a gate refuses it; a plain diff
    // says so.
    let cut = copy_fixture("incomplete-gate");
    edit_manifest(&cut, |m| m["incomplete"] = "SIGINT".into());
    let cut = cut.to_str().unwrap();
    assert_one_line_error(
        &["diff", r, cut, "--fail-if", "allocs>+0"],
        "is incomplete (written on SIGINT)",
    );
    let out = analyzer(&["diff", r, cut]);
    assert!(out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.matches("is incomplete").count(), 1, "{stderr}");
    // So do the commands that answer from it alone.
    for command in [
        vec!["top", cut],
        vec!["cost", cut],
        vec!["categories", cut],
        vec!["peak", cut],
    ] {
        let out = analyzer(&command);
        assert!(out.status.success(), "{out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(
                "the report is incomplete (written on SIGINT): its counts cover part of the run"
            ),
            "{command:?}: {stderr}"
        );
    }
    // At the end of a stopped run, one line says what that means there.
    let out = analyzer(&["leaks", cut]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("the run was stopped (SIGINT)"), "{stderr}");
    assert!(!stderr.contains("is incomplete"), "{stderr}");

    // A failed export leaves the file it would have replaced as it was.
    let dir = Scratch::new("analyzer-keep");
    let kept = dir.join("sites.parquet");
    std::fs::write(&kept, b"an earlier export").unwrap();
    let out = analyzer(&[
        "export",
        r,
        "--format",
        "parquet",
        "--rules",
        dir.join("no-such-rules.toml").to_str().unwrap(),
        "-o",
        kept.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert_eq!(std::fs::read(&kept).unwrap(), b"an earlier export");
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        1,
        "a temporary file stayed"
    );
    // Written through a link, the link stays (and so would `/dev/null`, a FIFO):
    // only a regular file is replaced by a renamed one.
    let link = dir.join("latest.parquet");
    std::os::unix::fs::symlink(&kept, &link).unwrap();
    let out = analyzer(&[
        "export",
        r,
        "--format",
        "parquet",
        "-o",
        link.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{out:?}");
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_ne!(std::fs::read(&kept).unwrap(), b"an earlier export");
    // A file replaced keeps its permissions; one with another hard link is written
    // in place, so both names see the new output.
    use std::os::unix::fs::PermissionsExt;
    let shared = dir.join("shared.csv");
    std::fs::write(&shared, b"old").unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o640)).unwrap();
    let other_name = dir.join("other-name.csv");
    std::fs::hard_link(&shared, &other_name).unwrap();
    let private = dir.join("private.csv");
    std::fs::write(&private, b"old").unwrap();
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o600)).unwrap();
    for path in [&shared, &private] {
        let out = analyzer(&[
            "export",
            r,
            "--format",
            "folded",
            "-o",
            path.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{out:?}");
    }
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&private), 0o600);
    assert_eq!(mode(&shared), 0o640);
    assert_ne!(std::fs::read(&private).unwrap(), b"old");
    assert_eq!(
        std::fs::read(&other_name).unwrap(),
        std::fs::read(&shared).unwrap()
    );
    assert_ne!(std::fs::read(&shared).unwrap(), b"old");

    // A count report priced or put in categories: it cannot answer (exit 2), and
    // says why; no cost of 0 is claimed.
    let count = count_copy(&fixture(), "count-cost");
    for cmd in ["cost", "categories"] {
        let out = analyzer(&[cmd, count.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(2), "{out:?}");
        assert!(out.stdout.is_empty(), "{cmd}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("a count-mode report records no sites"),
            "{cmd}: {stderr}"
        );
    }

    // An option the format does not read is refused, not ignored.
    assert_one_line_error(
        &["export", r, "--format", "folded", "--rules", "x.toml"],
        "--rules names the categories of --format parquet",
    );
    assert_one_line_error(
        &["export", r, "--format", "pprof", "--by", "bytes"],
        "--by weights folded stacks",
    );

    // A negative number is a bad value, not an unknown argument.
    let out = analyzer(&["top", r, "--limit", "-1"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("invalid value '-1' for '--limit"),
        "{stderr}"
    );

    // Group shares are ratios of counts: all sites in one group make exactly 1.
    let out = analyzer(&["top", r, "--group-by", "category", "--format", "json"]);
    let groups: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let shares: Vec<f64> = groups
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["share"].as_f64().unwrap())
        .collect();
    // (One group: every site of the fixture is unmatched by the built-in rules.)
    assert_eq!(shares, [1.0], "{groups}");

    // `peak --limit 0`: no sites shown, the categories still.
    let m = memory_fixture();
    let out = analyzer(&["peak", m.to_str().unwrap(), "--limit", "0"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("other (no rule matched)"), "{text}");
    assert!(!text.contains("none of the sampled blocks"), "{text}");
    assert!(
        text.contains("1 more sites, 2.0 MiB (--limit shows more)"),
        "{text}"
    );
}

/// A copy of the fixture whose site 0 allocates `factor` times as often.
fn fixture_with_site_0_times(name: &str, factor: u64) -> Scratch {
    use polars::prelude::*;
    let dir = copy_fixture(name);
    edit_table(&dir, "sites.parquet", |mut df| {
        let ids: Vec<u64> = df
            .column("site_id")
            .unwrap()
            .u64()
            .unwrap()
            .into_no_null_iter()
            .collect();
        let counts: Vec<u64> = df
            .column("alloc_count")
            .unwrap()
            .u64()
            .unwrap()
            .into_no_null_iter()
            .zip(&ids)
            .map(|(n, &id)| if id == 0 { n * factor } else { n })
            .collect();
        df.replace("alloc_count", Column::new("alloc_count".into(), counts))
            .unwrap();
        df
    });
    dir
}

/// `analyzer flamegraph --diff BASE CHANGE EXTRA... -o SVG`.
fn diff_flamegraph(base: &Path, change: &Path, extra: &[&str], svg: &Path) -> std::process::Output {
    let mut args = vec![
        "flamegraph",
        "--diff",
        base.to_str().unwrap(),
        change.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    args.extend(["-o", svg.to_str().unwrap()]);
    analyzer(&args)
}

/// The change each frame of a differential flame graph names, from its title
/// (`f [+3 allocations, +200.0%] (9 allocations, 1.00%)`), or `None` for a frame
/// that did not change; the root (`all`) left out.
fn title_deltas(svg: &str) -> Vec<Option<String>> {
    svg.split("<title>")
        .skip(1)
        .filter_map(|t| t.split("</title>").next())
        .filter(|t| !t.starts_with("all ("))
        .map(|t| {
            let name = t.rsplit_once(" (").map_or(t, |(name, _)| name);
            name.strip_suffix(']')
                .and_then(|n| n.rsplit_once(" ["))
                .map(|(_, d)| d.to_owned())
                .filter(|d| d.starts_with(['+', '-', '~']))
        })
        .collect()
}

/// How many of `deltas` are a gain (`+`) and how many a loss (`-`).
fn gains_and_losses(deltas: &[Option<String>]) -> (usize, usize) {
    let count = |sign| {
        deltas
            .iter()
            .flatten()
            .filter(|d| d.starts_with(sign))
            .count()
    };
    (count('+'), count('-'))
}

#[test]
fn differential_flamegraph_colours_what_grew() {
    let base = fixture();
    let change = fixture_with_site_0_times("flame-diff", 3);
    let svg = change.join("diff.svg");
    let out = diff_flamegraph(&base, &change, &["--phase", "build"], &svg);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&svg).unwrap();
    let change_name = change.file_name().unwrap().to_str().unwrap();
    assert!(
        text.contains(&format!(
            "Allocations by count: {change_name} against demo-report, phase build"
        )),
        "title"
    );
    // Frame titles carry the change of the stacks through them: the phase holds
    // only site 0's stack, and each of its frames grew, not only its last
    // (inferno's own differential mode gives every frame above the last 0.00%).
    let deltas = title_deltas(&text);
    assert!(deltas.len() >= 2, "{deltas:?}");
    assert!(
        deltas
            .iter()
            .all(|d| d.as_deref() == Some("+171,428 allocations, +200.0%")),
        "{deltas:?}"
    );
    // The base's widths: growth still reads as growth, in red.
    let draw = |change: &Path, widths: &str, svg: &Path| {
        let out = diff_flamegraph(&base, change, &["--widths", widths], svg);
        assert!(out.status.success(), "{out:?}");
        std::fs::read_to_string(svg).unwrap()
    };
    // Frames drawn in a clear red (not the tint of a change of a few in millions).
    let reds = |text: &str| {
        text.split("fill=\"rgb(")
            .skip(1)
            .filter_map(|c| c.split(')').next())
            .filter(|c| {
                let rgb: Vec<u8> = c.split(',').map(|v| v.parse().unwrap()).collect();
                rgb[0] == 255 && rgb[1] < 240
            })
            .count()
    };
    let text = draw(&change, "base", &change.join("base.svg"));
    assert!(text.contains("widths: stacks of the base; red: more in the change"));
    // All phases: frames outside site 0's stack did not change.
    let deltas = title_deltas(&text);
    assert!(gains_and_losses(&deltas).0 >= 2, "{deltas:?}");
    assert!(deltas.iter().any(Option::is_none), "{deltas:?}");
    assert!(reds(&text) >= 2, "growth in red");
    // A site the change no longer has: drawn only at the base's widths.
    let gone = fixture_with_site_0_times("flame-diff-gone", 0);
    let at_change = draw(&gone, "change", &gone.join("change.svg"));
    let at_base = draw(&gone, "base", &gone.join("base.svg"));
    // The base's 91,978 allocations are all drawn only at its widths.
    let whole_base = "<title>all (91,978 allocations";
    assert!(
        !at_change.contains(whole_base),
        "the removed site is not drawn"
    );
    assert!(at_base.contains(whole_base), "the removed site is drawn");
    let deltas = title_deltas(&at_base);
    let (gains, losses) = gains_and_losses(&deltas);
    assert!(gains == 0 && losses >= 2, "as a loss: {deltas:?}");
    assert_eq!(reds(&at_base), 0, "a loss is not red");
    // --widths picks a side of --diff: without one, it is refused, not ignored.
    let out = analyzer(&[
        "flamegraph",
        base.to_str().unwrap(),
        "--widths",
        "base",
        "-o",
        change.join("one.svg").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--widths chooses a side of --diff"),
        "{out:?}"
    );
    assert!(!change.join("one.svg").exists());
    // A report against itself: no frame changed.
    let same = change.join("same.svg");
    let out = diff_flamegraph(&base, &base, &[], &same);
    assert!(out.status.success());
    let text = std::fs::read_to_string(&same).unwrap();
    let deltas = title_deltas(&text);
    assert!(
        !deltas.is_empty() && deltas.iter().all(Option::is_none),
        "{deltas:?}"
    );
    assert_eq!(reds(&text), 0);
}

#[test]
fn differential_flamegraph_of_sampled_reports_gives_the_exact_totals_too() {
    // The fixture's counts read as a sample:10 report's: the stacks drawn are
    // estimates, and the subtitle gives the totals the phases count exactly beside
    // the drawn ones.
    let r = fixture();
    let sampled = copy_fixture("flame-sampled");
    edit_manifest(&sampled, |m| {
        m["mode"] = "sample:10".into();
        m["sample_interval"] = 10.into();
    });
    let exact = |by: &str| -> u64 {
        let info: serde_json::Value = serde_json::from_slice(
            &analyzer(&["info", r.to_str().unwrap(), "--format", "json"]).stdout,
        )
        .unwrap();
        let phases = info["phases"].as_array().unwrap();
        phases
            .iter()
            .map(|p| match by {
                "count" => {
                    p["alloc_count"].as_u64().unwrap() + p["realloc_count"].as_u64().unwrap()
                }
                _ => p["bytes_requested"].as_u64().unwrap(),
            })
            .sum()
    };
    let grouped = |n: u64| {
        let digits = n.to_string();
        let mut out = String::new();
        for (i, c) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i).is_multiple_of(3) {
                out.push(',');
            }
            out.push(c);
        }
        out
    };
    for (by, unit) in [("count", "allocations"), ("bytes", "bytes")] {
        let svg = sampled.join(format!("{by}.svg"));
        let out = diff_flamegraph(&r, &sampled, &["--by", by], &svg);
        assert!(out.status.success(), "{out:?}");
        let text = std::fs::read_to_string(&svg).unwrap();
        let n = grouped(exact(by));
        assert!(
            text.contains(&format!(
                "counted exactly: {n} -&gt; {n} {unit} (unchanged)"
            )),
            "{by}: {}",
            text.lines().find(|l| l.contains("estimates")).unwrap_or("")
        );
        assert!(text.contains("; all as drawn: "), "{by}");
    }
    // Two exact reports: the drawn totals are the totals.
    let svg = sampled.join("exact.svg");
    let out = diff_flamegraph(&r, &r, &[], &svg);
    assert!(out.status.success(), "{out:?}");
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(!text.contains("counted exactly") && text.contains("; all: "));
}

#[test]
fn differential_flamegraph_of_live_bytes_colours_what_holds_more() {
    let base = memory_fixture();
    let change = copy_report(&base, "flame-diff-live");
    edit_table(&change, "heap_peak.parquet", |mut df| {
        use polars::prelude::*;
        let tripled: Vec<u64> = df
            .column("live_bytes_estimate")
            .unwrap()
            .u64()
            .unwrap()
            .into_no_null_iter()
            .enumerate()
            .map(|(i, b)| if i == 0 { b * 3 } else { b })
            .collect();
        df.replace(
            "live_bytes_estimate",
            Column::new("live_bytes_estimate".into(), tripled),
        )
        .unwrap();
        df
    });
    let svg = change.join("diff.svg");
    let draw = |a: &Path, b: &Path| diff_flamegraph(a, b, &["--by", "peak-bytes"], &svg);
    let out = draw(&base, &change);
    assert!(out.status.success(), "{out:?}");
    let text = std::fs::read_to_string(&svg).unwrap();
    let change_name = change.file_name().unwrap().to_str().unwrap();
    assert!(
        text.contains(&format!(
            "Live bytes at the kept peak (heap sampling): {change_name} against memory-report"
        )),
        "title"
    );
    let deltas = title_deltas(&text);
    let (gains, losses) = gains_and_losses(&deltas);
    assert!(gains >= 2 && losses == 0, "{deltas:?}");
    assert!(
        deltas.iter().flatten().all(|d| d.contains(" bytes, ")),
        "{deltas:?}"
    );
    // A report against itself: nothing changed.
    let out = draw(&base, &base);
    assert!(out.status.success(), "{out:?}");
    let deltas = title_deltas(&std::fs::read_to_string(&svg).unwrap());
    assert!(
        !deltas.is_empty() && deltas.iter().all(Option::is_none),
        "{deltas:?}"
    );
    // A side without heap sampling would read as all growth (or all loss): refused,
    // naming the side.
    let unsampled = copy_report(&base, "flame-diff-unsampled");
    edit_table(&unsampled, "heap_peak.parquet", |df| df.head(Some(0)));
    edit_manifest(&unsampled, |m| {
        m["heap_interval"] = 0.into();
        for t in m["tables"].as_array_mut().unwrap() {
            if t["file"] == "heap_peak.parquet" {
                t["rows"] = 0.into();
            }
        }
    });
    for (a, b, side) in [
        (unsampled.path(), base.as_path(), "the base"),
        (base.as_path(), unsampled.path(), "the change"),
    ] {
        let out = draw(a, b);
        assert_eq!(out.status.code(), Some(2), "{out:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(&format!(
                "{side} ({}) has no live bytes",
                unsampled.display()
            )),
            "{out:?}"
        );
    }
    // Sampled, and nothing live: at the change's widths nothing to draw, and the
    // base's widths are offered; with nothing live on either side, that is the
    // answer, drawn as for one report.
    let empty = copy_report(&base, "flame-diff-nothing-live");
    edit_table(&empty, "heap_peak.parquet", |df| df.head(Some(0)));
    edit_manifest(&empty, |m| {
        for t in m["tables"].as_array_mut().unwrap() {
            if t["file"] == "heap_peak.parquet" {
                t["rows"] = 0.into();
            }
        }
    });
    let out = draw(&base, &empty);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("nothing to draw at its widths (`--widths base` draws the base's stacks; `peak --base` lists"),
        "{stderr}"
    );
    let out = draw(&empty, &empty);
    assert!(out.status.success(), "{out:?}");
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.contains("no sampled block was live then"), "{text}");
    // Without heap sampling on either side there is nothing to draw: an error.
    assert_one_line_error(
        &[
            "flamegraph",
            "--diff",
            fixture().to_str().unwrap(),
            fixture().to_str().unwrap(),
            "--by",
            "peak-bytes",
            "-o",
            svg.to_str().unwrap(),
        ],
        "has no live bytes to compare",
    );
}

#[test]
fn flamegraph_of_temporaries_folds_allocator_frames() {
    let r = fixture();
    let dir = copy_fixture("flame-temps");
    let svg = dir.join("t.svg");
    let out = analyzer(&[
        "flamegraph",
        r.to_str().unwrap(),
        "--by",
        "temporaries",
        "--phase",
        "build",
        "-o",
        svg.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.contains("Temporaries: demo-report, phase build"));
    assert!(text.contains(" temporaries, "));
    // Allocator frames are folded into the first frame outside them (the demo's
    // `build`, which collects into vectors).
    assert!(text.contains("<title>build ("));
    assert!(!text.contains("<title>alloc_impl ("));
    // Folded stacks for other tools keep them.
    let folded = analyzer(&[
        "export",
        r.to_str().unwrap(),
        "--format",
        "folded",
        "--by",
        "temporaries",
    ]);
    assert!(
        String::from_utf8(folded.stdout)
            .unwrap()
            .contains(";alloc_impl;")
    );
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

#[test]
fn tighten_lowers_limits_with_headroom_keeps_the_file_and_never_raises() {
    let r = fixture();
    // The fixture's build phase: 85 726 allocations, 2 793 080 bytes, 80 357
    // temporaries, 12 allocations at demo.rs:21.
    let b = budget_file(
        "tighten",
        "# ours\n[phase.build]\nallocs = 200_000   # report: 1\nbytes = \"2.75MiB\"\n\
         temporaries = 80_000\nsite.\"demo.rs:21\".allocs = 13\n",
    );
    let args = [
        "budget",
        r.to_str().unwrap(),
        "--tighten",
        b.to_str().unwrap(),
    ];
    let out = analyzer(&args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    // allocs comes down to 5 % over; bytes (2.75 MiB, 3 % over) and the site (13,
    // 8 % over, within 1.5 margins) stay; temporaries are over and stay, named.
    assert_eq!(
        std::fs::read_to_string(&b).unwrap(),
        "# ours\n[phase.build]\nallocs = 90_013   # report: 85726\nbytes = \"2.75MiB\"\n\
         temporaries = 80_000\nsite.\"demo.rs:21\".allocs = 13\n"
    );
    assert!(
        stdout.contains("phase build: allocs") && stdout.contains("200000"),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "1 limit lowered, 2 already within the margin, 1 over budget and left as they are"
        ),
        "{stdout}"
    );
    assert!(
        stderr.contains("over budget, left as it is: phase build: temporaries 80357 > 80000"),
        "{stderr}"
    );
    // Again: nothing to lower, the file as it was.
    let before = std::fs::read_to_string(&b).unwrap();
    let out = analyzer(&args);
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("0 limits lowered"));
    assert_eq!(std::fs::read_to_string(&b).unwrap(), before);
    // What check refuses, tighten refuses: a phase the report lacks.
    let bad = budget_file("tighten-bad", "[phase.nope]\nallocs = 5\n");
    let out = analyzer(&[
        "budget",
        r.to_str().unwrap(),
        "--tighten",
        bad.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("phase nope is not in the report"));
}

#[test]
fn a_drafted_budget_passes_its_report_and_catches_growth() {
    let r = fixture();
    let dir = Scratch::new("analyzer-draft");
    let b = dir.join("budget.toml");
    let draft = |report: &Path, extra: &[&str]| -> String {
        let mut args = vec![
            "budget",
            report.to_str().unwrap(),
            "-o",
            b.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let out = analyzer(&args);
        assert!(out.status.success(), "{out:?}");
        std::fs::read_to_string(&b).unwrap()
    };
    let check = |report: &Path| {
        analyzer(&[
            "check",
            report.to_str().unwrap(),
            "--budget",
            b.to_str().unwrap(),
        ])
    };
    let text = draft(&r, &[]);
    // The fixture's build phase, 85 726 allocations and reallocs: 5 % above, rounded up.
    assert!(
        text.contains("[phase.build]\nallocs = 90_013   # report: 85726\n"),
        "{text}"
    );
    assert!(text.contains("temporaries = "), "{text}");
    assert!(text.contains("The report has no labels"), "{text}");
    assert!(text.contains("\nmode = \"sites\"\n"), "{text}");
    // `main`'s 2 allocations are too few to hold to a margin; the fixture's run peak
    // of 0 would be breached by anything.
    assert!(
        text.contains("# No limits on phase main: fewer than 100 allocations.")
            && !text.contains("[phase.main]"),
        "{text}"
    );
    assert!(!text.contains("\npeak_live_bytes ="), "{text}");
    assert!(!text.contains("site."), "no site limits: {text}");
    assert!(!text.contains("other (no rule matched)"), "{text}");
    let out = check(&r);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    // With no margin every limit is the report's own figure, and still passes.
    draft(&r, &["--margin", "0", "--memory-margin", "0%"]);
    assert_eq!(check(&r).status.code(), Some(0));
    // A margin under one per cent, said as given.
    let text = draft(&r, &["--margin", "0.5%"]);
    assert!(text.contains("maximum, 0.5 % above"), "{text}");
    // A build that allocates more in a phase breaks it.
    let grown = copy_fixture("draft-grown");
    edit_table(&grown, "phases.parquet", |mut df| {
        use polars::prelude::*;
        let doubled: Vec<u64> = df
            .column("alloc_count")
            .unwrap()
            .u64()
            .unwrap()
            .into_no_null_iter()
            .map(|n| n * 2)
            .collect();
        df.replace("alloc_count", Column::new("alloc_count".into(), doubled))
            .unwrap();
        df
    });
    let out = check(&grown);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("phase build: allocs"));
    // The workload's labels tie the budget to it, and rows give a per-row limit.
    let labelled = copy_fixture("draft-labels");
    edit_manifest(&labelled, |m| {
        m["labels"] = serde_json::json!({
            "circuit": "demo \"quoted\"", "prover": "reference", "rows": "1000",
            "iterations": "1", "variant": "baseline", "input": "orders-200k"
        });
        m["totals"]["max_rss_bytes"] = 1_000_000.into();
    });
    let text = draft(&labelled, &[]);
    assert!(
        text.contains(
            "[labels]\ncircuit = 'demo \"quoted\"'\ninput = \"orders-200k\"\niterations = \"1\"\nprover = \"reference\"\n"
        ),
        "{text}"
    );
    // What changes between builds of one workload does not tie the budget to one.
    assert!(
        !text.contains("rows =") && !text.contains("variant ="),
        "{text}"
    );
    // A program that labels its input's size `rows` learns how to hold it.
    assert!(
        text.contains("# The report's rows (1000) are not required"),
        "{text}"
    );
    // Outside count mode the peak RSS holds the tracer's own per-thread memory: its
    // limit is there, commented out.
    assert!(
        text.contains("\n# peak_rss_bytes = 1_150_000   # report: 1000000\n"),
        "{text}"
    );
    assert!(
        text.contains("allocs_per_row = 90.013   # report: 85.726"),
        "{text}"
    );
    assert_eq!(check(&labelled).status.code(), Some(0));
    // Another workload, or another number of iterations, is not judged by it.
    edit_manifest(&labelled, |m| m["labels"]["iterations"] = "2".into());
    assert_eq!(check(&labelled).status.code(), Some(2));
    // Categories: held by their allocations (a share, which rises when others
    // shrink, only commented out), from rules that match the fixture's sites.
    let rules = dir.join("rules.toml");
    std::fs::write(
        &rules,
        "[[category]]\nname = \"builders\"\nframes = [{ function = \"build\", file = \"demo.rs\" }]\n",
    )
    .unwrap();
    let with_rules = ["--rules", rules.to_str().unwrap()];
    let text = draft(&r, &with_rules);
    assert!(
        text.contains("[phase.build.category.builders]\nallocs = "),
        "{text}"
    );
    // The check command it gives names the rules its categories need.
    assert!(
        text.contains(&format!("--budget THIS_FILE --rules {}\n", rules.display())),
        "{text}"
    );
    assert!(text.contains("\n# share = "), "{text}");
    let out = analyzer(&[
        "check",
        r.to_str().unwrap(),
        "--budget",
        b.to_str().unwrap(),
        "--rules",
        rules.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("category.\"builders\".allocs"));
    // Sampled counts: no temporaries or categories (estimates), and the header says so.
    let sampled = copy_fixture("draft-sampled");
    edit_manifest(&sampled, |m| m["mode"] = "sample:10".into());
    let text = draft(&sampled, &with_rules);
    assert!(
        !text.contains("temporaries =") && !text.contains("[phase.build.category"),
        "{text}"
    );
    assert!(
        text.contains("# No category limits: sample:10 mode estimates"),
        "{text}"
    );
    // A count report: no temporaries, no categories, and the header says why. A
    // budget drafted in another mode does not judge it.
    // The mode is named first, before the temporaries a sites budget holds.
    let count = count_copy(&fixture(), "draft-count");
    edit_manifest(&count, |m| m["totals"]["max_rss_bytes"] = 1_000_000.into());
    draft(&r, &[]);
    let out = check(&count);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("traced in sites mode, and ")
            && String::from_utf8_lossy(&out.stderr).contains("was traced in count mode"),
        "{out:?}"
    );
    let text = draft(&count, &with_rules);
    // In count mode the peak RSS is the program's: its limit holds.
    assert!(
        text.contains("\npeak_rss_bytes = 1_150_000   # report: 1000000\n"),
        "{text}"
    );
    assert!(!text.contains("temporaries ="), "{text}");
    assert!(!text.contains("[phase.build.category"), "{text}");
    assert!(text.contains("No temporaries limits: count mode"), "{text}");
    assert!(
        text.contains("No category limits: count mode records no sites"),
        "{text}"
    );
    assert_eq!(check(&count).status.code(), Some(0));
    for (margin, says) in [
        ("-5%", "-5%"),
        ("5%%", "5%%"),
        ("2000%", "not between 0 and 1000 %"),
        // A fraction, which would be taken in per cent.
        (
            "0.05",
            "would be a margin of 0.05 %: write 5% for the fraction 0.05",
        ),
    ] {
        assert_one_line_error(&["budget", r.to_str().unwrap(), "--margin", margin], says);
    }
}

#[test]
fn check_of_a_sampled_report_names_its_estimates() {
    let b = budget_file("sampled", FIXTURE_BUILD_BUDGET);
    let sampled = copy_fixture("check-sampled");
    edit_manifest(&sampled, |m| m["mode"] = "sample:10".into());
    let out = analyzer(&[
        "check",
        sampled.to_str().unwrap(),
        "--budget",
        b.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // A phase's temporaries are counted from the sampled stacks, as its sites are.
    assert!(
        stderr.contains("phase totals are exact but for temporaries"),
        "{stderr}"
    );
}

#[test]
fn check_within_budget_exits_0_with_every_limit_and_its_headroom() {
    let b = budget_file("pass", FIXTURE_BUILD_BUDGET);
    let r = fixture();
    let out = analyzer(&[
        "check",
        r.to_str().unwrap(),
        "--budget",
        b.to_str().unwrap(),
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stderr.is_empty());
    // Every limit is the fixture's own figure (the peak's and the zero share's aside).
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "limit                                                         report         budget    used\n\
         run: peak_live_bytes                                               0        1000000    0.0%\n\
         phase build: allocs                                            85726          85726  100.0%\n\
         phase build: bytes                                           2793080        2793080  100.0%\n\
         phase build: temporaries                                       80357          80357  100.0%\n\
         phase build: category.\"density trackers\".share                     0              0       -\n\
         phase build: category.\"other (no rule matched)\".share              1              1  100.0%\n\
         phase build: site.\"demo.rs:21\".allocs                             12             12  100.0%\n\
         7 limits checked, all within budget\n"
    );
    // The same limits for programs, the over column false throughout.
    let out = analyzer(&[
        "check",
        r.to_str().unwrap(),
        "--budget",
        b.to_str().unwrap(),
        "--format",
        "csv",
    ]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "phase,limit,category,site,measure,found,budget,over\n\
         ,peak_live_bytes,,,peak_live_bytes,0,1000000,false\n\
         build,allocs,,,allocs,85726,85726,false\n\
         build,bytes,,,bytes,2793080,2793080,false\n\
         build,temporaries,,,temporaries,80357,80357,false\n\
         build,\"category.\"\"density trackers\"\".share\",density trackers,,share,0,0,false\n\
         build,\"category.\"\"other (no rule matched)\"\".share\",other (no rule matched),,share,1,1,false\n\
         build,\"site.\"\"demo.rs:21\"\".allocs\",,demo.rs:21,allocs,12,12,false\n"
    );
}

#[test]
fn check_over_budget_exits_1_with_one_line_per_breach() {
    // Each limit one below the figure (the share: 0.9), so each is breached.
    let text = FIXTURE_BUILD_BUDGET
        .replace("85_726", "85_725")
        .replace("2_793_080", "2_793_079")
        .replace("80_357", "80_356")
        .replace("share = 1.0", "share = 0.9")
        .replace("allocs = 12", "allocs = 11");
    let b = budget_file("breach", &text);
    let r = fixture();
    let out = analyzer(&[
        "check",
        r.to_str().unwrap(),
        "--budget",
        b.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(1));
    // Every limit on standard output, the breaches marked.
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let over: Vec<(&str, bool)> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["limit"].as_str().unwrap(), r["over"].as_bool().unwrap()))
        .collect();
    // And what each limits, apart, for a program to read.
    let parts: Vec<(&str, &str, &str)> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let s = |k: &str| r[k].as_str().unwrap_or("-");
            (s("category"), s("site"), s("measure"))
        })
        .collect();
    assert_eq!(
        parts,
        [
            ("-", "-", "peak_live_bytes"),
            ("-", "-", "allocs"),
            ("-", "-", "bytes"),
            ("-", "-", "temporaries"),
            ("density trackers", "-", "share"),
            ("other (no rule matched)", "-", "share"),
            ("-", "demo.rs:21", "allocs"),
        ]
    );
    assert_eq!(
        over,
        [
            ("peak_live_bytes", false),
            ("allocs", true),
            ("bytes", true),
            ("temporaries", true),
            ("category.\"density trackers\".share", false),
            ("category.\"other (no rule matched)\".share", true),
            ("site.\"demo.rs:21\".allocs", true),
        ]
    );
    // And one line each on standard error, after the data; then what to run to see
    // where they came from, and the limits that would accept them.
    let err = String::from_utf8(out.stderr).unwrap();
    let (breaches, hints) = err.split_at(err.find("analyzer: to see").expect(&err));
    assert_eq!(
        breaches,
        "analyzer: over budget: phase build: allocs 85726 > 85725 (+0.0%)\n\
         analyzer: over budget: phase build: bytes 2793080 > 2793079 (+0.0%)\n\
         analyzer: over budget: phase build: temporaries 80357 > 80356 (+0.0%)\n\
         analyzer: over budget: phase build: category.\"other (no rule matched)\".share 1 > 0.900 (+11.1%)\n\
         analyzer: over budget: phase build: site.\"demo.rs:21\".allocs 12 > 11 (+9.1%)\n"
    );
    let hints: Vec<&str> = hints.lines().collect();
    assert_eq!(hints.len(), 2, "{hints:?}");
    // A budget written by hand names no base report.
    assert!(
        hints[0].ends_with(&format!(
            "analyzer diff BASE {} --phase build, BASE a report of the build the budget \
             was made for",
            r.display()
        )),
        "{hints:?}"
    );
    assert!(
        hints[1].contains("allocs to 90_013")
            && hints[1].contains("share to 1.000")
            && hints[1].ends_with("site.\"demo.rs:21\".allocs to 13"),
        "{hints:?}"
    );
    // The table marks them and counts them.
    let out = analyzer(&[
        "check",
        r.to_str().unwrap(),
        "--budget",
        b.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let table = String::from_utf8(out.stdout).unwrap();
    let marked: Vec<&str> = table
        .lines()
        .filter(|l| l.ends_with("  over budget"))
        .map(|l| l.split("  ").next().unwrap())
        .collect();
    assert_eq!(
        marked,
        [
            "phase build: allocs",
            "phase build: bytes",
            "phase build: temporaries",
            "phase build: category.\"other (no rule matched)\".share",
            "phase build: site.\"demo.rs:21\".allocs",
        ]
    );
    assert!(
        table.contains("phase build: allocs                                            85726          85725  100.0%  over budget\n")
    );
    assert!(
        table.ends_with("\n7 limits checked, 5 over budget\n"),
        "{table}"
    );
}

#[test]
fn bad_budget_files_exit_2_with_one_line() {
    let r = fixture();
    let r = r.to_str().unwrap();
    for (name, text, expected) in [
        (
            "unknown-field",
            "[phase.build]\nalocs = 1\n",
            "line 2: unknown field `alocs`",
        ),
        (
            "not-toml",
            "[phase.build\n",
            "not-toml.toml: line 1: invalid table header",
        ),
        (
            "share",
            "[phase.build]\ncategory.x.share = 2\n",
            "not between 0 and 1",
        ),
        (
            "no-phase",
            "[phase.synthesise]\nallocs = 1\n",
            "phase synthesise is not in the report",
        ),
        (
            "no-limit",
            "[phase.build]\n",
            "it sets no limit, so every report would pass",
        ),
        (
            "nan",
            "[phase.build]\nallocs_per_row = nan\n",
            "allocs_per_row NaN is not a number of allocations",
        ),
        (
            "no-category",
            "[phase.build]\ncategory.\"nope\".share = 0.5\n",
            "category \"nope\" is not one of the rules' categories",
        ),
        (
            "no-site",
            "[phase.build]\nsite.\"buidl\".allocs = 100\n",
            "site \"buidl\" is in no site's name",
        ),
    ] {
        let b = budget_file(name, text);
        assert_one_line_error(&["check", r, "--budget", b.to_str().unwrap()], expected);
    }
    assert_one_line_error(
        &["check", r, "--budget", "/no/such/budget.toml"],
        "/no/such/budget.toml",
    );
    // Reports whose figures would pass whatever the limits: a run cut short, and
    // category and site limits over a `count` report (no sites recorded).
    let manifest = std::fs::read_to_string(fixture().join("manifest.json")).unwrap();
    let pass = budget_file("pass-again", FIXTURE_BUILD_BUDGET);
    for (name, edit, expected) in [
        (
            "incomplete",
            (
                "\"mode\": \"sites\",",
                "\"mode\": \"sites\",\n  \"incomplete\": \"SIGINT\",",
            ),
            "is incomplete (written on SIGINT)",
        ),
        (
            "count-mode",
            ("\"mode\": \"sites\",", "\"mode\": \"count\","),
            "records none (mode count when written",
        ),
    ] {
        let dir = copy_fixture(name);
        assert!(manifest.contains(edit.0));
        std::fs::write(
            dir.join("manifest.json"),
            manifest.replacen(edit.0, edit.1, 1),
        )
        .unwrap();
        assert_one_line_error(
            &[
                "check",
                dir.to_str().unwrap(),
                "--budget",
                pass.to_str().unwrap(),
            ],
            expected,
        );
    }
}

#[test]
fn gates_and_budgets_refuse_a_report_that_recorded_nothing() {
    use polars::prelude::*;
    // A report written with the tracer off (`Session::finish`, `write_report`): zeros.
    let off = copy_fixture("nothing-recorded");
    edit_manifest(&off, |m| m["mode"] = "off".into());
    edit_table(&off, "phases.parquet", |mut df| {
        for column in ["alloc_count", "realloc_count"] {
            let zeros = vec![0u64; df.height()];
            df.replace(column, Column::new(column.into(), zeros))
                .unwrap();
        }
        df
    });
    let off = off.to_str().unwrap();
    let out = analyzer(&["diff", off, off, "--fail-if", "allocs>+0"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("records no allocation: the tracer was off"),
        "{stderr}"
    );
    let b = budget_file("nothing", "[phase.build]\nallocs = 100_000\n");
    let out = analyzer(&["check", off, "--budget", b.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("records no allocation"));
}

#[test]
fn diff_fail_if_exits_1_with_one_line_per_condition_that_holds() {
    let r = fixture();
    let r = r.to_str().unwrap();
    // A report against itself grows by nothing: only conditions below zero hold.
    let out = analyzer(&[
        "diff",
        r,
        r,
        "--fail-if",
        "allocs>+0",
        "--fail-if",
        "cost>+5ms",
    ]);
    assert_eq!(out.status.code(), Some(0));
    // Each gate that passed, with its figures, for the log.
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "analyzer: within: allocs>+0: 91978 -> 91978 (+0, +0.0%)\n\
         analyzer: within: cost>+5ms: 1.087 ms -> 1.087 ms (+0.000 ms, +0.0%)\n"
    );
    let out = analyzer(&[
        "diff",
        r,
        r,
        "--format",
        "csv",
        "--fail-if",
        "allocs>-1%",
        "--fail-if",
        "bytes>+0",
        "--fail-if",
        "temporaries>+0",
        "--fail-if",
        "temporaries>-1",
        "--fail-if",
        "cost>-1ns",
    ]);
    assert_eq!(out.status.code(), Some(1));
    // The diff itself still goes to standard output.
    assert!(!out.stdout.is_empty());
    assert_eq!(
        String::from_utf8(out.stderr).unwrap(),
        "analyzer: within: bytes>+0: 3.0 MiB -> 3.0 MiB (+0 B, +0.0%)\n\
         analyzer: within: temporaries>+0: 86607 -> 86607 (+0, +0.0%)\n\
         analyzer: over budget: allocs>-1%: 91978 -> 91978 (+0, +0.0%)\n\
         analyzer: over budget: temporaries>-1: 86607 -> 86607 (+0, +0.0%)\n\
         analyzer: over budget: cost>-1ns: 1.087 ms -> 1.087 ms (+0.000 ms, +0.0%)\n"
    );
    assert_one_line_error(
        &["diff", r, r, "--fail-if", "allocs>+1ms"],
        "--fail-if allocs>+1ms",
    );
    assert_one_line_error(
        &["diff", r, r, "--fail-if", "walltime>+1%"],
        "the metric is one of",
    );
}

/// A report against itself: the same sites priced and summed in the same order on
/// both sides, so the predicted change is exactly zero and `cost>+0s` never holds,
/// in every process (each has its own hash seeds; sums in hash order differed in
/// their last bits from one process to the next, and the gate failed at random).
#[test]
fn a_report_against_itself_predicts_exactly_no_change() {
    let r = memory_fixture();
    let r = r.to_str().unwrap();
    for _ in 0..8 {
        let out = analyzer(&["diff", r, r, "--format", "json", "--fail-if", "cost>+0s"]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let d: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(d["predicted_change_s"], 0.0, "{d}");
        assert_eq!(d["base"]["cost_s"], d["change"]["cost_s"]);
    }
}

/// `allocs_per_row` divides by the report's `rows` label: within and over budget on a
/// copy of the fixture labelled with 85 726 / 4 rows, and a bad budget (exit 2) on a
/// report without the label.
#[test]
fn check_allocs_per_row_needs_the_rows_label() {
    let dir = copy_fixture("rows");
    let manifest = dir.join("manifest.json");
    let mut m: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&manifest).unwrap()).unwrap();
    // 85 726 allocations in `build` over 21 431.5 rows: 4.0 a row (21 431 makes it just over).
    m["labels"] = serde_json::json!({ "rows": "21431" });
    std::fs::write(&manifest, serde_json::to_vec(&m).unwrap()).unwrap();
    let check = |report: &Path, limit: &str| {
        let b = budget_file(
            &format!("rows-{limit}"),
            &format!("[phase.build]\nallocs_per_row = {limit}\n"),
        );
        analyzer(&[
            "check",
            report.to_str().unwrap(),
            "--budget",
            b.to_str().unwrap(),
        ])
    };
    let out = check(&dir, "4.001");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = check(&dir, "4.0");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.starts_with("analyzer: over budget: phase build: allocs_per_row 4.000"),
        "{err}"
    );
    let out = check(&fixture(), "4.0");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("no `rows` label") && err.lines().count() == 1,
        "{err}"
    );
}

#[test]
fn example_budget_parses() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/budget.example.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let b = analyzer::budget::parse(&text, &path).unwrap();
    assert!(b.peak_live_bytes.is_some());
    let synthesize = &b.phase["synthesize"];
    assert!(synthesize.allocs.is_some() && !synthesize.site.is_empty());
    // Its categories are the built-in rules'.
    let rules = analyzer::categories::default_rules();
    for name in b.phase.values().flat_map(|p| p.category.keys()) {
        assert!(rules.iter().any(|c| &c.name == name), "{name}");
    }
}

#[test]
fn calibrate_formats_as_the_other_commands_do() {
    let dir = Scratch::new("analyzer-calibrate");
    let stored = dir.join("calibration.json");
    let out = analyzer(&[
        "calibrate",
        "--quick",
        "--format",
        "json",
        "-o",
        stored.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{out:?}");
    let printed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let kept: serde_json::Value = serde_json::from_slice(&std::fs::read(&stored).unwrap()).unwrap();
    assert_eq!(printed, kept);
    // The table by default.
    let out = analyzer(&["calibrate", "--quick", "-o", stored.to_str().unwrap()]);
    assert!(out.status.success(), "{out:?}");
    assert!(serde_json::from_slice::<serde_json::Value>(&out.stdout).is_err());
}

#[test]
fn diff_notes_runs_at_different_speeds() {
    // The same run, as if twice as slow: its lifetimes (and so its prices) are not
    // comparable beyond a few tenths of a per cent, which the diff says.
    let r = fixture();
    let slow = copy_fixture("slow");
    edit_manifest(&slow, |m| {
        let d = m["duration_s"].as_f64().unwrap();
        m["duration_s"] = (2.0 * d).into();
    });
    let out = analyzer(&["diff", r.to_str().unwrap(), slow.to_str().unwrap()]);
    assert!(out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("the runs went at different speeds"),
        "{stderr}"
    );
    let out = analyzer(&["diff", r.to_str().unwrap(), r.to_str().unwrap()]);
    assert!(!String::from_utf8_lossy(&out.stderr).contains("different speeds"));
    // Count reports, compared by their totals, have no costs to warn of.
    let (count, slow_count) = (
        count_copy(&r, "speed-count"),
        count_copy(&slow, "speed-slow-count"),
    );
    let out = analyzer(&[
        "diff",
        count.to_str().unwrap(),
        slow_count.to_str().unwrap(),
        "--fail-if",
        "allocs>+1%",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("a count report"), "{stderr}");
    assert!(!stderr.contains("different speeds"), "{stderr}");
    for dir in [slow, count, slow_count] {
        let _ = std::fs::remove_dir_all(dir);
    }
}

#[test]
fn gates_judge_what_they_can_and_say_what_they_cannot() {
    let r = fixture();
    let r = r.to_str().unwrap();
    // A reader that leaves early (`| head`) does not hide a breach: it still goes to
    // standard error, and the exit status is 1.
    let over = budget_file("reader-left", "[phase.build]\nallocs = 1\n");
    for args in [
        vec!["check", r, "--budget", over.to_str().unwrap()],
        vec!["diff", r, r, "--fail-if", "allocs>-1", "--limit", "1000"],
    ] {
        let (code, stderr) = with_readers_gone(&args, false);
        assert_eq!(code, Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains("over budget"), "{args:?}: {stderr}");
        // Nor does one reading both (`2>&1 | head -1`): both pipes closed, exit 1.
        assert_eq!(with_readers_gone(&args, true).0, Some(1), "{args:?}");
    }

    // The conditions that held are in the JSON too, for programs.
    let out = analyzer(&[
        "diff",
        r,
        r,
        "--format",
        "json",
        "--fail-if",
        "allocs>-1",
        "--fail-if",
        "bytes>+0",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let d: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let held = d["fail_if"].as_array().unwrap();
    assert_eq!(held.len(), 1, "{d}");
    assert_eq!(held[0]["condition"], "allocs>-1");
    assert_eq!(held[0]["base"], held[0]["change"]);
    let out = analyzer(&["diff", r, r, "--format", "json"]);
    let d: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(d["fail_if"], serde_json::json!([]));

    // Gates compare like with like: another mode is refused for figures the mode
    // changes (temporaries, cost, resident memory, peaks, which move with thread
    // timing) ...
    let sampled = copy_fixture("gate-sampled");
    edit_manifest(&sampled, |m| {
        m["mode"] = "sample:10".into();
        m["sample_interval"] = 10.into();
    });
    for gate in ["temporaries>+0", "rss>+5%", "peak>+0"] {
        assert_one_line_error(
            &["diff", r, sampled.to_str().unwrap(), "--fail-if", gate],
            "different modes (sites and sample:10)",
        );
    }
    // ... not for allocations and bytes, counted exactly in every mode: the totals
    // compared are the exact ones (the same here), not the sampled sites' estimates.
    let out = analyzer(&[
        "diff",
        r,
        sampled.to_str().unwrap(),
        "--fail-if",
        "allocs>+0",
        "--fail-if",
        "bytes>+0",
        "--format",
        "json",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let d: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(d["base"]["alloc_count"], d["change"]["alloc_count"]);
    // A report that counted allocations but holds no sites (its mode switched to
    // `off` before it was written) is refused, not read as no allocations.
    let off = count_copy(&fixture(), "gate-off");
    edit_manifest(&off, |m| m["mode"] = "off".into());
    assert_one_line_error(
        &["diff", r, off.to_str().unwrap()],
        "records allocations but no sites",
    );
    // So does check, for limits the sites answer.
    let shares = budget_file(
        "off-shares",
        "[phase.build]\ncategory.\"other (no rule matched)\".share = 0.01\n",
    );
    assert_one_line_error(
        &[
            "check",
            off.to_str().unwrap(),
            "--budget",
            shares.to_str().unwrap(),
        ],
        "records none (mode off when written",
    );
    // `count` mode finds no temporaries: a limit on them is refused.
    let count = count_copy(&fixture(), "gate-count-temporaries");
    let temporaries = budget_file("count-temporaries", "[phase.build]\ntemporaries = 10\n");
    assert_one_line_error(
        &[
            "check",
            count.to_str().unwrap(),
            "--budget",
            temporaries.to_str().unwrap(),
        ],
        "temporaries limits need temporaries",
    );
}

#[test]
fn stacks_cut_short_are_said_wherever_sites_are_judged() {
    // As if built without frame pointers: most stacks end early.
    let cut = copy_fixture("cut-stacks");
    edit_manifest(&cut, |m| {
        let all = m["totals"]["alloc_count"].as_u64().unwrap();
        m["dropped"]["stacks_ending_early_alloc_count"] = all.into();
    });
    let c = cut.to_str().unwrap();
    let r = fixture();
    let svg = Scratch::new("analyzer-cut").holding("graph.svg");
    for args in [
        vec!["categories", c],
        vec!["cost", c],
        vec!["diff", r.to_str().unwrap(), c],
        vec!["info", c],
        vec!["flamegraph", c, "-o", svg.to_str().unwrap()],
    ] {
        let out = analyzer(&args);
        assert!(out.status.success(), "{args:?}: {out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("force-frame-pointers"),
            "{args:?}: {stderr}"
        );
    }
    // A budget on categories or sites cannot judge such a report.
    let b = budget_file(
        "cut-stacks",
        "[phase.build]\ncategory.\"other (no rule matched)\".share = 1.0\n",
    );
    assert_one_line_error(
        &["check", c, "--budget", b.to_str().unwrap()],
        "category and site limits need whole stacks",
    );
    // Limits on counts judge it, and the log still says its stacks are cut short.
    let b = budget_file("cut-stacks-counts", "[phase.build]\nallocs = 100_000\n");
    let out = analyzer(&["check", c, "--budget", b.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("call stacks that end before main"),
        "{out:?}"
    );
    let _ = std::fs::remove_file(svg);
}

#[test]
fn a_report_over_another_allocator_names_it_and_its_prices_say_whose_they_are() {
    let dir = copy_fixture("system-allocator");
    edit_manifest(&dir, |m| m["allocator"] = "system".into());
    let d = dir.to_str().unwrap();
    let out = analyzer(&["info", d]);
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("\nallocator system "));
    let out = analyzer(&["cost", d]);
    assert!(out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("ran over system: its prices are"),
        "{stderr}"
    );
    // Over jemalloc, as the calibration: no word.
    edit_manifest(&dir, |m| m["allocator"] = "jemalloc".into());
    let out = analyzer(&["cost", d]);
    assert!(out.status.success(), "{out:?}");
    assert!(!String::from_utf8_lossy(&out.stderr).contains("ran over"));
}

#[test]
fn a_peak_kept_before_heap_sampling_stopped_is_still_shown() {
    // The program switched to `off` before writing the report: the manifest's
    // interval is 0, but the kept peak and its estimates are there.
    let dir = Scratch::new("analyzer-stopped-heap");
    for e in std::fs::read_dir(memory_fixture()).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), dir.join(e.file_name())).unwrap();
    }
    edit_manifest(&dir, |m| m["heap_interval"] = 0.into());
    let out = analyzer(&["peak", dir.to_str().unwrap()]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("stopped before the report was written"),
        "{text}"
    );
    assert!(text.contains("lookup_table (demo.rs:32)"), "{text}");
    assert!(!text.contains("was off in this run"), "{text}");
}

#[test]
fn a_gate_on_counts_needs_no_calibration() {
    // A fresh CI runner: no calibration stored. A gate on counts alone diffs unpriced
    // rather than measure one (15 s) and write it.
    let home = Scratch::new("analyzer-no-cal");
    let r = fixture();
    let r = r.to_str().unwrap();
    let out = analyzer_at_home(
        &[
            "diff",
            r,
            r,
            "--fail-if",
            "allocs>+0",
            "--fail-if",
            "bytes>+1%",
        ],
        &home,
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("the diff is not priced"), "{stderr}");
    assert_eq!(
        std::fs::read_dir(&home).unwrap().count(),
        0,
        "nothing written"
    );
}

#[test]
fn count_reports_are_gated_on_their_totals() {
    // Count mode costs 1 % and its totals are exact: gates on allocations, bytes or
    // the peak compare two count reports; anything that needs sites is refused.
    let count = count_copy(&fixture(), "gated-count");
    let c = count.to_str().unwrap();
    // A passing gate exits 0 even when both its outputs are pipes whose reader left
    // (`2>&1 | head`): its note on count reports, written first, had panicked (101).
    let passing = ["diff", c, c, "--fail-if", "allocs>+0"];
    assert_eq!(with_readers_gone(&passing, true).0, Some(0));
    let out = analyzer(&[
        "diff",
        c,
        c,
        "--fail-if",
        "allocs>-1",
        "--fail-if",
        "peak>+0",
    ]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    assert!(
        stdout.starts_with("phase (all): base 91978 allocs"),
        "{stdout}"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("over budget: allocs>-1: 91978 -> 91978"),
        "{stderr}"
    );
    assert!(!stderr.contains("over budget: peak>+0"), "{stderr}");
    // Each report's peak is exact to within 1 MiB (four threads): a gate that allows
    // no growth is decided by where their publishing fell, and says so.
    assert!(
        stderr.contains(
            "within: peak>+0: 0 B -> 0 B (+0 B; the peaks are exact to within 2.0 MiB together)"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("peak>+0: each run's peak is exact only to within"),
        "{stderr}"
    );
    for gate in ["temporaries>+0", "cost>+1ms"] {
        assert_one_line_error(
            &["diff", c, c, "--fail-if", "allocs>+0", "--fail-if", gate],
            "was written in `count` mode",
        );
    }
    assert_one_line_error(&["diff", c, c], "was written in `count` mode");
    // A count report against one of another mode: allocations and bytes, counted
    // exactly in every mode, are compared as totals (a count baseline kept in CI, a
    // change traced in sites mode to see where it allocates).
    let f = fixture();
    let sites = f.to_str().unwrap();
    for (a, b) in [(c, sites), (sites, c)] {
        let out = analyzer(&[
            "diff",
            a,
            b,
            "--fail-if",
            "allocs>+0",
            "--fail-if",
            "bytes>+0",
        ]);
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(stdout.lines().count(), 1, "{stdout}");
        assert!(
            stdout.starts_with("phase (all): base 91978 allocs, change 91978 allocs (+0)"),
            "{stdout}"
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("within: allocs>+0: 91978 -> 91978"),
            "{stderr}"
        );
        // JSON: the totals, and no sites or categories read as all gone or all new.
        let out = analyzer(&["diff", a, b, "--fail-if", "allocs>+0", "--format", "json"]);
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(json["base"]["alloc_count"], 91978, "{json}");
        assert_eq!(json["sites"], serde_json::json!([]), "{json}");
        assert_eq!(json["categories"], serde_json::json!([]), "{json}");
        assert_eq!(json["sites_gone"], 0, "{json}");
        assert_eq!(
            json["predicted_change_s"],
            serde_json::Value::Null,
            "{json}"
        );
    }
    // The peak moves with a mode's own overhead, and temporaries need sites.
    for gate in ["peak>+0", "temporaries>+0"] {
        let out = analyzer(&[
            "diff",
            c,
            sites,
            "--fail-if",
            "allocs>+0",
            "--fail-if",
            gate,
        ]);
        assert_eq!(out.status.code(), Some(2), "{out:?}");
    }
}

#[test]
fn a_budget_judges_only_the_workload_it_is_for() {
    // Every limit is a maximum: a smaller circuit would pass them all, so a budget
    // names its workload by the report's labels.
    let labelled = copy_fixture("labelled");
    edit_manifest(&labelled, |m| {
        m["labels"] = serde_json::json!({"circuit": "sha256 8 blocks", "rows": "206720"});
    });
    let l = labelled.to_str().unwrap();
    let right = budget_file(
        "labels-right",
        "[labels]\ncircuit = \"sha256 8 blocks\"\n[phase.build]\nallocs = 100000\n",
    );
    let out = analyzer(&["check", l, "--budget", right.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let wrong = budget_file(
        "labels-wrong",
        "[labels]\ncircuit = \"sha256 64 blocks\"\n[phase.build]\nallocs = 100000\n",
    );
    assert_one_line_error(
        &["check", l, "--budget", wrong.to_str().unwrap()],
        "the budget is for circuit = \"sha256 64 blocks\", and",
    );
    let missing = budget_file(
        "labels-missing",
        "[labels]\nprover = \"mirror\"\n[phase.build]\nallocs = 100000\n",
    );
    assert_one_line_error(
        &["check", l, "--budget", missing.to_str().unwrap()],
        "has no such label",
    );
}

#[test]
fn info_prints_bytes_in_the_unit_that_suits_them() {
    // The 32 GiB partition's count report (the notebooks' data): GiB, not 20389.7 MiB.
    let r = Path::new(env!("CARGO_MANIFEST_DIR")).join("../notebooks/data/porep-32g-count");
    let out = analyzer(&["info", r.to_str().unwrap()]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("227.25 GiB requested")
            && text.contains("peak 19.91 GiB live (within 1.0 MiB)"),
        "{text}"
    );
    assert!(text.contains("kept peak 19.91 GiB at 130.0 s"), "{text}");
    // Count mode counts no temporaries or sites: "-", not 0; nor did the tracer that
    // wrote this report record each phase's peak.
    let synthesize = text.lines().find(|l| l.starts_with("synthesize ")).unwrap();
    assert!(
        synthesize.ends_with(" -        -           -"),
        "{synthesize}"
    );
}

#[test]
fn a_damaged_stored_calibration_is_passed_over_and_a_given_one_named() {
    // The stored calibration is a cache: `top` ranks without costs and says why. One
    // given on the command line is the user's input: refused, naming the file.
    let home = Scratch::new("analyzer-bad-cal");
    let stored = home.join("alloc-profiler").join("calibration.json");
    std::fs::create_dir_all(stored.parent().unwrap()).unwrap();
    std::fs::write(&stored, "{}").unwrap();
    let r = fixture();
    let r = r.to_str().unwrap();
    let given = stored.to_str().unwrap();
    let out = analyzer_at_home(&["top", r, "--limit", "1"], &home);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("the stored calibration cannot be used, and is passed over")
            && stderr.contains("calibration.json"),
        "{stderr}"
    );
    assert_eq!(stderr.matches("calibration.json").count(), 1, "{stderr}");
    let out = analyzer_at_home(&["top", r, "--limit", "1", "--calibration", given], &home);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.matches("calibration.json").count(), 1, "{stderr}");
    // `cost` needs one: the damaged file is an error, not measured over.
    let out = analyzer_at_home(&["cost", r], &home);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert_eq!(
        std::fs::read_to_string(&stored).unwrap(),
        "{}",
        "left as it was"
    );
}

#[test]
fn a_flame_graph_of_nothing_says_why_from_the_report() {
    // A count report: no sites, and (without heap sampling) no live bytes.
    let count = count_copy(&fixture(), "flame-count");
    let c = count.to_str().unwrap();
    let svg = Scratch::new("analyzer-flame").holding("graph.svg");
    let s = svg.to_str().unwrap();
    assert_one_line_error(
        &["flamegraph", c, "-o", s],
        "no allocations to draw: a count-mode report records no sites",
    );
    edit_manifest(&count, |m| m["heap_interval"] = 0.into());
    assert_one_line_error(
        &["flamegraph", c, "--by", "peak-bytes", "-o", s],
        "no live bytes to draw: heap sampling did not see that moment",
    );
    let _ = std::fs::remove_file(svg);
}

#[test]
fn a_gate_on_one_phase_names_the_other_phases_that_changed() {
    use polars::prelude::*;
    // The change makes twice as many allocations in `combine`, none more in `build`.
    let change = copy_fixture("other-phases");
    edit_table(&change, "phases.parquet", |mut df| {
        let phases = phase_column(&df);
        let counts: Vec<u64> = df
            .column("alloc_count")
            .unwrap()
            .u64()
            .unwrap()
            .into_no_null_iter()
            .zip(&phases)
            .map(|(n, p)| if p == "combine" { 2 * n } else { n })
            .collect();
        df.replace("alloc_count", Column::new("alloc_count".into(), counts))
            .unwrap();
        df
    });
    let base = fixture();
    let gate = |phase: Option<&str>| {
        let mut args = vec![
            "diff",
            base.to_str().unwrap(),
            change.to_str().unwrap(),
            "--fail-if",
            "allocs>+0",
        ];
        args.extend(phase.iter().flat_map(|p| ["--phase", *p]));
        analyzer(&args)
    };
    let out = gate(Some("build"));
    assert_eq!(out.status.code(), Some(0));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains(
            "the gates compare phase build alone; other phases changed too, ungated: \
             combine 6250 -> 12500 allocations"
        ),
        "{err}"
    );
    // A gate on the run's peak, whatever the phase, says nothing of the kind either.
    let out = analyzer(&[
        "diff",
        base.to_str().unwrap(),
        change.to_str().unwrap(),
        "--fail-if",
        "peak>+0",
        "--phase",
        "build",
    ]);
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(!err.contains("other phases changed"), "{err}");
    // Gating the phase that changed, or the whole run, says nothing of the kind.
    for phase in [Some("combine"), None] {
        let out = gate(phase);
        assert_eq!(out.status.code(), Some(1), "{phase:?}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(!err.contains("other phases changed"), "{phase:?}: {err}");
    }
}

#[test]
fn sampled_reports_tables_give_each_rows_spread() {
    // The fixture's counts read as a sample:100 report's estimates.
    let sampled = copy_fixture("spread");
    edit_manifest(&sampled, |m| {
        m["mode"] = "sample:100".into();
        m["sample_interval"] = 100.into();
    });
    let s = sampled.to_str().unwrap();
    for args in [
        &["top", s, "--limit", "3"][..],
        &["categories", s],
        &["cost", s, "--limit", "3"],
    ] {
        let out = analyzer(args);
        assert!(out.status.success(), "{args:?}");
        let table = String::from_utf8(out.stdout).unwrap();
        // A ± column, with each row's share: the top site's 85,714 allocations
        // (and no reallocs) at 1 in 100: 2 * sqrt(100 * 85714) = 5,856, 7 %.
        assert!(
            table
                .lines()
                .any(|l| l.contains("alloc+realloc") && l.contains(" ±")),
            "{args:?}: {table}"
        );
        assert!(table.contains("  ±7% "), "{args:?}: {table}");
        assert!(
            table.contains("± after a column is how far sampling alone may put it"),
            "{table}"
        );
        // Every byte the phases count is in the sites: no note of bytes missed.
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(!err.contains("sampled sites hold"), "{args:?}: {err}");
    }
    // `top` and `categories` give bytes and temporaries their own: three ± columns.
    for args in [&["top", s, "--limit", "3"][..], &["categories", s]] {
        let table = String::from_utf8(analyzer(args).stdout).unwrap();
        let head = table.lines().next().unwrap();
        assert_eq!(head.matches(" ±").count(), 3, "{args:?}: {head}");
    }
    // In JSON, the bounds themselves. Bytes: N times the sum over the site's rows of
    // its bytes times its class's size (no block is larger than its class), two
    // standard deviations; temporaries: as a count of their own.
    let out = analyzer(&["top", s, "--limit", "1", "--format", "json"]);
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rows[0]["alloc_count_noise"], 5856);
    let top = rows[0]["site_id"].as_u64().unwrap();
    let squares: f64 = {
        use polars::prelude::*;
        let df = ParquetReader::new(std::fs::File::open(sampled.join("sites.parquet")).unwrap())
            .finish()
            .unwrap();
        let col = |n: &str| -> Vec<u64> {
            df.column(n)
                .unwrap()
                .u64()
                .unwrap()
                .into_no_null_iter()
                .collect()
        };
        let (ids, bytes, class) = (
            col("site_id"),
            col("bytes_requested"),
            col("size_class_bytes"),
        );
        let calls: Vec<u64> = col("alloc_count")
            .iter()
            .zip(col("realloc_count"))
            .map(|(a, r)| a + r)
            .collect();
        (0..ids.len())
            .filter(|&i| ids[i] == top)
            .map(|i| bytes[i] as f64 * class[i].max(bytes[i] / calls[i].max(1)) as f64)
            .sum()
    };
    assert!(squares > 0.0);
    let expect = (2.0 * (100.0 * squares).sqrt()).ceil() as u64;
    assert_eq!(rows[0]["bytes_requested_noise"], expect, "{}", rows[0]);
    let temps = rows[0]["temporary_count"].as_u64().unwrap();
    assert!(temps > 0);
    let expect = (2.0 * (100.0 * temps as f64).sqrt()).ceil() as u64;
    assert_eq!(rows[0]["temporary_count_noise"], expect, "{}", rows[0]);
    // A category with nothing sampled reads 0 with what it may hide: about 3N.
    let out = analyzer(&["categories", s, "--format", "json"]);
    let cats: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let empty = cats
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["sites"] == 0)
        .expect("a category no site falls in");
    assert_eq!(empty["alloc_count"], 0);
    assert_eq!(empty["alloc_count_noise"], 300, "{empty}");
    assert_eq!(empty["bytes_requested_noise"], serde_json::Value::Null);
    // Without the row that requested most bytes, as if it had gone unsampled, the
    // sites hold less than the phases count, further off than sampling would put
    // them: said, with how much. Without the row of fewest bytes, within sampling's
    // spread: nothing said. (At 1 in 2: at 1 in 100 the 192 KiB block alone would
    // spread the fixture's bytes by more than they come to.)
    let without_row = |name: &str, most: bool| {
        let dir = copy_report(&sampled, name);
        edit_manifest(&dir, |m| {
            m["mode"] = "sample:2".into();
            m["sample_interval"] = 2.into();
        });
        let mut dropped = (0, 0);
        edit_table(&dir, "sites.parquet", |df| {
            use polars::prelude::*;
            let bytes: Vec<u64> = df
                .column("bytes_requested")
                .unwrap()
                .u64()
                .unwrap()
                .into_no_null_iter()
                .collect();
            let rows = bytes.iter().enumerate().filter(|(_, b)| **b > 0);
            let (i, b) = if most {
                rows.max_by_key(|(_, b)| **b)
            } else {
                rows.min_by_key(|(_, b)| **b)
            }
            .unwrap();
            dropped = (*b, bytes.iter().sum::<u64>());
            let keep: BooleanChunked = (0..bytes.len()).map(|j| j != i).collect();
            df.filter(&keep).unwrap()
        });
        edit_manifest(&dir, |m| {
            for t in m["tables"].as_array_mut().unwrap() {
                if t["file"] == "sites.parquet" {
                    t["rows"] = (t["rows"].as_u64().unwrap() - 1).into();
                }
            }
        });
        (dir, dropped)
    };
    let (missed, dropped) = without_row("spread-missed", true);
    let share = 100.0 * (dropped.1 - dropped.0) as f64 / dropped.1 as f64;
    let (within, _) = without_row("spread-within", false);
    let (m, w) = (missed.to_str().unwrap(), within.to_str().unwrap());
    for args in [&["top"][..], &["categories"], &["cost"]] {
        let run = |r: &str| {
            let out = analyzer(&[args, &[r][..]].concat());
            assert!(out.status.success(), "{args:?}");
            String::from_utf8(out.stderr).unwrap()
        };
        let err = run(m);
        assert!(
            err.contains(&format!("({share:.1} %; the totals are counted exactly")),
            "{args:?}: {err}"
        );
        assert!(err.contains("further off than sampling's spread"), "{err}");
        assert!(err.contains("blocks too rare to be sampled"), "{err}");
        let err = run(w);
        assert!(!err.contains("sampled sites hold"), "{args:?}: {err}");
    }
    // An exact report's tables have no such column.
    let out = analyzer(&["top", fixture().to_str().unwrap(), "--limit", "3"]);
    assert!(!String::from_utf8(out.stdout).unwrap().contains('±'));
}

/// The fixture with site `site`'s row of `class` bytes moved to a class `sample:N`
/// records whole (384 KiB), `allocs` allocations of it, and read as a `sample:100`
/// report; `whole`: from a tracer that records that class whole (the manifest says
/// so), else one that sampled every class.
fn sampled_with_a_large_row(
    name: &str,
    site: u64,
    class: u64,
    allocs: u64,
    whole: bool,
) -> Scratch {
    use polars::prelude::*;
    const LARGE: u64 = 384 * 1024;
    let dir = copy_fixture(name);
    edit_table(&dir, "sites.parquet", |mut df| {
        let col = |df: &DataFrame, n: &str| -> Vec<u64> {
            df.column(n)
                .unwrap()
                .u64()
                .unwrap()
                .into_no_null_iter()
                .collect()
        };
        let (ids, classes) = (col(&df, "site_id"), col(&df, "size_class_bytes"));
        let hit: Vec<bool> = ids
            .iter()
            .zip(&classes)
            .map(|(&i, &c)| i == site && c == class)
            .collect();
        assert_eq!(
            hit.iter().filter(|h| **h).count(),
            1,
            "site {site}'s {class}-byte row"
        );
        let set = |df: &mut DataFrame, n: &str, to: u64| {
            let v: Vec<u64> = col(df, n)
                .into_iter()
                .zip(&hit)
                .map(|(x, &h)| if h { to } else { x })
                .collect();
            df.replace(n, Column::new(n.into(), v)).unwrap();
        };
        set(&mut df, "size_class_bytes", LARGE);
        set(&mut df, "bytes_requested", allocs * LARGE);
        let reallocs: u64 = col(&df, "realloc_count")
            .iter()
            .zip(&hit)
            .map(|(r, &h)| if h { *r } else { 0 })
            .sum();
        set(
            &mut df,
            "alloc_count",
            if reallocs > 0 { 0 } else { allocs },
        );
        set(
            &mut df,
            "realloc_count",
            if reallocs > 0 { allocs } else { 0 },
        );
        df
    });
    edit_manifest(&dir, |m| {
        m["mode"] = "sample:100".into();
        m["sample_interval"] = 100.into();
        if whole {
            m["sample_all_from_bytes"] = 262_144.into();
        }
    });
    dir
}

#[test]
fn sampled_reports_give_the_classes_recorded_whole_no_spread() {
    // Site 2 grew by 11 reallocs, the last now of a class recorded whole: its spread
    // is of the other 10, 2 * sqrt(100 * 10) = 64, where a report that sampled every
    // class gives 2 * sqrt(100 * 11) = 67.
    let noise = |whole| {
        let r = sampled_with_a_large_row(
            if whole { "whole" } else { "not-whole" },
            2,
            196_608,
            1,
            whole,
        );
        let out = analyzer(&[
            "top",
            r.to_str().unwrap(),
            "--format",
            "json",
            "--limit",
            "100",
        ]);
        assert!(out.status.success(), "{out:?}");
        let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        rows.as_array()
            .unwrap()
            .iter()
            .find(|s| s["site_id"] == 2)
            .unwrap()
            .clone()
    };
    let (whole, sampled) = (noise(true), noise(false));
    assert_eq!(whole["realloc_count"], 11);
    assert_eq!(whole["alloc_count_noise"], 64, "{whole}");
    assert_eq!(sampled["alloc_count_noise"], 67, "{sampled}");
    // Its bytes: the 10 small rows' (each its bytes times its class, all one block),
    // not the large one's 384 KiB squared.
    let small: f64 = (0..10).map(|k| ((192u64 << k) as f64).powi(2)).sum();
    assert_eq!(
        whole["bytes_requested_noise"],
        (2.0 * (100.0 * small).sqrt()).ceil() as u64
    );
    assert!(sampled["bytes_requested_noise"].as_u64() > whole["bytes_requested_noise"].as_u64());

    // Site 5's one allocation, of a class recorded whole: exact, so a change of it
    // between two such reports is no noise; sampled one in N it would be.
    let gate = |whole: bool| {
        let tag = if whole { "whole" } else { "not-whole" };
        let base = sampled_with_a_large_row(&format!("base-{tag}"), 5, 96, 1, whole);
        let change = sampled_with_a_large_row(&format!("change-{tag}"), 5, 96, 2, whole);
        let out = analyzer(&[
            "diff",
            base.to_str().unwrap(),
            change.to_str().unwrap(),
            "--format",
            "json",
        ]);
        assert!(out.status.success(), "{out:?}");
        let d: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        d["sites"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["delta_alloc_count"] == 1)
            .unwrap_or_else(|| panic!("{d}"))
            .clone()
    };
    assert_eq!(gate(true)["alloc_count_noise"], serde_json::Value::Null);
    // 2 * sqrt(100 * 2) on each side, the larger side's count: 2 * sqrt(2 * 200) = 40.
    assert_eq!(gate(false)["alloc_count_noise"], 40);
}

#[test]
fn top_groups_by_the_crate_whose_code_names_the_sites() {
    // The demo's six sites are all named by its own code, in the alloc-tracer crate.
    let out = analyzer(&[
        "top",
        fixture().to_str().unwrap(),
        "--group-by",
        "crate",
        "--format",
        "json",
    ]);
    assert!(out.status.success(), "{out:?}");
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rows.as_array().unwrap().len(), 1, "{rows}");
    assert_eq!(rows[0]["name"], "alloc-tracer");
    assert_eq!(rows[0]["sites"], 6);
    assert_eq!(rows[0]["share"], 1.0);
}
