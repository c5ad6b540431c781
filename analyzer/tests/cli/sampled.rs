//! `sample:N` reports: each row's spread, and the classes recorded whole.

use super::*;

#[test]
fn sampled_reports_tables_give_each_rows_spread() {
    // The fixture's counts read as a sample:100 report's estimates.
    let sampled = copy_fixture("spread");
    edit_manifest(&sampled, |m| {
        m["mode"] = "sample:100".into();
        m["sample_interval"] = 100.into();
    });
    let s = sampled.to_str().unwrap();
    for args in [
        &["top", s, "--limit", "3"][..],
        &["categories", s],
        &["cost", s, "--limit", "3"],
    ] {
        let out = analyzer(args);
        assert!(out.status.success(), "{args:?}");
        let table = String::from_utf8(out.stdout).unwrap();
        // A ± column, with each row's share: the top site's 85,714 allocations
        // (and no reallocs) at 1 in 100: 2 * sqrt(100 * 85714) = 5,856, 7 %.
        assert!(
            table
                .lines()
                .any(|l| l.contains("alloc+realloc") && l.contains(" ±")),
            "{args:?}: {table}"
        );
        assert!(table.contains("  ±7% "), "{args:?}: {table}");
        assert!(
            table.contains("± after a column is how far sampling alone may put it"),
            "{table}"
        );
        // Every byte the phases count is in the sites: no note of bytes missed.
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(!err.contains("sampled sites hold"), "{args:?}: {err}");
    }
    // A flame graph's widths, and folded stacks' weights, say they are estimates:
    // the picture outlives the terminal.
    let scratch = Scratch::new("spread-flame");
    let svg = scratch.join("f.svg");
    let out = analyzer(&["flamegraph", s, "-o", svg.to_str().unwrap()]);
    assert!(out.status.success(), "{out:?}");
    let drawn = std::fs::read_to_string(&svg).unwrap();
    assert!(
        drawn.contains("estimates (sample:100: each sampled allocation counts 100 times"),
        "{drawn}"
    );
    // Wide enough for that subtitle, which inferno would cut at 1,200 pixels.
    assert!(
        !drawn.contains(r#"<svg version="1.1" width="1200""#),
        "{drawn}"
    );
    let out = analyzer(&["export", s, "--format", "folded"]);
    assert!(out.status.success(), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("the weights are estimates (sample:100"),
        "{err}"
    );
    // Of an exact report, neither.
    let out = analyzer(&["export", fixture().to_str().unwrap(), "--format", "folded"]);
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("estimates"),
        "{out:?}"
    );
    // `top` and `categories` give bytes and temporaries their own: three ± columns.
    for args in [&["top", s, "--limit", "3"][..], &["categories", s]] {
        let table = String::from_utf8(analyzer(args).stdout).unwrap();
        let head = table.lines().next().unwrap();
        assert_eq!(head.matches(" ±").count(), 3, "{args:?}: {head}");
    }
    // In JSON, the bounds themselves. Bytes: N times the sum over the site's rows of
    // its bytes times its class's size (no block is larger than its class), two
    // standard deviations; temporaries: as a count of their own.
    let out = analyzer(&["top", s, "--limit", "1", "--format", "json"]);
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rows[0]["alloc_count_noise"], 5856);
    let top = rows[0]["site_id"].as_u64().unwrap();
    let squares: f64 = {
        use polars::prelude::*;
        let df = ParquetReader::new(std::fs::File::open(sampled.join("sites.parquet")).unwrap())
            .finish()
            .unwrap();
        let col = |n: &str| -> Vec<u64> {
            df.column(n)
                .unwrap()
                .u64()
                .unwrap()
                .into_no_null_iter()
                .collect()
        };
        let (ids, bytes, class) = (
            col("site_id"),
            col("bytes_requested"),
            col("size_class_bytes"),
        );
        let calls: Vec<u64> = col("alloc_count")
            .iter()
            .zip(col("realloc_count"))
            .map(|(a, r)| a + r)
            .collect();
        (0..ids.len())
            .filter(|&i| ids[i] == top)
            .map(|i| bytes[i] as f64 * class[i].max(bytes[i] / calls[i].max(1)) as f64)
            .sum()
    };
    assert!(squares > 0.0);
    let expect = (2.0 * (100.0 * squares).sqrt()).ceil() as u64;
    assert_eq!(rows[0]["bytes_requested_noise"], expect, "{}", rows[0]);
    let temps = rows[0]["temporary_count"].as_u64().unwrap();
    assert!(temps > 0);
    let expect = (2.0 * (100.0 * temps as f64).sqrt()).ceil() as u64;
    assert_eq!(rows[0]["temporary_count_noise"], expect, "{}", rows[0]);
    // A category with nothing sampled reads 0 with what it may hide: about 3N.
    let out = analyzer(&["categories", s, "--format", "json"]);
    let cats: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let empty = cats
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["sites"] == 0)
        .expect("a category no site falls in");
    assert_eq!(empty["alloc_count"], 0);
    assert_eq!(empty["alloc_count_noise"], 300, "{empty}");
    assert_eq!(empty["bytes_requested_noise"], serde_json::Value::Null);
    // Without the row that requested most bytes, as if it had gone unsampled, the
    // sites hold less than the phases count, further off than sampling would put
    // them: said, with how much. Without the row of fewest bytes, within sampling's
    // spread: nothing said. (At 1 in 2: at 1 in 100 the 192 KiB block alone would
    // spread the fixture's bytes by more than they come to.)
    let without_row = |name: &str, most: bool| {
        let dir = copy_report(&sampled, name);
        edit_manifest(&dir, |m| {
            m["mode"] = "sample:2".into();
            m["sample_interval"] = 2.into();
        });
        let mut dropped = (0, 0);
        edit_table(&dir, "sites.parquet", |df| {
            use polars::prelude::*;
            let bytes: Vec<u64> = df
                .column("bytes_requested")
                .unwrap()
                .u64()
                .unwrap()
                .into_no_null_iter()
                .collect();
            let rows = bytes.iter().enumerate().filter(|(_, b)| **b > 0);
            let (i, b) = if most {
                rows.max_by_key(|(_, b)| **b)
            } else {
                rows.min_by_key(|(_, b)| **b)
            }
            .unwrap();
            dropped = (*b, bytes.iter().sum::<u64>());
            let keep: BooleanChunked = (0..bytes.len()).map(|j| j != i).collect();
            df.filter(&keep).unwrap()
        });
        edit_manifest(&dir, |m| {
            for t in m["tables"].as_array_mut().unwrap() {
                if t["file"] == "sites.parquet" {
                    t["rows"] = (t["rows"].as_u64().unwrap() - 1).into();
                }
            }
        });
        (dir, dropped)
    };
    let (missed, dropped) = without_row("spread-missed", true);
    let share = 100.0 * (dropped.1 - dropped.0) as f64 / dropped.1 as f64;
    let (within, _) = without_row("spread-within", false);
    let (m, w) = (missed.to_str().unwrap(), within.to_str().unwrap());
    for args in [&["top"][..], &["categories"], &["cost"]] {
        let run = |r: &str| {
            let out = analyzer(&[args, &[r][..]].concat());
            assert!(out.status.success(), "{args:?}");
            String::from_utf8(out.stderr).unwrap()
        };
        let err = run(m);
        assert!(
            err.contains(&format!("({share:.1} %; the totals are counted exactly")),
            "{args:?}: {err}"
        );
        assert!(err.contains("further off than sampling's spread"), "{err}");
        assert!(err.contains("blocks too rare to be sampled"), "{err}");
        let err = run(w);
        assert!(!err.contains("sampled sites hold"), "{args:?}: {err}");
    }
    // An exact report's tables have no such column.
    let out = analyzer(&["top", fixture().to_str().unwrap(), "--limit", "3"]);
    assert!(!String::from_utf8(out.stdout).unwrap().contains('±'));
}

