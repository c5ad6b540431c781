//! The setup check on real builds: `frame-pointer-probe` built as the workspace
//! builds it (`-C force-frame-pointers=yes`) writes a report without the warning; the
//! same program built without frame pointers (`-C force-frame-pointers=no`, which
//! overrides the workspace's `.cargo/config.toml` as any program's own flags would)
//! gets the warning, with its fix, in its manifest and its summary. The README's
//! recipe is this workspace's config.
//!
//! The build without frame pointers goes to a target folder of its own next to this
//! build's (`no-frame-pointers/`), so that it never replaces this build's artifacts:
//! alloc-tracer and its dependencies once (about a minute on two cores), then only
//! what changed.
#![cfg(target_arch = "x86_64")]

use alloc_tracer_format::manifest::Manifest;
use std::path::{Path, PathBuf};
use std::process::Command;

const PROBE: &str = env!("CARGO_BIN_EXE_frame-pointer-probe");

/// Runs a probe binary; returns its report's manifest and its printed summary.
fn probe_report(binary: &Path, name: &str) -> (Manifest, String) {
    let scratch = test_scratch::Scratch::new(&format!("alloc-tracer-frame-pointers-{name}"));
    let dir = scratch.join("report");
    let out = Command::new(binary).arg(&dir).output().unwrap();
    assert!(
        out.status.success(),
        "{}: {}",
        binary.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let manifest = Manifest::from_json(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    (manifest, String::from_utf8(out.stdout).unwrap())
}

/// Builds the probe without frame pointers (release, like this build) and returns
/// the binary.
fn probe_without_frame_pointers() -> PathBuf {
    // PROBE is TARGET/release/frame-pointer-probe.
    let target = Path::new(PROBE).parent().unwrap().parent().unwrap();
    let nested = target.join("no-frame-pointers");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "build",
            "--release",
            "--offline",
            "--locked",
            "-p",
            "alloc-tracer-system-check",
            "--bin",
            "frame-pointer-probe",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("CARGO_TARGET_DIR", &nested)
        // RUSTFLAGS replaces the config file's build.rustflags; the encoded form
        // would replace RUSTFLAGS, so it must not come from the environment.
        .env("RUSTFLAGS", "-C force-frame-pointers=no")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("CARGO_BUILD_RUSTFLAGS")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "building the probe without frame pointers: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    nested.join("release").join("frame-pointer-probe")
}

#[test]
fn a_build_with_frame_pointers_gets_no_warning() {
    let (manifest, summary) = probe_report(Path::new(PROBE), "with");
    assert!(
        manifest.setup_warning().is_none(),
        "{:?}\n{summary}",
        manifest.dropped
    );
    assert!(!summary.contains("force-frame-pointers"), "{summary}");
    // And its stacks are named: the probe's own function is the top site.
    assert!(summary.contains("frame-pointer-probe.rs"), "{summary}");
}

#[test]
fn a_build_without_frame_pointers_gets_the_warning() {
    let binary = probe_without_frame_pointers();
    let (manifest, summary) = probe_report(&binary, "without");
    assert!(
        manifest.stacks_ending_early_share() > 0.9,
        "{:?}\n{summary}",
        manifest.dropped
    );
    let warning = manifest.setup_warning().unwrap();
    assert!(warning.contains("-C force-frame-pointers=yes"), "{warning}");
    assert!(summary.contains(&warning), "{summary}");
}

/// The README's config snippet is the one this workspace builds with, so the build
/// the first test checks is the build the README tells users to make.
#[test]
fn the_readme_snippet_is_the_workspace_config() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let config = std::fs::read_to_string(root.join(".cargo/config.toml")).unwrap();
    let snippet = "```toml\n[build]\nrustflags = [\"-C\", \"force-frame-pointers=yes\"]\n```";
    assert!(readme.contains(snippet), "README.md lacks {snippet}");
    let flags = "[build]\nrustflags = [\"-C\", \"force-frame-pointers=yes\"]";
    assert!(config.contains(flags), ".cargo/config.toml lacks {flags}");
}
