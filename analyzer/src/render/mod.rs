//! Rendering results for people (aligned tables) and programs (JSON, CSV).
//!
//! JSON and CSV are written from the same serde rows, so a CSV column has the name,
//! and its cells the values, of the JSON field it comes from. `top` and `categories`
//! are written here, `cost` and `diff` in `cost_diff`, `info` and `calibrate` in
//! `info`, `check` in `check` (`peak` and `leaks` in `memory::render`).

mod check;
mod cost_diff;
mod info;

pub use check::{checked, tightened};
pub use cost_diff::{cost, diff, diff_totals};
pub use info::{calibration, info};

use crate::category_totals::CategoryTotals;
use crate::naming;
use crate::rank::RankedSite;
use crate::sampling_noise::relative;
use serde::Serialize;
use std::io::{self, Write};

/// Output format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Aligned text.
    Table,
    /// JSON: an array of objects (`top`, `categories`, `check`) or one object.
    Json,
    /// CSV with a header row.
    Csv,
}

pub(crate) fn pct(x: f64) -> String {
    format!("{:.1}%", 100.0 * x)
}

/// Bytes in the unit that suits their size (binary units, as the tracer prints), and
/// heap sampling's interval in words.
pub use crate::units::{bytes, heap_every};

/// Seconds with a precision that suits their size, down to nanoseconds: a site of a
/// few cheap allocations costs tens of them.
pub(crate) fn seconds(s: f64) -> String {
    in_unit(s, unit_of(s))
}

/// Two times in one unit, the one [`seconds`] gives the larger, so that `a -> b`
/// reads at a glance (`0.10 s -> 0.09 s`, not `0.10 s -> 90.00 ms`).
pub(crate) fn seconds_pair(a: f64, b: f64) -> (String, String) {
    let unit = unit_of(if a.abs() >= b.abs() { a } else { b });
    (in_unit(a, unit), in_unit(b, unit))
}

