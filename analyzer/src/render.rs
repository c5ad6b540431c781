//! Rendering results for people (aligned tables) and programs (JSON, CSV).
//!
//! JSON and CSV are written from the same serde rows, so a CSV column has the name,
//! and its cells the values, of the JSON field it comes from. `cost` and `diff` answer
//! with two kinds of rows (categories, then sites); their CSV is one table of both,
//! told apart by a `kind` column, with the fields a kind lacks left empty.

use crate::calibrate::Calibration;
use crate::categories::CategoryTotals;
use crate::cost::{CategoryCost, CostReport, SiteCost};
use crate::diff::{CategoryDelta, Diff, SiteDelta};
use crate::info::Info;
use crate::naming;
use crate::rank::RankedSite;
use serde::Serialize;
use std::io::{self, Write};

/// Output format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Aligned text.
    Table,
    /// A JSON array of objects.
    Json,
    /// CSV with a header row.
    Csv,
}

pub(crate) fn pct(x: f64) -> String {
    format!("{:.1}%", 100.0 * x)
}

/// Seconds with a precision that suits their size.
fn seconds(s: f64) -> String {
    // Rounding leftovers (and -0) print as 0.
    let s = if s.abs() < 5e-11 { 0.0 } else { s };
    let a = s.abs();
    if a >= 10.0 {
        format!("{s:.1} s")
    } else if a >= 0.1 {
        format!("{s:.2} s")
    } else if a >= 1e-4 {
        format!("{:.2} ms", s * 1e3)
    } else {
        format!("{:.1} us", s * 1e6)
    }
}

/// A site's name followed by its callers, if any.
pub(crate) fn with_callers(name: &str, callers: &str) -> String {
    if callers.is_empty() {
        name.to_owned()
    } else {
        format!("{name} < {callers}")
    }
}

fn opt_pct(x: Option<f64>) -> String {
    x.map_or("-".to_owned(), pct)
}

/// Writes `rows` as CSV: a header row of their field names, then one record per row.
/// Without rows, the header alone (the field names of `T::default()`), so that a
/// reader still sees the columns.
pub(crate) fn csv_rows<T: Serialize + Default>(out: &mut dyn Write, rows: &[T]) -> io::Result<()> {
    let mut w = csv::Writer::from_writer(&mut *out);
    let mut empty = true;
    for row in rows {
        w.serialize(row).map_err(csv_error)?;
        empty = false;
    }
    w.flush()?;
    drop(w);
    if empty {
        // csv writes a header only along with a record: keep the header's line.
        let mut probe = csv::Writer::from_writer(Vec::new());
        probe.serialize(T::default()).map_err(csv_error)?;
        let text = probe.into_inner().map_err(|e| e.into_error())?;
        let header = text.split_inclusive(|&b| b == b'\n').next().unwrap_or(&[]);
        out.write_all(header)?;
    }
    Ok(())
}

/// The I/O error inside a CSV error as itself (a closed pipe must stay one: the CLI
/// exits quietly on it).
fn csv_error(e: csv::Error) -> io::Error {
    match e.into_kind() {
        csv::ErrorKind::Io(e) => e,
        other => io::Error::other(format!("CSV: {other:?}")),
    }
}

/// A row of `cost`'s CSV: a [`CategoryCost`] (`kind` "category") or a [`SiteCost`]
/// (`kind` "site"), each field under its JSON name.
#[derive(Default, Serialize)]
struct CostCsvRow<'a> {
    kind: &'a str,
    rank: Option<usize>,
    site_id: Option<u64>,
    name: Option<&'a str>,
    callers: Option<&'a str>,
    distinction: Option<&'a str>,
    category: &'a str,
    sites: Option<usize>,
    alloc_count: u64,
    realloc_count: Option<u64>,
    temporary_count: Option<u64>,
    direct_s: f64,
    indirect_s: f64,
    total_s: f64,
    phase_share: Option<f64>,
}

impl<'a> From<&'a CategoryCost> for CostCsvRow<'a> {
    fn from(c: &'a CategoryCost) -> Self {
        CostCsvRow {
            kind: "category",
            category: &c.category,
            sites: Some(c.sites),
            alloc_count: c.alloc_count,
            direct_s: c.direct_s,
            indirect_s: c.indirect_s,
            total_s: c.total_s,
            phase_share: c.phase_share,
            ..CostCsvRow::default()
        }
    }
}

