//! The command line: clap's types, turned once into the plain jobs of `main` (so that
//! no command reads clap's types, and defaults are resolved in one place); the value
//! arguments' enums in `values`.

mod values;

use crate::cost_jobs::{CalibrateJob, CostJob};
use crate::gate_jobs::{BudgetJob, CheckJob, DiffJob};
use crate::measure::Effort;
use crate::memory_jobs::{HeldJob, TimelineJob};
use crate::{
    CategoriesJob, CostInputs, ExportAs, ExportJob, FlamegraphJob, FlamegraphOf, InfoJob, Job,
    Selection, TopJob,
};
use analyzer::calibrate;
use analyzer::diff::Measured;
use analyzer::memory::Moment;
use analyzer::render::Format;
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;
use values::{ByArg, ExportFormat, FlameArg, FormatArg, GroupByArg, InfoFormatArg, WidthsArg};

/// Parses the command line into a job; clap's error (or help, or version) otherwise.
pub(crate) fn parse() -> Result<Job, clap::Error> {
    let cli = Cli::try_parse()?;
    // clap lets a missing argument that a given one `requires` pass when a given
    // argument conflicts with it: REPORT conflicts with --diff.
    if let Command::Flamegraph {
        diff: None,
        widths: Some(_),
        ..
    } = &cli.command
    {
        use clap::CommandFactory;
        return Err(Cli::command().error(
            clap::error::ErrorKind::MissingRequiredArgument,
            "--widths chooses a side of --diff BASE CHANGE, which is not given",
        ));
    }
    Ok(cli.command.into_job())
}

/// Ranks, classifies, prices and diffs the allocation sites of alloc-tracer reports.
#[derive(Parser, Debug)]
#[command(
    version,
    about,
    after_help = "EXAMPLES:\n  \
    analyzer info reports/porep-2k\n  \
    analyzer top reports/porep-2k --phase synthesize --limit 20\n  \
    analyzer top reports/porep-2k --phase synthesize --group-by function\n  \
    analyzer top reports/porep-2k --phase synthesize --group-by callers --by cost\n  \
    analyzer categories reports/porep-2k --phase synthesize --format json\n  \
    analyzer cost reports/porep-2k --phase synthesize\n  \
    analyzer diff reports/base reports/patched --phase synthesize\n  \
    analyzer diff reports/base reports/patched --fail-if 'allocs>+1%' --fail-if 'cost>+5ms'\n  \
    analyzer budget reports/porep-2k --margin 5% -o budget.toml\n  \
    analyzer budget reports/patched --tighten budget.toml\n  \
    analyzer check reports/porep-2k --budget docs/budget.example.toml\n  \
    analyzer flamegraph reports/porep-2k --by count -o allocs.svg\n  \
    analyzer peak reports/porep-2k --limit 10\n  \
    analyzer leaks reports/porep-2k\n  \
    analyzer peak reports/patched --base reports/base\n  \
    analyzer timeline reports/porep-2k -o live.svg\n  \
    analyzer flamegraph --diff reports/base reports/patched --phase synthesize -o diff.svg\n  \
    analyzer export reports/porep-2k --format pprof -o allocs.pb.gz\n  \
    analyzer export reports/porep-2k --format parquet -o porep-2k-sites.parquet\n\n\
    Costs use a calibration of this machine's allocator, stored at\n  \
    $ALLOC_PROFILER_CALIBRATION, else $XDG_CACHE_HOME/alloc-profiler/calibration.json,\n  \
    else ~/.cache/alloc-profiler/calibration.json;\n  \
    `analyzer calibrate` writes it (about 15 s). `cost`, `diff` and `top --by cost`\n  \
    measure it on first use; `top` shows costs only when one is stored.\n\n\
    EXIT STATUS: 0 on success; 1 when `check` or `diff --fail-if` finds a breach (one\n  \
    line each on standard error; `budget --tighten` leaves breached limits as they\n  \
    are, names them, and exits 0); 2 on bad input (a bad report, budget file or\n  \
    condition: one line on standard error)."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// `--phase` of `peak` and `leaks`: the blocks the tables hold, not the moment.
