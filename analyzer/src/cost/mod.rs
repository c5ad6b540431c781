//! The cost model: what each site's allocations cost in seconds, and so what
//! removing the site would save.
//!
//! Two parts, always reported apart:
//!
//! * **direct**: time inside the allocator. Each report row (site, phase, size class)
//!   is priced from the calibration ([`crate::calibrate`]): temporaries at the
//!   [`Pattern::Temporary`] pair cost of their class; other allocations at the
//!   [`Pattern::Batch`] cost, those that live long at the [`Pattern::Scattered`]
//!   cost (a ramp in lifetime from 64 to 6,400 of the program's allocations,
//!   [`scattered_weight`], over the blocks followed to their free, [`Lasting`]);
//!   reallocs at the batch cost.
//!   Sites whose stack passes through `finish_grow` (a push onto a full or empty
//!   `Vec`, a `reserve`) also pay Rust's growth path, the calibrated `vec_growth`,
//!   per allocation and realloc: the pairs are timed through `Vec::with_capacity`.
//! * **indirect** (an estimate): work that exists only because of the allocation.
//!   Realloc copies, assumed to move half the new block (growth by doubling), at the
//!   calibrated memcpy rate; for categories whose rule names a calibrated operation
//!   (`indirect = "lc_temporary"`), that operation's cost beyond the allocator for
//!   every allocation and realloc of the category; and for `indirect = "copy"` (clones), the
//!   requested bytes copied once at the memcpy rate.
//!
//! Not modelled: cache and TLB effects of the blocks on the code around them (a
//! change that removes allocations by reusing blocks can lose much of the predicted
//! saving to cache misses, which no report row shows), and time the tracer itself
//! adds to the phase's wall time (the shares divide by the traced run's time).

use crate::calibrate::{Calibration, Pattern, VEC_GROWTH};
use crate::categories::{self, Category};
use crate::naming;
use crate::rank::frames_of;
use crate::report::{Report, SiteRow};
use std::collections::{BTreeMap, HashMap, HashSet};

mod lasting;

pub use lasting::{
    BATCH_UNTIL_ALLOCS, Lasting, PRIOR_BLOCKS, SCATTERED_FROM_ALLOCS, ns_per_alloc,
    scattered_weight,
};

/// The cost of some allocations, in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Nanos {
    /// Inside the allocator.
    pub direct: f64,
    /// Realloc copies (estimate).
    pub copies: f64,
    /// The category's calibrated operation beyond the allocator (estimate).
    pub operation: f64,
}

impl Nanos {
    /// Indirect part: copies and operations.
    pub fn indirect(&self) -> f64 {
        self.copies + self.operation
    }
    /// Everything.
    pub fn total(&self) -> f64 {
        self.direct + self.indirect()
    }
    fn add(&mut self, o: Nanos) {
        self.direct += o.direct;
        self.copies += o.copies;
        self.operation += o.operation;
    }
}

/// The work a category's rule says each of its allocations implies (`indirect`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Indirect {
    /// Nothing beyond the allocator.
    None,
    /// A calibrated operation, nanoseconds per allocation beyond the allocator.
    PerAllocation(f64),
    /// `indirect = "copy"`: the requested bytes of its allocations are written once
    /// more (a clone copies what it clones), at the calibrated memcpy rate; its
    /// reallocs pay their own copy already.
    Copy,
}

impl Indirect {
    /// The category's indirect work under this calibration (an unknown operation
    /// name counts as none; `cost` warns about it).
    pub fn of(category: &Category, cal: &Calibration) -> Indirect {
        match category.indirect.as_deref() {
            None => Indirect::None,
            Some("copy") => Indirect::Copy,
            Some(name) => cal.operation(name).map_or(Indirect::None, |o| {
                Indirect::PerAllocation(o.beyond_allocator_ns)
            }),
        }
    }
}

