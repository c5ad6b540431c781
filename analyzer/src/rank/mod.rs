//! Ranking call sites, one by one or grouped (`GroupBy`: by rayon job, naming
//! function or line, name and callers, category, or crate).

use crate::id_map::{self, IdMap};
use crate::naming;
use crate::report::{FrameRow, Report};
use crate::sampling_noise;
use std::collections::HashMap;

mod group;
pub use group::top_grouped;

/// What one ranked row stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupBy {
    /// One call site (a distinct stack).
    Site,
    /// The sites of one rayon job (`naming::job_frames`): one site, in a program
    /// without a thread pool.
    Job,
    /// The sites named by one function (its crate path and function, lines ignored;
    /// a closure with the function it is defined in, see `function_of`).
    Function,
    /// The sites named by one line (`function (file:line)`).
    Line,
    /// The sites that read the same, name and callers (`insert_or_update (lc.rs:108)
    /// < lc (boolean.rs:450) < addmany (uint32.rs:350)`), told apart only by frames
    /// further out: one fix at one call path, wherever the gadget was called from.
    Callers,
    /// The sites of one category.
    Category,
    /// The sites named by one crate's code (the crate of the naming frame's file,
    /// as `alloc_tracer_format::frames::crate_path` names it: `bellpepper-core`,
    /// `alloc` for the standard library's); `(no source)` for frames without one.
    Crate,
}

impl GroupBy {
    /// What a row is, for the heading of the column that names it.
    pub fn row_name(self) -> &'static str {
        match self {
            GroupBy::Site | GroupBy::Callers => "site",
            GroupBy::Job => "job",
            GroupBy::Function => "function",
            GroupBy::Line => "line",
            GroupBy::Category => "category",
            GroupBy::Crate => "crate",
        }
    }
}

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
    /// What tells this site apart from the report's other sites (of the phase)
    /// whose name and callers read the same (`via` a frame further out, or `#n`;
    /// `naming::distinctions_among`); empty when none do.
    pub distinction: String,
    /// Sites in the row (1 unless grouped).
    pub sites: usize,
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
    /// Temporaries / (allocations + reallocs): a block a realloc made can be a
    /// temporary too.
    pub temporary_share: f64,
    /// Share of all allocations (and reallocs) in the selection.
    pub share: f64,
    /// The size class with most allocations at this site.
    pub main_size_class_bytes: u64,
    /// Median lifetime of the followed blocks of the main size class, if any.
    pub lifetime_ns_median: Option<u64>,
    /// Estimated cost in seconds (direct + indirect, see `cost`), with a calibration.
    pub cost_s: Option<f64>,
    /// How far sampling alone may put `alloc_count + realloc_count` from the truth
    /// in a `sample:N` report (half-width of a 95 % interval:
    /// `sampling_noise::estimate_bound`, of the rows sampled one in N; about 3N
    /// where none of the site's allocations was, `Report::count_or_none_noise`);
    /// `None` in an exact one.
    pub alloc_count_noise: Option<u64>,
    /// The same for `bytes_requested` (`sampling_noise::bytes_bound`): wider than the
    /// count's where block sizes vary. It cannot see blocks never sampled: see
    /// `Report::sampled_bytes_against_exact`.
    pub bytes_requested_noise: Option<u64>,
    /// The same for `temporary_count` (the temporaries' own count, as for
    /// allocations): wider than the count's where few blocks are temporaries.
    pub temporary_count_noise: Option<u64>,
    /// The sum that `bytes_requested_noise` comes from (`sampling_noise::square_bound`
    /// over the rows sampling estimates), kept to sum groups of sites.
    #[serde(skip)]
    pub bytes_square_sum: f64,
    /// The allocations and reallocs, and the temporaries, of the rows sampling
    /// estimates (`Report::row_sampled`: all in a `sample:N` report but the classes
    /// it records whole, none in an exact one), which the spreads come from; kept
    /// to sum groups of sites.
    #[serde(skip)]
    pub sampled: (u64, u64),
}

