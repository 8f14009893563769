"""The site's page of every way to an ONNX model, side by side (harness.store.ways), for a
suite whose newest night has generative cells that two or more exporters ran: per exporter
its verdict counts and median latency ratios, then architecture by architecture."""

from __future__ import annotations

from collections.abc import Sequence

from harness.publish.html import e, page, status_cell, table
from harness.publish.model import Channel
from harness.publish.read import CellResult
from harness.store.ways import (
    SHAPES,
    VERDICTS,
    Architecture,
    WayFacts,
    label,
    side_by_side,
    summary,
    tokens_text,
)


def facts_of(r: CellResult) -> WayFacts:
    """What the site reads of a cell, as the side by side takes it: numerics from the
    status (the site does not read every output's check)."""
    numerics = True if r.status.exported else False if r.status.wrong_numbers else None
    return WayFacts(
        r.cell,
        r.status,
        r.export_s is not None,
        numerics,
        r.generation,
        r.generations.get("batched"),
        r.generations.get("genai"),
        r.graph_bytes,
        r.nodes,
        dict(r.p50_by_shape),
    )


def architectures(records: Sequence[CellResult]) -> list[Architecture]:
    """The suite's side by side; none where no cell generated."""
    if not any(r.generation is not None for r in records):
        return []
    return side_by_side(facts_of(r) for r in records)


def ways_page(channel: Channel, suite: str, found: Sequence[Architecture]) -> str:
    head = [
        "way",
        "architectures",
        *map(label, VERDICTS),
        "prefill vs fastest",
        "decode vs fastest",
    ]
    rows = [
        f"<tr><th>{e(s.exporter)}</th><td>{s.architectures}</td>"
        + "".join(
            f"<td>{s.holds[v]}/{s.checked[v]}</td>" if s.checked[v] else '<td class="none">—</td>'
            for v in VERDICTS
        )
        + "".join(f"<td>{_ratio(s.median_ratio.get(k))}</td>" for k in SHAPES)
        + "</tr>"
        for s in summary(found)
    ]
    detail = []
    for a in found:
        for i, w in enumerate(a.ways):
            f = w.facts
            cells = [tokens_text(g) for g in (f.tokens, f.batched, f.genai)]
            detail.append(
                f"<tr><th>{e(a.name if i == 0 else '')}</th><td>{e(w.exporter)}</td>"
                + status_cell(f.status.value)
                + "".join(f"<td>{e(c)}</td>" for c in cells)
                + f"<td>{e(f.graph_bytes if f.graph_bytes is not None else '—')}</td>"
                + f"<td>{e(f.nodes if f.nodes is not None else '—')}</td>"
                + "".join(
                    f"<td>{e(_latency(f.p50_ms.get(k), w.ratio.get(k)))}</td>" for k in SHAPES
                )
                + "</tr>"
            )
    intro = (
        "<p>Each architecture that two or more exporters ran in the newest night: each way's"
        " verdicts, graph and ORT p50 of a prefill and of a decode step, with the ratio to"
        " the fastest way's (each cell timed on its own, not paired).</p>"
    )
    columns = ["architecture", "way", "status", "tokens", "batched", "Generator", "graph bytes",
               "nodes", "prefill ms", "decode step ms"]  # fmt: skip
    body = intro + table(head, rows) + table(columns, detail, attrs=' id="ways"')
    return page(f"{suite}: every way side by side ({channel.name})", body, up="../")


def _ratio(value: float | None) -> str:
    return "—" if value is None else f"×{value:.2f}"


def _latency(p50: float | None, ratio: float | None) -> str:
    if p50 is None:
        return "—"
    return f"{p50:.3g}" + (f" (×{ratio:.2f})" if ratio is not None else "")
