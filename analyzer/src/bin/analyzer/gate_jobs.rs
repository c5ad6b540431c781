//! The commands that gate: `diff` (with its `--fail-if` conditions), `check` and
//! `budget`, and what they refuse or say of two reports that differ beyond a patch.

use crate::cost_jobs::{
    calibration, incomplete, note_allocs_without_stacks, stored_calibration, warn_if_other_host,
    warn_of_setup,
};
use crate::{CostInputs, rules};
use analyzer::calibrate;
use analyzer::render::{self, Format};
use analyzer::{budget, cost, diff, fail_if, report};
use anyhow::{Context, Result};
use std::io::Write;
use std::path::PathBuf;

/// `analyzer diff`, and its `--fail-if` gate.
pub(crate) struct DiffJob {
    pub(crate) base: PathBuf,
    pub(crate) change: PathBuf,
    pub(crate) phase: Option<String>,
    pub(crate) format: Format,
    pub(crate) inputs: CostInputs,
    pub(crate) measured: diff::Measured,
    pub(crate) recycled: bool,
    pub(crate) limit: usize,
    /// `--fail-if` conditions, parsed by `run` (a bad one exits 2, like a bad file).
    pub(crate) fail_if: Vec<String>,
}

/// `analyzer check`: a report against a budget file.
pub(crate) struct CheckJob {
    pub(crate) report: PathBuf,
    pub(crate) budget: PathBuf,
    pub(crate) rules: Option<PathBuf>,
    pub(crate) format: Format,
}

/// What `--fail-if` asks of a diff.
#[derive(Clone, Copy, Default)]
pub(crate) struct Gates {
    /// Some condition is given: the reports must be alike (mode, circuit size).
    pub any: bool,
    /// Every condition is on totals alone (allocs, bytes, peak or rss), which `count`
    /// reports hold exactly: two of them are compared then.
    pub totals_only: bool,
    /// Every condition is on allocs or bytes: counted exactly in every mode, whatever
    /// it is (peaks move with thread timing, which a mode's overhead changes, and
    /// resident memory holds the tracer's own), so reports of two modes are compared
    /// on them: as totals where one is a `count` report.
    pub mode_free: bool,
}

/// Refuses a diff that would compare nothing: a `count` report records no sites,
/// which a diff compares (nor does a report whose mode was switched to `off`), but
/// for two of them gated on totals alone, or one gated on allocs and bytes alone. Refuses, under gates, reports of different
/// modes or amounts of work (the driver's `rows` label: circuit sizes, or one circuit
/// run a different number of times); without gates, says on stderr that they differ
/// beyond the patch.
pub(crate) fn comparable(a: &report::Report, b: &report::Report, gates: Gates) -> Result<()> {
    if gates.any {
        for r in [a, b] {
            if let Some(why) = r.nothing_recorded() {
                anyhow::bail!(
                    "--fail-if needs what each run allocated, and {} {why}",
                    r.dir.display()
                );
            }
        }
        if let Some(apart) = other_work(a, b) {
            anyhow::bail!(
                "--fail-if compares like with like, and the reports are {apart}: their \
                 figures differ by the work, which would pass or fail a gate whatever the \
                 patch did"
            );
        }
        if a.mode_words() != b.mode_words() && !gates.mode_free {
            anyhow::bail!(
                "--fail-if compares like with like, and the reports were traced in \
                 different modes ({} and {}): their temporaries and costs are estimated \
                 differently, and the tracer's own memory, part of resident memory, \
                 differs by mode (allocs and bytes, counted exactly in every mode, are \
                 compared across any modes, as totals where one is a count report)",
                a.mode_words(),
                b.mode_words()
            );
        }
    }
    let count = |r: &report::Report| r.count_only();
    // Totals alone: of two count reports on any total, or of a count report and one
    // of another mode on allocs and bytes, which every mode counts exactly.
    if (gates.totals_only && count(a) && count(b)) || (gates.mode_free && (count(a) || count(b))) {
        return Ok(());
    }
    for r in [a, b] {
        if count(r) && r.manifest.mode == "count" {
            anyhow::bail!(
                "{} was written in `count` mode, which records no sites: a diff compares \
                 sites (trace with sites or sample:N; `analyzer diff --fail-if` on allocs, \
                 bytes, peak or rss alone compares two count reports' totals, and on \
                 allocs or bytes alone a count report with one of any mode)",
                r.dir.display()
            );
        }
        // A report whose mode was switched to `off` before it was written, say, after
        // counting in `count` mode: its allocations have no sites to compare.
        if count(r) || r.counts_without_sites() {
            anyhow::bail!(
                "{} records allocations but no sites (mode {} when written): a diff \
                 compares sites (trace with sites or sample:N)",
                r.dir.display(),
                r.manifest.mode
            );
        }
    }
    if a.mode_words() != b.mode_words() {
        note!(
            "analyzer: the reports were traced in different modes ({} and {}): sampled \
             figures are estimates, so small differences may be sampling noise",
            a.mode_words(),
            b.mode_words()
        );
    }
    // Stacks walked at other depths name other sites: one cut at fewer frames
    // matches none of the other report's, and its category may differ.
    let depths = |r: &report::Report| r.manifest.depths_walked();
    if a.records_sites() && b.records_sites() && depths(a) != depths(b) {
        let words = |r: &report::Report| {
            let d: Vec<String> = depths(r).iter().map(|d| d.to_string()).collect();
            d.join(" then ")
        };
        note!(
            "analyzer: the reports' stacks were walked at different depths ({} and {} \
             frames): a site cut at fewer frames matches none of the other's, and its \
             category may differ; trace both at one depth",
            words(a),
            words(b)
        );
    }
    warn_if_other_circuits(a, b);
    Ok(())
}

