//! `cost` and `diff`: answers of two kinds of rows (categories, then sites), whose
//! CSV is one table of both, told apart by a `kind` column, with the fields a kind
//! lacks left empty.

use super::{Format, csv_rows, opt_pct, pct, seconds, seconds_pair, spread, with_callers};
use crate::cost::{CategoryCost, CostReport, SiteCost};
use crate::diff::{CategoryDelta, Diff, SiteDelta};
use crate::fail_if::Failed;
use crate::naming;
use crate::sampling_noise::{relative, within};
use serde::Serialize;
use std::io::{self, Write};

/// A row of `cost`'s CSV: a [`CategoryCost`] (`kind` "category") or a [`SiteCost`]
/// (`kind` "site"), each field under its JSON name.
#[derive(Default, Serialize)]
struct CostCsvRow<'a> {
    kind: &'a str,
    rank: Option<usize>,
    site_id: Option<u64>,
    name: Option<&'a str>,
    callers: Option<&'a str>,
    distinction: Option<&'a str>,
    category: &'a str,
    sites: Option<usize>,
    alloc_count: u64,
    realloc_count: Option<u64>,
    temporary_count: Option<u64>,
    direct_s: f64,
    indirect_s: f64,
    total_s: f64,
    phase_share: Option<f64>,
    alloc_count_noise: Option<u64>,
}

impl<'a> From<&'a CategoryCost> for CostCsvRow<'a> {
    fn from(c: &'a CategoryCost) -> Self {
        CostCsvRow {
            kind: "category",
            category: &c.category,
            sites: Some(c.sites),
            alloc_count: c.alloc_count,
            realloc_count: Some(c.realloc_count),
            alloc_count_noise: c.alloc_count_noise,
            direct_s: c.direct_s,
            indirect_s: c.indirect_s,
            total_s: c.total_s,
            phase_share: c.phase_share,
            ..CostCsvRow::default()
        }
    }
}

impl<'a> From<&'a SiteCost> for CostCsvRow<'a> {
    fn from(s: &'a SiteCost) -> Self {
        CostCsvRow {
            kind: "site",
            rank: Some(s.rank),
            site_id: Some(s.site_id),
            name: Some(&s.name),
            callers: Some(&s.callers),
            distinction: Some(&s.distinction),
            category: &s.category,
            sites: None,
            alloc_count: s.alloc_count,
            realloc_count: Some(s.realloc_count),
            temporary_count: Some(s.temporary_count),
            alloc_count_noise: s.alloc_count_noise,
            direct_s: s.direct_s,
            indirect_s: s.indirect_s,
            total_s: s.total_s,
            phase_share: s.phase_share,
        }
    }
}

/// A row of `diff`'s CSV: a [`CategoryDelta`] (`kind` "category") or a [`SiteDelta`]
/// (`kind` "site"), each field under its JSON name.
#[derive(Default, Serialize)]
struct DiffCsvRow<'a> {
    kind: &'a str,
    name: Option<&'a str>,
    callers: Option<&'a str>,
    distinction: Option<&'a str>,
    matched: Option<&'a str>,
    category: &'a str,
    base_alloc_count: u64,
    change_alloc_count: u64,
    delta_alloc_count: i64,
    delta_bytes_requested: i64,
    delta_cost_s: Option<f64>,
    alloc_count_noise: Option<u64>,
    cost_noise_s: Option<f64>,
}

impl<'a> From<&'a CategoryDelta> for DiffCsvRow<'a> {
    fn from(c: &'a CategoryDelta) -> Self {
        DiffCsvRow {
            kind: "category",
            name: None,
            callers: None,
            distinction: None,
            matched: None,
            category: &c.category,
            base_alloc_count: c.base_alloc_count,
            change_alloc_count: c.change_alloc_count,
            delta_alloc_count: c.delta_alloc_count,
            delta_bytes_requested: c.delta_bytes_requested,
            delta_cost_s: c.delta_cost_s,
            alloc_count_noise: c.alloc_count_noise,
            cost_noise_s: c.cost_noise_s,
        }
    }
}

