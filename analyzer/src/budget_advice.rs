//! What `analyzer check` says after a breach, for the author of the change: the
//! limit's totals do not say where the allocations came from, so the command that
//! shows which categories and sites grew (a diff against the report the budget's
//! limits were last set from, which a draft's header names); and, for a change
//! meant to move a figure (work moved from one category to another, which a ratchet
//! never raises a limit for), the value that would accept it.

use crate::budget::Checked;
use crate::budget_draft::{Margins, kind_of, limit_value, margin_of, percent, shell_word};
use crate::budget_tighten::last_set_from;
use std::path::Path;

/// The lines to print after the breaches `over` of the budget file `budget` (its
/// text `text`) by the report in `report`. Empty without a breach.
pub fn advice(text: &str, budget: &Path, over: &[&Checked], report: &Path) -> Vec<String> {
    if over.is_empty() {
        return Vec::new();
    }
    let mut lines = Vec::new();
    // One phase's breaches: the diff looks at that phase alone.
    let phase = over[0]
        .phase
        .as_deref()
        .filter(|p| over.iter().all(|c| c.phase.as_deref() == Some(*p)));
    let phase = phase.map_or(String::new(), |p| format!(" --phase {}", shell_word(p)));
    let report_path = report;
    let report = shell_word(&report.display().to_string());
    let base = last_set_from(text).filter(|b| Path::new(b) != report_path);
    lines.push(match base {
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
    let margins = Margins::default();
    let accepting = |c: &Checked| {
        let margin = margin_of(&c.key, margins);
        (limit_value(c.found, margin, kind_of(&c.key)).0, margin)
    };
    lines.push(match over {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn breach(phase: Option<&str>, limit: &str, key: &[&str], found: f64, budget: f64) -> Checked {
        Checked {
            phase: phase.map(str::to_owned),
            limit: limit.to_owned(),
            found,
            budget,
            key: key.iter().map(|k| (*k).to_owned()).collect(),
        }
    }

    #[test]
    fn a_breach_names_the_diff_to_run_and_the_limit_that_accepts_it() {
        // A folder that exists wherever the tests run.
        let base_dir = env!("CARGO_MANIFEST_DIR");
        let text = format!("# Allocation budget drafted by `analyzer budget` from {base_dir}.\n");
        let allocs = breach(
            Some("synthesize"),
            "category.enforce.allocs",
            &["phase", "synthesize", "category", "enforce", "allocs"],
            638_508.0,
            584_703.0,
        );
        let lines = advice(
            &text,
            Path::new("ci/budget.toml"),
            &[&allocs],
            Path::new("reports/pr"),
        );
        assert_eq!(
            lines,
            [
                format!(
                    "to see which categories and sites grew: analyzer diff {} \
                     reports/pr --phase synthesize",
                    shell_word(base_dir)
                ),
                "if the change is meant to move phase synthesize: category.enforce.allocs, raise it in \
                 ci/budget.toml to 670_434 (the report's figure plus 5 %)"
                    .to_owned()
            ]
        );
        // A base that is gone, a run-wide peak (its own margin), and two phases: the
        // diff is of every phase.
        let text = "# Allocation budget drafted by `analyzer budget` from gone/base.\n";
        let peak = breach(None, "peak_live_bytes", &["peak_live_bytes"], 1000.0, 900.0);
        let lines = advice(text, Path::new("b.toml"), &[&allocs, &peak], Path::new("r"));
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
        // The report the limits were set from, checked again: no diff of it with itself.
        let lines = advice(text, Path::new("b.toml"), &[&peak], Path::new("gone/base"));
        assert!(
            lines[0].contains("analyzer diff BASE gone/base,"),
            "{lines:?}"
        );
        assert!(advice(text, Path::new("b.toml"), &[], Path::new("r")).is_empty());
    }
}
