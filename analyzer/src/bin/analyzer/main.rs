//! `analyzer`: ranks, classifies, prices and diffs the call sites of alloc-tracer
//! reports, and exports them to flame graphs, folded stacks and pprof.
//!
//! `cli` turns the command line into one [`Job`]; [`run`] hands it to the function
//! for its command (those that price in `cost_jobs`, the gates and the checks of
//! what two reports compare in `gate_jobs`, the memory commands in `memory_jobs`); `measure` is `analyzer calibrate`'s measurement. Everything else
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
mod export_jobs;
mod gate_jobs;
mod measure;
mod memory_jobs;

use cost_jobs::{CalibrateJob, CostJob, calibration, no_sites, stored_calibration};
use export_jobs::{ExportAs, ExportJob, FlameBy, FlamegraphJob, FlamegraphOf};
use gate_jobs::{BudgetJob, CheckJob, DiffJob};

use analyzer::rank::{self, GroupBy, RankBy};
use analyzer::render::{self, Format};
use analyzer::{categories, cost, info, report};
use anyhow::{Context, Result};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::Write;
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
                // clap's tip for an unknown flag on a command with a positional
                // argument, to pass it as a value after `--`: here that would be a
                // report folder named `--format`, never what was meant.
                .filter(|l| !(l.starts_with("tip: to pass '") && l.contains("as a value")))
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
            note!("analyzer: {}", one_line(&format!("{e:#}")));
            ExitCode::from(2)
        }
    }
}

/// An error's text on one line whatever a cause's text holds (scripts read the first
/// line, and a message spread over several reads as a crash): its lines trimmed and
/// joined by a space, a lone carriage return ending a line too (a terminal would
/// write the rest over its start). Spaces within a line stay, so that names that
/// differ by them (`"a  b"`, `" synthesize"`) still read apart.
fn one_line(message: &str) -> String {
    let lines: Vec<&str> = message
        .split(['\n', '\r'])
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    lines.join(" ")
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
        Job::Diff(job) => gated = job.run(&mut out)?,
        Job::Check(job) => gated = job.run(&mut out)?,
        Job::Budget(job) => job.run(&mut out)?,
        Job::Flamegraph(job) => job.run()?,
        Job::Held(job) => job.run(&mut out)?,
        Job::Timeline(job) => job.run()?,
        Job::Export(job) => job.run()?,
    }
    let write_error = gated
        .write_error
        .take()
        .or_else(|| gate_jobs::unless_reader_left(out.flush()));
    if gated.breaches.is_empty() {
        return match write_error {
            Some(e) => Err(anyhow::Error::from(e).context("writing standard output")),
            None => Ok(ExitCode::SUCCESS),
        };
    }
    // One line each, after the data, so that a CI log ends with what failed and what
    // to do about it. Should standard error be a pipe whose reader left (`2>&1 |
    // head`), the exit status still says so: a gate that failed never exits 0.
    for b in &gated.breaches {
        note!("analyzer: {b}");
    }
    for h in &gated.hints {
        note!("analyzer: {h}");
    }
    // The breaches told, the output's own failure still ends the run as an error.
    if let Some(e) = write_error {
        return Err(anyhow::Error::from(e).context("writing standard output"));
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
            let stored = stored_calibration(self.inputs.calibration.as_deref())?;
            if stored.is_none() {
                // Over a stored file that cannot be read, `--by cost` refuses rather
                // than measure one.
                let how = if analyzer::calibrate::default_path().exists() {
                    "`analyzer calibrate` measures a new one"
                } else {
                    "`analyzer calibrate` measures one; `--by cost` measures one first"
                };
                note!("analyzer: no calibration to price with: the cost column is empty ({how})");
            }
            stored
        };
        if let Some(cal) = &cal {
            cost_jobs::warn_of_unpriced(&rules, cal);
        }
        let seconds = |m: BTreeMap<u64, cost::Priced>| -> HashMap<u64, f64> {
            m.into_iter()
                .map(|(site, p)| (site, p.cost.total() * 1e-9))
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
            // Sites that read the same, name and callers, told apart further out
            // only: one call path a fix changes once.
            let mut same: HashMap<(&str, &str), usize> = HashMap::new();
            for s in &sites {
                *same.entry((&s.name, &s.callers)).or_default() += 1;
            }
            let alike: usize = same.values().filter(|&&n| n > 1).sum();
            if alike > split {
                note!(
                    "analyzer: {alike} of the sites shown read the same as another shown \
                     (name and callers; told apart only by other frames, `[via ...]`, \
                     `[in ...]` or `#n`): `--group-by callers` sums each such call path \
                     in one row"
                );
            }
        }
        cost_jobs::coverage_note(&r, phase);
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
        let table = render::SitesTable {
            rows: self.group_by.row_name(),
            sampled: r.manifest.sample_interval > 1,
        };
        Ok(render::sites(out, &sites, table, format)?)
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
        cost_jobs::coverage_note(&r, phase);
        let cats = analyzer::category_totals::totals(&r, &rules, phase);
        Ok(render::categories(out, &cats, s.format)?)
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

/// Refuses `-o PATH` where it names a file of a report folder (its manifest or one
/// of its tables, beside a `manifest.json`), itself or through a link (`write_file`
/// writes through a symbolic link, and in place into a file of other hard links,
/// such as one of `report`'s): writing there would destroy the report, maybe the
/// very one being read. Checked before any work by the commands whose output may
/// take any name (`export`, `budget`; `flamegraph` and `timeline` write only `.svg`).
pub(crate) fn refuse_report_file(path: &Path, report: &Path) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let in_a_report = |p: &Path| {
        let folder = match p.parent() {
            Some(f) if !f.as_os_str().is_empty() => f,
            _ => Path::new("."),
        };
        p.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(alloc_tracer_format::schema::is_report_file)
            && folder.join(alloc_tracer_format::schema::MANIFEST).is_file()
    };
    // Where a link leads, and whether it is one of the report's files by identity.
    let target = std::fs::canonicalize(path).ok();
    let same_file = std::fs::metadata(path).ok().is_some_and(|out| {
        std::fs::read_dir(report).is_ok_and(|files| {
            files.flatten().any(|f| {
                f.metadata()
                    .is_ok_and(|m| m.is_file() && (m.dev(), m.ino()) == (out.dev(), out.ino()))
            })
        })
    });
    if let Some(file) = [Some(path), target.as_deref()]
        .into_iter()
        .flatten()
        .find(|p| in_a_report(p))
        .or(same_file.then_some(path))
    {
        anyhow::bail!(
            "{}: a file of a report ({}), which this output would replace: write it \
             elsewhere",
            path.display(),
            file.display()
        );
    }
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::one_line;

    #[test]
    fn an_error_is_one_line_with_its_own_spaces() {
        assert_eq!(one_line("a\n\n   b\tc \n"), "a b\tc");
        assert_eq!(one_line("a\r\nb\rc"), "a b c");
        assert_eq!(
            one_line("phase  synthesize is not in the report"),
            "phase  synthesize is not in the report"
        );
    }
}
