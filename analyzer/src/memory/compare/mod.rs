//! `peak --base` and `leaks --base`: what holds memory at one moment in two reports
//! (a baseline and a changed build), categories and sites side by side, by how much
//! their estimated live bytes changed. Sites are matched as `diff` matches them
//! ([`crate::matching`]), then what is left by the frame that names them: a vector
//! grown by doubling is charged to whichever caller grew it last. Heap sampling's
//! estimates carry an error, so every change comes with its standard error, and a
//! change within two of them is marked as one sampling alone could make. Each side's
//! error is taken at the larger of the two estimates (`variances`): a report that
//! sampled no block at a site has no error of its own there, yet sampling alone may
//! be why it has none.

pub mod render;

use super::{Held, HeldSite};
use crate::matching::{LOOSE_PREFIX, Matched, pair_leftovers, pair_up};

/// The prefix of keys matched by their naming frame alone (see [`compare`]).
const NAME_PREFIX: &str = "(name only)\n";
use crate::naming::{self, job_frames, loose_key, stack_key};
use crate::rank::frames_of;
use crate::report::Report;
use std::collections::BTreeMap;

/// One report's figures at the moment.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct HeldSide {
    /// Exact live bytes then (see [`Held::live_bytes`]).
    pub live_bytes: Option<i64>,
    /// The run's highest live bytes (the peak only).
    pub run_peak_live_bytes: Option<i64>,
    /// Resident memory at the moment (see [`Held::rss_bytes`]; 0: unknown).
    pub rss_bytes: u64,
    /// The process's peak resident set size over the run (0: unknown).
    pub max_rss_bytes: u64,
    /// When the kept peak was, in seconds after tracing started.
    pub time_s: Option<f64>,
    /// Its phase.
    pub phase: Option<String>,
    /// Heap sampling's interval (0: off).
    pub heap_interval: u64,
    /// What the estimates add up to (in the phase asked for).
    pub estimated_bytes: u64,
    /// The same over every phase: 0 when no sampled block was live then at all.
    pub estimated_bytes_all_phases: u64,
    /// Their standard error (0 where unknown: an interval of 0, heap sampling
    /// stopped before the report).
    pub estimated_bytes_se: u64,
    /// The share of `estimated_bytes` in sites the other report has too (matched by
    /// stack or with lines ignored); 0 where it estimates nothing.
    pub matched_share: f64,
    /// The share more paired by naming frame alone (`name only` rows).
    pub name_only_share: f64,
}

impl From<&Held> for HeldSide {
    fn from(h: &Held) -> Self {
        HeldSide {
            live_bytes: h.live_bytes,
            run_peak_live_bytes: h.run_peak_live_bytes,
            rss_bytes: h.rss_bytes,
            max_rss_bytes: h.max_rss_bytes,
            time_s: h.time_s,
            phase: h.phase.clone(),
            heap_interval: h.heap_interval,
            estimated_bytes: h.estimated_bytes,
            estimated_bytes_all_phases: h.estimated_bytes_all_phases,
            estimated_bytes_se: h.estimated_bytes_se,
            matched_share: 0.0,
            name_only_share: 0.0,
        }
    }
}

/// A change in estimated live bytes, with its standard error.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct Change {
    /// In the baseline.
    pub base_bytes: u64,
    /// In the changed build.
    pub change_bytes: u64,
    /// `change_bytes - base_bytes`.
    pub delta_bytes: i64,
    /// Its standard error: the two sides' errors combined (independent samples); 0
    /// where unknown (heap sampling stopped before a report was written).
    pub delta_se: u64,
    /// The change is under two standard errors: sampling alone could make it (false
    /// where the error is unknown).
    pub within_noise: bool,
}

impl Change {
    fn new(base: u64, change: u64, base_variance: f64, change_variance: f64) -> Change {
        let delta_bytes = crate::diff::delta(base, change);
        let se = (base_variance + change_variance).sqrt();
        Change {
            base_bytes: base,
            change_bytes: change,
            delta_bytes,
            delta_se: se.round() as u64,
            within_noise: (delta_bytes.unsigned_abs() as f64) < 2.0 * se,
        }
    }

    /// The same change with its error unknown: a side's heap sampling stopped before
    /// its report, whose interval then reads 0, and the other side's error alone
    /// would understate the change's.
    fn error_unknown(self) -> Change {
        Change {
            delta_se: 0,
            within_noise: false,
            ..self
        }
    }
}

