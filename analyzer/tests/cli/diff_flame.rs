//! `flamegraph --diff`: differential flame graphs of counts, sampled reports and live
//! bytes.

use super::*;

/// A copy of the fixture whose site 0 allocates `factor` times as often.
fn fixture_with_site_0_times(name: &str, factor: u64) -> Scratch {
    use polars::prelude::*;
    let dir = copy_fixture(name);
    edit_table(&dir, "sites.parquet", |mut df| {
        let ids: Vec<u64> = df
            .column("site_id")
            .unwrap()
            .u64()
            .unwrap()
            .into_no_null_iter()
            .collect();
        let counts: Vec<u64> = df
            .column("alloc_count")
            .unwrap()
            .u64()
            .unwrap()
            .into_no_null_iter()
            .zip(&ids)
            .map(|(n, &id)| if id == 0 { n * factor } else { n })
            .collect();
        df.replace("alloc_count", Column::new("alloc_count".into(), counts))
            .unwrap();
        df
    });
    dir
}

/// `analyzer flamegraph --diff BASE CHANGE EXTRA... -o SVG`.
fn diff_flamegraph(base: &Path, change: &Path, extra: &[&str], svg: &Path) -> std::process::Output {
    let mut args = vec![
        "flamegraph",
        "--diff",
        base.to_str().unwrap(),
        change.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    args.extend(["-o", svg.to_str().unwrap()]);
    analyzer(&args)
}

/// The change each frame of a differential flame graph names, from its title
/// (`f [+3 allocations, +200.0%] (9 allocations, 1.00%)`), or `None` for a frame
/// that did not change; the root (`all`) left out.
fn title_deltas(svg: &str) -> Vec<Option<String>> {
    svg.split("<title>")
        .skip(1)
        .filter_map(|t| t.split("</title>").next())
        .filter(|t| !t.starts_with("all ("))
        .map(|t| {
            let name = t.rsplit_once(" (").map_or(t, |(name, _)| name);
            name.strip_suffix(']')
                .and_then(|n| n.rsplit_once(" ["))
                .map(|(_, d)| d.to_owned())
                .filter(|d| d.starts_with(['+', '-', '~']))
        })
        .collect()
}

/// How many of `deltas` are a gain (`+`) and how many a loss (`-`).
fn gains_and_losses(deltas: &[Option<String>]) -> (usize, usize) {
    let count = |sign| {
        deltas
            .iter()
            .flatten()
            .filter(|d| d.starts_with(sign))
            .count()
    };
    (count('+'), count('-'))
}

#[test]
fn differential_flamegraph_colours_what_grew() {
    let base = fixture();
    let change = fixture_with_site_0_times("flame-diff", 3);
    let svg = change.join("diff.svg");
    let out = diff_flamegraph(&base, &change, &["--phase", "build"], &svg);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&svg).unwrap();
    let change_name = change.file_name().unwrap().to_str().unwrap();
    assert!(
        text.contains(&format!(
            "Allocations by count: {change_name} against demo-report, phase build"
        )),
        "title"
    );
    // Frame titles carry the change of the stacks through them: the phase holds
    // only site 0's stack, and each of its frames grew, not only its last
    // (inferno's own differential mode gives every frame above the last 0.00%).
    let deltas = title_deltas(&text);
    assert!(deltas.len() >= 2, "{deltas:?}");
    assert!(
        deltas
            .iter()
            .all(|d| d.as_deref() == Some("+171,428 allocations, +200.0%")),
        "{deltas:?}"
    );
    // The base's widths: growth still reads as growth, in red.
    let draw = |change: &Path, widths: &str, svg: &Path| {
        let out = diff_flamegraph(&base, change, &["--widths", widths], svg);
        assert!(out.status.success(), "{out:?}");
        std::fs::read_to_string(svg).unwrap()
    };
    // Frames drawn in a clear red (not the tint of a change of a few in millions).
    let reds = |text: &str| {
        text.split("fill=\"rgb(")
            .skip(1)
            .filter_map(|c| c.split(')').next())
            .filter(|c| {
                let rgb: Vec<u8> = c.split(',').map(|v| v.parse().unwrap()).collect();
                rgb[0] == 255 && rgb[1] < 240
            })
            .count()
    };
    let text = draw(&change, "base", &change.join("base.svg"));
    assert!(text.contains("widths: stacks of the base; red: more in the change"));
    // All phases: frames outside site 0's stack did not change.
    let deltas = title_deltas(&text);
    assert!(gains_and_losses(&deltas).0 >= 2, "{deltas:?}");
    assert!(deltas.iter().any(Option::is_none), "{deltas:?}");
    assert!(reds(&text) >= 2, "growth in red");
    // A site the change no longer has: drawn only at the base's widths.
    let gone = fixture_with_site_0_times("flame-diff-gone", 0);
    let at_change = draw(&gone, "change", &gone.join("change.svg"));
    let at_base = draw(&gone, "base", &gone.join("base.svg"));
    // The base's 91,978 allocations are all drawn only at its widths.
    let whole_base = "<title>all (91,978 allocations";
    assert!(
        !at_change.contains(whole_base),
        "the removed site is not drawn"
    );
    assert!(at_base.contains(whole_base), "the removed site is drawn");
    let deltas = title_deltas(&at_base);
    let (gains, losses) = gains_and_losses(&deltas);
    assert!(gains == 0 && losses >= 2, "as a loss: {deltas:?}");
    assert_eq!(reds(&at_base), 0, "a loss is not red");
    // --widths picks a side of --diff: without one, it is refused, not ignored.
    let out = analyzer(&[
        "flamegraph",
        base.to_str().unwrap(),
        "--widths",
        "base",
        "-o",
        change.join("one.svg").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--widths chooses a side of --diff"),
        "{out:?}"
    );
    assert!(!change.join("one.svg").exists());
    // A report against itself: no frame changed.
    let same = change.join("same.svg");
    let out = diff_flamegraph(&base, &base, &[], &same);
    assert!(out.status.success());
    let text = std::fs::read_to_string(&same).unwrap();
    let deltas = title_deltas(&text);
    assert!(
        !deltas.is_empty() && deltas.iter().all(Option::is_none),
        "{deltas:?}"
    );
    assert_eq!(reds(&text), 0);
}

#[test]
fn differential_flamegraph_of_sampled_reports_gives_the_exact_totals_too() {
    // The fixture's counts read as a sample:10 report's: the stacks drawn are
    // estimates, and the subtitle gives the totals the phases count exactly beside
    // the drawn ones.
    let r = fixture();
    let sampled = copy_fixture("flame-sampled");
    edit_manifest(&sampled, |m| {
        m["mode"] = "sample:10".into();
        m["sample_interval"] = 10.into();
    });
    // Its first site estimated ten times over: the drawn totals differ from the
    // exact ones, which the subtitle must not mix up.
    let mut first = (0, 0);
    edit_table(&sampled, "sites.parquet", |mut df| {
        use polars::prelude::*;
        for (column, kept) in [
            ("alloc_count", &mut first.0),
            ("bytes_requested", &mut first.1),
        ] {
            let scaled: Vec<u64> = df
                .column(column)
                .unwrap()
                .u64()
                .unwrap()
                .into_no_null_iter()
                .enumerate()
                .map(|(i, n)| {
                    if i == 0 {
                        *kept = n;
                        n * 10
                    } else {
                        n
                    }
                })
                .collect();
            df.replace(column, Column::new(column.into(), scaled))
                .unwrap();
        }
        df
    });
    assert!(first.0 > 0 && first.1 > 0, "{first:?}");
    let exact = |by: &str| -> u64 {
        let info: serde_json::Value = serde_json::from_slice(
            &analyzer(&["info", r.to_str().unwrap(), "--format", "json"]).stdout,
        )
        .unwrap();
        let phases = info["phases"].as_array().unwrap();
        phases
            .iter()
            .map(|p| match by {
                "count" => {
                    p["alloc_count"].as_u64().unwrap() + p["realloc_count"].as_u64().unwrap()
                }
                _ => p["bytes_requested"].as_u64().unwrap(),
            })
            .sum()
    };
    let grouped = |n: u64| {
        let digits = n.to_string();
        let mut out = String::new();
        for (i, c) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i).is_multiple_of(3) {
                out.push(',');
            }
            out.push(c);
        }
        out
    };
    for (by, unit) in [("count", "allocations"), ("bytes", "bytes")] {
        let svg = sampled.join(format!("{by}.svg"));
        let out = diff_flamegraph(&r, &sampled, &["--by", by], &svg);
        assert!(out.status.success(), "{out:?}");
        let text = std::fs::read_to_string(&svg).unwrap();
        let n = exact(by);
        let subtitle = text.lines().find(|l| l.contains("estimates")).unwrap_or("");
        assert!(
            text.contains(&format!(
                "counted exactly: {} -&gt; {} {unit} (unchanged)",
                grouped(n),
                grouped(n)
            )),
            "{by}: {subtitle}"
        );
        let drawn = n + 9 * if by == "count" { first.0 } else { first.1 };
        assert!(
            text.contains(&format!(
                "; all as drawn: {} -&gt; {} {unit}",
                grouped(n),
                grouped(drawn)
            )),
            "{by}: {subtitle}"
        );
    }
    // Two exact reports: the drawn totals are the totals.
    let svg = sampled.join("exact.svg");
    let out = diff_flamegraph(&r, &r, &[], &svg);
    assert!(out.status.success(), "{out:?}");
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(!text.contains("counted exactly") && text.contains("; all: "));
}