const HELD_PHASE_HELP: &str = "Only blocks allocated in this phase (e.g. synthesize); the moment stays the \
     run's kept peak, or its end";

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
    /// Calibration file (default: the stored one; where there is none, `cost`, `top
    /// --by cost` and `diff` measure one now and store it, and `top` by other measures
    /// and `diff` gating on counts alone go unpriced).
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
    /// allocator, the standard library, hashbrown, rayon and the tracer, with their
    /// estimated cost.
    Top {
        #[command(flatten)]
        common: Common,
        #[command(flatten)]
        cost: CostArgs,
        /// Rank by allocation count, requested bytes, temporaries or estimated cost
        /// (`cost` measures a calibration if none is stored; the others show costs
        /// only when one is).
        #[arg(long, value_enum, default_value = "count")]
        by: ByArg,
        /// What a row is: a call site (sites that read the same are told apart by
        /// the first frame where they differ, `[via ...]`), the sites of one rayon
        /// job (a site without the pool's frames around it, as `diff` matches
        /// them), the sites named by one function or one line, the sites that read
        /// the same (name and callers: one call path, wherever it was called from),
        /// a category, or the sites named by one crate's code.
        #[arg(long, value_enum, default_value = "site")]
        group_by: GroupByArg,
        /// Rows to show.
        #[arg(long, default_value_t = 20, value_parser = values::rows, allow_negative_numbers = true)]
        limit: usize,
    },
    /// What a report is: mode, intervals, command line, host, phases (wall time,
    /// counts), threads, peak live bytes and peak RSS, labels, what was not kept,
    /// tables.
    Info {
        /// Report directory (written by alloc-tracer).
        report: PathBuf,
        /// `table` for people, `json` for programs.
        #[arg(long, value_enum, default_value = "table")]
        format: InfoFormatArg,
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
        /// Where to store it (default: $ALLOC_PROFILER_CALIBRATION, else
        /// $XDG_CACHE_HOME/alloc-profiler/calibration.json, else
        /// ~/.cache/alloc-profiler/calibration.json).
        #[arg(long, short)]
        out: Option<PathBuf>,
        /// One short repetition per figure instead of five (rough; for tests).
        #[arg(long)]
        quick: bool,
        /// `table` for people, `json` (the stored calibration) for programs.
        #[arg(long, value_enum, default_value = "table")]
        format: InfoFormatArg,
        /// The same as `--format json` (kept for scripts written before `--format`).
        #[arg(long, hide = true, conflicts_with = "format")]
        json: bool,
    },
    /// What each site and category costs in seconds (direct: inside the allocator;
    /// indirect: realloc and clone copies and the work around temporaries, an
    /// estimate), i.e.
    /// what removing it would save.
    Cost {
        #[command(flatten)]
        common: Common,
        #[command(flatten)]
        cost: CostArgs,
        /// Sites to show.
        #[arg(long, default_value_t = 20, value_parser = values::rows, allow_negative_numbers = true)]
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
        #[arg(long, requires = "change_seconds", value_parser = values::seconds, allow_negative_numbers = true)]
        base_seconds: Option<f64>,
        /// Measured wall time of the changed build (seconds).
        #[arg(long, requires = "base_seconds", value_parser = values::seconds, allow_negative_numbers = true)]
        change_seconds: Option<f64>,
        /// The change recycles blocks (a pool, a free list) instead of allocating
        /// them: each allocation or realloc it removes still costs a take and a
        /// return, at the calibrated `recycle` cost, which the prediction adds back.
        #[arg(long)]
        recycled: bool,
        /// Sites to show.
        #[arg(long, default_value_t = 20, value_parser = values::rows, allow_negative_numbers = true)]
        limit: usize,
        /// Exit 1 when the change grows beyond this: METRIC>THRESHOLD, the
        /// threshold a signed change from the base, with METRIC
        /// allocs or temporaries (a count or %), bytes, peak (the run's highest
        /// live bytes) or rss (the process's peak resident memory; B, KiB, MiB, GiB,
        /// TiB or %) or cost (s, ms, us, ns or %), e.g. 'allocs>+1%', 'bytes>+10MiB',
        /// 'cost>+5ms', 'temporaries>+0', 'peak>+64MiB', 'rss>+5%'. Repeatable; whole
        /// reports, or the --phase (peak and rss: always the whole run).
        #[arg(long, value_name = "EXPR")]
        fail_if: Vec<String>,
    },
    /// Checks a report against a budget file (TOML: limits per phase on allocations,
    /// requested bytes, temporaries, allocations per row, a category's share or
    /// allocations, a site's allocations and the phase's peak live bytes, and the run's peak live
    /// bytes and peak RSS; byte limits as integers or "700MiB"; see
    /// docs/budget.example.toml). Prints every limit
    /// with the report's figure and the share of the limit it uses; exits 0 within
    /// budget, 1 with one line per breach on standard error, 2 when the budget or
    /// the report cannot be checked (a bad file, a name the report lacks, a run cut
    /// short, a limit the report's mode or stacks cannot answer: temporaries in
    /// `count` mode, categories or sites with stacks cut short).
    Check {
        /// Report directory (written by alloc-tracer).
        report: PathBuf,
        /// Budget file (TOML).
        #[arg(long)]
        budget: PathBuf,
        /// Category rules the budget's categories name (TOML, the format of the
        /// built-in analyzer/src/default_categories.toml).
        #[arg(long)]
        rules: Option<PathBuf>,
        /// Output format of the limits; data goes to standard output.
        #[arg(long, value_enum, default_value = "table")]
        format: FormatArg,
    },
    /// Drafts a budget for `check` from a report: every limit the report can answer
    /// (the run's peak live bytes, and peak RSS in count mode, commented out in others
    /// where the tracer's own memory grows with threads; per phase of 100 allocations
    /// or more: allocations, bytes, allocations per row (where it is 0.01 or more),
    /// peak live bytes, and from a
    /// sites report temporaries and the allocations of each category that takes 5 %
    /// or more), a margin above the report's figures, with the report's mode and
    /// labels (but variant and rows, which change between builds). Commented TOML, to
    /// edit and commit; no site limits (names move with the code). With --tighten,
    /// lowers an existing budget's limits to the report's figures plus the margins
    /// instead (a ratchet: none goes up).
    Budget {
        /// Report directory (written by alloc-tracer).
        report: PathBuf,
        /// How far above the report's figures the limits lie, in per cent, for
        /// allocations, bytes, temporaries, allocations per row and categories.
        #[arg(long, default_value = "5%", value_parser = values::margin, allow_hyphen_values = true)]
        margin: f64,
        /// The same for peak live bytes and peak RSS, which move with thread timing.
        #[arg(long, default_value = "15%", value_parser = values::margin, allow_hyphen_values = true)]
        memory_margin: f64,
        /// Category rules (TOML, the format of the built-in
        /// analyzer/src/default_categories.toml); the built-in ones by default.
        #[arg(long)]
        rules: Option<PathBuf>,
        /// Write the budget to this new file instead of standard output (an existing
        /// one is refused: --tighten lowers it in place).
        #[arg(short, long, conflicts_with = "tighten")]
        out: Option<PathBuf>,
        /// Rewrite this budget file as a ratchet: every limit more than 1.5 margins
        /// above the report's figure comes down to the figure plus the margin, and a
        /// count the report has at 0 comes down to 0; none goes up, and the rest of
        /// the file stays byte for byte. Prints the limits lowered.
        /// The report is checked against the file as `check` does (the same
        /// refusals).
        #[arg(long, value_name = "FILE")]
        tighten: Option<PathBuf>,
    },
    /// A flame graph (SVG) of the allocating stacks, the allocator's, std's,
    /// hashbrown's, rayon's and the tracer's frames folded into the first frame
    /// outside them; or, with --diff, a differential one of two reports.
    Flamegraph {
        /// Report directory (written by alloc-tracer).
        #[arg(required_unless_present = "diff", conflicts_with = "diff")]
        report: Option<PathBuf>,
        /// Compare two reports: each frame named with the change of the stacks
        /// through it, red where the change has more than the base, blue where
        /// fewer, at the widths --widths says.
        #[arg(long, num_args = 2, value_names = ["BASE", "CHANGE"])]
        diff: Option<Vec<PathBuf>>,
        /// With --diff, whose stacks are drawn at their widths: the change's (what a
        /// patch kept or added; what it removed is not drawn) or the base's (what it
        /// removed shows, in blue; what it added is not drawn). [default: change]
        // No clap default, so that `parse` can tell a --widths given.
        #[arg(long, value_enum, requires = "diff")]
        widths: Option<WidthsArg>,
        /// Width of a stack: allocations, requested bytes, temporaries, or live bytes
        /// at the kept peak or when the report was written (heap sampling's
        /// estimates; with --diff, a vector grown by doubling is charged to the stack
        /// that last grew it, so a reordering moves bytes between stacks: `peak --base`
        /// pairs them).
        #[arg(long, value_enum, default_value = "count")]
        by: FlameArg,
        /// Only allocations made in this phase (e.g. synthesize).
        #[arg(long)]
        phase: Option<String>,
        /// SVG file to write (named .svg, or with no extension).
        #[arg(long, short, value_parser = values::svg_path)]
        out: PathBuf,
    },
    /// What holds memory at the kept peak of live bytes: sites and categories by
    /// live bytes, estimated by heap sampling (ALLOC_TRACE_HEAP).
    #[command(mut_arg("phase", |a| a.help(HELD_PHASE_HELP)))]
    Peak {
        #[command(flatten)]
        common: Common,
        /// Category rules (TOML, the format of the built-in
        /// analyzer/src/default_categories.toml).
        #[arg(long)]
        rules: Option<PathBuf>,
        /// Sites to show.
        #[arg(long, default_value_t = 20, value_parser = values::rows, allow_negative_numbers = true)]
        limit: usize,
        /// A baseline report: compare the two, categories and sites (matched as
        /// `diff` matches them, then by naming frame) by how much their live bytes
        /// changed.
        #[arg(long, value_name = "BASE_REPORT")]
        base: Option<PathBuf>,
    },
    /// What was still live when the report was written (leaks, and data kept to the
    /// end), by site and category, estimated by heap sampling.
    #[command(mut_arg("phase", |a| a.help(HELD_PHASE_HELP)))]
    Leaks {
        #[command(flatten)]
        common: Common,
        /// Category rules (TOML, the format of the built-in
        /// analyzer/src/default_categories.toml).
        #[arg(long)]
        rules: Option<PathBuf>,
        /// Sites to show.
        #[arg(long, default_value_t = 20, value_parser = values::rows, allow_negative_numbers = true)]
        limit: usize,
        /// A baseline report: compare the two, categories and sites (matched as
        /// `diff` matches them, then by naming frame) by how much their live bytes
        /// changed.
        #[arg(long, value_name = "BASE_REPORT")]
        base: Option<PathBuf>,
    },
    /// A plot (SVG) of live bytes and resident memory over time, phases shaded and the
    /// kept peak marked.
    Timeline {
        /// Report directory (written by alloc-tracer).
        report: PathBuf,
        /// SVG file to write (named .svg, or with no extension).
        #[arg(long, short, value_parser = values::svg_path)]
        out: PathBuf,
    },
    /// The report in other tools' formats: folded stacks, a pprof profile, or the
    /// named-sites table (each site's name, callers, category, stack key, and its
    /// job's key, callers and distinction, as columns).
    Export {
        /// Report directory (written by alloc-tracer).
        report: PathBuf,
        /// `folded` (text, one stack per line), `pprof` (gzipped protobuf) or `parquet`
        /// (the named-sites table: one row per site and phase).
        #[arg(long, value_enum)]
        format: ExportFormat,
        /// Weight of a folded stack, `count` by default: allocations, requested bytes,
        /// temporaries, or live bytes at the kept peak or at the end (heap sampling).
        /// pprof carries the first three, and the bytes and blocks live at the kept
        /// peak (inuse_space, inuse_objects).
        #[arg(long, value_enum)]
        by: Option<FlameArg>,
        /// Only allocations made in this phase (e.g. synthesize).
        #[arg(long)]
        phase: Option<String>,
        /// Category rules for the named-sites table, `--format parquet` (TOML, the
        /// format of the built-in analyzer/src/default_categories.toml).
        #[arg(long)]
        rules: Option<PathBuf>,
        /// File to write (default: standard output).
        #[arg(long, short)]
        out: Option<PathBuf>,
    },
}

