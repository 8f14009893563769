"""Pure statistics over raw samples (no torch), tested with hand-computed numbers; the tests
of significance and the paired verdict's bootstrap interval are scipy's, imported where they
run: every cell's process summarises its samples and every command line starts with this
module (scipy.special took 0.3 CPU-s to import, scipy.stats 0.6). The median's interval is
counted exactly (`_median_rank`)."""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

# The fewest samples a percentile is published from: below them its value would be the
# largest sample's, or an extrapolation past it (p99 of 20 samples is their maximum).
PERCENTILE_MIN_SAMPLES = {90: 10, 99: 100}


@dataclass(frozen=True)
class Summary:
    p50: float
    p90: float | None  # None below PERCENTILE_MIN_SAMPLES[90] samples
    p99: float | None
    mean: float
    stdev: float
    n: int
    # The median's distribution-free 95% confidence interval (None below 6 samples)
    ci_low: float | None = None
    ci_high: float | None = None
    # The interquartile band, drawn by the trends and kept by the history
    p25: float | None = None
    p75: float | None = None


def percentile(samples: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) with linear interpolation between closest ranks.

    The same definition as numpy's default ('linear'): rank = q/100 * (n - 1).
    """
    if not samples:
        raise ValueError("percentile of no samples")
    if not 0 <= q <= 100:
        raise ValueError(f"percentile {q} outside 0..100")
    ordered = sorted(samples)
    rank = q / 100 * (len(ordered) - 1)
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def median(samples: Sequence[float]) -> float:
    return percentile(samples, 50)


def stdev(samples: Sequence[float]) -> float:
    """Sample standard deviation (n - 1); 0 for a single sample."""
    n = len(samples)
    if n < 2:
        return 0.0
    mean = sum(samples) / n
    return math.sqrt(sum((x - mean) ** 2 for x in samples) / (n - 1))


def summarize(samples: Sequence[float]) -> Summary:
    if not samples:
        raise ValueError("cannot summarize an empty sample")
    interval = median_interval(samples)
    return Summary(
        p50=percentile(samples, 50),
        p90=published_percentile(samples, 90),
        p99=published_percentile(samples, 99),
        mean=sum(samples) / len(samples),
        stdev=stdev(samples),
        n=len(samples),
        ci_low=interval[0] if interval else None,
        ci_high=interval[1] if interval else None,
        p25=percentile(samples, 25),
        p75=percentile(samples, 75),
    )


def published_percentile(samples: Sequence[float], q: int) -> float | None:
    """The q-th percentile, or None where the samples are too few to say it
    (`PERCENTILE_MIN_SAMPLES`)."""
    return percentile(samples, q) if len(samples) >= PERCENTILE_MIN_SAMPLES.get(q, 1) else None


def median_interval(samples: Sequence[float], level: float = 0.95) -> tuple[float, float] | None:
    """The median's distribution-free confidence interval: the order statistics whose
    ranks a Binomial(n, 1/2) puts around the middle with at least `level` coverage (no
    assumption about the distribution of latencies, which is skewed). None where even the
    whole range covers less than `level` (n < 6 at 95%)."""
    n = len(samples)
    if n == 0 or 1 - 2 * 0.5**n < level:
        return None
    ordered = sorted(samples)
    j = max(_median_rank(n, (1 - level) / 2), 1)
    return ordered[j - 1], ordered[n - j]


@functools.cache
def _median_rank(n: int, tail: float) -> int:
    """The largest j with P(X < j) <= tail, X ~ Binomial(n, 1/2): the median interval is
    [x_(j), x_(n-j+1)]. Counted exactly, in integers: P(X < j) is the sum of C(n, i) over
    i < j, divided by 2^n. A loop that adds one sample asks for each n once."""
    bound = Fraction(tail) * 2**n
    rank, below, term = 0, 0, 1  # below: the sum of C(n, i) for i < rank; term: C(n, rank)
    while rank < n // 2 and below + term <= bound:
        below += term
        term = term * (n - rank) // (rank + 1)
        rank += 1
    return rank


def interval_width(samples: Sequence[float], level: float = 0.95) -> float | None:
    """The median interval's half-width relative to the median; None where there is none."""
    interval = median_interval(samples, level)
    mid = median(samples)
    if interval is None or mid <= 0:
        return None
    return (interval[1] - interval[0]) / 2 / mid


def geomean(values: Sequence[float]) -> float:
    """Geometric mean of positive values (speedups, ratios)."""
    positive = [v for v in values if v > 0]
    if not positive:
        raise ValueError("geomean needs at least one positive value")
    return math.exp(sum(math.log(v) for v in positive) / len(positive))


def relative_spread(samples: Sequence[float]) -> float:
    """Half the p10..p90 range relative to the median: a robust noise figure."""
    mid = median(samples)
    if mid == 0:
        return 0.0
    return (percentile(samples, 90) - percentile(samples, 10)) / 2 / mid


def is_stable(window: Sequence[float], tolerance: float) -> bool:
    """Warm-up is over when the last window's halves agree within `tolerance` (relative).

    Compares the medians of the window's first and second half, so one slow outlier
    does not keep warm-up going forever.
    """
    if len(window) < 4:
        return False
    half = len(window) // 2
    first, second = median(window[:half]), median(window[half:])
    if first == 0:
        return second == 0
    return abs(second - first) / first <= tolerance