/// A unit for seconds: its factor, decimals and name.
type TimeUnit = (f64, usize, &'static str);

/// The unit [`seconds`] prints `s` in: each from where the finer one's digits would
/// round up into it.
fn unit_of(s: f64) -> TimeUnit {
    let a = zeroed(s).abs();
    if a >= 9.995 {
        (1.0, 1, "s")
    } else if a >= 0.099995 {
        (1.0, 2, "s")
    } else if a >= 9.995e-5 {
        (1e3, 2, "ms")
    } else if a >= 9.95e-7 {
        (1e6, 1, "us")
    } else {
        (1e9, 0, "ns")
    }
}

fn in_unit(s: f64, (factor, decimals, name): TimeUnit) -> String {
    format!("{:.*} {name}", decimals, zeroed(s) * factor)
}

/// What rounds to zero in the finest unit (1 ns: a sum's leftovers are far below
/// it), and -0, as 0.
fn zeroed(s: f64) -> f64 {
    if s.abs() <= 5e-10 { 0.0 } else { s }
}

/// A lifetime in nanoseconds, in the unit that suits it: the figures are the
/// lifetime histogram's bucket values, so digits past the fourth say nothing.
pub(crate) fn lifetime(ns: u64) -> String {
    let n = ns as f64;
    if ns < 1_000 {
        format!("{ns} ns")
    } else if n < 999_950.0 {
        format!("{:.1} us", n / 1e3)
    } else if n < 999_950_000.0 {
        format!("{:.1} ms", n / 1e6)
    } else {
        format!("{:.1} s", n / 1e9)
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

/// The rows of a category table worth a line (those `used` accepts: with sites or
/// allocations), and a line after them for the others, if any: a program other than
/// a bellperson prover matches none of most built-in rules, and a dozen zero rows
/// would hide its one or two. JSON and CSV keep every row. `sampled`: the table is
/// of a `sample:N` report (or a diff with one), where a category that recorded
/// nothing may still have had allocations.
pub(crate) fn used_categories<T>(
    rows: &[T],
    used: impl Fn(&T) -> bool,
    sampled: bool,
    hidden: impl Fn(&T) -> Option<u64>,
) -> (Vec<&T>, Option<String>) {
    let shown: Vec<&T> = rows.iter().filter(|r| used(r)).collect();
    let left = rows.len() - shown.len();
    let nothing = if sampled {
        "nothing sampled"
    } else {
        "nothing"
    };
    // What a category with nothing sampled may hide (`sampling_noise::unsampled_bound`,
    // the same for each; JSON gives it each).
    let hides = rows
        .iter()
        .find(|r| !used(r))
        .and_then(&hidden)
        .map_or(String::new(), |n| {
            format!(", each may hide up to about {n} allocations")
        });
    let note = (left > 0).then(|| {
        if shown.is_empty() {
            // Not "more": none was shown.
            return format!(
                "(no category has anything{} in it{hides}: --format json lists every one)",
                if sampled { " sampled" } else { "" }
            );
        }
        format!(
            "({left} more {} with {nothing} in {}{hides}: --format json lists every one)",
            if left == 1 { "category" } else { "categories" },
            if left == 1 { "it" } else { "them" }
        )
    });
    (shown, note)
}

/// The width of a table's column of names: `least`, or the longest name shown (a
/// user's rules or phases may name things at length), so that the columns after it
/// stay aligned.
pub(crate) fn name_width<'a>(names: impl Iterator<Item = &'a str>, least: usize) -> usize {
    names
        .map(|n| n.chars().count())
        .max()
        .unwrap_or(0)
        .max(least)
}

/// [`name_width`] of a category column, 40 at least.
pub(crate) fn category_width<'a>(names: impl Iterator<Item = &'a str>) -> usize {
    name_width(names, 40)
}

pub(crate) fn opt_pct(x: Option<f64>) -> String {
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

/// How a table of ranked sites heads its rows.
#[derive(Clone, Copy, Debug)]
pub struct SitesTable {
    /// What a row is (`site`, `function`, `category`: [`crate::rank::GroupBy::row_name`]).
    pub rows: &'static str,
    /// The report records one allocation in N (`sample:N`): a column of spreads,
    /// even with no row to fill it.
    pub sampled: bool,
}

/// Writes ranked sites.
pub fn sites(
    out: &mut dyn Write,
    sites: &[RankedSite],
    table: SitesTable,
    format: Format,
) -> io::Result<()> {
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
            // A column of sampling's spread only in a `sample:N` report.
            let sampled = table.sampled;
            writeln!(
                out,
                "{:>4} {:>13}{} {:>7} {:>14}{} {:>6}{} {:>9} {:>12} {:>9}{}  {}",
                "rank",
                // What sites count and rank by: a realloc that moves a block is
                // an allocation too.
                "alloc+realloc",
                spread(sampled, "±"),
                "share",
                "bytes",
                spread(sampled, "±"),
                "temps",
                spread(sampled, "±"),
                "class",
                "lifetime",
                "cost",
                count(&"sites"),
                table.rows
            )?;
            for s in sites {
                let calls = s.alloc_count.saturating_add(s.realloc_count);
                writeln!(
                    out,
                    "{:>4} {:>13}{} {:>7} {:>14}{} {:>6}{} {:>9} {:>12} {:>9}{}  {}",
                    s.rank,
                    calls,
                    spread(sampled, relative(s.alloc_count_noise, calls)),
                    pct(s.share),
                    s.bytes_requested,
                    spread(
                        sampled,
                        relative(s.bytes_requested_noise, s.bytes_requested)
                    ),
                    format!("{:.0}%", 100.0 * s.temporary_share),
                    spread(
                        sampled,
                        // In points of the share beside it, which cannot be off
                        // by more than all of it.
                        relative(s.temporary_count_noise.map(|b| b.min(calls)), calls)
                    ),
                    // In the unit that suits it, as `peak` prints classes.
                    bytes(s.main_size_class_bytes as f64),
                    s.lifetime_ns_median.map_or("-".to_owned(), lifetime),
                    s.cost_s.map_or("-".to_owned(), seconds),
                    count(&s.sites),
                    naming::with_distinction(&with_callers(&s.name, &s.callers), &s.distinction)
                )?;
            }
            if sampled {
                writeln!(out, "\n{SAMPLED_FOOTER}")?;
            }
            Ok(())
        }
    }
}

/// The `±` column's cell (`sampled`: the table is of a `sample:N` report), or
/// nothing: an exact report's table has no such column.
pub(crate) fn spread(sampled: bool, cell: impl std::fmt::Display) -> String {
    if sampled {
        format!(" {cell:>6}")
    } else {
        String::new()
    }
}

/// Under a table of a `sample:N` report's rows: what its `±` columns say.
pub(crate) const SAMPLED_FOOTER: &str = "± after a column is how far sampling alone may put it from the truth (two \
     standard errors): a share of the figure (±6%), after top's temps in points of \
     that share, and a count (±300) where the figure is 0 or the bound ten times it or \
     more. A sample:N report records one allocation in N \
     and counts it N times, so its counts, bytes, temporaries and costs are estimates, \
     and a row of few recorded allocations is rough. Bytes spread wider than counts where \
     block sizes vary, and a rare large block may go unsampled altogether, which no ± can \
     show: when the sites' bytes stray from the exact total, a note on standard error \
     says so";