impl<'a> From<&'a SiteCost> for CostCsvRow<'a> {
    fn from(s: &'a SiteCost) -> Self {
        CostCsvRow {
            kind: "site",
            rank: Some(s.rank),
            site_id: Some(s.site_id),
            name: Some(&s.name),
            callers: Some(&s.callers),
            distinction: Some(&s.distinction),
            category: &s.category,
            sites: None,
            alloc_count: s.alloc_count,
            realloc_count: Some(s.realloc_count),
            temporary_count: Some(s.temporary_count),
            direct_s: s.direct_s,
            indirect_s: s.indirect_s,
            total_s: s.total_s,
            phase_share: s.phase_share,
        }
    }
}

/// A row of `diff`'s CSV: a [`CategoryDelta`] (`kind` "category") or a [`SiteDelta`]
/// (`kind` "site"), each field under its JSON name.
#[derive(Default, Serialize)]
struct DiffCsvRow<'a> {
    kind: &'a str,
    name: Option<&'a str>,
    callers: Option<&'a str>,
    distinction: Option<&'a str>,
    matched: Option<&'a str>,
    category: &'a str,
    base_alloc_count: u64,
    change_alloc_count: u64,
    delta_alloc_count: i64,
    delta_bytes_requested: i64,
    delta_cost_s: Option<f64>,
}

impl<'a> From<&'a CategoryDelta> for DiffCsvRow<'a> {
    fn from(c: &'a CategoryDelta) -> Self {
        DiffCsvRow {
            kind: "category",
            name: None,
            callers: None,
            distinction: None,
            matched: None,
            category: &c.category,
            base_alloc_count: c.base_alloc_count,
            change_alloc_count: c.change_alloc_count,
            delta_alloc_count: c.delta_alloc_count,
            delta_bytes_requested: c.delta_bytes_requested,
            delta_cost_s: c.delta_cost_s,
        }
    }
}

impl<'a> From<&'a SiteDelta> for DiffCsvRow<'a> {
    fn from(s: &'a SiteDelta) -> Self {
        DiffCsvRow {
            kind: "site",
            name: Some(&s.name),
            callers: Some(&s.callers),
            distinction: Some(&s.distinction),
            matched: Some(&s.matched),
            category: &s.category,
            base_alloc_count: s.base_alloc_count,
            change_alloc_count: s.change_alloc_count,
            delta_alloc_count: s.delta_alloc_count,
            delta_bytes_requested: s.delta_bytes_requested,
            delta_cost_s: s.delta_cost_s,
        }
    }
}

/// Writes ranked sites.
pub fn sites(out: &mut dyn Write, sites: &[RankedSite], format: Format) -> io::Result<()> {
    match format {
        Format::Json => {
            serde_json::to_writer_pretty(&mut *out, sites)?;
            writeln!(out)
        }
        Format::Csv => csv_rows(out, sites),
        Format::Table => {
            // A column of site counts only when rows are groups of sites.
            let grouped = sites.iter().any(|s| s.sites != 1);
            let count = |n: &dyn std::fmt::Display| {
                if grouped {
                    format!(" {n:>6}")
                } else {
                    String::new()
                }
            };
            writeln!(
                out,
                "{:>4} {:>12} {:>7} {:>14} {:>6} {:>7} {:>12} {:>9}{}  site",
                "rank",
                "allocs",
                "share",
                "bytes",
                "temps",
                "class",
                "lifetime",
                "cost",
                count(&"sites")
            )?;
            for s in sites {
                writeln!(
                    out,
                    "{:>4} {:>12} {:>7} {:>14} {:>6} {:>7} {:>12} {:>9}{}  {}",
                    s.rank,
                    s.alloc_count.saturating_add(s.realloc_count),
                    pct(s.share),
                    s.bytes_requested,
                    format!("{:.0}%", 100.0 * s.temporary_share),
                    s.main_size_class_bytes,
                    s.lifetime_ns_median
                        .map_or("-".to_owned(), |v| format!("{v} ns")),
                    s.cost_s.map_or("-".to_owned(), seconds),
                    count(&s.sites),
                    naming::with_distinction(&with_callers(&s.name, &s.callers), &s.distinction)
                )?;
            }
            Ok(())
        }
    }
}

