//! A ratchet for a budget (`analyzer budget REPORT --tighten FILE`): every limit
//! that lies more than one and a half margins above the report's figure comes down
//! to the figure plus the margin, as a draft would set it, and a count that came to
//! 0 comes down to 0; none goes up. The file stays byte for byte as it was but for
//! the values lowered, each replaced where it lies (a byte limit written `"660MiB"`
//! stays in binary units), the `# report: N` comment a draft puts beside a limit,
//! which gives the new figure, and a line under a draft's first (first in a file
//! written by hand) says which report and margins it was last tightened to.
//!
//! So a patch that saves allocations can lock its saving in, and the next one that
//! gives it back fails `analyzer check`, rather than passing inside headroom the
//! budget no longer needs. A limit the report is over stays as it is: the check
//! still fails on it.

use crate::Error;
use crate::budget::draft::{Margins, kind_of, limit_value, margin_of, shown};
use crate::budget::header::with_tightened_line;
use crate::budget::{self, Checked};
use crate::categories::Category;
use crate::report::Report;
use std::path::Path;

/// A limit comes down only when it lies more than this many margins above the
/// report's figure, so that run-to-run jitter of a few allocations or bytes does not
/// rewrite the file each time.
pub const SLACK: f64 = 1.5;

/// A limit brought down.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Lowered {
    /// The limit, as `analyzer check` names it (`phase synthesize: allocs`).
    pub name: String,
    /// The report's figure.
    pub found: f64,
    /// The limit before.
    pub was: f64,
    /// The limit now.
    pub now: f64,
}

