//! The memory commands: `peak`, `leaks`, `timeline`, and the flame graph of live
//! bytes (`flamegraph --by peak-bytes` or `end-bytes`).

use crate::{Selection, rules};
use analyzer::memory::{self, Moment};
use analyzer::report;
use anyhow::Result;
use std::io::Write;
use std::path::{Path, PathBuf};

/// `analyzer peak` (`Moment::Peak`) or `analyzer leaks` (`Moment::End`), with
/// `--base` against a baseline report.
pub(crate) struct HeldJob {
    pub(crate) selection: Selection,
    pub(crate) moment: Moment,
    pub(crate) rules: Option<PathBuf>,
    pub(crate) limit: usize,
    pub(crate) base: Option<PathBuf>,
}

impl HeldJob {
    pub(crate) fn run(self, out: &mut dyn Write) -> Result<()> {
        if self.base.is_some() {
            return self.compare(out);
        }
        let rules = rules(self.rules.as_deref())?;
        let s = self.selection;
        let r = report::load(&s.report)?;
        let phase = r.check_phase(s.phase.as_deref())?;
        let m = memory::load(&r)?;
        warn_of_held_report(&s.report, &r, self.moment);
        let held = memory::held(&r, &m, self.moment, &rules, phase, self.limit);
        warn_if_unsampled(&s.report, &held, s.format);
        Ok(memory::render::held(out, &held, s.format)?)
    }

    /// `--base`: the baseline's moment and the report's, side by side.
    fn compare(self, out: &mut dyn Write) -> Result<()> {
        let rules = rules(self.rules.as_deref())?;
        let s = self.selection;
        let base_dir = self.base.expect("compare is for --base");
        let (a, b) = (report::load(&base_dir)?, report::load(&s.report)?);
        // A phase either run lacks is refused, as `diff` refuses it.
        let phase = a.check_phase(s.phase.as_deref())?;
        b.check_phase(phase)?;
        crate::gate_jobs::warn_if_other_circuits(&a, &b);
        let (ma, mb) = (memory::load(&a)?, memory::load(&b)?);
        let ha = memory::held(&a, &ma, self.moment, &rules, phase, usize::MAX);
        let hb = memory::held(&b, &mb, self.moment, &rules, phase, usize::MAX);
        for (dir, r, h) in [(&base_dir, &a, &ha), (&s.report, &b, &hb)] {
            warn_of_held_report(dir, r, self.moment);
            warn_if_unsampled(dir, h, s.format);
        }
        let change = memory::compare::compare(&a, &ha, &b, &hb, self.limit);
        Ok(memory::compare::render::held_change(
            out, &change, s.format,
        )?)
    }
}

/// `cost_jobs::warn_of_report`, but at the end of a run that was stopped, the one
/// line that says what that means there: what was live then is not a leak.
fn warn_of_held_report(dir: &Path, r: &report::Report, moment: Moment) {
    match (&r.manifest.incomplete, moment) {
        (Some(why), Moment::End) => {
            crate::cost_jobs::warn_of_setup(r);
            note!(
                "analyzer: {}: the run was stopped ({why}): \"the end\" is where it \
                 stopped, and what is live then is not a leak",
                dir.display()
            );
        }
        _ => crate::cost_jobs::warn_of_report(r),
    }
}

/// Heap sampling off, no table of the moment, or nothing sampled live then: the
/// table says so in its text; JSON and CSV would be empty without a word.
fn warn_if_unsampled(dir: &Path, h: &memory::Held, format: analyzer::render::Format) {
    if format == analyzer::render::Format::Table {
        return;
    }
    if !h.table_written {
        note!(
            "analyzer: {}: {}",
            dir.display(),
            analyzer::memory::render::no_table(h)
        );
    } else if h.heap_interval == 0 && h.estimated_bytes_all_phases == 0 {
        note!(
            "analyzer: {}: heap sampling was off when the report was written, and no \
             sampled block was kept from before: no sites hold sampled memory (rerun \
             with ALLOC_TRACE_HEAP=1MiB, synth-driver --heap-sample 1MiB)",
            dir.display()
        );
    } else if h.live_bytes.is_some() && h.estimated_bytes == 0 {
        let why = match (&h.blocks_of_phase, h.estimated_bytes_all_phases) {
            (Some(p), 1..) => {
                format!("none of the sampled blocks live then was allocated in phase {p}")
            }
            _ => analyzer::memory::NOTHING_LIVE.to_owned(),
        };
        note!("analyzer: {}: no sites to list: {why}", dir.display());
    }
}

/// `analyzer timeline -o FILE.svg`.
pub(crate) struct TimelineJob {
    pub(crate) report: PathBuf,
    pub(crate) out: PathBuf,
}

impl TimelineJob {
    pub(crate) fn run(self) -> Result<()> {
        let r = report::load(&self.report)?;
        let m = memory::load(&r)?;
        let svg = memory::svg::timeline(&r, &m)?;
        crate::write_file(&self.out, svg.as_bytes())
    }
}

/// `analyzer flamegraph --by peak-bytes` or `end-bytes`: the SVG into `svg`.
pub(crate) fn heap_flamegraph(
    report: &std::path::Path,
    moment: Moment,
    phase: Option<&str>,
    svg: &mut Vec<u8>,
) -> Result<()> {
    let r = report::load(report)?;
    let phase = r.check_phase(phase)?;
    let m = memory::load(&r)?;
    crate::cost_jobs::warn_of_report(&r);
    if let Some(why) = memory::flamegraph(&r, &m, moment, phase, svg)? {
        note!("analyzer: {}: {why}", r.dir.display());
    }
    Ok(())
}
