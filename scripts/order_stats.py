"""Order statistics shared by the benchmark scripts: how well a median of noisy
rounds is pinned down, without assuming how the rounds are distributed, and how far
the rounds stray (their quartiles). Standard library only."""

import math
import statistics


def median_interval(xs, confidence=0.95):
    """A distribution-free interval holding the median of the population the values
    come from with at least `confidence`: the k-th smallest and k-th largest values,
    k the largest rank with P(Binomial(n, 1/2) < k) <= (1 - confidence) / 2. With too
    few values for that, the smallest and largest."""
    xs = sorted(xs)
    n = len(xs)
    tail, k = 0.0, 0
    while True:
        # P(X <= k) for X ~ Binomial(n, 1/2).
        tail += math.comb(n, k) / 2**n
        if tail > (1 - confidence) / 2:
            break
        k += 1
    k = max(k, 1)
    return xs[k - 1], xs[n - k]


def interval_name(n, confidence=0.95):
    """What `median_interval` of `n` values is: the interval at `confidence`, or, with
    too few values for it (fewer than 6 at 95 %), the range of the values, which
    holds the median with less (1 - 2 / 2**n)."""
    if 2 * 0.5**n <= 1 - confidence:
        return f"{confidence * 100:g} % interval"
    rounds = "round" if n == 1 else "rounds"
    return f"range of {n} {rounds}, too few for a {confidence * 100:g} % interval"


def quartiles(values):
    """First and third quartile, or (None, None) under two values."""
    if len(values) < 2:
        return None, None
    q = statistics.quantiles(values, n=4, method="inclusive")
    return q[0], q[2]
