//! `poseidon --hashes N --arity A`: neptune's legacy circuit with filecoin-hashers'
//! constants, synthesized by both provers.

mod common;
use common::{driver, run_json};

#[test]
fn both_provers_agree_at_every_filecoin_arity() {
    for arity in ["2", "4", "8", "11", "16", "24", "36"] {
        let args = |prover| {
            run_json(&[
                "--json", "--prover", prover, "poseidon", "--hashes", "3", "--arity", arity,
            ])
        };
        let (reference, mirror) = (args("reference"), args("mirror"));
        for key in ["rows", "aux", "inputs"] {
            assert_eq!(reference[key], mirror[key], "arity {arity} {key}");
        }
        assert_eq!(mirror["inputs"], 2, "arity {arity}");
    }
}

#[test]
fn arity_8_costs_505_constraints_per_hash() {
    let v = run_json(&["--json", "poseidon", "--hashes", "10", "--arity", "8"]);
    // 505 constraints per hash (what one arity-8 hash costs in neptune's legacy
    // circuit), one to make the output public, and one `x * 0 = 0` row per public
    // input (ONE and the output).
    assert_eq!(v["rows"], 10 * 505 + 1 + 2);
}

#[test]
fn pooled_enforce_keeps_the_poseidon_constraint_system() {
    let mirror = |variant| {
        run_json(&[
            "--json",
            "--trace",
            "count",
            "--prover",
            "mirror",
            "--variant",
            variant,
            "poseidon",
            "--hashes",
            "20",
        ])
    };
    let (baseline, pooled) = (mirror("baseline"), mirror("pooled-enforce"));
    assert_eq!(baseline["abc_digest"], pooled["abc_digest"]);
    let n = |v: &serde_json::Value| v["enforce_allocs"].as_u64().unwrap();
    assert!(n(&pooled) * 2 < n(&baseline), "{pooled} {baseline}");
}

#[test]
fn unknown_arity_is_a_usage_error() {
    let out = driver()
        .args(["poseidon", "--arity", "3"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unsupported arity"));
}