/// A category's live bytes in both reports.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct CategoryChange {
    /// Category name.
    pub category: String,
    /// Its live bytes in each report.
    #[serde(flatten)]
    pub change: Change,
}

/// A site's live bytes in both reports (the sites under one key summed on each side).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct SiteChange {
    /// Rank, from 1, by the size of the change.
    pub rank: usize,
    /// The site's name (from the changed build where it has the site).
    pub name: String,
    /// Where that frame was reached from.
    pub callers: String,
    /// For rows whose name and callers read the same (listed or not): the frame
    /// further out that tells them apart.
    pub distinction: String,
    /// The first category whose rules claim it.
    pub category: String,
    /// How the two sides were matched: `stack`, `lines ignored`, `name only` (the
    /// naming frame, callers aside), `base only` or `change only`.
    pub matched: String,
    /// Its live bytes in each report.
    #[serde(flatten)]
    pub change: Change,
}

/// What holds memory at one moment in a baseline and a changed build.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct HeldChange {
    /// `peak` or `end`.
    pub moment: String,
    /// The phase whose blocks are compared (`--phase`); `None`, every phase's.
    pub blocks_of_phase: Option<String>,
    /// The baseline's figures.
    pub base: HeldSide,
    /// The changed build's.
    pub change: HeldSide,
    /// What the estimates add up to in each, and the change.
    pub estimated: Change,
    /// Categories, by the size of their change.
    pub categories: Vec<CategoryChange>,
    /// Sites, by the size of their change, the `limit` largest.
    pub sites: Vec<SiteChange>,
    /// Sites left out by the limit, and the change they add up to.
    pub more_sites: usize,
    /// The change the sites left out add up to.
    pub more_delta_bytes: i64,
}

impl HeldChange {
    /// Whether the changes' errors are known: both reports carry their heap sampling's
    /// interval (0 where sampling stopped before the report was written, or was off).
    pub fn error_known(&self) -> bool {
        self.base.heap_interval > 0 && self.change.heap_interval > 0
    }
}

/// The sites of one side under one key.
#[derive(Default, Clone)]
struct Acc {
    estimate: Estimate,
    /// The largest site's id, name, callers and category name the row.
    lead_bytes: u64,
    site_id: u64,
    name: String,
    callers: String,
    category: String,
    loose: String,
}

impl Matched for Acc {
    fn loose(&self) -> &str {
        &self.loose
    }

    fn merge(&mut self, o: &Acc) {
        if o.lead_bytes > self.lead_bytes || self.name.is_empty() {
            self.lead_bytes = o.lead_bytes;
            self.site_id = o.site_id;
            self.name.clone_from(&o.name);
            self.callers.clone_from(&o.callers);
            self.category.clone_from(&o.category);
            self.loose.clone_from(&o.loose);
        }
        self.estimate.add(&o.estimate);
    }
}

/// One side's estimate of what a key's sites or a category's hold: their bytes, the
/// variance their own sampled blocks give, and their bytes and blocks per size class.
#[derive(Default, Clone)]
struct Estimate {
    bytes: u64,
    variance: f64,
    classes: BTreeMap<u64, (u64, u64)>,
}

impl Estimate {
    fn of(s: &HeldSite) -> Estimate {
        Estimate {
            bytes: s.live_bytes,
            variance: (s.live_bytes_se as f64).powi(2),
            classes: s.classes.clone(),
        }
    }

    fn add(&mut self, o: &Estimate) {
        self.bytes = self.bytes.saturating_add(o.bytes);
        self.variance += o.variance;
        for (class, (bytes, blocks)) in &o.classes {
            let c = self.classes.entry(*class).or_default();
            c.0 = c.0.saturating_add(*bytes);
            c.1 = c.1.saturating_add(*blocks);
        }
    }
}

fn by_key(report: &Report, sites: &[HeldSite]) -> BTreeMap<String, Acc> {
    let mut out: BTreeMap<String, Acc> = BTreeMap::new();
    for s in sites {
        let frames = job_frames(frames_of(&report.frames, s.site_id));
        let one = Acc {
            estimate: Estimate::of(s),
            lead_bytes: s.live_bytes,
            site_id: s.site_id,
            name: s.name.clone(),
            // As `diff` names a job's sites: its own callers, not one stack's way
            // through the pool.
            callers: naming::callers(&frames, naming::CALLERS),
            category: s.category.clone(),
            loose: loose_key(&frames),
        };
        out.entry(stack_key(&frames)).or_default().merge(&one);
    }
    out
}

