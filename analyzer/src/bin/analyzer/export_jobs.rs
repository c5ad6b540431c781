//! `analyzer flamegraph` and `analyzer export`: a report (or two) drawn as a flame
//! graph, or written in the formats other tools read.

use crate::cost_jobs::{self, no_sites};
use crate::{gate_jobs, memory_jobs, rules, write_file};
use analyzer::export::{self, Weight};
use analyzer::memory::Moment;
use analyzer::report;
use anyhow::Result;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;

/// What a flame graph draws.
pub(crate) enum FlamegraphOf {
    /// One report.
    Report(PathBuf),
    /// The change against the base, drawing the stacks of the side `widths` names.
    Diff {
        base: PathBuf,
        change: PathBuf,
        widths: analyzer::export::Widths,
    },
}

pub(crate) struct FlamegraphJob {
    pub(crate) of: FlamegraphOf,
    pub(crate) phase: Option<String>,
    pub(crate) by: FlameBy,
    pub(crate) out: PathBuf,
}

/// The width of a flame graph's stacks.
pub(crate) enum FlameBy {
    /// What was allocated, so weighted.
    Allocated(Weight),
    /// Live bytes at the kept peak or the end (heap sampling).
    Live(Moment),
}

/// What `analyzer export` writes.
pub(crate) enum ExportAs {
    /// Folded stacks, weighted so.
    Folded(FlameBy),
    /// A gzipped pprof profile (allocations, bytes, temporaries, and what is live at
    /// the kept peak).
    Pprof,
    /// The named-sites table (parquet), categories from these rules or the built-in
    /// ones.
    NamedSites { rules: Option<PathBuf> },
}

pub(crate) struct ExportJob {
    pub(crate) report: PathBuf,
    pub(crate) phase: Option<String>,
    pub(crate) format: ExportAs,
    pub(crate) out: Option<PathBuf>,
    /// An option given that this format does not read, refused before any work:
    /// silently ignored, it would read as applied.
    pub(crate) unused: Option<&'static str>,
}

impl FlamegraphJob {
    pub(crate) fn run(self) -> Result<()> {
        let mut svg = Vec::new();
        match (&self.of, self.by) {
            (FlamegraphOf::Report(dir), FlameBy::Allocated(by)) => {
                let r = report::load(dir)?;
                let phase = r.check_phase(self.phase.as_deref())?;
                cost_jobs::warn_of_report(&r);
                if let Some(why) = export::flamegraph(&r, by, phase, &mut svg)? {
                    // An answer, drawn as one, and said.
                    note!("analyzer: {}: {why}", r.dir.display());
                }
            }
            (FlamegraphOf::Report(dir), FlameBy::Live(moment)) => {
                memory_jobs::heap_flamegraph(dir, moment, self.phase.as_deref(), &mut svg)?;
            }
            (
                FlamegraphOf::Diff {
                    base,
                    change,
                    widths,
                },
                by,
            ) => {
                let (a, b) = (report::load(base)?, report::load(change)?);
                if let FlameBy::Allocated(_) = by {
                    // Live bytes come from heap sampling, which count mode has too.
                    gate_jobs::comparable(&a, &b, gate_jobs::Gates::default())?;
                }
                cost_jobs::warn_of_report(&a);
                cost_jobs::warn_of_report(&b);
                let phase = a.check_phase(self.phase.as_deref())?;
                b.check_phase(phase)?;
                // Said on standard error too (`comparable`, or below for live
                // bytes); the picture outlives the terminal.
                let warning = gate_jobs::other_work(&a, &b)
                    .map(|apart| format!("warning: the reports are {apart}"));
                match by {
                    FlameBy::Allocated(by) => {
                        export::flamegraph_diff(&a, &b, by, phase, *widths, warning, &mut svg)?
                    }
                    FlameBy::Live(moment) => {
                        let (ma, mb) = (analyzer::memory::load(&a)?, analyzer::memory::load(&b)?);
                        gate_jobs::warn_if_other_circuits(&a, &b);
                        analyzer::memory::flamegraph_diff(
                            (&a, &ma),
                            (&b, &mb),
                            moment,
                            phase,
                            *widths,
                            warning,
                            &mut svg,
                        )?
                    }
                }
            }
        }
        write_file(&self.out, &svg)
    }
}

