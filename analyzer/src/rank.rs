//! Ranking call sites.

use crate::naming;
use crate::report::{FrameRow, Report};
use std::collections::HashMap;

/// What to rank by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RankBy {
    /// Allocations plus reallocs.
    Count,
    /// Requested bytes.
    Bytes,
    /// Temporaries.
    Temporaries,
    /// Estimated cost (needs per-site costs).
    Cost,
}

/// One ranked site.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct RankedSite {
    /// Rank, from 1.
    pub rank: usize,
    /// `site_id` in the report.
    pub site_id: u64,
    /// First frame outside the allocator and std.
    pub name: String,
    /// Where that frame was reached from (see `naming::callers`).
    pub callers: String,
    /// Allocations.
    pub alloc_count: u64,
    /// Reallocs.
    pub realloc_count: u64,
    /// Requested bytes.
    pub bytes_requested: u64,
    /// Real block bytes.
    pub bytes_allocated: u64,
    /// Temporaries.
    pub temporary_count: u64,
    /// Temporaries / allocations.
    pub temporary_share: f64,
    /// Share of all allocations (and reallocs) in the selection.
    pub share: f64,
    /// The size class with most allocations at this site.
    pub main_size_class_bytes: u64,
    /// Median lifetime of the followed blocks of the main size class, if any.
    pub lifetime_ns_median: Option<u64>,
    /// Estimated cost in seconds (direct + indirect, see `cost`), with a calibration.
    pub cost_s: Option<f64>,
}

/// Per-site totals over the rows of `phase` (all phases if `None`), not yet named
/// (naming a million sites costs more than ranking them: see [`name`]).
pub fn site_totals(report: &Report, phase: Option<&str>) -> Vec<RankedSite> {
    #[derive(Default)]
    struct Acc {
        allocs: u64,
        reallocs: u64,
        requested: u64,
        allocated: u64,
        temporaries: u64,
        main: (u64, u64, Option<u64>),
    }
    let mut by_site: HashMap<u64, Acc> = HashMap::new();
    for r in report.rows(phase) {
        let a = by_site.entry(r.site_id).or_default();
        // Saturating: the counts come from a file, and a sum that wraps would rank
        // the biggest site last.
        a.allocs = a.allocs.saturating_add(r.alloc_count);
        a.reallocs = a.reallocs.saturating_add(r.realloc_count);
        a.requested = a.requested.saturating_add(r.bytes_requested);
        a.allocated = a.allocated.saturating_add(r.bytes_allocated);
        a.temporaries = a.temporaries.saturating_add(r.temporary_count);
        let n = r.calls();
        if n > a.main.1 {
            a.main = (r.size_class_bytes, n, r.lifetime_ns_median);
        }
    }
    let total = by_site
        .values()
        .map(|a| a.allocs.saturating_add(a.reallocs))
        .fold(0, u64::saturating_add);
    by_site
        .into_iter()
        .map(|(site_id, a)| RankedSite {
            rank: 0,
            site_id,
            name: String::new(),
            callers: String::new(),
            alloc_count: a.allocs,
            realloc_count: a.reallocs,
            bytes_requested: a.requested,
            bytes_allocated: a.allocated,
            temporary_count: a.temporaries,
            temporary_share: ratio(a.temporaries, a.allocs),
            share: ratio(a.allocs.saturating_add(a.reallocs), total),
            main_size_class_bytes: a.main.0,
            lifetime_ns_median: a.main.2,
            cost_s: None,
        })
        .collect()
}

/// The frames of one site, innermost first (`frames` must be sorted by site and
/// frame index, as `report::load` leaves them).
pub fn frames_of(frames: &[FrameRow], site_id: u64) -> &[FrameRow] {
    let start = frames.partition_point(|f| f.site_id < site_id);
    let end = start + frames[start..].partition_point(|f| f.site_id == site_id);
    &frames[start..end]
}

/// Callers shown after a site's name.
pub use alloc_tracer_format::site::CALLERS;

/// Fills in the site's name and callers from the report's frames.
pub fn name(report: &Report, site: &mut RankedSite) {
    let frames = frames_of(&report.frames, site.site_id);
    site.name = naming::site_name(frames);
    site.callers = naming::callers(frames, CALLERS);
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 { 0.0 } else { a as f64 / b as f64 }
}

/// The `limit` sites ranked first by `by`, within `phase` if given; `costs` (site id
/// to seconds) fills in `cost_s` and is what [`RankBy::Cost`] ranks by.
pub fn top(
    report: &Report,
    by: RankBy,
    limit: usize,
    phase: Option<&str>,
    costs: Option<&HashMap<u64, f64>>,
) -> Vec<RankedSite> {
    let mut sites = site_totals(report, phase);
    if let Some(costs) = costs {
        for s in &mut sites {
            s.cost_s = costs.get(&s.site_id).copied();
        }
    }
    let key = |s: &RankedSite| match by {
        RankBy::Count => s.alloc_count.saturating_add(s.realloc_count) as f64,
        RankBy::Bytes => s.bytes_requested as f64,
        RankBy::Temporaries => s.temporary_count as f64,
        RankBy::Cost => s.cost_s.unwrap_or(0.0),
    };
    // Ties by site id, so that output is stable. Select the first `limit` in linear
    // time, then sort only those.
    let order =
        |a: &RankedSite, b: &RankedSite| key(b).total_cmp(&key(a)).then(a.site_id.cmp(&b.site_id));
    if limit == 0 {
        sites.clear();
    } else if limit < sites.len() {
        sites.select_nth_unstable_by(limit - 1, order);
        sites.truncate(limit);
    }
    sites.sort_by(order);
    for (i, s) in sites.iter_mut().enumerate() {
        s.rank = i + 1;
        name(report, s);
    }
    sites
}
