//! Comparing two reports (a baseline and a patched build): sites matched by their
//! symbolized frames, never by address, with per-site and per-category deltas in
//! counts, bytes and predicted cost, and the predicted against the measured change
//! in wall time.
//!
//! Sites match first by their whole stack key (each frame's function, crate path and
//! line: `alloc_tracer_format::site::stack_key`), so that a crate built from a git
//! checkout or a local folder (`[patch.crates-io]`) matches the registry build of the
//! baseline; then, among the rest, with lines ignored, for stacks through code the
//! patch moved. The diff says how many sites, and what share of each side's
//! allocations, matched each way: the per-site rows are only as telling as that share.
//! Both keys are of the stack's job frames (`naming::job_frames`): a thread pool's
//! frames around a job, which its work stealing varies from run to run, are left
//! out, and the sites of one job are summed in one row.
//!
//! A change that recycles blocks through a pool instead of allocating them does not
//! make their cost vanish: each allocation it removes still costs a take and a
//! return. With [`Pricing::recycled`] the prediction adds that back, per removed
//! allocation, at the calibrated `recycle` operation's cost
//! ([`crate::calibrate::RECYCLE`]). Removed means removed in all: allocations that
//! only moved to another site or category are not charged.
//!
//! Where a report was traced in `sample:N` mode, each delta comes with how far
//! sampling alone may move it (`crate::sampling_noise`): a site rarely recorded
//! shows up `gone` or `new` by chance, with its whole cost.

mod keyed;

use crate::calibrate::{Calibration, RECYCLE};
use crate::categories::{self, Category};
use crate::matching::{LOOSE_PREFIX, pair_up};
use crate::naming::{self, job_frames};
use crate::rank::frames_of;
use crate::report::Report;
use crate::sampling_noise::{Noise, Sampled};
use keyed::{Acc, by_key};
use std::collections::BTreeMap;

/// One side's totals.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct Side {
    /// Report directory.
    pub report: String,
    /// Allocations and reallocs in the phase (`phases.parquet`: exact in every
    /// mode).
    pub alloc_count: u64,
    /// Requested bytes in the phase (exact).
    pub bytes_requested: u64,
    /// Temporaries in the phase (exact in `sites` mode, an estimate in `sample:N`;
    /// `None` in `count` mode, which does not follow blocks).
    pub temporary_count: Option<u64>,
    /// The run's highest live bytes (the whole run's, whatever the phase).
    pub peak_live_bytes: i64,
    /// How far `peak_live_bytes` may be off the true peak, either way (the threads
    /// allocating at once times what each holds back before it publishes its live
    /// bytes).
    pub peak_live_bytes_error_bytes: u64,
    /// The process's peak resident set size (the whole run's; 0 where the report
    /// does not have it).
    pub max_rss_bytes: u64,
    /// Predicted allocation cost of the phase (direct + indirect), with a calibration.
    pub cost_s: Option<f64>,
    /// Wall time of the phase: given on the command line, else the traced run's.
    pub wall_s: Option<f64>,
    /// The report's sample interval: 1 where every allocation's stack was recorded
    /// (`sites`, `count`), N in `sample:N`, whose temporaries are estimates.
    pub sample_interval: u64,
}

/// A site's change.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct SiteDelta {
    /// Name (first frame outside the allocator and std).
    pub name: String,
    /// Where that frame was reached from (see `naming::callers`).
    pub callers: String,
    /// What tells this row apart from the diff's other rows (listed or not) with the
    /// same name and callers (see `alloc_tracer_format::site::distinctions_among`);
    /// empty when none do.
    pub distinction: String,
    /// How the site matched: [`BY_PATH`], [`IGNORING_LINES`], or [`GONE`] / [`NEW`]
    /// (in one report only).
    pub matched: String,
    /// Category.
    pub category: String,
    /// Allocations and reallocs in the baseline (0: new site).
    pub base_alloc_count: u64,
    /// Allocations and reallocs with the change (0: site gone).
    pub change_alloc_count: u64,
    /// `change - base`.
    pub delta_alloc_count: i64,
    /// Requested bytes, `change - base`.
    pub delta_bytes_requested: i64,
    /// Predicted cost, `change - base` (negative: a saving).
    pub delta_cost_s: Option<f64>,
    /// How far sampling alone may move `delta_alloc_count` (half-width of a 95 %
    /// interval; see `crate::sampling_noise`); `None` when neither report was
    /// traced in `sample:N` mode.
    pub alloc_count_noise: Option<u64>,
    /// The same for `delta_cost_s`.
    pub cost_noise_s: Option<f64>,
}

/// A category's change.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct CategoryDelta {
    /// Category.
    pub category: String,
    /// Allocations and reallocs in the baseline.
    pub base_alloc_count: u64,
    /// Allocations and reallocs with the change.
    pub change_alloc_count: u64,
    /// `change - base`.
    pub delta_alloc_count: i64,
    /// Requested bytes, `change - base`.
    pub delta_bytes_requested: i64,
    /// Predicted cost, `change - base`.
    pub delta_cost_s: Option<f64>,
    /// How far sampling alone may move `delta_alloc_count` (as for a site); for a
    /// category with nothing on either side, what a sampled side may hide (about
    /// `3N`, `sampling_noise::unsampled_bound`).
    pub alloc_count_noise: Option<u64>,
    /// The same for `delta_cost_s`.
    pub cost_noise_s: Option<f64>,
}

