"""Same graph, same speed (docs/design.md): a cell whose ONNX graph and runtime did not change
cannot have changed in ORT latency except by noise, so it never alerts; and the cells that
did not change tell how far the machine itself drifted between the two measurements.

A shift of most changed cells together is a finding of its own (an onnxruntime upgrade, a
change in every graph), never noise divided out of sight."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from harness import stats
from harness.compare.findings import INFO, WARNING, Finding
from harness.compare.metrics import Metric
from harness.compare.thresholds import Thresholds

SAME_GRAPH = "same graph and runtime (noise only, never an alert)"
# The metric whose value is a property of the graph and its runtime.
GRAPH_METRIC = "ort_latency"

T = TypeVar("T")


def split_by_graph(
    metric: Metric, items: Sequence[T], same: Sequence[bool]
) -> tuple[list[T], list[T]]:
    """(unchanged, changed) for the graph metric; (nothing, all) for the others."""
    if metric.name != GRAPH_METRIC:
        return [], list(items)
    unchanged = [x for x, s in zip(items, same, strict=True) if s]
    changed = [x for x, s in zip(items, same, strict=True) if not s]
    return unchanged, changed


@dataclass(frozen=True)
class Drift:
    """How all cells of a metric moved: `machine` (divided out of each changed cell: from
    the unchanged cells where there are enough, else from all), the changed cells' own
    common `shift` beyond it, and the robust `noise` of the reference cells."""

    machine: float = 0.0
    noise: float = 0.0
    cells: int = 0
    shift: float = 0.0
    changed: int = 0
    from_unchanged: bool = False


def drift_of(unchanged: Sequence[float], changed: Sequence[float], t: Thresholds) -> Drift:
    """From the log-ratios of the unchanged and the changed cells."""
    enough = t.min_series_for_shift
    if len(unchanged) >= enough:
        machine, noise = stats.median(unchanged), stats.robust_sigma(unchanged)
        shift = stats.median(changed) - machine if len(changed) >= enough else 0.0
        return Drift(machine, noise, len(unchanged), shift, len(changed), from_unchanged=True)
    if len(changed) < enough:
        return Drift(cells=len(changed), changed=len(changed))
    # No reference cells: the common move of all cells is both what is divided out of each
    # one (so one cell must stand out of the rest) and a finding of its own.
    middle = stats.median(changed)
    return Drift(middle, stats.robust_sigma(changed), len(changed), middle, len(changed))


def shift_finding(
    metric: Metric, drift: Drift, t: Thresholds, *, where: str, alarm: bool = True
) -> Finding | None:
    """A finding for a common shift of the changed cells beyond the metric's floor: a
    warning where `alarm` and the metric blocks, else info (as its cells' own findings are:
    against one run, export time and memory have one sample per cell)."""
    if drift.changed < t.min_series_for_shift or abs(drift.shift) <= math.log1p(metric.floor(t)):
        return None
    ratio = math.exp(drift.shift)
    reference = (
        f"relative to the {drift.cells} cells whose graph did not change (machine drift"
        f" x{math.exp(drift.machine):.3f}, the only part divided out of each cell)"
        if drift.from_unchanged
        else "no unchanged cells to tell machine drift from a change that hits everything;"
        " divided out of each cell, which is judged beyond it"
    )
    message = f"{metric.label} moved x{ratio:.2f} across {drift.changed} cells {where}: {reference}"
    return Finding(
        "run_shift",
        WARNING if metric.blocks and alarm else INFO,
        message,
        metric=metric.name,
        ratio=ratio,
        threshold=1 + metric.floor(t),
        evidence=f"median log-ratio of {drift.changed} cells {drift.shift:+.4f}",
    )
