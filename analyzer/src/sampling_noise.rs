//! How far a diff's deltas may move by the sampling of allocations alone, when a
//! report was traced in `sample:N` mode.
//!
//! A `sample:N` report records one allocation in `N` at random (a geometric
//! countdown: each allocation independently, with probability `1/N`) and counts
//! each recorded one `N` times. A site that made `c` allocations is recorded about
//! `c/N` times, a Poisson count for the many small `1/N`, so its estimate `N k`
//! has variance about `N c` (a little more than the binomial `N c (1 - 1/N)`), and
//! its estimated cost `N` times the sum of its allocations' squared costs, `N c p²`
//! for a cost `p` each. A site with `c` allocations goes unrecorded with probability
//! about `e^(-c/N)`: one of fewer than `N` often comes out `gone` or `new` in a diff,
//! with its whole cost, and the deltas of such sites, and of the categories and
//! predicted change they add to, mean little unless they exceed this noise.
//!
//! The true figures are taken as the larger of the two sides' (no change is what the
//! noise is measured against, and the larger figure is the conservative one: a side
//! that recorded nothing says little). The bound given is twice the standard
//! deviation, about a 95 % interval. A `sites` report records every allocation
//! (`N` = 1): no noise of this kind. Not counted here: the sampling of the blocks
//! followed for lifetimes, which moves predicted costs in every mode (a few
//! hundredths of a per cent between two runs: `docs/cost-model.md`), and sites that
//! neither sampled report recorded.

/// Standard deviations in the bound (about 95 % for a normal distribution); the
/// memory commands' ± (`peak`, `leaks`, `peak --base`) are as wide.
pub const SIGMAS: f64 = 2.0;

/// The variance of a delta (or a sum of deltas) from sampling: of its allocation
/// count and of its predicted cost in seconds.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Noise {
    count_var: f64,
    cost_var: f64,
}

/// One side of a delta: its figures and the report's sample interval (1 in `sites`
/// mode).
#[derive(Clone, Copy, Debug)]
pub struct Sampled {
    /// Allocations and reallocs (an estimate in `sample:N`).
    pub allocs: u64,
    /// The sum over its sites of each site's cost squared over its allocations
    /// (`c p²` for `c` allocations of cost `p`), in seconds squared; `None`
    /// unpriced.
    pub cost_weight_s2: Option<f64>,
    /// The report's sample interval `N`.
    pub interval: u64,
}

impl Noise {
    /// The noise of `change - base` for one site (or one key of matched sites), as
    /// the base side's part and the change side's.
    pub fn of_sides(base: Sampled, change: Sampled) -> (Noise, Noise) {
        let truth = base.allocs.max(change.allocs) as f64;
        let weight = base
            .cost_weight_s2
            .unwrap_or(0.0)
            .max(change.cost_weight_s2.unwrap_or(0.0));
        let side = |s: Sampled| match s.interval {
            0 | 1 => Noise::default(),
            n => Noise {
                count_var: n as f64 * truth,
                cost_var: n as f64 * weight,
            },
        };
        (side(base), side(change))
    }

    /// The noise of `change - base`: both sides' parts.
    pub fn of_delta(base: Sampled, change: Sampled) -> Noise {
        let (mut n, other) = Noise::of_sides(base, change);
        n.add(other);
        n
    }

    /// Adds another delta's noise (independent sites: the variances add).
    pub fn add(&mut self, other: Noise) {
        self.count_var += other.count_var;
        self.cost_var += other.cost_var;
    }

    /// The count delta's bound, or `None` when neither side was sampled.
    pub fn count_bound(&self) -> Option<u64> {
        (self.count_var > 0.0).then(|| (SIGMAS * self.count_var.sqrt()).ceil() as u64)
    }

    /// The cost delta's bound in seconds, or `None` when neither side was sampled
    /// (or nothing was priced).
    pub fn cost_bound_s(&self) -> Option<f64> {
        (self.cost_var > 0.0).then(|| SIGMAS * self.cost_var.sqrt())
    }
}

/// How far sampling alone may put `estimate`, a count in a report of sample
/// interval `interval`, from the truth (twice its standard deviation, about `N c`
/// in variance for `c` allocations, taken as the estimate); `None` in an exact
/// report (`interval` 1, or 0 where the report does not say).
pub fn estimate_bound(estimate: u64, interval: u64) -> Option<u64> {
    let variance = interval as f64 * estimate as f64;
    (interval > 1 && estimate > 0).then(|| (SIGMAS * variance.sqrt()).ceil() as u64)
}

