"""Statistics, checked against numbers computed by hand."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest

from harness.stats import geomean, is_stable, median, percentile, relative_spread, stdev, summarize


def test_percentile_interpolates_between_ranks() -> None:
    # rank = 0.9 * (5 - 1) = 3.6 -> 4 + 0.6 * (5 - 4) = 4.6
    assert percentile([5, 1, 4, 2, 3], 90) == pytest.approx(4.6)
    assert percentile([5, 1, 4, 2, 3], 0) == 1
    assert percentile([5, 1, 4, 2, 3], 100) == 5


def test_median_of_even_sample_is_midpoint() -> None:
    assert median([1.0, 2.0, 3.0, 10.0]) == pytest.approx(2.5)


def test_stdev_is_sample_stdev() -> None:
    # mean 5, squared deviations 9+1+1+9 = 20, /3 -> sqrt(6.666..)
    assert stdev([2, 4, 6, 8]) == pytest.approx(math.sqrt(20 / 3))
    assert stdev([3.0]) == 0.0


def test_summarize_fields() -> None:
    s = summarize([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0])
    assert s.p50 == pytest.approx(5.5)
    assert s.p90 == pytest.approx(9.1)  # rank 8.1
    assert s.p99 is None  # 10 samples cannot say a p99 (PERCENTILE_MIN_SAMPLES)
    assert s.mean == pytest.approx(5.5)
    assert s.n == 10
    assert (s.ci_low, s.ci_high) == (2.0, 9.0)  # x(2), x(9): P = 0.979 at n = 10
    hundred = summarize([float(v) for v in range(1, 101)])
    assert hundred.p99 == pytest.approx(99.01)  # rank 98.01
    assert summarize([1.0] * 9).p90 is None


@pytest.mark.parametrize(
    ("n", "ranks"),
    # Order statistics of the median's 95% interval, from the Binomial(n, 1/2) tables
    [(5, None), (6, (1, 6)), (8, (1, 8)), (9, (2, 8)), (20, (6, 15)), (100, (40, 61))],
)
def test_the_median_interval_is_the_binomial_order_statistics(
    n: int, ranks: tuple[int, int] | None
) -> None:
    from harness.stats import interval_width, median_interval

    samples = [float(v) for v in range(n, 0, -1)]  # any order
    assert median_interval(samples) == (None if ranks is None else tuple(map(float, ranks)))
    if ranks is not None:
        middle = (n + 1) / 2
        assert interval_width(samples) == pytest.approx((ranks[1] - ranks[0]) / 2 / middle)


@pytest.mark.parametrize("level", [0.9, 0.95, 0.99])
def test_the_median_intervals_ranks_are_scipys_binomial_quantiles(level: float) -> None:
    """The ranks as scipy.stats.binom's quantile and CDF put them (what the interval used
    before it bisected on scipy.special.bdtr, so that a cell need not import scipy.stats),
    for every sample size the protocol can take (max_iters)."""
    from scipy.stats import binom

    from harness.stats import median_interval

    tail = (1 - level) / 2
    for n in range(1, 2001):
        expected = int(binom.ppf(tail, n, 0.5))
        while expected > 0 and binom.cdf(expected - 1, n, 0.5) > tail:
            expected -= 1
        interval = median_interval([float(v) for v in range(1, n + 1)], level)
        if 1 - 2 * 0.5**n < level:
            assert interval is None
        else:
            assert interval == (float(max(expected, 1)), float(n + 1 - max(expected, 1))), n


def test_geomean_of_2_and_8_is_4() -> None:
    assert geomean([2.0, 8.0]) == pytest.approx(4.0)


def test_relative_spread() -> None:
    # p10 of 1..11 = 2, p90 = 10, median 6 -> (10 - 2) / 2 / 6
    assert relative_spread(list(range(1, 12))) == pytest.approx(8 / 2 / 6)


def test_is_stable_compares_half_medians() -> None:
    assert is_stable([10.0, 10.2, 9.9, 10.1, 10.0, 9.95], tolerance=0.05)
    assert not is_stable([30.0, 25.0, 20.0, 10.0, 10.1, 9.9], tolerance=0.05)
    assert not is_stable([1.0, 1.0], tolerance=0.5)


def test_empty_samples_are_refused() -> None:
    with pytest.raises(ValueError, match="empty sample"):
        summarize([])


def test_summarising_samples_imports_no_scipy() -> None:
    """Every cell's process summarises its samples and every command starts with this
    module: scipy.special cost each of them 0.3 CPU-s to import (benchmarks/README.md,
    "Imports"). In a fresh interpreter, the median interval of a real-size loop's samples."""
    probe = (
        "import sys; from harness.stats import median_interval; "
        "print(median_interval([float(v) for v in range(1, 41)]), 'scipy' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["(14.0,", "27.0)", "False"]