/// The fixture with site `site`'s row of `class` bytes moved to a class `sample:N`
/// records whole (384 KiB), `allocs` allocations of it, and read as a `sample:100`
/// report; `whole`: from a tracer that records that class whole (the manifest says
/// so), else one that sampled every class.
fn sampled_with_a_large_row(
    name: &str,
    site: u64,
    class: u64,
    allocs: u64,
    whole: bool,
) -> Scratch {
    use polars::prelude::*;
    const LARGE: u64 = 384 * 1024;
    let dir = copy_fixture(name);
    edit_table(&dir, "sites.parquet", |mut df| {
        let col = |df: &DataFrame, n: &str| -> Vec<u64> {
            df.column(n)
                .unwrap()
                .u64()
                .unwrap()
                .into_no_null_iter()
                .collect()
        };
        let (ids, classes) = (col(&df, "site_id"), col(&df, "size_class_bytes"));
        let hit: Vec<bool> = ids
            .iter()
            .zip(&classes)
            .map(|(&i, &c)| i == site && c == class)
            .collect();
        assert_eq!(
            hit.iter().filter(|h| **h).count(),
            1,
            "site {site}'s {class}-byte row"
        );
        let set = |df: &mut DataFrame, n: &str, to: u64| {
            let v: Vec<u64> = col(df, n)
                .into_iter()
                .zip(&hit)
                .map(|(x, &h)| if h { to } else { x })
                .collect();
            df.replace(n, Column::new(n.into(), v)).unwrap();
        };
        set(&mut df, "size_class_bytes", LARGE);
        set(&mut df, "bytes_requested", allocs * LARGE);
        let reallocs: u64 = col(&df, "realloc_count")
            .iter()
            .zip(&hit)
            .map(|(r, &h)| if h { *r } else { 0 })
            .sum();
        set(
            &mut df,
            "alloc_count",
            if reallocs > 0 { 0 } else { allocs },
        );
        set(
            &mut df,
            "realloc_count",
            if reallocs > 0 { allocs } else { 0 },
        );
        df
    });
    edit_manifest(&dir, |m| {
        m["mode"] = "sample:100".into();
        m["sample_interval"] = 100.into();
        if whole {
            m["sample_all_from_bytes"] = 262_144.into();
        }
    });
    dir
}