/// The comparison.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct Diff {
    /// Phase compared (`None`: everything).
    pub phase: Option<String>,
    /// Baseline totals.
    pub base: Side,
    /// Changed build's totals.
    pub change: Side,
    /// Where the wall times come from.
    pub wall_source: String,
    /// Predicted change in seconds (`change - base` of the predicted costs, plus
    /// `recycling_s`).
    pub predicted_change_s: Option<f64>,
    /// How far sampling alone may move `predicted_change_s` (half-width of a 95 %
    /// interval); `None` when neither report was traced in `sample:N` mode.
    pub predicted_change_noise_s: Option<f64>,
    /// With [`Pricing::recycled`]: what recycling the removed allocations costs: the
    /// allocations removed in all (the baseline's less the change's) at the
    /// calibrated `recycle` cost, shared among the categories (and sites) whose
    /// counts fell, in proportion to their fall.
    pub recycling_s: Option<f64>,
    /// Of `predicted_change_s`, the part at sites in both reports with the same
    /// allocations and requested bytes on each side: the same allocations priced
    /// apart, because their blocks lived longer or shorter, or counted against
    /// another rate of the program's allocations (a patch that removes many
    /// allocations elsewhere makes them read shorter-lived; `docs/cost-model.md`,
    /// "Across a patch"). `None` without a calibration.
    pub repriced_s: Option<f64>,
    /// How many sites (keys) make up `repriced_s`.
    pub repriced_sites: usize,
    /// Measured change in seconds (`change - base` of the wall times).
    pub measured_change_s: Option<f64>,
    /// Whether sites were compared: false where a side is a `count` report
    /// ([`Diff::totals_alone`]), whose matching figures ([`MATCHING_FIELDS`]) are
    /// then not zeros but unknown (`null` in JSON), and whose categories and sites are
    /// empty.
    pub sites_compared: bool,
    /// Sites (keys) in both reports: by whole stack, or with lines ignored.
    pub sites_matched: usize,
    /// Of those, matched by whole stack key (crate paths and lines).
    pub sites_matched_by_path: usize,
    /// Of those, matched only with line numbers ignored ([`naming::loose_key`]; one to
    /// one, the nearest lines first: what is left over under a loose key is gone or
    /// new).
    pub sites_matched_ignoring_lines: usize,
    /// Sites only in the baseline.
    pub sites_gone: usize,
    /// Sites only in the change.
    pub sites_new: usize,
    /// Share of the baseline's allocations (in the phase) at matched sites.
    pub matched_alloc_share: f64,
    /// Of that, the share matched by whole stack key.
    pub matched_alloc_share_by_path: f64,
    /// Of that, the share matched only with lines ignored.
    pub matched_alloc_share_ignoring_lines: f64,
    /// Share of the change's allocations at matched sites.
    pub change_matched_alloc_share: f64,
    /// Per category (rules in order, then the unmatched).
    pub categories: Vec<CategoryDelta>,
    /// The sites that changed most (by predicted cost with a calibration, else by
    /// allocation count).
    pub sites: Vec<SiteDelta>,
}

impl Diff {
    /// The totals alone, where a side has no sites (a `count` report): per-site and
    /// per-category rows, matching, and prices, which need sites on both sides,
    /// left out (against no sites, every site of the other side reads as gone or
    /// new, and its cost as all saved or all added).
    pub fn totals_alone(self) -> Diff {
        let side = |s: Side| Side { cost_s: None, ..s };
        Diff {
            phase: self.phase,
            base: side(self.base),
            change: side(self.change),
            wall_source: self.wall_source,
            measured_change_s: self.measured_change_s,
            ..Diff::default()
        }
    }
}

/// The fields of [`Diff`] that only a comparison of sites gives: unknown where
/// [`Diff::sites_compared`] is false.
pub const MATCHING_FIELDS: [&str; 10] = [
    "repriced_sites",
    "sites_matched",
    "sites_matched_by_path",
    "sites_matched_ignoring_lines",
    "sites_gone",
    "sites_new",
    "matched_alloc_share",
    "matched_alloc_share_by_path",
    "matched_alloc_share_ignoring_lines",
    "change_matched_alloc_share",
];

/// [`SiteDelta::matched`] of a site matched by whole stack key.
pub const BY_PATH: &str = "by path";
/// [`SiteDelta::matched`] of a site matched with lines ignored.
pub const IGNORING_LINES: &str = "ignoring lines";
/// [`SiteDelta::matched`] of a site only in the baseline.
pub const GONE: &str = "gone";
/// [`SiteDelta::matched`] of a site only in the change.
pub const NEW: &str = "new";

/// Below this [`Diff::matched_alloc_share`], the table warns that the per-site rows
/// are mostly churn of unmatched stacks.
pub const LOW_MATCH_SHARE: f64 = 0.8;

/// `b - a`, clamped to `i64` (counts from a damaged report can be anything).
pub(crate) fn delta(a: u64, b: u64) -> i64 {
    let d = i128::from(b) - i128::from(a);
    i64::try_from(d).unwrap_or(if d < 0 { i64::MIN } else { i64::MAX })
}

/// Seconds rounded to whole nanoseconds: differences of float sums carry noise far
/// below that (a report against itself differs by 1e-17 s, not 0), which would read
/// as a saving.
fn to_ns(s: f64) -> f64 {
    // `+ 0.0` turns a rounded -0.0 into 0.0.
    (s * 1e9).round() / 1e9 + 0.0
}

/// `n` as a signed amount, clamped.
fn signed(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Wall times of the two runs given by the user, to compare with the prediction.
#[derive(Clone, Copy, Debug, Default)]
pub struct Measured {
    /// Baseline seconds.
    pub base_s: Option<f64>,
    /// Changed build's seconds.
    pub change_s: Option<f64>,
}

/// How a diff prices allocations.
#[derive(Clone, Copy, Debug, Default)]
pub struct Pricing<'a> {
    /// The calibration; without one, nothing is priced.
    pub cal: Option<&'a Calibration>,
    /// The change recycles the blocks of the allocations it removes (a pool, a free
    /// list): each removed allocation costs the calibration's `recycle` operation
    /// instead of nothing. Ignored when the calibration has no such operation
    /// (calibrations made before it existed); the CLI refuses that case.
    pub recycled: bool,
}