/// Says on standard error when two reports synthesized different amounts of work
/// (the driver's `rows` label): their differences are not a patch's alone.
pub(crate) fn warn_if_other_circuits(a: &report::Report, b: &report::Report) {
    if let Some(apart) = other_work(a, b) {
        note!("analyzer: the reports are {apart}: their differences are not a patch's alone");
    }
}

/// How two reports' work differs: other circuits (their `circuit` labels), other
/// provers (`prover`: the driver's mirror prover counts a/b/c in an `enforce` phase
/// of its own, so its phases do not line up with the stock prover's), or, where
/// their `rows` labels differ (the rows synthesized over every iteration), one
/// circuit run a different number of times (the same `circuit` label, the same rows
/// an iteration, other `iterations`) or circuits of different sizes.
pub(crate) fn other_work(a: &report::Report, b: &report::Report) -> Option<String> {
    let label = |r: &report::Report, key: &str| r.manifest.labels.get(key).cloned();
    for (key, what) in [
        ("circuit", "of different circuits"),
        ("prover", "run by different provers"),
    ] {
        if let (Some(x), Some(y)) = (label(a, key), label(b, key))
            && x != y
        {
            return Some(format!("{what} ({x} and {y})"));
        }
    }
    let (ra, rb) = (label(a, "rows")?, label(b, "rows")?);
    if ra == rb {
        return None;
    }
    let number = |r: &report::Report, key: &str| label(r, key)?.parse::<u128>().ok();
    let same_circuit = label(a, "circuit").is_some() && label(a, "circuit") == label(b, "circuit");
    Some(
        match (
            number(a, "rows"),
            number(b, "rows"),
            number(a, "iterations"),
            number(b, "iterations"),
        ) {
            (Some(na), Some(nb), Some(ia), Some(ib))
                if same_circuit && ia != ib && na * ib == nb * ia =>
            {
                format!("of one circuit run {ia} and {ib} times (rows {ra} and {rb})")
            }
            _ => format!("of circuits of different sizes (rows {ra} and {rb})"),
        },
    )
}

/// Says on standard error when two runs that allocated about alike (within
/// [`SAME_WORK`]) went at speeds [`SPEEDS_APART`] apart: a loaded machine stretches
/// some lifetimes (a thread descheduled) far more than others, which moves the
/// prices of long-lived blocks beyond the patch. A patch that removes allocations
/// changes the time per allocation by itself, so runs of different work are not
/// compared. Nor are reports without sites, which have no costs to predict.
pub(crate) fn warn_of_speeds(a: &report::Report, b: &report::Report) {
    if !(a.records_sites() && b.records_sites()) {
        return;
    }
    let (ca, cb) = (a.calls(None) as f64, b.calls(None) as f64);
    if let (Some(x), Some(y)) = (cost::ns_per_alloc(a), cost::ns_per_alloc(b))
        && ca.max(cb) <= SAME_WORK * ca.min(cb)
        && x.max(y) > SPEEDS_APART * x.min(y)
    {
        note!(
            "analyzer: the runs went at different speeds ({x:.0} and {y:.0} ns of traced \
             time an allocation, for about as many allocations): a loaded machine \
             stretches some lifetimes more than others, so predicted costs may differ by \
             a few tenths of a per cent with nothing changed"
        );
    }
}