impl ExportJob {
    pub(crate) fn run(self) -> Result<()> {
        if let Some(why) = self.unused {
            anyhow::bail!("{why}");
        }
        if let Some(out) = &self.out {
            crate::refuse_report_file(out, &self.report)?;
        }
        let r = report::load(&self.report)?;
        let phase = r.check_phase(self.phase.as_deref())?;
        // A count report records no sites: a profile of them cannot answer, as `top`
        // and the flame graph cannot (a pprof profile may still hold what heap
        // sampling kept live, below). The named-sites table is written, with no rows,
        // for programs that read every report's table alike.
        if r.count_only() && matches!(self.format, ExportAs::Folded(FlameBy::Allocated(_))) {
            anyhow::bail!(
                "{}: nothing to export: {}",
                r.dir.display(),
                no_sites(&r, phase)
            );
        }
        // An empty export is written all the same: say why it is empty. (Live bytes
        // come from heap sampling, which count mode has too; those branches say why.)
        if !matches!(
            self.format,
            ExportAs::Folded(FlameBy::Live(_)) | ExportAs::Pprof
        ) {
            cost_jobs::no_sites_note(&r, phase, "to export");
        }
        let binary = !matches!(self.format, ExportAs::Folded(_));
        if binary && self.out.is_none() && std::io::stdout().is_terminal() {
            anyhow::bail!(
                "refusing to write binary output (pprof, parquet) to a terminal: give -o FILE"
            );
        }
        // Made whole before anything is written, so that a failure (a bad rules file,
        // a damaged table) leaves an existing output file as it was.
        let mut w = Vec::new();
        match self.format {
            ExportAs::Folded(FlameBy::Allocated(by)) => {
                if let Some(words) = export::sampled_words(&r) {
                    note!("analyzer: {}: the weights are {words}", r.dir.display());
                }
                let lines = export::folded(&r, by, phase);
                if lines.is_empty() && r.rows(phase).next().is_some() {
                    // (No rows at all: `no_sites_note` said so above.)
                    note!(
                        "analyzer: {}: no {} to export: {}",
                        r.dir.display(),
                        by.unit(),
                        export::why_nothing(&[&r], phase)
                    );
                }
                for line in lines {
                    writeln!(w, "{line}")?;
                }
            }
            ExportAs::Folded(FlameBy::Live(moment)) => {
                let m = analyzer::memory::load(&r)?;
                let lines = analyzer::memory::folded(&r, &m, moment, phase, export::Frames::All);
                if lines.is_empty() && !analyzer::memory::moment_sampled(&r, &m, moment) {
                    // No answer, as the flame graph of it has none: not an empty file.
                    anyhow::bail!(
                        "{}: no live bytes to export: {}",
                        self.report.display(),
                        analyzer::memory::UNSEEN
                    );
                }
                // No title here to say that the weights are estimates.
                if !lines.is_empty()
                    && let Some(every) = export::heap_sampled(&r)
                {
                    note!(
                        "analyzer: {}: the weights are heap sampling's estimates of live \
                         bytes ({every})",
                        r.dir.display()
                    );
                }
                if lines.is_empty() {
                    // Written all the same (an empty file), as other empty exports are.
                    let why = analyzer::memory::phase_held_none(&[(&r, &m)], moment, phase)
                        .unwrap_or_else(|| analyzer::memory::NOTHING_LIVE.to_owned());
                    note!(
                        "analyzer: {}: no live bytes to export: {why}",
                        self.report.display()
                    );
                }
                for line in lines {
                    writeln!(w, "{line}")?;
                }
            }
            ExportAs::Pprof => {
                let m = analyzer::memory::load(&r)?;
                if r.count_only()
                    && !analyzer::memory::moment_sampled(&r, &m, analyzer::memory::Moment::Peak)
                {
                    anyhow::bail!(
                        "{}: nothing to export: {}, and {}",
                        r.dir.display(),
                        no_sites(&r, phase),
                        analyzer::memory::UNSEEN
                    );
                }
                let in_use = analyzer::memory::in_use(&m);
                if r.rows(phase).next().is_none() {
                    // What the profile holds of the phase asked for, as pprof writes it.
                    let live = in_use.iter().any(|u| u.in_phase(phase));
                    let holds = if !live {
                        "the profile is empty"
                    } else {
                        "the profile holds only what heap sampling kept live at the peak \
                         (inuse_space, inuse_objects)"
                    };
                    note!(
                        "analyzer: {}: no allocation sites to export, {}; {holds}",
                        r.dir.display(),
                        no_sites(&r, phase)
                    );
                }
                if r.sampled() {
                    let first = export::pprof_estimates(&r, &in_use).into_iter().next();
                    note!(
                        "analyzer: {}: {}",
                        r.dir.display(),
                        first.unwrap_or_default()
                    );
                }
                export::pprof(&r, phase, &in_use, &mut w)?
            }
            ExportAs::NamedSites { rules: path } => {
                if let Some(words) = export::sampled_words(&r) {
                    note!("analyzer: {}: the counts are {words}", r.dir.display());
                }
                let rules = rules(path.as_deref())?;
                let rows = export::named_sites(&r, &rules, phase);
                export::named_sites_parquet(&rows, &mut w)?;
            }
        }
        match &self.out {
            Some(path) => write_file(path, &w),
            None => {
                let mut stdout = std::io::stdout().lock();
                stdout.write_all(&w)?;
                Ok(stdout.flush()?)
            }
        }
    }
}
