//! `analyzer check`'s answer: every limit of the budget with the report's figure and
//! how much of the limit it uses, so that a CI log shows the headroom of a passing run
//! as well as what a failing one exceeded.

use super::{Format, csv_rows};
use crate::budget::{self, Checked};
use serde::Serialize;
use std::io::{self, Write};

/// One checked limit, as JSON and CSV write it.
#[derive(Default, Serialize)]
struct Row<'a> {
    /// The phase, or null (empty in CSV) for a whole-run limit.
    phase: Option<&'a str>,
    /// The limit as the budget file names it.
    limit: &'a str,
    /// The category it limits (a `category."NAME"` limit), else null (empty in CSV).
    category: Option<&'a str>,
    /// The site name fragment it limits (a `site."TEXT"` limit), else null.
    site: Option<&'a str>,
    /// What it limits: `allocs`, `bytes`, `temporaries`, `share`, `allocs_per_row`,
    /// `peak_live_bytes`, `peak_rss_bytes`.
    measure: &'a str,
    /// The report's figure (written as an integer when whole, as counts are).
    #[serde(serialize_with = "budget::whole_or_fraction")]
    found: f64,
    /// The budget's.
    #[serde(serialize_with = "budget::whole_or_fraction")]
    budget: f64,
    /// Whether the figure is over the budget.
    over: bool,
}

/// The name under `table` in a phase limit's key (`phase.P.category."NAME".share`),
/// if it is under one.
fn part_of<'a>(c: &'a Checked, table: &str) -> Option<&'a str> {
    match c.key.as_slice() {
        [_, _, t, name, _] if t == table => Some(name),
        _ => None,
    }
}

/// The share of the limit the report uses (`-` for a limit of 0); past ten times the
/// limit, as a multiple (`5.1e7x`), which fits the column.
fn used(c: &Checked) -> String {
    if c.budget > 0.0 {
        let share = c.found / c.budget;
        if share < 10.0 {
            format!("{:.1}%", 100.0 * share)
        } else if share < 1e5 {
            format!("{share:.0}x")
        } else {
            format!("{share:.1e}x")
        }
    } else {
        "-".to_owned()
    }
}

/// Writes the checked limits.
pub fn checked(out: &mut dyn Write, checked: &[Checked], format: Format) -> io::Result<()> {
    let rows: Vec<Row> = checked
        .iter()
        .map(|c| Row {
            phase: c.phase.as_deref(),
            limit: &c.limit,
            category: part_of(c, "category"),
            site: part_of(c, "site"),
            measure: c.key.last().map_or("", String::as_str),
            found: c.found,
            budget: c.budget,
            over: c.over(),
        })
        .collect();
    match format {
        Format::Json => {
            serde_json::to_writer_pretty(&mut *out, &rows)?;
            writeln!(out)
        }
        Format::Csv => csv_rows(out, &rows),
        Format::Table => {
            let names: Vec<String> = checked.iter().map(Checked::name).collect();
            let width = names.iter().map(|n| n.chars().count()).max().unwrap_or(0);
            let width = width.max("limit".len());
            writeln!(
                out,
                "{:<width$} {:>14} {:>14} {:>7}",
                "limit", "report", "budget", "used"
            )?;
            for (c, name) in checked.iter().zip(&names) {
                writeln!(
                    out,
                    "{name:<width$} {:>14} {:>14} {:>7}{}",
                    budget::figure(c.found),
                    budget::figure(c.budget),
                    used(c),
                    if c.over() { "  over budget" } else { "" }
                )?;
            }
            let over = checked.iter().filter(|c| c.over()).count();
            let limits = match checked.len() {
                1 => "1 limit".to_owned(),
                n => format!("{n} limits"),
            };
            match over {
                0 => writeln!(out, "{limits} checked, all within budget"),
                n => writeln!(out, "{limits} checked, {n} over budget"),
            }
        }
    }
}

/// `analyzer budget --tighten`'s answer: each limit lowered, with the report's
/// figure, then how many stayed and why.
pub fn tightened(out: &mut dyn Write, t: &crate::budget::tighten::Tightened) -> io::Result<()> {
    if !t.lowered.is_empty() {
        let width = t
            .lowered
            .iter()
            .map(|l| l.name.chars().count())
            .max()
            .unwrap_or(0)
            .max("limit".len());
        writeln!(
            out,
            "{:<width$} {:>14} {:>14} {:>14}",
            "limit", "report", "was", "now"
        )?;
        for l in &t.lowered {
            writeln!(
                out,
                "{:<width$} {:>14} {:>14} {:>14}",
                l.name,
                budget::figure(l.found),
                budget::figure(l.was),
                budget::figure(l.now)
            )?;
        }
    }
    let limits = |n: usize| match n {
        1 => "1 limit".to_owned(),
        n => format!("{n} limits"),
    };
    for (name, why) in &t.left {
        writeln!(out, "left as it is: {name} ({why})")?;
    }
    write!(
        out,
        "{} lowered, {} already within the margin",
        limits(t.lowered.len()),
        t.kept
    )?;
    match t.over.len() {
        0 => writeln!(out),
        n => writeln!(
            out,
            ", {} over budget and left as they are (`analyzer check` fails on them)",
            n
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checked(found: f64, budget: f64) -> Checked {
        Checked {
            phase: None,
            limit: "allocs".into(),
            found,
            budget,
            key: Vec::new(),
        }
    }

    #[test]
    fn the_share_used_fits_its_column() {
        assert_eq!(used(&checked(50.0, 100.0)), "50.0%");
        assert_eq!(used(&checked(999.0, 100.0)), "999.0%");
        assert_eq!(used(&checked(1_000.0, 100.0)), "10x");
        assert_eq!(used(&checked(51_008_000.0, 1.0)), "5.1e7x");
        assert_eq!(used(&checked(5.0, 0.0)), "-");
    }
}