/// Traced time per allocation that far apart between two runs is noted.
const SPEEDS_APART: f64 = 1.2;

/// Runs whose allocations are this close are taken as the same work.
const SAME_WORK: f64 = 1.05;

impl DiffJob {
    /// Writes the diff; returns the `--fail-if` conditions that hold.
    pub(crate) fn run(self, out: &mut dyn Write) -> Result<Gated> {
        let conditions = self
            .fail_if
            .iter()
            .map(|c| fail_if::parse_condition(c))
            .collect::<Result<Vec<_>, _>>()?;
        let rules = rules(self.inputs.rules.as_deref())?;
        let (a, b) = (report::load(&self.base)?, report::load(&self.change)?);
        // Gates on totals alone, which `phases.parquet` and the manifest hold exactly
        // in every mode.
        use fail_if::Metric::{Allocs, Bytes, Peak, Rss};
        let all_on = |metrics: &[fail_if::Metric]| {
            !conditions.is_empty() && conditions.iter().all(|c| metrics.contains(&c.metric))
        };
        let gates = Gates {
            any: !conditions.is_empty(),
            totals_only: all_on(&[Allocs, Bytes, Peak, Rss]),
            mode_free: all_on(&[Allocs, Bytes]),
        };
        comparable(&a, &b, gates)?;
        // A count report has totals alone: a diff with one shows and gates those.
        let totals_alone = [&a, &b].iter().any(|r| r.count_only());
        if totals_alone {
            note!(
                "analyzer: a count report: the gates compare totals; it records no sites \
                 or categories to show"
            );
        }
        for r in [&a, &b] {
            warn_of_setup(r);
            note_allocs_without_stacks(r);
        }
        if conditions
            .iter()
            .any(|c| matches!(c.metric, fail_if::Metric::Temporaries))
            && a.sampled()
        {
            note!(
                "analyzer: in {} mode temporaries are estimated from the sampled blocks: \
                 a temporaries gate compares estimates",
                a.stacks_mode()
            );
        }
        for r in [&a, &b] {
            if let Some(why) = &r.manifest.incomplete {
                // A run cut short allocated less: it passes any gate on growth.
                if !conditions.is_empty() {
                    anyhow::bail!(
                        "{}: {}, and --fail-if gates whole runs",
                        r.dir.display(),
                        incomplete(why)
                    );
                }
                note!("analyzer: {}: {}", r.dir.display(), incomplete(why));
            }
        }
        let phase = a.check_phase(self.phase.as_deref())?;
        b.check_phase(phase)?;
        // A gate on counts alone needs no prices: without a stored calibration, it
        // does not measure one (15 s, and a file written) on a fresh CI runner.
        let counts_only = !conditions.is_empty()
            && !self.recycled
            && conditions
                .iter()
                .all(|c| !matches!(c.metric, fail_if::Metric::Cost));
        let cal = if counts_only {
            let stored = stored_calibration(self.inputs.calibration.as_deref())?;
            if stored.is_none() {
                // `stored_calibration` has named a stored file it passed over.
                let why = if analyzer::calibrate::default_path().exists() {
                    "no usable calibration"
                } else {
                    "no calibration stored"
                };
                note!(
                    "analyzer: {why}: the diff is not priced, which its gates on counts do \
                     not need (`analyzer calibrate` prices it)"
                );
            }
            stored
        } else {
            Some(calibration(self.inputs.calibration.as_deref())?)
        };
        if let Some(cal) = &cal {
            crate::cost_jobs::warn_of_unpriced(&rules, cal);
            warn_if_other_host(cal, &b);
            // The base is priced with it too: over another allocator (a comparison
            // of allocators), its prices are the calibration's allocator's.
            if a.manifest.allocator != b.manifest.allocator {
                warn_if_other_host(cal, &a);
            }
            warn_of_speeds(&a, &b);
        }
        if a.host() != b.host() {
            let (ha, hb) = (a.host(), b.host());
            note!(
                "analyzer: the reports were taken on different hosts ({} and {}): their \
                 wall times differ by the machines too, and one calibration prices both",
                ha.0,
                hb.0
            );
        }
        if self.recycled
            && cal
                .as_ref()
                .is_some_and(|c| c.operation(calibrate::RECYCLE).is_none())
        {
            anyhow::bail!(
                "--recycled: the calibration has no `recycle` operation (made by an older \
                 analyzer); run `analyzer calibrate` again"
            );
        }
        let mut d = diff::diff(
            &a,
            &b,
            diff::Pricing {
                cal: cal.as_ref(),
                recycled: self.recycled,
            },
            &rules,
            phase,
            self.measured,
            self.limit,
        );
        if totals_alone {
            // Against a side with no sites, every site of the other would read as
            // gone or new.
            d = d.totals_alone();
        }
        let outcomes = fail_if::outcomes(&conditions, &d)?;
        let held: Vec<fail_if::Failed> = outcomes
            .iter()
            .filter(|(_, holds)| *holds)
            .map(|(f, _)| f.clone())
            .collect();
        let failed: Vec<String> = held
            .iter()
            .map(|f| format!("{}: {f}", f.breach()))
            .collect();
        // Totals alone: the table's first line is all of it.
        let written = if totals_alone && self.format == Format::Table {
            render::diff_totals(out, &d)
        } else {
            render::diff(out, &d, &held, self.format)
        };
        let write_error = unless_reader_left(written);
        // The gates that passed, with their figures, so that a CI log shows the
        // headroom; the breaches follow (`main`). A closed standard error hides them,
        // not the exit status.
        for (f, _) in outcomes.iter().filter(|(_, holds)| !holds) {
            note!("analyzer: within: {f}");
        }
        for (f, _) in outcomes.iter().filter(|(f, _)| f.under_noise()) {
            note!(
                "analyzer: {}: sampling alone moves the figure by more than the growth \
                 the gate allows, so it fails or passes by chance: widen it, or gate \
                 reports traced in sites mode",
                f.condition
            );
        }
        for (f, _) in outcomes.iter().filter(|(f, _)| f.under_peak_error()) {
            note!(
                "analyzer: {}: each run's peak is exact only to within what its threads \
                 hold back before publishing live bytes (256 KiB a thread allocating at \
                 once; `info` gives each report's bound), more in all than the growth the \
                 gate allows, so where that fell can decide it: widen it past the bound",
                f.condition
            );
        }
        // `peak` and `rss` gate the whole run whatever the phase.
        let phase_gated = conditions
            .iter()
            .any(|c| !matches!(c.metric, fail_if::Metric::Peak | fail_if::Metric::Rss));
        if let Some(p) = phase.filter(|_| phase_gated) {
            warn_of_other_phases(&a, &b, p);
        }
        Ok(Gated {
            breaches: failed,
            hints: Vec::new(),
            write_error,
        })
    }
}

