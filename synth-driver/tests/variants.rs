//! Patch variants: each keeps the constraint system (the mirror prover's a/b/c digest
//! equals the baseline's) and changes allocations the way it says.

mod common;
use common::{driver, run_json, run_json_lines};

fn sha256(prover: &str, variant: &str) -> serde_json::Value {
    let v = run_json(&[
        "--json",
        "--trace",
        "count",
        "--prover",
        prover,
        "--variant",
        variant,
        "sha256",
        "--blocks",
        "3",
        "--seed",
        "7",
    ]);
    assert_eq!(v["variant"], variant);
    v
}

#[test]
fn every_variant_has_the_baseline_digest() {
    let baseline = sha256("mirror", "baseline");
    let digest = baseline["abc_digest"].as_str().unwrap();
    assert_eq!(digest.len(), 64);
    for variant in ["inplace-lc", "pooled-enforce"] {
        let v = sha256("mirror", variant);
        assert_eq!(v["abc_digest"], digest, "{variant}");
        for key in ["rows", "aux", "inputs"] {
            assert_eq!(v[key], baseline[key], "{variant} {key}");
        }
    }
    // The in-place circuit also runs through the stock prover, with the same shape.
    let reference = sha256("reference", "inplace-lc");
    for key in ["rows", "aux", "inputs"] {
        assert_eq!(reference[key], baseline[key], "{key}");
    }
}

#[test]
fn variants_allocate_less_where_they_say() {
    let n = |v: &serde_json::Value, key: &str| v[key].as_u64().unwrap();
    let baseline = sha256("mirror", "baseline");
    let pooled = sha256("mirror", "pooled-enforce");
    let inplace = sha256("mirror", "inplace-lc");
    // Recycled buffers: well under half the allocations inside enforce (about 30 %
    // here; closures that drop the combination they are given still allocate).
    assert!(
        n(&pooled, "enforce_allocs") * 2 < n(&baseline, "enforce_allocs"),
        "pooled {pooled} baseline {baseline}"
    );
    // Same enforce-side behaviour for the prover, but no Boolean::lc temporaries or
    // MultiEq clones in gadget code.
    assert!(
        n(&inplace, "allocs") < n(&baseline, "allocs") * 3 / 4,
        "inplace {inplace} baseline {baseline}"
    );
    assert!(n(&inplace, "enforce_allocs") < n(&baseline, "enforce_allocs"));
    // Per constraint: the same count over the rows.
    for v in [&baseline, &pooled, &inplace] {
        let per_row = v["enforce_allocs_per_row"].as_f64().unwrap();
        let want = n(v, "enforce_allocs") as f64 / n(v, "rows") as f64;
        assert!((per_row - want).abs() < 1e-9, "{v}");
    }
}

#[test]
fn unsupported_combinations_are_one_line_errors() {
    for args in [
        &["--variant", "pooled-enforce", "sha256"][..],
        &[
            "--variant",
            "pooled-enforce",
            "--prover",
            "reference",
            "sha256",
        ],
        &[
            "--variant",
            "inplace-lc",
            "porep",
            "--sector-size",
            "2KiB",
            "--blank",
        ],
        &[
            "--variant",
            "pooled-enforce",
            "porep",
            "--sector-size",
            "2KiB",
            "--count-only",
        ],
        &[
            "--variant",
            "inplace-lc",
            "seal",
            "--sector-size",
            "2KiB",
            "--out",
            "/nonexistent/x",
        ],
    ] {
        let out = driver().args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.starts_with("synth-driver: --variant"), "{stderr}");
    }
}