/// Writes category totals.
pub fn categories(out: &mut dyn Write, cats: &[CategoryTotals], format: Format) -> io::Result<()> {
    match format {
        Format::Json => {
            serde_json::to_writer_pretty(&mut *out, cats)?;
            writeln!(out)
        }
        Format::Csv => csv_rows(out, cats),
        Format::Table => {
            writeln!(
                out,
                "{:<40} {:>6} {:>12} {:>7} {:>14} {:>12}  top site",
                "category", "sites", "allocs", "share", "bytes", "temporaries"
            )?;
            for c in cats {
                writeln!(
                    out,
                    "{:<40} {:>6} {:>12} {:>7} {:>14} {:>12}  {}",
                    c.category,
                    c.sites,
                    c.alloc_count.saturating_add(c.realloc_count),
                    pct(c.share),
                    c.bytes_requested,
                    c.temporary_count,
                    c.top_site
                )?;
            }
            Ok(())
        }
    }
}

/// Writes the cost model's answer: categories, then the costliest sites.
pub fn cost(out: &mut dyn Write, c: &CostReport, format: Format) -> io::Result<()> {
    match format {
        Format::Json => {
            serde_json::to_writer_pretty(&mut *out, c)?;
            writeln!(out)
        }
        Format::Csv => {
            let categories = c.categories.iter().map(CostCsvRow::from);
            let rows: Vec<CostCsvRow> = categories.chain(c.sites.iter().map(From::from)).collect();
            csv_rows(out, &rows)
        }
        Format::Table => {
            writeln!(
                out,
                "phase {}: {} wall (traced), allocation cost {} = {} direct + {} indirect (estimate)",
                c.phase.as_deref().unwrap_or("(all)"),
                c.phase_wall_s.map_or("-".to_owned(), seconds),
                seconds(c.total_s),
                seconds(c.direct_s),
                seconds(c.indirect_s),
            )?;
            if !c.host_matches {
                writeln!(
                    out,
                    "WARNING: calibrated on {} ({}), report from {} ({}): figures describe the calibration host",
                    c.calibration_host.0, c.calibration_host.1, c.report_host.0, c.report_host.1
                )?;
            }
            writeln!(out)?;
            writeln!(
                out,
                "{:<40} {:>12} {:>10} {:>10} {:>10} {:>7}",
                "category", "allocs", "direct", "indirect", "saves", "of phase"
            )?;
            for k in &c.categories {
                writeln!(
                    out,
                    "{:<40} {:>12} {:>10} {:>10} {:>10} {:>7}",
                    k.category,
                    k.alloc_count,
                    seconds(k.direct_s),
                    seconds(k.indirect_s),
                    seconds(k.total_s),
                    opt_pct(k.phase_share)
                )?;
            }
            writeln!(out)?;
            writeln!(
                out,
                "{:>4} {:>12} {:>10} {:>10} {:>10} {:>7}  site (removing it saves ~saves)",
                "rank", "allocs", "direct", "indirect", "saves", "of phase"
            )?;
            for s in &c.sites {
                writeln!(
                    out,
                    "{:>4} {:>12} {:>10} {:>10} {:>10} {:>7}  {} [{}]",
                    s.rank,
                    s.alloc_count.saturating_add(s.realloc_count),
                    seconds(s.direct_s),
                    seconds(s.indirect_s),
                    seconds(s.total_s),
                    opt_pct(s.phase_share),
                    naming::with_distinction(&with_callers(&s.name, &s.callers), &s.distinction),
                    s.category
                )?;
            }
            Ok(())
        }
    }
}

