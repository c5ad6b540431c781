//! What every gate (`check`, `diff --fail-if`) can judge, and what it says when it
//! cannot.

use super::*;

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
         analyzer: saving short of the gate: allocs>-1%: 91978 -> 91978 (+0, +0.0%)\n\
         analyzer: saving short of the gate: temporaries>-1: 86607 -> 86607 (+0, +0.0%)\n\
         analyzer: saving short of the gate: cost>-1ns: 1.087 ms -> 1.087 ms (+0.000 ms, +0.0%)\n"
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

#[test]
fn gates_judge_what_they_can_and_say_what_they_cannot() {
    let r = fixture();
    let r = r.to_str().unwrap();
    // A reader that leaves early (`| head`) does not hide a breach: it still goes to
    // standard error, and the exit status is 1.
    let over = budget_file("reader-left", "[phase.build]\nallocs = 1\n");
    for (args, breach) in [
        (
            vec!["check", r, "--budget", over.to_str().unwrap()],
            "over budget: phase build: allocs",
        ),
        (
            vec!["diff", r, r, "--fail-if", "allocs>-1", "--limit", "1000"],
            "saving short of the gate: allocs>-1",
        ),
    ] {
        let (code, stderr) = with_readers_gone(&args, false);
        assert_eq!(code, Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains(breach), "{args:?}: {stderr}");
        // Nor does one reading both (`2>&1 | head -1`): both pipes closed, exit 1.
        assert_eq!(with_readers_gone(&args, true).0, Some(1), "{args:?}");
    }
    // Nor the headroom of the gates that held: still on standard error, exit 0.
    let within = ["diff", r, r, "--fail-if", "allocs>+1%", "--limit", "1000"];
    let (code, stderr) = with_readers_gone(&within, false);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("analyzer: within: allocs>+1%"),
        "no headroom line: {stderr}"
    );
    // Output that cannot be written (`> /dev/full`) is an error (exit 2), named
    // after the breaches, which still go to standard error.
    let full = std::fs::OpenOptions::new().write(true).open("/dev/full");
    if let Ok(full) = full {
        for (args, breach) in [
            (
                vec!["check", r, "--budget", over.to_str().unwrap()],
                Some("over budget: phase build: allocs"),
            ),
            (
                vec!["diff", r, r, "--fail-if", "allocs>-1", "--limit", "1000"],
                Some("saving short of the gate: allocs>-1"),
            ),
            (within.to_vec(), None),
        ] {
            let out = Command::new(env!("CARGO_BIN_EXE_analyzer"))
                .args(&args)
                .env("ALLOC_PROFILER_CALIBRATION", calibration())
                .stdout(full.try_clone().unwrap())
                .output()
                .unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
            if let Some(breach) = breach {
                assert!(stderr.contains(breach), "{args:?}: {stderr}");
            }
            let last = stderr.lines().last().unwrap_or_default();
            assert!(
                last.contains("writing standard output"),
                "{args:?}: {stderr}"
            );
        }
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
    // As if built without frame pointers (most stacks end early), or traced at a
    // depth of 2 (most cut at the depth limit).
    for (name, field, said) in [
        (
            "cut-early",
            "stacks_ending_early_alloc_count",
            "force-frame-pointers",
        ),
        (
            "cut-at-depth",
            "stacks_at_depth_limit_alloc_count",
            "cut at the depth limit (2 frames)",
        ),
    ] {
        let cut = copy_fixture(name);
        edit_manifest(&cut, |m| {
            let all = m["totals"]["alloc_count"].as_u64().unwrap();
            m["dropped"][field] = all.into();
            if field == "stacks_at_depth_limit_alloc_count" {
                m["stack_depth"] = 2.into();
            }
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
            assert!(stderr.contains(said), "{args:?}: {stderr}");
        }
        // A diff says the depths differ.
        let out = analyzer(&["diff", r.to_str().unwrap(), c]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            stderr.contains("walked at different depths (16 and 2 frames)"),
            field == "stacks_at_depth_limit_alloc_count",
            "{stderr}"
        );
        // A budget on categories or sites cannot judge such a report.
        let b = budget_file(
            name,
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
            String::from_utf8_lossy(&out.stderr).contains(said),
            "{out:?}"
        );
        let _ = std::fs::remove_file(svg);
    }
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