/// Says on standard error which phases other than `phase`, the one a gate compares,
/// made a different number of allocations or bytes in `a` and `b`: a regression
/// there passes the gate unseen.
fn warn_of_other_phases(a: &report::Report, b: &report::Report, phase: &str) {
    let mut names: Vec<&str> = a
        .phases
        .iter()
        .chain(&b.phases)
        .map(|p| p.phase.as_str())
        .filter(|p| *p != phase)
        .collect();
    names.sort_unstable();
    names.dedup();
    let bytes = |r: &report::Report, p: &str| {
        r.phases
            .iter()
            .filter(|row| row.phase == p)
            .map(|row| row.bytes_requested)
            .fold(0, u64::saturating_add)
    };
    let changed: Vec<String> = names
        .into_iter()
        .filter_map(|p| {
            let (x, y) = (a.calls(Some(p)), b.calls(Some(p)));
            let (bx, by) = (bytes(a, p), bytes(b, p));
            if x != y {
                Some(format!("{p} {x} -> {y} allocations"))
            } else {
                (bx != by).then(|| format!("{p} {bx} -> {by} bytes"))
            }
        })
        .collect();
    if !changed.is_empty() {
        note!(
            "analyzer: the gates compare phase {phase} alone; other phases changed too, \
             ungated: {} (leave out --phase to gate the whole run)",
            changed.join(", ")
        );
    }
}

/// The error of `written`, the output of a job that gates, unless it failed only
/// because the reader of standard output went away (`| head`). Either way what the
/// gate found still goes to standard error (the gates that passed, with their
/// headroom, and the breaches); the exit status says whether it held, or, on
/// another error (`> /dev/full`), that the output is incomplete.
pub(crate) fn unless_reader_left(written: std::io::Result<()>) -> Option<std::io::Error> {
    written
        .err()
        .filter(|e| e.kind() != std::io::ErrorKind::BrokenPipe)
}