/// Writes a comparison: totals, predicted against measured change, categories, sites.
pub fn diff(out: &mut dyn Write, d: &Diff, format: Format) -> io::Result<()> {
    match format {
        Format::Json => {
            serde_json::to_writer_pretty(&mut *out, d)?;
            writeln!(out)
        }
        Format::Csv => {
            let categories = d.categories.iter().map(DiffCsvRow::from);
            let rows: Vec<DiffCsvRow> = categories.chain(d.sites.iter().map(From::from)).collect();
            csv_rows(out, &rows)
        }
        Format::Table => {
            let opt_s = |x: Option<f64>| x.map_or("-".to_owned(), seconds);
            writeln!(
                out,
                "phase {}: base {} allocs, change {} allocs ({:+})",
                d.phase.as_deref().unwrap_or("(all)"),
                d.base.alloc_count,
                d.change.alloc_count,
                i128::from(d.change.alloc_count) - i128::from(d.base.alloc_count),
            )?;
            writeln!(
                out,
                "sites matched {} ({} by path, {} with lines ignored), gone {}, new {}; \
                 {} of the base's allocations matched ({} by path, {} with lines ignored), {} of the change's",
                d.sites_matched,
                d.sites_matched_by_path,
                d.sites_matched_ignoring_lines,
                d.sites_gone,
                d.sites_new,
                pct(d.matched_alloc_share),
                pct(d.matched_alloc_share_by_path),
                pct(d.matched_alloc_share_ignoring_lines),
                pct(d.change_matched_alloc_share),
            )?;
            if d.base.alloc_count > 0 && d.matched_alloc_share < crate::diff::LOW_MATCH_SHARE {
                writeln!(
                    out,
                    "warning: only {} of the base's allocations are at sites found in the change: \
                     the site rows marked gone and new are largely the same code under other frames \
                     (trust the category totals)",
                    pct(d.matched_alloc_share)
                )?;
            }
            let recycling = d.recycling_s.map_or(String::new(), |r| {
                format!(", plus {} to recycle what it removes", seconds(r))
            });
            writeln!(
                out,
                "predicted change {} (allocation cost {} -> {}{recycling}); measured change {} ({} -> {}; {})",
                opt_s(d.predicted_change_s),
                opt_s(d.base.cost_s),
                opt_s(d.change.cost_s),
                opt_s(d.measured_change_s),
                opt_s(d.base.wall_s),
                opt_s(d.change.wall_s),
                d.wall_source
            )?;
            writeln!(out)?;
            writeln!(
                out,
                "{:<40} {:>12} {:>12} {:>12} {:>10}",
                "category", "base", "change", "delta", "cost"
            )?;
            for c in &d.categories {
                writeln!(
                    out,
                    "{:<40} {:>12} {:>12} {:>+12} {:>10}",
                    c.category,
                    c.base_alloc_count,
                    c.change_alloc_count,
                    c.delta_alloc_count,
                    opt_s(c.delta_cost_s)
                )?;
            }
            writeln!(out)?;
            writeln!(
                out,
                "{:>12} {:>12} {:>12} {:>10} {:>14}  site {{category}}",
                "base", "change", "delta", "cost", "matched"
            )?;
            for s in &d.sites {
                writeln!(
                    out,
                    "{:>12} {:>12} {:>+12} {:>10} {:>14}  {} {{{}}}",
                    s.base_alloc_count,
                    s.change_alloc_count,
                    s.delta_alloc_count,
                    opt_s(s.delta_cost_s),
                    s.matched,
                    naming::with_distinction(&with_callers(&s.name, &s.callers), &s.distinction),
                    s.category
                )?;
            }
            Ok(())
        }
    }
}

