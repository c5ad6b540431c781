//! The driver never writes over files that are not its own, and learns before a run,
//! not after it, that its report could not be written.

mod common;

use common::driver;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Output, Stdio};
use test_scratch::Scratch;

fn scratch(name: &str) -> Scratch {
    Scratch::new(&format!("synth-driver-files-{name}"))
}

/// The driver tracing a one-block chain in `count` mode with its report at `report`.
fn traced_to(report: &Path) -> Output {
    driver()
        .args(["--trace", "count", "--report"])
        .arg(report)
        .args(["sha256", "--blocks", "1"])
        .output()
        .unwrap()
}

/// The driver sealing a 2 KiB sector into `out`, after `options`.
fn seal_into(out: &Path, options: &[&str]) -> Output {
    driver()
        .args(options)
        .args(["seal", "--sector-size", "2KiB", "--out"])
        .arg(out)
        .output()
        .unwrap()
}

/// Exit code 2, one line on stderr naming `what`, nothing on stdout (no iteration
/// ran).
fn refused_before_the_run(out: &Output, what: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains(what), "{stderr}");
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn a_report_folder_that_would_be_refused_is_refused_before_the_run() {
    let dir = scratch("report");
    let mine = dir.join("mine");
    std::fs::create_dir(&mine).unwrap();
    std::fs::write(mine.join("notes.txt"), "mine").unwrap();
    let out = traced_to(&mine);
    refused_before_the_run(&out, "holds notes.txt besides report files");
    assert_eq!(
        std::fs::read_to_string(mine.join("notes.txt")).unwrap(),
        "mine"
    );

    let file = dir.join("afile");
    std::fs::write(&file, "mine").unwrap();
    let out = traced_to(&file);
    refused_before_the_run(&out, "exists and is not a folder");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "mine");
    // Below a file: named, not a folder made beside it.
    let out = traced_to(&file.join("r"));
    refused_before_the_run(&out, "cannot create its parent (");

    // A link to a folder, and a folder of report tables without their manifest:
    // each refused for what it is.
    let link = dir.join("link");
    std::os::unix::fs::symlink(&mine, &link).unwrap();
    refused_before_the_run(&traced_to(&link), "is a symbolic link");
    let partial = dir.join("partial");
    std::fs::create_dir(&partial).unwrap();
    std::fs::write(partial.join("sites.parquet"), "x").unwrap();
    refused_before_the_run(
        &traced_to(&partial),
        "holds report tables but no manifest.json",
    );

    // With a note to print (--lifetimes, which sample:N does not use), the refusal
    // is still the one line said: checked before the notes.
    let out = driver()
        .args(["--trace", "sample:10", "--lifetimes", "5", "--report"])
        .arg(&mine)
        .args(["sha256", "--blocks", "1"])
        .output()
        .unwrap();
    refused_before_the_run(&out, "holds notes.txt besides report files");

    // A run refused after the check (its input is not a C1 output) leaves none of
    // the report's folders behind.
    let not_c1 = dir.join("not-c1.json");
    std::fs::write(&not_c1, "x").unwrap();
    let nested = dir.join("new");
    let out = driver()
        .args(["--trace", "count", "--report"])
        .arg(nested.join("a/b/r"))
        .args(["porep", "--c1"])
        .arg(&not_c1)
        .output()
        .unwrap();
    refused_before_the_run(&out, "not JSON");
    assert!(!nested.exists());
}

