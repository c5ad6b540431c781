"""scripts/order_stats.py: the distribution-free interval of a median that the
benchmark scripts print (scripts/mode_turns.py, scripts/cost-model-check.py)."""

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
from order_stats import interval_name, median_interval  # noqa: E402


def test_ranks_follow_the_binomial_tail():
    # n = 10: P(X <= 1) = 11/1024 <= 2.5 % < P(X <= 2) = 56/1024, so the 2nd
    # smallest and the 2nd largest.
    assert median_interval(range(10)) == (1, 8)
    # Too few values for 95 %: the extremes.
    assert median_interval([3.0, 1.0, 2.0]) == (1.0, 3.0)


def test_holds_the_median_at_least_as_often_as_it_says():
    rng = random.Random(7)
    trials, held = 2000, 0
    for _ in range(trials):
        # A skewed distribution whose median is 1 (lognormal with mu = 0).
        lo, hi = median_interval([rng.lognormvariate(0, 1) for _ in range(60)])
        held += lo <= 1.0 <= hi
    assert held / trials >= 0.94, held / trials
    # And it narrows as rounds add up.
    widths = []
    for n in (60, 600):
        lo, hi = median_interval([rng.lognormvariate(0, 1) for _ in range(n)])
        widths.append(hi - lo)
    assert widths[1] < widths[0] / 2, widths


def test_too_few_rounds_are_named_a_range_not_an_interval():
    # Six rounds are the fewest whose extremes hold the median 95 % of the time
    # (1 - 2 / 64); five hold it 93.75 %.
    assert interval_name(6) == "95 % interval"
    assert interval_name(5) == "range of 5 rounds, too few for a 95 % interval"
    assert interval_name(1).startswith("range of 1 round,")
