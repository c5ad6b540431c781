//! A first budget from a report (`analyzer budget`): every limit `analyzer check`
//! can answer on that report, set a margin above the report's figure, written as a
//! commented TOML file to edit and commit. The figures come from [`budget::check`]
//! itself, run against limits that cannot fail, so a draft and a later check read
//! every figure the same way.
//!
//! Left out: site limits (a site's name moves with the code, and a name that no
//! site holds any more is an error); category limits unless the report is in `sites`
//! mode (estimates in `sample:N`, whose noise a margin of a few per cent does not
//! cover; none in `count` or with stacks cut short), the catch-all category and
//! categories under [`MIN_SHARE`] of their phase; temporaries unless in `sites` mode
//! (exact there); allocations per row under [`MIN_PER_ROW`]; figures of 0 (any event
//! would breach them); phases of fewer than [`MIN_PHASE_ALLOCS`] allocations (a
//! driver's own argument parsing, which moves with its paths); labels that change
//! between builds ([`BUILD_LABELS`]). Outside `count` mode the peak RSS limit is
//! written commented out: the tracer's own memory, part of it, grows with the
//! threads recording. A category is limited by its
//! allocations: its share, which rises when other categories shrink, is written
//! commented out.

use crate::Error;
use crate::budget::{self, Budget, CategoryLimit, PhaseLimits};
use crate::categories::{Category, UNMATCHED};
use crate::category_totals;
use crate::report::Report;
use std::fmt::Write as _;
use std::path::Path;

/// Categories that take less of their phase's allocations than this get no limit:
/// they move by more than a margin from small changes.
pub const MIN_SHARE: f64 = 0.05;

/// Phases of fewer allocations and reallocs than this get no limits: a few more or
/// fewer (a longer path parsed, one more thread started) is not a regression.
pub const MIN_PHASE_ALLOCS: u64 = 100;

/// Phases that allocate less than this per row synthesized get no per-row limit.
pub const MIN_PER_ROW: f64 = 0.01;

/// The largest margin: past it a limit checks nothing.
pub const MAX_MARGIN: f64 = 10.0;

/// Labels a draft does not require of a report, because they change between builds
/// of one workload: synth-driver's `variant` (the patch) and `rows` (a patch to the
/// circuit may change its rows; `allocs_per_row` uses them). Every other label, the
/// program's own included (`alloc_tracer::label`), names the workload.
pub const BUILD_LABELS: [&str; 2] = ["variant", "rows"];

/// How far above the report's figures the limits lie, as fractions (0.05: 5 %).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Margins {
    /// For counts, bytes, allocations per row and categories.
    pub counts: f64,
    /// For peak live bytes and peak RSS, which move with thread timing.
    pub memory: f64,
}

impl Margins {
    /// Refuses a margin below 0 or past [`MAX_MARGIN`]; `path` is what the error names.
    pub fn check(&self, path: &Path) -> Result<(), Error> {
        for m in [self.counts, self.memory] {
            if !(0.0..=MAX_MARGIN).contains(&m) {
                return Err(Error::Budget {
                    path: path.into(),
                    reason: format!(
                        "a margin of {} % is not between 0 and {:.0} %",
                        m * 100.0,
                        MAX_MARGIN * 100.0
                    ),
                });
            }
        }
        Ok(())
    }
}

/// How the limit at `key` (`Checked::key`) is written: a category's share,
/// allocations per row, or a count (allocations, bytes, temporaries, peaks).
pub(crate) fn kind_of(key: &[String]) -> Kind {
    match key.last().map(String::as_str) {
        Some("share") => Kind::Share,
        Some("allocs_per_row") => Kind::Ratio,
        _ => Kind::Count,
    }
}

