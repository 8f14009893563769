"""The site's pure core, part two: per cell over nights. The newest night's regressions and
fixes, when each cell last changed, each model's timelines with the compare's noise band,
failure clusters, op coverage, and the cells two channels disagree on."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from harness import stats
from harness.compare.thresholds import Thresholds
from harness.publish.nights import Night, Point, resample
from harness.publish.read import CellResult

NOISE_WINDOW = 10  # the band is drawn from this many previous nights, as compare's history


@dataclass(frozen=True)
class Change:
    """A cell whose status moved between the two newest nights."""

    cell: str
    model: str
    before: str
    after: str
    date: str
    signature: str | None


def changes(before: Night | None, after: Night) -> tuple[list[Change], list[Change]]:
    """(regressions, fixes) of `after` against `before`: a passing cell that stopped
    passing, a failing one that passes now (cells only one night has are neither)."""
    if before is None:
        return [], []
    old = before.cells
    regressions: list[Change] = []
    fixes: list[Change] = []
    for label, r in after.cells.items():
        b = old.get(label)
        if b is None or b.status.passing == r.status.passing:
            continue
        change = Change(label, r.cell.model, b.status, r.status, after.date, r.error_signature)
        (fixes if r.status.passing else regressions).append(change)
    return regressions, fixes


def last_changed(nights: Sequence[Night]) -> dict[str, str]:
    """Each cell of the newest night -> the first night of its current status streak."""
    if not nights:
        return {}
    since: dict[str, str] = {}
    status: dict[str, str] = {}
    for night in nights:
        for label, r in night.cells.items():
            if status.get(label) != r.status:
                since[label] = night.date
            status[label] = r.status
    return {label: since[label] for label in nights[-1].cells}


# -- per model ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Band:
    """The compare's noise band around the median of the previous nights: a value outside
    it is what `harness compare --history` would flag (max(floor, k x robust sigma))."""

    low: float
    high: float


def noise_band(values: Sequence[float], *, floor: float, t: Thresholds) -> Band | None:
    """The band for the next value of `values` (oldest first), or None with too little
    history to estimate the noise from (as compare, then only the floor applies)."""
    window = [v for v in values[-NOISE_WINDOW:] if v > 0]
    if not window:
        return None
    log_thr = stats.noise_log_threshold(
        window, floor=floor, k=t.noise_k, min_changes=t.min_history_changes
    )
    if log_thr is None:
        log_thr = math.log1p(floor)
    centre = stats.median(window)
    return Band(centre / math.exp(log_thr), centre * math.exp(log_thr))


@dataclass(frozen=True)
class SiteMetric:
    """A figure of a cell's timeline: its label, the threshold its noise band starts from
    (a `Thresholds` field) and its value in a result."""

    label: str
    floor: str
    value: Callable[[CellResult], float | None]
    optional: bool = False  # shown only for the cells that have it


SITE_METRICS = (
    SiteMetric("export s", "export_time_floor", lambda r: r.export_s),
    SiteMetric("export peak RSS MB", "memory_floor", lambda r: r.export_peak_rss_mb),
    SiteMetric("ORT p50 ms", "latency_floor", lambda r: r.ort_p50_ms),
    # real-size models (their weights), CUDA cells (the export's peak on the device) and
    # paired exporters
    SiteMetric(
        "export peak RSS / weights", "memory_floor", lambda r: r.memory_over_weights, optional=True
    ),
    SiteMetric(
        "export peak CUDA MB", "memory_floor", lambda r: r.export_peak_cuda_mb, optional=True
    ),
    SiteMetric(
        "export peak CUDA / weights", "memory_floor", lambda r: r.cuda_over_weights, optional=True
    ),
    SiteMetric(
        "ORT p50 / fastest exporter's", "latency_floor", lambda r: r.vs_fastest, optional=True
    ),
)


@dataclass(frozen=True)
class CellTimeline:
    cell: str
    statuses: list[tuple[str, str]]  # (date, status), resampled to MAX_POINTS nights
    metrics: dict[str, list[Point]]  # by the metric's label
    bands: dict[str, Band | None]
    last: CellResult


Seen = dict[str, list[tuple[str, CellResult]]]  # cell -> (night, result), oldest first


def by_model(nights: Sequence[Night]) -> dict[str, Seen]:
    """model -> its cells' results over the nights (one pass: a model page reads only its own)."""
    out: dict[str, Seen] = defaultdict(lambda: defaultdict(list))
    for night in nights:
        for label, r in night.cells.items():
            out[r.cell.model][label].append((night.date, r))
    return out


