"""Noisy findings against the history: each series (one cell's metric over past runs) is
judged by its own run-to-run noise, after the night-wide shift of all series is divided out."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from harness import stats
from harness.compare.findings import WARNING, Finding
from harness.compare.metrics import (
    METRICS,
    Metric,
    NotCompared,
    Verdict,
    direction_of,
    floor_text,
    metric_finding,
    rank_test,
)
from harness.compare.same_graph import SAME_GRAPH, drift_of, shift_finding, split_by_graph
from harness.compare.thresholds import Thresholds
from harness.store.records import CellKey, Record
from harness.store.runs import Run


@dataclass(frozen=True)
class Series:
    """One cell's metric over the history runs (medians, oldest first) and in the candidate."""

    record: Record
    medians: tuple[float, ...]
    latest_samples: tuple[float, ...]
    candidate: tuple[float, ...]
    # the candidate timed the same graph in the same runtime as the latest history run
    same_graph: bool = False

    @property
    def reference(self) -> float:
        return stats.median(self.medians)

    @property
    def candidate_median(self) -> float:
        return stats.median(self.candidate)

    @property
    def log_ratio(self) -> float:
        return math.log(self.candidate_median / self.reference)


def build_series(
    metric: Metric, history: Sequence[dict[CellKey, Record]], c: Record, skipped: NotCompared
) -> Series | None:
    past = [h[c.cell.key] for h in history if c.cell.key in h]
    usable = [
        (s, r)
        for r in past
        if r.status == c.status and (s := metric.samples(r)) and stats.median(s) > 0
    ]
    sc = metric.samples(c)
    if sc is None or not usable:
        if sc is not None and past:
            skipped.add(f"{metric.name}: no history with the same status")
        return None
    if stats.median(sc) <= 0:
        skipped.add(f"{metric.name}: not positive")
        return None
    latest = usable[-1][1]
    medians = tuple(stats.median(s) for s, _ in usable)
    return Series(c, medians, usable[-1][0], sc, same_graph=c.same_graph_as(latest))


def night_shift(series: Sequence[Series], t: Thresholds) -> float:
    """The median log-ratio of all series, candidate vs reference: tonight's machine-wide
    drift, divided out before one series is judged. 0 with too few series to tell."""
    if len(series) < t.min_series_for_shift:
        return 0.0
    return stats.median([s.log_ratio for s in series])


def _history_evidence(metric: Metric, s: Series, shift: float) -> str:
    return (
        f"reference {s.reference:.4g} {metric.unit} (median of {len(s.medians)} runs) -> "
        f"{s.candidate_median:.4g} {metric.unit}; raw x{math.exp(s.log_ratio):.3f}, "
        f"night-wide shift x{math.exp(shift):.3f} divided out"
    )


def judge_against_history(metric: Metric, s: Series, shift: float, t: Thresholds) -> Verdict:
    """max(floor, k * robust sigma of past run-to-run log-ratios) on the shift-adjusted ratio;
    with too short a history the floor, plus the rank test against the latest run."""
    floor = metric.floor(t)
    noise_thr = stats.noise_log_threshold(
        s.medians, floor=floor, k=t.noise_k, min_changes=t.min_history_changes
    )
    log_thr = noise_thr if noise_thr is not None else math.log1p(floor)
    adjusted = s.log_ratio - shift
    moved = direction_of(adjusted, log_thr, s.candidate_median - s.reference, metric.min_abs(t))
    ratio, threshold = math.exp(adjusted), math.exp(log_thr)
    evidence = _history_evidence(metric, s, shift)
    if noise_thr is not None:
        sigma = stats.robust_sigma(stats.log_ratios(s.medians))
        evidence += f"; threshold = max(floor {floor:.0%}, {t.noise_k:g} x noise {sigma:.1%})"
        return Verdict(moved, ratio, threshold, evidence, backed=True)
    evidence += (
        f"; history too short for a noise estimate ({len(s.medians)} runs): {floor_text(metric, t)}"
    )
    if moved and len(s.latest_samples) >= 2 and len(s.candidate) >= 2:
        agrees, test = rank_test(s.candidate, s.latest_samples, moved, t)
        evidence += f"; against the latest run: {test}"
        return Verdict(moved if agrees else 0, ratio, threshold, evidence, backed=True)
    return Verdict(moved, ratio, threshold, evidence, backed=False)


def _night_shift_finding(metric: Metric, shift: float, n: int, t: Thresholds) -> Finding:
    message = (
        f"{metric.label} moved x{math.exp(shift):.2f} across all {n} series tonight (machine "
        "drift or a change that hits everything); divided out of each series"
    )
    return Finding(
        "night_shift",
        WARNING,
        message,
        metric=metric.name,
        ratio=math.exp(shift),
        threshold=1 + metric.floor(t),
    )


def noisy_findings_against_history(
    history: Sequence[Run], cand: Sequence[Record], t: Thresholds, skipped: NotCompared
) -> list[Finding]:
    """Each series judged by its own noise. ORT latency of a cell whose graph and runtime
    are those of the latest history run never alerts; those cells give the night's machine
    drift, and a common shift of the changed ones is a finding of its own."""
    tables = [h.by_cell() for h in history]
    found: list[Finding] = []
    for metric in METRICS:
        series = [s for c in cand if (s := build_series(metric, tables, c, skipped))]
        unchanged, changed = split_by_graph(metric, series, [s.same_graph for s in series])
        for _ in unchanged:
            skipped.add(f"{metric.name}: {SAME_GRAPH}")
        if not unchanged:  # the night-wide shift of all series, as before
            shift = night_shift(changed, t)
            if abs(shift) > math.log1p(metric.floor(t)):
                found.append(_night_shift_finding(metric, shift, len(changed), t))
        else:
            drift = drift_of([s.log_ratio for s in unchanged], [s.log_ratio for s in changed], t)
            shift = drift.machine
            if f := shift_finding(metric, drift, t, where="tonight against the history"):
                found.append(f)
        for s in changed:
            v = judge_against_history(metric, s, shift, t)
            if f := metric_finding(metric, v, s.record, s.reference, s.candidate_median):
                found.append(f)
    return found
