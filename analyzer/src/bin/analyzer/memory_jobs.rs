//! The memory commands: `peak`, `leaks`, `timeline`, and the flame graph of live
//! bytes (`flamegraph --by peak-bytes`).

use crate::{Selection, rules};
use analyzer::memory::{self, Moment};
use analyzer::report;
use anyhow::Result;
use std::io::Write;
use std::path::PathBuf;

/// `analyzer peak` (`Moment::Peak`) or `analyzer leaks` (`Moment::End`).
pub(crate) struct HeldJob {
    pub(crate) selection: Selection,
    pub(crate) moment: Moment,
    pub(crate) rules: Option<PathBuf>,
    pub(crate) limit: usize,
}

impl HeldJob {
    pub(crate) fn run(self, out: &mut dyn Write) -> Result<()> {
        let rules = rules(self.rules.as_deref())?;
        let s = self.selection;
        let r = report::load(&s.report)?;
        let phase = r.check_phase(s.phase.as_deref())?;
        let m = memory::load(&r)?;
        if let (Some(why), memory::Moment::End) = (&r.manifest.incomplete, self.moment) {
            // What was live when the run was stopped, not what it failed to free.
            eprintln!(
                "analyzer: {}: the run was stopped ({why}): \"the end\" is where it stopped, \
                 and what is live then is not a leak",
                s.report.display()
            );
        }
        let held = memory::held(&r, &m, self.moment, &rules, phase, self.limit);
        if held.heap_interval == 0
            && held.estimated_bytes_all_phases == 0
            && s.format != analyzer::render::Format::Table
        {
            // The table says so in its text; JSON and CSV would be empty without a word.
            eprintln!(
                "analyzer: {}: heap sampling was off in this run: no sites hold sampled \
                 memory (rerun with ALLOC_TRACE_HEAP=1MiB, synth-driver --heap-sample 1MiB)",
                s.report.display()
            );
        }
        Ok(memory::render::held(out, &held, s.format)?)
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

/// `analyzer flamegraph --by peak-bytes`: the SVG into `svg`.
pub(crate) fn heap_flamegraph(
    report: &std::path::Path,
    phase: Option<&str>,
    svg: &mut Vec<u8>,
) -> Result<()> {
    let r = report::load(report)?;
    let phase = r.check_phase(phase)?;
    let m = memory::load(&r)?;
    Ok(memory::flamegraph(&r, &m, Moment::Peak, phase, svg)?)
}