/// Writes a report's description.
pub fn info(out: &mut dyn Write, i: &Info, format: Format) -> io::Result<()> {
    if format != Format::Table {
        serde_json::to_writer_pretty(&mut *out, i)?;
        return writeln!(out);
    }
    let or_unknown = |s: &str| {
        if s.is_empty() {
            "unknown".to_owned()
        } else {
            s.to_owned()
        }
    };
    writeln!(out, "report    {}", i.report)?;
    writeln!(
        out,
        "mode      {} (each stack stands for {} allocation{}; {}), {} frames per stack",
        i.mode,
        i.sample_interval,
        if i.sample_interval == 1 { "" } else { "s" },
        if i.lifetime_interval == 0 {
            "no lifetimes followed".to_owned()
        } else {
            format!("1 block in {} followed to its free", i.lifetime_interval)
        },
        i.stack_depth
    )?;
    writeln!(out, "command   {}", i.command_line.join(" "))?;
    writeln!(
        out,
        "host      {} ({}, {} core{}), {} thread{} recorded",
        or_unknown(&i.host),
        or_unknown(&i.cpu),
        i.cores,
        if i.cores == 1 { "" } else { "s" },
        i.threads,
        if i.threads == 1 { "" } else { "s" }
    )?;
    writeln!(
        out,
        "run       {}{}",
        seconds(i.duration_s),
        i.incomplete.as_deref().map_or(String::new(), |why| format!(
            ", incomplete: written on {why}"
        ))
    )?;
    writeln!(
        out,
        "totals    {} allocations, {} reallocs, {:.1} MiB requested, {} temporaries, peak {:.1} MiB live (within {:.1} MiB)",
        i.alloc_count,
        i.realloc_count,
        i.bytes_requested as f64 / MIB,
        i.temporary_count,
        i.peak_live_bytes as f64 / MIB,
        i.peak_live_bytes_error_bytes as f64 / MIB
    )?;
    writeln!(
        out,
        "heap      {}",
        match (&i.heap_peak, i.heap_interval) {
            (_, 0) => "sampling off (ALLOC_TRACE_HEAP)".to_owned(),
            (Some(p), n) => format!(
                "sampled every {:.1} MiB; kept peak {:.1} MiB at {} in {} (`analyzer peak`)",
                n as f64 / MIB,
                p.live_bytes as f64 / MIB,
                seconds(p.time_ns as f64 * 1e-9),
                p.phase
            ),
            (None, n) => format!("sampled every {:.1} MiB; no peak kept", n as f64 / MIB),
        }
    )?;
    if !i.labels.is_empty() {
        let labels: Vec<String> = i.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        writeln!(out, "labels    {}", labels.join(", "))?;
    }
    writeln!(out)?;
    writeln!(
        out,
        "{:<24} {:>10} {:>12} {:>14} {:>12} {:>8}",
        "phase", "wall", "allocs", "bytes", "temps", "sites"
    )?;
    for p in &i.phases {
        writeln!(
            out,
            "{:<24} {:>10} {:>12} {:>14} {:>12} {:>8}",
            p.phase,
            seconds(p.wall_s),
            p.alloc_count,
            p.bytes_requested,
            p.temporary_count,
            p.sites
        )?;
    }
    writeln!(out, "(main: the run's time outside the named phases)")?;
    writeln!(out)?;
    let d = &i.dropped;
    let dropped: Vec<String> = [
        (d.late_alloc_count, "allocations after their thread's exit"),
        (d.late_free_count, "frees after their thread's exit"),
        (
            d.followed_skipped,
            "blocks not followed (65,536 followed at once)",
        ),
        (
            d.followed_dropped,
            "followed blocks dropped when recording of frees stopped",
        ),
        (
            d.stacks_at_depth_limit as u64,
            "stacks cut at the depth limit",
        ),
        (
            d.foreign_stack_walks,
            "allocations off the thread's stack (no frames)",
        ),
        (d.folded_sites, "sites past the tracer's cap, folded"),
        (
            d.stacks_ending_early,
            "stacks ending before main or a thread's start",
        ),
    ]
    .into_iter()
    .filter(|(n, _)| *n > 0)
    .map(|(n, what)| format!("{n} {what}"))
    .chain(
        d.phases_merged
            .then(|| "phases past the 15th merged".to_owned()),
    )
    .collect();
    writeln!(
        out,
        "dropped   {}",
        if dropped.is_empty() {
            "nothing".to_owned()
        } else {
            dropped.join("; ")
        }
    )?;
    let tables: Vec<String> = i
        .tables
        .iter()
        .map(|t| format!("{} ({} rows)", t.file, t.rows))
        .collect();
    writeln!(out, "tables    {}", tables.join(", "))
}

const MIB: f64 = (1u64 << 20) as f64;