/// The variances of two sides' estimates of one thing (a key's sites, a category):
/// each side's own ([`super::HeldSite::live_bytes_se`]), or, where larger, what its
/// interval gives, size class by size class, the larger side's bytes there in that
/// side's mean block of the class ([`super::variance_of`]). A report that sampled
/// none of a site's blocks has no variance of its own there, so without this a site
/// the sparser sampling missed read as a change beyond noise; class by class, so
/// that a block far larger than the interval (sampled almost surely) does not lend
/// its size to the small blocks beside it.
fn variances(x: Option<&Estimate>, y: Option<&Estimate>, intervals: [u64; 2]) -> [f64; 2] {
    let none = Estimate::default();
    let (x, y) = (x.unwrap_or(&none), y.unwrap_or(&none));
    let mut floor = [0.0; 2];
    for class in x
        .classes
        .keys()
        .chain(y.classes.keys().filter(|c| !x.classes.contains_key(c)))
    {
        let a = x.classes.get(class).copied().unwrap_or_default();
        let b = y.classes.get(class).copied().unwrap_or_default();
        let (bytes, blocks) = if b.0 > a.0 { b } else { a };
        if blocks == 0 {
            continue;
        }
        let block = bytes as f64 / blocks as f64;
        for (f, interval) in floor.iter_mut().zip(intervals) {
            *f += super::variance_of(bytes as f64, block, interval);
        }
    }
    [x.variance.max(floor[0]), y.variance.max(floor[1])]
}