/// What a gate found: its breaches, and what to print after them (how to see where
/// a breach came from, how to accept it).
#[derive(Default)]
pub(crate) struct Gated {
    /// One line each, named (`over budget: ...`).
    pub(crate) breaches: Vec<String>,
    pub(crate) hints: Vec<String>,
    /// Writing the gate's output failed (not for a reader that left): reported
    /// after the breaches.
    pub(crate) write_error: Option<std::io::Error>,
}

impl CheckJob {
    /// Writes every limit checked; returns the breaches of the budget, and what to
    /// do about them.
    pub(crate) fn run(self, out: &mut dyn Write) -> Result<Gated> {
        let text = std::fs::read_to_string(&self.budget)
            .with_context(|| format!("{}", self.budget.display()))?;
        let b = budget::parse(&text, &self.budget)?;
        let rules = rules(self.rules.as_deref())?;
        let r = report::load(&self.report)?;
        let checked = budget::check(&b, &r, &rules, &self.budget)?;
        // Limits on counts pass on a report built without frame pointers (those on
        // sites were refused above), but a CI log should still say its stacks are
        // cut short.
        warn_of_setup(&r);
        note_allocs_without_stacks(&r);
        if r.sampled() && !checked.is_empty() {
            note!(
                "analyzer: {} was traced in {} mode: phase totals are exact but for \
                 temporaries, which, like category shares and site counts, are estimates \
                 from the sampled stacks",
                r.dir.display(),
                r.stacks_mode()
            );
        }
        let over: Vec<&budget::Checked> = checked.iter().filter(|c| c.over()).collect();
        let breaches: Vec<String> = over.iter().map(|c| format!("over budget: {c}")).collect();
        let write_error = unless_reader_left(render::checked(out, &checked, self.format));
        Ok(Gated {
            write_error,
            breaches,
            hints: analyzer::budget::advice::advice(
                &text,
                &self.budget,
                &over,
                analyzer::budget::advice::Checking {
                    dir: &self.report,
                    mode: r.stacks_mode(),
                    rules: self.rules.as_deref(),
                    heap_sampled: r.manifest.heap_interval > 0,
                },
            ),
        })
    }
}

/// `analyzer budget`: a first budget from a report.
pub(crate) struct BudgetJob {
    pub(crate) report: PathBuf,
    pub(crate) margins: analyzer::budget::draft::Margins,
    pub(crate) rules: Option<PathBuf>,
    pub(crate) out: Option<PathBuf>,
    /// A budget file to tighten to the report, in place of a draft.
    pub(crate) tighten: Option<PathBuf>,
}

impl BudgetJob {
    pub(crate) fn run(self, out: &mut dyn Write) -> Result<()> {
        // A draft never replaces a file: a budget there holds limits and comments
        // someone may have edited (`--tighten` lowers it in place).
        if let Some(path) = &self.out {
            crate::refuse_report_file(path, &self.report)?;
            // A regular file, not a link (`/dev/stdout` into a file is written through).
            if std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file()) {
                anyhow::bail!(
                    "{}: exists, and a draft would replace it: `analyzer budget REPORT \
                     --tighten {}` lowers an existing budget's limits in place; to draft \
                     anew, remove it first or write elsewhere",
                    path.display(),
                    path.display()
                );
            }
        }
        let r = report::load(&self.report)?;
        warn_of_setup(&r);
        note_allocs_without_stacks(&r);
        let rules = rules(self.rules.as_deref())?;
        if let Some(path) = &self.tighten {
            let text =
                std::fs::read_to_string(path).with_context(|| format!("{}", path.display()))?;
            let t = analyzer::budget::tighten::tighten(&text, path, &r, &rules, self.margins)?;
            if !t.lowered.is_empty() {
                crate::write_file(path, t.text.as_bytes())?;
            }
            for c in &t.over {
                note!("analyzer: over budget, left as it is: {c}");
            }
            return Ok(render::tightened(out, &t)?);
        }
        let text = analyzer::budget::draft::draft(
            &r,
            &rules,
            self.margins,
            &self.report.display().to_string(),
            self.rules.as_deref(),
        )?;
        match &self.out {
            Some(path) => crate::write_file(path, text.as_bytes()),
            None => Ok(out.write_all(text.as_bytes())?),
        }
    }
}