impl<'a> From<&'a SiteDelta> for DiffCsvRow<'a> {
    fn from(s: &'a SiteDelta) -> Self {
        DiffCsvRow {
            kind: "site",
            name: Some(&s.name),
            callers: Some(&s.callers),
            distinction: Some(&s.distinction),
            matched: Some(&s.matched),
            category: &s.category,
            base_alloc_count: s.base_alloc_count,
            change_alloc_count: s.change_alloc_count,
            delta_alloc_count: s.delta_alloc_count,
            delta_bytes_requested: s.delta_bytes_requested,
            delta_cost_s: s.delta_cost_s,
            alloc_count_noise: s.alloc_count_noise,
            cost_noise_s: s.cost_noise_s,
        }
    }
}

/// `, measured 2026-12-06 09:15 UTC`, from a Unix time (nothing where it is 0).
fn measured_at(unix_s: u64) -> String {
    if unix_s == 0 {
        return String::new();
    }
    // Days since 1970-01-01 to a civil date (the proleptic Gregorian calendar, in
    // 400-year eras of 146,097 days).
    let (days, secs) = (unix_s / 86_400, unix_s % 86_400);
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    format!(
        ", measured {year:04}-{month:02}-{day:02} {:02}:{:02} UTC",
        secs / 3600,
        secs % 3600 / 60
    )
}

/// Writes the cost model's answer: categories, then the costliest sites.
pub fn cost(out: &mut dyn Write, c: &CostReport, format: Format) -> io::Result<()> {
    match format {
        Format::Json => {
            serde_json::to_writer_pretty(&mut *out, c)?;
            writeln!(out)
        }
        Format::Csv => {
            let categories = c.categories.iter().map(CostCsvRow::from);
            let rows: Vec<CostCsvRow> = categories.chain(c.sites.iter().map(From::from)).collect();
            csv_rows(out, &rows)
        }
        Format::Table => {
            let phase = c.phase.as_deref().unwrap_or("(all)");
            let wall = c.phase_wall_s.map_or("-".to_owned(), seconds);
            if c.categories.iter().all(|k| k.sites == 0) {
                // Not a cost of 0: nothing was there to price (a count-mode report).
                writeln!(
                    out,
                    "phase {phase}: {wall} wall (traced), no sites to price"
                )?;
            } else {
                writeln!(
                    out,
                    "phase {phase}: {wall} wall (traced), allocation cost {} = {} direct + {} indirect (estimate)",
                    seconds(c.total_s),
                    seconds(c.direct_s),
                    seconds(c.indirect_s),
                )?;
            }
            if !c.host_matches {
                writeln!(
                    out,
                    "WARNING: calibrated on {} ({}), report from {} ({}): figures describe the calibration host",
                    c.calibration_host.0, c.calibration_host.1, c.report_host.0, c.report_host.1
                )?;
            }
            if c.categories.iter().any(|k| k.sites > 0) {
                writeln!(
                    out,
                    "priced with a calibration of {}{}: one machine's calibrations at other \
                     moments differ by up to a fifth (docs/cost-model.md)",
                    c.calibration_host.0,
                    measured_at(c.calibration_created_unix_s)
                )?;
            }
            writeln!(out)?;
            // A column of sampling's spread only in a `sample:N` report.
            let sampled = c.categories.iter().any(|k| k.alloc_count_noise.is_some());
            let (shown, left) = super::used_categories(
                &c.categories,
                |k| k.sites > 0,
                sampled,
                |k| k.alloc_count_noise,
            );
            let w = super::category_width(shown.iter().map(|k| k.category.as_str()));
            writeln!(
                out,
                "{:<w$} {:>13}{} {:>10} {:>10} {:>10} {:>8}",
                "category",
                "alloc+realloc",
                spread(sampled, "±"),
                "direct",
                "indirect",
                "saves",
                "of phase"
            )?;
            for k in shown {
                let calls = k.alloc_count.saturating_add(k.realloc_count);
                writeln!(
                    out,
                    "{:<w$} {:>13}{} {:>10} {:>10} {:>10} {:>8}",
                    k.category,
                    calls,
                    spread(sampled, relative(k.alloc_count_noise, calls)),
                    seconds(k.direct_s),
                    seconds(k.indirect_s),
                    seconds(k.total_s),
                    opt_pct(k.phase_share)
                )?;
            }
            if let Some(left) = left {
                writeln!(out, "{left}")?;
            }
            writeln!(out)?;
            writeln!(
                out,
                "{:>4} {:>13}{} {:>10} {:>10} {:>10} {:>8}  site {{category}} (removing it saves about `saves`)",
                "rank",
                "alloc+realloc",
                spread(sampled, "±"),
                "direct",
                "indirect",
                "saves",
                "of phase"
            )?;
            for s in &c.sites {
                let calls = s.alloc_count.saturating_add(s.realloc_count);
                writeln!(
                    out,
                    "{:>4} {:>13}{} {:>10} {:>10} {:>10} {:>8}  {} {{{}}}",
                    s.rank,
                    calls,
                    spread(sampled, relative(s.alloc_count_noise, calls)),
                    seconds(s.direct_s),
                    seconds(s.indirect_s),
                    seconds(s.total_s),
                    opt_pct(s.phase_share),
                    naming::with_distinction(&with_callers(&s.name, &s.callers), &s.distinction),
                    s.category
                )?;
            }
            if sampled {
                writeln!(out, "\n{}", super::SAMPLED_FOOTER)?;
            }
            Ok(())
        }
    }
}

