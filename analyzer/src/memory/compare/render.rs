//! `peak --base` and `leaks --base` as tables, JSON and CSV.
//!
//! JSON is the whole [`HeldChange`]; CSV is its categories, then its sites, one row
//! each, told apart by a `kind` column (as `peak` writes its own).

use super::{Change, HeldChange, HeldSide};
use crate::memory::render::bound;
use crate::render::{Format, bytes, csv_rows, pct, with_callers};
use std::io::{self, Write};

/// Writes what holds memory at one moment in two reports.
pub fn held_change(out: &mut dyn Write, c: &HeldChange, format: Format) -> io::Result<()> {
    match format {
        Format::Json => {
            serde_json::to_writer_pretty(&mut *out, c)?;
            writeln!(out)
        }
        Format::Csv => {
            let categories = c.categories.iter().map(|k| ChangeCsvRow {
                kind: "category",
                category: &k.category,
                ..ChangeCsvRow::of(&k.change)
            });
            let sites = c.sites.iter().map(|s| ChangeCsvRow {
                kind: "site",
                rank: Some(s.rank),
                name: Some(&s.name),
                callers: Some(&s.callers),
                distinction: Some(&s.distinction),
                category: &s.category,
                matched: Some(&s.matched),
                ..ChangeCsvRow::of(&s.change)
            });
            let rows: Vec<ChangeCsvRow> = categories.chain(sites).collect();
            csv_rows(out, &rows)
        }
        Format::Table => table(out, c),
    }
}

/// One CSV row: a category's (`kind` `category`) or a site's (`site`).
#[derive(Default, serde::Serialize)]
struct ChangeCsvRow<'a> {
    kind: &'a str,
    rank: Option<usize>,
    name: Option<&'a str>,
    callers: Option<&'a str>,
    distinction: Option<&'a str>,
    category: &'a str,
    matched: Option<&'a str>,
    base_bytes: u64,
    change_bytes: u64,
    delta_bytes: i64,
    delta_se: u64,
    within_noise: bool,
}

impl ChangeCsvRow<'_> {
    /// A row of `c`'s figures (the CSV writer takes no nested structs).
    fn of(c: &Change) -> Self {
        ChangeCsvRow {
            base_bytes: c.base_bytes,
            change_bytes: c.change_bytes,
            delta_bytes: c.delta_bytes,
            delta_se: c.delta_se,
            within_noise: c.within_noise,
            ..ChangeCsvRow::default()
        }
    }
}

/// A signed byte count (`+1.0 MiB`, `-512 B`).
fn signed(b: i64) -> String {
    if b > 0 {
        format!("+{}", bytes(b as f64))
    } else {
        bytes(b as f64)
    }
}

/// Two standard errors of a change (`bound`), or `?` where they are unknown.
fn error(c: &HeldChange, se: u64) -> String {
    if c.error_known() {
        bound(se)
    } else {
        "?".to_owned()
    }
}

/// The change and, where sampling alone could have made it, a `~`.
fn delta(c: &Change) -> String {
    let mark = if c.within_noise { "~" } else { "" };
    format!("{mark}{}", signed(c.delta_bytes))
}

fn side(s: &HeldSide, moment: &str) -> String {
    let mut text = match s.live_bytes {
        None => "no peak kept".to_owned(),
        Some(b) if moment == "peak" => format!("{} live", bytes(b as f64)),
        // A net of allocations and frees while traced, not what was live.
        Some(b) => format!("{} allocated and not freed while traced", bytes(b as f64)),
    };
    if let (Some(t), Some(phase)) = (s.time_s, &s.phase) {
        text += &format!(" at {}, phase {phase}", crate::render::seconds(t));
    }
    if s.rss_bytes > 0 {
        text += &format!(", {} resident", bytes(s.rss_bytes as f64));
    }
    text
}

