"""How large a change must be to count: effect-size floors, the rank test's alpha, the
history noise factor."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Thresholds:
    """Effect-size floors (relative), the rank test's alpha and the history noise factor."""

    latency_floor: float = 0.10
    export_time_floor: float = 0.20
    memory_floor: float = 0.20
    memory_abs_mb: float = 32.0
    # Latency changes smaller than this are timer and cache noise whatever their ratio
    # (seen here: an 8 us model measured 16% slower between two runs of one build).
    latency_abs_ms: float = 0.02
    alpha: float = 0.01
    # ... and the effect on the rank scale: a candidate sample is slower than a baseline
    # sample at least this often (seen here: a machine hiccup slowed a third of one steady
    # cell's samples, x1.29 in median, p=6e-78, but P(slower) only 0.72; a real slowdown of
    # one model gave 0.99).
    min_prob_slower: float = 0.8
    noise_k: float = 4.0
    numerics_growth: float = 10.0
    # run-to-run changes a series needs before its own noise sets the threshold
    min_history_changes: int = 3
    # series a metric needs before the night-wide shift is estimated (and divided out)
    min_series_for_shift: int = 5
    # Paired, interleaved re-measurement of a changed graph (harness/compare/paired.py):
    # "slower" when the confidence interval of the per-pair log-ratio lies wholly above
    # +margin; it blocks from an estimated +`paired_block` on, and warns below.
    paired_margin: float = 0.03
    paired_block: float = 0.05
    paired_confidence: float = 0.99
