//! The commands that price: `calibrate` and `cost`, the calibration they price with,
//! and the notes every command gives of a report (its setup, a run cut short, a
//! calibration from another host).

use crate::{CostInputs, Selection, measure, rules};
use analyzer::calibrate::{self, Calibration};
use analyzer::render;
use analyzer::{cost, report};
use anyhow::Result;
use std::io::Write;
use std::path::{Path, PathBuf};

/// `analyzer calibrate`: measures this machine and stores the calibration.
pub(crate) struct CalibrateJob {
    pub(crate) out: PathBuf,
    pub(crate) effort: measure::Effort,
    pub(crate) json: bool,
}

/// `analyzer cost`.
pub(crate) struct CostJob {
    pub(crate) selection: Selection,
    pub(crate) inputs: CostInputs,
    pub(crate) limit: usize,
}

impl CalibrateJob {
    pub(crate) fn run(self, out: &mut dyn Write) -> Result<()> {
        let c = measure_now(self.effort);
        c.store(&self.out)?;
        if self.json {
            // As an I/O error, so that a reader that stops early is no failure.
            serde_json::to_writer_pretty(&mut *out, &c).map_err(std::io::Error::from)?;
            writeln!(out)?;
        } else {
            render::calibration(out, &c)?;
        }
        note!("analyzer: calibration stored at {}", self.out.display());
        Ok(())
    }
}

impl CostJob {
    pub(crate) fn run(self, out: &mut dyn Write) -> Result<()> {
        let rules = rules(self.inputs.rules.as_deref())?;
        let s = self.selection;
        let r = report::load(&s.report)?;
        let phase = r.check_phase(s.phase.as_deref())?;
        refuse_without_sites(&r, "to price")?;
        let cal = calibration(self.inputs.calibration.as_deref())?;
        warn_of_unpriced(&rules, &cal);
        warn_if_other_host(&cal, &r);
        warn_of_report(&r);
        no_sites_note(&r, phase, "to price");
        coverage_note(&r, phase);
        let est = cost::estimate(&r, &cal, &rules, phase, self.limit);
        Ok(render::cost(out, &est, s.format)?)
    }
}

/// Says on standard error which categories name an operation `cal` does not price
/// (a typo, or a calibration older than the operation): their indirect cost counts
/// as 0, which every priced output would otherwise hide.
pub(crate) fn warn_of_unpriced(rules: &[analyzer::categories::Category], cal: &Calibration) {
    for c in rules {
        if let Some(op) = c.indirect.as_deref().filter(|o| *o != "copy")
            && cal.operation(op).is_none()
        {
            note!(
                "analyzer: category '{}' names operation '{op}', which the calibration does not have; its indirect cost counts as 0",
                c.name
            );
        }
    }
}

/// Says on standard error when most of `r`'s stacks end early (code built without
/// frame pointers): its sites are then cut short, and its categories mostly "other".
pub(crate) fn warn_of_setup(r: &report::Report) {
    if let Some(w) = r.manifest.setup_warning() {
        note!("analyzer: {}: {w}", r.dir.display());
    }
    if r.manifest.stack_weights_changed {
        if r.manifest.weighted_as_recorded {
            note!(
                "analyzer: {}: the mode switched during the run between sites and \
                 sample:N (or two intervals N): per-site counts keep the weight each was \
                 recorded with, but the ± of sampled figures assume the last one ({})",
                r.dir.display(),
                r.stacks_mode()
            );
        } else {
            note!(
                "analyzer: {}: the mode switched during the run between sites and \
                 sample:N (or two intervals N): per-site counts are weighted by the mode \
                 in force when the report was written ({}), so those of sites recorded \
                 under another are off by the ratio of the weights; phase totals are exact",
                r.dir.display(),
                r.manifest.mode
            );
        }
    }
}

