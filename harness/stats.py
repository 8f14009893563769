"""Pure statistics over raw samples: no numpy, no torch, tested with hand-computed numbers."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Summary:
    p50: float
    p90: float
    p99: float
    mean: float
    stdev: float
    n: int


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
    return Summary(
        p50=percentile(samples, 50),
        p90=percentile(samples, 90),
        p99=percentile(samples, 99),
        mean=sum(samples) / len(samples),
        stdev=stdev(samples),
        n=len(samples),
    )


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
