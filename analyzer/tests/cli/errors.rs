//! Bad input, closed pipes and answers that could mislead: one-line errors naming their
//! cause.

use super::*;

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
    // A flag the command lacks gets no tip to pass it after `--` as a report folder.
    assert_one_line_error(&["budget", "r", "--format", "json"], "'--format'");
    let out = analyzer(&["budget", "r", "--format", "json"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("-- --format"), "{stderr}");
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
    // A run that switched modes: older reports' sites are off by the ratio of the
    // weights; newer ones keep each count's weight, but not a ± of one interval.
    for (as_recorded, said) in [
        (
            false,
            "so those of sites recorded under another are off by the ratio",
        ),
        (
            true,
            "per-site counts keep the weight each was recorded with",
        ),
    ] {
        let mixed = copy_fixture("mixed-weights");
        edit_manifest(&mixed, |m| {
            m["stack_weights_changed"] = true.into();
            m["weighted_as_recorded"] = as_recorded.into();
        });
        let out = analyzer(&["top", mixed.to_str().unwrap()]);
        assert!(out.status.success(), "{out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(said), "{stderr}");
    }
    let out = analyzer(&["top", r]);
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("the mode switched"),
        "{out:?}"
    );

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
        text.contains("1 more site, 2.0 MiB (--limit shows more)"),
        "{text}"
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
    assert!(
        stderr.contains("no calibration to price with: the cost column is empty"),
        "{stderr}"
    );
    // Not that `--by cost` would measure one: over a damaged file it refuses.
    assert!(!stderr.contains("--by cost"), "{stderr}");
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
    // A gate on counts alone passes it over too, and says so once, not also that
    // none is stored.
    let out = analyzer_at_home(&["diff", r, r, "--fail-if", "allocs>+1%"], &home);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("is passed over"), "{stderr}");
    assert!(
        stderr.contains("no usable calibration: the diff is not priced"),
        "{stderr}"
    );
    assert!(!stderr.contains("no calibration stored"), "{stderr}");
}