/// What tightening did.
#[derive(Clone, Debug)]
pub struct Tightened {
    /// The budget file's new text.
    pub text: String,
    /// The limits lowered, in `analyzer check`'s order.
    pub lowered: Vec<Lowered>,
    /// Limits already within the margin of the report's figure.
    pub kept: usize,
    /// Limits not tightened whatever their headroom, with why: a peak, share or
    /// ratio of 0, or an estimate in `sample:N`.
    pub left: Vec<(String, &'static str)>,
    /// Limits the report is over (`analyzer check`'s breaches), left as they are.
    pub over: Vec<Checked>,
}

/// Tightens the budget `text` (the file `path`) to `report`, whose figures
/// `budget::check` reads against `rules`, as `analyzer check` would.
pub fn tighten(
    text: &str,
    path: &Path,
    report: &Report,
    rules: &[Category],
    margins: Margins,
) -> Result<Tightened, Error> {
    margins.check(path)?;
    let bad = |reason: String| Error::Budget {
        path: path.to_owned(),
        reason,
    };
    let budget = budget::parse(text, path)?;
    let checked = budget::check(&budget, report, rules, path)?;
    // Read, not rewritten: each value lowered (and the comment beside it) is
    // replaced where it lies in the text, so that everything else stays byte for
    // byte (the order of dotted keys, how keys are quoted, CRLF line endings).
    let doc = toml_edit::ImDocument::parse(text)
        .map_err(|e: toml_edit::TomlError| bad(e.message().to_owned()))?;
    let mut edits: Vec<(std::ops::Range<usize>, String)> = Vec::new();
    let mut lowered = Vec::new();
    let mut over = Vec::new();
    let mut kept = 0;
    let mut left = Vec::new();
    let sampled = report.sampled();
    for c in checked {
        if c.over() {
            over.push(c);
            continue;
        }
        // A margin of a few per cent does not cover sampling's noise.
        if sampled && estimated(&c.key) {
            left.push((c.name(), "an estimate from sampled stacks"));
            continue;
        }
        // A count the patch took to 0 is locked in at 0, so that the first
        // allocation that comes back fails the check (`check` refuses a temporaries
        // limit on a report that does not count them); a peak of 0 says nothing.
        if c.found == 0.0 && !counted(&c.key) {
            left.push((c.name(), "the report's figure is 0"));
            continue;
        }
        let kind = kind_of(&c.key);
        let margin = margin_of(&c.key, margins);
        let (text, now) = limit_value(c.found, margin, kind);
        // (A share or ratio rounded up to three decimals may not come down at all.)
        if c.budget <= c.found * (1.0 + SLACK * margin) || now >= c.budget {
            kept += 1;
            continue;
        }
        let value = value_at(doc.as_item(), &c.key).ok_or_else(|| {
            bad(format!(
                "{}: not found where the file was read (a key written in a form this \
                 command cannot edit)",
                c.name()
            ))
        })?;
        let at = value
            .span()
            .ok_or_else(|| bad(format!("{}: no place in the file", c.name())))?;
        let (text, now) = match value.as_str() {
            // A byte limit written with a unit keeps one.
            Some(_) => in_units(
                now as u64,
                (c.found * (1.0 + SLACK * margin)).min(c.budget - 1.0),
            ),
            None => (text, now),
        };
        edits.push((at, text));
        // The comment beside it (`# report: N`), with the new figure.
        if let Some(span) = value.decor().suffix().and_then(|s| s.span()) {
            let updated = with_report_figure(&doc.raw()[span.clone()], &shown(c.found, kind));
            edits.push((span, updated));
        }
        lowered.push(Lowered {
            name: c.name(),
            found: c.found,
            was: c.budget,
            now,
        });
    }
    let mut text = text.to_owned();
    edits.sort_by_key(|(at, _)| std::cmp::Reverse(at.start));
    for (at, new) in edits {
        text.replace_range(at, &new);
    }
    if !lowered.is_empty() {
        text = with_tightened_line(&text, &report.dir.display().to_string(), margins);
    }
    Ok(Tightened {
        text,
        lowered,
        kept,
        left,
        over,
    })
}

/// True for a limit whose figure is estimated from sampled stacks in `sample:N`
/// mode: temporaries, categories and sites (phase totals and peaks are exact).
pub(crate) fn estimated(key: &[String]) -> bool {
    matches!(
        key.get(2).map(String::as_str),
        Some("temporaries" | "category" | "site")
    )
}

/// True for a limit on a count of events, which a report records whatever it is
/// (allocations, bytes, temporaries), as against a peak, share or ratio.
fn counted(key: &[String]) -> bool {
    matches!(
        key.last().map(String::as_str),
        Some("allocs" | "bytes" | "temporaries")
    )
}

/// The value at `key` in `doc`, through tables, inline tables and dotted keys.
fn value_at<'d>(doc: &'d toml_edit::Item, key: &[String]) -> Option<&'d toml_edit::Value> {
    let mut item = doc;
    for (i, k) in key.iter().enumerate() {
        item = match item {
            toml_edit::Item::Table(t) => t.get(k)?,
            toml_edit::Item::Value(toml_edit::Value::InlineTable(t)) => {
                return inline_value_at(t, &key[i..]);
            }
            _ => return None,
        };
    }
    item.as_value()
}

/// [`value_at`] within an inline table.
fn inline_value_at<'d>(
    table: &'d toml_edit::InlineTable,
    key: &[String],
) -> Option<&'d toml_edit::Value> {
    let (first, rest) = key.split_first()?;
    match (table.get(first)?, rest) {
        (value, []) => Some(value),
        (toml_edit::Value::InlineTable(t), rest) => inline_value_at(t, rest),
        _ => None,
    }
}

