"""The comparison statistics, with hand-computed numbers and scipy as an oracle."""

from __future__ import annotations

import math
import random

import pytest
from scipy.stats import mannwhitneyu

from harness import stats


def test_mann_whitney_separated_samples_by_hand():
    # a never beats b: U(a) = 0; U = max(0, 9) = 9, mu = 4.5, sigma = sqrt(9/12 * 7)
    t = stats.mann_whitney_u([1, 2, 3], [4, 5, 6])
    assert t.u == 0
    z = (9 - 4.5 - 0.5) / math.sqrt(9 / 12 * 7)
    assert t.z == pytest.approx(z)  # 1.7457
    assert t.p_value == pytest.approx(0.08086, abs=1e-5)
    assert t.prob_greater == 0


def test_mann_whitney_ties_by_hand():
    # pooled 1,2,2,3 | 2,3,4: ranks 1, 3, 3, 5.5 | 3, 5.5, 7 -> R1 = 12.5, U1 = 12.5 - 10 = 2.5
    # tie term: 3 twos (27 - 3) + 2 threes (8 - 2) = 30; sigma^2 = 12/12 * (8 - 30/42)
    t = stats.mann_whitney_u([1, 2, 2, 3], [2, 3, 4])
    assert t.u == 2.5
    z = (9.5 - 6 - 0.5) / math.sqrt(8 - 30 / 42)
    assert t.z == pytest.approx(z)
    assert t.p_value == pytest.approx(2 * 0.5 * math.erfc(z / math.sqrt(2)))
    oracle = mannwhitneyu([1, 2, 2, 3], [2, 3, 4], method="asymptotic")
    assert (t.u, t.p_value) == pytest.approx((oracle.statistic, oracle.pvalue))


def test_mann_whitney_matches_scipy_on_random_samples():
    rng = random.Random(7)
    for _ in range(40):
        a = [round(rng.gauss(10, 2), 1) for _ in range(rng.randint(2, 40))]
        b = [round(rng.gauss(11, 2), 1) for _ in range(rng.randint(2, 40))]
        ours, oracle = stats.mann_whitney_u(a, b), mannwhitneyu(a, b, method="asymptotic")
        assert ours.u == pytest.approx(oracle.statistic)
        assert ours.p_value == pytest.approx(oracle.pvalue, rel=1e-9, abs=1e-12)


def test_mann_whitney_all_tied_is_no_evidence():
    assert stats.mann_whitney_u([2.0, 2.0], [2.0, 2.0, 2.0]).p_value == 1.0


def test_mann_whitney_needs_both_samples():
    with pytest.raises(ValueError, match=r"."):  # scipy's own message
        stats.mann_whitney_u([], [1.0])


def test_mad_and_robust_sigma():
    # median 3; |x - 3| = 2, 1, 0, 1, 97 -> median 1: the outlier does not move it
    assert stats.mad([1, 2, 3, 4, 100]) == 1
    assert stats.robust_sigma([1, 2, 3, 4, 100]) == pytest.approx(1.4826)


def test_log_ratios():
    assert stats.log_ratios([100, 110, 99]) == pytest.approx([math.log(1.1), math.log(0.9)])


def _series(changes: list[float]) -> list[float]:
    values = [100.0]
    for c in changes:
        values.append(values[-1] * math.exp(c))
    return values


def test_noise_threshold_scales_with_the_series_noise():
    # changes 0.01, -0.01, 0.03, -0.03, 0.01: median 0.01, |dev| 0, .02, .02, .04, 0 -> MAD 0.02
    noisy = _series([0.01, -0.01, 0.03, -0.03, 0.01])
    thr = stats.noise_log_threshold(noisy, floor=0.10, k=4, min_changes=3)
    assert thr == pytest.approx(4 * 1.4826 * 0.02)  # 0.1186 > log(1.1) = 0.0953


def test_noise_threshold_is_never_below_the_floor():
    quiet = _series([0.001, -0.001, 0.002, 0.0])
    assert stats.noise_log_threshold(quiet, floor=0.10, k=4, min_changes=3) == pytest.approx(
        math.log(1.1)
    )


def test_noise_threshold_needs_enough_history():
    assert stats.noise_log_threshold([100.0, 101.0, 99.0], floor=0.1, k=4, min_changes=3) is None
