//! Running the driver binary from the integration tests.

// Each test file compiles this module on its own and uses part of it.
#![allow(dead_code)]

use std::process::Command;

/// The synth-driver binary of this build.
pub fn driver() -> Command {
    Command::new(env!("CARGO_BIN_EXE_synth-driver"))
}

/// Runs the driver, which must succeed, and parses its first stdout line as JSON.
pub fn run_json(args: &[&str]) -> serde_json::Value {
    let out = driver().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(out.stdout.split(|&b| b == b'\n').next().unwrap()).unwrap()
}
