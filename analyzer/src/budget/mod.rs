//! Allocation budgets: limits per phase, read from TOML and checked against a report
//! (`analyzer check`). `check` returns every limit it checked with the report's
//! figure; the CLI prints them as a table, then one line per breach, and exits 1 when
//! there is one. Conditions on a diff (`analyzer diff --fail-if`) are `fail_if`'s.
//!
//! A budget file:
//!
//! ```toml
//! # The workload the budget is for: the report's labels must read so.
//! labels = { circuit = "porep", rows = "2687961" }
//! mode = "sites"            # reports must be traced in this mode
//! # The whole run's peak live bytes (a phase's goes in its table).
//! peak_live_bytes = 4_000_000
//! peak_rss_bytes = 64_000_000   # the process's peak resident memory
//!
//! [phase.synthesize]
//! allocs = 110_000          # allocations and reallocs
//! bytes = 3_000_000         # requested bytes
//! temporaries = 90_000      # freed before the thread's next allocation
//! category."Boolean::lc temporaries".share = 0.5    # at most half the allocations
//! category."enforce LinearCombination buffers".allocs = 60_000   # allocations + reallocs
//! site."lc.rs:108".allocs = 20_000    # sites whose name contains this
//! ```
//!
//! Categories are the rules' names (`analyzer categories` lists them); a site's name
//! is the one `analyzer top` shows before any ` < ` (its function and `file:line`,
//! such as `insert_or_update (lc.rs:108)`), and the limit sums every site whose name
//! contains the text. Phase totals are exact in every mode (`phases.parquet`);
//! category shares and site counts are the sites table's (sampled counts times the
//! sample interval in `sample` mode). The run's peak is the manifest's and a phase's the
//! phases table's, exact to within the manifest's
//! `peak_live_bytes_error_bytes`. `allocs_per_row` divides by the report's `rows`
//! label, which synth-driver records (a program of its own states it with
//! `alloc_tracer::label`).

use crate::Error;
use std::collections::BTreeMap;
use std::path::Path;

pub mod advice;
mod check;
pub mod draft;
pub mod header;
pub mod tighten;

pub use check::{Checked, check, figure, opt_whole_or_fraction, whole_or_fraction};

/// A budget file.
#[derive(Clone, Debug, Default, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Budget {
    /// Labels the report must carry with these values (synth-driver's `circuit`,
    /// `rows`, ...; `alloc_tracer::label` in a program of your own): the workload the
    /// budget is for. Every limit is a maximum, so a smaller or another workload
    /// would pass them all.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// The mode reports must be traced in (`sites`, `count`, `sample:1000`): the
    /// tracer's own memory, and what is counted or estimated, differ between modes.
    /// Not checked when absent.
    #[serde(default)]
    pub mode: Option<String>,
    /// Peak live bytes of the whole run (the manifest's).
    /// Byte limits are integers or strings with a binary unit (`"700MiB"`).
    #[serde(default, deserialize_with = "byte_limit")]
    pub peak_live_bytes: Option<u64>,
    /// The process's peak resident set size (the manifest's `max_rss_bytes`): what a
    /// machine must have, the allocator's and the tracer's own memory included.
    #[serde(default, deserialize_with = "byte_limit")]
    pub peak_rss_bytes: Option<u64>,
    /// Limits per phase, by phase name.
    #[serde(default)]
    pub phase: BTreeMap<String, PhaseLimits>,
}

/// A byte limit: an integer, or a string of a number and `B`, `KiB`, `MiB`, `GiB` or `TiB`
/// (`"700MiB"`, `"1.1GiB"`), as `--fail-if` takes them. In a unit larger than a byte,
/// a number that is not a whole count of bytes (`"1.1MiB"`) is rounded down: a
/// maximum no looser than written.
fn byte_limit<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    let bad = |shown: String| {
        serde::de::Error::custom(format!(
            "{shown} is not a byte count (a whole number, or a string of a number and B, \
             KiB, MiB, GiB or TiB such as \"700MiB\" or \"1.5GiB\")"
        ))
    };
    let text = match <toml::Value as serde::Deserialize>::deserialize(d)? {
        toml::Value::Integer(n) => {
            return u64::try_from(n).map(Some).map_err(|_| bad(n.to_string()));
        }
        toml::Value::String(t) => t,
        other => return Err(bad(other.to_string())),
    };
    let compact: String = text.split_whitespace().collect::<String>().replace('_', "");
    let split = compact
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(compact.len());
    let (number, unit) = compact.split_at(split);
    let scale: u64 = match unit {
        "" | "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        "TiB" => 1 << 40,
        _ => return Err(bad(format!("\"{text}\""))),
    };
    let bytes = number.parse::<f64>().ok().map(|n| n * scale as f64);
    match bytes {
        // Below 2^64 (a limit that large could never fail); a count in bytes whole.
        Some(b)
            if b.is_finite()
                && b >= 0.0
                && b < u64::MAX as f64
                && (scale > 1 || b.fract() == 0.0) =>
        {
            Ok(Some(b.floor() as u64))
        }
        _ => Err(bad(format!("\"{text}\""))),
    }
}

