"""The trend report over the run history (trends.md, trends.html): the runs, and the cells
flagged slower than their recent median."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from harness.report.data import DEFAULT_THRESHOLD, PLOT_TITLES, pass_rate
from harness.report.document import (
    MISSING,
    Document,
    Image,
    Paragraph,
    Table,
    Text,
    fmt,
    sub,
    table,
)
from harness.report.trends import (
    TRACKED_VERSIONS,
    RunLike,
    TrendSeries,
    suite_trend_data,
    trend_data,
    versions,
)


def build_trend_report(
    runs: Sequence[RunLike],
    *,
    images: Mapping[str, str] | None = None,
    threshold: float = DEFAULT_THRESHOLD,
) -> Document:
    figures = {name: Image(PLOT_TITLES[name], path) for name, path in (images or {}).items()}
    if not runs:
        return Document("0 runs in the history", "Trends over the run history", ())
    trends = trend_data(runs, threshold=threshold, max_series=10**9)
    recent = [s for s in trends.series if any(s.regression[-trends.window :])]
    latest = sum(s.regression[-1] for s in trends.series)
    head = (
        f"{len(runs)} runs from {trends.runs[0]} to {trends.runs[-1]}: of {trends.total_series} cells, "
        f"{latest} slower than their recent median +{threshold:.0%} in the latest run, "
        f"{len(recent)} in the last {trends.window} runs"
    )
    flagged = sub(
        f"Cells flagged slower in the last {trends.window} runs",
        Paragraph(
            f"A run is flagged when its ORT p50 exceeds the median of the previous {trends.window} "
            f"runs by more than {threshold:.0%}; a lasting step stops being flagged once it fills that window."
        ),
        _flagged_table(recent, trends.runs, trends.window) if recent else Paragraph("None."),
        figures.get("trends"),
    )
    sections = (sub("Runs", _runs_table(runs), figures.get("suite_trend")), flagged)
    return Document(head, "Trends over the run history", sections)


def _flagged_table(series: Sequence[TrendSeries], runs: Sequence[str], window: int) -> Table:
    rows = []
    for s in series:
        first = len(runs) - window + s.regression[-window:].index(True)
        first = max(first, s.regression.index(True))
        flagged = [
            runs[i] for i, flag in enumerate(s.regression) if flag and i >= len(runs) - window
        ]
        rows.append(
            (
                Text(s.cell),
                Text(", ".join(flagged)),
                Text(fmt(s.baseline[first])),
                Text(fmt(s.median[-1])),
                Text(fmt(_ratio(s.median[-1], s.baseline[first]), "×")),
            )
        )
    headers = ("cell", "flagged runs", "p50 before (ms)", "latest p50 (ms)", "latest / before")
    return table(headers, rows, noun="cells")


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _runs_table(runs: Sequence[RunLike]) -> Table:
    suite = suite_trend_data(runs)
    rows = [
        (
            Text(run.run_id),
            Text(label),
            *(Text(str(versions(run).get(k) or MISSING)) for k in TRACKED_VERSIONS),
            Text(fmt(pass_rate(run.records), "%")),
            Text(fmt(speedup, "×")),
        )
        for run, label, speedup in zip(runs, suite.runs, suite.geomean_speedup, strict=True)
    ]
    headers = ("run", "date", *TRACKED_VERSIONS, "work", "geomean speedup")
    return table(headers, rows, noun="runs")
