"""The report's section on generation token by token (harness.cell.generation): per
exporter, how many generative cells generate eager's 16 greedy tokens in ORT; per model,
each exporter's status, token agreement and (transformers' exporter) its components'
verdicts."""

from __future__ import annotations

from collections.abc import Sequence

from harness.report.document import Section, Table, Text, sub, table
from harness.report.layout import unique_cells
from harness.store.records import Record
from harness.store.ways import tokens_text


def _components_text(r: Record) -> str:
    parts = r.numerics.components or {}
    return ", ".join(f"{name} {'ok' if c.ok else 'differs'}" for name, c in parts.items()) or "-"


def _checked(r: Record) -> bool:
    return r.numerics.generation is not None or r.numerics.components is not None


def tokens_section(records: Sequence[Record]) -> Section | None:
    """None for a run without generative cells that got as far as generating."""
    cells = unique_cells(records)
    generative = [r for r in cells if _checked(r)]
    if not generative:
        return None
    exporters = sorted({r.exporter for r in generative})
    summary_rows = []
    for exporter in exporters:
        mine = [r for r in generative if r.exporter == exporter and r.numerics.generation]
        same = sum(1 for r in mine if r.numerics.generation and r.numerics.generation.ok)
        summary_rows.append((Text(exporter), Text(str(len(mine))), Text(str(same))))
    summary = table(("exporter", "cells generating", "eager's tokens"), summary_rows)
    return sub("Generation, token by token", summary, _per_model(cells, generative, exporters))


def _per_model(
    cells: Sequence[Record], generative: Sequence[Record], exporters: Sequence[str]
) -> Table:
    """One row per generative cell (its exporter left out of the label), each exporter's
    status and tokens beside each other."""
    by_cell = {r.cell: r for r in cells}
    keys = sorted({r.cell.replace(exporter="") for r in generative})
    headers = ["cell"]
    for exporter in exporters:
        headers += [exporter, f"{exporter} tokens"]
    headers.append("components")
    rows = []
    for key in keys:
        row = [Text(key.label().replace(" @", " ").replace("  ", " "))]
        components = "-"
        for exporter in exporters:
            r = by_cell.get(key.replace(exporter=exporter))
            row += [Text(r.status.value, status=r.status) if r else Text("-")]
            row += [Text(tokens_text(r.numerics.generation) if r else "-")]
            if r is not None and r.numerics.components is not None:
                components = _components_text(r)
        rows.append((*row, Text(components)))
    return table(headers, rows, noun="cells")
