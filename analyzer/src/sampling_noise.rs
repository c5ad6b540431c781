//! How far a diff's deltas may move by sampling alone, when a report was traced in
//! `sample:N` mode.
//!
//! A `sample:N` report records one allocation in `N` at random (a geometric
//! countdown: each allocation independently, with probability `1/N`) and counts
//! each recorded one `N` times. A site that made `c` allocations is recorded about
//! `c/N` times, a Poisson count for the many small `1/N`, so its estimate `N k`
//! has variance about `N c`, and its estimated cost that times the square of its
//! cost per allocation. A site with fewer than `N` allocations is usually not
//! recorded at all, and then comes out `gone` or `new` in a diff: the deltas of such
//! sites, and of the categories and predicted change they add to, mean nothing
//! unless they exceed this noise.
//!
//! The true count is taken as the larger of the two sides' figures (no change is
//! what the noise is measured against, and the larger figure is the conservative
//! one: a side that recorded nothing says little). The bound given is the half-width
//! of a 95 % interval, twice the standard deviation. A `sites` report counts every
//! allocation (`N` = 1): no noise of its own.

/// Standard deviations in the bound (about 95 % for a normal distribution).
const SIGMAS: f64 = 2.0;

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
    /// Predicted cost in seconds, if priced.
    pub cost_s: Option<f64>,
    /// The report's sample interval `N`.
    pub interval: u64,
}

impl Noise {
    /// The noise of `change - base` for one site (or one key of matched sites).
    pub fn of_delta(base: Sampled, change: Sampled) -> Noise {
        let truth = base.allocs.max(change.allocs) as f64;
        // Cost per allocation: from the side that recorded more, the better estimate.
        let per_alloc = [base, change]
            .into_iter()
            .filter(|s| s.allocs > 0)
            .max_by_key(|s| s.allocs)
            .and_then(|s| s.cost_s.map(|c| c / s.allocs as f64))
            .unwrap_or(0.0);
        let count_var: f64 = [base.interval, change.interval]
            .into_iter()
            .filter(|&n| n > 1)
            .map(|n| n as f64 * truth)
            .sum();
        Noise {
            count_var,
            cost_var: count_var * per_alloc * per_alloc,
        }
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

/// True when a delta lies within its bound (a bound of `None`: exact, so never).
pub fn within(delta: f64, bound: Option<f64>) -> bool {
    bound.is_some_and(|b| delta.abs() <= b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn side(allocs: u64, cost_s: f64, interval: u64) -> Sampled {
        Sampled {
            allocs,
            cost_s: Some(cost_s),
            interval,
        }
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
        let n = Noise::of_delta(side(63, 0.0315, 1), side(0, 0.0, 1000));
        let count = n.count_bound().unwrap();
        // 2 * sqrt(1000 * 63) = 502.
        assert_eq!(count, 502);
        assert!(within(-63.0, Some(count as f64)));
        let cost = n.cost_bound_s().unwrap();
        assert!((cost - 502.0 * 0.0005).abs() < 0.001, "{cost}");
        assert!(within(-0.0315, Some(cost)));
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
            cost_s: None,
            interval: 100,
        };
        assert_eq!(Noise::of_delta(unpriced, unpriced).cost_bound_s(), None);
    }
}
