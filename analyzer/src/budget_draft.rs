//! A first budget from a report (`analyzer budget`): every limit `analyzer check`
//! can answer on that report, set a margin above the report's figure, written as a
//! commented TOML file to edit and commit. The figures come from [`budget::check`]
//! itself, run against limits that cannot fail, so a draft and a later check read
//! every figure the same way.
//!
//! Left out: site limits (a site's name moves with the code, and a name that no
//! site holds any more is an error), categories in `count` mode or with stacks cut
//! short (no sites to share out), the catch-all category, categories under
//! [`MIN_SHARE`] of their phase, temporaries unless the report is in `sites` mode
//! (exact there; estimates in `sample:N`, none in `count`), allocations per row under
//! [`MIN_PER_ROW`], and phases that allocated nothing.

use crate::Error;
use crate::budget::{self, Budget, CategoryLimit, PhaseLimits};
use crate::categories::{Category, UNMATCHED};
use crate::category_totals;
use crate::report::Report;
use std::fmt::Write as _;
use std::path::Path;

/// Categories that take less of their phase's allocations than this get no limit:
/// their share moves by more than a margin from small changes.
pub const MIN_SHARE: f64 = 0.05;

/// Phases that allocate less than this per row synthesized get no per-row limit.
pub const MIN_PER_ROW: f64 = 0.01;

/// The labels a draft requires of a report: what says which workload it is.
pub const WORKLOAD_LABELS: [&str; 2] = ["circuit", "prover"];

/// How far above the report's figures the limits lie, as fractions (0.05: 5 %).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Margins {
    /// For counts, bytes, allocations per row and category shares.
    pub counts: f64,
    /// For peak live bytes and peak RSS, which move with thread timing.
    pub memory: f64,
}

impl Default for Margins {
    fn default() -> Self {
        Margins {
            counts: 0.05,
            memory: 0.15,
        }
    }
}

/// The draft budget of `report`, as TOML text with a comment per limit giving the
/// report's figure. `source` is how the header names the report; `rules` are the
/// categories' (the built-in ones, or a file's).
pub fn draft(
    report: &Report,
    rules: &[Category],
    margins: Margins,
    source: &str,
) -> Result<String, Error> {
    let probe = probe(report, rules);
    let checked = budget::check(&probe, report, rules, Path::new(source))?;
    let figure = |phase: Option<&str>, limit: &str| {
        checked
            .iter()
            .find(|c| c.phase.as_deref() == phase && c.limit == limit)
            .map(|c| c.found)
    };
    let mut out = String::new();
    let mode = &report.manifest.mode;
    let pct = |m: f64| format!("{:.0} %", m * 100.0);
    let _ = writeln!(
        out,
        "# Allocation budget drafted by `analyzer budget` from {source} (mode {mode}).\n\
         # Every limit is a maximum, {} above the report's figure ({} for peak live\n\
         # bytes and peak RSS, which move with thread timing); the comments give the\n\
         # figures. Edit freely: a limit left out is not checked. Check a run with\n\
         #   analyzer check REPORT --budget THIS_FILE",
        pct(margins.counts),
        pct(margins.memory)
    );
    if probe.labels.is_empty() {
        let _ = writeln!(
            out,
            "# The report has no workload labels ({}): this budget would judge a report\n\
             # of any workload; add a [labels] table of your program's own\n\
             # (alloc_tracer::label) to tie it to one.",
            WORKLOAD_LABELS.join(", ")
        );
    }
    if mode != "sites" {
        let _ = writeln!(
            out,
            "# No temporaries limits: {mode} mode does not count every temporary."
        );
    }
    out.push('\n');
    for (limit, found) in [
        ("peak_live_bytes", figure(None, "peak_live_bytes")),
        ("peak_rss_bytes", figure(None, "peak_rss_bytes")),
    ] {
        if let Some(found) = found {
            line(&mut out, limit, found, margins.memory, Kind::Count);
        }
    }
    if !probe.labels.is_empty() {
        out.push_str("\n# The workload this budget is for: a report of another is not judged.\n");
        out.push_str("[labels]\n");
        for (key, value) in &probe.labels {
            let _ = writeln!(out, "{key} = {}", toml::Value::String(value.clone()));
        }
    }
    for (phase, limits) in &probe.phase {
        let _ = writeln!(out, "\n[phase.{}]", key(phase));
        let p = Some(phase.as_str());
        for (limit, kind, margin) in [
            ("allocs", Kind::Count, margins.counts),
            ("bytes", Kind::Count, margins.counts),
            ("temporaries", Kind::Count, margins.counts),
            ("allocs_per_row", Kind::Ratio, margins.counts),
            ("peak_live_bytes", Kind::Count, margins.memory),
        ] {
            match figure(p, limit) {
                // A phase of a few allocations among millions of rows (setup) has
                // nothing to say per row.
                Some(found) if limit == "allocs_per_row" && found < MIN_PER_ROW => {}
                Some(found) => line(&mut out, limit, found, margin, kind),
                None => {}
            }
        }
        for name in limits.category.keys() {
            // As `check` names it.
            let limit = format!("category.\"{name}\".share");
            if let Some(found) = figure(p, &limit) {
                let _ = writeln!(out, "\n[phase.{}.category.{}]", key(phase), key(name));
                line(&mut out, "share", found, margins.counts, Kind::Share);
            }
        }
    }
    Ok(out)
}

