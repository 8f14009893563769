"""The exporters' cold start across runs: what a fresh worker process pays for its first
export with each exporter (the manifest's `cold_start`, one figure per worker process,
exporter and variant). It regresses when an exporter's start-up regresses (a new lazy
import, a slower registry), which the per-model figures, taken after warm-up, never show.

Judged like export time and memory: the ratio of the runs' medians against a floor;
against one run a regression warns (a run has one figure per worker process, too few
to tell noise from change), against history each series gets its own noise threshold.
Time is judged on the process's CPU time: a shared machine's other work stretches the wall
time of the same start-up by half and more (an A/A pair of runs in CI: x1.47), not its CPU
time. Runs written before CPU time was recorded are judged on wall time.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from harness import stats
from harness.compare.findings import BLOCKING, IMPROVEMENT, WARNING, Finding
from harness.compare.thresholds import Thresholds
from harness.store.manifest import Manifest
from harness.store.runs import Run

Key = tuple[str, str]  # (exporter, variant)
_CLOCKS = {"cpu_seconds": " (CPU time)", "seconds": " (wall time)"}


@dataclass(frozen=True)
class ColdMetric:
    field: str
    label: str
    unit: str
    floor_field: str
    min_abs_field: str | None = None
    older_field: str | None = None  # judged on where a run lacks `field` (an older harness)


COLD_METRICS = (
    ColdMetric("cpu_seconds", "exporter cold start", "s", "export_time_floor", None, "seconds"),
    ColdMetric("peak_rss_mb", "exporter cold start memory", "MiB", "memory_floor", "memory_abs_mb"),
)


def cold_start_samples(manifest: Manifest, field: str) -> dict[Key, list[float]]:
    """Figures per (exporter, variant); measurements that failed carry none."""
    found: dict[Key, list[float]] = defaultdict(list)
    for entry in manifest.cold_start:
        value = getattr(entry, field)
        if value is not None and value > 0:
            found[(entry.exporter_name, entry.variant_name)].append(float(value))
    return dict(found)


def cold_start_findings(history: Sequence[Run], cand: Run, t: Thresholds) -> list[Finding]:
    """Against the runs in `history` (one baseline run, or the history oldest first)."""
    found = []
    for metric in COLD_METRICS:
        field = _shared_field(metric, [*history, cand])
        now = cold_start_samples(cand.manifest, field)
        past = [cold_start_samples(run.manifest, field) for run in history]
        for key in sorted(now):
            medians = [stats.median(p[key]) for p in past if key in p]
            if medians:
                finding = _judge(metric, field, key, medians, stats.median(now[key]), t)
                found += [finding] if finding else []
    return found


def _shared_field(metric: ColdMetric, runs: Sequence[Run]) -> str:
    """`metric.field`, or its older field where a run has only that one (an older
    harness's run): the runs are judged on one figure."""
    older = metric.older_field
    if older and any(
        cold_start_samples(run.manifest, older)
        and not cold_start_samples(run.manifest, metric.field)
        for run in runs
    ):
        return older
    return metric.field


def _judge(
    metric: ColdMetric, field: str, key: Key, medians: list[float], now: float, t: Thresholds
) -> Finding | None:
    floor = float(getattr(t, metric.floor_field))
    min_abs = float(getattr(t, metric.min_abs_field)) if metric.min_abs_field else 0.0
    noise = stats.noise_log_threshold(
        medians, floor=floor, k=t.noise_k, min_changes=t.min_history_changes
    )
    log_threshold = noise if noise is not None else math.log1p(floor)
    reference = stats.median(medians)
    log_ratio = math.log(now / reference)
    if abs(now - reference) < min_abs or abs(log_ratio) <= log_threshold:
        return None
    worse = log_ratio > 0
    severity = (BLOCKING if noise is not None else WARNING) if worse else IMPROVEMENT
    exporter, variant = key
    where = exporter if variant == "base" else f"{exporter} [{variant}]"
    ratio, threshold = math.exp(log_ratio), math.exp(log_threshold)
    basis = (
        f"{t.noise_k:g} x its noise over {len(medians)} runs"
        if noise is not None
        else f"floor {floor:.0%} (too few runs for a noise estimate: a warning)"
    )
    label = metric.label + _CLOCKS.get(field, "")
    return Finding(
        kind="metric_regressed" if worse else "metric_improved",
        severity=severity,
        message=f"{label} of {where} {'worse' if worse else 'better'}: x{ratio:.2f} (threshold x{threshold:.2f})",
        metric=f"cold_start_{field}",
        baseline=reference,
        candidate=now,
        ratio=ratio,
        threshold=threshold,
        evidence=f"median {reference:.4g} -> {now:.4g} {metric.unit}; threshold {basis}",
    )