/// The limits of one phase; each is a maximum, and an absent one is not checked.
#[derive(Clone, Debug, Default, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PhaseLimits {
    /// Allocations and reallocs.
    pub allocs: Option<u64>,
    /// Requested bytes.
    #[serde(default, deserialize_with = "byte_limit")]
    pub bytes: Option<u64>,
    /// Temporaries (blocks freed before their thread's next allocation).
    pub temporaries: Option<u64>,
    /// Allocations and reallocs per row synthesized (the report's `rows` label, which
    /// synth-driver records).
    pub allocs_per_row: Option<f64>,
    /// The highest live bytes while the phase was the innermost in force.
    #[serde(default, deserialize_with = "byte_limit")]
    pub peak_live_bytes: Option<u64>,
    /// Per category (by its rule's name): its largest share of the phase's
    /// allocations, its most allocations, or both.
    #[serde(default)]
    pub category: BTreeMap<String, CategoryLimit>,
    /// Per site name fragment: the allocations of all sites whose name contains it.
    #[serde(default)]
    pub site: BTreeMap<String, SiteLimit>,
}

impl PhaseLimits {
    /// How many limits these are.
    fn count(&self) -> usize {
        [self.allocs, self.bytes, self.temporaries]
            .iter()
            .filter(|l| l.is_some())
            .count()
            + usize::from(self.allocs_per_row.is_some())
            + usize::from(self.peak_live_bytes.is_some())
            + self
                .category
                .values()
                .map(|c| usize::from(c.share.is_some()) + usize::from(c.allocs.is_some()))
                .sum::<usize>()
            + self.site.len()
    }
}

/// A category's limits (at least one).
#[derive(Clone, Debug, Default, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CategoryLimit {
    /// Largest share of the phase's allocations (and reallocs), 0 to 1. A share rises
    /// when other categories shrink: a patch that removes allocations elsewhere can
    /// break it.
    pub share: Option<f64>,
    /// Most allocations (and reallocs) of the category's sites together.
    pub allocs: Option<u64>,
}

/// A site's limit.
#[derive(Clone, Debug, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SiteLimit {
    /// Allocations and reallocs of the matching sites together.
    pub allocs: u64,
}