/// The margin that applies to the limit at `key`: the memory one for peaks.
pub(crate) fn margin_of(key: &[String], margins: Margins) -> f64 {
    match key.last().map(String::as_str) {
        Some("peak_live_bytes" | "peak_rss_bytes") => margins.memory,
        _ => margins.counts,
    }
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
    rules_file: Option<&Path>,
) -> Result<String, Error> {
    margins.check(Path::new(source))?;
    // A report whose mode was switched to `off` before it was written: no budget
    // could name its mode, which a check compares with the report's.
    if report.manifest.mode == "off" {
        return Err(Error::Budget {
            path: source.into(),
            reason: "the tracer was switched off before this report was written, so no \
                     budget can name its mode: draft from a report traced in the mode CI \
                     checks (count, sites or sample:N) to the end"
                .into(),
        });
    }
    let probe = probe(report, rules);
    let checked = budget::check(&probe, report, rules, Path::new(source))?;
    let figure = |phase: Option<&str>, limit: &str| {
        checked
            .iter()
            .find(|c| c.phase.as_deref() == phase && c.limit == limit)
            .map(|c| c.found)
            .filter(|f| *f > 0.0)
    };
    let mut out = String::new();
    let mode = &report.manifest.mode;
    let _ = writeln!(
        out,
        "{}\
         # bytes and peak RSS, which move with thread timing); the comments give the\n\
         # figures. Edit freely: a limit left out is not checked. Check a report traced\n\
         # in {mode} mode (`mode` below) with\n\
         #   analyzer check REPORT --budget THIS_FILE{}",
        crate::budget::header::draft_lines(source, margins),
        rules_file.map_or(String::new(), |f| format!(
            " --rules {}",
            shell_word(&f.display().to_string())
        ))
    );
    for (left_out, why) in left_out(report) {
        let _ = writeln!(out, "# No {left_out} limits: {why}.");
    }
    let small: Vec<&str> = report
        .phases
        .iter()
        .map(|r| r.phase.as_str())
        .filter(|p| !probe.phase.contains_key(*p))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    if !small.is_empty() {
        let _ = writeln!(
            out,
            "# No limits on phase{} {}: fewer than {MIN_PHASE_ALLOCS} allocations.",
            if small.len() > 1 { "s" } else { "" },
            small.join(", ")
        );
    }
    if probe.labels.is_empty() {
        let _ = writeln!(
            out,
            "# The report has no labels that name its workload ({} change between\n\
             # builds and are left out): this budget would judge a report of any\n\
             # workload. Label the run in your program (alloc_tracer::label(\"input\",\n\
             # ...)) and draft again, or add a [labels] table by hand.",
            BUILD_LABELS.join(" and ")
        );
    }
    out.push('\n');
    let _ = writeln!(
        out,
        "# The mode reports must be traced in: another is refused.\nmode = {}",
        toml::Value::String(mode.clone())
    );
    if let Some(found) = figure(None, "peak_live_bytes") {
        line(
            &mut out,
            "peak_live_bytes",
            found,
            margins.memory,
            Kind::Count,
        );
    }
    if let Some(found) = figure(None, "peak_rss_bytes") {
        rss_line(&mut out, report, found, margins.memory);
    }
    if !probe.labels.is_empty() {
        out.push_str(
            "\n# The workload this budget is for: a report of another is not judged. Remove\n\
             # a label that changes between builds of one workload (a commit, a date).\n",
        );
        if let Some(rows) = report.rows_label() {
            // Left out of the labels, so that a patch to the circuit is judged; but a
            // program that labels its input's size `rows` may mean it to name the
            // workload.
            let _ = writeln!(
                out,
                "# The report's rows ({rows}) are not required: allocs_per_row follows them,\n\
                 # every other limit is for this size. Add a rows label (\"{rows}\") to judge\n\
                 # only runs of this size."
            );
        }
        out.push_str("[labels]\n");
        for (name, value) in &probe.labels {
            let _ = writeln!(
                out,
                "{} = {}",
                key(name),
                toml::Value::String(value.clone())
            );
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
            // As `check` names them.
            let allocs = figure(p, &format!("category.\"{name}\".allocs"));
            let share = figure(p, &format!("category.\"{name}\".share"));
            if let (Some(allocs), Some(share)) = (allocs, share) {
                let _ = writeln!(out, "\n[phase.{}.category.{}]", key(phase), key(name));
                line(&mut out, "allocs", allocs, margins.counts, Kind::Count);
                out.push_str(
                    "# A share rises when other categories shrink: uncomment to hold it all the same.\n# ",
                );
                line(&mut out, "share", share, margins.counts, Kind::Share);
            }
        }
    }
    Ok(out)
}

/// The run's peak RSS limit. In `sites` and `sample:N` modes the tracer's own memory
/// is part of it and grows with the threads that record (each keeps its tables), so a
/// runner with more cores reads higher: the limit is written commented out there,
/// with the tracer's share.
fn rss_line(out: &mut String, report: &Report, found: f64, margin: f64) {
    let m = &report.manifest;
    if report.count_only() {
        return line(out, "peak_rss_bytes", found, margin, Kind::Count);
    }
    // 0: a report from before the tracer counted its own memory.
    let own = match m.tracer.memory_bytes {
        0 => String::new(),
        b => format!(
            " ({:.1} MiB here, {} thread{} recorded)",
            b as f64 / (1u64 << 20) as f64,
            m.threads,
            if m.threads == 1 { "" } else { "s" }
        ),
    };
    let _ = write!(
        out,
        "# The tracer's own memory{own} is part of the peak RSS and grows\n\
         # with the threads recording: uncomment where CI always runs on one machine\n\
         # type (or gate RSS on a count-mode run).\n# "
    );
    line(out, "peak_rss_bytes", found, margin, Kind::Count);
}

/// The kinds of limit a report cannot give a draft, and why.
fn left_out(report: &Report) -> Vec<(&'static str, String)> {
    [
        ("temporaries", temporaries_gap(report)),
        ("category", categories_gap(report)),
    ]
    .into_iter()
    .filter_map(|(kind, why)| why.map(|w| (kind, w)))
    .collect()
}

/// Why the report's temporaries cannot be held to a margin: `None` in `sites`
/// mode, where they are exact (for the part of the run it recorded stacks in).
fn temporaries_gap(report: &Report) -> Option<String> {
    let mode = report.stacks_mode();
    match mode {
        "sites" => None,
        "count" => Some("count mode counts no temporaries".to_owned()),
        _ => Some(format!(
            "{mode} mode estimates temporaries from its samples"
        )),
    }
}