/// A count delta, marked `~` when sampling alone may have made it (`noise`: its
/// bound, see `crate::sampling_noise`); no change is not marked, nor below.
fn count_delta(delta: i64, noise: Option<u64>) -> String {
    let mark = if within(delta as f64, noise.map(|n| n as f64)) {
        "~"
    } else {
        ""
    };
    format!("{mark}{delta:+}")
}

/// A cost delta (`-` when unpriced), marked likewise.
fn cost_delta(delta: Option<f64>, noise: Option<f64>) -> String {
    match delta {
        None => "-".to_owned(),
        Some(d) if within(d, noise) => format!("~{}", seconds(d)),
        Some(d) => seconds(d),
    }
}

/// The first line of a comparison's table: the phase's allocations on each side, and
/// the runs' peaks. All there is to show of two `count` reports.
pub fn diff_totals(out: &mut dyn Write, d: &Diff) -> io::Result<()> {
    // Peak RSS where both reports record it.
    let rss = match (d.base.max_rss_bytes, d.change.max_rss_bytes) {
        (0, _) | (_, 0) => String::new(),
        (a, b) => format!(
            ", peak RSS {} -> {}",
            super::bytes(a as f64),
            super::bytes(b as f64)
        ),
    };
    writeln!(
        out,
        "phase {}: base {} allocs, change {} allocs ({:+}); the run's peak {} live -> {}{rss}",
        d.phase.as_deref().unwrap_or("(all)"),
        d.base.alloc_count,
        d.change.alloc_count,
        crate::diff::delta(d.base.alloc_count, d.change.alloc_count),
        super::bytes(d.base.peak_live_bytes as f64),
        super::bytes(d.change.peak_live_bytes as f64),
    )
}

