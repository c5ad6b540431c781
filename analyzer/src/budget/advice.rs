//! What `analyzer check` says after a breach, for the author of the change: the
//! limit's totals do not say where the allocations came from, so the command that
//! shows which categories and sites grew (a diff against the report the budget's
//! limits were last set from, which a draft's header names); and, for a change
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
}

/// The lines to print after the breaches `over` of the budget file `budget` (its
/// text `text`) by the report `checked`. Empty without a breach.
pub fn advice(text: &str, budget: &Path, over: &[&Checked], checked: Checking) -> Vec<String> {
    if over.is_empty() {
        return Vec::new();
    }
    let mut lines = Vec::new();
    // One phase's breaches: the diff looks at that phase alone.
    let phase = over[0]
        .phase
        .as_deref()
        .filter(|p| over.iter().all(|c| c.phase.as_deref() == Some(*p)));
    let mut phase = phase.map_or(String::new(), |p| format!(" --phase {}", shell_word(p)));
    if let Some(rules) = checked.rules {
        phase += &format!(" --rules {}", shell_word(&rules.display().to_string()));
    }
    let report = shell_word(&checked.dir.display().to_string());
    // The report the limits were last set from, else (tightened to the very report
    // checked) the one the budget was drafted from.
    let other = |b: &&str| !same_place(Path::new(b), checked.dir);
    let base = last_set_from(text)
        .filter(other)
        .or_else(|| drafted_from(text).filter(other));
    lines.push(match base {
        // A count report records no sites, which is what a diff compares.
        _ if checked.mode == "count" => format!(
            "to see which categories and sites grew: trace both builds in sites mode (count \
             mode records none) and compare them: analyzer diff BASE CHANGE{phase}"
        ),
        Some(base) if Path::new(base).is_dir() => format!(
            "to see which categories and sites grew: analyzer diff {} {report}{phase}",
            shell_word(base)
        ),
        Some(base) => format!(
            "to see which categories and sites grew: analyzer diff BASE {report}{phase}, \
             BASE a report of the build the budget was made for (its limits were set \
             from {base}, not found here)"
        ),
        None => format!(
            "to see which categories and sites grew: analyzer diff BASE {report}{phase}, \
             BASE a report of the build the budget was made for"
        ),
    });
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
        // A base that is gone, a run-wide peak (its own margin), and two phases: the
        // diff is of every phase.
        let text = draft("gone/base");
        let peak = breach(None, "peak_live_bytes", &["peak_live_bytes"], 1000.0, 900.0);
        let lines = advice(&text, Path::new("b.toml"), &[&allocs, &peak], sites("r"));
        assert_eq!(
            lines[0],
            "to see which categories and sites grew: analyzer diff BASE r, BASE a report \
             of the build the budget was made for (its limits were set from gone/base, \
             not found here)"
        );
        assert_eq!(
            lines[1],
            "if the change is meant to move them, raise them in b.toml to the report's \
             figures plus 5 % (15 % for peaks): phase synthesize: category.enforce.allocs \
             to 670_434, run: peak_live_bytes to 1_150"
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
        };
        let lines = advice(&draft("gone"), Path::new("b.toml"), &[&allocs], sampled);
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(
            lines[1].contains("estimated from sampled stacks (sample:1000)"),
            "{lines:?}"
        );
    }
}