#[test]
fn a_report_path_with_the_process_id_is_checked_expanded() {
    let dir = scratch("percent");
    let out = traced_to(&dir.join("%p").join("r"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 1, "{names:?}");
    assert!(names[0].parse::<u32>().is_ok(), "{names:?}");
    assert!(dir.join(&names[0]).join("r/manifest.json").is_file());
}

#[test]
fn a_report_folder_over_the_sealed_sector_is_refused_before_the_seal() {
    let dir = scratch("overlap");
    let report = dir.join("nest");
    let out = seal_into(
        &report.join("sector"),
        &["--trace", "count", "--report", report.to_str().unwrap()],
    );
    refused_before_the_run(&out, "overlap: give the report a folder of its own");
    assert!(!report.join("sector").exists());
    // The same folder by other names: through `..`, and through a link (to the
    // report folder, made empty, as a report folder may be).
    std::fs::create_dir_all(&report).unwrap();
    std::fs::create_dir_all(dir.join("elsewhere")).unwrap();
    std::os::unix::fs::symlink(&report, dir.join("link")).unwrap();
    for other_name in [
        dir.join("elsewhere/../nest"),
        dir.join("link"),
        // Through a folder not made yet.
        dir.join("not-yet/../nest"),
    ] {
        let out = seal_into(
            &other_name.join("sector"),
            &["--trace", "count", "--report", report.to_str().unwrap()],
        );
        refused_before_the_run(&out, "overlap: give the report a folder of its own");
    }
    assert!(!report.join("sector").exists());
}

#[test]
fn an_unwritable_parent_cache_is_named_before_the_seal() {
    let dir = scratch("parents");
    let out = driver()
        .env("FIL_PROOFS_PARENT_CACHE", "/proc/no-such-folder")
        .args(["seal", "--sector-size", "2KiB", "--out"])
        .arg(dir.join("sector"))
        .output()
        .unwrap();
    refused_before_the_run(
        &out,
        "/proc/no-such-folder (FIL_PROOFS_PARENT_CACHE) cannot be made",
    );
    assert!(!dir.join("sector").exists());
}

#[test]
fn alloc_trace_in_the_environment_is_the_mode() {
    let dir = scratch("env");
    // The tracer takes ALLOC_TRACE at the first allocation: another --trace would
    // make a report of two modes.
    let out = driver()
        .env("ALLOC_TRACE", "sites")
        .args(["--trace", "count", "sha256", "--blocks", "1"])
        .output()
        .unwrap();
    refused_before_the_run(&out, "ALLOC_TRACE=sites and --trace count differ");
    // Alone, it is --trace's default: the exit hook's report is of the synthesis.
    let hook = dir.join("hook");
    let out = driver()
        .env("ALLOC_TRACE", "count")
        .env("ALLOC_TRACE_REPORT", &hook)
        .args(["sha256", "--blocks", "1"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let manifest = common::manifest(&hook);
    assert_eq!(manifest["mode"], "count");
    let alloc_count = manifest["totals"]["alloc_count"].as_u64().unwrap();
    assert!(
        alloc_count > 100_000,
        "{alloc_count} allocations: not the synthesis"
    );
    // Stacks from the environment's mode, written by its report: no note that they
    // are not written.
    let sites = dir.join("sites");
    let out = driver()
        .env("ALLOC_TRACE", "sites")
        .env("ALLOC_TRACE_REPORT", &sites)
        .args(["sha256", "--blocks", "1"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("records stacks"), "{stderr}");
    assert_eq!(common::manifest(&sites)["mode"], "sites");
    // An empty ALLOC_TRACE (`ALLOC_TRACE=$MODE`, MODE unset) chose nothing: off, as
    // the tracer reads it.
    let out = driver()
        .env("ALLOC_TRACE", "")
        .args(["--json", "sha256", "--blocks", "1"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let first: serde_json::Value = serde_json::from_str(stdout.lines().next().unwrap()).unwrap();
    assert_eq!(first["trace"], "off", "{stdout}");
}

/// A command refused before its run, `--help` among them, writes no
/// `ALLOC_TRACE_REPORT` report at exit: the earlier run's report in that folder
/// stays as it was.
#[test]
fn a_refused_command_leaves_the_exit_reports_folder_alone() {
    let dir = scratch("refused-keeps");
    let hook = dir.join("hook");
    let traced = |args: &[&str]| {
        driver()
            .env("ALLOC_TRACE", "count")
            .env("ALLOC_TRACE_REPORT", &hook)
            .args(args)
            .output()
            .unwrap()
    };
    let out = traced(&["sha256", "--blocks", "1"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let before = std::fs::read(hook.join("manifest.json")).unwrap();
    let missing = dir.join("no-such-c1.json");
    let not_c1 = dir.join("not-c1.json");
    std::fs::write(&not_c1, "x").unwrap();
    let theirs = dir.join("theirs");
    std::fs::create_dir(&theirs).unwrap();
    std::fs::write(theirs.join("notes.txt"), "mine").unwrap();
    // Refused by clap, by the job's checks, and by the runner reading its input.
    let runs: [&[&str]; 5] = [
        &["sha256", "--blocks", "0"],
        &["--help"],
        &["porep", "--c1", missing.to_str().unwrap()],
        &["porep", "--c1", not_c1.to_str().unwrap()],
        &[
            "seal",
            "--sector-size",
            "2KiB",
            "--out",
            theirs.to_str().unwrap(),
        ],
    ];
    for args in runs {
        let out = traced(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("report written"), "{args:?}: {stderr}");
        assert_eq!(
            std::fs::read(hook.join("manifest.json")).unwrap(),
            before,
            "{args:?} replaced the earlier run's report: {stderr}"
        );
    }
    // A seal that runs is a run: its report is written.
    let out = traced(&[
        "seal",
        "--sector-size",
        "2KiB",
        "--out",
        dir.join("sealed").to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_ne!(
        std::fs::read(hook.join("manifest.json")).unwrap(),
        before,
        "{stderr}"
    );
}

#[test]
fn alloc_trace_values_only_the_driver_takes_are_named_once() {
    // Turns from the environment: the tracer, which takes one mode, leaves the
    // value to the driver and does not say it ignores it.
    let out = driver()
        .env("ALLOC_TRACE", "count,sites")
        .args(["--json", "sha256", "--blocks", "1", "--iterations", "2"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("alloc-tracer"), "{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let modes: Vec<String> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v["trace"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(modes, ["count", "sites"], "{stdout}");
    // A value nobody takes: the driver's error alone.
    let out = driver()
        .env("ALLOC_TRACE", "bogus")
        .args(["sha256", "--blocks", "1"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("invalid value 'bogus'"), "{stderr}");
    assert!(!stderr.contains("alloc-tracer"), "{stderr}");
}

#[test]
fn seal_writes_only_where_it_sealed_before() {
    let dir = scratch("seal");
    // A folder of the user's: refused, its files untouched.
    let theirs = dir.join("theirs");
    std::fs::create_dir(&theirs).unwrap();
    std::fs::write(theirs.join("c1.json"), "precious").unwrap();
    let out = seal_into(&theirs, &[]);
    refused_before_the_run(&out, "is not an earlier seal's output");
    assert_eq!(
        std::fs::read_to_string(theirs.join("c1.json")).unwrap(),
        "precious"
    );
    // A new folder, then the same folder again, another sector's (another seed)
    // and the first again: its own output, replaced each time (the earlier sector's
    // cache once made the next seal fail halfway, its old C1 left beside new files).
    let ours = dir.join("ours");
    let mut c1s = Vec::new();
    for seed in ["0", "0", "1", "0"] {
        let out = driver()
            .args(["seal", "--sector-size", "2KiB", "--seed", seed, "--out"])
            .arg(&ours)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "seed {seed}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        c1s.push(std::fs::read(ours.join("c1.json")).unwrap());
    }
    assert_eq!(c1s[0], c1s[1]);
    assert_ne!(c1s[1], c1s[2]);
    assert_eq!(c1s[0], c1s[3]);
    // With --json, its one line is JSON too.
    let out = seal_into(&ours, &["--json"]);
    assert!(out.status.success());
    let printed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(printed["c1"], ours.join("c1.json").to_str().unwrap());

    // A seal that fails halfway (its SDR parent cache damaged, which pre-commit 1
    // reads) leaves the earlier C1 as it was.
    let parents = dir.join("parents");
    let sealed_with = |parents: &Path| {
        driver()
            .env("FIL_PROOFS_PARENT_CACHE", parents)
            .args(["seal", "--sector-size", "2KiB", "--seed", "1", "--out"])
            .arg(&ours)
            .output()
            .unwrap()
    };
    assert!(sealed_with(&parents).status.success());
    let before = std::fs::read(ours.join("c1.json")).unwrap();
    for cache in std::fs::read_dir(&parents).unwrap() {
        std::fs::write(cache.unwrap().path(), b"damaged").unwrap();
    }
    let out = sealed_with(&parents);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a damaged parent cache: {stderr}");
    // Every later seal would fail on it: the error says what to do.
    assert!(
        stderr.contains("the SDR parent cache file is damaged (delete it"),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read(ours.join("c1.json")).unwrap(),
        before,
        "the failed seal took the earlier C1"
    );
}

#[test]
fn an_earlier_report_is_replaced_and_said_to_be() {
    let dir = scratch("replaced");
    let report = dir.join("report");
    let run = || {
        driver()
            .args(["--trace", "count", "--report"])
            .arg(&report)
            .args(["sha256", "--blocks", "1"])
            .output()
            .unwrap()
    };
    let said = |out: &std::process::Output| {
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stderr).contains("holds an earlier report")
    };
    assert!(!said(&run()), "a new folder");
    assert!(said(&run()), "the same folder again");
}

#[test]
fn a_reader_that_goes_away_does_not_cost_the_report() {
    let dir = scratch("pipe");
    let report = dir.join("report");
    let mut child = driver()
        .args(["--json", "--trace", "count", "--report"])
        .arg(&report)
        .args(["sha256", "--blocks", "8", "-i", "4"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Read the first iteration's line, then close the pipe, as `| head -1` does.
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.starts_with('{'), "{first}");
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let manifest = common::manifest(&report);
    assert_eq!(manifest["labels"]["iterations"], "4", "{manifest}");
    // Which prover and patch made it, for budgets' [labels].
    assert_eq!(manifest["labels"]["prover"], "reference", "{manifest}");
    assert_eq!(manifest["labels"]["variant"], "baseline", "{manifest}");
}