/// The size class with most allocations and reallocs over the phases (the smaller
/// of two with as many), and the median lifetime of its largest row.
fn main_class(classes: &[(u64, u64, u64, Option<u64>)]) -> (u64, Option<u64>) {
    classes
        .iter()
        .max_by(|x, y| x.1.cmp(&y.1).then(y.0.cmp(&x.0)))
        .map_or((0, None), |c| (c.0, c.3))
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
        square: f64,
        sampled: (u64, u64),
        /// Per size class: its allocations and reallocs over the phases, and the
        /// median lifetime of its largest row (a median does not add up).
        classes: Vec<(u64, u64, u64, Option<u64>)>,
    }
    let mut by_site: IdMap<Acc> = id_map::with_capacity(report.sites.len());
    for r in report.rows(phase) {
        let a = by_site.entry(r.site_id).or_default();
        // Saturating: the counts come from a file, and a sum that wraps would rank
        // the biggest site last.
        a.allocs = a.allocs.saturating_add(r.alloc_count);
        a.reallocs = a.reallocs.saturating_add(r.realloc_count);
        a.requested = a.requested.saturating_add(r.bytes_requested);
        a.allocated = a.allocated.saturating_add(r.bytes_allocated);
        a.temporaries = a.temporaries.saturating_add(r.temporary_count);
        if report.row_sampled(r) {
            a.square +=
                sampling_noise::square_bound(r.bytes_requested, r.size_class_bytes, r.calls());
            a.sampled.0 = a.sampled.0.saturating_add(r.calls());
            a.sampled.1 = a.sampled.1.saturating_add(r.temporary_count);
        }
        let n = r.calls();
        // (A site with no allocation at all has no main class.)
        match a.classes.iter_mut().find(|c| c.0 == r.size_class_bytes) {
            _ if n == 0 => {}
            Some(c) => {
                c.1 = c.1.saturating_add(n);
                if n > c.2 {
                    (c.2, c.3) = (n, r.lifetime_ns_median);
                }
            }
            None => a
                .classes
                .push((r.size_class_bytes, n, n, r.lifetime_ns_median)),
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
            distinction: String::new(),
            sites: 1,
            alloc_count: a.allocs,
            realloc_count: a.reallocs,
            bytes_requested: a.requested,
            bytes_allocated: a.allocated,
            temporary_count: a.temporaries,
            temporary_share: ratio(a.temporaries, a.allocs.saturating_add(a.reallocs)),
            share: ratio(a.allocs.saturating_add(a.reallocs), total),
            alloc_count_noise: report.count_or_none_noise(a.sampled.0),
            bytes_requested_noise: report.bytes_noise(a.square),
            temporary_count_noise: report.count_or_none_noise(a.sampled.1),
            bytes_square_sum: a.square,
            sampled: a.sampled,
            main_size_class_bytes: main_class(&a.classes).0,
            lifetime_ns_median: main_class(&a.classes).1,
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

/// The frames of each of `ids` (in increasing order), as [`frames_of`] finds them,
/// in one pass over `frames` rather than two searches a site.
fn stacks_of<'f>(frames: &'f [FrameRow], ids: &[u64]) -> Vec<&'f [FrameRow]> {
    let mut rest = frames;
    ids.iter()
        .map(|&id| {
            let start = rest
                .iter()
                .position(|f| f.site_id >= id)
                .unwrap_or(rest.len());
            let end = start + rest[start..].iter().take_while(|f| f.site_id == id).count();
            let (stack, after) = (&rest[start..end], &rest[end..]);
            rest = after;
            stack
        })
        .collect()
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
/// to seconds) fills in `cost_s` and is what [`RankBy::Cost`] ranks by. Sites whose
/// name and callers read the same get a [`RankedSite::distinction`].
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
    let mut sites = first(sites, by, limit);
    for s in &mut sites {
        name(report, s);
    }
    let shown: Vec<u64> = sites.iter().map(|s| s.site_id).collect();
    let distinctions = distinctions_among_sites(report, &site_ids(report, phase), &shown);
    for (s, d) in sites.iter_mut().zip(distinctions) {
        s.distinction = d;
    }
    sites
}

/// How many of the sites `shown` share their thread-pool job with another one shown:
/// one place in the code, split into several sites by the pool's work stealing
/// (the frames between the job and the pool's entry vary from call to call).
/// `top --group-by job` shows each such job once.
pub fn split_by_pool(report: &Report, shown: &[RankedSite]) -> usize {
    let mut jobs: HashMap<String, usize> = HashMap::new();
    for s in shown {
        // Only stacks with pool frames: two sites that read the same for other
        // reasons (`#1`, `#2`) are not a pool's doing.
        let frames = frames_of(&report.frames, s.site_id);
        let job = naming::job_frames(frames);
        if job.len() < frames.len() {
            *jobs.entry(naming::stack_key(&job)).or_default() += 1;
        }
    }
    jobs.values().filter(|&&n| n > 1).sum()
}

/// The distinctions (`naming::distinctions_among`) of the sites `shown`, worked out
/// among the sites `ids` (in increasing order, holding every one shown).
pub fn distinctions_among_sites(report: &Report, ids: &[u64], shown: &[u64]) -> Vec<String> {
    let all = stacks_of(&report.frames, ids);
    let shown: Vec<usize> = shown
        .iter()
        .map(|s| ids.binary_search(s).expect("every site shown is among ids"))
        .collect();
    naming::distinctions_among(&all, &shown)
}

