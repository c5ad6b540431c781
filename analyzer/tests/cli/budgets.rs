//! `budget`: drafting and tightening budget files, and the files `check` refuses.

use super::*;

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
    // 8 % over, within 1.5 margins) stay; temporaries are over and stay, named. A
    // line first says to which report and margins, for `check`'s advice.
    assert_eq!(
        std::fs::read_to_string(&b).unwrap(),
        format!(
            "# Tightened by `analyzer budget --tighten` to {}: the limits it lowered lie \
             5 % above its figures (15 % for peaks).\n\
             # ours\n[phase.build]\nallocs = 90_013   # report: 85726\nbytes = \"2.75MiB\"\n\
             temporaries = 80_000\nsite.\"demo.rs:21\".allocs = 13\n",
            r.display()
        )
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
        // A draft goes to a new file (an existing one is refused).
        let _ = std::fs::remove_file(&b);
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
    assert!(
        text.contains("No temporaries limits: count mode counts no temporaries"),
        "{text}"
    );
    assert!(
        text.contains("No category limits: count mode records no sites"),
        "{text}"
    );
    assert_eq!(check(&count).status.code(), Some(0));
    for (margin, says) in [
        ("-5%", "-5%"),
        ("5%%", "5%%"),
        // Named as the option's value, not as the report's fault.
        (
            "2000%",
            "invalid value '2000%' for '--margin <MARGIN>': \"2000%\" is a margin past 1000 %",
        ),
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
            "category \"nope\" is not one of the rules' categories (Boolean::lc temporaries, ",
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