/// `bytes` as a string in a binary unit (`"685MiB"`), with its value: rounded up
/// to a whole unit, the largest unit of which it is 10 or more whose rounding stays
/// at or under `most` (else a smaller unit, down to whole bytes), so that a limit in
/// units stays readable and a second run on the same report finds nothing to lower.
fn in_units(bytes: u64, most: f64) -> (String, f64) {
    for (unit, shift) in [("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)] {
        let whole = bytes.div_ceil(1 << shift);
        let value = (whole << shift) as f64;
        if bytes >= 10 << shift && value <= most {
            return (format!("\"{whole}{unit}\""), value);
        }
    }
    (format!("\"{bytes}B\""), bytes as f64)
}

/// A value's trailing comment with a draft's `# report: N` made to give `figure`;
/// other comments as they are.
fn with_report_figure(suffix: &str, figure: &str) -> String {
    const MARK: &str = "# report: ";
    match suffix.find(MARK) {
        Some(at) => {
            let rest = &suffix[at + MARK.len()..];
            let end = rest.find(|c: char| c.is_whitespace()).unwrap_or(rest.len());
            format!("{}{MARK}{figure}{}", &suffix[..at], &rest[end..])
        }
        None => suffix.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::PhaseRow;

    /// A report of one phase `p` with `allocs` allocations, `bytes` requested bytes
    /// and a peak of `peak` live bytes.
    fn report(allocs: u64, bytes: u64, peak: i64) -> Report {
        let mut r = Report {
            phases: vec![PhaseRow {
                phase: "p".into(),
                alloc_count: allocs,
                bytes_requested: bytes,
                peak_live_bytes: Some(peak),
                ..Default::default()
            }],
            ..Report::default()
        };
        r.manifest.totals.peak_live_bytes = peak;
        r
    }

    /// `text` tightened to `r`, the line that says so taken off again when `text` was
    /// written by hand (it goes first: checked here, and the rest compared).
    fn tightened(text: &str, r: &Report) -> Tightened {
        let mut t = tighten(text, Path::new("b.toml"), r, &[], Margins::default()).unwrap();
        if !t.lowered.is_empty() && !text.starts_with("# Allocation budget drafted") {
            let (first, rest) = t.text.split_once('\n').unwrap();
            assert!(first.starts_with("# Tightened by `analyzer budget --tighten` to "));
            t.text = rest.to_owned();
        }
        t
    }

    #[test]
    fn limits_come_down_to_the_margin_and_the_file_keeps_its_form() {
        let text = "# my budget\n\
                    peak_live_bytes = \"900MiB\"   # kept by hand\n\
                    [phase.p]\n\
                    allocs = 2_000   # report: 1000\n\
                    bytes = 1_000_000\n\
                    peak_live_bytes = 700_000_000\n";
        let r = report(1000, 990_000, 600 << 20);
        let t = tightened(text, &r);
        assert_eq!(
            t.text,
            "# my budget\n\
             peak_live_bytes = \"690MiB\"   # kept by hand\n\
             [phase.p]\n\
             allocs = 1_050   # report: 1000\n\
             bytes = 1_000_000\n\
             peak_live_bytes = 700_000_000\n"
        );
        let names: Vec<&str> = t.lowered.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names, ["run: peak_live_bytes", "phase p: allocs"]);
        assert_eq!(t.lowered[1].now, 1050.0);
        // bytes: within 1.5 margins; the phase peak: 629 MiB + 15 % is over 700 MB.
        assert_eq!(t.kept, 2);
        // What a check of the new file reads: every limit holds.
        let b = budget::parse(&t.text, Path::new("b.toml")).unwrap();
        let checked = budget::check(&b, &r, &[], Path::new("b.toml")).unwrap();
        assert!(checked.iter().all(|c| !c.over()), "{checked:?}");
        // Run again on the same report: nothing left to lower.
        let again = tightened(&t.text, &r);
        assert!(again.lowered.is_empty());
        assert_eq!(again.text, t.text);
    }

    #[test]
    fn a_limit_the_report_is_over_stays() {
        let r = report(3000, 10, 1);
        let t = tightened("[phase.p]\nallocs = 2_000\n", &r);
        assert_eq!(t.text, "[phase.p]\nallocs = 2_000\n");
        assert_eq!(t.over.len(), 1);
        assert!(t.lowered.is_empty());
    }

    #[test]
    fn inline_and_dotted_keys_are_found() {
        let r = report(1000, 10, 1);
        for text in [
            "phase = { p = { allocs = 5000 } }\n",
            "phase.p.allocs = 5000\n",
            "[phase]\np.allocs = 5000\n",
        ] {
            let t = tightened(text, &r);
            assert_eq!(t.text, text.replace("5000", "1_050"), "{text}");
        }
    }

    #[test]
    fn everything_but_the_values_lowered_stays_byte_for_byte() {
        // Dotted keys of one phase apart from each other, a quoted key, CRLF line
        // endings and no newline at the end: a rewrite of the whole document would
        // regroup, requote or re-end them.
        let mut r = report(1000, 10, 1);
        r.phases.push(PhaseRow {
            phase: "q".into(),
            alloc_count: 40,
            ..Default::default()
        });
        let text = "[phase]\r\n\
                    p.allocs = 5000\r\n\
                    \"q\".allocs = 40   # mine\r\n\
                    p.bytes = 1_000_000   # report: 990000";
        let t = tighten(text, Path::new("b.toml"), &r, &[], Margins::default()).unwrap();
        let (first, rest) = t.text.split_once("\r\n").unwrap();
        assert!(first.starts_with("# Tightened by"), "{}", t.text);
        assert_eq!(
            rest,
            "[phase]\r\n\
             p.allocs = 1_050\r\n\
             \"q\".allocs = 40   # mine\r\n\
             p.bytes = 11   # report: 10"
        );
        assert_eq!(t.kept, 1);
    }

    #[test]
    fn byte_units_stay_readable_and_whole() {
        let any = f64::MAX;
        assert_eq!(
            in_units(629 << 20, any),
            ("\"629MiB\"".into(), (629u64 << 20) as f64)
        );
        // Rounded up to a whole unit, in the largest of which there are 10 or more.
        assert_eq!(in_units((9 << 30) + 1, any).0, "\"9217MiB\"");
        assert_eq!(in_units(10 << 30, any).0, "\"10GiB\"");
        assert_eq!(in_units(9, any).0, "\"9B\"");
        // A smaller unit where the whole one would pass the bound.
        assert_eq!(
            in_units((12 << 30) + 1, (12u64 << 30) as f64 * 1.05).0,
            "\"12289MiB\""
        );
        assert_eq!(
            with_report_figure("   # report: 1000 (a draft)", "1050"),
            "   # report: 1050 (a draft)"
        );
        assert_eq!(with_report_figure("  # mine", "1"), "  # mine");
    }

    #[test]
    fn a_second_run_on_the_same_report_lowers_nothing() {
        // 12 GiB and 8.8 GiB figures against limits in GiB: rounding to whole GiB
        // would land past 1.5 margins and be lowered again, into bytes.
        for (limit, found) in [("20GiB", 12u64 << 30), ("16GiB", (88u64 << 30) / 10)] {
            let r = report(1000, found, 1);
            let text = format!("[phase.p]\nbytes = \"{limit}\"\n");
            let once = tightened(&text, &r);
            assert_eq!(once.lowered.len(), 1, "{limit}");
            assert!(once.text.contains("iB\""), "keeps a unit: {}", once.text);
            let twice = tightened(&once.text, &r);
            assert!(twice.lowered.is_empty(), "{limit}: {}", twice.text);
            assert_eq!(twice.text, once.text);
        }
    }

    #[test]
    fn a_draft_says_it_was_tightened_and_by_what_margins_once() {
        let mut r = report(1000, 10, 1);
        r.dir = "reports/new".into();
        let draft = "# Allocation budget drafted by `analyzer budget` from reports/old.\n\
                     # Every limit is a maximum, 5 % above the report's figure.\n\
                     [phase.p]\nallocs = 5_000\n";
        let m = Margins {
            counts: 0.02,
            memory: 0.15,
        };
        let once = tighten(draft, Path::new("b.toml"), &r, &[], m).unwrap();
        let note = "# Tightened by `analyzer budget --tighten` to reports/new: the limits it \
                    lowered lie 2 % above its figures (15 % for peaks).\n";
        assert_eq!(
            once.text,
            format!(
                "# Allocation budget drafted by `analyzer budget` from reports/old.\n{note}\
                 # Every limit is a maximum, 5 % above the report's figure.\n\
                 [phase.p]\nallocs = 1_020\n"
            )
        );
        // A second tightening replaces the line; a hand-written file gets it first
        // (taken off by `tightened`).
        r.phases[0].alloc_count = 500;
        let twice = tighten(&once.text, Path::new("b.toml"), &r, &[], m).unwrap();
        assert_eq!(
            twice.text.matches("# Tightened").count(),
            1,
            "{}",
            twice.text
        );
        let own = tightened("[phase.p]\nallocs = 5_000\n", &r);
        assert_eq!(own.text, "[phase.p]\nallocs = 525\n");
    }

    /// `r` with one site of its allocations and `temporaries`, as temporaries
    /// limits need.
    fn with_site(mut r: Report, temporaries: u64) -> Report {
        r.phases[0].temporary_count = temporaries;
        r.sites = vec![crate::report::SiteRow {
            site_id: 0,
            phase: "p".into(),
            size_class_bytes: 16,
            alloc_count: r.phases[0].alloc_count,
            realloc_count: 0,
            bytes_requested: 0,
            bytes_allocated: 0,
            temporary_count: temporaries,
            lifetime_ns_median: None,
            followed_freed_count: 0,
            followed_count: 0,
        }];
        r
    }

    #[test]
    fn zero_figures_and_sampled_estimates_are_left_as_they_are() {
        let mut r = with_site(report(1000, 0, 0), 50);
        let text = "[phase.p]\npeak_live_bytes = 1_000\ntemporaries = 5_000\n";
        let t = tightened(text, &r);
        assert_eq!(
            t.left,
            [(
                "phase p: peak_live_bytes".to_owned(),
                "the report's figure is 0"
            )]
        );
        assert_eq!(t.lowered.len(), 1, "temporaries, exact outside sample:N");
        r.manifest.mode = "sample:1000".into();
        let t = tightened(text, &r);
        assert_eq!(t.text, text);
        assert_eq!(t.left.len(), 2);
        assert!(
            t.left.contains(&(
                "phase p: temporaries".to_owned(),
                "an estimate from sampled stacks"
            )),
            "{:?}",
            t.left
        );
    }

    #[test]
    fn a_count_the_patch_took_to_zero_is_locked_in_at_zero() {
        let mut r = with_site(report(1000, 0, 1), 0);
        r.manifest.mode = "sites".into();
        let text = "[phase.p]\nbytes = 1_000   # report: 900\ntemporaries = 0\n";
        let t = tightened(text, &r);
        assert_eq!(
            t.text,
            "[phase.p]\nbytes = 0   # report: 0\ntemporaries = 0\n"
        );
        assert_eq!(t.lowered.len(), 1);
        assert_eq!((t.lowered[0].was, t.lowered[0].now), (1000.0, 0.0));
        // A limit already at 0 is kept, not "left": nothing to say of it.
        assert_eq!(t.kept, 1, "{:?}", t.left);
        assert_eq!(t.left, []);
    }

    #[test]
    fn a_bad_margin_is_refused() {
        let r = report(1000, 10, 1);
        let m = Margins {
            counts: -0.1,
            memory: 0.15,
        };
        let e = tighten("[phase.p]\nallocs = 5\n", Path::new("b.toml"), &r, &[], m)
            .unwrap_err()
            .to_string();
        assert!(e.contains("is not between 0 and"), "{e}");
    }
}