/// Says on standard error how many of `r`'s allocations were counted in `count`
/// mode, with no stack, where it recorded stacks for the rest: no site holds them.
/// (`info` shows it in its answer.)
pub(crate) fn note_allocs_without_stacks(r: &report::Report) {
    let without = r.allocs_without_stacks();
    if without > 0 {
        note!(
            "analyzer: {}: {}",
            r.dir.display(),
            analyzer::report::without_stacks_words(without, r.calls(None))
        );
    }
}

/// [`warn_of_setup`], and when the run was stopped before it finished (a signal):
/// its counts, and the labels the program had set by then, cover part of it. For
/// commands that answer from one report (`diff`, `check` and `budget` say it, or
/// refuse it, themselves; `info` shows it).
pub(crate) fn warn_of_report(r: &report::Report) {
    warn_of_setup(r);
    note_allocs_without_stacks(r);
    if let Some(why) = &r.manifest.incomplete {
        note!("analyzer: {}: {}", r.dir.display(), incomplete(why));
    }
}

/// What a report written on `why` (a signal) holds.
pub(crate) fn incomplete(why: &str) -> String {
    format!("the report is incomplete (written on {why}): its counts cover part of the run")
}

/// Says on standard error when `cal` was measured on another machine than the one
/// `r` was taken on, or over another allocator than the one `r` names: its prices are
/// that machine's and that allocator's.
pub(crate) fn warn_if_other_host(cal: &Calibration, r: &report::Report) {
    let host = r.host();
    if host != (cal.host.clone(), cal.cpu.clone()) {
        note!(
            "analyzer: the calibration was measured on {} ({}), the report taken on {} ({}): \
             its prices are the calibration host's",
            cal.host,
            cal.cpu,
            host.0,
            host.1
        );
    }
    if let Some(a) = &r.manifest.allocator
        && !cal.allocator.to_lowercase().contains(&a.to_lowercase())
    {
        note!(
            "analyzer: the calibration measured {}, and {} ran over {a}: its prices are \
             {}'s",
            cal.allocator,
            r.dir.display(),
            cal.allocator
        );
    }
}

/// Says on standard error why `r` has no site rows to work on (`what`: "to rank",
/// ...), when it has none: an empty answer is an answer, but not a silent one.
/// Refuses a report that records no sites by its mode (`count`, or switched to
/// `off` before it was written) for a command whose only answer is per site: it
/// cannot answer, which is exit 2, not an empty table (as `flamegraph` refuses it).
/// A `sample:N` report that sampled no allocation is an answer, if an empty one.
pub(crate) fn refuse_without_sites(r: &report::Report, what: &str) -> Result<()> {
    let mode = &r.manifest.mode;
    if r.count_only() || (mode == "off" && r.counts_without_sites()) {
        let why = if mode == "count" {
            no_sites(r, None).to_owned()
        } else {
            format!(
                "it records allocations but no sites (mode {mode} when written; trace \
                 with sites or sample:N)"
            )
        };
        anyhow::bail!("{}: no sites {what}: {why}", r.dir.display());
    }
    Ok(())
}

/// Says on standard error when a `sample:N` report's sites hold more or fewer
/// requested bytes than its phase totals count exactly, by more than sampling alone
/// would put them (and more than 1 %): its bytes and costs then read low (blocks too
/// rare to be sampled) or high (a rare one sampled, counted N times).
pub(crate) fn coverage_note(r: &report::Report, phase: Option<&str>) {
    let Some((sampled, exact, bound)) = r.sampled_bytes_against_exact(phase) else {
        return;
    };
    // (Nothing sampled at all: `no_sites_note` says so.)
    if exact == 0 || sampled == 0 {
        return;
    }
    let off = sampled.abs_diff(exact);
    if off <= bound.unwrap_or(0).max(exact / 100) {
        return;
    }
    let spread = match bound {
        Some(b) if b >= exact / 100 => format!("sampling's spread (±{})", render::bytes(b as f64)),
        _ => "1 %".to_owned(),
    };
    let within = phase.map_or(String::new(), |p| format!(" in {p}"));
    let why = if sampled < exact {
        "the rest is in blocks too rare to be sampled, so its bytes and costs read low"
    } else {
        "rare blocks sampled count N times over, so its bytes and costs read high"
    };
    note!(
        "analyzer: {}: its sampled sites hold {} of the {} requested{within} ({:.1} %; the \
         totals are counted exactly in every mode), further off than {spread}: {why}; a \
         sites report attributes every block",
        r.dir.display(),
        render::bytes(sampled as f64),
        render::bytes(exact as f64),
        100.0 * sampled as f64 / exact as f64,
    );
}

