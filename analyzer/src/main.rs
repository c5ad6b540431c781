//! `analyzer`: ranks, classifies, prices and diffs the call sites of alloc-tracer
//! reports, and exports them to flame graphs, folded stacks and pprof.

use analyzer::calibrate::{self, Calibration};
use analyzer::export::{self, Weight};
use analyzer::rank::{self, RankBy};
use analyzer::render::{self, Format};
use analyzer::{categories, cost, diff, report};
use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::collections::{HashMap, HashSet};
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The allocator traced programs use, so that `calibrate` measures it.
#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Ranks, classifies, prices and diffs the allocation sites of alloc-tracer reports.
#[derive(Parser, Debug)]
#[command(
    version,
    about,
    after_help = "EXAMPLES:\n  \
    analyzer top reports/porep-2k --phase synthesize --limit 20\n  \
    analyzer categories reports/porep-2k --phase synthesize --format json\n  \
    analyzer cost reports/porep-2k --phase synthesize\n  \
    analyzer diff reports/base reports/patched --phase synthesize\n  \
    analyzer flamegraph reports/porep-2k --by count -o allocs.svg\n  \
    analyzer export reports/porep-2k --format pprof -o allocs.pb.gz\n  \
    analyzer export reports/porep-2k --format parquet -o porep-2k-sites.parquet\n\n\
    Costs use a calibration of this machine's allocator, stored at\n  \
    $ALLOC_PROFILER_CALIBRATION or ~/.cache/alloc-profiler/calibration.json;\n  \
    `analyzer calibrate` writes it (commands that need it measure it on first use)."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Args, Debug)]
struct Common {
    /// Report directory (written by alloc-tracer).
    report: PathBuf,
    /// Only allocations made in this phase (e.g. synthesize).
    #[arg(long)]
    phase: Option<String>,
    /// Output format; data goes to standard output.
    #[arg(long, value_enum, default_value = "table")]
    format: FormatArg,
}

