//! How long a report's blocks live, as the cost model prices them: a ramp from the
//! `batch` to the `scattered` pair cost by each followed block's lifetime, and each
//! row's share of long-lived allocations estimated from its followed blocks.

use crate::report::{LifetimeRow, Report, SiteRow};
use std::collections::HashMap;

/// Blocks that live this long are priced half as scattered, half as batch
/// ([`scattered_weight`]).
pub const SCATTERED_AFTER_NS: u64 = 100_000;
/// Blocks freed within this are priced as batch.
pub const BATCH_UNTIL_NS: u64 = SCATTERED_AFTER_NS / 10;
/// Blocks that live this long or longer are priced as scattered.
pub const SCATTERED_FROM_NS: u64 = SCATTERED_AFTER_NS * 10;

/// How many followed blocks the report's own share of long-lived blocks counts as in
/// each row's estimate ([`Lasting::share`]).
pub const PRIOR_BLOCKS: f64 = 16.0;

/// Which share of each row's allocations to price as scattered, estimated from the
/// blocks followed to their free: the mean [`scattered_weight`] of their lifetimes
/// (`lifetimes.parquet`), a block still live at the report (or dropped when frees
/// stopped being recorded) weighing 1.
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
    /// Reads the followed blocks of `report`'s rows in `phase` (all, when `None`).
    pub fn of(report: &'r Report, phase: Option<&'r str>) -> Lasting<'r> {
        // Summed in the report's order, so that the figures come out the same every
        // time (not in the map's).
        let (mut all_long, mut all) = (0.0, 0.0);
        let mut long: HashMap<(u64, &str, u64), f64> = HashMap::new();
        for l in report
            .lifetimes
            .iter()
            .filter(|l| phase.is_none_or(|p| l.phase == p))
        {
            let n = long_in_bucket(l);
            if n > 0.0 {
                all_long += n;
                *long
                    .entry((l.site_id, l.phase.as_str(), l.size_class_bytes))
                    .or_default() += n;
            }
        }
        for row in report.rows(phase) {
            let unfreed = row.followed_count.saturating_sub(row.followed_freed_count) as f64;
            *long
                .entry((row.site_id, row.phase.as_str(), row.size_class_bytes))
                .or_default() += unfreed;
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

/// How far a block of lifetime `ns` is priced as scattered rather than batch: 0 up
/// to [`BATCH_UNTIL_NS`], 1 from [`SCATTERED_FROM_NS`], in between in proportion to
/// the logarithm of its lifetime (one half at [`SCATTERED_AFTER_NS`]). A ramp, not a
/// step: blocks living about as long as the threshold would otherwise change price
/// with a few per cent of the run's speed, and a diff of two runs of one program
/// would show sites whose counts stayed but whose cost moved.
pub fn scattered_weight(ns: f64) -> f64 {
    let (low, high) = (BATCH_UNTIL_NS as f64, SCATTERED_FROM_NS as f64);
    ((ns.max(1.0).ln() - low.ln()) / (high.ln() - low.ln())).clamp(0.0, 1.0)
}

/// The scattered weight of a lifetime bucket's blocks, each taken at the bucket's
/// geometric middle (buckets are under 25 % wide).
fn long_in_bucket(l: &LifetimeRow) -> f64 {
    let middle = ((l.low_ns.max(1) as f64) * (l.high_ns.max(1) as f64)).sqrt();
    l.freed_count as f64 * scattered_weight(middle)
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
        for (ns, w) in [
            (0.0, 0.0),
            (1e3, 0.0),
            (1e4, 0.0),
            (10f64.powf(4.5), 0.25),
            (1e5, 0.5),
            (1e6, 1.0),
            (1e9, 1.0),
        ] {
            assert!(
                close(scattered_weight(ns), w),
                "{ns}: {}",
                scattered_weight(ns)
            );
        }
        // Lifetimes 6 % apart are priced about a hundredth of the step apart.
        assert!((scattered_weight(103e3) - scattered_weight(97e3)).abs() < 0.015);
    }

    #[test]
    fn long_lived_shares_come_from_lifetimes_and_lean_on_the_report() {
        let followed = |site_id, followed_count, followed_freed_count| SiteRow {
            site_id,
            followed_count,
            followed_freed_count,
            ..row(1000)
        };
        let report = Report {
            dir: "r".into(),
            manifest: Default::default(),
            sites: vec![
                // 1,000 followed: 200 freed young, 300 old, 100 at the ramp's middle
                // (weight a half), 400 still live.
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
            phases: Vec::new(),
            lifetimes: vec![
                bucket(1, 10, 20, 200),
                bucket(1, 2_000_000, 3_000_000, 300),
                bucket(1, 80_000, 125_000, 100),
                bucket(2, 10, 20, 1),
            ],
        };
        let l = Lasting::of(&report, Some("p"));
        let share = |i: usize| l.share(&report.sites[i]);
        let close = |a: f64, b: f64| (a - b).abs() < 1e-12;
        // Site 1: 300 + 50 + 400 of 1,000; site 2: 0 of 1; together 750 of 1,001.
        let prior = 750.0 / 1001.0;
        assert!(close(l.prior(), prior), "{}", l.prior());
        let drawn = |long: f64, n: f64| (long + PRIOR_BLOCKS * prior) / (n + PRIOR_BLOCKS);
        assert!(close(share(0), drawn(750.0, 1000.0)), "{}", share(0));
        // One young block moves the share a seventeenth of the way to 0.
        assert!(close(share(1), prior * 16.0 / 17.0));
        // Nothing followed: the report's share.
        assert!(close(share(2), prior));
        // No followed blocks anywhere (lifetimes off): every row batch.
        let none = Report {
            sites: vec![followed(3, 0, 0)],
            lifetimes: Vec::new(),
            ..report
        };
        let l = Lasting::of(&none, None);
        assert_eq!(l.share(&none.sites[0]), 0.0);
    }
}
