"""The numbers behind each plot of a run: pure `*_data(records)` functions returning frozen
dataclasses (golden-tested), which harness.report.plots draws and the report's tables reuse.

Plots stay readable at hundreds of models: above a row limit a plot's data keeps the most
telling rows (the pass matrix: rows with a failure, worst first; export cost: the slowest
exports; latency: the smallest speedups; coverage: problem ops first) and counts the rest,
which the plot's title states.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.coverage import matrix as coverage
from harness.report.layout import Layout, RowKey, layout
from harness.stats import PERCENTILE_MIN_SAMPLES, median, percentile
from harness.store.records import Latency, Record
from harness.store.status import Status

DEFAULT_THRESHOLD = 0.10  # the +-10% band of the comparison and trend plots
MAX_MATRIX_ROWS = 50  # beyond that the pass matrix plot draws the rows with a failure only
MAX_BAR_ROWS = 40  # beyond that a bar plot draws the most telling rows only
MAX_COVERAGE_OPS = 80  # beyond that the coverage plot draws the problem ops first, then stops
MAX_COMPARISON_ROWS = 60  # beyond that, cells within the band are counted, not drawn


# == what a cell says ==========================================================================


def status_word(record: Record) -> str:
    """'ok', 'xfail (translate)', 'export (capture)', 'numerics': status, and stage if it adds."""
    word = record.status.word
    if record.stage and record.stage not in word:
        word += f" ({record.stage})"
    return word


def opset_differs(record: Record) -> bool:
    return record.export.opset_actual is not None and record.export.opset_actual != record.opset


def pass_rate(records: Sequence[Record]) -> float | None:
    """Percent of the attempted (not skipped) cells whose model exported and passed every
    check; None when none was attempted."""
    attempted = [r for r in records if r.status.applies]
    if not attempted:
        return None
    return 100.0 * sum(r.status.exported for r in attempted) / len(attempted)


def median_or_none(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return median(present) if present else None


@dataclass(frozen=True)
class Spread:
    """A latency (or a ratio of latencies): p10, p50, p90 of the raw samples."""

    p10: float
    p50: float
    p90: float


def spread(latency: Latency | None) -> Spread | None:
    """p10-p50-p90 from the raw samples, where they are enough to say p90
    (harness.stats.PERCENTILE_MIN_SAMPLES); else the median's 95% interval around it, or
    the median alone. Without samples the bars collapse onto p50..p90."""
    if latency is None:
        return None
    if len(latency.samples) >= PERCENTILE_MIN_SAMPLES[90]:
        return Spread(percentile(latency.samples, 10), latency.p50, percentile(latency.samples, 90))
    if latency.samples:
        low, high = latency.ci_low or latency.p50, latency.ci_high or latency.p50
        return Spread(low, latency.p50, high)
    return Spread(latency.p50, latency.p50, latency.p90 or latency.p50)


def _grid(
    lay: Layout, rows: Sequence[RowKey], value: Callable[[Sequence[Record]], Any]
) -> tuple[tuple[Any, ...], ...]:
    """value(records of one row and series, all opsets) for each row x series."""
    groups: dict[tuple[RowKey, str], list[Record]] = defaultdict(list)
    for (row, column), record in lay.cells.items():
        groups[(row, lay.series_label(column))].append(record)
    return tuple(
        tuple(value(sorted(groups.get((row, s), []), key=lambda r: r.opset)) for s in lay.series())
        for row in rows
    )


def _first(rows: Sequence[RowKey], key: Callable[[RowKey], Any], limit: int) -> list[RowKey]:
    """All rows in their order when they fit, else the `limit` first by `key`."""
    return list(rows) if len(rows) <= limit else sorted(rows, key=key)[:limit]


# == 1. pass matrix ============================================================================


@dataclass(frozen=True)
class MatrixData:
    """Does each model export and run? Status per model x exporter@opset.

    Above MAX_MATRIX_ROWS rows only the rows with a failure are drawn, worst first.
    """

    rows: tuple[str, ...]
    columns: tuple[str, ...]
    status: tuple[tuple[Status | None, ...], ...]  # [row][column]; None: no such cell
    text: tuple[tuple[str, ...], ...]  # what the cell says: status word, saved opset
    omitted_passing: int = 0  # rows not drawn whose every cell passes
    omitted_failing: int = 0  # rows with a failure beyond the limit

    @property
    def is_empty(self) -> bool:
        return not self.rows and not self.omitted_passing


def _matrix_text(record: Record | None) -> str:
    if record is None:
        return ""
    text: str = record.status.word
    if record.status is Status.EXPORT_FAILED and record.stage:
        text = record.stage  # the failing export phase says more than 'export'
    if opset_differs(record):
        text += f"\nopset {record.export.opset_actual}"
    return text


def failing_rows(lay: Layout) -> list[RowKey]:
    """The rows with a failure, worst first (by the highest `Status.rank` in the row)."""
    ranks = {row: max(r.status.rank for r in lay.row_records(row)) for row in lay.rows}
    return sorted((row for row in lay.rows if ranks[row]), key=lambda row: -ranks[row])


def matrix_data(records: Sequence[Record], *, max_rows: int = MAX_MATRIX_ROWS) -> MatrixData:
    lay = layout(records)
    compact = len(lay.rows) > max_rows
    failing = failing_rows(lay) if compact else []
    rows = failing[:max_rows] if compact else list(lay.rows)
    grid = [[lay.record(row, col) for col in lay.columns] for row in rows]
    return MatrixData(
        rows=tuple(lay.row_label(r) for r in rows),
        columns=tuple(lay.column_label(c) for c in lay.columns),
        status=tuple(tuple(r.status if r else None for r in line) for line in grid),
        text=tuple(tuple(_matrix_text(r) for r in line) for line in grid),
        omitted_passing=len(lay.rows) - len(failing) if compact else 0,
        omitted_failing=len(failing) - len(rows) if compact else 0,
    )


# == 2. export time and memory =================================================================


@dataclass(frozen=True)
class ExportCostData:
    """How long does export take and how much memory, per model and exporter?

    Each value is the median over the exporter's opsets (export cost hardly depends on
    the opset); None where no cell of that model and exporter measured it. Above
    MAX_BAR_ROWS rows, the slowest exports only, slowest first.
    """

    rows: tuple[str, ...]
    series: tuple[str, ...]
    export_s: tuple[tuple[float | None, ...], ...]  # [row][series]
    peak_rss_mb: tuple[tuple[float | None, ...], ...]
    omitted: int = 0  # rows not drawn

    @property
    def is_empty(self) -> bool:
        values = [v for line in self.export_s + self.peak_rss_mb for v in line]
        return all(v is None for v in values)


def export_cost_data(records: Sequence[Record], *, max_rows: int = MAX_BAR_ROWS) -> ExportCostData:
    lay = layout(records)

    def slowest(row: RowKey) -> float:
        return -max((r.export.seconds or 0.0 for r in lay.row_records(row)), default=0.0)

    rows = _first(lay.rows, slowest, max_rows)
    return ExportCostData(
        rows=tuple(lay.row_label(r) for r in rows),
        series=lay.series(),
        export_s=_grid(lay, rows, lambda rs: median_or_none(r.export.seconds for r in rs)),
        peak_rss_mb=_grid(lay, rows, lambda rs: median_or_none(r.export.peak_rss_mb for r in rs)),
        omitted=len(lay.rows) - len(rows),
    )


# == 3. latency and speedup ====================================================================


@dataclass(frozen=True)
class LatencyData:
    """How fast is the ONNX model in ORT against eager PyTorch, per model and exporter?

    Each exporter is shown at its highest opset with a latency (that opset is in
    `opsets`); the spread is p10..p90 of the raw samples. The speedup spread divides the
    cell's eager p50 by the ORT p90 and p10. Above MAX_BAR_ROWS rows, the smallest
    speedups only (where ORT helps least), smallest first.
    """

    rows: tuple[str, ...]
    series: tuple[str, ...]
    opsets: tuple[tuple[int | None, ...], ...]  # [row][series]
    ort_ms: tuple[tuple[Spread | None, ...], ...]
    eager_ms: tuple[Spread | None, ...]  # [row]
    speedup: tuple[tuple[Spread | None, ...], ...]
    omitted: int = 0  # rows not drawn
    title: str = "How fast is the exported model? (each exporter at its highest timed opset)"

    @property
    def is_empty(self) -> bool:
        return all(s is None for line in self.ort_ms for s in line)


def _latest_timed(records: Sequence[Record]) -> Record | None:
    timed = [r for r in records if r.ort.latency is not None]
    return max(timed, key=lambda r: r.opset) if timed else None


def _speedup_spread(record: Record | None) -> Spread | None:
    if record is None or record.eager.latency is None:
        return None
    ort = spread(record.ort.latency)
    if ort is None or ort.p10 <= 0:
        return None
    eager = record.eager.latency.p50
    return Spread(eager / ort.p90, eager / ort.p50, eager / ort.p10)


def latency_data(records: Sequence[Record], *, max_rows: int = MAX_BAR_ROWS) -> LatencyData:
    lay = layout(records)

    def least_speedup(row: RowKey) -> float:
        speedups = [r.speedup for r in lay.row_records(row) if r.speedup is not None]
        return min(speedups, default=float("inf"))

    rows = _first(lay.rows, least_speedup, max_rows)
    chosen = _grid(lay, rows, _latest_timed)
    eager_rows = [
        next((spread(r.eager.latency) for r in line if r and r.eager.latency), None)
        for line in chosen
    ]
    return LatencyData(
        rows=tuple(lay.row_label(r) for r in rows),
        series=lay.series(),
        opsets=tuple(tuple(r.opset if r else None for r in line) for line in chosen),
        ort_ms=tuple(tuple(spread(r.ort.latency) if r else None for r in line) for line in chosen),
        eager_ms=tuple(eager_rows),
        speedup=tuple(tuple(_speedup_spread(r) for r in line) for line in chosen),
        omitted=len(lay.rows) - len(rows),
    )


# == 4. opset effect ===========================================================================


@dataclass(frozen=True)
class OpsetSeries:
    series: str
    opsets: tuple[int, ...]
    cells: tuple[int, ...]
    pass_rate: tuple[float | None, ...]  # percent of attempted cells that work
    reference_opset: int
    relative_latency: tuple[float | None, ...]  # median over models of p50 / p50 at reference


@dataclass(frozen=True)
class OpsetEffectData:
    """Per exporter, how do the pass rate and the latency change across opsets?"""

    series: tuple[OpsetSeries, ...]

    @property
    def is_empty(self) -> bool:
        return not self.series


def _relative_latency(
    by_opset: Mapping[int, Sequence[Record]], opset: int, reference: int
) -> float | None:
    """Median over models timed at both opsets of p50(opset) / p50(reference)."""
    base = {(r.model, r.dynamic): r.ort.latency.p50 for r in by_opset[reference] if r.ort.latency}
    ratios = [
        r.ort.latency.p50 / base[(r.model, r.dynamic)]
        for r in by_opset[opset]
        if r.ort.latency and base.get((r.model, r.dynamic))
    ]
    return median(ratios) if ratios else None


def _opset_series(name: str, records: Sequence[Record]) -> OpsetSeries:
    by_opset: dict[int, list[Record]] = defaultdict(list)
    for r in records:
        by_opset[r.opset].append(r)
    opsets = tuple(sorted(by_opset))
    return OpsetSeries(
        series=name,
        opsets=opsets,
        cells=tuple(len(by_opset[o]) for o in opsets),
        pass_rate=tuple(pass_rate(by_opset[o]) for o in opsets),
        reference_opset=opsets[0],
        relative_latency=tuple(_relative_latency(by_opset, o, opsets[0]) for o in opsets),
    )


def opset_effect_data(records: Sequence[Record]) -> OpsetEffectData:
    lay = layout(records)
    by_series: dict[str, list[Record]] = defaultdict(list)
    for (_, column), record in lay.cells.items():
        by_series[lay.series_label(column)].append(record)
    return OpsetEffectData(tuple(_opset_series(s, by_series[s]) for s in lay.series()))


# == 5. op coverage ============================================================================


def run_coverage(records: Sequence[Record]) -> coverage.Coverage:
    """The run's op coverage (harness.coverage.matrix, as `harness coverage` shows it); op
    cells name the zoo models behind each op from the built-in inventory."""
    return coverage.build_coverage(records, usage=coverage.usage_for(records))


@dataclass(frozen=True)
class CoverageData:
    """Which ops does each exporter@opset handle? Problem ops first (fails, wrong,
    unknown), then by name (OpInfos: the ones the zoo uses most first, since ~700 cannot
    all be drawn); above MAX_COVERAGE_OPS ops the rest are counted."""

    ops: tuple[str, ...]
    columns: tuple[str, ...]
    state: tuple[tuple[str | None, ...], ...]  # [op][column]: a coverage state or None
    omitted: int = 0  # ops not drawn
    what: str = "ATen ops"  # what the rows are
    # [op][column]: '3/8' where an OpInfo cell matched only some of its samples, else None
    text: tuple[tuple[str | None, ...], ...] | None = None
    omitted_ok: int = 0  # of the ops not drawn, those ok in every column

    @property
    def is_empty(self) -> bool:
        return not self.ops


_PROBLEM_ORDER = {coverage.FAILS: 0, coverage.WRONG: 1, coverage.UNKNOWN: 2, coverage.OK: 3}


def coverage_data(records: Sequence[Record], *, max_ops: int = MAX_COVERAGE_OPS) -> CoverageData:
    cov = run_coverage(records)
    opinfo = any(row.kind == coverage.OPINFO_FAMILY for row in cov.rows)

    def order(row: coverage.OpRow) -> tuple[Any, ...]:
        worst = min(_PROBLEM_ORDER[s.state] for s in row.states.values())
        if not opinfo:
            return (worst, row.op)
        failing = sum(s.state != coverage.OK for s in row.states.values())
        return (worst, -len(row.usage or ()), -failing, row.op)

    ranked = sorted(cov.rows, key=order)
    rows = ranked[:max_ops]
    return CoverageData(
        ops=tuple(row.op for row in rows),
        columns=tuple(c.label for c in cov.columns),
        state=tuple(tuple(row.state(c) for c in cov.columns) for row in rows),
        omitted=len(cov.rows) - len(rows),
        what=cov.unit,
        text=tuple(tuple(_sampled(row.states.get(c)) for c in cov.columns) for row in rows)
        if opinfo
        else None,
        omitted_ok=sum(
            all(s.state == coverage.OK for s in row.states.values()) for row in ranked[max_ops:]
        ),
    )


def _sampled(state: coverage.OpState | None) -> str | None:
    if state is None or state.samples is None or state.state == coverage.OK or not state.samples[1]:
        return None
    return f"{state.samples[0]}/{state.samples[1]}"


# == 6. comparison of two runs =================================================================


@dataclass(frozen=True)
class RatioPoint:
    cell: str
    baseline_ms: float
    candidate_ms: float
    ratio: float
    verdict: str  # "regression" | "improvement" | "within"


@dataclass(frozen=True)
class ComparisonData:
    """Which cells got slower in ORT from the baseline run to the candidate run?"""

    baseline_run: str
    candidate_run: str
    threshold: float
    points: tuple[RatioPoint, ...]  # worst (highest ratio) first
    unmatched: tuple[str, ...]  # cells without an ORT p50 in both runs

    @property
    def is_empty(self) -> bool:
        return not self.points

    def drawn(self) -> list[RatioPoint]:
        """Every point, or beyond MAX_COMPARISON_ROWS the ones outside the band."""
        if len(self.points) <= MAX_COMPARISON_ROWS:
            return list(self.points)
        return [p for p in self.points if p.verdict != "within"]


def _verdict(ratio: float, threshold: float) -> str:
    if ratio > 1 + threshold:
        return "regression"
    if ratio < 1 - threshold:
        return "improvement"
    return "within"


def comparison_data(
    baseline: Sequence[Record], candidate: Sequence[Record], *, threshold: float = DEFAULT_THRESHOLD
) -> ComparisonData:
    base = {r.cell.key: r for r in baseline}
    cand = {r.cell.key: r for r in candidate}
    points, unmatched = [], []
    for key in sorted(base.keys() | cand.keys()):
        b, c = base.get(key), cand.get(key)
        label = (c or b).cell.label()  # type: ignore[union-attr]
        if b and c and b.ort.latency and c.ort.latency and b.ort.latency.p50 > 0:
            ratio = c.ort.latency.p50 / b.ort.latency.p50
            verdict = _verdict(ratio, threshold)
            points.append(RatioPoint(label, b.ort.latency.p50, c.ort.latency.p50, ratio, verdict))
        else:
            unmatched.append(label)
    return ComparisonData(
        baseline_run=baseline[0].run_id if baseline else "",
        candidate_run=candidate[0].run_id if candidate else "",
        threshold=threshold,
        points=tuple(sorted(points, key=lambda p: (-p.ratio, p.cell))),
        unmatched=tuple(unmatched),
    )


# == the plots of a run ========================================================================

PLOT_TITLES = {
    "matrix": "Pass matrix",
    "export_cost": "Export time and memory",
    "latency": "Latency and speedup",
    "opset_effect": "Opset effect",
    "coverage": "ATen op coverage",
    "comparison": "Latency against the baseline run",
    "generation_latency": "Decode step and prefill latency",
    "trends": "Latency trends per cell",
    "suite_trend": "Suite trends",
}