def timelines(per_cell: Seen, t: Thresholds) -> list[CellTimeline]:
    """Every cell of a model over the nights: status, export time, memory and latency."""
    out = []
    for label in sorted(per_cell):
        seen = per_cell[label]
        step = max(1, math.ceil(len(seen) / 300))
        metrics: dict[str, list[Point]] = {}
        bands: dict[str, Band | None] = {}
        for m in SITE_METRICS:
            points = [Point(d, v) for d, r in seen if (v := m.value(r)) is not None]
            if not points and m.optional:
                continue
            metrics[m.label] = resample(points)
            floor = getattr(t, m.floor)
            bands[m.label] = noise_band([p.value for p in points[:-1]], floor=floor, t=t)
        statuses = [(d, str(r.status)) for d, r in seen][::-1][::step][::-1]
        out.append(CellTimeline(label, statuses, metrics, bands, seen[-1][1]))
    return out


# -- failure clusters --------------------------------------------------------------------------


@dataclass(frozen=True)
class Cluster:
    signature: str
    first_seen: str
    counts: list[Point]  # cells with this signature per night (resampled)
    cells: list[str]  # the newest night's cells that hold it
    example: CellResult | None  # a current failing record (for its repro), None if gone


def clusters(nights: Sequence[Night]) -> list[Cluster]:
    """Each failure signature: its count per night, the night it first appeared, the
    newest night's cells holding it; biggest current clusters first."""
    first: dict[str, str] = {}
    counts: dict[str, dict[str, int]] = defaultdict(dict)
    for night in nights:
        for r in night.records:
            if r.status.passing or not r.error_signature:
                continue
            first.setdefault(r.error_signature, night.date)
            per_night = counts[r.error_signature]
            per_night[night.date] = per_night.get(night.date, 0) + 1
    newest = nights[-1].records if nights else ()
    current: dict[str, list[CellResult]] = defaultdict(list)
    for r in newest:
        if not r.status.passing and r.error_signature:
            current[r.error_signature].append(r)
    out = []
    for sig in first:
        series = [Point(n.date, float(counts[sig].get(n.date, 0))) for n in nights]
        held = current.get(sig, [])
        cells = sorted(r.cell.label() for r in held)
        out.append(Cluster(sig, first[sig], resample(series), cells, held[0] if held else None))
    return sorted(out, key=lambda c: (-len(c.cells), c.first_seen, c.signature))


# -- op coverage -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Coverage:
    """The OpInfo cells of the newest night, op x dtype -> status, and the pass rate per
    dtype over nights."""

    ops: list[str]
    dtypes: list[str]
    status: dict[tuple[str, str], str]
    trend: dict[str, list[Point]]


def _opinfo(r: CellResult) -> tuple[str, str] | None:
    return (r.opinfo, r.dtype) if r.opinfo and r.dtype else None


def coverage(nights: Sequence[Night]) -> Coverage:
    trend: dict[str, list[Point]] = defaultdict(list)
    for night in nights:
        by_dtype: dict[str, list[bool]] = defaultdict(list)
        for r in night.records:
            if (key := _opinfo(r)) and r.status.applies:
                by_dtype[key[1]].append(r.status.exported)
        for dtype, passed in by_dtype.items():
            trend[dtype].append(Point(night.date, 100.0 * sum(passed) / len(passed)))
    status = {k: str(r.status) for r in (nights[-1].records if nights else ()) if (k := _opinfo(r))}
    return Coverage(
        sorted({op for op, _ in status}),
        sorted({d for _, d in status}),
        status,
        {d: resample(p) for d, p in sorted(trend.items())},
    )


# -- channels ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Difference:
    cell: str
    model: str
    statuses: dict[str, str | None]  # channel -> status on its newest night (None: no cell)
    graphs: dict[str, str | None]  # channel -> its graph's fingerprint (None: none kept)

    @property
    def status_differs(self) -> bool:
        return len(set(self.statuses.values())) > 1

    @property
    def graph_differs(self) -> bool:
        """Both channels exported a graph, and not the same one: the exporter changed
        what it writes for this cell, whether or not its status did."""
        found = [g for g in self.graphs.values() if g is not None]
        return len(found) == len(self.graphs) and len(set(found)) > 1


def channel_differences(newest: dict[str, Night]) -> list[Difference]:
    """The cells whose status or graph differs between the channels' newest nights (a
    cell one channel lacks counts as a difference of status)."""
    by_channel = {name: night.cells for name, night in newest.items()}
    labels = sorted({label for cells in by_channel.values() for label in cells})
    out = []
    for label in labels:
        found = {name: cells.get(label) for name, cells in by_channel.items()}
        model = next(r.cell.model for r in found.values() if r is not None)
        difference = Difference(
            label,
            model,
            {name: None if r is None else str(r.status) for name, r in found.items()},
            {name: None if r is None else r.graph for name, r in found.items()},
        )
        if difference.status_differs or difference.graph_differs:
            out.append(difference)
    return out
