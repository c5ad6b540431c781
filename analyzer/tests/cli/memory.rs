//! `peak` and `leaks`: what holds memory, against a base too, and their folded stacks.

use super::*;

#[test]
fn memory_at_the_peak_and_the_end() {
    let r = memory_fixture();
    let r = r.to_str().unwrap();
    snapshot("peak.txt", &["peak", r, "--limit", "5"]);
    snapshot(
        "peak.json",
        &["peak", r, "--limit", "3", "--format", "json"],
    );
    snapshot("leaks.csv", &["leaks", r, "--format", "csv"]);
    // The run's peak resident memory is in leaks' JSON too (it read 0, "unknown"),
    // and in the table beside the peak only.
    let rss = copy_report(&memory_fixture(), "leaks-rss");
    edit_manifest(&rss, |m| m["totals"]["max_rss_bytes"] = 5_000_000.into());
    let json = analyzer(&["leaks", rss.to_str().unwrap(), "--format", "json"]);
    let json: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(json["max_rss_bytes"], 5_000_000);
    let table = analyzer(&["leaks", rss.to_str().unwrap()]);
    assert!(!String::from_utf8_lossy(&table.stdout).contains("peak resident memory"));
    let table = analyzer(&["peak", rss.to_str().unwrap()]);
    assert!(
        String::from_utf8_lossy(&table.stdout)
            .contains("the process's peak resident memory: 4.8 MiB")
    );
    // What the sites account for, in a phase and in all: their bytes' sum (the kept
    // peak's one sampled block is `main`'s, none is `build`'s).
    for (phase, blocks) in [(None, 1), (Some("main"), 1), (Some("build"), 0)] {
        let mut args = vec!["peak", r, "--format", "json"];
        args.extend(phase.iter().flat_map(|p| ["--phase", *p]));
        let out = analyzer(&args);
        let peak: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let sites = peak["sites"].as_array().unwrap();
        let sum: u64 = sites
            .iter()
            .map(|s| s["live_bytes"].as_u64().unwrap())
            .sum();
        assert_eq!(sites.len(), blocks, "{phase:?}");
        assert_eq!(peak["estimated_bytes"].as_u64().unwrap(), sum, "{phase:?}");
        assert_eq!(peak["blocks_of_phase"].as_str(), phase, "{phase:?}");
    }
    // The moment is the run's whatever the phase: the table says whose blocks it
    // holds, alone and against a base.
    let table = analyzer(&["peak", r, "--phase", "main"]);
    assert!(
        String::from_utf8_lossy(&table.stdout)
            .contains("sites below, of blocks allocated in phase main, account for"),
        "{table:?}"
    );
    // So does the flame graph of it: drawn, saying no block of the phase was live.
    let svg = Scratch::new("analyzer-peak-build").holding("graph.svg");
    let out = analyzer(&[
        "flamegraph",
        r,
        "--by",
        "peak-bytes",
        "--phase",
        "build",
        "-o",
        svg.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{out:?}");
    assert!(
        std::fs::read_to_string(&svg)
            .unwrap()
            .contains("none of the sampled blocks live then was allocated in phase build")
    );
    std::fs::remove_file(&svg).unwrap();
    let table = analyzer(&["peak", r, "--base", r, "--phase", "build"]);
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(
        text.contains("heap sampling's estimates of blocks allocated in phase build: 0 B -> 0 B")
            && text.contains("none of the sampled blocks live then in either run was allocated in the phase asked for"),
        "{text}"
    );
    let dir = Scratch::new("analyzer-memory");
    // The timeline: the report's name and mode in the title, the kept peak labelled
    // with its size, time and phase from the manifest, the phases in the legend.
    let svg = dir.join("live.svg");
    let out = analyzer(&["timeline", r, "-o", svg.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&svg).unwrap();
    let m: serde_json::Value =
        serde_json::from_slice(&std::fs::read(Path::new(r).join("manifest.json")).unwrap())
            .unwrap();
    let peak = &m["heap_peak"];
    assert!(
        text.contains("Live bytes over time: memory-report (sites"),
        "{text}"
    );
    let label = format!(
        "kept peak {:.1} MiB at {:.2} s ({})",
        peak["live_bytes"].as_f64().unwrap() / (1u64 << 20) as f64,
        peak["time_ns"].as_f64().unwrap() * 1e-9,
        peak["phase"].as_str().unwrap()
    );
    assert!(text.contains(&label), "no `{label}` in the plot");
    // And the run's exact highest live bytes, which the points can miss.
    let highest = format!(
        "highest live bytes {} (within {}; points {} ms apart",
        analyzer::render::bytes(m["totals"]["peak_live_bytes"].as_f64().unwrap()),
        analyzer::render::bytes(m["totals"]["peak_live_bytes_error_bytes"].as_f64().unwrap()),
        m["timeline_interval_ms"]
    );
    assert!(text.contains(&highest), "no `{highest}` in the plot");
    // (`combine` takes under a millisecond: no point falls in it.)
    for phase in ["build", "main"] {
        assert!(text.contains(&format!("phase {phase}")), "{phase}");
    }
    // A report without a timeline: one line naming it, and why from its manifest.
    let off = copy_report(&memory_fixture(), "timeline-off");
    std::fs::remove_file(off.join("timeline.parquet")).unwrap();
    edit_manifest(&off, |m| {
        m["timeline_interval_ms"] = 0.into();
        m["tables"]
            .as_array_mut()
            .unwrap()
            .retain(|t| t["file"] != "timeline.parquet");
    });
    let o = off.to_str().unwrap();
    assert_one_line_error(
        &["timeline", o, "-o", svg.to_str().unwrap()],
        &format!("{o}: no timeline: the timeline was off (ALLOC_TRACE_TIMELINE_MS=0"),
    );
    let empty = copy_report(&memory_fixture(), "timeline-empty");
    edit_table(&empty, "timeline.parquet", |df| df.head(Some(0)));
    edit_manifest(&empty, |m| {
        for t in m["tables"].as_array_mut().unwrap() {
            if t["file"] == "timeline.parquet" {
                t["rows"] = 0.into();
            }
        }
    });
    assert_one_line_error(
        &[
            "timeline",
            empty.to_str().unwrap(),
            "-o",
            svg.to_str().unwrap(),
        ],
        "no timeline: its timeline table holds no point",
    );
    // An SVG under another image's name is refused, and nothing written.
    let png = dir.join("live.png");
    for command in [
        vec!["timeline", r, "-o", png.to_str().unwrap()],
        vec![
            "flamegraph",
            r,
            "--by",
            "peak-bytes",
            "-o",
            png.to_str().unwrap(),
        ],
    ] {
        let out = analyzer(&command);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{command:?}: {err}");
        assert!(err.contains("this writes SVG, not .png"), "{err}");
        assert!(!png.exists());
    }
    // The flame graph of live bytes at the peak names the buffer that holds them.
    let flame = dir.join("peak.svg");
    let out = analyzer(&[
        "flamegraph",
        r,
        "--by",
        "peak-bytes",
        "-o",
        flame.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&flame).unwrap();
    assert!(text.contains("Live bytes at the kept peak (heap sampling): memory-report"));
    assert!(text.contains("lookup_table"));
}

#[test]
fn folded_stacks_of_live_bytes_add_up_to_the_estimates() {
    let r = memory_fixture();
    let r = r.to_str().unwrap();
    for (by, command) in [("peak-bytes", "peak"), ("end-bytes", "leaks")] {
        let out = analyzer(&["export", r, "--format", "folded", "--by", by]);
        assert!(out.status.success(), "{out:?}");
        let text = String::from_utf8(out.stdout).unwrap();
        let sum: u64 = text
            .lines()
            .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
            .sum();
        let held: serde_json::Value =
            serde_json::from_slice(&analyzer(&[command, r, "--format", "json"]).stdout).unwrap();
        assert!(sum > 0, "{by}");
        assert_eq!(sum, held["estimated_bytes"].as_u64().unwrap(), "{by}");
        // Every frame, named as the allocations' folded stacks name them (no file
        // names, no allocator frames folded away), so that the two merge.
        let by_count = analyzer(&["export", r, "--format", "folded"]);
        let frames = |t: &str| -> std::collections::BTreeSet<String> {
            t.lines()
                .flat_map(|l| l.rsplit_once(' ').unwrap().0.split(';'))
                .map(str::to_owned)
                .collect()
        };
        let live = frames(&text);
        assert!(live.iter().all(|f| !f.ends_with(".rs)")), "{by}: {live:?}");
        assert!(
            live.is_subset(&frames(&String::from_utf8_lossy(&by_count.stdout))),
            "{by}: {live:?}"
        );
        // The flame graph draws the same stacks.
        let svg = Scratch::new(&format!("analyzer-{by}")).holding("graph.svg");
        let out = analyzer(&["flamegraph", r, "--by", by, "-o", svg.to_str().unwrap()]);
        assert!(out.status.success(), "{out:?}");
        let drawn = std::fs::read_to_string(&svg).unwrap();
        let title = if by == "peak-bytes" {
            "Live bytes at the kept peak"
        } else {
            "Live bytes at the end of the run"
        };
        assert!(drawn.contains(title), "{by}");
        std::fs::remove_file(&svg).unwrap();
    }
    // A count report has heap samples but no sites: its live stacks, no word of
    // missing sites (the 32 GiB partition's, from the notebooks' data), one that the
    // weights are estimates.
    let count = Path::new(env!("CARGO_MANIFEST_DIR")).join("../notebooks/data/porep-32g-count");
    let out = analyzer(&[
        "export",
        count.to_str().unwrap(),
        "--format",
        "folded",
        "--by",
        "peak-bytes",
    ]);
    assert!(out.status.success(), "{out:?}");
    assert!(!out.stdout.is_empty());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!(
            "analyzer: {}: the weights are heap sampling's estimates of live bytes \
             (sampled every 1.0 MiB on average)\n",
            count.display()
        )
    );
    // Heap sampling on and nothing live at the end: a drawing that says so, exit 0.
    let clean = copy_report(&memory_fixture(), "nothing-live");
    edit_table(&clean, "heap_end.parquet", |df| df.head(Some(0)));
    edit_manifest(&clean, |m| {
        for t in m["tables"].as_array_mut().unwrap() {
            if t["file"] == "heap_end.parquet" {
                t["rows"] = 0.into();
            }
        }
    });
    let svg = clean.join("end.svg");
    let out = analyzer(&[
        "flamegraph",
        clean.to_str().unwrap(),
        "--by",
        "end-bytes",
        "-o",
        svg.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{out:?}");
    assert!(
        std::fs::read_to_string(&svg)
            .unwrap()
            .contains("no sampled block was live then")
    );
    // So do `leaks`' CSV and JSON, whose empty rows would say nothing, and the export.
    let c = clean.to_str().unwrap();
    for args in [
        vec!["leaks", c, "--format", "csv"],
        vec!["leaks", c, "--format", "json"],
        vec!["export", c, "--format", "folded", "--by", "end-bytes"],
    ] {
        let out = analyzer(&args);
        assert!(out.status.success(), "{out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(&format!("{c}: no "))
                && stderr.contains("no sampled block was live then"),
            "{args:?}: {stderr}"
        );
        assert!(
            !stderr.contains("heap sampling was off"),
            "{args:?}: {stderr}"
        );
    }
    // No peak kept: there is no moment to draw, an error as ever.
    edit_table(&clean, "heap_peak.parquet", |df| df.head(Some(0)));
    edit_manifest(&clean, |m| {
        m["heap_peak"] = serde_json::Value::Null;
        for t in m["tables"].as_array_mut().unwrap() {
            if t["file"] == "heap_peak.parquet" {
                t["rows"] = 0.into();
            }
        }
    });
    let out = analyzer(&[
        "flamegraph",
        clean.to_str().unwrap(),
        "--by",
        "peak-bytes",
        "-o",
        svg.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    // Nor does the folded export write an empty file for it; at the end, sampled
    // and nothing live, it does, and says so.
    let export = |by: &str| {
        analyzer(&[
            "export",
            clean.to_str().unwrap(),
            "--format",
            "folded",
            "--by",
            by,
        ])
    };
    let out = export("peak-bytes");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("heap sampling did not see that moment"),
        "{out:?}"
    );
    let out = export("end-bytes");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(out.stdout.is_empty());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no live bytes to export"),
        "{out:?}"
    );
    // `peak` says why there is none: this run passed 1 MiB, which with the peak's
    // table written only an exiting thread's last bytes do; without the table, the
    // report is of a tracer that kept no peak; under 1 MiB, of a small run.
    edit_manifest(&clean, |m| {
        m["totals"]["max_rss_bytes"] = (10u64 << 20).into()
    });
    let out = analyzer(&["peak", clean.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("no peak kept (the run reached 2.3 MiB live only as exiting threads"),
        "{stdout}"
    );
    // And gives the run's resident memory all the same.
    assert!(
        stdout.contains("the process's peak resident memory"),
        "{stdout}"
    );
    let older = copy_report(&clean, "no-peak-table");
    std::fs::remove_file(older.join("heap_peak.parquet")).unwrap();
    edit_manifest(&older, |m| {
        m["tables"]
            .as_array_mut()
            .unwrap()
            .retain(|t| t["file"] != "heap_peak.parquet")
    });
    let out = analyzer(&["peak", older.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("no peak kept (the tracer that wrote this report kept no peak moment)"),
        "{stdout}"
    );
    edit_manifest(&clean, |m| {
        m["totals"]["peak_live_bytes"] = 1_000_000.into()
    });
    let out = analyzer(&["peak", clean.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("no peak kept (live bytes never reached 1 MiB)"),
        "{stdout}"
    );
    // Without heap sampling: no answer, as the flame graph of it has none (exit 2,
    // nothing on standard output), and a word on why.
    let demo = fixture();
    let out = analyzer(&[
        "export",
        demo.to_str().unwrap(),
        "--format",
        "folded",
        "--by",
        "end-bytes",
    ]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(out.stdout.is_empty());
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("no live bytes to export: heap sampling did not see that moment (it was off")
    );
}

#[test]
fn peak_against_a_base_report() {
    let r = memory_fixture();
    let r = r.to_str().unwrap();
    // Against itself: every category and site on both sides, nothing changed.
    let out = analyzer(&["peak", r, "--base", r, "--format", "json"]);
    assert!(out.status.success(), "{out:?}");
    let c: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let peak: serde_json::Value =
        serde_json::from_slice(&analyzer(&["peak", r, "--format", "json"]).stdout).unwrap();
    assert_eq!(c["base"]["live_bytes"], peak["live_bytes"]);
    assert_eq!(c["change"]["live_bytes"], peak["live_bytes"]);
    let sites = c["sites"].as_array().unwrap();
    assert_eq!(sites.len(), peak["sites"].as_array().unwrap().len());
    assert!(!c["categories"].as_array().unwrap().is_empty());
    for row in sites.iter().chain(c["categories"].as_array().unwrap()) {
        assert_eq!(row["delta_bytes"], 0, "{row}");
        assert_eq!(row["base_bytes"], row["change_bytes"], "{row}");
    }
    assert!(sites.iter().all(|s| s["matched"] == "stack"));
    assert_eq!(c["base"]["matched_share"], 1.0);
    let out = analyzer(&["peak", r, "--base", r]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains(
            "in sites both reports have: 100.0% of the base's estimates, 100.0% of the change's"
        ),
        "{text}"
    );
    assert!(!text.contains("over a fifth of the bytes"), "{text}");
    // Against a report without heap sampling (the demo's): it says so.
    let demo = fixture();
    let out = analyzer(&["peak", r, "--base", demo.to_str().unwrap()]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("base:   no peak kept"), "{text}");
    assert!(
        text.contains("heap sampling was off in the base's run"),
        "{text}"
    );
    // CSV: categories, then sites.
    let out = analyzer(&["leaks", r, "--base", r, "--format", "csv"]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.starts_with("kind,rank,name,callers,distinction,category,matched,base_bytes,change_bytes,delta_bytes,delta_se,within_noise\n"),
        "{text}"
    );
    assert!(text.contains("\nsite,1,"), "{text}");
    // A phase one report lacks is refused.
    let out = analyzer(&["peak", r, "--base", r, "--phase", "nonesuch"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    // Another circuit: compared, with a word.
    let larger = copy_report(&memory_fixture(), "peak-base-rows");
    edit_manifest(&larger, |m| m["labels"]["rows"] = "2687961".into());
    let small = copy_report(&memory_fixture(), "peak-base-rows-small");
    edit_manifest(&small, |m| m["labels"]["rows"] = "106144".into());
    let out = analyzer(&[
        "peak",
        larger.to_str().unwrap(),
        "--base",
        small.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("circuits of different sizes"), "{stderr}");
}

#[test]
fn leaks_of_a_stopped_run_say_so() {
    let dir = copy_fixture("stopped");
    edit_manifest(&dir, |m| m["incomplete"] = "SIGINT".into());
    let out = analyzer(&["leaks", dir.to_str().unwrap()]);
    assert!(out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("the run was stopped (SIGINT)"), "{stderr}");
    let out = analyzer(&["leaks", fixture().to_str().unwrap()]);
    assert!(!String::from_utf8_lossy(&out.stderr).contains("stopped"));
}

#[test]
fn a_peak_kept_before_heap_sampling_stopped_is_still_shown() {
    // The program switched to `off` before writing the report: the manifest's
    // interval is 0, but the kept peak and its estimates are there.
    let dir = Scratch::new("analyzer-stopped-heap");
    for e in std::fs::read_dir(memory_fixture()).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), dir.join(e.file_name())).unwrap();
    }
    edit_manifest(&dir, |m| m["heap_interval"] = 0.into());
    let out = analyzer(&["peak", dir.to_str().unwrap()]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("stopped before the report was written"),
        "{text}"
    );
    assert!(text.contains("lookup_table (demo.rs:32)"), "{text}");
    assert!(!text.contains("heap sampling was off"), "{text}");
    assert!(!text.contains("came on part-way"), "{text}");
    // Turned on after the program had allocated: what came before is left out.
    edit_manifest(&dir, |m| m["heap_sampling_started_late"] = true.into());
    let out = analyzer(&["peak", dir.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(
            "it came on part-way through the run, and blocks allocated before are left out"
        ),
        "{text}"
    );
}

#[test]
fn a_highest_reached_in_another_phase_than_the_kept_peak_is_said() {
    // The kept peak (phase main, 2.0 MiB) and the run's highest, 0.3 MiB above
    // it: in phase build, the blocks live then may be others than the tables show;
    // in phase main too, only what was allocated between the two is missing.
    for (main_peak, said) in [
        (
            2_097_200,
            "in phase build where the kept peak is in phase main",
        ),
        (
            2_401_464,
            "what was allocated between the two is not in the tables below",
        ),
    ] {
        let dir = copy_report(&memory_fixture(), "analyzer-peak-phase");
        edit_table(&dir, "phases.parquet", |mut df| {
            use polars::prelude::*;
            let peaks = Series::new("peak_live_bytes".into(), [main_peak, 2_401_464i64, 0]);
            df.with_column(peaks.into_column()).unwrap();
            df
        });
        let out = analyzer(&["peak", dir.to_str().unwrap()]);
        assert!(out.status.success(), "{out:?}");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains(said), "{text}");
    }
}