#[derive(Args, Debug)]
struct CostArgs {
    /// Calibration file (default: the stored one, measured now if there is none).
    #[arg(long)]
    calibration: Option<PathBuf>,
    /// Category rules (TOML, the format of the built-in
    /// analyzer/src/default_categories.toml).
    #[arg(long)]
    rules: Option<PathBuf>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// The call sites that allocate most, each named by its first frame outside the
    /// allocator and the standard library, with their estimated cost.
    Top {
        #[command(flatten)]
        common: Common,
        #[command(flatten)]
        cost: CostArgs,
        /// Rank by allocation count, requested bytes, temporaries or estimated cost.
        #[arg(long, value_enum, default_value = "count")]
        by: ByArg,
        /// Sites to show.
        #[arg(long, default_value_t = 20)]
        limit: usize,
    },
    /// Totals per category of allocation (built-in rules for bellperson /
    /// bellpepper-core, or your own TOML rules).
    Categories {
        #[command(flatten)]
        common: Common,
        /// Category rules (TOML, the format of the built-in
        /// analyzer/src/default_categories.toml).
        #[arg(long)]
        rules: Option<PathBuf>,
    },
    /// Measures what malloc+free pairs (per size class and access pattern), the work
    /// around temporaries, Rust's vector growth path and a recycling pool's take and
    /// return cost on this machine, and stores it.
    Calibrate {
        /// Where to store it (default: $ALLOC_PROFILER_CALIBRATION or
        /// ~/.cache/alloc-profiler/calibration.json).
        #[arg(long, short)]
        out: Option<PathBuf>,
        /// One short repetition per figure instead of five (rough; for tests).
        #[arg(long)]
        quick: bool,
        /// Print the calibration as JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// What each site and category costs in seconds (direct: inside the allocator;
    /// indirect: realloc copies and the work around temporaries, an estimate), i.e.
    /// what removing it would save.
    Cost {
        #[command(flatten)]
        common: Common,
        #[command(flatten)]
        cost: CostArgs,
        /// Sites to show.
        #[arg(long, default_value_t = 20)]
        limit: usize,
    },
    /// Compares two reports (baseline, then changed build): sites matched by their
    /// frames, per-site and per-category deltas, predicted against measured change.
    Diff {
        /// Baseline report directory.
        base: PathBuf,
        /// Changed build's report directory.
        change: PathBuf,
        /// Only allocations made in this phase (e.g. synthesize).
        #[arg(long)]
        phase: Option<String>,
        /// Output format; data goes to standard output.
        #[arg(long, value_enum, default_value = "table")]
        format: FormatArg,
        #[command(flatten)]
        cost: CostArgs,
        /// Measured wall time of the baseline (seconds, e.g. a median of untraced
        /// runs); with --change-seconds it replaces the traced runs' phase times.
        #[arg(long, requires = "change_seconds")]
        base_seconds: Option<f64>,
        /// Measured wall time of the changed build (seconds).
        #[arg(long, requires = "base_seconds")]
        change_seconds: Option<f64>,
        /// The change recycles blocks (a pool, a free list) instead of allocating
        /// them: each allocation it removes still costs a take and a return, at the
        /// calibrated `recycle` cost, which the prediction adds back.
        #[arg(long)]
        recycled: bool,
        /// Sites to show.
        #[arg(long, default_value_t = 20)]
        limit: usize,
    },
    /// A flame graph (SVG) of the allocating stacks.
    Flamegraph {
        /// Report directory (written by alloc-tracer).
        report: PathBuf,
        /// Width of a stack: allocations or requested bytes.
        #[arg(long, value_enum, default_value = "count")]
        by: WeightArg,
        /// Only allocations made in this phase (e.g. synthesize).
        #[arg(long)]
        phase: Option<String>,
        /// SVG file to write.
        #[arg(long, short)]
        out: PathBuf,
    },
    /// The report in other tools' formats: folded stacks, a pprof profile, or the
    /// named-sites table (each site's name, callers, category and stack key as columns).
    Export {
        /// Report directory (written by alloc-tracer).
        report: PathBuf,
        /// `folded` (text, one stack per line), `pprof` (gzipped protobuf) or `parquet`
        /// (the named-sites table: one row per site and phase).
        #[arg(long, value_enum)]
        format: ExportFormat,
        /// Weight of a folded stack (pprof carries counts, bytes and temporaries).
        #[arg(long, value_enum, default_value = "count")]
        by: WeightArg,
        /// Only allocations made in this phase (e.g. synthesize).
        #[arg(long)]
        phase: Option<String>,
        /// Category rules for the named-sites table (TOML, the format of the built-in
        /// analyzer/src/default_categories.toml).
        #[arg(long)]
        rules: Option<PathBuf>,
        /// File to write (default: standard output).
        #[arg(long, short)]
        out: Option<PathBuf>,
    },
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum FormatArg {
    Table,
    Json,
    Csv,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum ByArg {
    Count,
    Bytes,
    Temporaries,
    Cost,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum WeightArg {
    Count,
    Bytes,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum ExportFormat {
    Folded,
    Pprof,
    Parquet,
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            if e.chain().any(|c| {
                c.downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            }) {
                return ExitCode::SUCCESS;
            }
            eprintln!("analyzer: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn format(f: FormatArg) -> Format {
    match f {
        FormatArg::Table => Format::Table,
        FormatArg::Json => Format::Json,
        FormatArg::Csv => Format::Csv,
    }
}

fn weight(w: WeightArg) -> Weight {
    match w {
        WeightArg::Count => Weight::Count,
        WeightArg::Bytes => Weight::Bytes,
    }
}

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

/// The calibration to price with: the file given, else the stored one, else a fresh
/// measurement of this machine (stored for next time).
fn calibration(path: Option<&Path>) -> Result<Calibration> {
    if let Some(p) = path {
        return Ok(Calibration::load(p)?);
    }
    let stored = calibrate::default_path();
    if stored.exists() {
        return Ok(Calibration::load(&stored)?);
    }
    eprintln!(
        "analyzer: no calibration at {}; measuring this machine now (about 10 s, once)",
        stored.display()
    );
    let c = measure(calibrate::Effort::FULL);
    if let Err(e) = c.store(&stored) {
        eprintln!("analyzer: could not store the calibration ({e}); using it for this run only");
    }
    Ok(c)
}

fn measure(effort: calibrate::Effort) -> Calibration {
    let (mut done, steps) = (0, effort.repetitions.max(1));
    let tty = std::io::stderr().is_terminal();
    let c = calibrate::run(effort, |what| {
        done += 1;
        if tty {
            eprint!("\ranalyzer: calibrating {done}/{steps} ({what})\x1b[K");
        }
    });
    if tty {
        eprintln!();
    }
    c
}

/// Where binary or text output goes: the file given, or standard output.
fn output(path: Option<&Path>, binary: bool) -> Result<Box<dyn Write>> {
    match path {
        Some(p) => Ok(Box::new(std::io::BufWriter::new(
            std::fs::File::create(p).with_context(|| format!("{}", p.display()))?,
        ))),
        None => {
            if binary && std::io::stdout().is_terminal() {
                anyhow::bail!(
                    "refusing to write binary output (pprof, parquet) to a terminal: give -o FILE"
                );
            }
            Ok(Box::new(std::io::BufWriter::new(std::io::stdout())))
        }
    }
}

fn run(cli: Cli) -> Result<()> {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    match cli.command {
        Command::Top {
            common,
            cost: c,
            by,
            limit,
        } => {
            let r = report::load(&common.report)?;
            let by = match by {
                ByArg::Count => RankBy::Count,
                ByArg::Bytes => RankBy::Bytes,
                ByArg::Temporaries => RankBy::Temporaries,
                ByArg::Cost => RankBy::Cost,
            };
            let rules = rules(c.rules.as_deref())?;
            let cal = calibration(c.calibration.as_deref())?;
            let phase = common.phase.as_deref();
            let seconds = |m: HashMap<u64, (cost::Nanos, usize, bool)>| -> HashMap<u64, f64> {
                m.into_iter()
                    .map(|(site, (n, _, _))| (site, n.total() * 1e-9))
                    .collect()
            };
            // Ranking by cost prices every site; otherwise only the sites shown.
            let sites = if by == RankBy::Cost {
                let all = seconds(cost::per_site(&r, &cal, &rules, phase, None));
                rank::top(&r, by, limit, phase, Some(&all))
            } else {
                let mut sites = rank::top(&r, by, limit, phase, None);
                let shown: HashSet<u64> = sites.iter().map(|s| s.site_id).collect();
                let costs = seconds(cost::per_site(&r, &cal, &rules, phase, Some(&shown)));
                for s in &mut sites {
                    s.cost_s = costs.get(&s.site_id).copied();
                }
                sites
            };
            render::sites(&mut out, &sites, format(common.format))?;
        }
        Command::Categories {
            common,
            rules: path,
        } => {
            let rules = rules(path.as_deref())?;
            let r = report::load(&common.report)?;
            let cats = categories::totals(&r, &rules, common.phase.as_deref());
            render::categories(&mut out, &cats, format(common.format))?;
        }
        Command::Calibrate {
            out: path,
            quick,
            json,
        } => {
            let path = path.unwrap_or_else(calibrate::default_path);
            let c = measure(if quick {
                calibrate::Effort::QUICK
            } else {
                calibrate::Effort::FULL
            });
            c.store(&path)?;
            if json {
                serde_json::to_writer_pretty(&mut out, &c)?;
                writeln!(out)?;
            } else {
                render::calibration(&mut out, &c)?;
            }
            eprintln!("analyzer: calibration stored at {}", path.display());
        }
        Command::Cost {
            common,
            cost: c,
            limit,
        } => {
            let rules = rules(c.rules.as_deref())?;
            let r = report::load(&common.report)?;
            let cal = calibration(c.calibration.as_deref())?;
            for c in &rules {
                if let Some(op) = c.indirect.as_deref().filter(|o| *o != "copy")
                    && cal.operation(op).is_none()
                {
                    eprintln!(
                        "analyzer: category '{}' names operation '{op}', which the calibration does not have; its indirect cost counts as 0",
                        c.name
                    );
                }
            }
            let est = cost::estimate(&r, &cal, &rules, common.phase.as_deref(), limit);
            if !est.host_matches {
                eprintln!(
                    "analyzer: the calibration was measured on {} ({}), the report taken on {} ({})",
                    est.calibration_host.0,
                    est.calibration_host.1,
                    est.report_host.0,
                    est.report_host.1
                );
            }
            render::cost(&mut out, &est, format(common.format))?;
        }
        Command::Diff {
            base,
            change,
            phase,
            format: f,
            cost: c,
            base_seconds,
            change_seconds,
            recycled,
            limit,
        } => {
            let rules = rules(c.rules.as_deref())?;
            let (a, b) = (report::load(&base)?, report::load(&change)?);
            let cal = calibration(c.calibration.as_deref())?;
            let measured = diff::Measured {
                base_s: base_seconds,
                change_s: change_seconds,
            };
            if recycled && cal.operation(calibrate::RECYCLE).is_none() {
                anyhow::bail!(
                    "--recycled: the calibration has no `recycle` operation (made by an older \
                     analyzer); run `analyzer calibrate` again"
                );
            }
            let d = diff::diff(
                &a,
                &b,
                diff::Pricing {
                    cal: Some(&cal),
                    recycled,
                },
                &rules,
                phase.as_deref(),
                measured,
                limit,
            );
            render::diff(&mut out, &d, format(f))?;
        }
        Command::Flamegraph {
            report: dir,
            by,
            phase,
            out: path,
        } => {
            let r = report::load(&dir)?;
            let mut svg = Vec::new();
            export::flamegraph(&r, weight(by), phase.as_deref(), &mut svg)?;
            std::fs::write(&path, svg).with_context(|| format!("{}", path.display()))?;
        }
        Command::Export {
            report: dir,
            format: f,
            by,
            phase,
            rules: rules_path,
            out: path,
        } => {
            let rules = rules(rules_path.as_deref())?;
            let r = report::load(&dir)?;
            let binary = !matches!(f, ExportFormat::Folded);
            let mut w = output(path.as_deref(), binary)?;
            match f {
                ExportFormat::Folded => {
                    for line in export::folded(&r, weight(by), phase.as_deref()) {
                        writeln!(w, "{line}")?;
                    }
                }
                ExportFormat::Pprof => export::pprof(&r, phase.as_deref(), &mut w)?,
                ExportFormat::Parquet => {
                    let rows = export::named_sites(&r, &rules, phase.as_deref());
                    export::named_sites_parquet(&rows, &mut w)?;
                }
            }
            w.flush()?;
        }
    }
    out.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_valid() {
        Cli::command().debug_assert();
    }
}
