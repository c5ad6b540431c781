//! The command line's value arguments (`--format`, `--by`, `--group-by`, ...) and
//! their conversion into the library's types.

use crate::FlameBy;
use analyzer::export::Weight;
use analyzer::memory::Moment;
use analyzer::rank::{GroupBy, RankBy};
use analyzer::render::Format;
use clap::ValueEnum;

#[derive(Clone, Copy, Debug, ValueEnum)]
pub(super) enum FormatArg {
    Table,
    Json,
    Csv,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub(super) enum InfoFormatArg {
    Table,
    Json,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub(super) enum ByArg {
    Count,
    Bytes,
    Temporaries,
    Cost,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub(super) enum GroupByArg {
    Site,
    Job,
    Function,
    Line,
    Callers,
    Category,
    Crate,
}

impl From<GroupByArg> for GroupBy {
    fn from(g: GroupByArg) -> GroupBy {
        match g {
            GroupByArg::Site => GroupBy::Site,
            GroupByArg::Job => GroupBy::Job,
            GroupByArg::Function => GroupBy::Function,
            GroupByArg::Line => GroupBy::Line,
            GroupByArg::Callers => GroupBy::Callers,
            GroupByArg::Category => GroupBy::Category,
            GroupByArg::Crate => GroupBy::Crate,
        }
    }
}

/// Whose stacks a differential flame graph draws.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub(super) enum WidthsArg {
    Change,
    Base,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub(super) enum FlameArg {
    Count,
    Bytes,
    Temporaries,
    PeakBytes,
    EndBytes,
}

impl From<FlameArg> for FlameBy {
    fn from(f: FlameArg) -> FlameBy {
        match f {
            FlameArg::Count => FlameBy::Allocated(Weight::Count),
            FlameArg::Bytes => FlameBy::Allocated(Weight::Bytes),
            FlameArg::Temporaries => FlameBy::Allocated(Weight::Temporaries),
            FlameArg::PeakBytes => FlameBy::Live(Moment::Peak),
            FlameArg::EndBytes => FlameBy::Live(Moment::End),
        }
    }
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub(super) enum ExportFormat {
    Folded,
    Pprof,
    Parquet,
}

impl From<FormatArg> for Format {
    fn from(f: FormatArg) -> Format {
        match f {
            FormatArg::Table => Format::Table,
            FormatArg::Json => Format::Json,
            FormatArg::Csv => Format::Csv,
        }
    }
}

impl From<ByArg> for RankBy {
    fn from(by: ByArg) -> RankBy {
        match by {
            ByArg::Count => RankBy::Count,
            ByArg::Bytes => RankBy::Bytes,
            ByArg::Temporaries => RankBy::Temporaries,
            ByArg::Cost => RankBy::Cost,
        }
    }
}

/// Where an SVG goes: a path without an extension or ending in `.svg` (a `.png`
/// would hold an SVG all the same, which no image viewer opens).
pub(super) fn svg_path(text: &str) -> Result<std::path::PathBuf, String> {
    let path = std::path::PathBuf::from(text);
    match path.extension().and_then(|e| e.to_str()) {
        Some(e) if !e.eq_ignore_ascii_case("svg") => Err(format!(
            "this writes SVG, not .{e}: name the file .svg (rsvg-convert or a browser \
             turns it into .{e})"
        )),
        _ => Ok(path),
    }
}

/// A wall time given on the command line: seconds, finite and above zero.
pub(super) fn seconds(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(s) if s.is_finite() && s > 0.0 => Ok(s),
        _ => Err(format!("{text:?} is not a time in seconds above 0")),
    }
}

/// A number of rows to show (`--limit`): 0 or more.
pub(super) fn rows(text: &str) -> Result<usize, String> {
    text.trim()
        .parse::<usize>()
        .map_err(|_| format!("{text:?} is not a number of rows (0 or more)"))
}

/// A margin given on the command line: a percentage (`5%`, or `5`), 0 or more, as a
/// fraction.
pub(super) fn margin(text: &str) -> Result<f64, String> {
    let trimmed = text.trim();
    let number = trimmed.strip_suffix('%');
    let percent = number.is_some();
    match number.unwrap_or(trimmed).trim().parse::<f64>() {
        // A bare fraction reads as one (0.05 for 5 %) but would be taken in per cent.
        Ok(p) if !percent && p > 0.0 && p < 1.0 => Err(format!(
            "{text:?} would be a margin of {p} %: write {}% for the fraction {p}, or \
             {p}% if that is what you mean",
            (p * 1e4).round() / 1e2
        )),
        Ok(p) if p.is_finite() && p > analyzer::budget::draft::MAX_MARGIN * 100.0 => Err(format!(
            "{text:?} is a margin past {:.0} %",
            analyzer::budget::draft::MAX_MARGIN * 100.0
        )),
        Ok(p) if p.is_finite() && p >= 0.0 => Ok(p / 100.0),
        _ => Err(format!("{text:?} is not a margin in per cent (e.g. 5%)")),
    }
}