/// Prices one report row, with its category's indirect work; `long_share`: the
/// share of its allocations that live long ([`Lasting::share`]), which are priced
/// as scattered (temporaries never are).
pub fn row_cost(cal: &Calibration, row: &SiteRow, indirect: Indirect, long_share: f64) -> Nanos {
    let class = row.size_class_bytes;
    let temporaries = row.temporary_count.min(row.calls());
    let others = row.alloc_count.saturating_sub(temporaries);
    let reallocs = (row.calls() - temporaries).min(row.realloc_count);
    let scattered = (row.alloc_count as f64 * long_share).min(others as f64);
    let batch = others as f64 - scattered;
    Nanos {
        direct: temporaries as f64 * cal.pair_ns(class, Pattern::Temporary)
            + batch * cal.pair_ns(class, Pattern::Batch)
            + scattered * cal.pair_ns(class, Pattern::Scattered)
            + reallocs as f64 * cal.pair_ns(class, Pattern::Batch),
        copies: row.realloc_count as f64 * cal.copy_ns(class as f64 / 2.0),
        operation: match indirect {
            Indirect::None => 0.0,
            Indirect::PerAllocation(ns) => row.calls() as f64 * ns,
            // A clone copies what it allocates; a realloc's copy is `copies` above.
            Indirect::Copy => {
                let calls = row.calls().max(1) as f64;
                // Each allocation copies about the row's mean request.
                row.alloc_count as f64 * cal.copy_ns(row.bytes_requested as f64 / calls)
            }
        },
    }
}

/// One site's cost.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct SiteCost {
    /// Rank by total cost, from 1.
    pub rank: usize,
    /// `site_id` in the report.
    pub site_id: u64,
    /// First frame outside the allocator and std.
    pub name: String,
    /// Where that frame was reached from (see `naming::callers`).
    pub callers: String,
    /// For sites of the phase whose name and callers read the same: the first frame
    /// further out that tells them apart (`naming::distinctions_among`); empty
    /// otherwise.
    pub distinction: String,
    /// Category (first rule that claims the site).
    pub category: String,
    /// Allocations.
    pub alloc_count: u64,
    /// Reallocs.
    pub realloc_count: u64,
    /// Temporaries.
    pub temporary_count: u64,
    /// Seconds inside the allocator.
    pub direct_s: f64,
    /// Seconds of work that exists only because of the allocations (estimate).
    pub indirect_s: f64,
    /// What removing the site would save: direct plus indirect.
    pub total_s: f64,
    /// `total_s` over the phase's traced wall time, when known.
    pub phase_share: Option<f64>,
    /// How far sampling alone may put `alloc_count + realloc_count`, and so the
    /// costs, from the truth in a `sample:N` report (`RankedSite::alloc_count_noise`;
    /// the costs by as large a share); `None` in an exact one.
    pub alloc_count_noise: Option<u64>,
}

/// One category's cost.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct CategoryCost {
    /// Category name.
    pub category: String,
    /// Sites in it.
    pub sites: usize,
    /// Allocations (as a site's `alloc_count`).
    pub alloc_count: u64,
    /// Reallocs.
    pub realloc_count: u64,
    /// Seconds inside the allocator.
    pub direct_s: f64,
    /// Indirect seconds (estimate).
    pub indirect_s: f64,
    /// Direct plus indirect.
    pub total_s: f64,
    /// `total_s` over the phase's traced wall time, when known.
    pub phase_share: Option<f64>,
    /// As a site's [`SiteCost::alloc_count_noise`].
    pub alloc_count_noise: Option<u64>,
}

