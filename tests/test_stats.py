"""Statistics, checked against numbers computed by hand."""

from __future__ import annotations

import math

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
    assert s.p99 == pytest.approx(9.91)  # rank 8.91
    assert s.mean == pytest.approx(5.5)
    assert s.n == 10


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
    with pytest.raises(ValueError):
        summarize([])