/// What an estimate of 0 in a report of sample interval `interval` may hide: `c`
/// allocations all go unsampled with probability `(1 - 1/N)^c`, under 5 % from
/// `c = 3N` on (`-ln 0.05` is 3.0), so about `3N` is the 95 % bound that
/// [`estimate_bound`] gives other estimates. `None` in an exact report.
pub fn unsampled_bound(interval: u64) -> Option<u64> {
    (interval > 1).then(|| interval.saturating_mul(3))
}

/// How far sampling alone may put an estimate of requested bytes from the truth in a
/// report of sample interval `interval`: twice the standard deviation, whose
/// variance is `N` times the sum of the sampled blocks' squared sizes.
/// `square_sum` estimates that sum from the rows it adds up, each a size class's
/// bytes times the class's size (`square_bound`): no block is larger than its
/// class. `None` in an exact report.
pub fn bytes_bound(square_sum: f64, interval: u64) -> Option<u64> {
    let variance = interval as f64 * square_sum;
    (interval > 1 && square_sum > 0.0).then(|| (SIGMAS * variance.sqrt()).ceil() as u64)
}

/// One row's part of [`bytes_bound`]'s `square_sum`: `bytes` requested in blocks of
/// a size class of `class_bytes` (jemalloc's class: the largest block size in it),
/// `calls` of them (their mean bounds the size where the class is unknown).
pub fn square_bound(bytes: u64, class_bytes: u64, calls: u64) -> f64 {
    let mean = bytes.checked_div(calls).unwrap_or(0);
    bytes as f64 * class_bytes.max(mean) as f64
}

/// `bound` as a share of `estimate`, for tables: `±6%`, `±0.4%` under one per cent,
/// the bound itself from ten times the estimate and for an estimate of 0 (`±3000`);
/// empty without a bound.
pub fn relative(bound: Option<u64>, estimate: u64) -> String {
    match bound {
        // An estimate of 0 and what it may hide.
        Some(b) if estimate == 0 => format!("±{b}"),
        Some(b) => {
            let pct = 100.0 * b as f64 / estimate as f64;
            if pct < 0.95 {
                format!("±{pct:.1}%")
            } else if pct < 999.5 {
                format!("±{pct:.0}%")
            } else {
                // Ten times the estimate and more (what a row sampled none of may
                // hide, beside what it recorded whole): the bound itself.
                format!("±{b}")
            }
        }
        None => String::new(),
    }
}

/// The sum for [`Sampled::cost_weight_s2`] of one site of `allocs` allocations
/// costing `cost_s` in all.
pub fn cost_weight(cost_s: f64, allocs: u64) -> f64 {
    if allocs == 0 {
        0.0
    } else {
        cost_s * cost_s / allocs as f64
    }
}