/// The cost model's answer for one report.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct CostReport {
    /// The phase priced (`None`: all).
    pub phase: Option<String>,
    /// The phase's wall time in the traced run (includes the tracer's overhead).
    pub phase_wall_s: Option<f64>,
    /// Direct seconds, all sites.
    pub direct_s: f64,
    /// Indirect seconds, all sites (estimate).
    pub indirect_s: f64,
    /// Direct plus indirect.
    pub total_s: f64,
    /// Where the report was taken (`host`, `cpu`).
    pub report_host: (String, String),
    /// Where the calibration was measured.
    pub calibration_host: (String, String),
    /// When it was measured (Unix seconds; 0 where it does not say): prices move
    /// with the machine's state then, so two calibrations of one machine differ.
    pub calibration_created_unix_s: u64,
    /// False when the calibration comes from another host or CPU: the figures then
    /// describe that machine's allocator, not the report's.
    pub host_matches: bool,
    /// Per category, rules in order, then the unmatched.
    pub categories: Vec<CategoryCost>,
    /// The costliest sites.
    pub sites: Vec<SiteCost>,
}

/// One site's price ([`per_site`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct Priced {
    /// What the site costs.
    pub cost: Nanos,
    /// Its category's index (rules in order, then the unmatched).
    pub category: usize,
    /// Whether its blocks came through Rust's growth path ([`grown`]).
    pub grown: bool,
    /// Its allocations and reallocs.
    pub calls: u64,
    /// The part of `cost` (in ns) in rows of the classes below those `sample:N`
    /// records whole (`SiteRow::below_whole`, in any mode): what the spread of a
    /// sampled report's cost comes from (`Report::sampled_part`).
    pub small_ns: f64,
    /// Those rows' allocations and reallocs.
    pub small_calls: u64,
}

/// Cost per site (all sites in `phase`, or only those in `only`); ordered by site
/// id, so that sums over it come out the same every time.
pub fn per_site(
    report: &Report,
    cal: &Calibration,
    rules: &[Category],
    phase: Option<&str>,
    only: Option<&HashSet<u64>>,
) -> BTreeMap<u64, Priced> {
    let op_ns: Vec<Indirect> = rules
        .iter()
        .map(|c| Indirect::of(c, cal))
        .chain([Indirect::None])
        .collect();
    let growth_ns = cal.operation(VEC_GROWTH).map_or(0.0, |o| o.ns);
    let lasting = Lasting::of(report, phase, only);
    let mut out: BTreeMap<u64, Priced> = BTreeMap::new();
    for row in report
        .rows(phase)
        .filter(|r| only.is_none_or(|o| o.contains(&r.site_id)))
    {
        let entry = out.entry(row.site_id).or_insert_with(|| {
            let frames = frames_of(&report.frames, row.site_id);
            Priced {
                category: categories::classify(rules, frames),
                grown: grown(frames),
                ..Priced::default()
            }
        });
        let mut n = row_cost(cal, row, op_ns[entry.category], lasting.share(row));
        if entry.grown {
            n.direct += row.calls() as f64 * growth_ns;
        }
        entry.calls = entry.calls.saturating_add(row.calls());
        if row.below_whole() {
            entry.small_ns += n.total();
            entry.small_calls = entry.small_calls.saturating_add(row.calls());
        }
        entry.cost.add(n);
    }
    out
}

/// True when the stack passes through Rust's vector growth (`finish_grow`, which
/// `grow_one`, `reserve` and friends all reach): the allocation paid that path's
/// bookkeeping on top of the allocator's pair.
pub fn grown(frames: &[crate::report::FrameRow]) -> bool {
    // A substring test: no allocation per frame, which matters at a million sites.
    frames.iter().any(|f| f.function.contains("finish_grow"))
}

fn share(s: f64, wall: Option<f64>) -> Option<f64> {
    wall.filter(|w| *w > 0.0).map(|w| s / w)
}