/// Compares what holds memory in `base` and `change` (each [`super::held`] at the same
/// moment and phase, with every site: no limit), keeping the `limit` sites whose
/// live bytes changed most.
pub fn compare(
    base_report: &Report,
    base: &Held,
    change_report: &Report,
    change: &Held,
    limit: usize,
) -> HeldChange {
    let (mut a, mut b, _) = pair_up(
        by_key(base_report, &base.sites),
        by_key(change_report, &change.sites),
    );
    // Live memory is charged to the stack of the allocation that made the block:
    // for a vector grown by doubling, the push that last grew it, which a patch
    // reordering the gadgets moves to another caller with no byte changed. What is
    // left unmatched pairs by the naming frame alone (`alloc (mod.rs:110)`).
    let matched_share = |side: &BTreeMap<String, Acc>, other: &BTreeMap<String, Acc>| {
        let all: u64 = side.values().map(|s| s.estimate.bytes).sum();
        let matched: u64 = side
            .iter()
            .filter(|(k, _)| other.contains_key(*k))
            .map(|(_, s)| s.estimate.bytes)
            .sum();
        // Nothing estimated matches nothing, as `diff`'s shares of no allocations.
        if all > 0 {
            matched as f64 / all as f64
        } else {
            0.0
        }
    };
    // What matched by stack before the pass by name: a naming frame such as
    // `alloc (mod.rs:110)` spans gadgets and categories, so rows paired by it alone
    // say less.
    let (base_matched, change_matched) = (matched_share(&a, &b), matched_share(&b, &a));
    pair_leftovers(&mut a, &mut b, NAME_PREFIX, |s| s.name.clone());
    let by_name = (
        matched_share(&a, &b) - base_matched,
        matched_share(&b, &a) - change_matched,
    );
    let intervals = [base.heap_interval, change.heap_interval];
    // Each side's variance in all: the sum of its keys'.
    let mut variance = [0.0; 2];
    let mut sites: Vec<(SiteChange, Option<(u64, bool)>)> = a
        .keys()
        .chain(b.keys().filter(|k| !a.contains_key(*k)))
        .map(|key| {
            let (x, y) = (a.get(key), b.get(key));
            let v = variances(x.map(|s| &s.estimate), y.map(|s| &s.estimate), intervals);
            variance[0] += v[0];
            variance[1] += v[1];
            let named = y.or(x).expect("a key of either side");
            let matched = match (x, y) {
                (Some(_), Some(_)) if key.starts_with(LOOSE_PREFIX) => "lines ignored",
                (Some(_), Some(_)) if key.starts_with(NAME_PREFIX) => "name only",
                (Some(_), Some(_)) => "stack",
                (Some(_), None) => "base only",
                _ => "change only",
            };
            let site = SiteChange {
                rank: 0,
                name: named.name.clone(),
                callers: named.callers.clone(),
                distinction: String::new(),
                category: named.category.clone(),
                matched: matched.to_owned(),
                change: Change::new(
                    x.map_or(0, |s| s.estimate.bytes),
                    y.map_or(0, |s| s.estimate.bytes),
                    v[0],
                    v[1],
                ),
            };
            // The stack that names the row, for telling rows apart.
            let stack = y
                .map(|s| (s.site_id, true))
                .or(x.map(|s| (s.site_id, false)));
            (site, stack)
        })
        .collect();
    sites.sort_by(|(p, _), (q, _)| {
        q.change
            .delta_bytes
            .unsigned_abs()
            .cmp(&p.change.delta_bytes.unsigned_abs())
            .then(p.name.cmp(&q.name))
            .then(p.callers.cmp(&q.callers))
    });
    let more_sites = sites.len().saturating_sub(limit);
    let more_delta_bytes = sites
        .iter()
        .skip(limit)
        .map(|(s, _)| s.change.delta_bytes)
        .fold(0i64, i64::saturating_add);
    // Every row's stack, so that the rows listed are told apart among them all and
    // read the same whatever `--limit` lists.
    let stacks: Vec<_> = sites
        .iter()
        .map(|(_, stack)| match stack {
            Some((id, true)) => job_frames(frames_of(&change_report.frames, *id)),
            Some((id, false)) => job_frames(frames_of(&base_report.frames, *id)),
            None => job_frames(&[]),
        })
        .collect();
    let stacks: Vec<&[crate::report::FrameRow]> = stacks.iter().map(|s| &**s).collect();
    sites.truncate(limit);
    let shown: Vec<usize> = (0..sites.len()).collect();
    let distinctions = naming::distinctions_among(&stacks, &shown);
    let sites: Vec<SiteChange> = sites
        .into_iter()
        .zip(distinctions)
        .enumerate()
        .map(|(i, ((mut s, _), d))| {
            s.rank = i + 1;
            s.distinction = d;
            s
        })
        .collect();
    let mut held = HeldChange {
        moment: change.moment.clone(),
        blocks_of_phase: change.blocks_of_phase.clone(),
        base: HeldSide {
            matched_share: base_matched,
            name_only_share: by_name.0,
            ..HeldSide::from(base)
        },
        change: HeldSide {
            matched_share: change_matched,
            name_only_share: by_name.1,
            ..HeldSide::from(change)
        },
        estimated: Change::new(
            base.estimated_bytes,
            change.estimated_bytes,
            variance[0].max((base.estimated_bytes_se as f64).powi(2)),
            variance[1].max((change.estimated_bytes_se as f64).powi(2)),
        ),
        categories: categories(base, change),
        sites,
        more_sites,
        more_delta_bytes,
    };
    if !held.error_known() {
        held.estimated = held.estimated.error_unknown();
        for c in &mut held.categories {
            c.change = std::mem::take(&mut c.change).error_unknown();
        }
        for s in &mut held.sites {
            s.change = std::mem::take(&mut s.change).error_unknown();
        }
    }
    held
}