#[test]
fn sampled_reports_give_the_classes_recorded_whole_no_spread() {
    // Site 2 grew by 11 reallocs, the last now of a class recorded whole: its spread
    // is of the other 10, 2 * sqrt(100 * 10) = 64, where a report that sampled every
    // class gives 2 * sqrt(100 * 11) = 67.
    let noise = |whole| {
        let r = sampled_with_a_large_row(
            if whole { "whole" } else { "not-whole" },
            2,
            196_608,
            1,
            whole,
        );
        let out = analyzer(&[
            "top",
            r.to_str().unwrap(),
            "--format",
            "json",
            "--limit",
            "100",
        ]);
        assert!(out.status.success(), "{out:?}");
        let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        rows.as_array()
            .unwrap()
            .iter()
            .find(|s| s["site_id"] == 2)
            .unwrap()
            .clone()
    };
    let (whole, sampled) = (noise(true), noise(false));
    assert_eq!(whole["realloc_count"], 11);
    assert_eq!(whole["alloc_count_noise"], 64, "{whole}");
    assert_eq!(sampled["alloc_count_noise"], 67, "{sampled}");
    // Its bytes: the 10 small rows' (each its bytes times its class, all one block),
    // not the large one's 384 KiB squared.
    let small: f64 = (0..10).map(|k| ((192u64 << k) as f64).powi(2)).sum();
    assert_eq!(
        whole["bytes_requested_noise"],
        (2.0 * (100.0 * small).sqrt()).ceil() as u64
    );
    assert!(sampled["bytes_requested_noise"].as_u64() > whole["bytes_requested_noise"].as_u64());

    // Site 5's one allocation, of a class recorded whole: exact, so a change of it
    // between two such reports is no noise; sampled one in N it would be.
    let gate = |whole: bool| {
        let tag = if whole { "whole" } else { "not-whole" };
        let base = sampled_with_a_large_row(&format!("base-{tag}"), 5, 96, 1, whole);
        let change = sampled_with_a_large_row(&format!("change-{tag}"), 5, 96, 2, whole);
        let out = analyzer(&[
            "diff",
            base.to_str().unwrap(),
            change.to_str().unwrap(),
            "--format",
            "json",
        ]);
        assert!(out.status.success(), "{out:?}");
        let d: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        d["sites"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["delta_alloc_count"] == 1)
            .unwrap_or_else(|| panic!("{d}"))
            .clone()
    };
    assert_eq!(gate(true)["alloc_count_noise"], serde_json::Value::Null);
    // 2 * sqrt(100 * 2) on each side, the larger side's count: 2 * sqrt(2 * 200) = 40.
    assert_eq!(gate(false)["alloc_count_noise"], 40);
}