/// The sites with rows in `phase` (all phases if `None`), in site order: those a
/// site's distinction is worked out among (`naming::distinctions_among`), as the
/// export's named sites are.
pub fn site_ids(report: &Report, phase: Option<&str>) -> Vec<u64> {
    let mut ids: Vec<u64> = report.rows(phase).map(|r| r.site_id).collect();
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// The `limit` rows ranked first by `by`, in order, ranks filled in.
fn first(mut sites: Vec<RankedSite>, by: RankBy, limit: usize) -> Vec<RankedSite> {
    let key = |s: &RankedSite| match by {
        RankBy::Count => s.alloc_count.saturating_add(s.realloc_count) as f64,
        RankBy::Bytes => s.bytes_requested as f64,
        RankBy::Temporaries => s.temporary_count as f64,
        RankBy::Cost => s.cost_s.unwrap_or(0.0),
    };
    // Ties by site id, then name, so that output is stable. Select the first `limit`
    // in linear time, then sort only those.
    let order = |a: &RankedSite, b: &RankedSite| {
        key(b)
            .total_cmp(&key(a))
            .then(a.site_id.cmp(&b.site_id))
            .then_with(|| a.name.cmp(&b.name))
    };
    if limit == 0 {
        sites.clear();
    } else if limit < sites.len() {
        sites.select_nth_unstable_by(limit - 1, order);
        sites.truncate(limit);
    }
    sites.sort_by(order);
    for (i, s) in sites.iter_mut().enumerate() {
        s.rank = i + 1;
    }
    sites
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{FrameRow, SiteRow};

    #[test]
    fn stacks_of_finds_each_sites_frames_in_one_pass() {
        // Frames of sites 1 (two), 3 and 7; asked for 0 (none), 1, 3, 5 (none), 9.
        let frame = |site_id, line| FrameRow {
            site_id,
            ..FrameRow::test("f", "/r/a.rs", Some(line))
        };
        let frames = [frame(1, 1), frame(1, 2), frame(3, 3), frame(7, 7)];
        let ids = [0, 1, 3, 5, 9];
        let got = stacks_of(&frames, &ids);
        let want: Vec<&[FrameRow]> = ids.iter().map(|&id| frames_of(&frames, id)).collect();
        assert_eq!(got, want);
        assert_eq!(got[1].len(), 2);
        assert!(got[3].is_empty() && got[4].is_empty());
    }

    #[test]
    fn temporaries_are_a_share_of_allocations_and_reallocs() {
        // A site of reallocs only (as `hash_multi_leaf_circuit` in 2 KiB PoRep: 24
        // reallocs, 12 of their blocks temporaries) and one of both.
        let row = |site_id, alloc_count, realloc_count, temporary_count| SiteRow {
            site_id,
            phase: "p".into(),
            size_class_bytes: 160,
            alloc_count,
            realloc_count,
            bytes_requested: 0,
            bytes_allocated: 0,
            temporary_count,
            lifetime_ns_median: None,
            followed_freed_count: 0,
            followed_count: 0,
        };
        let report = Report {
            sites: vec![row(0, 0, 24, 12), row(1, 30, 10, 10)],
            ..Report::default()
        };
        let mut shares: Vec<(u64, f64)> = site_totals(&report, None)
            .iter()
            .map(|s| (s.site_id, s.temporary_share))
            .collect();
        shares.sort_by_key(|s| s.0);
        assert_eq!(shares, [(0, 0.5), (1, 0.25)]);
    }

    #[test]
    fn the_main_size_class_is_the_one_with_most_allocations_over_the_phases() {
        // 32 B: 10 in each of two phases; 64 B: 15 in one. The largest single row is
        // 64 B's, the class with most allocations 32 B's.
        let row = |phase: &str, class, alloc_count, lifetime| SiteRow {
            site_id: 4,
            phase: phase.into(),
            size_class_bytes: class,
            alloc_count,
            realloc_count: 0,
            bytes_requested: 0,
            bytes_allocated: 0,
            temporary_count: 0,
            lifetime_ns_median: Some(lifetime),
            followed_freed_count: 0,
            followed_count: 0,
        };
        let report = Report {
            sites: vec![
                row("a", 32, 10, 100),
                row("a", 64, 15, 900),
                row("b", 32, 10, 200),
            ],
            ..Report::default()
        };
        let all = &site_totals(&report, None)[0];
        assert_eq!((all.main_size_class_bytes, all.alloc_count), (32, 35));
        // (The lifetime of that class's largest row: the first of two as large.)
        assert_eq!(all.lifetime_ns_median, Some(100));
        let in_a = &site_totals(&report, Some("a"))[0];
        assert_eq!(
            (in_a.main_size_class_bytes, in_a.lifetime_ns_median),
            (64, Some(900))
        );
    }
}