/// Writes a comparison: totals, predicted against measured change, categories, sites;
/// in JSON also the `--fail-if` conditions that held (`fail_if`, empty when none
/// did or none was given).
pub fn diff(out: &mut dyn Write, d: &Diff, failed: &[Failed], format: Format) -> io::Result<()> {
    match format {
        Format::Json => {
            #[derive(Serialize)]
            struct Gated<'a> {
                #[serde(flatten)]
                diff: &'a Diff,
                fail_if: &'a [Failed],
            }
            let mut json = serde_json::to_value(Gated {
                diff: d,
                fail_if: failed,
            })?;
            if !d.sites_compared {
                // Not zeros: nothing was matched because nothing could be.
                for field in crate::diff::MATCHING_FIELDS {
                    json[field] = serde_json::Value::Null;
                }
            }
            serde_json::to_writer_pretty(&mut *out, &json)?;
            writeln!(out)
        }
        Format::Csv => {
            let categories = d.categories.iter().map(DiffCsvRow::from);
            let rows: Vec<DiffCsvRow> = categories.chain(d.sites.iter().map(From::from)).collect();
            csv_rows(out, &rows)
        }
        Format::Table => {
            let opt_s = |x: Option<f64>| x.map_or("-".to_owned(), seconds);
            diff_totals(out, d)?;
            writeln!(
                out,
                "sites matched {} ({} by path, {} with lines ignored), gone {}, new {}; \
                 {} of the base's allocations matched ({} by path, {} with lines ignored), {} of the change's",
                d.sites_matched,
                d.sites_matched_by_path,
                d.sites_matched_ignoring_lines,
                d.sites_gone,
                d.sites_new,
                pct(d.matched_alloc_share),
                pct(d.matched_alloc_share_by_path),
                pct(d.matched_alloc_share_ignoring_lines),
                pct(d.change_matched_alloc_share),
            )?;
            // (A base with no site of the phase, a sampled one that sampled none of
            // it, matches nothing, and says nothing of the patch.)
            let base_sites = d.sites_matched + d.sites_gone;
            if d.base.alloc_count > 0
                && base_sites > 0
                && d.matched_alloc_share < crate::diff::LOW_MATCH_SHARE
            {
                writeln!(
                    out,
                    "warning: only {} of the base's allocations are at sites found in the change: \
                     the patch removed that code, or the site rows marked gone and new are \
                     largely the same code under other frames (trust the category totals)",
                    pct(d.matched_alloc_share)
                )?;
            }
            let recycling = d.recycling_s.map_or(String::new(), |r| {
                format!(", plus {} to recycle what it removes", seconds(r))
            });
            let noise = d.predicted_change_noise_s.map_or(String::new(), |n| {
                format!(" ± {} from sampling", seconds(n))
            });
            // The two sides of an arrow in one unit.
            let pair = |a: Option<f64>, b: Option<f64>| match (a, b) {
                (Some(a), Some(b)) => seconds_pair(a, b),
                _ => (opt_s(a), opt_s(b)),
            };
            let measured = match d.measured_change_s {
                Some(m) => {
                    let (base, change) = pair(d.base.wall_s, d.change.wall_s);
                    format!("{} ({base} -> {change}; {})", seconds(m), d.wall_source)
                }
                None => "none (a phase the tracer did not time; give --base-seconds and \
                         --change-seconds)"
                    .to_owned(),
            };
            let (base_cost, change_cost) = pair(d.base.cost_s, d.change.cost_s);
            writeln!(
                out,
                "predicted change {}{noise} (allocation cost {base_cost} -> {change_cost}{recycling}); measured change {measured}",
                opt_s(d.predicted_change_s),
            )?;
            if let Some(r) = d.repriced_s.filter(|r| *r != 0.0) {
                writeln!(
                    out,
                    "of which {} at {} {} whose allocations and bytes did not change: \
                     their blocks lived longer or shorter, or counted against another rate \
                     of the program's allocations (docs/cost-model.md, \"Across a patch\")",
                    seconds(r),
                    d.repriced_sites,
                    if d.repriced_sites == 1 {
                        "site"
                    } else {
                        "sites"
                    }
                )?;
            }
            writeln!(out)?;
            let (shown, left) = super::used_categories(
                &d.categories,
                |c| c.base_alloc_count > 0 || c.change_alloc_count > 0,
                d.categories.iter().any(|c| c.alloc_count_noise.is_some()),
                |c| c.alloc_count_noise,
            );
            let w = super::category_width(shown.iter().map(|c| c.category.as_str()));
            writeln!(
                out,
                "{:<w$} {:>12} {:>12} {:>12} {:>11}",
                "category", "base", "change", "delta", "cost change"
            )?;
            for c in shown {
                writeln!(
                    out,
                    "{:<w$} {:>12} {:>12} {:>12} {:>11}",
                    c.category,
                    c.base_alloc_count,
                    c.change_alloc_count,
                    count_delta(c.delta_alloc_count, c.alloc_count_noise),
                    cost_delta(c.delta_cost_s, c.cost_noise_s)
                )?;
            }
            if let Some(left) = left {
                writeln!(out, "{left}")?;
            }
            writeln!(out)?;
            if d.sites.is_empty() {
                let changed = d.sites_gone + d.sites_new > 0
                    || d.categories.iter().any(|c| c.delta_alloc_count != 0);
                writeln!(
                    out,
                    "{}",
                    if changed {
                        "(no site shown: --limit shows the sites that changed)"
                    } else {
                        "(no site changed)"
                    }
                )?;
            } else {
                writeln!(
                    out,
                    "{:>12} {:>12} {:>12} {:>11} {:>14}  site {{category}}",
                    "base", "change", "delta", "cost change", "matched"
                )?;
            }
            for s in &d.sites {
                writeln!(
                    out,
                    "{:>12} {:>12} {:>12} {:>11} {:>14}  {} {{{}}}",
                    s.base_alloc_count,
                    s.change_alloc_count,
                    count_delta(s.delta_alloc_count, s.alloc_count_noise),
                    cost_delta(s.delta_cost_s, s.cost_noise_s),
                    s.matched,
                    naming::with_distinction(&with_callers(&s.name, &s.callers), &s.distinction),
                    s.category
                )?;
            }
            if d.categories.iter().any(|c| c.alloc_count_noise.is_some()) {
                writeln!(
                    out,
                    "\n~ marks a change under two standard errors: sampling alone could make \
                     it (a sample:N report records one allocation in N, so a site of fewer \
                     than N allocations is often not recorded at all)"
                )?;
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_calibration_is_dated_in_utc() {
        assert_eq!(measured_at(0), "");
        assert_eq!(
            measured_at(1_796_548_548),
            ", measured 2026-12-06 09:15 UTC"
        );
        assert_eq!(measured_at(951_782_400), ", measured 2000-02-29 00:00 UTC");
        assert_eq!(measured_at(86_399), ", measured 1970-01-01 23:59 UTC");
    }
    use crate::render::tests::object;

    /// Every field of the JSON row is the CSV row's column of that name, with the same
    /// value; the CSV row's other columns but `kind` are empty.
    fn same_fields(csv_row: impl Serialize, json_row: impl Serialize) {
        let (c, j) = (object(csv_row), object(json_row));
        for (k, v) in &j {
            assert_eq!(c.get(k), Some(v), "{k}");
        }
        for (k, v) in &c {
            assert!(j.contains_key(k) || k == "kind" || v.is_null(), "{k}: {v}");
        }
    }

    #[test]
    fn deltas_within_sampling_noise_are_marked() {
        assert_eq!(count_delta(-63, Some(502)), "~-63");
        assert_eq!(count_delta(-600, Some(502)), "-600");
        assert_eq!(count_delta(0, Some(502)), "+0");
        assert_eq!(count_delta(-63, None), "-63");
        assert_eq!(
            cost_delta(Some(-0.03), Some(0.25)),
            format!("~{}", seconds(-0.03))
        );
        assert_eq!(cost_delta(Some(-0.03), None), seconds(-0.03));
        assert_eq!(cost_delta(None, Some(0.25)), "-");
    }

    #[test]
    fn json_of_totals_alone_gives_the_matching_figures_as_unknown() {
        let json = |d: &Diff| {
            let mut out = Vec::new();
            diff(&mut out, d, &[], Format::Json).unwrap();
            serde_json::from_slice::<serde_json::Value>(&out).unwrap()
        };
        let compared = Diff {
            sites_compared: true,
            sites_matched: 3,
            matched_alloc_share: 0.5,
            ..Diff::default()
        };
        let alone = compared.clone().totals_alone();
        let (with, without) = (json(&compared), json(&alone));
        for field in crate::diff::MATCHING_FIELDS {
            // A name that is not a field would be added, not nulled.
            assert!(with[field].is_number(), "{field}: {}", with[field]);
            assert!(without[field].is_null(), "{field}: {}", without[field]);
        }
        assert_eq!(
            (&with["sites_compared"], &without["sites_compared"]),
            (&true.into(), &false.into())
        );
        assert_eq!(with["sites_matched"], 3);
        assert!(without["base"]["alloc_count"].is_number());
    }

    #[test]
    fn the_totals_line_shows_peak_rss_where_both_reports_have_it() {
        let side = |rss| crate::diff::Side {
            max_rss_bytes: rss,
            ..Default::default()
        };
        let line = |a, b| {
            let mut out = Vec::new();
            let d = Diff {
                base: side(a),
                change: side(b),
                ..Diff::default()
            };
            diff_totals(&mut out, &d).unwrap();
            String::from_utf8(out).unwrap()
        };
        let both = line(1 << 20, 2 << 20);
        assert!(
            both.ends_with("live -> 0 B, peak RSS 1.0 MiB -> 2.0 MiB\n"),
            "{both}"
        );
        assert!(!line(0, 2 << 20).contains("RSS"));
    }

    #[test]
    fn cost_and_diff_csv_columns_are_the_json_fields() {
        let site = SiteCost {
            rank: 1,
            site_id: 2,
            name: "f (a.rs:1)".into(),
            callers: "g (b.rs:2)".into(),
            distinction: "via h (c.rs:3)".into(),
            category: "cat".into(),
            alloc_count: 3,
            realloc_count: 4,
            temporary_count: 5,
            alloc_count_noise: Some(90),
            direct_s: 0.5,
            indirect_s: 0.25,
            total_s: 0.75,
            phase_share: Some(0.125),
        };
        same_fields(CostCsvRow::from(&site), &site);
        let category = CategoryCost {
            category: "cat".into(),
            sites: 6,
            alloc_count: 7,
            realloc_count: 8,
            alloc_count_noise: Some(12),
            direct_s: 1.5,
            indirect_s: 2.5,
            total_s: 4.0,
            phase_share: None,
        };
        same_fields(CostCsvRow::from(&category), &category);
        let site = SiteDelta {
            name: "f (a.rs:1)".into(),
            callers: "g (b.rs:2)".into(),
            distinction: "via h (c.rs:3)".into(),
            matched: crate::diff::BY_PATH.into(),
            category: "cat".into(),
            base_alloc_count: 8,
            change_alloc_count: 9,
            delta_alloc_count: 1,
            delta_bytes_requested: -10,
            delta_cost_s: Some(-0.5),
            alloc_count_noise: Some(40),
            cost_noise_s: Some(0.25),
        };
        same_fields(DiffCsvRow::from(&site), &site);
        let category = CategoryDelta {
            category: "cat".into(),
            base_alloc_count: 11,
            change_alloc_count: 13,
            delta_alloc_count: 2,
            delta_bytes_requested: 12,
            delta_cost_s: None,
            alloc_count_noise: Some(3),
            cost_noise_s: None,
        };
        same_fields(DiffCsvRow::from(&category), &category);
    }
}
