"""The numbers behind the history plots: is any cell, or the suite as a whole, getting
slower or better night after night? Pure functions over runs, like harness.report.data."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from harness.report.data import DEFAULT_THRESHOLD, pass_rate
from harness.stats import geomean, median
from harness.store.manifest import Manifest, PackageVersions
from harness.store.records import Latency, Record

TRACKED_VERSIONS = ("torch", "onnxscript", "onnxruntime")
MIN_BASELINE_RUNS = 3  # fewer earlier runs make no baseline: one noisy night is not a norm


class RunLike(Protocol):
    """One run of the history (`harness.history.db.HistoryRun` or anything shaped like it)."""

    @property
    def run_id(self) -> str: ...
    @property
    def started(self) -> str: ...
    @property
    def manifest(self) -> Manifest: ...
    @property
    def records(self) -> Sequence[Record]: ...


@dataclass(frozen=True)
class VersionChange:
    index: int  # the first run with the new versions
    text: str  # "torch 2.9.0→2.10.0"


def versions(run: RunLike) -> PackageVersions:
    """The base variant's package versions of a run."""
    return run.manifest.variant_versions("base")


def version_changes(runs: Sequence[RunLike]) -> tuple[VersionChange, ...]:
    changes = []
    for i in range(1, len(runs)):
        before, after = versions(runs[i - 1]), versions(runs[i])
        moved = [
            f"{name} {before.get(name)}→{after.get(name)}"
            for name in TRACKED_VERSIONS
            if before.get(name) != after.get(name)
        ]
        if moved:
            changes.append(VersionChange(i, ", ".join(moved)))
    return tuple(changes)


def run_labels(runs: Sequence[RunLike]) -> tuple[str, ...]:
    """The runs' dates, with the time where two runs share a day."""
    dates = [r.started[:10] or r.run_id for r in runs]
    if len(set(dates)) == len(dates):
        return tuple(dates)
    return tuple(r.started[:16].replace("T", " ") or r.run_id for r in runs)


# == per cell ==================================================================================


@dataclass(frozen=True)
class TrendSeries:
    cell: str
    median: tuple[float | None, ...]  # ORT p50 per run (ms); None: not timed that night
    q1: tuple[float | None, ...]
    q3: tuple[float | None, ...]
    baseline: tuple[float | None, ...]  # median of the previous `window` medians
    regression: tuple[bool, ...]


@dataclass(frozen=True)
class TrendData:
    """Is any cell getting slower night after night? ORT p50 per cell over the runs."""

    runs: tuple[str, ...]
    threshold: float
    window: int
    series: tuple[TrendSeries, ...]  # the `max_series` most interesting, regressions first
    total_series: int
    version_changes: tuple[VersionChange, ...]

    @property
    def is_empty(self) -> bool:
        return not self.series


def _quartiles(latency: Latency | None) -> tuple[float | None, float | None, float | None]:
    if latency is None:
        return None, None, None
    return latency.quartile(25), latency.p50, latency.quartile(75)


def _rolling_baseline(values: Sequence[float | None], window: int) -> tuple[float | None, ...]:
    """The median of the previous `window` values (None before MIN_BASELINE_RUNS of them)."""
    out: list[float | None] = []
    for i in range(len(values)):
        previous = [v for v in values[:i] if v is not None][-window:]
        out.append(median(previous) if len(previous) >= min(MIN_BASELINE_RUNS, window) else None)
    return tuple(out)


def _trend_series(
    cell: str, latencies: Sequence[Latency | None], threshold: float, window: int
) -> TrendSeries:
    q1, mid, q3 = zip(*(_quartiles(lat) for lat in latencies), strict=True)
    baseline = _rolling_baseline(mid, window)
    regression = tuple(
        m is not None and b is not None and m > b * (1 + threshold)
        for m, b in zip(mid, baseline, strict=True)
    )
    return TrendSeries(cell, tuple(mid), tuple(q1), tuple(q3), baseline, regression)


def _interest(s: TrendSeries) -> tuple[Any, ...]:
    """Regressed in the last run first, then most regressions, then largest last change."""
    last = next(
        ((m, b) for m, b in zip(reversed(s.median), reversed(s.baseline), strict=True) if m and b),
        None,
    )
    change = abs(last[0] / last[1] - 1) if last else 0.0
    return (not s.regression[-1], -sum(s.regression), -change, s.cell)


def trend_data(
    runs: Sequence[RunLike],
    *,
    threshold: float = DEFAULT_THRESHOLD,
    window: int = 7,
    max_series: int = 12,
) -> TrendData:
    cells: dict[Any, str] = {}
    for run in runs:
        for r in run.records:
            cells.setdefault(r.cell.key, r.cell.label())
    by_run = [{r.cell.key: r.ort.latency for r in run.records} for run in runs]
    series = [
        _trend_series(label, [lat.get(key) for lat in by_run], threshold, window)
        for key, label in cells.items()
    ]
    series = [s for s in series if any(m is not None for m in s.median)]
    return TrendData(
        runs=run_labels(runs),
        threshold=threshold,
        window=window,
        series=tuple(sorted(series, key=_interest)[:max_series]),
        total_series=len(series),
        version_changes=version_changes(runs),
    )


# == the suite =================================================================================


@dataclass(frozen=True)
class SuiteTrendData:
    """Is the suite as a whole getting better? Pass rate and geomean speedup per run."""

    runs: tuple[str, ...]
    pass_rate: tuple[float | None, ...]  # percent of attempted cells that work
    geomean_speedup: tuple[float | None, ...]  # over cells with a speedup
    version_changes: tuple[VersionChange, ...]

    @property
    def is_empty(self) -> bool:
        return not self.runs


def _geomean_speedup(records: Sequence[Record]) -> float | None:
    speedups = [r.speedup for r in records if r.speedup is not None and r.speedup > 0]
    return geomean(speedups) if speedups else None


def suite_trend_data(runs: Sequence[RunLike]) -> SuiteTrendData:
    return SuiteTrendData(
        runs=run_labels(runs),
        pass_rate=tuple(pass_rate(run.records) for run in runs),
        geomean_speedup=tuple(_geomean_speedup(run.records) for run in runs),
        version_changes=version_changes(runs),
    )


def trend_plot_data(
    runs: Sequence[RunLike], *, threshold: float = DEFAULT_THRESHOLD
) -> dict[str, Any]:
    """The data of the history plots, by plot name."""
    return {
        "trends": trend_data(runs, threshold=threshold),
        "suite_trend": suite_trend_data(runs),
    }