/// Compares `base` with `change` within `phase`; prices both as `pricing` says.
pub fn diff(
    base: &Report,
    change: &Report,
    pricing: Pricing,
    rules: &[Category],
    phase: Option<&str>,
    measured: Measured,
    limit: usize,
) -> Diff {
    let cal = pricing.cal;
    let recycle_ns = cal
        .filter(|_| pricing.recycled)
        .and_then(|c| c.operation(RECYCLE))
        .map(|o| o.ns);
    let (a, b) = (
        by_key(base, cal, rules, phase),
        by_key(change, cal, rules, phase),
    );
    let total =
        |m: &BTreeMap<String, Acc>| m.values().map(|s| s.allocs).fold(0, u64::saturating_add);
    let (base_total, change_total) = (total(&a), total(&b));
    // What recycling costs is the allocations removed in all, at the `recycle` cost
    // each. A category's or a site's removals carry their share of that: some of
    // what left one row may only have moved to another (a site whose stack the
    // patch changed, a category another rule now claims), and was not removed.
    let removed = base_total.saturating_sub(change_total) as f64;
    let share_of_removed = |decreases: u64| {
        if decreases == 0 {
            0.0
        } else {
            removed / decreases as f64
        }
    };
    // `row_removals` of the rows' `decreases` in all, priced as recycled (seconds).
    let recycling = |row_removals: u64, decreases: u64| {
        recycle_ns.map(|ns| row_removals as f64 * share_of_removed(decreases) * ns * 1e-9)
    };
    // Categories need no matching: each side's sites summed per category.
    let mut cats: Vec<CategoryDelta> = (0..=rules.len())
        .map(|i| CategoryDelta {
            category: categories::category_name(rules, i).to_owned(),
            base_alloc_count: 0,
            change_alloc_count: 0,
            delta_alloc_count: 0,
            delta_bytes_requested: 0,
            delta_cost_s: cal.map(|_| 0.0),
            alloc_count_noise: None,
            cost_noise_s: None,
        })
        .collect();
    for (side, sign) in [(&a, -1.0), (&b, 1.0)] {
        // In key order, so that float sums do not depend on hash order.
        let mut accs: Vec<(&String, &Acc)> = side.iter().collect();
        accs.sort_by(|x, y| x.0.cmp(y.0));
        for (_, acc) in accs {
            let c = &mut cats[acc.category];
            if sign < 0.0 {
                c.base_alloc_count = c.base_alloc_count.saturating_add(acc.allocs);
                c.delta_bytes_requested = c.delta_bytes_requested.saturating_sub(signed(acc.bytes));
            } else {
                c.change_alloc_count = c.change_alloc_count.saturating_add(acc.allocs);
                c.delta_bytes_requested = c.delta_bytes_requested.saturating_add(signed(acc.bytes));
            }
            if let Some(t) = c.delta_cost_s.as_mut() {
                *t += sign * acc.cost_ns.unwrap_or(0.0) * 1e-9;
            }
        }
    }
    let mut recycling_s = recycle_ns.map(|_| 0.0);
    let category_decreases = cats
        .iter()
        .map(|c| c.base_alloc_count.saturating_sub(c.change_alloc_count))
        .fold(0, u64::saturating_add);
    for c in &mut cats {
        c.delta_alloc_count = delta(c.base_alloc_count, c.change_alloc_count);
        if let (Some(t), Some(r)) = (
            c.delta_cost_s.as_mut(),
            recycling(
                c.base_alloc_count.saturating_sub(c.change_alloc_count),
                category_decreases,
            ),
        ) {
            *t += r;
            *recycling_s.get_or_insert(0.0) += r;
        }
        if let Some(t) = c.delta_cost_s.as_mut() {
            *t = to_ns(*t);
        }
    }
    let (a, b, by_loose) = pair_up(a, b);
    let empty = Acc::default();
    let site_decreases = a
        .iter()
        .map(|(k, x)| x.allocs.saturating_sub(b.get(k).map_or(0, |y| y.allocs)))
        .fold(0, u64::saturating_add);
    // Allocations at matched keys: baseline by path, baseline ignoring lines, change.
    let (mut base_by_path, mut base_loose, mut change_matched) = (0u64, 0u64, 0u64);
    let mut keys: Vec<&String> = a
        .keys()
        .chain(b.keys().filter(|k| !a.contains_key(*k)))
        .collect();
    keys.sort();
    let mut sites = Vec::new();
    // Every key's job stack, in key order: the rows listed are told apart among them
    // all, so that a row reads the same whatever `--limit` lists.
    let mut every_stack = Vec::with_capacity(keys.len());
    let (mut matched, mut gone, mut new) = (0, 0, 0);
    let interval = |r: &Report| r.manifest.sample_interval.max(1);
    let (base_interval, change_interval) = (interval(base), interval(change));
    let mut total_noise = Noise::default();
    let (mut repriced_s, mut repriced_sites) = (cal.map(|_| 0.0), 0);
    let mut category_noise = vec![Noise::default(); cats.len()];
    for k in keys {
        let (x, y) = (a.get(k), b.get(k));
        let how = match (x, y) {
            (Some(x), Some(y)) => {
                matched += 1;
                change_matched = change_matched.saturating_add(y.allocs);
                if k.starts_with(LOOSE_PREFIX) {
                    base_loose = base_loose.saturating_add(x.allocs);
                    IGNORING_LINES
                } else {
                    base_by_path = base_by_path.saturating_add(x.allocs);
                    BY_PATH
                }
            }
            (Some(_), None) => {
                gone += 1;
                GONE
            }
            _ => {
                new += 1;
                NEW
            }
        };
        let (named, from) = match x {
            Some(x) => (x, base),
            None => (y.expect("a key comes from one side"), change),
        };
        every_stack.push(job_frames(frames_of(&from.frames, named.site_id)));
        let (x, y) = (x.unwrap_or(&empty), y.unwrap_or(&empty));
        let d_cost = cal.map(|_| {
            to_ns(
                (y.cost_ns.unwrap_or(0.0) - x.cost_ns.unwrap_or(0.0)) * 1e-9
                    + recycling(x.allocs.saturating_sub(y.allocs), site_decreases).unwrap_or(0.0),
            )
        });
        let in_both = how == BY_PATH || how == IGNORING_LINES;
        if let Some(r) = repriced_s.as_mut().filter(|_| in_both)
            && x.allocs == y.allocs
            && x.bytes == y.bytes
            && d_cost.is_some_and(|c| c != 0.0)
        {
            *r += d_cost.unwrap_or(0.0);
            repriced_sites += 1;
        }
        // Each side's spread is of what it samples, measured against the larger
        // side's count of that: all of it, or (a report that records the largest
        // classes whole) the classes below those.
        let view = |acc: &Acc, small: bool, interval| Sampled {
            allocs: if small { acc.small_allocs } else { acc.allocs },
            cost_weight_s2: cal.map(|_| {
                1e-18
                    * if small {
                        acc.small_cost_weight_ns2
                    } else {
                        acc.cost_weight_ns2
                    }
            }),
            interval,
        };
        let side_noise = |small| {
            Noise::of_sides(
                view(x, small, base_interval),
                view(y, small, change_interval),
            )
        };
        let (base_noise, change_noise) = (
            side_noise(base.records_whole()).0,
            side_noise(change.records_whole()).1,
        );
        let mut noise = base_noise;
        noise.add(change_noise);
        total_noise.add(noise);
        // Each side's part to the category that side counts the key in (the two
        // sides' lead sites may be classified apart); a side without the key, to
        // the other side's.
        let category_of = |acc: Option<&Acc>| acc.map_or(named.category, |a| a.category);
        category_noise[category_of(a.get(k))].add(base_noise);
        category_noise[category_of(b.get(k))].add(change_noise);
        // A site whose counts stayed can still cost more or less (its blocks now
        // live longer, say): listed too, or the sites would not add up to the
        // categories' change.
        if x.allocs != y.allocs || x.bytes != y.bytes || d_cost.is_some_and(|c| c != 0.0) {
            sites.push((
                every_stack.len() - 1,
                SiteDelta {
                    name: named.name.clone(),
                    callers: named.callers.clone(),
                    distinction: String::new(),
                    matched: how.to_owned(),
                    category: categories::category_name(rules, named.category).to_owned(),
                    base_alloc_count: x.allocs,
                    change_alloc_count: y.allocs,
                    delta_alloc_count: delta(x.allocs, y.allocs),
                    delta_bytes_requested: delta(x.bytes, y.bytes),
                    delta_cost_s: d_cost,
                    alloc_count_noise: noise.count_bound(),
                    cost_noise_s: noise.cost_bound_s(),
                },
            ));
        }
    }
    // Largest changes first; ties by name, so that output is stable.
    sites.sort_by(|(_, p), (_, q)| {
        let size = |s: &SiteDelta| {
            s.delta_cost_s
                .map_or(s.delta_alloc_count.unsigned_abs() as f64, f64::abs)
        };
        size(q)
            .total_cmp(&size(p))
            .then_with(|| p.name.cmp(&q.name))
    });
    sites.truncate(limit);
    let all: Vec<&[crate::report::FrameRow]> = every_stack.iter().map(|f| &**f).collect();
    let shown: Vec<usize> = sites.iter().map(|(i, _)| *i).collect();
    let distinctions = naming::distinctions_among(&all, &shown);
    let sites: Vec<SiteDelta> = sites
        .into_iter()
        .zip(distinctions)
        .map(|((_, mut s), d)| {
            s.distinction = d;
            s
        })
        .collect();
    // A category with nothing on either side may have gone unsampled on both: what
    // each side may hide bounds the change (as `categories` gives such a one).
    let hidden = [base_interval, change_interval]
        .into_iter()
        .filter_map(crate::sampling_noise::unsampled_bound)
        .max();
    for (c, noise) in cats.iter_mut().zip(&category_noise) {
        let empty = c.base_alloc_count == 0 && c.change_alloc_count == 0;
        c.alloc_count_noise = noise.count_bound().or(hidden.filter(|_| empty));
        c.cost_noise_s = noise.cost_bound_s();
    }
    let share = |n: u64, of: u64| if of == 0 { 0.0 } else { n as f64 / of as f64 };
    // The totals from `phases.parquet`, exact in every mode (the sites table holds
    // estimates in `sample:N`), so that a gate on them compares what happened.
    let side = |r: &Report, m: &BTreeMap<String, Acc>, given: Option<f64>| {
        let sum = |f: fn(&crate::report::PhaseRow) -> u64| r.phase_sum(phase, f);
        Side {
            report: r.dir.display().to_string(),
            alloc_count: r.calls(phase),
            bytes_requested: sum(|p| p.bytes_requested),
            temporary_count: (!r.count_only()).then(|| sum(|p| p.temporary_count)),
            peak_live_bytes: r.manifest.totals.peak_live_bytes,
            peak_live_bytes_error_bytes: r.manifest.totals.peak_live_bytes_error_bytes,
            max_rss_bytes: r.manifest.totals.max_rss_bytes,
            cost_s: cal.map(|_| m.values().filter_map(|s| s.cost_ns).sum::<f64>() * 1e-9),
            wall_s: given.or_else(|| r.wall_s(phase)),
            sample_interval: r.manifest.sample_interval.max(1),
        }
    };
    let given = measured.base_s.is_some() && measured.change_s.is_some();
    let (base_side, change_side) = (
        side(base, &a, measured.base_s.filter(|_| given)),
        side(change, &b, measured.change_s.filter(|_| given)),
    );
    Diff {
        phase: phase.map(str::to_owned),
        predicted_change_s: base_side
            .cost_s
            .zip(change_side.cost_s)
            .map(|(x, y)| to_ns(y - x + recycling_s.unwrap_or(0.0))),
        predicted_change_noise_s: total_noise.cost_bound_s(),
        recycling_s,
        repriced_s: repriced_s.map(to_ns),
        repriced_sites,
        measured_change_s: base_side
            .wall_s
            .zip(change_side.wall_s)
            .map(|(x, y)| to_ns(y - x)),
        wall_source: if given {
            "given (--base-seconds, --change-seconds)".to_owned()
        } else {
            "one traced run each, tracer overhead included: two runs of one build differ by \
             several per cent, so this does not test the prediction; time the variants \
             taking turns untraced (synth-driver --variant A,B -i N) and give their medians \
             with --base-seconds and --change-seconds"
                .to_owned()
        },
        base: base_side,
        change: change_side,
        sites_compared: true,
        sites_matched: matched,
        sites_matched_by_path: matched - by_loose,
        sites_matched_ignoring_lines: by_loose,
        sites_gone: gone,
        sites_new: new,
        matched_alloc_share: share(base_by_path.saturating_add(base_loose), base_total),
        matched_alloc_share_by_path: share(base_by_path, base_total),
        matched_alloc_share_ignoring_lines: share(base_loose, base_total),
        change_matched_alloc_share: share(change_matched, change_total),
        categories: cats,
        sites,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::report::{FrameRow, PhaseRow, SiteRow};

    /// Phase `p`'s totals in `phases.parquet` made the sum of the site rows', as a
    /// tracer writes them in `sites` mode.
    fn with_phase_totals(mut r: Report) -> Report {
        let p = &mut r.phases[0];
        p.alloc_count = r.sites.iter().map(|s| s.alloc_count).sum();
        p.realloc_count = r.sites.iter().map(|s| s.realloc_count).sum();
        p.bytes_requested = r.sites.iter().map(|s| s.bytes_requested).sum();
        p.temporary_count = r.sites.iter().map(|s| s.temporary_count).sum();
        r
    }

    fn report(sites: &[(u64, &str, u32, u64)]) -> Report {
        // (site id, function, line, allocations) with one frame each; frames sorted by
        // site, as `report::load` leaves them.
        let mut sorted = sites.to_vec();
        sorted.sort();
        with_phase_totals(Report {
            dir: "r".into(),
            manifest: alloc_tracer_format::manifest::Manifest {
                duration_s: 1.0,
                ..Default::default()
            },
            sites: sites
                .iter()
                .map(|&(site_id, _, _, n)| SiteRow {
                    site_id,
                    phase: "p".into(),
                    size_class_bytes: 160,
                    alloc_count: n,
                    realloc_count: 0,
                    bytes_requested: 100 * n,
                    bytes_allocated: 160 * n,
                    temporary_count: n,
                    lifetime_ns_median: None,
                    followed_freed_count: 0,
                    followed_count: 0,
                })
                .collect(),
            frames: sorted
                .iter()
                .map(|&(site_id, f, line, _)| FrameRow {
                    site_id,
                    ..FrameRow::test(f, "/src/gadgets/boolean.rs", Some(line))
                })
                .collect(),
            phases: vec![PhaseRow {
                phase: "p".into(),
                wall_ns: 1_000_000_000,
                entry_count: 1,
                ..PhaseRow::default()
            }],
            lifetimes: vec![],
        })
    }

    #[test]
    fn sites_match_by_frames_whatever_their_ids() {
        let rules = crate::categories::default_rules();
        // Site "lc" keeps its frames but changes id and halves; "gone" disappears;
        // "new" appears; "same" is unchanged.
        let base = report(&[(0, "lc", 1, 100), (1, "gone", 2, 10), (2, "same", 3, 5)]);
        let change = report(&[(7, "same", 3, 5), (3, "lc", 1, 50), (4, "new", 4, 1)]);
        let d = diff(
            &base,
            &change,
            Pricing::default(),
            &rules,
            Some("p"),
            Measured::default(),
            10,
        );
        assert_eq!((d.sites_matched, d.sites_gone, d.sites_new), (2, 1, 1));
        assert_eq!((d.base.alloc_count, d.change.alloc_count), (115, 56));
        let deltas: Vec<(&str, i64)> = d
            .sites
            .iter()
            .map(|s| (s.name.as_str(), s.delta_alloc_count))
            .collect();
        assert_eq!(
            deltas,
            [
                ("lc (boolean.rs:1)", -50),
                ("gone (boolean.rs:2)", -10),
                ("new (boolean.rs:4)", 1)
            ]
        );
        let boolean = &d.categories[0];
        assert_eq!(boolean.category, "Boolean::lc temporaries");
        assert_eq!(boolean.delta_alloc_count, -50);
        assert_eq!(d.measured_change_s, Some(0.0));
        assert_eq!(d.predicted_change_s, None);
    }

    #[test]
    fn a_site_whose_cost_changed_at_equal_counts_is_listed() {
        // The same site, as often, its blocks now living long (priced `scattered`,
        // not `batch`): its change in cost is the category's, so it is listed.
        let rules = crate::categories::default_rules();
        let (mut base, mut change) = (
            report(&[(0, "kept", 1, 100)]),
            report(&[(0, "kept", 1, 100)]),
        );
        base.sites[0].temporary_count = 0;
        change.sites[0].temporary_count = 0;
        // 100 followed blocks, all still live at the report.
        change.sites[0].followed_count = 100;
        let cal = crate::calibrate::test_calibration();
        let pricing = Pricing {
            cal: Some(&cal),
            recycled: false,
        };
        let d = diff(
            &base,
            &change,
            pricing,
            &rules,
            None,
            Measured::default(),
            10,
        );
        assert_eq!(d.sites.len(), 1, "{d:?}");
        assert_eq!(d.sites[0].delta_alloc_count, 0);
        assert!(d.sites[0].delta_cost_s.unwrap() > 0.0, "{d:?}");
        // Without a calibration, equal counts change nothing.
        let unpriced = Pricing {
            cal: None,
            recycled: false,
        };
        let d = diff(
            &base,
            &change,
            unpriced,
            &rules,
            None,
            Measured::default(),
            10,
        );
        assert!(d.sites.is_empty(), "{d:?}");
    }

    #[test]
    fn the_same_allocations_priced_apart_are_told_apart_from_the_patch() {
        // "kept" allocates as before, its blocks now living long; "lc" halves. Only
        // "kept"'s change is at a site whose counts did not change (its own lifetimes
        // moved here; a rate of allocations that moved does the same); the prediction
        // holds both.
        let rules = crate::categories::default_rules();
        let (mut base, mut change) = (
            report(&[(0, "kept", 1, 100), (1, "lc", 2, 100)]),
            report(&[(0, "kept", 1, 100), (1, "lc", 2, 50)]),
        );
        base.sites[0].temporary_count = 0;
        change.sites[0].temporary_count = 0;
        change.sites[0].followed_count = 100;
        let cal = crate::calibrate::test_calibration();
        let d = priced(&base, &change, &rules, &cal, false, None);
        let kept = d
            .sites
            .iter()
            .find(|s| s.name.starts_with("kept "))
            .unwrap();
        let lc = d.sites.iter().find(|s| s.name.starts_with("lc ")).unwrap();
        assert!(kept.delta_cost_s.unwrap() > 0.0 && lc.delta_cost_s.unwrap() < 0.0);
        assert_eq!(d.repriced_s, kept.delta_cost_s, "{d:?}");
        assert_eq!(d.repriced_sites, 1);
        let both = kept.delta_cost_s.unwrap() + lc.delta_cost_s.unwrap();
        assert!(
            (d.predicted_change_s.unwrap() - both).abs() < 1e-12,
            "{d:?}"
        );
        // A report against itself reprices nothing; without a calibration, no figure.
        let same = priced(&base, &base, &rules, &cal, false, None);
        assert_eq!((same.repriced_s, same.repriced_sites), (Some(0.0), 0));
        assert_eq!(plain_diff(&base, &change, &rules, 10).repriced_s, None);
    }

    /// The diff of `base` and `change` priced by `cal`, the first 10 sites.
    fn priced(
        base: &Report,
        change: &Report,
        rules: &[Category],
        cal: &Calibration,
        recycled: bool,
        phase: Option<&str>,
    ) -> Diff {
        let pricing = Pricing {
            cal: Some(cal),
            recycled,
        };
        diff(base, change, pricing, rules, phase, Measured::default(), 10)
    }

    #[test]
    fn recycled_changes_pay_for_what_they_remove() {
        let rules = crate::categories::default_rules();
        let base = report(&[(0, "lc", 1, 100), (1, "gone", 2, 10), (2, "same", 3, 5)]);
        let change = report(&[(7, "same", 3, 5), (3, "lc", 1, 50), (4, "new", 4, 1)]);
        let mut cal = crate::calibrate::test_calibration();
        let run =
            |cal: &Calibration, recycled| priced(&base, &change, &rules, cal, recycled, Some("p"));
        let (plain, recycled) = (run(&cal, false), run(&cal, true));
        assert_eq!(plain.recycling_s, None);
        // 115 -> 56: 59 removed, at 2 ns. By category, 50 Boolean::lc temporaries and
        // the other sites' 15 -> 6; by site, 50 at `lc` and 10 at `gone`, one of which
        // reappears at `new`.
        let removed = 59;
        let want = removed as f64 * 2e-9;
        let close = |a: f64, b: f64| (a - b).abs() < 1e-15;
        assert!(close(recycled.recycling_s.unwrap(), want), "{recycled:?}");
        assert!(close(
            recycled.predicted_change_s.unwrap() - plain.predicted_change_s.unwrap(),
            want
        ));
        for (p, r) in plain.categories.iter().zip(&recycled.categories) {
            let removed = p.base_alloc_count.saturating_sub(p.change_alloc_count);
            let extra = r.delta_cost_s.unwrap() - p.delta_cost_s.unwrap();
            assert!(close(extra, removed as f64 * 2e-9), "{}", p.category);
        }
        let lc = |d: &Diff| {
            d.sites
                .iter()
                .find(|s| s.name.starts_with("lc "))
                .unwrap()
                .delta_cost_s
                .unwrap()
        };
        // (Site costs are in whole nanoseconds.)
        let lc_recycling = lc(&recycled) - lc(&plain);
        assert!(
            (lc_recycling - 50.0 * (59.0 / 60.0) * 2e-9).abs() < 0.5e-9,
            "{lc_recycling}"
        );
        // A calibration without the operation prices nothing for recycling.
        cal.operations.retain(|o| o.name != RECYCLE);
        let without = run(&cal, true);
        assert_eq!(without.recycling_s, None);
        assert_eq!(without.predicted_change_s, plain.predicted_change_s);
    }

    #[test]
    fn allocations_that_only_moved_are_not_recycled() {
        // 100 Boolean::lc temporaries become 100 allocations of another site, in
        // another category: none removed, so nothing recycled.
        let rules = crate::categories::default_rules();
        let base = report(&[(0, "lc", 1, 100)]);
        let change = report(&[(0, "moved", 2, 100)]);
        let cal = crate::calibrate::test_calibration();
        let run = |recycled| priced(&base, &change, &rules, &cal, recycled, None);
        let (plain, recycled) = (run(false), run(true));
        assert_eq!(recycled.recycling_s, Some(0.0));
        assert_eq!(recycled.predicted_change_s, plain.predicted_change_s);
        assert_eq!(recycled.categories, plain.categories);
    }

    #[test]
    fn sites_whose_lines_moved_match_ignoring_lines() {
        let rules = crate::categories::default_rules();
        let mut base = report(&[(0, "lc", 1, 100), (1, "other", 9, 7)]);
        let mut change = report(&[(0, "lc", 1, 60), (1, "other", 9, 7)]);
        // Site 0 allocates in lc <- closure <- addmany <- the prover's enforce, whose
        // line moved from 10 to 12 (the patch edited that file).
        for (r, caller_line) in [(&mut base, 10), (&mut change, 12)] {
            let at = |function: &str, line: u32, frame_index: u32| FrameRow {
                frame_index,
                stack_index: frame_index,
                ..FrameRow::test(function, "/src/x.rs", Some(line))
            };
            r.frames.splice(
                1..1,
                [
                    at("closure", 2, 1),
                    at("addmany", 3, 2),
                    at("enforce", caller_line, 3),
                ],
            );
        }
        let d = diff(
            &base,
            &change,
            Pricing::default(),
            &rules,
            None,
            Measured::default(),
            10,
        );
        assert_eq!(
            (
                d.sites_matched,
                d.sites_matched_ignoring_lines,
                d.sites_gone,
                d.sites_new
            ),
            (2, 1, 0, 0)
        );
        assert_eq!(d.sites.len(), 1);
        assert_eq!(d.sites[0].delta_alloc_count, -40);
        assert_eq!(d.sites[0].name, "lc (boolean.rs:1)");
    }

    /// A frame as (function, file, line).
    type TestFrame<'a> = (&'a str, String, u32);

    /// `diff` of phase `p` without pricing or measured times.
    fn plain_diff(base: &Report, change: &Report, rules: &[Category], limit: usize) -> Diff {
        diff(
            base,
            change,
            Pricing::default(),
            rules,
            Some("p"),
            Measured::default(),
            limit,
        )
    }

    /// A report of `stacks` (frames innermost first, and allocations), site ids in
    /// order.
    fn report_of(stacks: &[(Vec<TestFrame>, u64)]) -> Report {
        let mut r = report(&[]);
        for (site_id, (frames, n)) in stacks.iter().enumerate() {
            let site_id = site_id as u64;
            r.sites.push(SiteRow {
                site_id,
                phase: "p".into(),
                size_class_bytes: 160,
                alloc_count: *n,
                realloc_count: 0,
                bytes_requested: 100 * n,
                bytes_allocated: 160 * n,
                temporary_count: 0,
                lifetime_ns_median: None,
                followed_freed_count: 0,
                followed_count: 0,
            });
            for (i, (function, file, line)) in frames.iter().enumerate() {
                r.frames.push(FrameRow {
                    site_id,
                    frame_index: i as u32,
                    stack_index: i as u32,
                    ..FrameRow::test(function, file, Some(*line))
                });
            }
        }
        with_phase_totals(r)
    }

    #[test]
    fn a_crate_patched_from_a_git_checkout_matches_its_registry_build() {
        // issue 16: with bellpepper-core patched from a git checkout, every path of
        // that crate changes, and the patch moved lines inside `lc`. The unchanged
        // sites match by crate path (lines and all); those through `lc` with lines
        // ignored.
        let registry =
            "/home/a/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/bellpepper-core-0.2.1";
        let checkout = "/home/a/.cargo/git/checkouts/bellpepper-3a1f9c0d2e4b5a67/8d1c2f3/crates/bellpepper-core";
        let bellperson =
            "/home/a/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/bellperson-0.27.0";
        let stacks = |core: &str, lc_line: u32| {
            let at = |function, file: &str, line| (function, format!("{core}/src/{file}"), line);
            let user = |function, file: &str, line| {
                (function, format!("{bellperson}/src/gadgets/{file}"), line)
            };
            let push = (
                "alloc::vec::Vec<T,A>::push",
                "/rustc/5980/library/alloc/src/vec/mod.rs".to_owned(),
                2417,
            );
            let mut sites = Vec::new();
            // 40 unchanged sites: insert_or_update from 40 callers in uint32.rs.
            for i in 0..40u32 {
                sites.push((
                    vec![
                        push.clone(),
                        at("insert_or_update<S>", "lc.rs", 108),
                        at("add_unsimplified<S>", "lc.rs", 203),
                        user("addmany<S>", "uint32.rs", 300 + i),
                        user("sha256<S>", "sha256.rs", 57),
                    ],
                    1000 + u64::from(i),
                ));
            }
            // 2 sites through the patched `lc`, whose lines moved.
            for (line, caller) in [(450, "xor<S>"), (460, "and<S>")] {
                sites.push((
                    vec![
                        push.clone(),
                        at("insert_or_update<S>", "lc.rs", 108),
                        at("lc<S>", "gadgets/boolean.rs", line + lc_line),
                        user(caller, "uint32.rs", 90),
                    ],
                    500,
                ));
            }
            sites
        };
        let (base, change) = (
            report_of(&stacks(registry, 0)),
            report_of(&stacks(checkout, 3)),
        );
        let rules = crate::categories::default_rules();
        let d = plain_diff(&base, &change, &rules, 100);
        let unchanged: u64 = (0..40).map(|i| 1000 + i).sum();
        let all = unchanged + 1000;
        assert_eq!(
            (
                d.sites_matched,
                d.sites_matched_by_path,
                d.sites_matched_ignoring_lines
            ),
            (42, 40, 2)
        );
        assert_eq!((d.sites_gone, d.sites_new), (0, 0));
        let close = |a: f64, b: f64| (a - b).abs() < 1e-12;
        assert!(d.matched_alloc_share_by_path >= 0.95 * unchanged as f64 / all as f64);
        assert!(
            close(d.matched_alloc_share_by_path, unchanged as f64 / all as f64),
            "{d:?}"
        );
        assert!(
            close(d.matched_alloc_share_ignoring_lines, 1000.0 / all as f64),
            "{d:?}"
        );
        assert!(close(d.matched_alloc_share, 1.0) && close(d.change_matched_alloc_share, 1.0));
        assert!(d.sites.is_empty(), "nothing changed: {:?}", d.sites);

        // The JSON carries the shares.
        let json = serde_json::to_value(&d).unwrap();
        assert_eq!(json["matched_alloc_share"], 1.0);
        assert_eq!(json["sites_matched_by_path"], 40);
    }

    #[test]
    fn a_pool_job_matches_whatever_frames_work_stealing_put_around_it() {
        // One job (a closure parsing lines) run under different rayon frames in two
        // runs: on the calling thread two joins deep, on a worker one join deep.
        let frame = |function: &'static str, file: &str, line| (function, file.to_owned(), line);
        let join = frame(
            "{closure#0}",
            "/r/src/index/rayon-core-1.12.1/src/join/mod.rs",
            412,
        );
        let job = |outer: Vec<TestFrame<'static>>, n| {
            let mut frames = vec![
                frame("alloc", "/rustc/x/library/alloc/src/alloc.rs", 9),
                frame("parse_line", "/me/app/src/main.rs", 57),
                frame("{closure#0}", "/me/app/src/main.rs", 64),
            ];
            frames.extend(outer);
            (frames, n)
        };
        let main = frame("main", "/me/app/src/main.rs", 114);
        let worker = frame(
            "main_loop",
            "/r/src/index/rayon-core-1.12.1/src/registry.rs",
            900,
        );
        let base = report_of(&[
            job(vec![join.clone(), join.clone(), main.clone()], 60),
            job(vec![join.clone(), worker.clone()], 40),
        ]);
        let change = report_of(&[
            job(vec![join.clone(), main.clone()], 70),
            job(vec![join.clone(), join.clone(), join.clone(), worker], 40),
        ]);
        let rules = crate::categories::default_rules();
        let d = plain_diff(&base, &change, &rules, 10);
        assert_eq!((d.sites_matched, d.sites_gone, d.sites_new), (1, 0, 0));
        assert_eq!(d.matched_alloc_share, 1.0);
        let rows: Vec<(&str, &str, u64, u64)> = d
            .sites
            .iter()
            .map(|s| {
                (
                    s.name.as_str(),
                    s.callers.as_str(),
                    s.base_alloc_count,
                    s.change_alloc_count,
                )
            })
            .collect();
        assert_eq!(
            rows,
            [(
                "parse_line (main.rs:57)",
                "{closure#0} (main.rs:64)",
                100,
                110
            )]
        );
        // The named-sites export keys and names them as the diff does.
        let named = crate::export::named_sites(&base, &rules, Some("p"));
        assert_eq!(named.len(), 2);
        assert_ne!(named[0].stack_key, named[1].stack_key);
        assert_eq!(named[0].job_key, named[1].job_key);
        for n in &named {
            assert_eq!(
                (n.job_callers.as_str(), n.job_distinction.as_str()),
                ("{closure#0} (main.rs:64)", "")
            );
        }
    }

    #[test]
    fn unmatched_sites_are_marked_gone_and_new_and_lower_the_share() {
        let rules = crate::categories::default_rules();
        let base = report(&[(0, "lc", 1, 75), (1, "gone", 2, 25)]);
        let change = report(&[(0, "lc", 1, 75), (1, "new", 3, 50)]);
        let d = diff(
            &base,
            &change,
            Pricing::default(),
            &rules,
            Some("p"),
            Measured::default(),
            10,
        );
        assert_eq!(d.matched_alloc_share, 0.75);
        assert_eq!(d.change_matched_alloc_share, 0.6);
        let matched: Vec<(&str, &str)> = d
            .sites
            .iter()
            .map(|s| (s.name.as_str(), s.matched.as_str()))
            .collect();
        assert_eq!(
            matched,
            [("new (boolean.rs:3)", NEW), ("gone (boolean.rs:2)", GONE)]
        );
    }

    #[test]
    fn a_sampled_report_gives_each_delta_its_noise() {
        // A rare site (63 allocations) the sample:1000 change did not record, and a
        // common one it recorded at about its count.
        let rules = crate::categories::default_rules();
        let base = report(&[(0, "lc", 1, 1_000_000), (1, "rare", 2, 63)]);
        let mut change = report(&[(0, "lc", 1, 1_000_000)]);
        let cal = crate::calibrate::test_calibration();
        let exact = priced(&base, &change, &rules, &cal, false, Some("p"));
        assert_eq!(exact.predicted_change_noise_s, None);
        assert!(exact.sites.iter().all(|s| s.alloc_count_noise.is_none()));
        assert!(
            exact
                .categories
                .iter()
                .all(|c| c.alloc_count_noise.is_none())
        );
        change.manifest.sample_interval = 1000;
        let d = priced(&base, &change, &rules, &cal, false, Some("p"));
        let rare = d.sites.iter().find(|s| s.name.starts_with("rare")).unwrap();
        assert_eq!(rare.delta_alloc_count, -63);
        // 2 * sqrt(1000 * 63).
        assert_eq!(rare.alloc_count_noise, Some(502));
        let (delta, noise) = (rare.delta_cost_s.unwrap(), rare.cost_noise_s.unwrap());
        assert!(delta < 0.0 && delta.abs() < noise, "{delta} {noise}");
        // The total's noise holds both sites': 2 * sqrt(1000 * 1e6) from the common
        // one, priced like the rare one, so wider than the rare one's alone.
        let total = d.predicted_change_noise_s.unwrap();
        assert!(total > noise, "{total} {noise}");
        // A category with nothing on either side may hide about 3N on the sampled
        // side.
        let (empty, used): (Vec<_>, Vec<_>) = d
            .categories
            .iter()
            .partition(|c| c.base_alloc_count == 0 && c.change_alloc_count == 0);
        assert!(!empty.is_empty());
        assert!(empty.iter().all(|c| c.alloc_count_noise == Some(3000)));
        let counted: u64 = used
            .iter()
            .filter_map(|c| c.alloc_count_noise)
            .map(|n| n * n)
            .sum();
        // The categories' variances add up to the sites' (bounds rounded up).
        let whole = 4.0 * 1000.0 * (1_000_000.0 + 63.0);
        assert!((counted as f64 - whole).abs() / whole < 1e-3, "{counted}");
    }

    #[test]
    fn a_row_reads_the_same_whatever_the_limit() {
        // Three changed sites of one name and callers, told apart two frames out;
        // the largest change listed alone still reads as among all three.
        let stack = |outer: &'static str, n: u64| {
            let f = |function: &'static str, file: &str, line| (function, file.to_owned(), line);
            (
                vec![
                    f(
                        "lc<S>",
                        "/r/bellpepper-core-0.2.1/src/gadgets/boolean.rs",
                        450,
                    ),
                    f(
                        "addmany<S>",
                        "/r/bellperson-0.27.0/src/gadgets/uint32.rs",
                        350,
                    ),
                    f("compute<S>", "/r/sha256.rs", 144),
                    f(outer, "/r/label.rs", 61),
                ],
                n,
            )
        };
        let base = report_of(&[
            stack("first", 100),
            stack("second", 100),
            stack("third", 100),
        ]);
        let change = report_of(&[
            stack("first", 400),
            stack("second", 300),
            stack("third", 200),
        ]);
        let rules = crate::categories::default_rules();
        let row = |limit| {
            plain_diff(&base, &change, &rules, limit).sites[0]
                .distinction
                .clone()
        };
        assert!(!row(3).is_empty());
        assert_eq!(row(1), row(3));
    }
}
