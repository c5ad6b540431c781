//! `top`, `cost`, `categories` and `calibrate`: the tables that rank and price sites.

use super::*;

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
    // Of the sites shown, only those that read the same as another shown are named:
    // a limit that leaves out the second of the two, none.
    let out = analyzer(&["top", r, "--limit", "20", "--format", "json"]);
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let alike: Vec<usize> = rows
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .filter(|(_, s)| s["name"] == "build (demo.rs:21)")
        .map(|(i, _)| i)
        .collect();
    assert_eq!(alike.len(), 2, "{rows}");
    let limit = alike[1].to_string();
    let out = analyzer(&["top", r, "--limit", &limit]);
    assert!(out.status.success(), "{out:?}");
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("read the same"),
        "{out:?}"
    );
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
    // A rule naming an operation the calibration does not price: every priced
    // output says its indirect cost counts as 0, rather than hide it in a lower cost.
    let unpriced = dir.join("unpriced.toml");
    std::fs::write(
        &unpriced,
        "[[category]]\nname = \"demo build\"\nframes = [{ function = \"build\" }]\n\
         indirect = \"lc_temporay\"\n",
    )
    .unwrap();
    let (r, u) = (fixture(), unpriced.to_str().unwrap());
    let r = r.to_str().unwrap();
    for args in [
        vec!["cost", r, "--rules", u],
        vec!["top", r, "--rules", u],
        vec!["diff", r, r, "--rules", u],
    ] {
        let out = analyzer(&args);
        assert!(out.status.success(), "{args:?}: {out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(
                "category 'demo build' names operation 'lc_temporay', which the \
                 calibration does not have; its indirect cost counts as 0"
            ),
            "{args:?}: {stderr}"
        );
    }
    // And a rule that claims nothing is refused, naming the file.
    std::fs::write(
        &unpriced,
        "[[category]]\nname = \"x\"\nalso = [{ function = \"build\" }]\n",
    )
    .unwrap();
    assert_one_line_error(
        &["categories", r, "--rules", u],
        "unpriced.toml: category \"x\" has neither `frames` nor `innermost`",
    );
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
    // Nor can a profile of its sites, folded or pprof without heap sampling: exit 2,
    // nothing written. The named-sites table is written, with no rows, and said to be.
    let pb = dir.join("count.pb.gz");
    let d = dir.to_str().unwrap();
    for format in ["pprof", "folded"] {
        assert_one_line_error(
            &["export", d, "--format", format, "-o", pb.to_str().unwrap()],
            &format!("{d}: nothing to export: a count-mode report records no sites"),
        );
        assert!(!pb.exists(), "{format}");
    }
    let table = dir.join("named.parquet");
    let out = analyzer(&[
        "export",
        d,
        "--format",
        "parquet",
        "-o",
        table.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no sites to export"),
        "{out:?}"
    );
    let rows = {
        use polars::prelude::*;
        ParquetReader::new(std::fs::File::open(&table).unwrap())
            .finish()
            .unwrap()
    };
    assert_eq!(rows.height(), 0);
    let pprof = |report: &Path, phase: &[&str]| {
        let mut args = vec!["export", report.to_str().unwrap(), "--format", "pprof"];
        args.extend_from_slice(phase);
        args.extend_from_slice(&["-o", pb.to_str().unwrap()]);
        let out = analyzer(&args);
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
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
fn a_report_switched_to_count_keeps_its_sites_and_says_what_they_leave_out() {
    // Sites for the demo's phases, then `count` for 1,000 more calls (in `main`),
    // and the report written in `count` mode.
    let dir = copy_fixture("sites-then-count");
    let calls = |m: &serde_json::Value| {
        m["totals"]["alloc_count"].as_u64().unwrap()
            + m["totals"]["realloc_count"].as_u64().unwrap()
    };
    let mut total = 0;
    edit_manifest(&dir, |m| {
        m["mode"] = "count".into();
        m["stacks_mode"] = "sites".into();
        m["allocs_without_stacks"] = 1000.into();
        total = calls(m);
    });
    let d = dir.to_str().unwrap();
    let share = 100.0 * 1000.0 / total as f64;
    // Ranked as a sites report, with a word for what no site holds.
    let out = analyzer(&["top", d]);
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("build (demo.rs:"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "1000 allocations and reallocs ({share:.1} % of the run's) were counted in \
             count mode, with no stack"
        )),
        "{stderr}"
    );
    // `info` gives both modes, and the temporaries the `sites` part counted.
    let info = analyzer(&["info", d]);
    let info = String::from_utf8_lossy(&info.stdout);
    assert!(
        info.contains(
            "mode      count, stacks recorded in sites (each stack stands for 1 allocation;"
        ),
        "{info}"
    );
    assert!(info.contains("1000 allocations and reallocs ("), "{info}");
    assert!(!info.contains("temporaries not counted"), "{info}");
    // A diff against the fixture compares sites, and says the modes differ.
    let out = analyzer(&["diff", fixture().to_str().unwrap(), d]);
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("different modes (sites and count (stacks recorded in sites))"),
        "{out:?}"
    );
    // With no stack recorded at all, it is a count report, whatever it was written in.
    let counted = count_copy(&fixture(), "count-then-off");
    edit_manifest(&counted, |m| {
        m["mode"] = "off".into();
        m["stacks_mode"] = serde_json::Value::Null;
        m["allocs_without_stacks"] = calls(m).into();
    });
    assert_one_line_error(
        &["top", counted.to_str().unwrap()],
        "no sites to rank: it records allocations but no sites (mode off when written",
    );
    let info = analyzer(&["info", counted.to_str().unwrap()]);
    assert!(
        String::from_utf8_lossy(&info.stdout).contains("mode      off, after count (totals"),
        "{info:?}"
    );
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