/// Categories of either side, by the size of their change; each side's estimate of a
/// category is its sites' (by each site's own category), and their variances are
/// taken as [`variances`] takes a key's.
fn categories(base: &Held, change: &Held) -> Vec<CategoryChange> {
    let mut totals: BTreeMap<&str, [Option<Estimate>; 2]> = BTreeMap::new();
    for (side, held) in [base, change].into_iter().enumerate() {
        for s in &held.sites {
            let t = &mut totals.entry(s.category.as_str()).or_default()[side];
            t.get_or_insert_with(Estimate::default)
                .add(&Estimate::of(s));
        }
    }
    let intervals = [base.heap_interval, change.heap_interval];
    let mut out: Vec<CategoryChange> = totals
        .into_iter()
        .map(|(category, [a, b])| {
            let [va, vb] = variances(a.as_ref(), b.as_ref(), intervals);
            let bytes = |e: &Option<Estimate>| e.as_ref().map_or(0, |e| e.bytes);
            CategoryChange {
                category: category.to_owned(),
                change: Change::new(bytes(&a), bytes(&b), va, vb),
            }
        })
        .collect();
    out.sort_by(|p, q| {
        q.change
            .delta_bytes
            .unsigned_abs()
            .cmp(&p.change.delta_bytes.unsigned_abs())
            .then(p.category.cmp(&q.category))
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::FrameRow;

    /// A report whose sites have one frame each (`function`, `file`, `line`), and
    /// what `held` would say of them (live bytes, their standard error, category).
    fn side(sites: &[(&str, u32, u64, u64, &str)]) -> (Report, Held) {
        let mut r = Report::default();
        let mut h = Held::default();
        for (id, (function, line, bytes, se, category)) in sites.iter().enumerate() {
            let site_id = 10 * id as u64 + 7;
            r.frames.push(FrameRow {
                site_id,
                ..FrameRow::test(function, "/r/gadget-1.0.0/src/lib.rs", Some(*line))
            });
            h.sites.push(HeldSite {
                site_id,
                name: format!("{function} (lib.rs:{line})"),
                category: (*category).into(),
                live_bytes: *bytes,
                live_bytes_se: *se,
                ..HeldSite::default()
            });
        }
        h.estimated_bytes = h.sites.iter().map(|s| s.live_bytes).sum();
        h.estimated_bytes_all_phases = h.estimated_bytes;
        h.heap_interval = 1 << 20;
        (r, h)
    }

    #[test]
    fn sites_match_as_diff_matches_them_and_rank_by_their_change() {
        // `keep` is unchanged; `grow` grows 3 MiB; `moved` moved from line 20 to 21
        // and shrank 1 MiB; `gone` leaves 2 MiB; `new` brings 64 KiB.
        let (ra, a) = side(&[
            ("keep", 1, 8 << 20, 0, "vectors"),
            ("grow", 2, 1 << 20, 0, "vectors"),
            ("moved", 20, 2 << 20, 0, "other"),
            ("gone", 3, 2 << 20, 0, "other"),
        ]);
        let (rb, b) = side(&[
            ("keep", 1, 8 << 20, 0, "vectors"),
            ("grow", 2, 4 << 20, 0, "vectors"),
            ("moved", 21, 1 << 20, 0, "other"),
            ("new", 4, 64 << 10, 0, "other"),
        ]);
        let c = compare(&ra, &a, &rb, &b, 3);
        let rows: Vec<(&str, i64, &str)> = c
            .sites
            .iter()
            .map(|s| (s.name.as_str(), s.change.delta_bytes, s.matched.as_str()))
            .collect();
        assert_eq!(
            rows,
            [
                ("grow (lib.rs:2)", 3 << 20, "stack"),
                ("gone (lib.rs:3)", -(2 << 20), "base only"),
                ("moved (lib.rs:21)", -(1 << 20), "lines ignored"),
            ]
        );
        assert_eq!(
            c.sites.iter().map(|s| s.rank).collect::<Vec<_>>(),
            [1, 2, 3]
        );
        // Left out: `new` (+64 KiB) and `keep` (0).
        assert_eq!((c.more_sites, c.more_delta_bytes), (2, 64 << 10));
        let cats: Vec<(&str, i64)> = c
            .categories
            .iter()
            .map(|k| (k.category.as_str(), k.change.delta_bytes))
            .collect();
        assert_eq!(
            cats,
            [("vectors", 3 << 20), ("other", -(3 << 20) + (64 << 10))]
        );
        assert_eq!(
            c.estimated.delta_bytes,
            b.estimated_bytes as i64 - a.estimated_bytes as i64
        );
        // Matched: all but `gone` of the base's 13 MiB; all but `new` of the change's.
        assert!((c.base.matched_share - 11.0 / 13.0).abs() < 1e-12);
        assert!((c.change.matched_share - 13.0 / 13.0625).abs() < 1e-12);
    }

    #[test]
    fn what_is_left_pairs_by_the_naming_frame() {
        // One vector, grown last from another caller in the change.
        let side = |caller: &str| {
            let mut r = Report::default();
            for (i, (function, file, line)) in [
                (
                    "alloc<S>",
                    "/r/bellperson-0.27.0/src/groth16/prover/mod.rs",
                    110,
                ),
                (caller, "/r/bellperson-0.27.0/src/gadgets/multieq.rs", 83),
            ]
            .into_iter()
            .enumerate()
            {
                r.frames.push(FrameRow {
                    site_id: 7,
                    frame_index: i as u32,
                    stack_index: i as u32,
                    ..FrameRow::test(function, file, Some(line))
                });
            }
            let h = Held {
                sites: vec![HeldSite {
                    site_id: 7,
                    name: "alloc (mod.rs:110)".into(),
                    live_bytes: 4 << 20,
                    ..HeldSite::default()
                }],
                ..Held::default()
            };
            (r, h)
        };
        let ((ra, a), (rb, b)) = (side("enforce<S>"), side("xor_vars<S>"));
        let c = compare(&ra, &a, &rb, &b, 10);
        assert_eq!(c.sites.len(), 1);
        assert_eq!(c.sites[0].matched, "name only");
        assert_eq!(c.sites[0].change.delta_bytes, 0);
        assert_eq!((c.base.matched_share, c.base.name_only_share), (0.0, 1.0));
    }

    #[test]
    fn a_side_that_estimates_nothing_matches_nothing() {
        let (ra, a) = side(&[]);
        let (rb, b) = side(&[("f", 1, 5 << 20, 3 << 20, "x")]);
        let c = compare(&ra, &a, &rb, &b, 10);
        assert_eq!(c.base.matched_share, 0.0);
        assert_eq!(c.change.matched_share, 0.0);
    }

    #[test]
    fn the_sides_errors_combine() {
        let (ra, a) = side(&[("f", 1, 5 << 20, 3 << 20, "x")]);
        let (rb, b) = side(&[("f", 1, 9 << 20, 4 << 20, "x")]);
        let c = compare(&ra, &a, &rb, &b, 10);
        assert_eq!(c.sites[0].change.delta_se, 5 << 20);
        assert!(c.sites[0].change.within_noise);
        assert_eq!(c.categories[0].change.delta_se, 5 << 20);
    }

    #[test]
    fn a_side_whose_sampling_stopped_leaves_every_error_unknown() {
        let (ra, a) = side(&[("f", 1, 5 << 20, 3 << 20, "x")]);
        let (rb, mut b) = side(&[("f", 1, 6 << 20, 4 << 20, "x")]);
        let within = compare(&ra, &a, &rb, &b, 10);
        assert!(within.error_known() && within.sites[0].change.within_noise);
        // The interval reads 0: the base's error alone would understate the change's.
        b.heap_interval = 0;
        let c = compare(&ra, &a, &rb, &b, 10);
        assert!(!c.error_known());
        let changes = [&c.estimated, &c.categories[0].change, &c.sites[0].change];
        for change in changes {
            assert_eq!(
                (change.delta_se, change.within_noise),
                (0, false),
                "{change:?}"
            );
            assert_eq!(change.delta_bytes, 1 << 20);
        }
        let mut out = Vec::new();
        render::held_change(&mut out, &c, crate::render::Format::Table).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("(+1.0 MiB, ± ?)"), "{text}");
        assert!(!text.contains('~'), "{text}");
    }

    #[test]
    fn a_site_the_sparser_sampling_missed_is_within_its_noise() {
        // 1 MiB live in 64-byte blocks: every block sampled in the change (an
        // interval of 1), none in the base (1 MiB): about 1 MiB of error there.
        let (ra, mut a) = side(&[("kept", 1, 8 << 20, 0, "x")]);
        let (rb, mut b) = side(&[
            ("kept", 1, 8 << 20, 0, "x"),
            ("trackers", 2, 1 << 20, 0, "y"),
        ]);
        b.sites[1].classes = BTreeMap::from([(64, (1 << 20, (1 << 20) / 64))]);
        a.heap_interval = 1 << 20;
        b.heap_interval = 1;
        let c = compare(&ra, &a, &rb, &b, 10);
        let trackers = &c.sites[0];
        assert_eq!(trackers.matched, "change only");
        assert!(trackers.change.within_noise, "{trackers:?}");
        let se = trackers.change.delta_se as f64 / (1u64 << 20) as f64;
        assert!((se - 1.0).abs() < 0.01, "{se}");
        // The change's side is exact: the error is all the base's.
        let y = c.categories.iter().find(|k| k.category == "y").unwrap();
        assert_eq!(y.change.delta_se, trackers.change.delta_se);
        assert!(c.estimated.within_noise, "{:?}", c.estimated);
        // Both sides exact: the same change is real.
        a.heap_interval = 1;
        let c = compare(&ra, &a, &rb, &b, 10);
        assert!(!c.sites[0].change.within_noise);
        assert_eq!(c.sites[0].change.delta_se, 0);
    }

    #[test]
    fn a_missed_sites_error_is_taken_class_by_class() {
        // One 64 MiB block (sampled almost surely at 1 MiB) beside 1 MiB in 64-byte
        // blocks: the error the base could have had is the small blocks', about
        // 1 MiB, not that of 16,385 blocks of their mean size (about 8 MiB).
        let (ra, mut a) = side(&[("kept", 1, 8 << 20, 0, "x")]);
        let (rb, mut b) = side(&[
            ("kept", 1, 8 << 20, 0, "x"),
            ("mixed", 2, (64 << 20) + (1 << 20), 0, "y"),
        ]);
        b.sites[1].classes =
            BTreeMap::from([(64, (1 << 20, (1 << 20) / 64)), (64 << 20, (64 << 20, 1))]);
        a.heap_interval = 1 << 20;
        b.heap_interval = 1;
        let c = compare(&ra, &a, &rb, &b, 10);
        let se = c.sites[0].change.delta_se as f64 / (1u64 << 20) as f64;
        assert!((se - 1.0).abs() < 0.01, "{se}");
        assert!(!c.sites[0].change.within_noise, "{:?}", c.sites[0]);
    }

    #[test]
    fn a_category_takes_the_errors_of_its_own_sites() {
        // One naming frame, reached from other callers in each report: the rows pair
        // `name only`, led by the change's vector, and the trackers' 1 MiB of small
        // blocks rides in that row. Their category's error is still their own.
        let sites = |list: &[(u64, &str, u64, &str)]| {
            let mut r = Report::default();
            let mut h = Held {
                heap_interval: 1 << 20,
                ..Held::default()
            };
            for &(site_id, caller, bytes, category) in list {
                for (i, (function, line)) in [("alloc", 110), (caller, 9)].into_iter().enumerate() {
                    r.frames.push(FrameRow {
                        site_id,
                        frame_index: i as u32,
                        stack_index: i as u32,
                        ..FrameRow::test(function, "/r/gadget-1.0.0/src/lib.rs", Some(line))
                    });
                }
                let block = if category == "trackers" { 64 } else { bytes };
                h.sites.push(HeldSite {
                    site_id,
                    name: "alloc (lib.rs:110)".into(),
                    category: category.into(),
                    live_bytes: bytes,
                    classes: BTreeMap::from([(block, (bytes, bytes / block))]),
                    ..HeldSite::default()
                });
            }
            (r, h)
        };
        let (ra, a) = sites(&[(1, "first", 64 << 20, "vectors")]);
        let (rb, b) = sites(&[
            (1, "second", 64 << 20, "vectors"),
            (2, "third", 1 << 20, "trackers"),
        ]);
        let c = compare(&ra, &a, &rb, &b, 10);
        assert_eq!(c.sites.len(), 1);
        assert_eq!(c.sites[0].matched, "name only");
        let trackers = c
            .categories
            .iter()
            .find(|k| k.category == "trackers")
            .unwrap();
        assert_eq!(trackers.change.delta_bytes, 1 << 20);
        // About 1 MiB a side (the change's own sampled blocks, here none given, and
        // the base's as it could have sampled them): about 1.41 MiB together.
        let se = trackers.change.delta_se as f64 / (1u64 << 20) as f64;
        assert!((se - 2f64.sqrt()).abs() < 0.02, "{se}");
        assert!(trackers.change.within_noise, "{trackers:?}");
        // The vectors, blocks far above the interval, have next to no error.
        let vectors = c
            .categories
            .iter()
            .find(|k| k.category == "vectors")
            .unwrap();
        assert!(vectors.change.delta_se < 64 << 10, "{vectors:?}");
    }

    #[test]
    fn a_change_within_two_standard_errors_is_noise() {
        // Errors of 3 and 4 combine to 5.
        let c = Change::new(100, 109, 9.0, 16.0);
        assert_eq!((c.delta_bytes, c.delta_se, c.within_noise), (9, 5, true));
        let c = Change::new(100, 89, 9.0, 16.0);
        assert_eq!((c.delta_bytes, c.within_noise), (-11, false));
        // Exact estimates (an interval of 1): any change is real.
        assert!(!Change::new(100, 101, 0.0, 0.0).within_noise);
        assert!(Change::new(0, 0, 0.0, 0.0).delta_bytes == 0);
    }
}