/// Prices `report` (within `phase`, if given); keeps the `limit` costliest sites.
pub fn estimate(
    report: &Report,
    cal: &Calibration,
    rules: &[Category],
    phase: Option<&str>,
    limit: usize,
) -> CostReport {
    let wall = report.wall_s(phase);
    let costs = per_site(report, cal, rules, phase, None);
    let mut counts: HashMap<u64, (u64, u64, u64)> = HashMap::new();
    for row in report.rows(phase) {
        let c = counts.entry(row.site_id).or_default();
        c.0 = c.0.saturating_add(row.alloc_count);
        c.1 = c.1.saturating_add(row.realloc_count);
        c.2 = c.2.saturating_add(row.temporary_count);
    }
    // Per category: sites, allocations, reallocs, sampled allocations and reallocs,
    // cost.
    let mut cats: Vec<(usize, u64, u64, u64, Nanos)> =
        vec![(0, 0, 0, 0, Nanos::default()); rules.len() + 1];
    let mut all = Nanos::default();
    for (site, p) in &costs {
        let (a, r, _) = counts[site];
        let c = &mut cats[p.category];
        c.0 += 1;
        c.1 = c.1.saturating_add(a);
        c.2 = c.2.saturating_add(r);
        c.3 =
            c.3.saturating_add(report.sampled_part(p.calls, p.small_calls));
        c.4.add(p.cost);
        all.add(p.cost);
    }
    let mut ranked: Vec<(&u64, &Priced)> = costs.iter().collect();
    ranked.sort_by(|a, b| {
        b.1.cost
            .total()
            .total_cmp(&a.1.cost.total())
            .then(a.0.cmp(b.0))
    });
    let listed: Vec<_> = ranked.into_iter().take(limit).collect();
    // Told apart among every site of the phase, as `top` and the export do.
    let shown: Vec<u64> = listed.iter().map(|(site_id, _)| **site_id).collect();
    let distinctions = crate::rank::distinctions_among_sites(
        report,
        &crate::rank::site_ids(report, phase),
        &shown,
    );
    let stacks: Vec<_> = shown
        .iter()
        .map(|&s| frames_of(&report.frames, s))
        .collect();
    let sites = listed
        .into_iter()
        .zip(&stacks)
        .zip(distinctions)
        .enumerate()
        .map(|(i, (((&site_id, p), frames), distinction))| {
            let (n, cat) = (p.cost, p.category);
            let (alloc_count, realloc_count, temporary_count) = counts[&site_id];
            SiteCost {
                rank: i + 1,
                site_id,
                name: naming::site_name(frames),
                callers: naming::callers(frames, crate::rank::CALLERS),
                distinction,
                category: categories::category_name(rules, cat).to_owned(),
                alloc_count,
                realloc_count,
                temporary_count,
                alloc_count_noise: report
                    .count_or_none_noise(report.sampled_part(p.calls, p.small_calls)),
                direct_s: n.direct * 1e-9,
                indirect_s: n.indirect() * 1e-9,
                total_s: n.total() * 1e-9,
                phase_share: share(n.total() * 1e-9, wall),
            }
        })
        .collect();
    let (report_host, calibration_host) = (report.host(), (cal.host.clone(), cal.cpu.clone()));
    CostReport {
        phase: phase.map(str::to_owned),
        phase_wall_s: wall,
        direct_s: all.direct * 1e-9,
        indirect_s: all.indirect() * 1e-9,
        total_s: all.total() * 1e-9,
        host_matches: report_host == calibration_host,
        report_host,
        calibration_host,
        calibration_created_unix_s: cal.created_unix_s,
        categories: cats
            .into_iter()
            .enumerate()
            .map(
                |(i, (sites, alloc_count, realloc_count, sampled, n))| CategoryCost {
                    category: categories::category_name(rules, i).to_owned(),
                    sites,
                    alloc_count,
                    realloc_count,
                    alloc_count_noise: report.count_or_none_noise(sampled),
                    direct_s: n.direct * 1e-9,
                    indirect_s: n.indirect() * 1e-9,
                    total_s: n.total() * 1e-9,
                    phase_share: share(n.total() * 1e-9, wall),
                },
            )
            .collect(),
        sites,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cal() -> Calibration {
        crate::calibrate::test_calibration()
    }

    fn row(allocs: u64, reallocs: u64, temps: u64) -> SiteRow {
        SiteRow {
            site_id: 1,
            phase: "p".into(),
            size_class_bytes: 160,
            alloc_count: allocs,
            realloc_count: reallocs,
            bytes_requested: 0,
            bytes_allocated: 0,
            temporary_count: temps,
            lifetime_ns_median: None,
            followed_freed_count: 0,
            followed_count: 0,
        }
    }

    #[test]
    fn sites_allocated_through_vec_growth_pay_for_it() {
        use crate::report::FrameRow;
        let frame = |site_id, function: &str, frame_index| FrameRow {
            site_id,
            frame_index,
            stack_index: frame_index,
            ..FrameRow::test(function, "/src/x.rs", Some(1))
        };
        let report = Report {
            dir: "r".into(),
            manifest: alloc_tracer_format::manifest::Manifest {
                duration_s: 1.0,
                ..Default::default()
            },
            sites: vec![
                row(10, 2, 4),
                SiteRow {
                    site_id: 2,
                    ..row(10, 2, 4)
                },
            ],
            frames: vec![
                frame(1, "alloc::raw_vec::finish_grow<alloc::alloc::Global>", 0),
                frame(1, "lc", 1),
                frame(2, "lc", 0),
            ],
            phases: Vec::new(),
            lifetimes: Vec::new(),
        };
        let mut c = cal();
        let direct =
            |c: &Calibration, site| per_site(&report, c, &[], None, None)[&site].cost.direct;
        // 12 blocks (10 allocations, 2 reallocs) through the growth path at 3 ns.
        assert_eq!(direct(&c, 1) - direct(&c, 2), 12.0 * 3.0);
        c.operations.retain(|o| o.name != VEC_GROWTH);
        assert_eq!(direct(&c, 1), direct(&c, 2));
    }

    #[test]
    fn rows_are_priced_by_pattern() {
        let c = cal();
        // 10 temporaries at 5 ns, 90 short-lived at 10 ns.
        assert_eq!(
            row_cost(&c, &row(100, 0, 10), Indirect::None, 0.0).direct,
            950.0
        );
        // Long-lived: scattered.
        assert_eq!(
            row_cost(&c, &row(100, 0, 0), Indirect::None, 1.0).direct,
            4000.0
        );
        // A quarter long-lived: 25 at 40 ns, 75 at 10 ns.
        assert_eq!(
            row_cost(&c, &row(100, 0, 0), Indirect::None, 0.25).direct,
            1750.0
        );
        // Temporaries never: at most the other 90 are scattered.
        assert_eq!(
            row_cost(&c, &row(100, 0, 10), Indirect::None, 1.0).direct,
            50.0 + 3600.0
        );
        // Reallocs: batch cost plus half a block copied at 8 bytes/ns.
        let n = row_cost(&c, &row(0, 4, 0), Indirect::None, 1.0);
        assert_eq!((n.direct, n.copies), (40.0, 4.0 * 80.0 / 8.0));
        // Operation cost per allocation, kept apart.
        let n = row_cost(&c, &row(10, 0, 10), Indirect::PerAllocation(7.0), 0.0);
        assert_eq!((n.direct, n.operation, n.total()), (50.0, 70.0, 120.0));
        // Copies: the requested bytes at 8 bytes/ns.
        let mut r = row(10, 0, 10);
        r.bytes_requested = 800;
        assert_eq!(row_cost(&c, &r, Indirect::Copy, 0.0).operation, 100.0);
        // A realloc row of a copy category is no clone: only its realloc copy.
        let mut r = row(0, 4, 0);
        r.bytes_requested = 800;
        let n = row_cost(&c, &r, Indirect::Copy, 0.0);
        assert_eq!((n.copies, n.operation), (4.0 * 80.0 / 8.0, 0.0));
    }
}
