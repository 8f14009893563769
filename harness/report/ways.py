"""The report's section "Every way to an ONNX model, side by side" (harness.store.ways): per
exporter, for how many architectures it exported, matched eager's numbers, generated
eager's tokens (one prompt, a padded batch, onnxruntime_genai's Generator) and how its
latency compares with the fastest way's; then architecture by architecture, each way's
row. Only in a run whose cells generate (the decode suite, the builders)."""

from __future__ import annotations

from collections.abc import Sequence

from harness.report.document import MISSING, Paragraph, Section, Table, Text, sub, table
from harness.report.layout import unique_cells
from harness.store.records import Record
from harness.store.ways import (
    SHAPES,
    VERDICTS,
    Architecture,
    Way,
    WaySummary,
    label,
    of_records,
    summary,
    tokens_text,
)

TITLE = "Every way to an ONNX model, side by side"
INTRO = (
    "Each architecture that two or more exporters ran, each way's verdicts and figures:"
    " a prefill of 32 tokens and a decode step after 32, ORT p50 in ms with the ratio to"
    " the fastest way's (×1.00 is the fastest; each cell timed on its own, not paired)."
    " transformers' exporter is timed on the kwargs it traced (its own shapes): no ratio."
)
HEADERS = (
    "architecture", "way", "status", "numerics", "tokens", "batched", "Generator",
    "graph KiB", "nodes", "prefill ms", "decode step ms",
)  # fmt: skip


def ways_section(records: Sequence[Record]) -> Section | None:
    """None for a run without generative cells that two exporters ran."""
    cells = unique_cells(records)
    if not any(r.numerics.generation or r.numerics.components for r in cells):
        return None
    found = of_records(cells)
    if not found:
        return None
    return sub(TITLE, Paragraph(INTRO), summary_table(summary(found)), architectures_table(found))


def summary_table(rows: Sequence[WaySummary]) -> Table:
    headers = (
        "way",
        "architectures",
        *map(label, VERDICTS),
        "prefill vs fastest",
        "decode vs fastest",
    )
    body = [
        (
            Text(s.exporter),
            Text(str(s.architectures)),
            *(Text(f"{s.holds[v]}/{s.checked[v]}" if s.checked[v] else MISSING) for v in VERDICTS),
            *(
                Text(f"×{s.median_ratio[k]:.2f}" if k in s.median_ratio else MISSING)
                for k in SHAPES
            ),
        )
        for s in rows
    ]
    return table(headers, body)


def architectures_table(found: Sequence[Architecture]) -> Table:
    rows = []
    for a in found:
        for i, way in enumerate(a.ways):
            rows.append((Text(a.name if i == 0 else ""), *way_cells(way)))
    return table(HEADERS, rows, noun="ways")


def way_cells(way: Way) -> tuple[Text, ...]:
    f = way.facts
    numerics = MISSING if f.numerics is None else ("ok" if f.numerics else "differ")
    return (
        Text(way.exporter),
        Text(f.status.value, status=f.status),
        Text(numerics),
        Text(tokens_text(f.tokens)),
        Text(tokens_text(f.batched)),
        Text(tokens_text(f.genai)),
        Text(MISSING if f.graph_bytes is None else f"{f.graph_bytes / 1024:.0f}"),
        Text(MISSING if f.nodes is None else str(f.nodes)),
        *(Text(latency_text(way, shape)) for shape in SHAPES),
    )


def latency_text(way: Way, shape: str) -> str:
    """'0.045 (×1.00)', '0.210 (own shapes)', '—'."""
    p50 = way.facts.p50_ms.get(shape)
    if p50 is None:
        return MISSING
    if way.facts.own_shapes:
        return f"{p50:.3g} (own shapes)"
    ratio = way.ratio.get(shape)
    return f"{p50:.3g}" + (f" (×{ratio:.2f})" if ratio is not None else "")