/// Writes a summary of a calibration (the JSON file holds everything).
pub fn calibration(out: &mut dyn Write, c: &Calibration) -> io::Result<()> {
    use crate::calibrate::Pattern;
    writeln!(
        out,
        "host {} ({}, {} cores), {}",
        c.host, c.cpu, c.cores, c.allocator
    )?;
    writeln!(
        out,
        "{:>10} {:>10} {:>10} {:>10}  ns per malloc+free pair (median of {})",
        "size", "temporary", "batch", "scattered", c.repetitions
    )?;
    let mut sizes: Vec<u64> = c.pairs.iter().map(|p| p.size_bytes).collect();
    sizes.dedup();
    for size in sizes {
        writeln!(
            out,
            "{:>10} {:>10.1} {:>10.1} {:>10.1}",
            size,
            c.pair_ns(size, Pattern::Temporary),
            c.pair_ns(size, Pattern::Batch),
            c.pair_ns(size, Pattern::Scattered)
        )?;
    }
    writeln!(out, "memcpy {:.1} bytes/ns", c.copy_bytes_per_ns)?;
    for o in &c.operations {
        writeln!(
            out,
            "{}: {:.1} ns per event, {:.1} ns beyond the allocator ({})",
            o.name, o.ns, o.beyond_allocator_ns, o.what
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn object(row: impl Serialize) -> serde_json::Map<String, Value> {
        match serde_json::to_value(row).unwrap() {
            Value::Object(m) => m,
            other => panic!("not an object: {other}"),
        }
    }

    /// Every field of the JSON row is the CSV row's column of that name, with the same
    /// value; the CSV row's other columns but `kind` are empty.
    fn same_fields(csv_row: impl Serialize, json_row: impl Serialize) {
        let (c, j) = (object(csv_row), object(json_row));
        for (k, v) in &j {
            assert_eq!(c.get(k), Some(v), "{k}");
        }
        for (k, v) in &c {
            assert!(j.contains_key(k) || k == "kind" || v.is_null(), "{k}: {v}");
        }
    }

    #[test]
    fn cost_and_diff_csv_columns_are_the_json_fields() {
        let site = SiteCost {
            rank: 1,
            site_id: 2,
            name: "f (a.rs:1)".into(),
            callers: "g (b.rs:2)".into(),
            distinction: "via h (c.rs:3)".into(),
            category: "cat".into(),
            alloc_count: 3,
            realloc_count: 4,
            temporary_count: 5,
            direct_s: 0.5,
            indirect_s: 0.25,
            total_s: 0.75,
            phase_share: Some(0.125),
        };
        same_fields(CostCsvRow::from(&site), &site);
        let category = CategoryCost {
            category: "cat".into(),
            sites: 6,
            alloc_count: 7,
            direct_s: 1.5,
            indirect_s: 2.5,
            total_s: 4.0,
            phase_share: None,
        };
        same_fields(CostCsvRow::from(&category), &category);
        let site = SiteDelta {
            name: "f (a.rs:1)".into(),
            callers: "g (b.rs:2)".into(),
            distinction: "via h (c.rs:3)".into(),
            matched: crate::diff::BY_PATH.into(),
            category: "cat".into(),
            base_alloc_count: 8,
            change_alloc_count: 9,
            delta_alloc_count: 1,
            delta_bytes_requested: -10,
            delta_cost_s: Some(-0.5),
        };
        same_fields(DiffCsvRow::from(&site), &site);
        let category = CategoryDelta {
            category: "cat".into(),
            base_alloc_count: 11,
            change_alloc_count: 13,
            delta_alloc_count: 2,
            delta_bytes_requested: 12,
            delta_cost_s: None,
        };
        same_fields(DiffCsvRow::from(&category), &category);
    }

    #[test]
    fn csv_without_rows_is_the_header_of_the_json_fields() {
        let mut out = Vec::new();
        sites(&mut out, &[], Format::Csv).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text.lines().count(), 1, "{text}");
        let mut header: Vec<&str> = text.trim_end().split(',').collect();
        header.sort_unstable();
        let json = object(RankedSite::default());
        assert_eq!(header, json.keys().map(String::as_str).collect::<Vec<_>>());
    }

    #[test]
    fn a_closed_pipe_stays_a_broken_pipe_through_csv() {
        struct Closed;
        impl Write for Closed {
            fn write(&mut self, _: &[u8]) -> io::Result<usize> {
                Err(io::ErrorKind::BrokenPipe.into())
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let e = sites(&mut Closed, &[RankedSite::default()], Format::Csv).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::BrokenPipe);
    }
}
