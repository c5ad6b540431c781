//! `diff`: two reports compared, sites matched, and what the comparison says of the
//! runs.

use super::*;

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
    // A sampled report that sampled nothing of a phase matches nothing there, which
    // says nothing of a patch: no warning that it removed code.
    let unsampled = copy_fixture("self-unsampled");
    let mut rows = 0;
    edit_table(&unsampled, "sites.parquet", |df| {
        use polars::prelude::*;
        let keep: BooleanChunked = phase_column(&df).iter().map(|p| p != "combine").collect();
        let kept = df.filter(&keep).unwrap();
        rows = kept.height();
        kept
    });
    edit_manifest(&unsampled, |m| {
        m["mode"] = "sample:1000".into();
        m["sample_interval"] = 1000.into();
        for t in m["tables"].as_array_mut().unwrap() {
            if t["file"] == "sites.parquet" {
                t["rows"] = rows.into();
            }
        }
    });
    let u = unsampled.to_str().unwrap();
    let out = analyzer(&["diff", u, u, "--phase", "combine"]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("sites matched 0"), "{text}");
    assert!(!text.contains("the patch removed that code"), "{text}");
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