pub(crate) fn no_sites_note(r: &report::Report, phase: Option<&str>, what: &str) {
    if r.rows(phase).next().is_none() {
        note!(
            "analyzer: {}: no sites {what}: {}",
            r.dir.display(),
            no_sites(r, phase)
        );
    }
}

/// The calibration given, else the stored one, if any: for commands that show costs
/// when they can but do not need them. A calibration given that cannot be read is an
/// error; a stored one (a cache) is passed over with a note, as if there were none.
pub(crate) fn stored_calibration(path: Option<&Path>) -> Result<Option<Calibration>> {
    if let Some(p) = path {
        return Ok(Some(Calibration::load(p)?));
    }
    let stored = calibrate::default_path();
    if !stored.exists() {
        return Ok(None);
    }
    match Calibration::load(&stored) {
        Ok(c) => Ok(Some(c)),
        Err(e) => {
            note!(
                "analyzer: the stored calibration cannot be used, and is passed over: {e} \
                 (`analyzer calibrate` measures and stores a new one)"
            );
            Ok(None)
        }
    }
}

/// The calibration to price with: the file given, else the stored one, else a fresh
/// measurement of this machine (stored for next time). A stored file that cannot
/// be read is an error here, not measured over: it may be a newer analyzer's.
pub(crate) fn calibration(path: Option<&Path>) -> Result<Calibration> {
    let stored = calibrate::default_path();
    if let Some(p) = path.or(stored.exists().then_some(stored.as_path())) {
        return Ok(Calibration::load(p)?);
    }
    note!(
        "analyzer: no calibration at {}; measuring this machine now ({}, once)",
        stored.display(),
        measure::FULL_DURATION
    );
    let c = measure_now(measure::Effort::FULL);
    if let Err(e) = c.store(&stored) {
        note!("analyzer: could not store the calibration ({e}); using it for this run only");
    }
    Ok(c)
}

/// Measures a calibration, with a progress bar on a terminal (indicatif draws
/// nothing when standard error is not one).
fn measure_now(effort: measure::Effort) -> Calibration {
    let bar = indicatif::ProgressBar::new(effort.repetitions.max(1) as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "analyzer: calibrating [{bar:30}] pass {pos} of {len}, {elapsed} so far",
        )
        .expect("the template is valid")
        .progress_chars("=> "),
    );
    let c = measure::run(effort, |_| bar.inc(1));
    bar.finish_and_clear();
    c
}

/// Why a report has no site rows (in `phase`, if given).
pub(crate) fn no_sites(r: &report::Report, phase: Option<&str>) -> &'static str {
    if r.count_only() {
        analyzer::export::COUNT_RECORDS_NO_SITES
    } else if phase.is_some() && r.allocs_without_stacks() > 0 && r.calls(phase) > 0 {
        // A run that recorded stacks for part of it, and this phase in `count` mode
        // (or, sampled, with nothing sampled).
        if r.sampled() {
            "none of its allocations was sampled, or they were counted in count mode, \
             with no stack"
        } else {
            "its allocations were counted in count mode, with no stack"
        }
    } else if r.sampled() {
        // A sampled report's sites are the allocations sampled: others went unseen.
        if phase.is_some() {
            "no allocation of this phase was sampled"
        } else {
            "no allocation was sampled"
        }
    } else if phase.is_some() {
        "no allocations in this phase"
    } else {
        "no allocations recorded"
    }
}
