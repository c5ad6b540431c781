//! `check`: a report against a budget, its exit codes and its one-line breaches.

use super::*;

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

/// `allocs_per_row` divides by the report's `rows` label: within and over budget on a
/// copy of the fixture labelled with 85 726 / 4 rows, and a bad budget (exit 2) on a
/// report without the label or with a label of 0.
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
    // A label of no rows is there, and said to be no count.
    m["labels"] = serde_json::json!({ "rows": "0" });
    std::fs::write(&manifest, serde_json::to_vec(&m).unwrap()).unwrap();
    let out = check(&dir, "4.0");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("its `rows` label (\"0\") is not a count above 0"),
        "{err}"
    );
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
        stderr.contains("saving short of the gate: allocs>-1: 91978 -> 91978"),
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
        // Not zeros: unknown, since no sites were compared.
        assert_eq!(json["sites_compared"], false, "{json}");
        assert_eq!(json["sites_gone"], serde_json::Value::Null, "{json}");
        assert_eq!(
            json["matched_alloc_share"],
            serde_json::Value::Null,
            "{json}"
        );
        // The count side counts no temporaries; the sites side does.
        for (side, report) in [("base", a), ("change", b)] {
            let temporaries = &json[side]["temporary_count"];
            let counted = if report == c {
                temporaries.is_null()
            } else {
                temporaries.is_u64()
            };
            assert!(counted, "{side}: {json}");
        }
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
