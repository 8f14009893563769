"""Noisy metrics (latency, export time, memory): what a record measured, how large a change
must be, and how a verdict on one cell becomes a finding. The verdicts themselves are in
against_run.py (one baseline run) and against_history.py (the history's runs)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from harness import stats
from harness.compare.findings import BLOCKING, IMPROVEMENT, INFO, WARNING, Finding
from harness.compare.thresholds import Thresholds
from harness.store.records import Latency, Record


@dataclass(frozen=True)
class Metric:
    """A noisy measurement of a record: its raw samples, and how large a change must be."""

    name: str
    label: str
    unit: str
    samples: Callable[[Record], tuple[float, ...] | None]
    floor_field: str  # the Thresholds field with the relative floor
    # blocking when it regresses with statistical backing; a warning otherwise
    blocks: bool
    min_abs_field: str | None = None  # the Thresholds field with an absolute floor
    # timed on the node: what other cells did beside the timing is in the finding's evidence
    timed: bool = False

    def floor(self, t: Thresholds) -> float:
        return float(getattr(t, self.floor_field))

    def min_abs(self, t: Thresholds) -> float:
        return float(getattr(t, self.min_abs_field)) if self.min_abs_field else 0.0


def _latency_samples(
    latency: Callable[[Record], Latency | None],
) -> Callable[[Record], tuple[float, ...] | None]:
    def samples(r: Record) -> tuple[float, ...] | None:
        lat = latency(r)
        if lat is None:
            return None
        return lat.samples or (lat.p50,)

    return samples


def _scalar(
    value_of: Callable[[Record], float | None],
) -> Callable[[Record], tuple[float, ...] | None]:
    def samples(r: Record) -> tuple[float, ...] | None:
        value = value_of(r)
        return None if value is None else (float(value),)

    return samples


METRICS = (
    Metric("ort_latency", "ORT latency", "ms", _latency_samples(lambda r: r.ort.latency), "latency_floor", blocks=True, min_abs_field="latency_abs_ms", timed=True),
    Metric("eager_latency", "eager latency", "ms", _latency_samples(lambda r: r.eager.latency), "latency_floor", blocks=False, min_abs_field="latency_abs_ms", timed=True),
    Metric("export_time", "export time", "s", _scalar(lambda r: r.export.seconds), "export_time_floor", blocks=True, timed=True),
    Metric("export_memory", "export peak memory", "MiB", _scalar(lambda r: r.export.peak_rss_mb), "memory_floor", blocks=True, min_abs_field="memory_abs_mb"),
    Metric("export_cuda_memory", "export peak CUDA memory", "MiB", _scalar(lambda r: r.export.peak_cuda_mb), "memory_floor", blocks=True, min_abs_field="memory_abs_mb"),
)  # fmt: skip


@dataclass(frozen=True)
class Verdict:
    """A noisy comparison's outcome for one cell and metric, before it becomes a Finding."""

    direction: int  # +1 worse, -1 better, 0 neither
    ratio: float
    threshold: float
    evidence: str
    backed: bool  # statistical evidence beyond the floor (a rank test or a noise estimate)


@dataclass
class NotCompared:
    """Counts of cell metrics that could not be compared, by reason (never a finding)."""

    counts: dict[str, int] = field(default_factory=dict)

    def add(self, reason: str) -> None:
        self.counts[reason] = self.counts.get(reason, 0) + 1


def direction_of(log_ratio: float, log_threshold: float, abs_change: float, min_abs: float) -> int:
    """+1 worse, -1 better, 0 inside the threshold or below the absolute floor."""
    if abs(abs_change) < min_abs:
        return 0
    if log_ratio > log_threshold:
        return 1
    if log_ratio < -log_threshold:
        return -1
    return 0


def rank_test(
    cand: Sequence[float], base: Sequence[float], direction: int, t: Thresholds
) -> tuple[bool, str]:
    """Whether a Mann-Whitney U test at `alpha` backs a change in `direction` with a large
    enough effect (P(slower) at least `min_prob_slower`, or at most 1 - it), and its text."""
    test = stats.mann_whitney_u(cand, base)
    if direction > 0:
        large, needs = test.prob_greater >= t.min_prob_slower, f">= {t.min_prob_slower:.2f}"
    else:
        large, needs = test.prob_greater <= 1 - t.min_prob_slower, f"<= {1 - t.min_prob_slower:.2f}"
    text = (
        f"Mann-Whitney U p={test.p_value:.2g} (alpha {t.alpha:g}),"
        f" P(slower)={test.prob_greater:.2f} (needs {needs})"
    )
    return test.p_value < t.alpha and large, text


def floor_text(metric: Metric, t: Thresholds) -> str:
    absolute = f" and {metric.min_abs(t):g} {metric.unit}" if metric.min_abs(t) else ""
    return f"floor {metric.floor(t):.0%}{absolute}"


def beside_text(sides: Sequence[tuple[str, tuple[str, ...] | None]]) -> str:
    """What ran beside each side's timing ("" where nothing did), for a finding's evidence:
    a figure timed beside other cells' work is not one timed alone."""
    named = [f"{side} ({', '.join(work)})" for side, work in sides if work]
    return f"; beside its timing: {', '.join(named)}" if named else ""


def metric_finding(
    metric: Metric,
    v: Verdict,
    r: Record,
    base: float,
    cand: float,
    *,
    single_run: bool = False,
    baseline: Record | None = None,
) -> Finding | None:
    """The finding a verdict makes, if any: a backed regression of a blocking metric blocks.
    A timed metric's evidence says what ran beside the timing of the candidate `r` (and of
    the one `baseline` record it was judged against)."""
    if v.direction == 0:
        return None
    worse = v.direction > 0
    kind = "metric_regressed" if worse else "metric_improved"
    # A single sample per run carries no noise estimate: reported, never an alarm, until
    # history gives the series its own threshold (seen here: export time x1.55 between
    # two runs of the same build on a loaded machine). Likewise a non-blocking metric
    # (eager latency: the reference, not the exporters' product) against one run.
    alarm = v.backed and (metric.blocks or not single_run)
    severity = (
        (BLOCKING if metric.blocks and v.backed else WARNING if alarm else INFO)
        if worse
        else IMPROVEMENT
    )
    message = f"{metric.label} {'worse' if worse else 'better'}: x{v.ratio:.2f} (threshold x{v.threshold:.2f})"
    return Finding(
        kind=kind,
        severity=severity,
        message=message,
        cell=r.cell,
        metric=metric.name,
        baseline=base,
        candidate=cand,
        ratio=v.ratio,
        threshold=v.threshold,
        evidence=v.evidence + (_beside_evidence(r, baseline) if metric.timed else ""),
    )


def _beside_evidence(cand: Record, baseline: Record | None) -> str:
    sides = [("baseline", baseline), ("candidate", cand)] if baseline else [("candidate", cand)]
    return beside_text([(side, r.worker.timed_beside if r.worker else None) for side, r in sides])
