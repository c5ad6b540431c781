//! How long a report's blocks live, as the cost model prices them: a ramp from the
//! `batch` to the `scattered` pair cost by each followed block's lifetime, counted in
//! the allocations the program made meanwhile, and each row's share of long-lived
//! allocations estimated from its followed blocks.

use crate::report::{LifetimeRow, Report, SiteRow};
use std::collections::{HashMap, HashSet};

/// Blocks freed within this many of the program's allocations are priced as batch:
/// the `batch` pair's blocks live 64 allocations (the calibration allocates 64, then
/// frees them).
pub const BATCH_UNTIL_ALLOCS: f64 = 64.0;
/// Blocks that live this many allocations or more are priced as scattered.
pub const SCATTERED_FROM_ALLOCS: f64 = BATCH_UNTIL_ALLOCS * 100.0;

/// How many followed blocks the report's own share of long-lived blocks counts as in
/// each row's estimate ([`Lasting::share`]).
pub const PRIOR_BLOCKS: f64 = 16.0;

/// Which share of each row's allocations to price as scattered, estimated from the
/// blocks followed to their free: the mean [`scattered_weight`] of their lifetimes
/// (`lifetimes.parquet`, counted in allocations by [`ns_per_alloc`]), a block still
/// live at the report (or dropped when frees stopped being recorded) weighing 1.
///
/// A row is followed one block in 64 by default, so most rows have a handful of
/// followed blocks or none: their own share is mostly noise, and a share taken
/// alone would move a row between batch and scattered prices from one run to the
/// next. So each row's share is drawn towards the share of every followed block in
/// the rows priced (the same phase), as if [`PRIOR_BLOCKS`] more blocks had been
/// followed there: one followed block moves a row's share a seventeenth of the way
/// from the report's towards its own; a thousand keep about its own.
pub struct Lasting<'r> {
    long: HashMap<(u64, &'r str, u64), f64>,
    prior: f64,
}

impl<'r> Lasting<'r> {
    /// Reads the followed blocks of `report`'s rows in `phase` (all, when `None`),
    /// keeping each row's own share for the sites in `only` (all, when `None`): the
    /// report's share, which every row leans on, takes every row of the phase, and
    /// a `top` of 20 sites in a million need not keep the others' (nor a row's
    /// with no block live or long-lived, whose own share is 0).
    pub fn of(
        report: &'r Report,
        phase: Option<&'r str>,
        only: Option<&HashSet<u64>>,
    ) -> Lasting<'r> {
        // Summed in the report's order, so that the figures come out the same every
        // time (not in the map's).
        let (mut all_long, mut all) = (0.0, 0.0);
        let mut long: HashMap<(u64, &str, u64), f64> = HashMap::new();
        let kept = |site: u64| only.is_none_or(|o| o.contains(&site));
        let rate = ns_per_alloc(report);
        for l in report
            .lifetimes
            .iter()
            .filter(|l| phase.is_none_or(|p| l.phase == p))
        {
            // No time to count by: priced as batch, as before anything was followed.
            let n = rate.map_or(0.0, |r| long_in_bucket(l, r));
            if n > 0.0 {
                all_long += n;
            }
            if n > 0.0 && kept(l.site_id) {
                *long
                    .entry((l.site_id, l.phase.as_str(), l.size_class_bytes))
                    .or_default() += n;
            }
        }
        for row in report.rows(phase) {
            let unfreed = row.followed_count.saturating_sub(row.followed_freed_count) as f64;
            if unfreed > 0.0 && kept(row.site_id) {
                *long
                    .entry((row.site_id, row.phase.as_str(), row.size_class_bytes))
                    .or_default() += unfreed;
            }
            all_long += unfreed;
            all += row.followed_count as f64;
        }
        let prior = if all > 0.0 {
            (all_long / all).min(1.0)
        } else {
            0.0
        };
        Lasting { long, prior }
    }

    /// The mean weight of all followed blocks of the rows priced.
    pub fn prior(&self) -> f64 {
        self.prior
    }

    /// The share of `row`'s allocations to price as scattered.
    pub fn share(&self, row: &SiteRow) -> f64 {
        let long = self
            .long
            .get(&(row.site_id, row.phase.as_str(), row.size_class_bytes))
            .copied()
            .unwrap_or(0.0);
        let followed = row.followed_count as f64;
        ((long + PRIOR_BLOCKS * self.prior) / (followed + PRIOR_BLOCKS)).clamp(0.0, 1.0)
    }
}