# -- comparison statistics (used by harness/compare/) -------------------------------------

# MAD * 1.4826 estimates the standard deviation of normally distributed data.
MAD_TO_SIGMA = 1.4826


@dataclass(frozen=True)
class RankTest:
    """A Mann-Whitney U test of sample `a` against sample `b` (two-sided).

    `u` is the U statistic of `a`: the number of pairs (x from a, y from b) with x > y,
    ties counting one half. `u / (n1 * n2)` estimates P(a > b).
    """

    u: float
    z: float
    p_value: float
    n1: int
    n2: int

    @property
    def prob_greater(self) -> float:
        """The common-language effect size: the chance that a draw of `a` beats one of `b`."""
        return self.u / (self.n1 * self.n2)


def mann_whitney_u(a: Sequence[float], b: Sequence[float]) -> RankTest:
    """Two-sided Mann-Whitney U with the normal approximation, tie and continuity correction:
    `scipy.stats.mannwhitneyu(a, b, method="asymptotic")`, with the z it implies."""
    n1, n2 = len(a), len(b)
    if n1 == 0 or n2 == 0:
        raise ValueError("the rank test needs samples on both sides")
    if len({*a, *b}) == 1:  # every value tied: no evidence either way
        return RankTest(u=n1 * n2 / 2, z=0.0, p_value=1.0, n1=n1, n2=n2)
    from scipy import stats as scipy_stats

    result = scipy_stats.mannwhitneyu(a, b, alternative="two-sided", method="asymptotic")
    p_value = float(min(1.0, result.pvalue))
    z = float(scipy_stats.norm.isf(p_value / 2)) if p_value < 1 else 0.0
    return RankTest(u=float(result.statistic), z=z, p_value=p_value, n1=n1, n2=n2)


def mad(values: Sequence[float]) -> float:
    """Median absolute deviation from the median (unscaled)."""
    mid = median(values)
    return median([abs(v - mid) for v in values])


def robust_sigma(values: Sequence[float]) -> float:
    """A standard deviation estimate that a few outliers do not move: MAD * 1.4826."""
    return MAD_TO_SIGMA * mad(values)


def log_ratios(series: Sequence[float]) -> list[float]:
    """log(x[i] / x[i-1]) for consecutive positive values: run-to-run changes of a series."""
    return [math.log(b / a) for a, b in itertools.pairwise(series) if a > 0 and b > 0]


def noise_log_threshold(
    series: Sequence[float], *, floor: float, k: float, min_changes: int
) -> float | None:
    """The log-ratio a new value must exceed to stand out of `series`' own noise.

    max(log(1 + floor), k * robust sigma of the run-to-run log-ratios); None when the
    series has fewer than `min_changes` run-to-run changes to estimate its noise from.
    """
    changes = log_ratios(series)
    if len(changes) < min_changes:
        return None
    return max(math.log1p(floor), k * robust_sigma(changes))


# -- paired, interleaved comparisons (harness/cell/paired.py, harness/compare/paired.py) ----

# The share trimmed from each end of the per-pair log-ratios: a machine hiccup during one
# timed unit makes one pair an outlier, and the trimmed mean leaves it out.
PAIRED_TRIM = 0.1


@dataclass(frozen=True)
class PairedVerdict:
    """Where the per-pair log-ratios (candidate / baseline) put the change: `estimate` (their
    10%-trimmed mean) in [`low`, `high`] (a bootstrap confidence interval) and a three-way
    verdict against a band of +-log(1 + margin): "slower" or "faster" when the interval
    lies wholly beyond it, "same" when wholly within it, "unknown" otherwise (time more
    pairs); `p_value` is the Wilcoxon signed-rank test's that the median is 0."""

    verdict: str
    estimate: float
    low: float
    high: float
    p_value: float | None


def paired_verdict(
    log_ratios: Sequence[float], *, margin: float, confidence: float, seed: int = 0
) -> PairedVerdict:
    if len(log_ratios) < 5:
        return PairedVerdict("unknown", 0.0, -math.inf, math.inf, None)
    import numpy as np
    from scipy import stats as scipy_stats

    values = np.asarray(log_ratios, dtype=float)
    estimate = float(scipy_stats.trim_mean(values, PAIRED_TRIM))
    if np.ptp(values) == 0:
        low = high = estimate
    else:
        ci = scipy_stats.bootstrap(
            (values,),
            lambda x, axis: scipy_stats.trim_mean(x, PAIRED_TRIM, axis=axis),
            confidence_level=confidence,
            n_resamples=2000,
            method="percentile",
            rng=np.random.default_rng(seed),
        ).confidence_interval
        low, high = float(ci.low), float(ci.high)
    p_value = float(scipy_stats.wilcoxon(values).pvalue) if np.any(values != 0) else 1.0
    band = math.log1p(margin)
    if low > band:
        verdict = "slower"
    elif high < -band:
        verdict = "faster"
    elif -band < low and high < band:
        verdict = "same"
    else:
        verdict = "unknown"
    return PairedVerdict(verdict, estimate, low, high, p_value)
