//! Checking a report against a budget (`analyzer check`): every limit with the
//! report's figure, and how those figures are written.

use super::Budget;
use crate::Error;
use crate::categories::Category;
use crate::naming;
use crate::rank::frames_of;
use crate::report::Report;
use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

/// A limit checked, with the report's figure: a breach when the figure is over it.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Checked {
    /// The phase, or `None` for a whole-run limit.
    pub phase: Option<String>,
    /// What was limited, as the budget file names it (`allocs`,
    /// `category."linear combinations".share`, ...).
    pub limit: String,
    /// The report's figure.
    pub found: f64,
    /// The budget's.
    pub budget: f64,
    /// Where the limit is in the budget file: the keys from the top table down
    /// (`["phase", "synthesize", "category", "clones", "allocs"]`).
    #[serde(skip)]
    pub key: Vec<String>,
}

impl Checked {
    /// Whether the report's figure is over the budget's.
    pub fn over(&self) -> bool {
        self.found > self.budget
    }

    /// Where the limit applies and what it limits: `phase synthesize: allocs`,
    /// `run: peak_live_bytes`.
    pub fn name(&self) -> String {
        match &self.phase {
            Some(p) => format!("phase {p}: {}", self.limit),
            None => format!("run: {}", self.limit),
        }
    }
}

/// `x` as an integer when it is one (a count, bytes), else as it is (a share, a
/// cost in seconds): for JSON, where `683014.0` reads as a measurement.
pub fn whole_or_fraction<S: serde::Serializer>(x: &f64, s: S) -> Result<S::Ok, S::Error> {
    if x.fract() == 0.0 && x.abs() < 9.0e15 {
        s.serialize_i64(*x as i64)
    } else {
        s.serialize_f64(*x)
    }
}

/// [`whole_or_fraction`] of a figure there may not be.
pub fn opt_whole_or_fraction<S: serde::Serializer>(
    x: &Option<f64>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match x {
        Some(x) => whole_or_fraction(x, s),
        None => s.serialize_none(),
    }
}

/// Whole numbers without a fraction, shares with three decimals.
pub fn figure(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{x:.0}")
    } else {
        format!("{x:.3}")
    }
}

impl fmt::Display for Checked {
    /// One line, for a breach: `phase synthesize: allocs 120000 > 110000 (+9.1%)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} > {}",
            self.name(),
            figure(self.found),
            figure(self.budget)
        )?;
        if self.budget > 0.0 {
            write!(f, " ({:+.1}%)", (self.found / self.budget - 1.0) * 100.0)?;
        }
        Ok(())
    }
}