/// True when a non-zero delta lies under its bound (as `peak --base` marks its
/// changes under two standard errors); a bound of `None` (exact) never.
pub fn within(delta: f64, bound: Option<f64>) -> bool {
    delta != 0.0 && bound.is_some_and(|b| delta.abs() < b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn side(allocs: u64, cost_s: f64, interval: u64) -> Sampled {
        Sampled {
            allocs,
            cost_weight_s2: Some(cost_weight(cost_s, allocs)),
            interval,
        }
    }

    #[test]
    fn an_estimate_of_k_samples_is_within_two_over_root_k() {
        // 976 samples at 1 in 1000: 2 * sqrt(1000 * 976000) = 62,482, 6 % of it.
        let bound = estimate_bound(976_000, 1000);
        assert_eq!(bound, Some(62_482));
        assert_eq!(relative(bound, 976_000), "±6%");
        // One sample: twice the estimate itself.
        assert_eq!(relative(estimate_bound(1000, 1000), 1000), "±200%");
        // Exact reports have none.
        assert_eq!(estimate_bound(976_000, 1), None);
        assert_eq!(estimate_bound(976_000, 0), None);
        assert_eq!(relative(None, 5), "");
        assert_eq!(relative(None, 0), "");
        assert_eq!(relative(Some(3000), 0), "±3000");
        // What 30 allocations recorded whole beside none sampled may hide, 3N at 1
        // in 1000, reads as itself, not as 10000 %.
        assert_eq!(unsampled_bound(1000), Some(3000));
        assert_eq!(relative(unsampled_bound(1000), 30), "±3000");
        assert_eq!(relative(unsampled_bound(1000), 301), "±997%");
        assert_eq!(unsampled_bound(1), None);
        // Large counts keep a figure: 2 * sqrt(1000 * 1e9) is 0.2 % of 1e9.
        assert_eq!(
            relative(estimate_bound(1_000_000_000, 1000), 1_000_000_000),
            "±0.2%"
        );
        // As `Noise`'s bound of the same estimate against nothing.
        let noise = Noise::of_delta(
            Sampled {
                allocs: 63,
                cost_weight_s2: None,
                interval: 1000,
            },
            Sampled {
                allocs: 0,
                cost_weight_s2: None,
                interval: 1,
            },
        );
        assert_eq!(estimate_bound(63, 1000), noise.count_bound());
    }

    #[test]
    fn exact_reports_have_no_noise() {
        let n = Noise::of_delta(side(63, 0.03, 1), side(0, 0.0, 1));
        assert_eq!((n.count_bound(), n.cost_bound_s()), (None, None));
        assert!(!within(-63.0, n.count_bound().map(|b| b as f64)));
    }

    #[test]
    fn a_rare_costly_site_unrecorded_by_sampling_is_within_the_noise() {
        // 63 allocations costing 0.5 ms each in a `sites` report; none recorded in
        // a `sample:1000` one. Recording none of 63 at 1 in 1000 happens 94 % of
        // the time: the saving of 31.5 ms is noise.
        let (base, change) = Noise::of_sides(side(63, 0.0315, 1), side(0, 0.0, 1000));
        assert_eq!(base, Noise::default(), "the sites report is exact");
        let n = Noise::of_delta(side(63, 0.0315, 1), side(0, 0.0, 1000));
        assert_eq!(n, change);
        let count = n.count_bound().unwrap();
        // 2 * sqrt(1000 * 63) = 502.
        assert_eq!(count, 502);
        assert!(within(-63.0, Some(count as f64)));
        // 2 * sqrt(1000 * 63 * 0.0005^2) = 0.251 s.
        let cost = n.cost_bound_s().unwrap();
        assert!((cost - 502.0 * 0.0005).abs() < 0.001, "{cost}");
        assert!(within(-0.0315, Some(cost)));
        assert!(!within(0.0, Some(cost)), "no change is not marked");
    }

    #[test]
    fn a_large_change_stands_out_of_the_noise() {
        // A million allocations against half a million, both sampled 1 in 1000: the
        // bound is 2 * sqrt(2 * 1000 * 1e6) = 89,443.
        let n = Noise::of_delta(side(1_000_000, 1.0, 1000), side(500_000, 0.5, 1000));
        let bound = n.count_bound().unwrap();
        assert_eq!(bound, 89_443);
        assert!(!within(-500_000.0, Some(bound as f64)));
    }

    #[test]
    fn a_costlier_few_weigh_more_than_their_average() {
        // Two sites under one key: 99 allocations of 1 us and one of 1 ms. Their sum
        // of c p^2 (1e-6 * 1e-6 * 99 + 1e-6) is far above 100 times the squared mean.
        let weight = cost_weight(99e-6, 99) + cost_weight(1e-3, 1);
        let mean = (99e-6 + 1e-3) / 100.0;
        assert!(weight > 10.0 * 100.0 * mean * mean, "{weight}");
    }

    #[test]
    fn noise_adds_in_variance() {
        let one = Noise::of_delta(side(1000, 0.0, 100), side(1000, 0.0, 100));
        let mut two = one;
        two.add(one);
        let (a, b) = (one.count_bound().unwrap(), two.count_bound().unwrap());
        // sqrt(2) times: 2 * sqrt(2 * 100 * 1000) = 895; 2 * sqrt(4 * 100 * 1000) = 1265.
        assert_eq!((a, b), (895, 1265));
        // Unpriced: no cost bound.
        let unpriced = Sampled {
            allocs: 1000,
            cost_weight_s2: None,
            interval: 100,
        };
        assert_eq!(Noise::of_delta(unpriced, unpriced).cost_bound_s(), None);
    }
}
