//! `analyzer`: ranks and classifies the call sites of an alloc-tracer report.

use analyzer::categories;
use analyzer::rank::{self, RankBy};
use analyzer::render::{self, Format};
use analyzer::report;
use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// Ranks and classifies the allocation sites of an alloc-tracer report.
#[derive(Parser, Debug)]
#[command(
    version,
    about,
    after_help = "EXAMPLES:\n  \
    analyzer top reports/porep-2k --phase synthesize --limit 20\n  \
    analyzer categories reports/porep-2k --phase synthesize --format json"
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

#[derive(Subcommand, Debug)]
enum Command {
    /// The call sites that allocate most, each named by its first frame outside the
    /// allocator and the standard library.
    Top {
        #[command(flatten)]
        common: Common,
        /// Rank by allocation count, requested bytes, or temporaries.
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

fn run(cli: Cli) -> Result<()> {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    match cli.command {
        Command::Top { common, by, limit } => {
            let r = report::load(&common.report)?;
            let by = match by {
                ByArg::Count => RankBy::Count,
                ByArg::Bytes => RankBy::Bytes,
                ByArg::Temporaries => RankBy::Temporaries,
            };
            let sites = rank::top(&r, by, limit, common.phase.as_deref());
            render::sites(&mut out, &sites, format(common.format))?;
        }
        Command::Categories { common, rules } => {
            let rules = match rules {
                Some(path) => {
                    let text = std::fs::read_to_string(&path)
                        .with_context(|| format!("{}", path.display()))?;
                    categories::parse_rules(&text, &path)?
                }
                None => categories::default_rules(),
            };
            let r = report::load(&common.report)?;
            let cats = categories::totals(&r, &rules, common.phase.as_deref());
            render::categories(&mut out, &cats, format(common.format))?;
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