/// Checks `report` against `budget`: every limit the budget sets, with the report's
/// figure (the run's peak and peak RSS first; then each phase by name: allocations,
/// bytes, temporaries, allocations per row, peak, categories and sites by name);
/// those [`Checked::over`] are the breaches. Categories are `rules`' names
/// (plus [`crate::categories::UNMATCHED`]). A phase, category or site the budget names that
/// the report or the rules lack is an error (a misspelt name would otherwise pass
/// forever).
pub fn check(
    budget: &Budget,
    report: &Report,
    rules: &[Category],
    path: &Path,
) -> Result<Vec<Checked>, Error> {
    let bad = |reason: String| Error::Budget {
        path: path.to_owned(),
        reason,
    };
    // A run cut short passes any budget it had not reached yet.
    if let Some(why) = &report.manifest.incomplete {
        // The report's fault, not the budget file's: named by the report.
        return Err(Error::Budget {
            path: report.dir.clone(),
            reason: format!(
                "the report is incomplete (written on {why}): its counts cover part of the \
                 run, and a budget is for whole runs"
            ),
        });
    }
    if let Some(why) = report.nothing_recorded() {
        return Err(Error::Budget {
            path: report.dir.clone(),
            reason: format!("the report {why}"),
        });
    }
    // Another mode first: what else it lacks follows from it.
    if let Some(mode) = budget.mode.as_ref().filter(|m| **m != report.manifest.mode) {
        return Err(bad(format!(
            "the budget is for reports traced in {mode} mode, and {} was traced in {} \
             mode: its memory and counts would be judged by another mode's figures",
            report.dir.display(),
            report.mode_words()
        )));
    }
    // Category shares and site totals come from the sites table, which `count` mode
    // leaves empty: every share and total would read 0 and pass.
    let per_site = budget
        .phase
        .values()
        .any(|l| !l.category.is_empty() || !l.site.is_empty());
    // A report whose mode was switched to `off` before it was written has counts and
    // no sites, as a `count` report has.
    let no_sites = !report.records_sites();
    if per_site && no_sites {
        return Err(bad(format!(
            "category and site limits need the report's sites, and {} records none \
             (mode {} when written; trace in `sites` or `sample:N`)",
            report.dir.display(),
            report.manifest.mode
        )));
    }
    // Stacks cut short put most allocations in "other" and under sites that are not
    // the code's: category and site limits would judge the build's setup, not it.
    if per_site && let Some(w) = report.manifest.setup_warning() {
        return Err(bad(format!(
            "category and site limits need whole stacks, and in {}: {w}",
            report.dir.display()
        )));
    }
    // `count` mode finds no temporaries: every such limit would read 0 and pass.
    let temporaries = budget.phase.values().any(|l| l.temporaries.is_some());
    if temporaries && no_sites {
        return Err(bad(format!(
            "temporaries limits need temporaries, and {} finds none (mode {} when \
             written; trace in `sites`, where they are exact)",
            report.dir.display(),
            report.manifest.mode
        )));
    }
    for (key, want) in &budget.labels {
        match report.manifest.labels.get(key) {
            Some(found) if found == want => {}
            found => {
                return Err(bad(format!(
                    "the budget is for {key} = \"{want}\", and {} has {}: its limits \
                     would judge another workload",
                    report.dir.display(),
                    found.map_or("no such label".to_owned(), |f| format!("{key} = \"{f}\""))
                )));
            }
        }
    }
    let mut checked = Vec::new();
    if let Some(max) = budget.peak_live_bytes {
        let peak = report.manifest.totals.peak_live_bytes.max(0) as u64;
        checked.push(Checked {
            phase: None,
            limit: "peak_live_bytes".into(),
            found: peak as f64,
            budget: max as f64,
            key: vec!["peak_live_bytes".into()],
        });
    }
    if let Some(max) = budget.peak_rss_bytes {
        let rss = report.manifest.totals.max_rss_bytes;
        // 0 is unknown: a report from before the tracer recorded it.
        if rss == 0 {
            return Err(bad(format!(
                "peak_rss_bytes needs the report's peak RSS, and {} does not record it \
                 (written by a tracer before it did)",
                report.dir.display()
            )));
        }
        checked.push(Checked {
            phase: None,
            limit: "peak_rss_bytes".into(),
            found: rss as f64,
            budget: max as f64,
            key: vec!["peak_rss_bytes".into()],
        });
    }
    for (phase, limits) in &budget.phase {
        if !report.sites.iter().any(|r| &r.phase == phase)
            && !report.phases.iter().any(|r| &r.phase == phase)
        {
            let mut known: Vec<&str> = report.phases.iter().map(|r| r.phase.as_str()).collect();
            known.sort_unstable();
            known.dedup();
            return Err(bad(format!(
                "phase {phase} is not in the report (its phases: {})",
                known.join(", ")
            )));
        }
        // `key`: the limit's keys within the phase's table.
        let mut push = |key: &[&str], found: f64, budget: f64| {
            let limit = match key {
                [name] => (*name).to_owned(),
                [table, name, limit] => format!("{table}.\"{name}\".{limit}"),
                _ => key.join("."),
            };
            let mut path = vec!["phase".to_owned(), phase.clone()];
            path.extend(key.iter().map(|k| (*k).to_owned()));
            checked.push(Checked {
                phase: Some(phase.clone()),
                limit,
                found,
                budget,
                key: path,
            });
        };
        let rows = || report.rows(Some(phase));
        // Phase totals from `phases.parquet`: exact in every mode (the sites table
        // is empty in `count` mode).
        let sum = |f: fn(&crate::report::PhaseRow) -> u64| {
            report
                .phases
                .iter()
                .filter(|r| &r.phase == phase)
                .map(f)
                .fold(0u64, u64::saturating_add) as f64
        };
        for (name, max, found) in [
            ("allocs", limits.allocs, sum(|r| r.calls())),
            ("bytes", limits.bytes, sum(|r| r.bytes_requested)),
            (
                "temporaries",
                limits.temporaries,
                sum(|r| r.temporary_count),
            ),
        ] {
            if let Some(max) = max {
                push(&[name], found, max as f64);
            }
        }
        if let Some(max) = limits.allocs_per_row {
            let rows = report.rows_label().ok_or_else(|| {
                let why = match report.manifest.labels.get("rows") {
                    Some(r) => format!("its `rows` label ({r:?}) is not a count above 0"),
                    None => "the report has no `rows` label (synth-driver records one; your \
                             program can with alloc_tracer::label(\"rows\", n))"
                        .to_owned(),
                };
                bad(format!(
                    "phase {phase}: allocs_per_row needs the rows synthesized, and {why}"
                ))
            })?;
            push(&["allocs_per_row"], sum(|r| r.calls()) / rows as f64, max);
        }
        if let Some(max) = limits.peak_live_bytes {
            let peak = report
                .phases
                .iter()
                .filter(|r| &r.phase == phase)
                .filter_map(|r| r.peak_live_bytes)
                .max()
                .ok_or_else(|| {
                    bad(format!(
                        "phase {phase}: peak_live_bytes needs each phase's peak, and {} \
                         does not record it (written by a tracer before it did)",
                        report.dir.display()
                    ))
                })?;
            push(&["peak_live_bytes"], peak.max(0) as f64, max as f64);
        }
        if !limits.category.is_empty() {
            let totals = crate::category_totals::totals(report, rules, Some(phase));
            for (name, c) in &limits.category {
                let t = totals.iter().find(|t| &t.category == name).ok_or_else(|| {
                    // A misspelt name, or a budget drafted with rules of its own (its
                    // header names the `--rules` file) checked without them.
                    let names: Vec<&str> = rules.iter().map(|c| c.name.as_str()).collect();
                    bad(format!(
                        "phase {phase}: category \"{name}\" is not one of the rules' categories \
                         ({}; a budget drafted with --rules FILE is checked with it too)",
                        names.join(", ")
                    ))
                })?;
                if let Some(share) = c.share {
                    push(&["category", name, "share"], t.share, share);
                }
                if let Some(allocs) = c.allocs {
                    push(
                        &["category", name, "allocs"],
                        t.alloc_count.saturating_add(t.realloc_count) as f64,
                        allocs as f64,
                    );
                }
            }
        }
        if !limits.site.is_empty() {
            // Names once per site id, not per row.
            let mut names: BTreeMap<u64, String> = BTreeMap::new();
            for r in rows() {
                names
                    .entry(r.site_id)
                    .or_insert_with(|| naming::site_name(frames_of(&report.frames, r.site_id)));
            }
            for (fragment, s) in &limits.site {
                // A fragment no site's name holds is a typo, or a site the code no
                // longer has: either way its limit checks nothing.
                if !names.values().any(|n| n.contains(fragment.as_str())) {
                    let sampled = if report.sampled() {
                        format!(
                            "; in {} mode a site that allocates rarely may go unsampled: \
                             check site limits on a sites-mode report",
                            report.stacks_mode()
                        )
                    } else {
                        String::new()
                    };
                    return Err(bad(format!(
                        "phase {phase}: site \"{fragment}\" is in no site's name (`analyzer \
                         top --phase {phase}` shows them; a site the code no longer has \
                         comes out of the budget){sampled}"
                    )));
                }
                let found = rows()
                    .filter(|r| names[&r.site_id].contains(fragment.as_str()))
                    .map(|r| r.calls())
                    .fold(0u64, u64::saturating_add);
                push(&["site", fragment, "allocs"], found as f64, s.allocs as f64);
            }
        }
    }
    Ok(checked)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::budget::parse;

    #[test]
    fn peak_rss_is_checked_where_the_report_records_it() {
        let b = parse("peak_rss_bytes = 1_000\n", Path::new("b.toml")).unwrap();
        let mut r = Report {
            phases: vec![crate::report::PhaseRow {
                alloc_count: 1,
                ..Default::default()
            }],
            ..Report::default()
        };
        let err = check(&b, &r, &[], Path::new("b.toml")).unwrap_err();
        assert!(err.to_string().contains("does not record it"), "{err}");
        r.manifest.totals.max_rss_bytes = 1_001;
        let checked = check(&b, &r, &[], Path::new("b.toml")).unwrap();
        assert_eq!(checked.len(), 1);
        assert_eq!(checked[0].name(), "run: peak_rss_bytes");
        assert!(checked[0].over());
        r.manifest.totals.max_rss_bytes = 1_000;
        assert!(!check(&b, &r, &[], Path::new("b.toml")).unwrap()[0].over());
    }

    #[test]
    fn a_phase_peak_is_checked_where_the_report_records_it() {
        let b = parse(
            "[phase.p]\npeak_live_bytes = \"1KiB\"\n",
            Path::new("b.toml"),
        )
        .unwrap();
        let row = |peak| crate::report::PhaseRow {
            phase: "p".into(),
            alloc_count: 1,
            peak_live_bytes: peak,
            ..Default::default()
        };
        let mut r = Report {
            phases: vec![row(None)],
            ..Report::default()
        };
        let err = check(&b, &r, &[], Path::new("b.toml")).unwrap_err();
        assert!(err.to_string().contains("does not record it"), "{err}");
        r.phases = vec![row(Some(1025))];
        let checked = check(&b, &r, &[], Path::new("b.toml")).unwrap();
        assert_eq!(checked[0].name(), "phase p: peak_live_bytes");
        assert!(checked[0].over());
        r.phases = vec![row(Some(1024))];
        assert!(!check(&b, &r, &[], Path::new("b.toml")).unwrap()[0].over());
    }

    #[test]
    fn a_report_of_no_allocation_is_judged_by_no_budget() {
        let b = parse("[phase.main]\nallocs = 1_000\n", Path::new("b.toml")).unwrap();
        let mut r = Report {
            phases: vec![crate::report::PhaseRow {
                phase: "main".into(),
                ..Default::default()
            }],
            ..Report::default()
        };
        r.manifest.mode = "off".into();
        let err = check(&b, &r, &[], Path::new("b.toml")).unwrap_err();
        assert!(
            err.to_string()
                .contains("records no allocation: the tracer was off"),
            "{err}"
        );
        r.phases[0].realloc_count = 1;
        assert!(!check(&b, &r, &[], Path::new("b.toml")).unwrap()[0].over());
    }
}
