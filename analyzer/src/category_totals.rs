//! Allocations per category: the built-in or given rules ([`crate::categories`])
//! applied to every site of a report, summed, with each category's biggest site.

use crate::categories::{Category, UNMATCHED, classify};
use crate::rank::{self, RankedSite, frames_of, site_totals};
use crate::report::Report;

/// Totals of one category.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct CategoryTotals {
    /// Category name.
    pub category: String,
    /// Sites in it.
    pub sites: usize,
    /// Allocations.
    pub alloc_count: u64,
    /// Reallocs.
    pub realloc_count: u64,
    /// Requested bytes.
    pub bytes_requested: u64,
    /// Temporaries.
    pub temporary_count: u64,
    /// Share of all allocations (and reallocs) in the selection.
    pub share: f64,
    /// The biggest site in it.
    pub top_site: String,
    /// How far sampling alone may put `alloc_count + realloc_count` from the truth
    /// in a `sample:N` report (as a site's: `RankedSite::alloc_count_noise`);
    /// `None` in an exact one. A category with nothing sampled (none at all, or
    /// only blocks of the classes recorded whole) may still have made up to about
    /// `3N` more (`sampling_noise::unsampled_bound`).
    pub alloc_count_noise: Option<u64>,
    /// The same for `bytes_requested` (`RankedSite::bytes_requested_noise`); `None`
    /// where nothing was sampled, whose sizes are unknown.
    pub bytes_requested_noise: Option<u64>,
    /// The same for `temporary_count`.
    pub temporary_count_noise: Option<u64>,
}

/// Totals per category (rules in order, then the unmatched), within `phase` if given.
pub fn totals(report: &Report, rules: &[Category], phase: Option<&str>) -> Vec<CategoryTotals> {
    let mut out: Vec<CategoryTotals> = rules
        .iter()
        .map(|c| c.name.as_str())
        .chain([UNMATCHED])
        .map(|name| CategoryTotals {
            category: name.to_owned(),
            sites: 0,
            alloc_count: 0,
            realloc_count: 0,
            bytes_requested: 0,
            temporary_count: 0,
            share: 0.0,
            alloc_count_noise: None,
            bytes_requested_noise: None,
            temporary_count_noise: None,
            top_site: String::new(),
        })
        .collect();
    // Per category: the spread's sums over its sites' sampled rows.
    let mut squares = vec![0.0; out.len()];
    let mut sampled = vec![(0u64, 0u64); out.len()];
    let mut biggest: Vec<Option<(u64, usize)>> = vec![None; out.len()];
    let sites: Vec<RankedSite> = site_totals(report, phase);
    let calls = |s: &RankedSite| s.alloc_count.saturating_add(s.realloc_count);
    let total = sites.iter().map(calls).fold(0, u64::saturating_add);
    for (k, s) in sites.iter().enumerate() {
        let fs = frames_of(&report.frames, s.site_id);
        let i = classify(rules, fs);
        let t = &mut out[i];
        t.sites += 1;
        t.alloc_count = t.alloc_count.saturating_add(s.alloc_count);
        t.realloc_count = t.realloc_count.saturating_add(s.realloc_count);
        t.bytes_requested = t.bytes_requested.saturating_add(s.bytes_requested);
        t.temporary_count = t.temporary_count.saturating_add(s.temporary_count);
        squares[i] += s.bytes_square_sum;
        sampled[i].0 = sampled[i].0.saturating_add(s.sampled.0);
        sampled[i].1 = sampled[i].1.saturating_add(s.sampled.1);
        let n = calls(s);
        // Ties go to the lower site id, so that output is stable.
        if biggest[i].is_none_or(|(m, j)| n > m || (n == m && s.site_id < sites[j].site_id)) {
            biggest[i] = Some((n, k));
        }
    }
    for (t, b) in out.iter_mut().zip(&biggest) {
        if let Some((_, k)) = *b {
            let mut site = sites[k].clone();
            rank::name(report, &mut site);
            t.top_site = site.name;
        }
    }
    for ((t, square), sampled) in out.iter_mut().zip(squares).zip(sampled) {
        let calls = t.alloc_count.saturating_add(t.realloc_count);
        t.share = if total == 0 {
            0.0
        } else {
            calls as f64 / total as f64
        };
        // A category none of whose allocations was sampled may still have made
        // some: up to about 3N.
        t.alloc_count_noise = report.count_or_none_noise(sampled.0);
        t.bytes_requested_noise = report.bytes_noise(square);
        t.temporary_count_noise = report.count_or_none_noise(sampled.1);
    }
    out
}
