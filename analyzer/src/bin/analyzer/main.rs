//! `analyzer`: ranks, classifies, prices and diffs the call sites of alloc-tracer
//! reports, and exports them to flame graphs, folded stacks and pprof.
//!
//! `cli` turns the command line into one [`Job`]; [`run`] hands it to the function
//! for its command (those that price and gate in `cost_jobs`, the memory commands in
//! `memory_jobs`); `measure` is `analyzer calibrate`'s measurement. Everything else
//! is the library.

/// `eprintln!` that does not panic when standard error is closed (a pipe whose
/// reader left, `2>&1 | head`): a note lost there must not turn into exit 101.
macro_rules! note {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

mod cli;
mod cost_jobs;
mod gate_jobs;
mod measure;
mod memory_jobs;

use cost_jobs::{CalibrateJob, CostJob, calibration, stored_calibration};
use gate_jobs::{BudgetJob, CheckJob, DiffJob};

use analyzer::export::{self, Weight};
use analyzer::memory::Moment;
use analyzer::rank::{self, GroupBy, RankBy};
use analyzer::render::{self, Format};
use analyzer::{categories, cost, info, report};
use anyhow::{Context, Result};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The allocator traced programs use, so that `calibrate` measures it (see `measure`).
#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// What one invocation does: a command with its arguments, defaults resolved.
enum Job {
    /// `analyzer info`.
    Info(InfoJob),
    /// `analyzer top`.
    Top(TopJob),
    /// `analyzer categories`.
    Categories(CategoriesJob),
    /// `analyzer calibrate`.
    Calibrate(CalibrateJob),
    /// `analyzer cost`.
    Cost(CostJob),
    /// `analyzer diff`.
    Diff(DiffJob),
    /// `analyzer check`.
    Check(CheckJob),
    /// `analyzer budget`.
    Budget(BudgetJob),
    /// `analyzer flamegraph`.
    Flamegraph(FlamegraphJob),
    /// `analyzer peak` and `analyzer leaks`.
    Held(memory_jobs::HeldJob),
    /// `analyzer timeline`.
    Timeline(memory_jobs::TimelineJob),
    /// `analyzer export`.
    Export(ExportJob),
}

/// Which report, which phase of it, and how to write the answer.
struct Selection {
    report: PathBuf,
    phase: Option<String>,
    format: Format,
}

/// Where the cost model's inputs come from (`None`: the defaults).
struct CostInputs {
    calibration: Option<PathBuf>,
    rules: Option<PathBuf>,
}

struct InfoJob {
    report: PathBuf,
    format: Format,
}

struct TopJob {
    selection: Selection,
    inputs: CostInputs,
    by: RankBy,
    group_by: GroupBy,
    limit: usize,
}

struct CategoriesJob {
    selection: Selection,
    rules: Option<PathBuf>,
}

/// What a flame graph draws.
enum FlamegraphOf {
    /// One report.
    Report(PathBuf),
    /// The change against the base, drawing the stacks of the side `widths` names.
    Diff {
        base: PathBuf,
        change: PathBuf,
        widths: analyzer::export::Widths,
    },
}

struct FlamegraphJob {
    of: FlamegraphOf,
    phase: Option<String>,
    by: FlameBy,
    out: PathBuf,
}

/// The width of a flame graph's stacks.
enum FlameBy {
    /// What was allocated, so weighted.
    Allocated(Weight),
    /// Live bytes at the kept peak or the end (heap sampling).
    Live(Moment),
}

/// What `analyzer export` writes.
enum ExportAs {
    /// Folded stacks, weighted so.
    Folded(FlameBy),
    /// A gzipped pprof profile (allocations, bytes, temporaries, and what is live at
    /// the kept peak).
    Pprof,
    /// The named-sites table (parquet), categories from these rules or the built-in
    /// ones.
    NamedSites { rules: Option<PathBuf> },
}

struct ExportJob {
    report: PathBuf,
    phase: Option<String>,
    format: ExportAs,
    out: Option<PathBuf>,
    /// An option given that this format does not read, refused before any work:
    /// silently ignored, it would read as applied.
    unused: Option<&'static str>,
}

fn main() -> ExitCode {
    let job = match cli::parse() {
        Ok(job) => job,
        Err(e)
            if e.use_stderr()
                && e.kind() != clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand =>
        {
            // One line, as every other error (clap's own spreads a usage error over
            // five): the message and its tips, what clap writes before `Usage:`.
            let text = e.render().to_string();
            let mut line = String::new();
            for part in text
                .lines()
                .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more information"))
                .map(str::trim)
                .filter(|l| !l.is_empty())
            {
                if !line.is_empty() {
                    line.push_str(if line.ends_with(':') { " " } else { "; " });
                }
                line.push_str(part);
            }
            let line = line.replacen("error: ", "", 1);
            note!("analyzer: {line} (--help lists the options)");
            return ExitCode::from(2);
        }
        Err(e) => {
            // --help and --version, and the help shown for no command at all: clap's
            // text, as it is.
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    match run(job) {
        Ok(code) => code,
        Err(e) => {
            // A reader that stops early (`| head`) is not an error.
            if e.chain().any(|c| {
                c.downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            }) {
                return ExitCode::SUCCESS;
            }
            // One line whatever a cause's text holds: scripts read the first line,
            // and a message spread over several reads as a crash.
            let message = format!("{e:#}");
            let message: Vec<&str> = message.split_whitespace().collect();
            note!("analyzer: {}", message.join(" "));
            ExitCode::from(2)
        }
    }
}

/// Runs one job; its data goes to standard output, diagnostics and budget breaches to
/// standard error. Success, or 1 when `check` or `diff --fail-if` found a breach.
fn run(job: Job) -> Result<ExitCode> {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut gated = gate_jobs::Gated::default();
    match job {
        Job::Info(job) => job.run(&mut out)?,
        Job::Top(job) => job.run(&mut out)?,
        Job::Categories(job) => job.run(&mut out)?,
        Job::Calibrate(job) => job.run(&mut out)?,
        Job::Cost(job) => job.run(&mut out)?,
        Job::Diff(job) => gated = job.run(&mut out)?.into(),
        Job::Check(job) => gated = job.run(&mut out)?,
        Job::Budget(job) => job.run(&mut out)?,
        Job::Flamegraph(job) => job.run()?,
        Job::Held(job) => job.run(&mut out)?,
        Job::Timeline(job) => job.run()?,
        Job::Export(job) => job.run()?,
    }
    gate_jobs::unless_reader_left(out.flush(), &gated.breaches)?;
    if gated.breaches.is_empty() {
        return Ok(ExitCode::SUCCESS);
    }
    // One line each, after the data, so that a CI log ends with what failed and what
    // to do about it. Should standard error be a pipe whose reader left (`2>&1 |
    // head`), the exit status still says so: a gate that failed never exits 0.
    for b in &gated.breaches {
        note!("analyzer: over budget: {b}");
    }
    for h in &gated.hints {
        note!("analyzer: {h}");
    }
    Ok(ExitCode::from(1))
}

impl InfoJob {
    fn run(self, out: &mut dyn Write) -> Result<()> {
        let r = report::load(&self.report)?;
        cost_jobs::warn_of_setup(&r);
        Ok(render::info(out, &info::info(&r), self.format)?)
    }
}

impl TopJob {
    fn run(self, out: &mut dyn Write) -> Result<()> {
        let Selection {
            report: dir,
            phase,
            format,
        } = self.selection;
        let r = report::load(&dir)?;
        let phase = r.check_phase(phase.as_deref())?;
        cost_jobs::refuse_without_sites(&r, "to rank")?;
        cost_jobs::warn_of_report(&r);
        let rules = rules(self.inputs.rules.as_deref())?;
        // Only ranking by cost needs prices; otherwise costs are shown when a
        // calibration is at hand, and nothing is measured.
        let cal = if self.by == RankBy::Cost {
            Some(calibration(self.inputs.calibration.as_deref())?)
        } else {
            stored_calibration(self.inputs.calibration.as_deref())?
        };
        let seconds = |m: BTreeMap<u64, (cost::Nanos, usize, bool)>| -> HashMap<u64, f64> {
            m.into_iter()
                .map(|(site, (n, _, _))| (site, n.total() * 1e-9))
                .collect()
        };
        let sites = match (&cal, self.group_by) {
            // Ranking by cost, or groups, price every site; single sites ranked
            // otherwise, only those shown.
            (Some(cal), group) if self.by == RankBy::Cost || group != GroupBy::Site => {
                let all = seconds(cost::per_site(&r, cal, &rules, phase, None));
                rank::top_grouped(&r, self.by, self.limit, phase, Some(&all), group, &rules)
            }
            (Some(cal), _) => {
                let mut sites = rank::top(&r, self.by, self.limit, phase, None);
                let shown: HashSet<u64> = sites.iter().map(|s| s.site_id).collect();
                let costs = seconds(cost::per_site(&r, cal, &rules, phase, Some(&shown)));
                for s in &mut sites {
                    s.cost_s = costs.get(&s.site_id).copied();
                }
                sites
            }
            (None, group) => rank::top_grouped(&r, self.by, self.limit, phase, None, group, &rules),
        };
        if let Some(cal) = &cal {
            cost_jobs::warn_if_other_host(cal, &r);
        }
        if self.group_by == GroupBy::Site {
            let split = rank::split_by_pool(&r, &sites);
            if split > 0 {
                note!(
                    "analyzer: {split} of the sites shown are jobs of a thread pool split into \
                     several sites by its work stealing (told apart by `[via ...]`): \
                     `--group-by job` shows each job once"
                );
            }
        }
        if sites.is_empty() {
            // An empty table is an answer; say why it is empty.
            note!(
                "analyzer: {}: no sites to rank: {}",
                dir.display(),
                if self.limit == 0 {
                    "--limit 0 shows none"
                } else {
                    no_sites(&r, phase)
                }
            );
        }
        Ok(render::sites(out, &sites, format)?)
    }
}

impl CategoriesJob {
    fn run(self, out: &mut dyn Write) -> Result<()> {
        let rules = rules(self.rules.as_deref())?;
        let s = self.selection;
        let r = report::load(&s.report)?;
        let phase = r.check_phase(s.phase.as_deref())?;
        cost_jobs::refuse_without_sites(&r, "to put in categories")?;
        cost_jobs::warn_of_report(&r);
        cost_jobs::no_sites_note(&r, phase, "to put in categories");
        let cats = analyzer::category_totals::totals(&r, &rules, phase);
        Ok(render::categories(out, &cats, s.format)?)
    }
}

impl FlamegraphJob {
    fn run(self) -> Result<()> {
        let mut svg = Vec::new();
        match (&self.of, self.by) {
            (FlamegraphOf::Report(dir), FlameBy::Allocated(by)) => {
                let r = report::load(dir)?;
                let phase = r.check_phase(self.phase.as_deref())?;
                cost_jobs::warn_of_report(&r);
                export::flamegraph(&r, by, phase, &mut svg)?;
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
                FlameBy::Allocated(by),
            ) => {
                let (a, b) = (report::load(base)?, report::load(change)?);
                gate_jobs::comparable(&a, &b, gate_jobs::Gates::default())?;
                cost_jobs::warn_of_report(&a);
                cost_jobs::warn_of_report(&b);
                let phase = a.check_phase(self.phase.as_deref())?;
                b.check_phase(phase)?;
                export::flamegraph_diff(&a, &b, by, phase, *widths, &mut svg)?;
            }
            (
                FlamegraphOf::Diff {
                    base,
                    change,
                    widths,
                },
                FlameBy::Live(moment),
            ) => {
                let (a, b) = (report::load(base)?, report::load(change)?);
                cost_jobs::warn_of_report(&a);
                cost_jobs::warn_of_report(&b);
                let phase = a.check_phase(self.phase.as_deref())?;
                b.check_phase(phase)?;
                let (ma, mb) = (analyzer::memory::load(&a)?, analyzer::memory::load(&b)?);
                analyzer::memory::flamegraph_diff(
                    (&a, &ma),
                    (&b, &mb),
                    moment,
                    phase,
                    *widths,
                    &mut svg,
                )?;
            }
        }
        write_file(&self.out, &svg)
    }
}

/// Why a report has no site rows (in `phase`, if given).
fn no_sites(r: &report::Report, phase: Option<&str>) -> &'static str {
    if r.manifest.mode == "count" {
        "a count-mode report records no sites (run with ALLOC_TRACE=sites or sample:N)"
    } else if r.manifest.mode.starts_with("sample:") {
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

impl ExportJob {
    fn run(self) -> Result<()> {
        if let Some(why) = self.unused {
            anyhow::bail!("{why}");
        }
        let r = report::load(&self.report)?;
        let phase = r.check_phase(self.phase.as_deref())?;
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
                for line in export::folded(&r, by, phase) {
                    writeln!(w, "{line}")?;
                }
            }
            ExportAs::Folded(FlameBy::Live(moment)) => {
                let m = analyzer::memory::load(&r)?;
                let lines = analyzer::memory::folded(&r, &m, moment, phase);
                if lines.is_empty() {
                    // Written all the same (an empty file), as other empty exports are.
                    note!(
                        "analyzer: {}: no live bytes to export: {}",
                        self.report.display(),
                        analyzer::memory::NOTHING_LIVE
                    );
                }
                for line in lines {
                    writeln!(w, "{line}")?;
                }
            }
            ExportAs::Pprof => {
                let in_use = analyzer::memory::in_use(&analyzer::memory::load(&r)?);
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
                if r.manifest.mode.starts_with("sample:") {
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

/// The category rules in `path`, or the built-in ones.
fn rules(path: Option<&Path>) -> Result<Vec<categories::Category>> {
    Ok(match path {
        Some(path) => {
            let text =
                std::fs::read_to_string(path).with_context(|| format!("{}", path.display()))?;
            categories::parse_rules(&text, path)?
        }
        None => categories::default_rules(),
    })
}

/// Writes `bytes` to `path`, a whole output made before anything is written: a
/// regular file (or a new one) through a temporary file beside it, given the old
/// file's permissions and renamed into place, so that a reader never sees half of it
/// and a failed write leaves what was there; anything else (`/dev/null`, a FIFO, a
/// link, a file with other hard links, which a rename would part from it) is written
/// to as it is, never replaced.
pub(crate) fn write_file(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let (regular, permissions) = match std::fs::symlink_metadata(path) {
        Ok(m) => (
            m.file_type().is_file() && m.nlink() == 1,
            Some(m.permissions()),
        ),
        Err(e) => (e.kind() == std::io::ErrorKind::NotFound, None),
    };
    if !regular {
        return std::fs::write(path, bytes).with_context(|| format!("{}", path.display()));
    }
    let name = path
        .file_name()
        .map_or_else(|| "output".into(), |n| n.to_string_lossy().into_owned());
    let tmp = path.with_file_name(format!(".{name}.tmp-{}", std::process::id()));
    // Made new, never through what already has that name (a link planted there).
    let staged = match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
    {
        Ok(mut f) => Some(
            permissions
                .map_or(Ok(()), |p| f.set_permissions(p))
                .and_then(|()| f.write_all(bytes))
                .and_then(|()| f.sync_all()),
        ),
        Err(_) => None,
    };
    let made = staged.is_some();
    let written = match staged {
        Some(Ok(())) => std::fs::rename(&tmp, path),
        Some(Err(e)) => Err(e),
        // No temporary file beside it (the folder is not writable, or the name is
        // another's): written in place, the whole output in hand.
        None => std::fs::write(path, bytes),
    };
    if made && written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written.with_context(|| format!("{}", path.display()))
}
