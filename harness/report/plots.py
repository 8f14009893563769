"""Draw the plots of a run, of a comparison between two runs and of the run history.

Each `plot_*(data, path)` draws the numbers of one `*_data(...)` function
(harness.report.data, harness.report.trends) into a PNG. This is the only module that
imports matplotlib, and only inside the drawing functions, so that the report loads
without it. It draws on `matplotlib.figure.Figure` objects, which render PNGs with the
Agg canvas and touch no pyplot global state, so drawing never switches a caller's backend.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.coverage.matrix import STATE_TEXT
from harness.report.data import (
    DEFAULT_THRESHOLD,
    ComparisonData,
    CoverageData,
    ExportCostData,
    LatencyData,
    MatrixData,
    OpsetEffectData,
    Spread,
)
from harness.report.palette import (
    BAND_COLOUR,
    COVERAGE_COLOURS,
    EAGER_COLOUR,
    IMPROVEMENT_COLOUR,
    NOT_SEEN_COLOUR,
    REGRESSION_COLOUR,
    SERIES_COLOURS,
)
from harness.report.run_plots import run_plot_data
from harness.report.trends import (
    RunLike,
    SuiteTrendData,
    TrendData,
    TrendSeries,
    VersionChange,
    trend_plot_data,
)
from harness.store.files import write_inside
from harness.store.records import Record
from harness.store.status import COLOURS

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

DPI = 110
_LEGEND: dict[str, Any] = {"loc": "outside lower center", "fontsize": 8, "frameon": False}

# == 1. pass matrix ============================================================================


def plot_matrix(data: MatrixData, path: Path) -> Path:
    fig = _figure(max(8.0, 3.0 + 0.95 * len(data.columns)), 2.4 + 0.32 * len(data.rows))
    ax = fig.add_subplot()
    colours = [["#FFFFFF" if s is None else s.colour.fill for s in line] for line in data.status]
    _heat_table(ax, colours, data.rows, data.columns)
    for i, line in enumerate(data.text):
        for j, text in enumerate(line):
            status = data.status[i][j]
            if status is not None:
                ax.text(j, i, text, ha="center", va="center", fontsize=7, color=status.colour.text)
    present = {s.colour for line in data.status for s in line if s}
    _patch_legend(fig, [(c.label, c.fill) for c in COLOURS if c in present])
    title = (
        "Does each model export and run correctly?\n"
        "cell text: status or failing stage; 'opset N': the opset actually saved"
    )
    if data.omitted_passing or data.omitted_failing:
        title += (
            f"\nrows with a failure, worst first; not drawn: {data.omitted_passing} rows that pass"
        )
        title += f", {data.omitted_failing} more with a failure" if data.omitted_failing else ""
    ax.set_title(title, fontsize=10)
    return _save(fig, path)


# == 2. export time and memory =================================================================


def plot_export_cost(data: ExportCostData, path: Path) -> Path:
    fig = _figure(11.0, _bar_height(len(data.rows), len(data.series)))
    time_ax, mem_ax = fig.subplots(1, 2, sharey=True)
    _grouped_barh(time_ax, data.rows, data.series, data.export_s)
    _grouped_barh(mem_ax, data.rows, data.series, data.peak_rss_mb)
    _axis_scale(time_ax, [v for line in data.export_s for v in line], "export time (s)")
    _axis_scale(mem_ax, [v for line in data.peak_rss_mb for v in line], "export peak RSS (MiB)")
    time_ax.set_title("Export time", fontsize=10)
    mem_ax.set_title("Export peak memory (RSS above baseline)", fontsize=10)
    title = "How costly is export? (median over opsets; —: not measured, 0: zero)"
    if data.omitted:
        title += f"\nthe {len(data.rows)} slowest exports; {data.omitted} more rows not drawn"
    fig.suptitle(title, fontsize=11)
    _series_legend(fig, data.series)
    return _save(fig, path)


# == 3. latency and speedup ====================================================================


def plot_latency(data: LatencyData, path: Path) -> Path:
    fig = _figure(11.0, _bar_height(len(data.rows), len(data.series) + 1))
    lat_ax, speed_ax = fig.subplots(1, 2, sharey=True)
    names = ("eager PyTorch", *data.series)
    colours = (EAGER_COLOUR, *SERIES_COLOURS)
    latency = [(eager, *line) for eager, line in zip(data.eager_ms, data.ort_ms, strict=True)]
    _grouped_barh(lat_ax, data.rows, names, latency, colours=colours)
    _grouped_barh(speed_ax, data.rows, data.series, data.speedup, first_slot=1)
    _axis_scale(lat_ax, _spread_values(latency), "latency p50 (ms), bars: p10–p90")
    _axis_scale(speed_ax, _spread_values(data.speedup), "speedup = eager p50 / ORT p50 (×)")
    speed_ax.axvline(1.0, color="black", linewidth=0.8)
    lat_ax.set_title("Latency: eager vs ONNX Runtime", fontsize=10)
    speed_ax.set_title("Speedup of ORT over eager (>1: ORT faster)", fontsize=10)
    title = data.title
    if data.omitted:
        title += f"\nthe {len(data.rows)} smallest speedups; {data.omitted} more rows not drawn"
    fig.suptitle(title, fontsize=11)
    _series_legend(fig, names, colours=colours)
    return _save(fig, path)


def _spread_values(grid: Sequence[Sequence[Spread | None]]) -> list[float]:
    return [v for line in grid for s in line if s for v in (s.p10, s.p90)]


# == 4. opset effect ===========================================================================


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
    ax.axhspan(1 - band, 1 + band, color=BAND_COLOUR, zorder=0, label=f"±{band:.0%} noise band")
    ax.axhline(1.0, color="black", linewidth=0.8)
    low, high = ax.get_ylim()
    ax.set_ylim(min(low, 1 - 1.5 * band), max(high, 1 + 1.5 * band))
    ax.set_ylabel("ORT p50 / p50 at the exporter's lowest opset\n(median over models)")
    ax.set_title("Latency change by opset (<1: faster)", fontsize=10)


_MARKERS = (("o", 9.0, "-"), ("s", 7.0, "--"), ("^", 6.0, ":"), ("D", 4.5, "-."))


def _series_style(k: int) -> dict[str, Any]:
    """Colour, marker, size and dash per series: identical values stay visible, nested."""
    marker, size, dash = _MARKERS[k % len(_MARKERS)]
    colour = SERIES_COLOURS[k % len(SERIES_COLOURS)]
    return {"colour": colour, "marker": marker, "size": size, "dash": dash}


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


def plot_coverage(data: CoverageData, path: Path) -> Path:
    fig = _figure(max(7.0, 3.5 + 0.8 * len(data.columns)), 2.2 + 0.17 * len(data.ops))
    ax = fig.add_subplot()
    colours = [[COVERAGE_COLOURS[s] if s else NOT_SEEN_COLOUR for s in line] for line in data.state]
    _heat_table(ax, colours, data.ops, data.columns, fontsize=7)
    for i, line in enumerate(data.text or ()):  # OpInfos: samples matched of those run
        for j, text in enumerate(line):
            if text:
                ax.text(j, i, text, ha="center", va="center", fontsize=6)
    present = {s for line in data.state for s in line if s}
    entries = [(STATE_TEXT[s], fill) for s, fill in COVERAGE_COLOURS.items() if s in present]
    _patch_legend(fig, [*entries, ("not in that column's cells", NOT_SEEN_COLOUR)])
    title = (
        f"Which {data.what} does each exporter handle?\n{len(data.ops)} drawn, problem ops first"
    )
    if data.omitted:
        title += f"; {data.omitted} more not drawn ({data.omitted_ok} ok in every column)"
    ax.set_title(title, fontsize=10)
    return _save(fig, path)


# == 6. comparison of two runs =================================================================

_VERDICT_STYLE = {
    "regression": (REGRESSION_COLOUR, "^"),
    "improvement": (IMPROVEMENT_COLOUR, "v"),
    "within": (EAGER_COLOUR, "o"),
}


def plot_comparison(data: ComparisonData, path: Path) -> Path:
    points = data.drawn()
    fig = _figure(9.0, 2.4 + 0.17 * max(len(points), 3))
    ax = fig.add_subplot()
    ax.axvspan(1 - data.threshold, 1 + data.threshold, color=BAND_COLOUR, zorder=0)
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
    entries = [(f"{v} ({counts[v]})", *_VERDICT_STYLE[v]) for v in _VERDICT_STYLE]
    _marker_legend(fig, entries, data.threshold)
    hidden = len(data.points) - len(points)
    ax.set_title(
        f"Did ORT latency change? {data.candidate_run} against baseline {data.baseline_run}\n"
        f"{len(data.points)} cells timed in both runs, worst first; {len(data.unmatched)} not timed in both"
        + (f"\n{hidden} cells within the band not drawn" if hidden else ""),
        fontsize=10,
    )
    return _save(fig, path)


def _marker_legend(fig: Figure, entries: Sequence[tuple[str, str, str]], threshold: float) -> None:
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles: list[Any] = [
        Line2D([], [], color=colour, marker=marker, linestyle="", label=label)
        for label, colour, marker in entries
    ]
    handles.append(Patch(facecolor=BAND_COLOUR, label=f"±{threshold:.0%} noise band"))
    fig.legend(handles=handles, ncols=len(handles), **_LEGEND)


# == 7. trends over the run history ============================================================


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
    xs = list(range(len(data.runs)))
    band = [(x, a, b) for x, a, b in zip(xs, s.q1, s.q3, strict=True) if None not in (a, b)]
    if band:
        bx, lo, hi = zip(*band, strict=True)
        ax.fill_between(bx, lo, hi, color=SERIES_COLOURS[0], alpha=0.25, linewidth=0)
    _line(ax, xs, s.median, SERIES_COLOURS[0], "median")
    base = [(x, b) for x, b in zip(xs, s.baseline, strict=True) if b is not None]
    if base:
        bx, bv = zip(*base, strict=True)
        ax.plot(bx, bv, linestyle="--", color="black", linewidth=0.8)
        low = [v * (1 - data.threshold) for v in bv]
        high = [v * (1 + data.threshold) for v in bv]
        ax.fill_between(bx, low, high, color="#999999", alpha=0.2, linewidth=0)
    reg = [(x, m) for x, m, flag in zip(xs, s.median, s.regression, strict=True) if flag and m]
    if reg:
        reg_x, reg_y = zip(*reg, strict=True)
        ax.scatter(reg_x, reg_y, marker="^", s=60, color=REGRESSION_COLOUR, zorder=4)
    ax.set_title(s.cell, fontsize=8)
    ax.set_ylabel("ORT p50 (ms)", fontsize=8)
    _run_ticks(ax, data.runs)


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


# == the plots of a run and of the history, as the report writes them ===========================

DRAW: dict[str, Callable[[Any, Path], Path]] = {
    "matrix": plot_matrix,
    "export_cost": plot_export_cost,
    "latency": plot_latency,
    "opset_effect": plot_opset_effect,
    "coverage": plot_coverage,
    "comparison": plot_comparison,
    "generation_latency": plot_latency,
    "trends": plot_trends,
    "suite_trend": plot_suite_trend,
}


def write_run_plots(
    out_dir: Path, records: Sequence[Record], *, baseline: Sequence[Record] | None = None
) -> dict[str, Path]:
    """Draw every plot of a run that has data into out_dir; returns name -> PNG path."""
    return _draw(out_dir, run_plot_data(records, baseline=baseline))


def write_trend_plots(
    out_dir: Path, runs: Sequence[RunLike], *, threshold: float = DEFAULT_THRESHOLD
) -> dict[str, Path]:
    return _draw(out_dir, trend_plot_data(runs, threshold=threshold))


def _draw(out_dir: Path, plots: Mapping[str, Any]) -> dict[str, Path]:
    return {
        name: DRAW[name](data, out_dir / f"{name}.png")
        for name, data in plots.items()
        if not data.is_empty
    }


# == drawing helpers ===========================================================================


def _figure(width: float, height: float) -> Figure:
    # An object-oriented Figure: PNGs go through the Agg canvas, no pyplot state, no
    # process-wide backend switch that would surprise an interactive caller.
    from matplotlib.figure import Figure

    return Figure(figsize=(min(width, 30.0), min(height, 60.0)), layout="constrained")


def _save(fig: Figure, path: Path) -> Path:
    png: dict[str, Any] = {"format": "png", "dpi": DPI, "facecolor": "white"}
    return write_inside(path.parent, path.name, lambda f: fig.savefig(f, **png))  # no symlink


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

    image = [[to_rgb(c) for c in line] for line in colours]
    ax.imshow(image or [[to_rgb("#FFFFFF")]], aspect="auto")
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

    handles = [Patch(facecolor=fill, edgecolor="#999999", label=label) for label, fill in entries]
    ncols = min(len(handles), max(1, int(fig.get_figwidth() // 2.3)))
    fig.legend(handles=handles, ncols=ncols, **_LEGEND)


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
    """Log scale where the values span decades (20x or more), so small models stay readable."""
    positive = [v for v in values if v is not None and v > 0]
    if positive and max(positive) / min(positive) >= 20.0:
        from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

        ax.set_xscale("log")
        # Plain numbers at 1-2-5 steps: '2×10²'-style minor labels collide on short ranges.
        decades = math.log10(max(positive) / min(positive))
        subs = (1.0,) if decades > 3 else (1.0, 2.0, 5.0)
        ax.xaxis.set_major_locator(LogLocator(base=10, subs=subs))
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
    box = {"facecolor": "white", "edgecolor": "none", "alpha": 0.8, "pad": 1}
    style: dict[str, Any] = {"fontsize": 6, "va": "top", "color": "#333333", "bbox": box}
    for change in changes:
        ax.axvline(change.index - 0.5, color="#555555", linestyle=":", linewidth=1)
        text = change.text.replace(", ", "\n")
        ax.text(change.index - 0.45, 0.98, text, transform=ax.get_xaxis_transform(), **style)