/// Writes category totals.
pub fn categories(out: &mut dyn Write, cats: &[CategoryTotals], format: Format) -> io::Result<()> {
    match format {
        Format::Json => {
            serde_json::to_writer_pretty(&mut *out, cats)?;
            writeln!(out)
        }
        Format::Csv => csv_rows(out, cats),
        Format::Table => {
            let sampled = cats.iter().any(|c| c.alloc_count_noise.is_some());
            let (shown, left) =
                used_categories(cats, |c| c.sites > 0, sampled, |c| c.alloc_count_noise);
            let w = category_width(shown.iter().map(|c| c.category.as_str()));
            writeln!(
                out,
                "{:<w$} {:>6} {:>13}{} {:>7} {:>14}{} {:>12}{}  top site",
                "category",
                "sites",
                "alloc+realloc",
                spread(sampled, "±"),
                "share",
                "bytes",
                spread(sampled, "±"),
                "temporaries",
                spread(sampled, "±"),
            )?;
            for c in shown {
                let calls = c.alloc_count.saturating_add(c.realloc_count);
                writeln!(
                    out,
                    "{:<w$} {:>6} {:>13}{} {:>7} {:>14}{} {:>12}{}  {}",
                    c.category,
                    c.sites,
                    calls,
                    spread(sampled, relative(c.alloc_count_noise, calls)),
                    pct(c.share),
                    c.bytes_requested,
                    spread(
                        sampled,
                        relative(c.bytes_requested_noise, c.bytes_requested)
                    ),
                    c.temporary_count,
                    spread(
                        sampled,
                        relative(c.temporary_count_noise, c.temporary_count)
                    ),
                    c.top_site
                )?;
            }
            if let Some(left) = left {
                writeln!(out, "{left}")?;
            }
            if sampled {
                writeln!(out, "\n{SAMPLED_FOOTER}")?;
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    /// A serde row as a JSON object.
    pub(super) fn object(row: impl Serialize) -> serde_json::Map<String, Value> {
        match serde_json::to_value(row).unwrap() {
            Value::Object(m) => m,
            other => panic!("not an object: {other}"),
        }
    }

    /// A table of single sites of an exact report.
    const SITES: SitesTable = SitesTable {
        rows: "site",
        sampled: false,
    };

    #[test]
    fn a_tables_rows_are_headed_by_what_they_are_and_a_sampled_one_keeps_its_spreads() {
        let table = |t: SitesTable, rows: &[RankedSite]| {
            let mut out = Vec::new();
            sites(&mut out, rows, t, Format::Table).unwrap();
            String::from_utf8(out).unwrap()
        };
        let header = |text: &str| text.lines().next().unwrap().to_owned();
        let functions = SitesTable {
            rows: "function",
            ..SITES
        };
        assert!(header(&table(functions, &[])).ends_with("  function"));
        assert!(header(&table(SITES, &[])).ends_with("  site"));
        // With no row to show, a sampled report's table still has its spreads.
        let sampled = table(
            SitesTable {
                sampled: true,
                ..SITES
            },
            &[],
        );
        assert!(
            header(&sampled).contains("alloc+realloc      ±"),
            "{sampled}"
        );
        assert!(sampled.contains(SAMPLED_FOOTER), "{sampled}");
        assert!(!header(&table(SITES, &[])).contains('±'));
    }

    #[test]
    fn csv_without_rows_is_the_header_of_the_json_fields() {
        let mut out = Vec::new();
        sites(&mut out, &[], SITES, Format::Csv).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text.lines().count(), 1, "{text}");
        let mut header: Vec<&str> = text.trim_end().split(',').collect();
        header.sort_unstable();
        let json = object(RankedSite::default());
        assert_eq!(header, json.keys().map(String::as_str).collect::<Vec<_>>());
    }

    #[test]
    fn lifetimes_print_in_the_unit_that_suits_them() {
        assert_eq!(lifetime(143), "143 ns");
        assert_eq!(lifetime(9_999), "10.0 us");
        assert_eq!(lifetime(5_767_167), "5.8 ms");
        assert_eq!(lifetime(999_999), "1.0 ms");
        assert_eq!(lifetime(180_223), "180.2 us");
        assert_eq!(lifetime(251_658_239), "251.7 ms");
        assert_eq!(lifetime(12_884_901_887), "12.9 s");
    }

    #[test]
    fn a_long_category_name_widens_its_column_and_keeps_the_others_aligned() {
        let row = |name: &str| crate::category_totals::CategoryTotals {
            category: name.to_owned(),
            sites: 3,
            alloc_count: 10,
            ..Default::default()
        };
        let long = "a category named by a user's rules at more than forty characters";
        let mut out = Vec::new();
        categories(&mut out, &[row("short"), row(long)], Format::Table).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        // The column of sites ends at the same place in the header and in each row.
        let end = |line: &str, word: &str| line.find(word).map(|i| i + word.len());
        let header = end(lines[0], "sites").unwrap();
        assert_eq!(header, long.len() + 7, "{text}");
        for line in &lines[1..3] {
            assert_eq!(end(line, " 3"), Some(header), "{text}");
        }
    }

    #[test]
    fn unused_categories_are_counted_as_more_only_after_some_shown() {
        let rows = [0, 3, 0];
        let (shown, note) = used_categories(&rows, |n| *n > 0, false, |_| None);
        assert_eq!(shown, [&3]);
        assert_eq!(
            note.unwrap(),
            "(2 more categories with nothing in them: --format json lists every one)"
        );
        let (shown, note) = used_categories(&[0, 0], |n: &i32| *n > 0, false, |_| None);
        assert!(shown.is_empty());
        assert_eq!(
            note.unwrap(),
            "(no category has anything in it: --format json lists every one)"
        );
        // In a sample:N report an empty category may only have gone unrecorded.
        let (_, note) = used_categories(&[0, 3], |n: &i32| *n > 0, true, |_| None);
        assert_eq!(
            note.unwrap(),
            "(1 more category with nothing sampled in it: --format json lists every one)"
        );
        let (_, note) = used_categories(&[0], |n: &i32| *n > 0, true, |_| None);
        assert_eq!(
            note.unwrap(),
            "(no category has anything sampled in it: --format json lists every one)"
        );
        // With what each may hide (the same for each: the first one's).
        let hides = |n: &i32| (*n <= 0).then_some(300);
        let (_, note) = used_categories(&[0, 3, -1], |n: &i32| *n > 0, true, hides);
        assert_eq!(
            note.unwrap(),
            "(2 more categories with nothing sampled in them, each may hide up to about \
             300 allocations: --format json lists every one)"
        );
        let (_, note) = used_categories(&[0], |n: &i32| *n > 0, true, hides);
        assert_eq!(
            note.unwrap(),
            "(no category has anything sampled in it, each may hide up to about 300 \
             allocations: --format json lists every one)"
        );
    }

    #[test]
    fn seconds_that_round_to_zero_print_as_zero() {
        // A sum's rounding leftover of either sign, and anything under 0.5 ns.
        for s in [5.55e-17, -5.55e-17, -0.0, 4.9e-10, -4.9e-10] {
            assert_eq!(seconds(s), "0 ns", "{s}");
        }
        // A few cheap allocations: nanoseconds, not 0.0 us.
        assert_eq!(seconds(4.2e-8), "42 ns");
        assert_eq!(seconds(-5e-7), "-500 ns");
        assert_eq!(seconds(2.5e-6), "2.5 us");
        assert_eq!(seconds(9.99e-7), "1.0 us");
        assert_eq!(seconds(0.25), "0.25 s");
        // At each unit's edge, never "100.0 us", "100.00 ms", "10.00 s" or "-0 ns".
        assert_eq!(seconds(9.9999e-5), "0.10 ms");
        assert_eq!(seconds(0.0999996), "0.10 s");
        assert_eq!(seconds(9.996), "10.0 s");
        assert_eq!(seconds(-5e-10), "0 ns");
    }

    #[test]
    fn the_two_sides_of_an_arrow_share_a_unit() {
        let pair = |a, b| {
            let (a, b) = seconds_pair(a, b);
            format!("{a} -> {b}")
        };
        assert_eq!(pair(0.1, 0.09), "0.10 s -> 0.09 s");
        assert_eq!(pair(0.09, 0.1), "0.09 s -> 0.10 s");
        assert_eq!(pair(2e-3, 4.2e-8), "2.00 ms -> 0.00 ms");
        assert_eq!(pair(0.0, 0.0), "0 ns -> 0 ns");
        // The unit alone is the larger side's: each as `seconds` prints that one.
        assert_eq!(seconds_pair(12.0, 0.5).0, seconds(12.0));
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
        let e = sites(&mut Closed, &[RankedSite::default()], SITES, Format::Csv).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::BrokenPipe);
    }
}
