//! What `analyzer check` says after a breach, for the author of the change: the
//! limit's totals do not say where the allocations came from, so the command that
//! shows which categories and sites grew (a diff against the report the budget's
//! limits were last set from, which a draft's header names; for a peak, what holds
//! it against what held that report's); and, for a change
//! meant to move a figure (work moved from one category to another, which a ratchet
//! never raises a limit for), the value that would accept it, at the margins the
//! header says the limits were set with.

use crate::budget::Checked;
use crate::budget::draft::{kind_of, limit_value, margin_of, shell_word};
use crate::budget::header::{drafted_from, last_margins, last_set_from, percent};
use crate::budget::tighten::estimated;
use std::path::Path;

/// The report checked: where it is and the mode it was traced in.
pub struct Checking<'a> {
    /// The report's folder, as given.
    pub dir: &'a Path,
    /// Its mode (`count`, `sites`, `sample:N`).
    pub mode: &'a str,
    /// The category rules it was checked with (`--rules`), which the diff suggested
    /// must group by too.
    pub rules: Option<&'a Path>,
    /// Whether heap sampling was on (the manifest's `heap_interval` above 0), which
    /// finds what holds a peak.
    pub heap_sampled: bool,
}

/// Whether `c` limits a peak (of live bytes, or of resident memory), which `analyzer
/// peak` answers rather than a diff of counts.
fn limits_a_peak(c: &Checked) -> bool {
    matches!(
        c.key.last().map(String::as_str),
        Some("peak_live_bytes" | "peak_rss_bytes")
    )
}

