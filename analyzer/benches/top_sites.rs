//! How long `analyzer top` takes on a large report: writes a synthetic report with N
//! sites (default 1,000,000; three frames each) in the documented schema, then times
//! loading it, pricing every site (as `analyzer top --by cost` does) and ranking,
//! median of 5 runs.
//!
//! `cargo bench --workspace --bench top_sites [-- N]`

use alloc_tracer_format::schema::{self, ColumnType, Table};
use analyzer::rank::{self, RankBy};
use polars::prelude::*;
use std::path::Path;
use std::time::Instant;

/// A column of `table` filled with synthetic values for row `i`.
fn column(
    table: &Table,
    name: &str,
    ty: ColumnType,
    nullable: bool,
    rows: usize,
    frames: usize,
) -> Column {
    let site = |i: usize| (i / frames) as u64;
    let name_s: PlSmallStr = name.into();
    let is_frames = table.file == schema::FRAMES.file;
    match (ty, nullable) {
        (ColumnType::UInt64, false) => Column::new(
            name_s,
            (0..rows)
                .map(|i| match name {
                    "site_id" if is_frames => site(i),
                    "site_id" => i as u64,
                    "size_class_bytes" => 160,
                    "alloc_count" => (i as u64 * 7919) % 1_000_003,
                    _ => (i as u64) % 97,
                })
                .collect::<Vec<u64>>(),
        ),
        (ColumnType::Int64, _) => Column::new(
            name_s,
            (0..rows).map(|i| i as i64 % 97).collect::<Vec<i64>>(),
        ),
        (ColumnType::UInt64, true) => Column::new(
            name_s,
            (0..rows)
                .map(|i| (i % 3 != 0).then_some(150u64))
                .collect::<Vec<_>>(),
        ),
        (ColumnType::UInt32, false) => Column::new(
            name_s,
            (0..rows).map(|i| (i % frames) as u32).collect::<Vec<u32>>(),
        ),
        (ColumnType::UInt32, true) => Column::new(
            name_s,
            (0..rows)
                .map(|i| Some((i % 1000) as u32))
                .collect::<Vec<_>>(),
        ),
        (ColumnType::String, false) => Column::new(
            name_s,
            (0..rows)
                .map(|i| match name {
                    "phase" => "synthesize".to_owned(),
                    _ => format!("gadget_{}::f{}", i % 50, i % 5000),
                })
                .collect::<Vec<String>>(),
        ),
        (ColumnType::String, true) => Column::new(
            name_s,
            (0..rows)
                .map(|i| Some(format!("/src/gadgets/g{}.rs", i % 50)))
                .collect::<Vec<_>>(),
        ),
        (ColumnType::Boolean, _) => Column::new(
            name_s,
            (0..rows)
                .map(|i| i % frames != frames - 1)
                .collect::<Vec<bool>>(),
        ),
    }
}

fn write_table(dir: &Path, table: &Table, rows: usize, frames: usize) -> PolarsResult<()> {
    let columns = table
        .columns
        .iter()
        .map(|c| column(table, c.name, c.ty, c.nullable, rows, frames))
        .collect();
    let mut df = DataFrame::new(rows, columns)?;
    let f = std::fs::File::create(dir.join(table.file))?;
    ParquetWriter::new(f).finish(&mut df)?;
    Ok(())
}

/// The fixture report's manifest, listing these tables and rows (the analyzer
/// checks each table's rows against it).
fn manifest(tables: &[(&Table, usize)]) -> String {
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/demo-report/manifest.json");
    let text = std::fs::read(fixture).expect("the fixture report has a manifest");
    let mut m: serde_json::Value = serde_json::from_slice(&text).expect("it parses");
    m["tables"] = tables
        .iter()
        .map(|(t, rows)| serde_json::json!({"file": t.file, "rows": rows}))
        .collect();
    m.to_string()
}

fn main() -> PolarsResult<()> {
    let n: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let frames = 3;
    let dir = std::env::temp_dir().join(format!("analyzer-top-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let tables = [
        (&schema::SITES, n),
        (&schema::FRAMES, n * frames),
        (&schema::PHASES, 2),
        (&schema::LIFETIMES, 0),
    ];
    std::fs::write(dir.join(schema::MANIFEST), manifest(&tables))?;
    for (table, rows) in tables {
        write_table(&dir, table, rows, frames)?;
    }
    let calibration = analyzer::calibrate::Calibration::load(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/calibration.json"),
    )
    .expect("fixture calibration loads");
    let rules = analyzer::categories::default_rules();

    let mut load = vec![];
    let mut ranking = vec![];
    let mut pricing = vec![];
    let mut plain = vec![];
    for _ in 0..5 {
        let t = Instant::now();
        let report = analyzer::report::load(&dir).expect("synthetic report loads");
        let loaded = t.elapsed().as_secs_f64();
        // What `analyzer top --by cost` does: price every site, then rank (plain
        // `top` ranks first and prices only the sites it shows).
        let costs: std::collections::HashMap<u64, f64> =
            analyzer::cost::per_site(&report, &calibration, &rules, Some("synthesize"), None)
                .into_iter()
                .map(|(site, p)| (site, p.cost.total()))
                .collect();
        let priced = t.elapsed().as_secs_f64();
        let top = rank::top(&report, RankBy::Cost, 20, Some("synthesize"), Some(&costs));
        assert_eq!(top.len(), 20);
        load.push(loaded);
        pricing.push(priced - loaded);
        ranking.push(t.elapsed().as_secs_f64() - priced);
        // What plain `analyzer top` does after loading: rank, then price the shown.
        let t = Instant::now();
        let top = rank::top(&report, RankBy::Count, 20, Some("synthesize"), None);
        let shown = top.iter().map(|s| s.site_id).collect();
        let priced = analyzer::cost::per_site(
            &report,
            &calibration,
            &rules,
            Some("synthesize"),
            Some(&shown),
        );
        assert_eq!(priced.len(), 20);
        plain.push(t.elapsed().as_secs_f64());
    }
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (l, p, r, t) = (
        median(load),
        median(pricing),
        median(ranking),
        median(plain),
    );
    println!(
        "top over {n} sites ({} frame rows): load {l:.2} s + rank and price the shown {t:.2} s \
         = {:.2} s (median of 5)",
        n * frames,
        l + t
    );
    println!(
        "top --by cost over {n} sites ({} frame rows): load {l:.2} s + price {p:.2} s \
         + rank {r:.2} s = {:.2} s (median of 5; plain top prices only the sites shown)",
        n * frames,
        l + p + r
    );
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