/// Parses a budget from TOML text (`path` names it in errors).
pub fn parse(text: &str, path: &Path) -> Result<Budget, Error> {
    let bad = |reason: String| Error::Budget {
        path: path.to_owned(),
        reason,
    };
    let budget: Budget = toml::from_str(text).map_err(|e| {
        // One line: the error's display quotes the source over several lines.
        let line = e
            .span()
            .and_then(|s| text.get(..s.start))
            .map(|before| before.matches('\n').count() + 1);
        let message = e.message().split_whitespace().collect::<Vec<_>>().join(" ");
        bad(match line {
            Some(line) => format!("line {line}: {message}"),
            None => message,
        })
    })?;
    // A mode no tracer writes would be blamed on every report checked against it.
    if let Some(mode) = &budget.mode {
        let sampled = mode
            .strip_prefix("sample:")
            .is_some_and(|n| n.parse::<u64>().is_ok_and(|n| n > 0));
        if !(sampled || mode == "count" || mode == "sites") {
            return Err(bad(format!(
                "mode \"{mode}\" is not a mode the tracer writes: count, sites or sample:N \
                 (N a whole number above 0, as in the report's manifest)"
            )));
        }
    }
    let limits: usize = budget.phase.values().map(PhaseLimits::count).sum::<usize>()
        + usize::from(budget.peak_live_bytes.is_some())
        + usize::from(budget.peak_rss_bytes.is_some());
    if limits == 0 {
        return Err(bad(
            "it sets no limit, so every report would pass (see docs/budget.example.toml)"
                .to_owned(),
        ));
    }
    for (phase, limits) in &budget.phase {
        if let Some(x) = limits
            .allocs_per_row
            .filter(|x| !(x.is_finite() && *x >= 0.0))
        {
            return Err(bad(format!(
                "phase {phase}: allocs_per_row {x} is not a number of allocations"
            )));
        }
        for (name, c) in &limits.category {
            if let Some(share) = c.share.filter(|s| !(0.0..=1.0).contains(s)) {
                return Err(bad(format!(
                    "phase {phase}: category \"{name}\": share {share} is not between 0 and 1"
                )));
            }
            if c.share.is_none() && c.allocs.is_none() {
                return Err(bad(format!(
                    "phase {phase}: category \"{name}\" sets no limit (share or allocs)"
                )));
            }
        }
        if let Some(name) = limits.site.keys().find(|n| n.is_empty()) {
            return Err(bad(format!(
                "phase {phase}: site \"{name}\": an empty name matches every site"
            )));
        }
    }
    Ok(budget)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_limits_take_binary_units() {
        let b = parse(
            "peak_live_bytes = \"700MiB\"\npeak_rss_bytes = \"1.5 GiB\"\n\
             [phase.p]\nbytes = 4096\npeak_live_bytes = \"0.25TiB\"\n",
            Path::new("b.toml"),
        )
        .unwrap();
        assert_eq!(b.peak_live_bytes, Some(700 << 20));
        assert_eq!(b.peak_rss_bytes, Some(3 << 29));
        assert_eq!(b.phase["p"].bytes, Some(4096));
        assert_eq!(b.phase["p"].peak_live_bytes, Some(1 << 38));
        // Not a whole number of bytes: rounded down.
        let b = parse("peak_live_bytes = \"1.1MiB\"\n", Path::new("b.toml")).unwrap();
        assert_eq!(b.peak_live_bytes, Some(1_153_433));
        for bad in [
            "\"700MB\"",
            "\"-1KiB\"",
            "\"lots\"",
            "-5",
            "5.5e8",
            "true",
            "\"0.5B\"",
            "\"99999999999999GiB\"",
        ] {
            let text = format!("peak_live_bytes = {bad}\n");
            let err = parse(&text, Path::new("b.toml")).unwrap_err().to_string();
            assert!(err.contains("b.toml"), "{bad}: {err}");
            assert!(err.contains("is not a byte count"), "{bad}: {err}");
            assert_eq!(err.lines().count(), 1, "{err}");
        }
    }

    #[test]
    fn parses_every_field() {
        let b = parse(
            r#"
            peak_live_bytes = 10
            [phase.synthesize]
            allocs = 1_000
            bytes = 2
            temporaries = 3
            category."linear combinations".share = 0.5
            category."clones".allocs = 40
            site."LinearCombination::add".allocs = 7
            "#,
            Path::new("b.toml"),
        )
        .unwrap();
        assert_eq!(b.peak_live_bytes, Some(10));
        let p = &b.phase["synthesize"];
        assert_eq!(
            (p.allocs, p.bytes, p.temporaries),
            (Some(1000), Some(2), Some(3))
        );
        assert_eq!(p.category["linear combinations"].share, Some(0.5));
        assert_eq!(p.category["clones"].allocs, Some(40));
        assert_eq!(p.category["clones"].share, None);
        assert_eq!(p.site["LinearCombination::add"].allocs, 7);
    }

    #[test]
    fn takes_the_modes_the_tracer_writes() {
        for mode in ["count", "sites", "sample:1000"] {
            let b = parse(
                &format!("mode = \"{mode}\"\n[phase.x]\nallocs = 1\n"),
                Path::new("b.toml"),
            )
            .unwrap();
            assert_eq!(b.mode.as_deref(), Some(mode));
        }
    }

    #[test]
    fn rejects_unknown_fields_and_bad_shares_in_one_line() {
        for (text, want) in [
            ("[phase.x]\nallocz = 1\n", "line 2: unknown field `allocz`"),
            ("peak_bytes = 1\n", "unknown field `peak_bytes`"),
            ("[phase.x]\nallocs = -1\n", "line 2"),
            (
                "[phase.x]\ncategory.a.share = 1.5\n",
                "share 1.5 is not between 0 and 1",
            ),
            (
                "[phase.x]\nallocs = 1\n[phase.x.category.a]\n",
                "category \"a\" sets no limit (share or allocs)",
            ),
            ("[phase.x]\nsite.\"\".allocs = 1\n", "empty name"),
            (
                "mode = \"Sites\"\n[phase.x]\nallocs = 1\n",
                "mode \"Sites\" is not a mode",
            ),
            (
                "mode = \"sample\"\n[phase.x]\nallocs = 1\n",
                "count, sites or sample:N",
            ),
            (
                "mode = \"sample:0\"\n[phase.x]\nallocs = 1\n",
                "count, sites or sample:N",
            ),
            ("mode = \"\"\n[phase.x]\nallocs = 1\n", "mode \"\" is not"),
        ] {
            let e = parse(text, Path::new("b.toml")).unwrap_err().to_string();
            assert!(e.contains(want), "{text:?}: {e}");
            assert!(!e.contains('\n'), "{e}");
        }
    }
}