/// The lines to print after the breaches `over` of the budget file `budget` (its
/// text `text`) by the report `checked`. Empty without a breach.
pub fn advice(text: &str, budget: &Path, over: &[&Checked], checked: Checking) -> Vec<String> {
    if over.is_empty() {
        return Vec::new();
    }
    let mut lines = Vec::new();
    let (peaks, counts): (Vec<&Checked>, Vec<&Checked>) =
        over.iter().copied().partition(|c| limits_a_peak(c));
    let rules = checked.rules.map_or(String::new(), |r| {
        format!(" --rules {}", shell_word(&r.display().to_string()))
    });
    let report = shell_word(&checked.dir.display().to_string());
    // The report the limits were last set from, else (tightened to the very report
    // checked) the one the budget was drafted from.
    let other = |b: &&str| !same_place(Path::new(b), checked.dir);
    let base = last_set_from(text)
        .filter(other)
        .or_else(|| drafted_from(text).filter(other));
    // How the lines name the base: its folder where it is, else BASE, said what.
    let (base_arg, what_base) = match base {
        Some(b) if Path::new(b).is_dir() => (shell_word(b), String::new()),
        Some(b) => (
            "BASE".to_owned(),
            format!(
                ", BASE a report of the build the budget was made for (its limits were \
                 set from {b}, not found here)"
            ),
        ),
        None => (
            "BASE".to_owned(),
            ", BASE a report of the build the budget was made for".to_owned(),
        ),
    };
    if !counts.is_empty() {
        // One phase's breaches: the diff looks at that phase alone.
        let phase = counts[0]
            .phase
            .as_deref()
            .filter(|p| counts.iter().all(|c| c.phase.as_deref() == Some(*p)))
            .map_or(String::new(), |p| format!(" --phase {}", shell_word(p)));
        lines.push(if checked.mode == "count" {
            // A count report records no sites, which is what a diff compares.
            format!(
                "to see which categories and sites grew: trace both builds in sites mode \
                 (count mode records none) and compare them: analyzer diff BASE \
                 CHANGE{phase}{rules}"
            )
        } else {
            format!(
                "to see which categories and sites grew: analyzer diff {base_arg} \
                 {report}{phase}{rules}{what_base}"
            )
        });
    }
    if !peaks.is_empty() {
        // What holds the peak, by site and category, against what held the base's.
        lines.push(if checked.heap_sampled {
            format!(
                "to see what holds the peak and what grew there: analyzer peak {report} \
                 --base {base_arg}{rules}{what_base}"
            )
        } else {
            format!(
                "to see what holds the peak: trace both builds with heap sampling (off in \
                 this run: ALLOC_TRACE_HEAP=1MiB, synth-driver --heap-sample 1MiB) and \
                 compare them: analyzer peak CHANGE --base BASE{rules}"
            )
        });
    }
    // Sampling's noise is more than a margin of a few per cent: a limit on an
    // estimate is set from a sites report, not raised to one.
    let sampled = checked.mode.starts_with("sample:");
    let (over, estimates): (Vec<&Checked>, Vec<&Checked>) = over
        .iter()
        .copied()
        .partition(|c| !(sampled && estimated(&c.key)));
    if !estimates.is_empty() {
        lines.push(format!(
            "{} estimated from sampled stacks ({}): set such limits from a report \
             traced in sites mode",
            estimates
                .iter()
                .map(|c| c.name())
                .collect::<Vec<_>>()
                .join(", "),
            checked.mode
        ));
    }
    let margins = last_margins(text).unwrap_or_default();
    let accepting = |c: &Checked| {
        let margin = margin_of(&c.key, margins);
        (limit_value(c.found, margin, kind_of(&c.key)).0, margin)
    };
    lines.push(match over.as_slice() {
        [] => return lines,
        [c] => {
            let (value, margin) = accepting(c);
            format!(
                "if the change is meant to move {}, raise it in {} to {value} (the \
                 report's figure plus {})",
                c.name(),
                budget.display(),
                percent(margin)
            )
        }
        _ => format!(
            "if the change is meant to move them, raise them in {} to the report's \
             figures plus {} ({} for peaks): {}",
            budget.display(),
            percent(margins.counts),
            percent(margins.memory),
            over.iter()
                .map(|c| format!("{} to {}", c.name(), accepting(c).0))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    });
    lines
}

/// True when `a` and `b` name one folder (`reports/r`, `./reports/r` and its absolute
/// path do), or, where either does not exist, read the same.
fn same_place(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::budget::draft::Margins;

    fn breach(phase: Option<&str>, limit: &str, key: &[&str], found: f64, budget: f64) -> Checked {
        Checked {
            phase: phase.map(str::to_owned),
            limit: limit.to_owned(),
            found,
            budget,
            key: key.iter().map(|k| (*k).to_owned()).collect(),
        }
    }

    fn sites(dir: &str) -> Checking<'_> {
        Checking {
            dir: Path::new(dir),
            mode: "sites",
            rules: None,
            heap_sampled: true,
        }
    }

    fn draft(from: &str) -> String {
        crate::budget::header::draft_lines(from, Margins::default())
    }

    fn enforce_allocs() -> Checked {
        breach(
            Some("synthesize"),
            "category.enforce.allocs",
            &["phase", "synthesize", "category", "enforce", "allocs"],
            638_508.0,
            584_703.0,
        )
    }

    #[test]
    fn a_breach_names_the_diff_to_run_and_the_limit_that_accepts_it() {
        // A folder that exists wherever the tests run.
        let base_dir = env!("CARGO_MANIFEST_DIR");
        let allocs = enforce_allocs();
        let lines = advice(
            &draft(base_dir),
            Path::new("ci/budget.toml"),
            &[&allocs],
            sites("reports/pr"),
        );
        assert_eq!(
            lines,
            [
                format!(
                    "to see which categories and sites grew: analyzer diff {} \
                     reports/pr --phase synthesize",
                    shell_word(base_dir)
                ),
                "if the change is meant to move phase synthesize: category.enforce.allocs, \
                 raise it in ci/budget.toml to 670_434 (the report's figure plus 5 %)"
                    .to_owned()
            ]
        );
        // A base that is gone, and a run-wide peak (its own margin) beside a phase's
        // count: the diff is of the counts' phase, the peak has a line of its own.
        let text = draft("gone/base");
        let peak = breach(None, "peak_live_bytes", &["peak_live_bytes"], 1000.0, 900.0);
        let lines = advice(&text, Path::new("b.toml"), &[&allocs, &peak], sites("r"));
        assert_eq!(
            lines[0],
            "to see which categories and sites grew: analyzer diff BASE r --phase \
             synthesize, BASE a report of the build the budget was made for (its limits \
             were set from gone/base, not found here)"
        );
        // The peak is what `peak --base` answers, against the same base.
        assert_eq!(
            lines[1],
            "to see what holds the peak and what grew there: analyzer peak r --base BASE, \
             BASE a report of the build the budget was made for (its limits were set from \
             gone/base, not found here)"
        );
        assert_eq!(
            lines[2],
            "if the change is meant to move them, raise them in b.toml to the report's \
             figures plus 5 % (15 % for peaks): phase synthesize: category.enforce.allocs \
             to 670_434, run: peak_live_bytes to 1_150"
        );
        // A peak alone: no diff of counts; its base named where it is. Without heap
        // sampling, nothing holds the peak: trace again with it.
        let text = draft(base_dir);
        let lines = advice(&text, Path::new("b.toml"), &[&peak], sites("r"));
        assert_eq!(
            lines[0],
            format!(
                "to see what holds the peak and what grew there: analyzer peak r --base {}",
                shell_word(base_dir)
            )
        );
        assert!(lines[1].starts_with("if the change is meant to move run: peak_live_bytes"));
        assert_eq!(lines.len(), 2, "{lines:?}");
        let unsampled = Checking {
            heap_sampled: false,
            ..sites("r")
        };
        let rss = breach(None, "peak_rss_bytes", &["peak_rss_bytes"], 1000.0, 900.0);
        let lines = advice(&text, Path::new("b.toml"), &[&rss], unsampled);
        assert!(
            lines[0]
                .starts_with("to see what holds the peak: trace both builds with heap sampling"),
            "{lines:?}"
        );
        assert!(advice(&text, Path::new("b.toml"), &[], sites("r")).is_empty());
    }

    #[test]
    fn the_report_the_limits_were_set_from_is_not_diffed_with_itself() {
        let here = env!("CARGO_MANIFEST_DIR");
        let text = draft(here);
        // The same folder, named another way.
        let dotted = format!("{here}/./src/..");
        let lines = advice(
            &text,
            Path::new("b.toml"),
            &[&enforce_allocs()],
            sites(&dotted),
        );
        assert!(lines[0].contains("analyzer diff BASE "), "{lines:?}");
        // Tightened to the very report checked: the one it was drafted from is the
        // base, where it is; the diff groups by the rules the check used.
        let base = format!("{here}/src");
        let tight = Margins::default();
        let text = crate::budget::header::with_tightened_line(&draft(&base), here, tight);
        let checking = Checking {
            rules: Some(Path::new("my rules.toml")),
            ..sites(here)
        };
        let lines = advice(&text, Path::new("b.toml"), &[&enforce_allocs()], checking);
        assert_eq!(
            lines[0],
            format!(
                "to see which categories and sites grew: analyzer diff {} {} --phase \
                 synthesize --rules 'my rules.toml'",
                shell_word(&base),
                shell_word(here)
            )
        );
    }

    #[test]
    fn the_hints_follow_the_mode_and_the_margins_the_header_gives() {
        let allocs = enforce_allocs();
        // A count report has no sites to diff: retrace in sites mode.
        let count = Checking {
            dir: Path::new("r"),
            mode: "count",
            rules: None,
            heap_sampled: false,
        };
        let lines = advice(&draft("gone"), Path::new("b.toml"), &[&allocs], count);
        assert!(
            lines[0].starts_with(
                "to see which categories and sites grew: trace both builds in sites mode"
            ),
            "{lines:?}"
        );
        // Margins from the header's tightening line.
        let tight = Margins {
            counts: 0.02,
            memory: 0.1,
        };
        let text = crate::budget::header::with_tightened_line(&draft("gone"), "newer", tight);
        let lines = advice(&text, Path::new("b.toml"), &[&allocs], sites("r"));
        assert!(
            lines[1].ends_with("to 651_279 (the report's figure plus 2 %)"),
            "{lines:?}"
        );
        // A sampled estimate is not raised: it is set from a sites report.
        let sampled = Checking {
            dir: Path::new("r"),
            mode: "sample:1000",
            rules: None,
            heap_sampled: true,
        };
        let lines = advice(&draft("gone"), Path::new("b.toml"), &[&allocs], sampled);
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(
            lines[1].contains("estimated from sampled stacks (sample:1000)"),
            "{lines:?}"
        );
    }
}