impl From<Common> for Selection {
    fn from(c: Common) -> Selection {
        Selection {
            report: c.report,
            phase: c.phase,
            format: c.format.into(),
        }
    }
}

impl From<CostArgs> for CostInputs {
    fn from(c: CostArgs) -> CostInputs {
        CostInputs {
            calibration: c.calibration,
            rules: c.rules,
        }
    }
}

impl Command {
    fn into_job(self) -> Job {
        match self {
            Command::Top {
                common,
                cost,
                by,
                group_by,
                limit,
            } => Job::Top(TopJob {
                selection: common.into(),
                inputs: cost.into(),
                by: by.into(),
                group_by: group_by.into(),
                limit,
            }),
            Command::Info { report, format } => Job::Info(InfoJob {
                report,
                format: match format {
                    InfoFormatArg::Table => Format::Table,
                    InfoFormatArg::Json => Format::Json,
                },
            }),
            Command::Categories { common, rules } => Job::Categories(CategoriesJob {
                selection: common.into(),
                rules,
            }),
            Command::Calibrate {
                out,
                quick,
                format,
                json,
            } => Job::Calibrate(CalibrateJob {
                out: out.unwrap_or_else(calibrate::default_path),
                effort: if quick { Effort::QUICK } else { Effort::FULL },
                json: json || matches!(format, InfoFormatArg::Json),
            }),
            Command::Cost {
                common,
                cost,
                limit,
            } => Job::Cost(CostJob {
                selection: common.into(),
                inputs: cost.into(),
                limit,
            }),
            Command::Diff {
                base,
                change,
                phase,
                format,
                cost,
                base_seconds,
                change_seconds,
                recycled,
                limit,
                fail_if,
            } => Job::Diff(DiffJob {
                base,
                change,
                phase,
                format: format.into(),
                inputs: cost.into(),
                measured: Measured {
                    base_s: base_seconds,
                    change_s: change_seconds,
                },
                recycled,
                limit,
                fail_if,
            }),
            Command::Check {
                report,
                budget,
                rules,
                format,
            } => Job::Check(CheckJob {
                report,
                budget,
                rules,
                format: format.into(),
            }),
            Command::Budget {
                report,
                margin,
                memory_margin,
                rules,
                out,
                tighten,
            } => Job::Budget(BudgetJob {
                report,
                margins: analyzer::budget::draft::Margins {
                    counts: margin,
                    memory: memory_margin,
                },
                rules,
                out,
                tighten,
            }),
            Command::Flamegraph {
                report,
                diff,
                widths,
                by,
                phase,
                out,
            } => Job::Flamegraph(FlamegraphJob {
                of: match diff {
                    Some(mut pair) => {
                        let change = pair.pop().expect("clap takes two values");
                        let base = pair.pop().expect("clap takes two values");
                        let widths = match widths.unwrap_or(WidthsArg::Change) {
                            WidthsArg::Change => analyzer::export::Widths::Change,
                            WidthsArg::Base => analyzer::export::Widths::Base,
                        };
                        FlamegraphOf::Diff {
                            base,
                            change,
                            widths,
                        }
                    }
                    None => FlamegraphOf::Report(report.expect("clap requires it without --diff")),
                },
                phase,
                by: by.into(),
                out,
            }),
            Command::Peak {
                common,
                rules,
                limit,
                base,
            } => Job::Held(HeldJob {
                selection: common.into(),
                moment: Moment::Peak,
                rules,
                limit,
                base,
            }),
            Command::Leaks {
                common,
                rules,
                limit,
                base,
            } => Job::Held(HeldJob {
                selection: common.into(),
                moment: Moment::End,
                rules,
                limit,
                base,
            }),
            Command::Timeline { report, out } => Job::Timeline(TimelineJob { report, out }),
            Command::Export {
                report,
                format,
                by,
                phase,
                rules,
                out,
            } => Job::Export(ExportJob {
                report,
                phase,
                unused: match format {
                    ExportFormat::Folded | ExportFormat::Pprof if rules.is_some() => Some(
                        "--rules names the categories of --format parquet; folded stacks and \
                         pprof profiles carry none",
                    ),
                    ExportFormat::Pprof | ExportFormat::Parquet if by.is_some() => Some(
                        "--by weights folded stacks; pprof profiles carry allocations, bytes, \
                         temporaries and what is live at the kept peak, the named-sites table \
                         the first three",
                    ),
                    _ => None,
                },
                format: match format {
                    ExportFormat::Folded => ExportAs::Folded(by.unwrap_or(FlameArg::Count).into()),
                    ExportFormat::Pprof => ExportAs::Pprof,
                    ExportFormat::Parquet => ExportAs::NamedSites { rules },
                },
                out,
            }),
        }
    }
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