fn table(out: &mut dyn Write, c: &HeldChange) -> io::Result<()> {
    let what = if c.moment == "peak" {
        "at the kept peak"
    } else {
        "at the end of the run"
    };
    writeln!(out, "{what}:")?;
    writeln!(out, "  base:   {}", side(&c.base, &c.moment))?;
    writeln!(out, "  change: {}", side(&c.change, &c.moment))?;
    if let (Some(a), Some(b)) = (c.base.run_peak_live_bytes, c.change.run_peak_live_bytes) {
        writeln!(
            out,
            "the runs' highest live bytes: {} -> {} ({}, each within 256 KiB a thread \
             recording at once)",
            bytes(a as f64),
            bytes(b as f64),
            signed(b.saturating_sub(a))
        )?;
    }
    // The runs' figures: beside the peak, not the end.
    if let (a, b) = (c.base.max_rss_bytes, c.change.max_rss_bytes)
        && a > 0
        && b > 0
        && c.moment == "peak"
    {
        writeln!(
            out,
            "the processes' peak resident memory: {} -> {} ({})",
            bytes(a as f64),
            bytes(b as f64),
            signed(crate::diff::delta(a, b))
        )?;
    }
    for (name, s) in [("base", &c.base), ("change", &c.change)] {
        if s.heap_interval == 0 && s.estimated_bytes_all_phases == 0 {
            return writeln!(
                out,
                "heap sampling was off in the {name}'s run: rerun it with ALLOC_TRACE_HEAP=1MiB (synth-driver --heap-sample 1MiB) to compare sites"
            );
        }
    }
    if c.base.estimated_bytes_all_phases == 0 && c.change.estimated_bytes_all_phases == 0 {
        return writeln!(
            out,
            "no sampled block was live then in either run: nothing to compare by site"
        );
    }
    let of_phase = c.blocks_of_phase.as_ref().map_or(String::new(), |p| {
        format!(" of blocks allocated in phase {p}")
    });
    writeln!(
        out,
        "heap sampling's estimates{of_phase}: {} -> {} ({}, ± {})",
        bytes(c.estimated.base_bytes as f64),
        bytes(c.estimated.change_bytes as f64),
        delta(&c.estimated),
        error(c, c.estimated.delta_se)
    )?;
    if c.base.estimated_bytes == 0 && c.change.estimated_bytes == 0 {
        return writeln!(
            out,
            "none of the sampled blocks live then in either run was allocated in the phase \
             asked for"
        );
    }
    if !c.error_known() {
        // The manifest's interval is the one in force at the report: 0 when heap
        // sampling stopped before it, and with it the estimates' error is unknown.
        writeln!(
            out,
            "heap sampling stopped before a report was written: its sampling error is unknown (± ?), so no change is marked as within it"
        )?;
    } else {
        writeln!(
            out,
            "± is two standard errors of heap sampling; ~ marks a change within its ±: heap sampling alone could make it"
        )?;
        if c.base.heap_interval != c.change.heap_interval {
            writeln!(
                out,
                "heap sampling's intervals differ ({} in the base, {} in the change): \
                 each side's error is its own interval's, at the larger of the two \
                 estimates",
                crate::render::heap_every(c.base.heap_interval),
                crate::render::heap_every(c.change.heap_interval)
            )?;
        }
    }
    // A side that estimates nothing has no share to match.
    let matched = |s: &HeldSide, whose: &str| {
        if s.estimated_bytes > 0 {
            format!("{} of the {whose} estimates", pct(s.matched_share))
        } else {
            format!("the {whose} estimates hold nothing")
        }
    };
    writeln!(
        out,
        "in sites both reports have: {}, {}{}",
        matched(&c.base, "base's"),
        matched(&c.change, "change's"),
        if c.base.name_only_share > 0.0 || c.change.name_only_share > 0.0 {
            format!(
                "; {} and {} more paired by naming frame alone (`name only`)",
                pct(c.base.name_only_share),
                pct(c.change.name_only_share)
            )
        } else {
            String::new()
        }
    )?;
    if c.base.estimated_bytes > 0
        && c.change.estimated_bytes > 0
        && c.base.matched_share.min(c.change.matched_share) < crate::diff::LOW_MATCH_SHARE
    {
        writeln!(
            out,
            "(over a fifth of the bytes of a side sit in sites no stack of the other matches \
             (in one report only, or paired by name alone): compare the categories)"
        )?;
    }
    writeln!(out)?;
    writeln!(
        out,
        "{:>12} {:>12} {:>13} {:>11}  category",
        "base", "change", "delta", "±"
    )?;
    for k in c
        .categories
        .iter()
        .filter(|k| k.change != Change::default())
    {
        writeln!(
            out,
            "{:>12} {:>12} {:>13} {:>11}  {}",
            bytes(k.change.base_bytes as f64),
            bytes(k.change.change_bytes as f64),
            delta(&k.change),
            error(c, k.change.delta_se),
            k.category
        )?;
    }
    if !c.sites.is_empty() {
        writeln!(out)?;
        writeln!(
            out,
            "{:>4} {:>12} {:>12} {:>13} {:>11}  site {{category}} [matched]",
            "rank", "base", "change", "delta", "±"
        )?;
        for s in &c.sites {
            let matched = if s.matched == "stack" {
                String::new()
            } else {
                format!(" [{}]", s.matched)
            };
            writeln!(
                out,
                "{:>4} {:>12} {:>12} {:>13} {:>11}  {} {{{}}}{matched}",
                s.rank,
                bytes(s.change.base_bytes as f64),
                bytes(s.change.change_bytes as f64),
                delta(&s.change),
                error(c, s.change.delta_se),
                alloc_tracer_format::site::with_distinction(
                    &with_callers(&s.name, &s.callers),
                    &s.distinction
                ),
                s.category
            )?;
        }
    }
    if c.more_sites > 0 {
        writeln!(
            out,
            "{} more {}, {} in all (--limit shows more)",
            c.more_sites,
            if c.more_sites == 1 { "site" } else { "sites" },
            signed(c.more_delta_bytes)
        )?;
    }
    if let Some(l) = c.change.live_bytes.filter(|l| *l > 0) {
        let cover = c.estimated.change_bytes as f64 / l as f64;
        if cover < 0.9 && c.moment == "peak" {
            writeln!(
                out,
                "(the changed build's estimates account for {} of its kept peak)",
                pct(cover)
            )?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::compare::{CategoryChange, SiteChange};

    /// The table `table` writes for `c`.
    fn tabled(c: &HeldChange) -> String {
        let mut out = Vec::new();
        table(&mut out, c).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn the_table_marks_noise_and_how_rows_matched() {
        let c = HeldChange {
            moment: "peak".into(),
            blocks_of_phase: None,
            base: HeldSide {
                live_bytes: Some(100 << 20),
                heap_interval: 1 << 20,
                estimated_bytes: 100 << 20,
                estimated_bytes_all_phases: 100 << 20,
                ..HeldSide::default()
            },
            change: HeldSide {
                live_bytes: Some(164 << 20),
                rss_bytes: 90 << 20,
                heap_interval: 1 << 20,
                estimated_bytes: 164 << 20,
                estimated_bytes_all_phases: 164 << 20,
                ..HeldSide::default()
            },
            estimated: Change::new(100 << 20, 164 << 20, 0.0, 0.0),
            categories: vec![CategoryChange {
                category: "prover a/b/c vectors".into(),
                change: Change::new(0, 64 << 20, 0.0, 0.0),
            }],
            sites: vec![
                SiteChange {
                    rank: 1,
                    name: "enforce (mod.rs:172)".into(),
                    category: "prover a/b/c vectors".into(),
                    matched: "change only".into(),
                    change: Change::new(0, 64 << 20, 0.0, 0.0),
                    ..SiteChange::default()
                },
                SiteChange {
                    rank: 2,
                    name: "lc (lc.rs:9)".into(),
                    category: "other".into(),
                    matched: "stack".into(),
                    change: Change::new(1 << 20, 2 << 20, 1e12, 1e12),
                    ..SiteChange::default()
                },
            ],
            more_sites: 3,
            more_delta_bytes: -(1 << 20),
        };
        let text = tabled(&c);
        assert!(
            text.contains("change: 164.0 MiB live, 90.0 MiB resident"),
            "{text}"
        );
        assert!(text.contains("+64.0 MiB"), "{text}");
        assert!(
            text.contains("{prover a/b/c vectors} [change only]"),
            "{text}"
        );
        // 1 MiB more with a standard error of 1.35 MiB: noise.
        assert!(text.contains("~+1.0 MiB"), "{text}");
        assert!(text.contains("lc (lc.rs:9) {other}\n"), "{text}");
        assert!(text.contains("3 more sites, -1.0 MiB in all"), "{text}");
        assert!(!text.contains("intervals differ"), "{text}");
        // A base sampled more sparsely that estimates nothing: said, not 100 % matched.
        let sparse = HeldChange {
            base: HeldSide {
                heap_interval: 4 << 20,
                estimated_bytes: 0,
                estimated_bytes_all_phases: 1 << 20,
                ..c.base.clone()
            },
            ..c.clone()
        };
        let text = tabled(&sparse);
        assert!(
            text.contains(
                "intervals differ (every 4.0 MiB on average in the base, every 1.0 MiB on average in the change)"
            ),
            "{text}"
        );
        assert!(
            text.contains("in sites both reports have: the base's estimates hold nothing, "),
            "{text}"
        );
        // Nothing sampled live on either side: said, not an empty table.
        let none = HeldChange {
            moment: "end".into(),
            base: HeldSide {
                heap_interval: 1 << 20,
                ..HeldSide::default()
            },
            change: HeldSide {
                heap_interval: 1 << 20,
                ..HeldSide::default()
            },
            ..HeldChange::default()
        };
        let text = tabled(&none);
        assert!(
            text.contains("no sampled block was live then in either run"),
            "{text}"
        );
        assert!(!text.contains("category"), "{text}");
        // At the end, a side's `live_bytes` is a net of allocations and frees while
        // traced, which can be negative: not called live.
        let end = HeldChange {
            moment: "end".into(),
            base: HeldSide {
                live_bytes: Some(-2048),
                ..c.base.clone()
            },
            ..c.clone()
        };
        let text = tabled(&end);
        assert!(
            text.contains("base:   -2.0 KiB allocated and not freed while traced"),
            "{text}"
        );
        assert!(!text.contains("KiB live"), "{text}");
    }
}
