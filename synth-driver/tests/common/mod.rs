//! Running the driver binary from the integration tests.

// Each test file compiles this module on its own and uses part of it.
#![allow(dead_code)]

use std::path::Path;
use std::process::Command;

/// The synth-driver binary of this build.
pub fn driver() -> Command {
    // ALLOC_TRACE is --trace's default: one exported where the tests run must not
    // change what they ask for.
    let mut command = Command::new(env!("CARGO_BIN_EXE_synth-driver"));
    command.env_remove("ALLOC_TRACE");
    command
}

/// Runs the driver, which must succeed, and parses its first JSON line on stdout.
pub fn run_json(args: &[&str]) -> serde_json::Value {
    run_json_lines(args)
        .into_iter()
        .next()
        .unwrap_or_else(|| panic!("{args:?}: no JSON line on stdout"))
}

/// Runs the driver, which must succeed, and parses every stdout line that holds a
/// JSON object (one per iteration with --json).
pub fn run_json_lines(args: &[&str]) -> Vec<serde_json::Value> {
    let out = driver().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
        .split(|&b| b == b'\n')
        .filter(|l| l.starts_with(b"{"))
        .map(|l| serde_json::from_slice(l).unwrap())
        .collect()
}

/// The manifest of the report in `dir`.
pub fn manifest(dir: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap()
}
