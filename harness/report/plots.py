"""The plots of a run, of a comparison between two runs and of the run history.

Each plot answers one question and comes as a pair: a pure `*_data(...)` function that
returns the numbers the plot draws (a frozen dataclass; golden-tested) and a
`plot_*(data, path)` function that draws them. This is the only module that imports
matplotlib, and only inside the drawing functions: it draws on `matplotlib.figure.Figure`
objects, which render PNGs with the Agg canvas and touch no pyplot global state, so
importing this module (the report does, for the data functions) stays cheap.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from harness.cell.exporters import NAMES as EXPORTERS
from harness.stats import geomean, median, percentile
from harness.store.records import Latency, Record

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

DPI = 110
DEFAULT_THRESHOLD = 0.10  # the +-10% band of the comparison and trend plots

# -- status colours: one palette for the matrix plot, the HTML report and their legends --


@dataclass(frozen=True)
class StatusClass:
    """A group of statuses drawn in one colour (Okabe-Ito, colour-blind safe)."""

    label: str
    colour: str
    text_colour: str


STATUS_CLASSES = {
    "ok": StatusClass("ok", "#009E73", "#FFFFFF"),
    "xfail": StatusClass("xfail (expected failure)", "#F0E442", "#000000"),
    "xpass": StatusClass("xpass (expected failure passed)", "#56B4E9", "#000000"),
    "skipped": StatusClass("skipped / not run", "#DDDDDD", "#000000"),
    "export": StatusClass("export failed", "#D55E00", "#FFFFFF"),
    "ort": StatusClass("checker / ORT failed", "#E69F00", "#000000"),
    "numerics": StatusClass("numerics / dynamic mismatch", "#CC79A7", "#000000"),
    "timeout": StatusClass("timeout", "#0072B2", "#FFFFFF"),
    "crashed": StatusClass("crashed / oom / harness error", "#333333", "#FFFFFF"),
}
CLASS_OF_STATUS = {
    "ok": "ok",
    "xfail": "xfail",
    "xpass": "xpass",
    "skipped": "skipped",
    "not_attempted": "skipped",
    "export_failed": "export",
    "checker_failed": "ort",
    "ort_load_failed": "ort",
    "ort_run_failed": "ort",
    "numerics_mismatch": "numerics",
    "dynamic_mismatch": "numerics",
    "timeout": "timeout",
    "crashed": "crashed",
    "oom": "crashed",
    "harness_error": "crashed",
}
# The short word a status is shown as in a matrix cell.
STATUS_WORD = {
    "ok": "ok",
    "xfail": "xfail",
    "xpass": "xpass",
    "skipped": "skipped",
    "not_attempted": "not run",
    "export_failed": "export",
    "checker_failed": "checker",
    "ort_load_failed": "ort load",
    "ort_run_failed": "ort run",
    "numerics_mismatch": "numerics",
    "dynamic_mismatch": "dynamic",
    "timeout": "timeout",
    "crashed": "crashed",
    "oom": "oom",
    "harness_error": "harness",
}
# Exporter series colours (Paul Tol's 'bright', without its red and green, which the
# status palette uses for failure and success).
SERIES_COLOURS = ("#4477AA", "#CCBB44", "#AA3377", "#66CCEE", "#BBBBBB", "#222255")
EAGER_COLOUR = "#777777"
REGRESSION_COLOUR = "#D55E00"
IMPROVEMENT_COLOUR = "#0072B2"


def status_class(status: str) -> StatusClass:
    return STATUS_CLASSES[CLASS_OF_STATUS.get(status, "crashed")]


def status_word(record: Record) -> str:
    """'ok', 'xfail (translate)', 'export (capture)', 'numerics': status, and stage if it adds."""
    word = STATUS_WORD.get(record.status, record.status)
    if record.stage and record.status not in ("ok", "skipped") and record.stage not in word:
        word += f" ({record.stage})"
    return word


def opset_differs(record: Record) -> bool:
    return record.opset_actual is not None and record.opset_actual != record.opset


# -- the layout every table and plot of a run shares ---------------------------------------

RowKey = tuple[str, bool]  # (model, dynamic)


@dataclass(frozen=True)
class Column:
    exporter: str
    opset: int
    device: str = "cpu"
    variant: str = "base"


def _exporter_rank(exporter: str) -> int:
    return EXPORTERS.index(exporter) if exporter in EXPORTERS else len(EXPORTERS)


def _column_order(c: Column) -> tuple[Any, ...]:
    return (
        _exporter_rank(c.exporter),
        c.exporter,
        c.device,
        c.opset,
        c.variant != "base",
        c.variant,
    )


@dataclass(frozen=True, eq=False)
class Layout:
    """Rows (model, shape) x columns (exporter@opset [device] [variant]) of a run.

    Device and variant appear in labels only when the run has more than one of them.
    """

    rows: tuple[RowKey, ...]
    columns: tuple[Column, ...]
    cells: Mapping[tuple[RowKey, Column], Record]
    show_device: bool
    show_variant: bool

    def record(self, row: RowKey, column: Column) -> Record | None:
        return self.cells.get((row, column))

    def row_label(self, row: RowKey) -> str:
        return f"{row[0]} (dynamic)" if row[1] else row[0]

    def column_label(self, column: Column) -> str:
        return self._suffixed(f"{column.exporter}@{column.opset}", column)

    def series_label(self, column: Column) -> str:
        """The exporter (with device/variant where shown): a series across opsets."""
        return self._suffixed(column.exporter, column)

    def _suffixed(self, text: str, column: Column) -> str:
        if self.show_device:
            text += f" {column.device}"
        if self.show_variant and column.variant != "base":
            text += f" [{column.variant}]"
        return text

    def series(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(self.series_label(c) for c in self.columns))


def row_key(record: Record) -> RowKey:
    return (record.model, record.dynamic)


def column_of(record: Record) -> Column:
    return Column(record.exporter, record.opset, record.device, record.variant)


def layout(records: Iterable[Record]) -> Layout:
    """The grid of a run; a cell recorded twice (a retry) keeps its last record."""
    cells = {(row_key(r), column_of(r)): r for r in records}
    rows = tuple(sorted({row for row, _ in cells}))
    columns = tuple(sorted({col for _, col in cells}, key=_column_order))
    return Layout(
        rows=rows,
        columns=columns,
        cells=cells,
        show_device=len({c.device for c in columns}) > 1,
        show_variant=len({c.variant for c in columns}) > 1,
    )


# -- small pure helpers ----------------------------------------------------------------------


def works(record: Record) -> bool:
    """The cell exported and ran correctly (what a pass rate counts)."""
    return record.status in ("ok", "xpass")


def pass_rate(records: Sequence[Record]) -> float | None:
    """Percent of the attempted (not skipped) cells that work; None when none was attempted."""
    attempted = [r for r in records if r.status != "skipped"]
    if not attempted:
        return None
    return 100.0 * sum(works(r) for r in attempted) / len(attempted)


def _median_or_none(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return median(present) if present else None


@dataclass(frozen=True)
class Spread:
    """A latency (or a ratio of latencies): p10, p50, p90 of the raw samples."""

    p10: float
    p50: float
    p90: float


def spread(latency: Latency | None) -> Spread | None:
    """p10-p50-p90 from the raw samples; without samples the bars collapse onto p50..p90."""
    if latency is None:
        return None
    if latency.samples:
        return Spread(percentile(latency.samples, 10), latency.p50, percentile(latency.samples, 90))
    return Spread(latency.p50, latency.p50, latency.p90)


def _spans_decades(values: Iterable[float | None], ratio: float = 20.0) -> bool:
    positive = [v for v in values if v is not None and v > 0]
    return bool(positive) and max(positive) / min(positive) >= ratio


def _grid(lay: Layout, value: Callable[[Sequence[Record]], Any]) -> tuple[tuple[Any, ...], ...]:
    """value(records of one row and series, all opsets) for each row x series."""
    groups: dict[tuple[RowKey, str], list[Record]] = defaultdict(list)
    for (row, column), record in lay.cells.items():
        groups[(row, lay.series_label(column))].append(record)
    return tuple(
        tuple(value(sorted(groups.get((row, s), []), key=lambda r: r.opset)) for s in lay.series())
        for row in lay.rows
    )


# == 1. pass matrix ============================================================================


@dataclass(frozen=True)
class MatrixData:
    """Does each model export and run? Status per model x exporter@opset."""

    rows: tuple[str, ...]
    columns: tuple[str, ...]
    status: tuple[tuple[str | None, ...], ...]  # [row][column]; None: no such cell
    text: tuple[tuple[str, ...], ...]  # what the cell says: status word, saved opset

    @property
    def is_empty(self) -> bool:
        return not self.rows


def _matrix_text(record: Record | None) -> str:
    if record is None:
        return ""
    text = (
        record.stage
        if record.status == "export_failed" and record.stage
        else STATUS_WORD.get(record.status, record.status)
    )
    if opset_differs(record):
        text += f"\nopset {record.opset_actual}"
    return text


def matrix_data(records: Sequence[Record]) -> MatrixData:
    lay = layout(records)
    grid = [[lay.record(row, col) for col in lay.columns] for row in lay.rows]
    return MatrixData(
        rows=tuple(lay.row_label(r) for r in lay.rows),
        columns=tuple(lay.column_label(c) for c in lay.columns),
        status=tuple(tuple(r.status if r else None for r in line) for line in grid),
        text=tuple(tuple(_matrix_text(r) for r in line) for line in grid),
    )


def plot_matrix(data: MatrixData, path: Path) -> Path:
    fig = _figure(max(8.0, 3.0 + 0.95 * len(data.columns)), 2.4 + 0.32 * len(data.rows))
    ax = fig.add_subplot()
    colours = [[_cell_colour(s) for s in line] for line in data.status]
    _heat_table(ax, colours, data.rows, data.columns)
    for i, line in enumerate(data.text):
        for j, text in enumerate(line):
            status = data.status[i][j]
            if status is not None:
                colour = status_class(status).text_colour
                ax.text(j, i, text, ha="center", va="center", fontsize=7, color=colour)
    present = {CLASS_OF_STATUS.get(s, "crashed") for line in data.status for s in line if s}
    _status_legend(fig, [STATUS_CLASSES[k] for k in STATUS_CLASSES if k in present])
    ax.set_title(
        "Does each model export and run correctly?\n"
        "cell text: status or failing stage; 'opset N': the opset actually saved",
        fontsize=10,
    )
    return _save(fig, path)


def _cell_colour(status: str | None) -> str:
    return "#FFFFFF" if status is None else status_class(status).colour


# == 2. export time and memory =================================================================


@dataclass(frozen=True)
class ExportCostData:
    """How long does export take and how much memory, per model and exporter?

    Each value is the median over the exporter's opsets (export cost hardly depends on
    the opset); None where no cell of that model and exporter measured it.
    """

    rows: tuple[str, ...]
    series: tuple[str, ...]
    export_s: tuple[tuple[float | None, ...], ...]  # [row][series]
    peak_rss_mb: tuple[tuple[float | None, ...], ...]

    @property
    def is_empty(self) -> bool:
        values = [v for line in self.export_s + self.peak_rss_mb for v in line]
        return all(v is None for v in values)


def export_cost_data(records: Sequence[Record]) -> ExportCostData:
    lay = layout(records)
    return ExportCostData(
        rows=tuple(lay.row_label(r) for r in lay.rows),
        series=lay.series(),
        export_s=_grid(lay, lambda rs: _median_or_none(r.export_s for r in rs)),
        peak_rss_mb=_grid(lay, lambda rs: _median_or_none(r.export_peak_rss_mb for r in rs)),
    )


def plot_export_cost(data: ExportCostData, path: Path) -> Path:
    fig = _figure(11.0, _bar_height(len(data.rows), len(data.series)))
    time_ax, mem_ax = fig.subplots(1, 2, sharey=True)
    _grouped_barh(time_ax, data.rows, data.series, data.export_s)
    _grouped_barh(mem_ax, data.rows, data.series, data.peak_rss_mb)
    _axis_scale(time_ax, [v for line in data.export_s for v in line], "export time (s)")
    _axis_scale(mem_ax, [v for line in data.peak_rss_mb for v in line], "export peak RSS (MiB)")
    time_ax.set_title("Export time", fontsize=10)
    mem_ax.set_title("Export peak memory (RSS above baseline)", fontsize=10)
    fig.suptitle(
        "How costly is export? (median over opsets; —: not measured, 0: zero)", fontsize=11
    )
    _series_legend(fig, data.series)
    return _save(fig, path)


# == 3. latency and speedup ====================================================================


@dataclass(frozen=True)
class LatencyData:
    """How fast is the ONNX model in ORT against eager PyTorch, per model and exporter?

    Each exporter is shown at its highest opset with a latency (that opset is in
    `opsets`); the spread is p10..p90 of the raw samples. The speedup spread divides the
    cell's eager p50 by the ORT p90 and p10.
    """

    rows: tuple[str, ...]
    series: tuple[str, ...]
    opsets: tuple[tuple[int | None, ...], ...]  # [row][series]
    ort_ms: tuple[tuple[Spread | None, ...], ...]
    eager_ms: tuple[Spread | None, ...]  # [row]
    speedup: tuple[tuple[Spread | None, ...], ...]

    @property
    def is_empty(self) -> bool:
        return all(s is None for line in self.ort_ms for s in line)


def _latest_timed(records: Sequence[Record]) -> Record | None:
    timed = [r for r in records if r.ort_latency_ms is not None]
    return max(timed, key=lambda r: r.opset) if timed else None


def _speedup_spread(record: Record | None) -> Spread | None:
    if record is None or record.eager_latency_ms is None:
        return None
    ort = spread(record.ort_latency_ms)
    if ort is None or ort.p10 <= 0:
        return None
    eager = record.eager_latency_ms.p50
    return Spread(eager / ort.p90, eager / ort.p50, eager / ort.p10)


def latency_data(records: Sequence[Record]) -> LatencyData:
    lay = layout(records)
    chosen = _grid(lay, _latest_timed)
    eager_rows = [
        next((spread(r.eager_latency_ms) for r in line if r and r.eager_latency_ms), None)
        for line in chosen
    ]
    return LatencyData(
        rows=tuple(lay.row_label(r) for r in lay.rows),
        series=lay.series(),
        opsets=tuple(tuple(r.opset if r else None for r in line) for line in chosen),
        ort_ms=tuple(
            tuple(spread(r.ort_latency_ms) if r else None for r in line) for line in chosen
        ),
        eager_ms=tuple(eager_rows),
        speedup=tuple(tuple(_speedup_spread(r) for r in line) for line in chosen),
    )


def plot_latency(data: LatencyData, path: Path) -> Path:
    fig = _figure(11.0, _bar_height(len(data.rows), len(data.series) + 1))
    lat_ax, speed_ax = fig.subplots(1, 2, sharey=True)
    names = ("eager PyTorch", *data.series)
    latency = [(eager, *line) for eager, line in zip(data.eager_ms, data.ort_ms, strict=True)]
    _grouped_barh(lat_ax, data.rows, names, latency, colours=(EAGER_COLOUR, *SERIES_COLOURS))
    _grouped_barh(speed_ax, data.rows, data.series, data.speedup, first_slot=1)
    _axis_scale(lat_ax, _spread_values(latency), "latency p50 (ms), bars: p10–p90")
    _axis_scale(speed_ax, _spread_values(data.speedup), "speedup = eager p50 / ORT p50 (×)")
    speed_ax.axvline(1.0, color="black", linewidth=0.8)
    lat_ax.set_title("Latency: eager vs ONNX Runtime", fontsize=10)
    speed_ax.set_title("Speedup of ORT over eager (>1: ORT faster)", fontsize=10)
    fig.suptitle(
        "How fast is the exported model? (each exporter at its highest timed opset)", fontsize=11
    )
    _series_legend(fig, names, colours=(EAGER_COLOUR, *SERIES_COLOURS))
    return _save(fig, path)


def _spread_values(grid: Sequence[Sequence[Spread | None]]) -> list[float]:
    return [v for line in grid for s in line if s for v in (s.p10, s.p90)]


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
    base = {
        (r.model, r.dynamic): r.ort_latency_ms.p50 for r in by_opset[reference] if r.ort_latency_ms
    }
    ratios = [
        r.ort_latency_ms.p50 / base[(r.model, r.dynamic)]
        for r in by_opset[opset]
        if r.ort_latency_ms and base.get((r.model, r.dynamic))
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


def plot_opset_effect(
    data: OpsetEffectData, path: Path, *, band: float = DEFAULT_THRESHOLD
) -> Path:
    fig = _figure(11.0, 4.6)
    rate_ax, lat_ax = fig.subplots(1, 2, sharex=True)
    for k, s in enumerate(data.series):
        style = _series_style(k)
        _line(rate_ax, s.opsets, s.pass_rate, label=s.series, **style)
        label = f"{s.series} (vs opset {s.reference_opset})"
        _line(lat_ax, s.opsets, s.relative_latency, label=label, **style)
    rate_ax.set_ylim(-5, 105)
    rate_ax.set_ylabel("cells that work (% of attempted)")
    rate_ax.set_title("Pass rate by opset", fontsize=10)
    _relative_axis(lat_ax, band)
    opsets = sorted({o for s in data.series for o in s.opsets})
    for ax in (rate_ax, lat_ax):
        ax.set_xticks(opsets)
        ax.set_xlabel("requested opset")
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    fig.suptitle("Does the opset matter?", fontsize=11)
    return _save(fig, path)


def _relative_axis(ax: Axes, band: float) -> None:
    """A ratio axis around 1 that always shows the noise band, so 1% wiggles look small."""
    ax.axhspan(1 - band, 1 + band, color="#E5E5E5", zorder=0, label=f"±{band:.0%} noise band")
    ax.axhline(1.0, color="black", linewidth=0.8)
    low, high = ax.get_ylim()
    ax.set_ylim(min(low, 1 - 1.5 * band), max(high, 1 + 1.5 * band))
    ax.set_ylabel("ORT p50 / p50 at the exporter's lowest opset\n(median over models)")
    ax.set_title("Latency change by opset (<1: faster)", fontsize=10)


_MARKERS = (("o", 9.0, "-"), ("s", 7.0, "--"), ("^", 6.0, ":"), ("D", 4.5, "-."))


def _series_style(k: int) -> dict[str, Any]:
    """Colour, marker, size and dash per series: identical values stay visible, nested."""
    marker, size, dash = _MARKERS[k % len(_MARKERS)]
    return {
        "colour": SERIES_COLOURS[k % len(SERIES_COLOURS)],
        "marker": marker,
        "size": size,
        "dash": dash,
    }


def _line(
    ax: Axes,
    xs: Sequence[int],
    ys: Sequence[float | None],
    colour: str,
    label: str,
    *,
    marker: str = "o",
    size: float = 6.0,
    dash: str = "-",
) -> None:
    points = [(x, y) for x, y in zip(xs, ys, strict=True) if y is not None]
    if points:
        px, py = zip(*points, strict=True)
        ax.plot(px, py, marker=marker, markersize=size, linestyle=dash, color=colour, label=label)


# == 5. op coverage ============================================================================

COVERAGE_STATES = {
    "covered": ("in a successful export", "#009E73"),
    "failed_only": ("only in failed exports", "#E69F00"),
    "unsupported": ("reported unsupported", "#D55E00"),
}
_EXPORT_FAILURES = {
    "export_failed",
    "timeout",
    "crashed",
    "oom",
    "not_attempted",
    "harness_error",
    "skipped",
}
_EXPORT_STAGES = {"build", "reference", "capture", "translate", "optimize", "save"}


@dataclass(frozen=True)
class CoverageData:
    """Which ATen ops does each exporter@opset translate? Problem ops first; ops are
    named by packet (`aten.add`, not `aten.add.Tensor`), see `op_packet`."""

    ops: tuple[str, ...]
    columns: tuple[str, ...]
    state: tuple[tuple[str | None, ...], ...]  # [op][column]: a COVERAGE_STATES key or None

    @property
    def is_empty(self) -> bool:
        return not self.ops


def _exported(record: Record) -> bool:
    return record.status not in _EXPORT_FAILURES and record.stage not in _EXPORT_STAGES


def op_packet(name: str) -> str:
    """'aten.add.Tensor' -> 'aten.add' ('aten::add' too): TorchScript graphs name no
    overloads, so rows line up across exporters only at the packet level."""
    parts = name.replace("::", ".").split(".")
    return ".".join(parts[:2]) if len(parts) > 2 else ".".join(parts)


def _coverage_column(records: Sequence[Record]) -> dict[str, str]:
    state: dict[str, str] = {}
    for r in records:
        for op in map(op_packet, r.aten_ops or {}):
            if _exported(r):
                state[op] = "covered"
            else:
                state.setdefault(op, "failed_only")
    for r in records:
        for op in map(op_packet, r.unsupported_ops or ()):
            state[op] = "unsupported"
    return state


def coverage_data(records: Sequence[Record]) -> CoverageData:
    if not any(r.aten_ops for r in records):
        return CoverageData((), (), ())
    lay = layout(records)
    by_column: dict[Column, list[Record]] = defaultdict(list)
    for (_, column), r in lay.cells.items():
        if r.aten_ops or r.unsupported_ops:
            by_column[column].append(r)
    columns = [c for c in lay.columns if c in by_column]
    states = [_coverage_column(by_column[c]) for c in columns]
    rank = {"unsupported": 0, "failed_only": 1, "covered": 2}
    ops = sorted(
        {op for s in states for op in s},
        key=lambda op: (min(rank[s[op]] for s in states if op in s), op),
    )
    return CoverageData(
        ops=tuple(ops),
        columns=tuple(lay.column_label(c) for c in columns),
        state=tuple(tuple(s.get(op) for s in states) for op in ops),
    )


def plot_coverage(data: CoverageData, path: Path) -> Path:
    fig = _figure(max(7.0, 3.5 + 0.8 * len(data.columns)), 2.2 + 0.17 * len(data.ops))
    ax = fig.add_subplot()
    colours = [[COVERAGE_STATES[s][1] if s else "#F2F2F2" for s in line] for line in data.state]
    _heat_table(ax, colours, data.ops, data.columns, fontsize=7)
    present = {s for line in data.state for s in line if s}
    handles = [
        (COVERAGE_STATES[k][0], COVERAGE_STATES[k][1]) for k in COVERAGE_STATES if k in present
    ]
    _patch_legend(fig, [*handles, ("not seen", "#F2F2F2")])
    ax.set_title(
        f"Which ATen ops does each exporter translate?\n{len(data.ops)} ops seen in the captured graphs; problem ops first",
        fontsize=10,
    )
    return _save(fig, path)


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
        if b and c and b.ort_latency_ms and c.ort_latency_ms and b.ort_latency_ms.p50 > 0:
            ratio = c.ort_latency_ms.p50 / b.ort_latency_ms.p50
            points.append(
                RatioPoint(
                    label,
                    b.ort_latency_ms.p50,
                    c.ort_latency_ms.p50,
                    ratio,
                    _verdict(ratio, threshold),
                )
            )
        else:
            unmatched.append(label)
    return ComparisonData(
        baseline_run=baseline[0].run_id if baseline else "",
        candidate_run=candidate[0].run_id if candidate else "",
        threshold=threshold,
        points=tuple(sorted(points, key=lambda p: (-p.ratio, p.cell))),
        unmatched=tuple(unmatched),
    )


MAX_COMPARISON_ROWS = 60  # beyond that, cells within the band are counted, not drawn


def _drawn_points(data: ComparisonData) -> list[RatioPoint]:
    if len(data.points) <= MAX_COMPARISON_ROWS:
        return list(data.points)
    return [p for p in data.points if p.verdict != "within"]


def plot_comparison(data: ComparisonData, path: Path) -> Path:
    points = _drawn_points(data)
    fig = _figure(9.0, 2.4 + 0.17 * max(len(points), 3))
    ax = fig.add_subplot()
    ax.axvspan(1 - data.threshold, 1 + data.threshold, color="#E5E5E5", zorder=0)
    ax.axvline(1.0, color="black", linewidth=0.8)
    for y, p in enumerate(points):
        colour, marker = _VERDICT_STYLE[p.verdict]
        ax.hlines(y, 1.0, p.ratio, color=colour, linewidth=1)
        ax.scatter([p.ratio], [y], color=colour, marker=marker, s=22, zorder=3)
    ax.set_yticks(range(len(points)), [p.cell for p in points], fontsize=7)
    ax.set_ylim(len(points) - 0.5, -0.5)
    ax.grid(axis="x", alpha=0.3)
    _axis_scale(ax, [p.ratio for p in data.points], "ORT p50 candidate / baseline (×; >1: slower)")
    counts = {v: sum(p.verdict == v for p in data.points) for v in _VERDICT_STYLE}
    _marker_legend(
        fig, [(f"{v} ({counts[v]})", *_VERDICT_STYLE[v]) for v in _VERDICT_STYLE], data.threshold
    )
    hidden = len(data.points) - len(points)
    ax.set_title(
        f"Did ORT latency change? {data.candidate_run} against baseline {data.baseline_run}\n"
        f"{len(data.points)} cells timed in both runs, worst first; {len(data.unmatched)} not timed in both"
        + (f"\n{hidden} cells within the band not drawn" if hidden else ""),
        fontsize=10,
    )
    return _save(fig, path)


_VERDICT_STYLE = {
    "regression": (REGRESSION_COLOUR, "^"),
    "improvement": (IMPROVEMENT_COLOUR, "v"),
    "within": (EAGER_COLOUR, "o"),
}


def _marker_legend(fig: Figure, entries: Sequence[tuple[str, str, str]], threshold: float) -> None:
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles: list[Any] = [
        Line2D([], [], color=colour, marker=marker, linestyle="", label=label)
        for label, colour, marker in entries
    ]
    handles.append(Patch(facecolor="#E5E5E5", label=f"±{threshold:.0%} noise band"))
    fig.legend(
        handles=handles, loc="outside lower center", ncols=len(handles), fontsize=8, frameon=False
    )


# == 7. trends over the run history ============================================================


class RunLike(Protocol):
    """One run of the history (`harness.store.history.HistoryRun` or anything shaped like it)."""

    @property
    def run_id(self) -> str: ...
    @property
    def started(self) -> str: ...
    @property
    def manifest(self) -> Mapping[str, Any]: ...
    @property
    def records(self) -> Sequence[Record]: ...


@dataclass(frozen=True)
class VersionChange:
    index: int  # the first run with the new versions
    text: str  # "torch 2.9.0→2.10.0"


TRACKED_VERSIONS = ("torch", "onnxscript", "onnxruntime")


def _versions(run: RunLike) -> Mapping[str, Any]:
    versions = run.manifest.get("versions") or {}
    return versions.get("base") or {}


def version_changes(runs: Sequence[RunLike]) -> tuple[VersionChange, ...]:
    changes = []
    for i in range(1, len(runs)):
        before, after = _versions(runs[i - 1]), _versions(runs[i])
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
    if not latency.samples:
        return None, latency.p50, None
    s = latency.samples
    return percentile(s, 25), percentile(s, 50), percentile(s, 75)


MIN_BASELINE_RUNS = 3  # fewer earlier runs make no baseline: one noisy night is not a norm


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
    by_run = [{r.cell.key: r.ort_latency_ms for r in run.records} for run in runs]
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


def plot_trends(data: TrendData, path: Path) -> Path:
    ncols = 3 if len(data.series) > 4 else max(1, len(data.series))
    nrows = max(1, math.ceil(len(data.series) / ncols))
    fig = _figure(4.2 * ncols, 1.4 + 2.6 * nrows)
    axes = fig.subplots(nrows, ncols, sharex=True, squeeze=False).ravel()
    for ax, s in zip(axes, data.series, strict=False):
        _trend_panel(ax, s, data)
    for ax in axes[len(data.series) :]:
        ax.set_visible(False)
    for ax in axes[:ncols]:
        _annotate_versions(ax, data.version_changes)
    fig.suptitle(
        f"Is any cell getting slower? ORT p50 per run (ms), q1–q3 shaded; dashed: median of the previous "
        f"{data.window} runs ±{data.threshold:.0%}; ▲ regression\n"
        f"showing {len(data.series)} of {data.total_series} series, regressions first",
        fontsize=10,
    )
    return _save(fig, path)


def _trend_panel(ax: Axes, s: TrendSeries, data: TrendData) -> None:
    xs = range(len(data.runs))
    band = [
        (x, a, b) for x, a, b in zip(xs, s.q1, s.q3, strict=True) if a is not None and b is not None
    ]
    if band:
        bx, lo, hi = zip(*band, strict=True)
        ax.fill_between(bx, lo, hi, color=SERIES_COLOURS[0], alpha=0.25, linewidth=0)
    _line(ax, list(xs), s.median, SERIES_COLOURS[0], "median")
    base = [(x, b) for x, b in zip(xs, s.baseline, strict=True) if b is not None]
    if base:
        bx, bv = zip(*base, strict=True)
        ax.plot(bx, bv, linestyle="--", color="black", linewidth=0.8)
        ax.fill_between(
            bx,
            [v * (1 - data.threshold) for v in bv],
            [v * (1 + data.threshold) for v in bv],
            color="#999999",
            alpha=0.2,
            linewidth=0,
        )
    reg = [(x, m) for x, m, flag in zip(xs, s.median, s.regression, strict=True) if flag and m]
    reg_x, reg_y = [x for x, _ in reg], [m for _, m in reg]
    if reg_x:
        ax.scatter(reg_x, reg_y, marker="^", s=60, color=REGRESSION_COLOUR, zorder=4)
    ax.set_title(s.cell, fontsize=8)
    ax.set_ylabel("ORT p50 (ms)", fontsize=8)
    _run_ticks(ax, data.runs)


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


def plot_suite_trend(data: SuiteTrendData, path: Path) -> Path:
    fig = _figure(max(7.0, 2.5 + 0.35 * len(data.runs)), 6.5)
    rate_ax, speed_ax = fig.subplots(2, 1, sharex=True)
    xs = list(range(len(data.runs)))
    _line(rate_ax, xs, data.pass_rate, SERIES_COLOURS[0], "pass rate")
    _line(speed_ax, xs, data.geomean_speedup, SERIES_COLOURS[2], "geomean speedup")
    rate_ax.set_ylim(-5, 105)
    rate_ax.set_ylabel("cells that work\n(% of attempted)")
    speed_ax.set_ylabel("geomean speedup\n(eager p50 / ORT p50, ×)")
    speed_ax.axhline(1.0, color="black", linewidth=0.8)
    for ax in (rate_ax, speed_ax):
        ax.grid(alpha=0.3)
        _run_ticks(ax, data.runs)
    _annotate_versions(rate_ax, data.version_changes)
    fig.suptitle("Is the suite getting better? Pass rate and geomean speedup per run", fontsize=11)
    return _save(fig, path)


# == the plots of a run, as the report writes them =============================================

PLOT_TITLES = {
    "matrix": "Pass matrix",
    "export_cost": "Export time and memory",
    "latency": "Latency and speedup",
    "opset_effect": "Opset effect",
    "coverage": "ATen op coverage",
    "comparison": "Latency against the baseline run",
    "trends": "Latency trends per cell",
    "suite_trend": "Suite trends",
}


def write_run_plots(
    out_dir: Path, records: Sequence[Record], *, baseline: Sequence[Record] | None = None
) -> dict[str, Path]:
    """Draw every plot of a run that has data into out_dir; returns name -> PNG path."""
    plans: list[tuple[str, Any, Callable[[Any, Path], Path]]] = [
        ("matrix", matrix_data(records), plot_matrix),
        ("export_cost", export_cost_data(records), plot_export_cost),
        ("latency", latency_data(records), plot_latency),
        ("opset_effect", opset_effect_data(records), plot_opset_effect),
        ("coverage", coverage_data(records), plot_coverage),
    ]
    if baseline is not None:
        plans.append(("comparison", comparison_data(baseline, records), plot_comparison))
    return _draw(out_dir, plans)


def write_trend_plots(
    out_dir: Path, runs: Sequence[RunLike], *, threshold: float = DEFAULT_THRESHOLD
) -> dict[str, Path]:
    plans: list[tuple[str, Any, Callable[[Any, Path], Path]]] = [
        ("trends", trend_data(runs, threshold=threshold), plot_trends),
        ("suite_trend", suite_trend_data(runs), plot_suite_trend),
    ]
    return _draw(out_dir, plans)


def _draw(
    out_dir: Path, plans: Sequence[tuple[str, Any, Callable[[Any, Path], Path]]]
) -> dict[str, Path]:
    return {
        name: draw(data, out_dir / f"{name}.png") for name, data, draw in plans if not data.is_empty
    }


# == drawing helpers ===========================================================================


def _figure(width: float, height: float) -> Figure:
    # An object-oriented Figure: PNGs go through the Agg canvas, no pyplot state, no
    # process-wide backend switch that would surprise an interactive caller.
    from matplotlib.figure import Figure

    return Figure(figsize=(min(width, 30.0), min(height, 60.0)), layout="constrained")


def _save(fig: Figure, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI, facecolor="white")
    return path


def _bar_height(rows: int, series: int) -> float:
    return 2.2 + rows * (0.16 + 0.11 * max(series, 1))


def _heat_table(
    ax: Axes,
    colours: Sequence[Sequence[str]],
    rows: Sequence[str],
    columns: Sequence[str],
    *,
    fontsize: int = 8,
) -> None:
    from matplotlib.colors import to_rgb

    ax.imshow(
        [[to_rgb(c) for c in line] for line in colours] or [[to_rgb("#FFFFFF")]], aspect="auto"
    )
    ax.set_xticks(range(len(columns)), columns, rotation=35, ha="left", fontsize=fontsize + 1)
    ax.set_yticks(range(len(rows)), rows, fontsize=fontsize + 1)
    ax.xaxis.tick_top()
    ax.set_xticks([x - 0.5 for x in range(1, len(columns))], minor=True)
    ax.set_yticks([y - 0.5 for y in range(1, len(rows))], minor=True)
    ax.grid(which="minor", color="white", linewidth=1.5)
    ax.tick_params(which="minor", length=0)
    ax.tick_params(which="major", length=0)
    for spine in ax.spines.values():
        spine.set_visible(False)


def _patch_legend(fig: Figure, entries: Sequence[tuple[str, str]]) -> None:
    from matplotlib.patches import Patch

    handles = [
        Patch(facecolor=colour, edgecolor="#999999", label=label) for label, colour in entries
    ]
    fig.legend(
        handles=handles,
        loc="outside lower center",
        ncols=min(len(handles), max(1, int(fig.get_figwidth() // 2.3))),
        fontsize=8,
        frameon=False,
    )


def _status_legend(fig: Figure, classes: Sequence[StatusClass]) -> None:
    _patch_legend(fig, [(c.label, c.colour) for c in classes])


def _series_legend(
    fig: Figure, names: Sequence[str], colours: Sequence[str] = SERIES_COLOURS
) -> None:
    _patch_legend(fig, [(n, colours[k % len(colours)]) for k, n in enumerate(names)])


def _grouped_barh(
    ax: Axes,
    rows: Sequence[str],
    series: Sequence[str],
    values: Sequence[Sequence[float | Spread | None]],
    *,
    colours: Sequence[str] = SERIES_COLOURS,
    first_slot: int = 0,
) -> None:
    """Horizontal bars, one group per row (first row on top), one bar per series.

    A Spread draws its p50 with p10..p90 error bars; a missing value draws a grey '—'.
    `first_slot` leaves room for bars another panel draws first (the eager bar), so
    that an exporter's bars sit at the same height in both panels.
    """
    slots = len(series) + first_slot
    height = 0.8 / max(slots, 1)
    for k in range(len(series)):
        offset = (k + first_slot - (slots - 1) / 2) * height
        for i in range(len(rows)):
            _bar(ax, i + offset, values[i][k], height, colours[k % len(colours)])
    ax.set_yticks(range(len(rows)), rows, fontsize=8)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.grid(axis="x", alpha=0.3)


def _bar(ax: Axes, y: float, value: float | Spread | None, height: float, colour: str) -> None:
    """One bar; '—' at the axis for a missing value, '0' for a zero a log axis cannot draw."""
    p50 = value.p50 if isinstance(value, Spread) else value
    if p50 is None or p50 <= 0:
        mark = "—" if p50 is None else "0"
        transform = ax.get_yaxis_transform()
        ax.text(0.004, y, mark, transform=transform, fontsize=8, va="center", color="#555555")
        return
    if isinstance(value, Spread):
        err = [[max(value.p50 - value.p10, 0)], [max(value.p90 - value.p50, 0)]]
        style = {"elinewidth": 0.8, "capsize": 1.5}
        ax.barh(y, value.p50, height=height, color=colour, xerr=err, error_kw=style)
    else:
        ax.barh(y, p50, height=height, color=colour)


def _axis_scale(ax: Axes, values: Sequence[float | None], label: str) -> None:
    """Log scale where the values span decades, so small models stay readable."""
    if _spans_decades(values):
        from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

        ax.set_xscale("log")
        # Plain numbers at 1-2-5 steps: '2×10²'-style minor labels collide on short ranges.
        positive = [v for v in values if v is not None and v > 0]
        decades = math.log10(max(positive) / min(positive))
        ax.xaxis.set_major_locator(
            LogLocator(base=10, subs=(1.0,) if decades > 3 else (1.0, 2.0, 5.0))
        )
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.xaxis.set_minor_formatter(NullFormatter())
        label += ", log scale"
    ax.set_xlabel(label, fontsize=9)


def _run_ticks(ax: Axes, runs: Sequence[str]) -> None:
    step = max(1, math.ceil(len(runs) / 12))
    ticks = list(range(0, len(runs), step))
    ax.set_xticks(ticks, [runs[i] for i in ticks], rotation=45, ha="right", fontsize=7)
    ax.set_xlim(-0.5, max(len(runs) - 0.5, 0.5))


def _annotate_versions(ax: Axes, changes: Sequence[VersionChange]) -> None:
    for change in changes:
        ax.axvline(change.index - 0.5, color="#555555", linestyle=":", linewidth=1)
        ax.text(
            change.index - 0.45,
            0.98,
            change.text.replace(", ", "\n"),
            transform=ax.get_xaxis_transform(),
            fontsize=6,
            va="top",
            color="#333333",
            bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.8, "pad": 1},
        )