#[test]
fn several_variants_take_turns_on_the_same_seed() {
    let rows = run_json_lines(&[
        "--json",
        "--prover",
        "mirror",
        "--variant",
        "baseline,inplace-lc,pooled-enforce",
        "sha256",
        "--blocks",
        "1",
        "--iterations",
        "6",
    ]);
    let variants: Vec<&str> = rows
        .iter()
        .map(|r| r["variant"].as_str().unwrap())
        .collect();
    // A B C, then C B A: a steady drift weighs on every variant alike.
    assert_eq!(
        variants,
        [
            "baseline",
            "inplace-lc",
            "pooled-enforce",
            "pooled-enforce",
            "inplace-lc",
            "baseline"
        ]
    );
    // One message per round, so one digest per round; the next round's differs.
    let digests: Vec<&str> = rows
        .iter()
        .map(|r| r["abc_digest"].as_str().unwrap())
        .collect();
    assert!(digests[..3].iter().all(|d| *d == digests[0]), "{digests:?}");
    assert!(digests[3..].iter().all(|d| *d == digests[3]), "{digests:?}");
    assert_ne!(digests[0], digests[3]);
    // The turns come to a summary on standard error, the output staying one record
    // a line: each variant's median, and the others' ratios to the first.
    let out = driver()
        .args([
            "--json",
            "--prover",
            "mirror",
            "--variant",
            "baseline,inplace-lc",
        ])
        .args(["sha256", "--blocks", "1", "--iterations", "4"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 3, "{stderr}");
    assert!(
        lines[0].starts_with("synth-driver: 2 rounds of turns"),
        "{stderr}"
    );
    assert!(lines[1].trim_start().starts_with("baseline "), "{stderr}");
    assert!(
        lines[2].trim_start().starts_with("inplace-lc") && lines[2].contains("x ["),
        "{stderr}"
    );
    // A command without iterations refuses several variants.
    let out = driver()
        .args([
            "--variant",
            "baseline,baseline",
            "porep",
            "--sector-size",
            "2KiB",
            "--count-only",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("take turns by iteration"), "{stderr}");
    // Nor does one report take several variants.
    let report = std::env::temp_dir().join(format!("variants-report-{}", std::process::id()));
    let out = driver()
        .args(["--trace", "count", "--report"])
        .arg(&report)
        .args([
            "--variant",
            "baseline,inplace-lc",
            "sha256",
            "--blocks",
            "1",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("mix them in one report"), "{stderr}");
    assert!(!report.exists());
    // Nor fewer iterations than variants: the last would never run.
    let out = driver()
        .args([
            "--variant",
            "baseline,inplace-lc",
            "sha256",
            "--blocks",
            "1",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr
            .contains("2 --variant values take turns by iteration, and --iterations 1 runs fewer"),
        "{stderr}"
    );
}

#[test]
fn several_modes_take_turns_and_count_alike() {
    let args = |trace: &'static str, iterations: &'static str| {
        [
            "--json",
            "--trace",
            trace,
            "sha256",
            "--blocks",
            "1",
            "--seed",
            "3",
            "--iterations",
            iterations,
        ]
    };
    let rows = run_json_lines(&args("off,count,sample:10,sites", "8"));
    let modes: Vec<&str> = rows.iter().map(|r| r["trace"].as_str().unwrap()).collect();
    assert_eq!(
        modes,
        [
            "off",
            "count",
            "sample:10",
            "sites",
            "sites",
            "sample:10",
            "count",
            "off"
        ]
    );
    // The mode switches lose nothing: every traced turn counts what a run of that
    // mode alone counts, round by round (rounds 0 and 1 differ in their seed, though
    // a SHA-256 chain allocates the same whatever its data).
    let alone = |trace| run_json_lines(&args(trace, "2"));
    let count = alone("count");
    let sites = alone("sites");
    assert!(rows[0]["allocs"].is_null(), "{}", rows[0]);
    assert_eq!(rows[1]["allocs"], count[0]["allocs"]);
    assert_eq!(rows[2]["allocs"], count[0]["allocs"]);
    assert_eq!(rows[3]["allocs"], sites[0]["allocs"]);
    assert_eq!(rows[4]["allocs"], sites[1]["allocs"]);
    assert_eq!(rows[3]["temporaries"], sites[0]["temporaries"]);
    assert_eq!(rows[4]["temporaries"], sites[1]["temporaries"]);
    assert_eq!(rows[5]["allocs"], count[1]["allocs"]);
    assert_eq!(rows[6]["allocs"], count[1]["allocs"]);
    assert!(rows[7]["allocs"].is_null(), "{}", rows[7]);
    // The run's peak live bytes, given alone, are left out where `off` takes turns
    // (its frees go unrecorded, so the live bytes only rise).
    assert!(
        count
            .iter()
            .all(|r| r["peak_live_bytes"].as_i64() > Some(0)),
        "{count:?}"
    );
    assert!(
        rows.iter().all(|r| r["peak_live_bytes"].is_null()),
        "{rows:?}"
    );
    // Each round's data from --seed plus the round, said in its line.
    let seeds: Vec<&serde_json::Value> = count.iter().map(|r| &r["seed"]).collect();
    assert_eq!(seeds, [3, 4]);
    let traced = run_json_lines(&args("count,sites", "2"));
    assert!(
        traced
            .iter()
            .all(|r| r["peak_live_bytes"].as_i64() > Some(0)),
        "{traced:?}"
    );
}
