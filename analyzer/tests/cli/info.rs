//! `info`: what a report is, its phases and its units.

use super::*;

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
    assert_eq!(
        info["temporary_count"],
        manifest["totals"]["temporary_count"]
    );
    assert!(info["phases"][0]["temporary_count"].is_u64(), "{info}");
    // A count report counts no temporaries: null, not a 0 that reads as none found.
    let count = count_copy(&fixture(), "info-count");
    let out = analyzer(&["info", count.to_str().unwrap(), "--format", "json"]);
    let info: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(info["temporary_count"].is_null(), "{info}");
    assert!(
        info["phases"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["temporary_count"].is_null()),
        "{info}"
    );
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
fn info_names_the_run_and_the_process_a_report_was_forked_from() {
    let forked = copy_fixture("info-run");
    let out = analyzer(&["info", forked.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    // A report from before run ids says nothing of either.
    assert!(
        !text.contains("run id") && !text.contains("forked    "),
        "{text}"
    );
    edit_manifest(&forked, |m| {
        m["run_id"] = "00c0ffee12345678".into();
        m["forked_from_pid"] = 4242.into();
    });
    let out = analyzer(&["info", forked.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("run id    00c0ffee12345678 (shared by"),
        "{text}"
    );
    assert!(text.contains("forked    from process 4242:"), "{text}");
    let out = analyzer(&["info", forked.to_str().unwrap(), "--format", "json"]);
    let info: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(info["run_id"], "00c0ffee12345678");
}