/// Why the report's categories cannot be held to a margin: `None` when they can
/// (`sites` mode, whole stacks).
fn categories_gap(report: &Report) -> Option<String> {
    let mode = report.stacks_mode();
    if !report.records_sites() {
        Some(format!("{mode} mode records no sites"))
    } else if let Some(w) = report.manifest.setup_warning() {
        Some(w)
    } else if mode != "sites" {
        Some(format!(
            "{mode} mode estimates them from sampled stacks, whose noise a margin does not cover"
        ))
    } else {
        None
    }
}

/// How a limit is written.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Kind {
    /// A whole number, rounded up.
    Count,
    /// Three decimals, rounded up.
    Ratio,
    /// Three decimals, rounded up, at most 1.
    Share,
}

/// `limit = the figure plus the margin   # report: the figure`.
fn line(out: &mut String, limit: &str, found: f64, margin: f64, kind: Kind) {
    let (value, _) = limit_value(found, margin, kind);
    let _ = writeln!(out, "{limit} = {value}   # report: {}", shown(found, kind));
}

/// The limit `margin` above `found`, as TOML text and as a number: a count rounded
/// up to a whole number, a ratio or share up to three decimals (a share at most 1).
pub(crate) fn limit_value(found: f64, margin: f64, kind: Kind) -> (String, f64) {
    let raised = found * (1.0 + margin);
    match kind {
        Kind::Count => {
            // TOML's integers are i64's; `i64::MAX as f64` rounds up, past the
            // largest integer TOML holds.
            let n = if raised >= i64::MAX as f64 {
                i64::MAX as u64
            } else {
                raised.ceil() as u64
            };
            (grouped(n), n as f64)
        }
        Kind::Ratio | Kind::Share => {
            let mut x = (raised * 1000.0).ceil() / 1000.0;
            if kind == Kind::Share {
                x = x.min(1.0);
            }
            (format!("{x:.3}"), x)
        }
    }
}

/// A report's figure as the comment beside a limit gives it.
pub(crate) fn shown(found: f64, kind: Kind) -> String {
    match kind {
        Kind::Count => budget::figure(found),
        Kind::Ratio | Kind::Share => format!("{found:.3}"),
    }
}

/// `text` as one shell word: as it is when it needs no quoting, else in single quotes.
pub(crate) fn shell_word(text: &str) -> String {
    let plain = !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+=:,@%".contains(c));
    if plain {
        text.to_owned()
    } else {
        format!("'{}'", text.replace('\'', "'\\''"))
    }
}

/// `13401937` as `13_401_937`.
pub(crate) fn grouped(n: u64) -> String {
    crate::units::digits_grouped(n.into(), '_')
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
    let labels = m
        .labels
        .iter()
        .filter(|(k, _)| !BUILD_LABELS.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let categories = categories_gap(report).is_none();
    let mut phase = std::collections::BTreeMap::new();
    let mut names: Vec<&str> = report.phases.iter().map(|r| r.phase.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    for name in names {
        let rows = || report.phases.iter().filter(move |r| r.phase == name);
        if rows().map(|r| r.calls()).sum::<u64>() < MIN_PHASE_ALLOCS {
            continue;
        }
        let category = if categories {
            category_totals::totals(report, rules, Some(name))
                .into_iter()
                .filter(|t| t.category != UNMATCHED && t.share >= MIN_SHARE)
                .map(|t| {
                    let most = CategoryLimit {
                        share: Some(1.0),
                        allocs: Some(u64::MAX),
                    };
                    (t.category, most)
                })
                .collect()
        } else {
            Default::default()
        };
        phase.insert(
            name.to_owned(),
            PhaseLimits {
                allocs: Some(u64::MAX),
                bytes: Some(u64::MAX),
                temporaries: temporaries_gap(report).is_none().then_some(u64::MAX),
                allocs_per_row: report.rows_label().map(|_| f64::MAX),
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
        mode: Some(m.mode.clone()),
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
        assert_eq!(key("git.commit"), "\"git.commit\"");
        assert_eq!(shell_word("rules/my.toml"), "rules/my.toml");
        assert_eq!(shell_word("my rules.toml"), "'my rules.toml'");
        assert_eq!(shell_word("it's.toml"), "'it'\\''s.toml'");
        let mut out = String::new();
        line(&mut out, "share", 0.98, 0.05, Kind::Share);
        assert_eq!(
            out, "share = 1.000   # report: 0.980\n",
            "a share stays at most 1"
        );
    }

    #[test]
    fn a_report_written_with_the_tracer_off_gets_no_draft_a_check_would_refuse() {
        let mut r = Report::default();
        r.manifest.mode = "off".into();
        r.phases.push(crate::report::PhaseRow {
            phase: "p".into(),
            alloc_count: 10,
            ..Default::default()
        });
        let e = draft(&r, &[], Margins::default(), "reports/off", None).unwrap_err();
        let e = e.to_string();
        assert!(
            e.starts_with("reports/off: the tracer was switched off before this report"),
            "{e}"
        );
    }
}