/// How a limit is written.
#[derive(Clone, Copy)]
enum Kind {
    /// A whole number, rounded up.
    Count,
    /// Three decimals, rounded up.
    Ratio,
    /// Three decimals, rounded up, at most 1.
    Share,
}

/// `limit = the figure plus the margin   # report: the figure`.
fn line(out: &mut String, limit: &str, found: f64, margin: f64, kind: Kind) {
    let raised = found * (1.0 + margin);
    let (value, shown) = match kind {
        Kind::Count => (grouped(raised.ceil() as u64), budget::figure(found)),
        Kind::Ratio => (
            format!("{:.3}", (raised * 1000.0).ceil() / 1000.0),
            format!("{found:.3}"),
        ),
        Kind::Share => (
            format!("{:.3}", ((raised * 1000.0).ceil() / 1000.0).min(1.0)),
            format!("{found:.3}"),
        ),
    };
    let _ = writeln!(out, "{limit} = {value}   # report: {shown}");
}

/// `13401937` as `13_401_937`.
fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push('_');
        }
        out.push(c);
    }
    out
}

/// A table key: bare where TOML allows it, quoted otherwise.
fn key(name: &str) -> String {
    let bare = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if bare {
        name.to_owned()
    } else {
        toml::Value::String(name.to_owned()).to_string()
    }
}

/// A budget with every limit `report` can answer, each at the largest value its type
/// holds, so that checking it yields the report's figures and no breach.
fn probe(report: &Report, rules: &[Category]) -> Budget {
    let m = &report.manifest;
    let labels = WORKLOAD_LABELS
        .iter()
        .filter_map(|k| m.labels.get(*k).map(|v| ((*k).to_owned(), v.clone())))
        .collect();
    let has_rows = m
        .labels
        .get("rows")
        .and_then(|r| r.parse::<u64>().ok())
        .is_some_and(|r| r > 0);
    let per_site =
        m.mode != "count" && !report.counts_without_sites() && m.setup_warning().is_none();
    let mut phase = std::collections::BTreeMap::new();
    let mut names: Vec<&str> = report.phases.iter().map(|r| r.phase.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    for name in names {
        let rows = || report.phases.iter().filter(move |r| r.phase == name);
        if rows().all(|r| r.calls() == 0) {
            continue;
        }
        let category = if per_site {
            category_totals::totals(report, rules, Some(name))
                .into_iter()
                .filter(|t| t.category != UNMATCHED && t.share >= MIN_SHARE)
                .map(|t| (t.category, CategoryLimit { share: f64::MAX }))
                .collect()
        } else {
            Default::default()
        };
        phase.insert(
            name.to_owned(),
            PhaseLimits {
                allocs: Some(u64::MAX),
                bytes: Some(u64::MAX),
                temporaries: (m.mode == "sites").then_some(u64::MAX),
                allocs_per_row: has_rows.then_some(f64::MAX),
                peak_live_bytes: rows()
                    .any(|r| r.peak_live_bytes.is_some())
                    .then_some(u64::MAX),
                category,
                site: Default::default(),
            },
        );
    }
    Budget {
        labels,
        peak_live_bytes: Some(u64::MAX),
        peak_rss_bytes: (m.totals.max_rss_bytes > 0).then_some(u64::MAX),
        phase,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_grouped_and_keys_quoted_where_toml_needs_it() {
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(1000), "1_000");
        assert_eq!(grouped(13_401_937), "13_401_937");
        assert_eq!(key("synthesize"), "synthesize");
        assert_eq!(
            key("Boolean::lc temporaries"),
            "\"Boolean::lc temporaries\""
        );
        let mut out = String::new();
        line(&mut out, "share", 0.98, 0.05, Kind::Share);
        assert_eq!(
            out, "share = 1.000   # report: 0.980\n",
            "a share stays at most 1"
        );
    }
}