/// How far a block that lived `allocs` of the program's allocations is priced as
/// scattered rather than batch: 0 up to [`BATCH_UNTIL_ALLOCS`], 1 from
/// [`SCATTERED_FROM_ALLOCS`], in between in proportion to the logarithm (a half at
/// 640). A ramp, not a step: blocks living about as long as a step's threshold would
/// change price from run to run, and a diff of two runs of one program would show
/// sites whose counts stayed but whose cost moved.
pub fn scattered_weight(allocs: f64) -> f64 {
    let (low, high) = (BATCH_UNTIL_ALLOCS, SCATTERED_FROM_ALLOCS);
    ((allocs.max(1.0).ln() - low.ln()) / (high.ln() - low.ln())).clamp(0.0, 1.0)
}

/// The scattered weight of a lifetime bucket's blocks, each taken at the bucket's
/// geometric middle (buckets are under 25 % wide), at `ns_per_alloc` nanoseconds
/// between the program's allocations.
fn long_in_bucket(l: &LifetimeRow, ns_per_alloc: f64) -> f64 {
    let middle = ((l.low_ns.max(1) as f64) * (l.high_ns.max(1) as f64)).sqrt();
    l.freed_count as f64 * scattered_weight(middle / ns_per_alloc)
}

/// Nanoseconds between two of the program's allocations (and reallocs), from the
/// traced run's time: its duration over its allocations and reallocs. Lifetimes in
/// the report are nanoseconds, which stretch with the machine's speed and the
/// tracer's overhead; divided by this, they are counted in allocations, which do
/// not: a run on a machine uniformly slower prices its blocks as a quicker run's.
/// The whole run's rate, not a phase's: a phase's wall time holds the phases nested
/// in it, whose allocations its counts do not (the mirror prover's `enforce` inside
/// `synthesize` made that rate three times the run's). `None`: no time or no
/// allocations at all.
pub fn ns_per_alloc(report: &Report) -> Option<f64> {
    let calls = report.calls(None);
    let s = report.manifest.duration_s;
    (s > 0.0 && calls > 0).then(|| s * 1e9 / calls as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(allocs: u64) -> SiteRow {
        SiteRow {
            site_id: 1,
            phase: "p".into(),
            size_class_bytes: 160,
            alloc_count: allocs,
            realloc_count: 0,
            bytes_requested: 0,
            bytes_allocated: 0,
            temporary_count: 0,
            lifetime_ns_median: None,
            followed_freed_count: 0,
            followed_count: 0,
        }
    }

    fn bucket(site_id: u64, low_ns: u64, high_ns: u64, freed_count: u64) -> LifetimeRow {
        LifetimeRow {
            site_id,
            phase: "p".into(),
            size_class_bytes: 160,
            low_ns,
            high_ns,
            freed_count,
        }
    }

    #[test]
    fn lifetimes_ramp_from_batch_to_scattered() {
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
        for (allocs, w) in [
            (0.0, 0.0),
            (10.0, 0.0),
            (64.0, 0.0),
            (640.0, 0.5),
            (64.0 * 10f64.powf(0.5), 0.25),
            (6400.0, 1.0),
            (1e9, 1.0),
        ] {
            assert!(
                close(scattered_weight(allocs), w),
                "{allocs}: {}",
                scattered_weight(allocs)
            );
        }
        // Lifetimes 6 % apart are priced about a hundredth of the step apart.
        assert!((scattered_weight(660.0) - scattered_weight(620.0)).abs() < 0.015);
    }

    /// Phase `p`: 1 s (times `slower`) and 10 M allocations, 100 ns apart.
    fn phase_p(slower: u64) -> crate::report::PhaseRow {
        crate::report::PhaseRow {
            phase: "p".into(),
            wall_ns: 1_000_000_000 * slower,
            entry_count: 1,
            alloc_count: 9_000_000,
            realloc_count: 1_000_000,
            ..Default::default()
        }
    }

    fn followed(site_id: u64, followed_count: u64, followed_freed_count: u64) -> SiteRow {
        SiteRow {
            site_id,
            followed_count,
            followed_freed_count,
            ..row(1000)
        }
    }

    /// Lifetimes of site 1's followed blocks, 100 ns an allocation times `slower`.
    fn report(slower: u64) -> Report {
        Report {
            dir: "r".into(),
            manifest: alloc_tracer_format::manifest::Manifest {
                duration_s: slower as f64,
                ..Default::default()
            },
            sites: vec![
                // 1,000 followed: 200 freed young, 300 old, 100 at the ramp's middle
                // (640 allocations: weight a half), 400 still live.
                followed(1, 1000, 600),
                // 1 followed, freed young.
                followed(2, 1, 1),
                // Nothing followed.
                followed(3, 0, 0),
                // Another phase: left out of the phase asked for.
                SiteRow {
                    phase: "q".into(),
                    ..followed(4, 100, 0)
                },
            ],
            frames: Vec::new(),
            phases: vec![phase_p(slower)],
            lifetimes: vec![
                bucket(1, 10 * slower, 20 * slower, 200),
                bucket(1, 2_000_000 * slower, 3_000_000 * slower, 300),
                // Its geometric middle: 64,000 ns, 640 allocations.
                bucket(1, 51_200 * slower, 80_000 * slower, 100),
                bucket(2, 10 * slower, 20 * slower, 1),
            ],
        }
    }

    #[test]
    fn long_lived_shares_come_from_lifetimes_and_lean_on_the_report() {
        let report = report(1);
        let l = Lasting::of(&report, Some("p"), None);
        let share = |i: usize| l.share(&report.sites[i]);
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
        // Site 1: 300 + 50 + 400 of 1,000; site 2: 0 of 1; together 750 of 1,001.
        let prior = 750.0 / 1001.0;
        assert!(close(l.prior(), prior), "{}", l.prior());
        let drawn = |long: f64, n: f64| (long + PRIOR_BLOCKS * prior) / (n + PRIOR_BLOCKS);
        assert!(close(share(0), drawn(750.0, 1000.0)), "{}", share(0));
        // One young block moves the share a seventeenth of the way to 0.
        assert!(close(share(1), prior * 16.0 / 17.0));
        // Nothing followed: the report's share.
        assert!(close(share(2), prior));
        // Kept for some sites only: their shares, and the report's (which site 1's
        // long-lived blocks, left out here, still count in), as before.
        let some = Lasting::of(&report, Some("p"), Some(&HashSet::from([2, 3])));
        assert!(close(some.prior(), prior), "{}", some.prior());
        assert!(close(some.share(&report.sites[1]), share(1)));
        assert!(close(some.share(&report.sites[2]), share(2)));
        // No followed blocks anywhere (lifetimes off): every row batch.
        let none = Report {
            sites: vec![followed(3, 0, 0)],
            lifetimes: Vec::new(),
            ..report
        };
        let l = Lasting::of(&none, None, None);
        assert_eq!(l.share(&none.sites[0]), 0.0);
    }

    #[test]
    fn a_slower_run_prices_its_blocks_alike() {
        // The same program three times slower: every lifetime and the phase's wall
        // time three times longer, the same allocations.
        let (quick, slow) = (report(1), report(3));
        let (a, b) = (
            Lasting::of(&quick, Some("p"), None),
            Lasting::of(&slow, Some("p"), None),
        );
        for (x, y) in quick.sites.iter().zip(&slow.sites).take(3) {
            assert!((a.share(x) - b.share(y)).abs() < 1e-9);
        }
        // The rate is the whole run's: a phase's wall time holds the phases nested
        // in it, not their allocations.
        let mut nested = report(1);
        nested.phases[0].wall_ns *= 3;
        let c = Lasting::of(&nested, Some("p"), None);
        assert!((c.share(&nested.sites[0]) - a.share(&quick.sites[0])).abs() < 1e-9);
    }
}
