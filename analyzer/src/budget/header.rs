//! The header `analyzer budget` writes at the top of a draft, and reads back: the
//! report the limits were drafted from and the margins above its figures, and the
//! line `--tighten` puts under it (the report and margins it last tightened to). A
//! budget written by hand has no draft lines; `--tighten` puts its line first.

use crate::budget::draft::Margins;

/// How a draft's first line begins; the report it names follows, then a full stop.
const DRAFTED_FROM: &str = "# Allocation budget drafted by `analyzer budget` from ";
/// How a draft's second line begins; its margins follow.
const EVERY_LIMIT: &str = "# Every limit is a maximum, ";
/// How the line that says a draft was tightened begins; the report follows.
const TIGHTENED: &str = "# Tightened by `analyzer budget --tighten` to ";
/// What follows the report on that line, before its margins.
const LOWERED: &str = ": the limits it lowered lie ";

/// A draft's first two lines, for `source`, drafted with `margins`; the draft goes
/// on from there with what it checks and how.
pub(crate) fn draft_lines(source: &str, margins: Margins) -> String {
    format!(
        "{DRAFTED_FROM}{source}.\n\
         {EVERY_LIMIT}{} above the report's figure ({} for peak live\n",
        percent(margins.counts),
        percent(margins.memory)
    )
}

/// The line that says a draft was tightened to `report` with `margins`.
fn tightened_line(report: &str, margins: Margins, eol: &str) -> String {
    format!(
        "{TIGHTENED}{report}{LOWERED}{} above its figures ({} for peaks).{eol}",
        percent(margins.counts),
        percent(margins.memory)
    )
}

/// The report a budget file was drafted from, as its first line names it; `None`
/// for a file written otherwise.
pub(crate) fn drafted_from(text: &str) -> Option<&str> {
    text.lines()
        .next()?
        .strip_prefix(DRAFTED_FROM)?
        .strip_suffix('.')
}

/// Where the tightening line goes: under a draft's first line, else first.
fn tightening_at(text: &str) -> usize {
    usize::from(drafted_from(text).is_some())
}

/// The tightening line, if any: the report and the rest of the line.
fn tightened(text: &str) -> Option<(&str, &str)> {
    text.lines()
        .nth(tightening_at(text))?
        .strip_prefix(TIGHTENED)?
        .split_once(LOWERED)
}

/// The report a budget's limits were last set from: the one it was last tightened
/// to, else the one it was drafted from; `None` for a file written by hand and never
/// tightened.
pub fn last_set_from(text: &str) -> Option<&str> {
    tightened(text)
        .map(|(report, _)| report)
        .or_else(|| drafted_from(text))
}

/// The margins a budget's limits were last set with (its tightening's, else its
/// draft's); `None` for a file written by hand and never tightened, or a header
/// edited past reading.
pub fn last_margins(text: &str) -> Option<Margins> {
    let rest = match tightened(text) {
        Some((_, rest)) => rest,
        None => {
            drafted_from(text)?;
            text.lines().nth(1)?.strip_prefix(EVERY_LIMIT)?
        }
    };
    // "5 % above ... (15 % for peak ...": the first two per cents.
    let mut cents = rest.split(" %").filter_map(|part| {
        let number = part.rsplit([' ', '(']).next()?;
        number.parse::<f64>().ok()
    });
    Some(Margins {
        counts: cents.next()? / 100.0,
        memory: cents.next()? / 100.0,
    })
}

/// `text` with a line that says it was last tightened to `report` with `margins`
/// (under a draft's first line; first in a file written by hand), in place of the
/// line an earlier tightening left.
pub(crate) fn with_tightened_line(text: &str, report: &str, margins: Margins) -> String {
    let at = tightening_at(text);
    let mut lines: Vec<&str> = text.split_inclusive('\n').collect();
    // In the file's own line endings.
    let eol = if text.contains("\r\n") { "\r\n" } else { "\n" };
    let line = tightened_line(report, margins, eol);
    match lines.get(at) {
        Some(l) if l.starts_with(TIGHTENED) => lines[at] = &line,
        _ => lines.insert(at, &line),
    }
    lines.concat()
}

/// A margin as a per cent: whole per cents as such, a smaller margin with the
/// decimals it has (`5 %`, `2.5 %`).
pub(crate) fn percent(m: f64) -> String {
    let p = m * 100.0;
    if p == p.round() {
        format!("{p:.0} %")
    } else {
        format!("{} %", (p * 100.0).round() / 100.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_draft_header_is_read_back_as_written() {
        let m = Margins {
            counts: 0.025,
            memory: 0.15,
        };
        let draft = format!("{}# the rest\n[phase.p]\n", draft_lines("reports/base", m));
        assert_eq!(drafted_from(&draft), Some("reports/base"));
        assert_eq!(last_set_from(&draft), Some("reports/base"));
        assert_eq!(last_margins(&draft), Some(m));
        let tighter = Margins {
            counts: 0.02,
            memory: 0.1,
        };
        let once = with_tightened_line(&draft, "reports/new", tighter);
        assert_eq!(last_set_from(&once), Some("reports/new"));
        assert_eq!(last_margins(&once), Some(tighter));
        let twice = with_tightened_line(&once, "reports/newer", m);
        assert_eq!(twice.matches("# Tightened").count(), 1, "{twice}");
        assert_eq!(last_set_from(&twice), Some("reports/newer"));
        // Written by hand: nothing to read until tightened; then its line goes
        // first, and is replaced the next time.
        let own = "[phase.p]\nallocs = 5\n";
        assert_eq!((last_set_from(own), last_margins(own)), (None, None));
        let once = with_tightened_line(own, "reports/new", tighter);
        assert!(once.starts_with(TIGHTENED) && once.ends_with(own), "{once}");
        assert_eq!(last_set_from(&once), Some("reports/new"));
        assert_eq!(last_margins(&once), Some(tighter));
        let twice = with_tightened_line(&once, "reports/newer", m);
        assert_eq!(twice.matches("# Tightened").count(), 1, "{twice}");
        assert_eq!(
            (last_set_from(&twice), last_margins(&twice)),
            (Some("reports/newer"), Some(m))
        );
    }
}
