"""The report's section on transformers' own exporter (a run with `dynamo` and
`transformers` cells): per model, the bare dynamo call beside transformers' exporter, and
how many models each works for alone. Where only transformers' exporter works, one of its
patches or fixes around torch.export and torch.onnx is doing what the bare call cannot:
the exporters' known bugs, as a downstream library works around them."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import replace

from harness.report.document import Section, Text, sub, table
from harness.report.layout import unique_cells
from harness.store.records import Record

BARE, HF = "dynamo", "transformers"
OUTCOMES = ("both", f"only {HF}", f"only {BARE}", "neither")


def _outcome(bare: Record, hf: Record) -> str:
    works = (bare.status.exported, hf.status.exported)
    return {
        (True, True): "both",
        (False, True): f"only {HF}",
        (True, False): f"only {BARE}",
    }.get(works, "neither")


def _pairs(records: Sequence[Record]) -> list[tuple[Record, Record]]:
    """The (bare dynamo, transformers) records of each cell both exporters ran."""
    by_cell = {r.cell: r for r in records}
    pairs = []
    for hf in sorted((r for r in records if r.exporter == HF), key=lambda r: r.cell):
        bare = by_cell.get(replace(hf.cell, exporter=BARE))
        if bare is not None and hf.status.applies and bare.status.applies:
            pairs.append((bare, hf))
    return pairs


def hf_section(records: Sequence[Record]) -> Section | None:
    """None for a run without both exporters on the same cells."""
    pairs = _pairs(unique_cells(records))
    if not pairs:
        return None
    counts = Counter(_outcome(bare, hf) for bare, hf in pairs)
    summary = table(("outcome", "cells"), [(Text(o), Text(str(counts[o]))) for o in OUTCOMES])
    differ = [(bare, hf) for bare, hf in pairs if bare.status != hf.status]
    rows = [
        (
            Text(hf.cell.label().replace(f" {HF}@", " @")),
            Text(bare.status.value),
            Text(hf.status.value),
        )
        for bare, hf in differ
    ]
    detail = table(("cell", BARE, HF), rows, noun="cells") if rows else None
    return sub("transformers' exporter against the bare dynamo call", summary, detail)
