"""Noisy findings against one baseline run: the ratio of medians beyond a threshold, backed
by a rank test on the raw samples, after the run-wide drift is divided out."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from harness import stats
from harness.compare.findings import Finding
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
from harness.store.records import Record

Samples = tuple[float, ...]


@dataclass(frozen=True)
class RunDrift:
    """How all cells of a metric moved between the two runs: the median log-ratio (`shift`,
    divided out) and the robust spread of the log-ratios around it (`noise`, the pair's
    run-to-run noise: what a cell's ratio must stand out of). Zero with too few cells."""

    shift: float = 0.0
    noise: float = 0.0
    cells: int = 0


def run_drift(log_ratios: Sequence[float], t: Thresholds) -> RunDrift:
    if len(log_ratios) < t.min_series_for_shift:
        return RunDrift(cells=len(log_ratios))
    return RunDrift(stats.median(log_ratios), stats.robust_sigma(log_ratios), cells=len(log_ratios))


def _run_threshold_text(metric: Metric, t: Thresholds, drift: RunDrift) -> str:
    if not drift.noise:
        return floor_text(metric, t)
    return (
        f"threshold = max({floor_text(metric, t)}, {t.noise_k:g} x run-to-run noise"
        f" {drift.noise:.1%} across {drift.cells} cells)"
    )


def judge_against_run(
    metric: Metric,
    base: Sequence[float],
    cand: Sequence[float],
    t: Thresholds,
    drift: RunDrift | None = None,
) -> Verdict:
    """One baseline run: the ratio of medians beyond the threshold, and (with several
    samples on each side) a Mann-Whitney U test at `alpha` agreeing on the direction. The
    run-wide shift is divided out first; the threshold is the floor, or k times the pair's
    run-to-run noise where that is larger (seen here: on 2 shared cores the cells of two
    runs of one build moved +-10% around each other, each with hundreds of samples that a
    rank test alone would call significant)."""
    drift = drift or RunDrift()
    scale = math.exp(drift.shift)
    cand = [x / scale for x in cand]
    mb, mc = stats.median(base), stats.median(cand)
    ratio = mc / mb
    log_thr = max(math.log1p(metric.floor(t)), t.noise_k * drift.noise)
    moved = direction_of(math.log(ratio), log_thr, mc - mb, metric.min_abs(t))
    medians = f"median {mb:.4g} -> {mc:.4g} {metric.unit}"
    if drift.shift:
        medians += f" (run-wide shift x{scale:.3f} divided out)"
    threshold = _run_threshold_text(metric, t, drift)
    if len(base) < 2 or len(cand) < 2:
        evidence = f"one sample per run: the {threshold} alone decides; {medians}"
        return Verdict(moved, ratio, math.exp(log_thr), evidence, backed=False)
    agrees, test = rank_test(cand, base, moved, t)
    evidence = f"{medians} ({len(base)} vs {len(cand)} samples), {threshold}; {test}"
    return Verdict(moved if agrees else 0, ratio, math.exp(log_thr), evidence, backed=True)


def paired_samples(
    metric: Metric, b: Record, c: Record, skipped: NotCompared
) -> tuple[tuple[float, ...], tuple[float, ...]] | None:
    """Both records' samples of `metric`, when they can be compared (else counted why not)."""
    sb, sc = metric.samples(b), metric.samples(c)
    if sb is None or sc is None:
        if sb is not None or sc is not None:
            skipped.add(f"{metric.name}: missing on one side")
        return None
    if b.status != c.status:
        skipped.add(f"{metric.name}: status differs")
        return None
    if stats.median(sb) <= 0 or stats.median(sc) <= 0:
        skipped.add(f"{metric.name}: not positive")
        return None
    return sb, sc


def noisy_findings_against_run(
    pairs: Sequence[tuple[Record, Record]], t: Thresholds, skipped: NotCompared
) -> list[Finding]:
    """Each metric's findings: a cell whose graph and runtime did not change never alerts on
    ORT latency (its cells measure the machine's drift instead); a common shift of the
    changed cells is a finding of its own."""
    found: list[Finding] = []
    for metric in METRICS:
        paired = [(b, c, p) for b, c in pairs if (p := paired_samples(metric, b, c, skipped))]
        unchanged, changed = split_by_graph(
            metric, paired, [b.same_graph_as(c) for b, c, _ in paired]
        )
        for _ in unchanged:
            skipped.add(f"{metric.name}: {SAME_GRAPH}")
        drift = drift_of(_log_ratios(unchanged), _log_ratios(changed), t)
        several = all(len(sb) > 1 and len(sc) > 1 for _, _, (sb, sc) in changed)
        where = "between the two runs"
        if f := shift_finding(metric, drift, t, where=where, alarm=several):
            found.append(f)
        cell_drift = RunDrift(drift.machine, drift.noise, drift.cells)
        for b, c, (sb, sc) in changed:
            if f := cell_finding_against_run(metric, b, c, sb, sc, t, cell_drift):
                found.append(f)
    return found


def _log_ratios(paired: Sequence[tuple[Record, Record, tuple[Samples, Samples]]]) -> list[float]:
    return [math.log(stats.median(sc) / stats.median(sb)) for _, _, (sb, sc) in paired]


def cell_finding_against_run(
    metric: Metric,
    base: Record,
    cand: Record,
    base_samples: Sequence[float],
    cand_samples: Sequence[float],
    t: Thresholds,
    drift: RunDrift,
) -> Finding | None:
    """One cell's metric judged against one baseline run, given how all cells moved."""
    verdict = judge_against_run(metric, base_samples, cand_samples, t, drift)
    base_median, cand_median = stats.median(base_samples), stats.median(cand_samples)
    return metric_finding(
        metric, verdict, cand, base_median, cand_median, single_run=True, baseline=base
    )