#[test]
fn differential_flamegraph_of_live_bytes_colours_what_holds_more() {
    let base = memory_fixture();
    let change = copy_report(&base, "flame-diff-live");
    edit_table(&change, "heap_peak.parquet", |mut df| {
        use polars::prelude::*;
        let tripled: Vec<u64> = df
            .column("live_bytes_estimate")
            .unwrap()
            .u64()
            .unwrap()
            .into_no_null_iter()
            .enumerate()
            .map(|(i, b)| if i == 0 { b * 3 } else { b })
            .collect();
        df.replace(
            "live_bytes_estimate",
            Column::new("live_bytes_estimate".into(), tripled),
        )
        .unwrap();
        df
    });
    let svg = change.join("diff.svg");
    let draw = |a: &Path, b: &Path| diff_flamegraph(a, b, &["--by", "peak-bytes"], &svg);
    let out = draw(&base, &change);
    assert!(out.status.success(), "{out:?}");
    let text = std::fs::read_to_string(&svg).unwrap();
    let change_name = change.file_name().unwrap().to_str().unwrap();
    assert!(
        text.contains(&format!(
            "Live bytes at the kept peak (heap sampling): {change_name} against memory-report"
        )),
        "title"
    );
    let deltas = title_deltas(&text);
    let (gains, losses) = gains_and_losses(&deltas);
    assert!(gains >= 2 && losses == 0, "{deltas:?}");
    assert!(
        deltas.iter().flatten().all(|d| d.contains(" bytes, ")),
        "{deltas:?}"
    );
    // A report against itself: nothing changed.
    let out = draw(&base, &base);
    assert!(out.status.success(), "{out:?}");
    let deltas = title_deltas(&std::fs::read_to_string(&svg).unwrap());
    assert!(
        !deltas.is_empty() && deltas.iter().all(Option::is_none),
        "{deltas:?}"
    );
    // A side without heap sampling would read as all growth (or all loss): refused,
    // naming the side.
    let unsampled = copy_report(&base, "flame-diff-unsampled");
    edit_table(&unsampled, "heap_peak.parquet", |df| df.head(Some(0)));
    edit_manifest(&unsampled, |m| {
        m["heap_interval"] = 0.into();
        for t in m["tables"].as_array_mut().unwrap() {
            if t["file"] == "heap_peak.parquet" {
                t["rows"] = 0.into();
            }
        }
    });
    for (a, b, side) in [
        (unsampled.path(), base.as_path(), "the base"),
        (base.as_path(), unsampled.path(), "the change"),
    ] {
        let out = draw(a, b);
        assert_eq!(out.status.code(), Some(2), "{out:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(&format!(
                "{side} ({}) has no live bytes",
                unsampled.display()
            )),
            "{out:?}"
        );
    }
    // Sampled, and nothing live: at the change's widths nothing to draw, and the
    // base's widths are offered; with nothing live on either side, that is the
    // answer, drawn as for one report.
    let empty = copy_report(&base, "flame-diff-nothing-live");
    edit_table(&empty, "heap_peak.parquet", |df| df.head(Some(0)));
    edit_manifest(&empty, |m| {
        for t in m["tables"].as_array_mut().unwrap() {
            if t["file"] == "heap_peak.parquet" {
                t["rows"] = 0.into();
            }
        }
    });
    let out = draw(&base, &empty);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("nothing to draw at its widths (`--widths base` draws the base's stacks; `peak --base` lists"),
        "{stderr}"
    );
    let out = draw(&empty, &empty);
    assert!(out.status.success(), "{out:?}");
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.contains("no sampled block was live then"), "{text}");
    // Without heap sampling on either side there is nothing to draw: an error.
    assert_one_line_error(
        &[
            "flamegraph",
            "--diff",
            fixture().to_str().unwrap(),
            fixture().to_str().unwrap(),
            "--by",
            "peak-bytes",
            "-o",
            svg.to_str().unwrap(),
        ],
        "has no live bytes to compare",
    );
}
