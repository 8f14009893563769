"""Generation-shaped runs in the report (the `transformers-decode` suite): cells timed at
named shapes (a zoo entry's `latency_shapes`: one decode step after a past, a prefill of a
prompt), eager against ONNX Runtime; and, in a run with several export-time patches,
whether each model works with the plain call, only patched (with which patch), or not at
all."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from functools import partial

from harness.report.data import MAX_BAR_ROWS, LatencyData, Spread, spread
from harness.report.document import Image, Section, Table, Text, fmt, sub, table
from harness.report.layout import Layout, RowKey, layout
from harness.report.outcomes import grid_table
from harness.store.records import NO_PATCH, Record, ShapeLatency

TITLE = (
    "How fast is one generation step? Per named shape (a decode step after a past, a"
    " prefill of a prompt): eager vs ONNX Runtime"
)


def timed_shapes(records: Sequence[Record]) -> list[str]:
    """The named shapes the run's cells were timed at, in the order they appear."""
    return list(dict.fromkeys(k for r in records for k in (r.shape_latency or {})))


def _at(record: Record | None, shape: str) -> ShapeLatency | None:
    return (record.shape_latency or {}).get(shape) if record is not None else None


def _speedup(timed: ShapeLatency | None) -> Spread | None:
    ort = spread(timed.ort_latency_ms) if timed else None
    if timed is None or ort is None or ort.p10 <= 0:
        return None
    eager = timed.eager_latency_ms.p50
    return Spread(eager / ort.p90, eager / ort.p50, eager / ort.p10)


def _series_record(lay: Layout, row: RowKey, series: str) -> Record | None:
    """The row's cell of one series with named-shape latencies, at its highest opset."""
    cells = [
        r
        for c in lay.columns
        if lay.series_label(c) == series and (r := lay.record(row, c)) and r.shape_latency
    ]
    return max(cells, key=lambda r: r.opset) if cells else None


def generation_latency_data(
    records: Sequence[Record], *, max_rows: int = MAX_BAR_ROWS
) -> LatencyData:
    """One bar row per (model, named shape): eager's latency there, and each exporter's ORT
    latency and speedup. Above `max_rows`, the models where ORT helps least at the first
    shape come first."""
    lay, shapes = layout(records), timed_shapes(records)
    series = lay.series()
    timed_rows = [row for row in lay.rows if any(r.shape_latency for r in lay.row_records(row))]

    def least_speedup(row: RowKey) -> float:
        found = [s.speedup for r in lay.row_records(row) if (s := _at(r, shapes[0])) and s.speedup]
        return min(found, default=float("inf"))

    per_model = max(1, max_rows // max(len(shapes), 1))
    rows = timed_rows if len(timed_rows) <= per_model else sorted(timed_rows, key=least_speedup)
    rows = rows[:per_model]
    chosen = [[_series_record(lay, row, s) for s in series] for row in rows]
    labels, ort, eager, speedup = [], [], [], []
    for row, line in zip(rows, chosen, strict=True):
        for shape in shapes:
            at = [_at(r, shape) for r in line]
            labels.append(f"{lay.row_label(row)} · {shape}")
            ort.append(tuple(spread(a.ort_latency_ms) if a else None for a in at))
            eager.append(next((spread(a.eager_latency_ms) for a in at if a), None))
            speedup.append(tuple(_speedup(a) for a in at))
    return LatencyData(
        rows=tuple(labels),
        series=series,
        opsets=tuple(
            tuple(r.opset if r else None for r in line) for line in chosen for _ in shapes
        ),
        ort_ms=tuple(ort),
        eager_ms=tuple(eager),
        speedup=tuple(speedup),
        omitted=len(timed_rows) - len(rows),
        title=TITLE,
    )


def _shape_text(record: Record, shape: str) -> Text:
    timed = _at(record, shape)
    if timed is None:
        return Text("")
    ort, eager = timed.ort_latency_ms.p50, timed.eager_latency_ms.p50
    return Text(f"{fmt(ort)} / {fmt(eager)} ({fmt(timed.speedup, '×')})")


def generation_section(records: Sequence[Record], image: Image | None) -> Section | None:
    """Per named shape, ORT / eager p50 (ms) and the speedup of every timed cell."""
    shapes = timed_shapes(records)
    if not shapes:
        return None
    lay = layout(records)
    rows = [row for row in lay.rows if any(r.shape_latency for r in lay.row_records(row))]
    sizes = {k: v.sizes for r in records for k, v in (r.shape_latency or {}).items() if v.sizes}
    tables = [
        sub(
            f"{shape} ({', '.join(f'{k} {v}' for k, v in sorted(sizes.get(shape, {}).items()))}):"
            " ORT p50 / eager p50 in ms (speedup)",
            grid_table(lay, partial(_shape_text, shape=shape), rows=rows, noun="models"),
        )
        for shape in shapes
    ]
    return sub("Decode step and prefill", *tables, image)


# -- plain, only patched, or not at all ---------------------------------------------------------


def patch_outcome(records: Sequence[Record]) -> str:
    """What one model's cells of one exporter (one per patch) say: `plain` where the plain
    call works, `only patched: A, B` where only patches make it work, `not at all` where
    nothing does, `not run` where no cell ran."""
    if not any(r.status.applies for r in records):
        return "not run"
    if any(r.patch == NO_PATCH and r.status.exported for r in records):
        return "plain"
    fixed = sorted({r.patch for r in records if r.patch != NO_PATCH and r.status.exported})
    return f"only patched: {', '.join(fixed)}" if fixed else "not at all"


def _outcomes(records: Sequence[Record]) -> dict[tuple[str, str], str]:
    """(model, exporter [variant]) -> its patch outcome."""
    groups: dict[tuple[str, str], list[Record]] = {}
    for r in records:
        series = r.exporter if r.variant == "base" else f"{r.exporter} [{r.variant}]"
        groups.setdefault((r.model, series), []).append(r)
    return {key: patch_outcome(rs) for key, rs in groups.items()}


def patches_section(records: Sequence[Record]) -> Section | None:
    """For a run with patches: per exporter, how many models work plain, only patched, or
    not at all, then model by model."""
    if len({r.patch for r in records}) < 2:
        return None
    outcomes = _outcomes(records)
    series = sorted({s for _, s in outcomes})
    models = sorted({m for m, _ in outcomes})
    counts = {s: Counter(o for (_, t), o in outcomes.items() if t == s) for s in series}
    kinds = sorted({o for c in counts.values() for o in c}, key=_outcome_order)
    summary = table(
        ("outcome", *series), [(Text(k), *(Text(str(counts[s][k])) for s in series)) for k in kinds]
    )
    rows = [(Text(m), *(Text(outcomes.get((m, s), "")) for s in series)) for m in models]
    detail: Table = table(("model", *series), rows, noun="models")
    return sub("Plain, only patched, or not at all", summary, detail)


def _outcome_order(outcome: str) -> tuple[int, str]:
    first = ("plain", "only patched", "not at all", "not run")
    return (next((i for i, k in enumerate(first) if outcome.startswith(k)), len(first)), outcome)
