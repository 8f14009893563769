"""The report's ORT-optimisation section (a run with more than the default session): per
exporter, dtype and optimisation, how many cells pass, how many an optimizer broke (and
which), the fused ops that appeared, and the latency against the same cell's graph as
exported (`none`); then the cells whose numbers an optimisation changed."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from harness.report.document import Section, Table, Text, fmt, sub, table
from harness.report.layout import unique_cells
from harness.report.precision import worst_abs
from harness.stats import median
from harness.store.records import Cell, OrtOpt, Record

HEADERS = (
    "exporter",
    "dtype",
    "ORT optimisation",
    "cells",
    "pass",
    "broken by an optimizer",
    "fused ops",
    "speedup over none (median)",
)


def _speedups(records: Sequence[Record], by_cell: dict[Cell, Record]) -> list[float]:
    """This cell's ORT p50 against its `none` twin's (above 1: the optimisation is faster)."""
    found = []
    for r in records:
        twin = by_cell.get(r.cell.replace(ort_opt=OrtOpt.NONE))
        if twin and twin.ort.latency and r.ort.latency and r.ort.latency.p50 > 0:
            found.append(twin.ort.latency.p50 / r.ort.latency.p50)
    return found


def _fused_text(records: Sequence[Record]) -> str:
    total: Counter[str] = Counter()
    for r in records:
        total.update(r.ort.fused_ops or {})
    return ", ".join(f"{op} {n}" for op, n in total.most_common(4)) or "—"


def _row(
    key: tuple[str, str, str], records: Sequence[Record], by_cell: dict[Cell, Record]
) -> tuple[Text, ...]:
    speedups = _speedups(records, by_cell)
    values = (
        *key,
        str(len(records)),
        str(sum(r.status.exported for r in records)),
        str(sum(r.ort.broken_by is not None for r in records)),
        _fused_text(records),
        fmt(median(speedups) if speedups else None, "×"),
    )
    return tuple(Text(v) for v in values)


def counts_table(records: Sequence[Record]) -> Table:
    by_cell = {r.cell: r for r in records}
    groups: dict[tuple[str, str, str], list[Record]] = {}
    for r in records:
        groups.setdefault((r.exporter, r.dtype.value, r.ort_opt.value), []).append(r)
    rows = [_row(k, rs, by_cell) for k, rs in sorted(groups.items())]
    return table(HEADERS, rows)


def broken_table(records: Sequence[Record]) -> Table | None:
    broken = [r for r in records if r.ort.broken_by is not None]
    if not broken:
        return None
    rows = [
        (
            Text(r.cell.label()),
            Text(r.ort.broken_by or ""),
            Text(worst_abs(r.numerics.checks)),
            Text(r.status.value),
        )
        for r in broken
    ]
    headers = ("cell", "the optimizer whose removal restores the numbers", "max abs", "status")
    return table(headers, rows, noun="cells")


def ort_opt_section(records: Sequence[Record]) -> Section | None:
    """None for a run whose cells all ran in a default session."""
    cells = unique_cells(records)
    if all(r.ort_opt is OrtOpt.DEFAULT for r in cells):
        return None
    return sub("ORT optimisations", counts_table(cells), broken_table(cells))
